"""Chapter 9 in a real browser: the rounding calculator, the lost update and a precision recipe live,
each with bad input refused visibly and nothing injected, and the page's numbers compared with the
same pylib calls in CPython. One shared page (conftest.chapter_fixture); a console error or a request
off 127.0.0.1 fails a test."""

import concurrent.futures
import functools
import math
import re

import numpy as np
import pytest
from playwright.sync_api import expect

from a11y_checks import check_accessibility
from conftest import chapter_fixture, corpus, result, settle_after, settles, wait_settled, widget
from kit_checks import SHOWN_JS, assert_fields_labelled, chart_table, drive_slider, leave_field, python_refuses, refused, screenshot_widget, set_fields

chapter9 = chapter_fixture("09-")

TIMEOUT = 180_000

NASTY = ["", "   ", "NaN", "1e309", "🙂", "<b class=injected>x</b>", "<img src='x' onerror='alert(1)'>"]


def message(w):
    return w.locator('[data-role="message"]').inner_text()


# ---------------------------------------------------------------------------
# The rounding calculator


def round_value(page, raw):
    w = widget(page, "rounding")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    wait_settled(w, ("done", "error"))  # the calculator rounds its default value when it mounts
    before = settles(w)
    w.locator('input[name="value"]').fill(raw)
    w.locator('[data-action="run"]').click()
    return w, wait_settled(w, ("done", "error"), after=before)


ROUNDED = ["0.1", "-3.14159", "65519", "70000", "1e-7", "3e-8", "500", "1e-45", "0"]


def test_rounding_calculator_matches_pylib(chapter9):
    """Each value's sign, exponent, mantissa, regime, stored value and neighbours in every format are
    pylib's, in a table of one row per format."""
    from pylib.systems import precision
    for raw in ROUNDED:
        w, status = round_value(chapter9, raw)
        assert status == "done", raw
        r = result(w)
        assert [f["format"] for f in r["formats"]] == list(precision.FORMATS), raw
        for f in r["formats"]:
            d = precision.decompose(float(raw), f["format"])
            case = f"{raw} in {f['format']}"
            assert (f["sign"], f["exponent"], f["mantissa"], f["regime"]) == (d["sign"], d["exponent"], d["mantissa"], d["regime"]), case
            want = d["stored"]
            if math.isnan(want):
                assert f["stored"] == "nan", case
            elif math.isinf(want):
                assert f["stored"] in ("inf", "-inf"), case
            else:
                assert f["stored"] == want and f["below"] == d["below"] and f["above"] == d["above"], case
        rows, bf16_exponent = w.evaluate("""el => [el.querySelectorAll("tbody.round-format").length,
            [...el.querySelectorAll('tbody[data-format="bf16"] .round-bit[data-part="exponent"]')].map((b) => b.innerText).join("")]""")
        assert rows == len(precision.FORMATS), raw
        assert bf16_exponent == precision.decompose(float(raw), "bf16")["exponent"], raw


def test_rounding_shows_fp16_overflow_and_e4m3_nan(chapter9):
    w, status = round_value(chapter9, "70000")
    assert status == "done"
    assert w.locator('[data-format="fp16"] [data-cell="regime"]').inner_text().startswith("overflow")
    assert w.locator('[data-format="fp8_e4m3"] [data-cell="stored"]').inner_text() == "nan"
    assert w.locator('[data-format="bf16"] [data-cell="regime"]').inner_text() == "normal"


def test_rounding_slider_rounds_its_value(chapter9):
    w, _ = round_value(chapter9, "1")
    # the slider is log10 |value| from -45 to 39 in steps of 0.01: position 3900 is 1e-6
    assert settle_after(w, lambda: w.locator('[data-slider-for="value"]').fill("3900")) == "done"
    assert result(w)["value"] == 1e-6
    fp16 = [f for f in result(w)["formats"] if f["format"] == "fp16"][0]
    assert fp16["regime"] == "subnormal"
    # the decade readout beside the slider follows it (and says where the slider's ends are)
    expect(w.locator('[data-role="decade"]')).to_have_text("10⁻⁶ ≤ |value| < 10⁻⁵ (slider 10⁻⁴⁵ to 10³⁹)")
    assert settle_after(w, lambda: w.locator('[data-slider-for="value"]').fill("8100")) == "done"  # 10^36
    expect(w.locator('[data-role="decade"]')).to_have_text("10³⁶ ≤ |value| < 10³⁷ (slider 10⁻⁴⁵ to 10³⁹)")


# Every header and cell of the rounding table whose text runs past its box: cut off, or over its neighbour.
CLIPPED = """t => [...t.querySelectorAll("th, td, .prec-line")].filter((e) => e.scrollWidth > e.clientWidth + 1)
  .map((e) => e.textContent.trim().slice(0, 40))"""


def test_rounding_table_columns_hold_their_widths_and_nothing_is_cut_off(chapter9):
    """As the value changes, the table's columns keep their widths (they do not jump under the reader's
    eyes), and no header or cell runs out of its box (the issue saw "UNDERFLOWS" clipped)."""
    widths = []
    for raw in ("0.1", "1e-30", "70000", "-3.4e38", "-6.1e-5", "1e-45", "1e300", "-1e-300"):
        w, status = round_value(chapter9, raw)
        assert status == "done", raw
        widths.append(w.locator("table.round-table thead th, table.round-table tbody.round-format > tr:first-child > *").evaluate_all(
            "els => els.map((e) => Math.round(e.getBoundingClientRect().width * 100) / 100)"))
        assert not w.locator("table.round-table").evaluate(CLIPPED), raw
    assert len(widths[0]) == 4 * (1 + 5)  # the header and each format's row: four cells each
    assert all(row == widths[0] for row in widths), widths


def test_rounding_table_keeps_every_column_in_view_on_a_phone(chapter9):
    """At 360 px the table stacks, one block per format, so the stored value, its neighbours and the
    limits are on screen instead of scrolled away behind float32's 32 bits."""
    old = chapter9.viewport_size
    chapter9.set_viewport_size({"width": 360, "height": 800})
    try:
        for raw in ("70000", "1e-30", "-3.4e38"):  # overflow, underflow: the words are whole on a phone too
            w, status = round_value(chapter9, raw)
            assert status == "done"
            for cell in ("stored", "above", "max"):
                box = w.locator(f'[data-format="fp32"] [data-cell="{cell}"]').bounding_box()
                assert box is not None and box["width"] > 0 and box["x"] + box["width"] <= 360, (cell, box)
            assert not w.locator("table.round-table").evaluate(CLIPPED), raw
            last = w.locator('[data-format="fp32"] .round-bit').last.bounding_box()
            assert last["x"] + last["width"] <= 360, last  # float32's 32 bits wrap inside the screen
    finally:
        chapter9.set_viewport_size(old)


def test_rounding_refuses_bad_input_and_works_after(chapter9):
    """Each bad value is refused under the field (the message names the value, nothing injected); the
    last good table and number line stay, and a note says which value they show; then a good value
    rounds, the note goes and the field is valid again."""
    w, status = round_value(chapter9, "0.75")
    assert status == "done"
    line = w.locator('[data-role="line-summary"]').inner_text()
    for raw in NASTY + ["1e301", "-1e305"]:
        case = f"value {raw!r}"
        w, status = round_value(chapter9, raw)
        assert status == "error", case
        s = refused(w, case, "value")
        assert "value" in s["message"].lower(), f"{case}: {s}"
        expect(w.locator("table.round-table")).to_be_visible()
        expect(w.locator('[data-role="stale"]')).to_have_text(
            "The table and the number line below still show the last value rounded, 0.75.")
        assert w.locator('[data-format="bf16"] [data-cell="stored"]').inner_text() == "0.75", case
        assert w.locator('[data-role="line-summary"]').inner_text() == line, case
    w, status = round_value(chapter9, "2.5")
    assert status == "done" and w.locator('input[name="value"]').get_attribute("aria-invalid") is None
    expect(w.locator('[data-role="stale"]')).to_be_hidden()


def bits_of(w, fmt):
    return w.locator(f'[data-format="{fmt}"] .round-bit').evaluate_all("bs => bs.map((b) => b.innerText).join('')")


def flip(w, fmt, part, index, key=None):
    """Press one bit (by click, or focus and a key), wait for the result; returns the bits the op got."""
    button = w.locator(f'[data-format="{fmt}"] .round-bit[data-part="{part}"][data-index="{index}"]')
    before = bits_of(w, fmt)
    offset = {"sign": 0, "exponent": 1, "mantissa": 1 + w.locator(f'[data-format="{fmt}"] .round-bit[data-part="exponent"]').count()}[part] + index
    sent = before[:offset] + ("0" if before[offset] == "1" else "1") + before[offset + 1:]
    if key:
        button.focus()
        assert settle_after(w, lambda: w.page.keyboard.press(key)) == "done"
    else:
        assert settle_after(w, lambda: button.click()) == "done"
    return button, sent, offset


@pytest.mark.parametrize("start,fmt,part,index,regime", [
    ("0.1", "bf16", "exponent", 0, "normal"),  # the exponent's top bit: 0.1 becomes a huge number
    ("32768", "fp16", "exponent", 4, "inf"),  # 0 11110 0000000000 -> all-ones exponent: inf
    ("6.103515625e-05", "fp16", "exponent", 4, "zero"),  # the smallest normal loses its exponent: zero
    ("448", "fp8_e4m3", "mantissa", 2, "nan"),  # S.1111.111 is E4M3's NaN
    ("0.1", "fp32", "sign", 0, "normal"),
])
def test_pressing_a_bit_sets_the_value_those_bits_encode(chapter9, start, fmt, part, index, regime):
    """A bit is a toggle button: pressing it sends the format's bits with that one flipped, the field
    then holds the value they encode (the op's, as in CPython), the message says what it is, and every
    format's row is rounded from it. The button keeps the focus and its aria-pressed follows."""
    from pylib.web import precision_ops as ops
    w, status = round_value(chapter9, start)
    assert status == "done"
    button, sent, offset = flip(w, fmt, part, index, key="Space" if fmt == "fp32" else None)
    want = ops.round_value(None, {"format": fmt, "bits": sent})
    assert want["from_bits"]["regime"] == regime
    got = result(w)
    assert got["from_bits"] == want["from_bits"] and got["value"] == want["value"]
    field = w.locator('input[name="value"]').input_value()
    if isinstance(want["value"], float):
        assert float(field) == want["value"] and math.copysign(1, float(field)) == math.copysign(1, want["value"])
    else:
        assert field == {"nan": "NaN"}.get(want["value"], want["value"])
    assert got["formats"] == json_round_trip(want["formats"])  # every format rounded from the decoded value
    if regime != "nan":  # a NaN row shows the format's own NaN, not the pattern pressed
        assert bits_of(w, fmt) == sent
        assert button.get_attribute("aria-pressed") == ("true" if sent[offset] == "1" else "false")
    assert button.evaluate("b => b === document.activeElement")
    assert {"normal": "a normal number", "inf": "infinity", "zero": "zero", "nan": "NaN"}[regime] in message(w)
    assert w.locator('[data-role="line-format"]').input_value() == fmt


def json_round_trip(x):
    import json
    return json.loads(json.dumps(x))


def test_bits_are_labelled_toggle_buttons_grouped_by_part(chapter9):
    w, _ = round_value(chapter9, "-2.5")
    from pylib.systems import precision
    d = precision.decompose(-2.5, "fp16")
    buttons = w.locator('[data-format="fp16"] .round-bit')
    assert buttons.count() == 16
    assert buttons.evaluate_all("bs => bs.every((b) => b.tagName === 'BUTTON' && b.type === 'button')")
    bits = d["sign"] + d["exponent"] + d["mantissa"]
    labels = buttons.evaluate_all("bs => bs.map((b) => b.getAttribute('aria-label'))")
    assert labels[:3] == [f"float16 sign bit: {bits[0]}", f"float16 exponent bit 4: {bits[1]}", f"float16 exponent bit 3: {bits[2]}"]
    assert labels[-1] == f"float16 mantissa bit 0: {bits[-1]}"
    pressed = buttons.evaluate_all("bs => bs.map((b) => b.getAttribute('aria-pressed') === 'true' ? '1' : '0').join('')")
    assert pressed == bits
    groups = w.locator('[data-format="fp16"] [role="group"]').evaluate_all("gs => gs.map((g) => g.getAttribute('aria-label'))")
    assert groups == ["float16 sign, 1 bit", "float16 exponent, 5 bits", "float16 mantissa, 10 bits"]


@pytest.mark.parametrize("raw,fmt", [("0.1", "bf16"), ("1", "bf16"), ("0.1", "fp32"), ("1e-30", "fp16"), ("448", "fp8_e4m3"),
                                     ("-65504", "fp16"), ("70000", "fp16")])
def test_number_line_shows_pylibs_neighbours_and_interval(chapter9, raw, fmt):
    """The number line of the chosen format: its text alternative names the value, where it rounds to,
    the neighbours below and above and the interval that rounds to the stored value, each pylib's
    (precision.rounding_interval); a value past the format's range gets no line, and says so."""
    from pylib.systems import precision
    w, status = round_value(chapter9, raw)
    assert status == "done"
    w.locator('[data-role="line-format"]').select_option(fmt)
    line = precision.rounding_interval(float(raw), fmt)
    summary = w.locator('[data-role="line-summary"]')
    if line is None:
        expect(summary).to_contain_text("No number line")
        assert w.locator('[data-role="line"] circle').count() == 0
        return
    expect(summary).to_contain_text(f"In {precision.NAMES[fmt]}, x = ")
    table = {row[0]: row[1] for row in chart_table(w, "line-data")["rows"]}
    num = lambda t: float(t.split(" ")[0].replace("−", "-"))  # noqa: E731
    assert num(table["x"]) == float(raw)
    assert num(table["rounds to (stored value)"]) == line["stored"]
    assert num(table["rounds to it from"]) == line["round_lo"] and num(table["rounds to it up to"]) == line["round_hi"]
    for key, name in (("below", "next below"), ("above", "next above")):
        if line[key] is None:
            assert table[name].startswith("none")
        else:
            assert num(table[name]) == line[key]
            assert num(table[f"gap {key}"]) == line[f"gap_{key}"]
            assert table[f"gap {key}"].endswith(f" = 2^{line[f'gap_{key}_log2']}")
    # drawn: the stored value filled, one hollow dot per neighbour, x a diamond inside the band
    dots = w.locator('[data-role="line"] circle').evaluate_all("cs => cs.map((c) => [+c.getAttribute('cx'), c.classList.contains('hollow')])")
    assert sorted(h for _, h in dots) == [False] + [True] * sum(line[k] is not None for k in ("below", "above"))
    band = w.locator('[data-role="line"] rect.kit-band').evaluate("r => [+r.getAttribute('x'), +r.getAttribute('x') + +r.getAttribute('width')]")
    xs = w.locator('[data-role="line"] path.kit-dot').evaluate("p => p.getBBox().x + p.getBBox().width / 2")
    assert band[0] - 0.5 <= xs <= band[1] + 0.5, (band, xs)


def test_rounding_screenshots(chapter9):
    w, status = round_value(chapter9, "1e-7")
    assert status == "done"
    w.locator('[data-role="line-format"]').select_option("fp16")
    screenshot_widget(w, "rounding")
    # a NaN pressed into E4M3's bits (S.1111.111): every row NaN, no number line, and said briefly
    w, status = round_value(chapter9, "448")
    assert status == "done"
    flip(w, "fp8_e4m3", "mantissa", 2)
    expect(w.locator('[data-role="line-summary"]')).to_have_text("No number line for FP8 E4M3: x is NaN.")
    screenshot_widget(w, "rounding-nan")


# ---------------------------------------------------------------------------
# The lost update


def run_lost(page, **fields):
    w = widget(page, "lost-update")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    wait_settled(w, ("done", "error"))  # the widget runs its defaults when it mounts
    before = settles(w)
    set_fields(w, format=fields.pop("format", "bf16"), **{"start": "1.0", "increment": "0.001", "steps": "1000", "seed": "0", **fields})
    w.locator('[data-action="run"]').click()
    return w, wait_settled(w, ("done", "error"), after=before)


def test_lost_update_matches_pylib(chapter9):
    from pylib.systems import precision
    w, status = run_lost(chapter9)
    assert status == "done"
    r = result(w)
    assert r["final"]["nearest"] == 1.0  # every update lost
    assert r["final"]["fp32"] == float(precision.repeated_add(1.0, 0.001, 1000, "fp32")[-1, 0])
    sr = precision.repeated_add(1.0, 0.001, 1000, "bf16", stochastic=True, rng=np.random.default_rng(0), lanes=64)
    assert r["final"]["stochastic_one"] == float(sr[-1, 0])  # the same seeded stream in the page
    assert r["final"]["stochastic_mean"] == pytest.approx(float(sr[-1].mean()), rel=1e-6)
    assert "lost" in message(w)
    assert w.locator('[data-readout="nearest"]').inner_text() == "1.00000"


def test_lost_update_large_increment_is_kept_and_fp8_overflow_is_said(chapter9):
    w, status = run_lost(chapter9, increment="0.01", steps="100")
    assert status == "done" and result(w)["final"]["nearest"] > 1.5
    w, status = run_lost(chapter9, format="fp8_e4m3", start="400", increment="10", steps="20")
    assert status == "done" and result(w)["overflow"] is True
    assert "overflow" in message(w)


LOST_UPDATE_BAD = ([(f, v) for f in ("start", "increment", "steps") for v in NASTY]
                   + [("steps", "0"), ("steps", "5001"), ("steps", "1.5"), ("steps", "99999999999999999999"),
                      ("increment", "2e6"), ("seed", "-1")])


def test_lost_update_refuses_bad_input_and_works_after(chapter9):
    """Each bad field (the others at their defaults) is refused under it; then a good run works."""
    for field, raw in LOST_UPDATE_BAD:
        case = f"{field}={raw!r}"
        w, status = run_lost(chapter9, **{field: raw})
        assert status == "error", case
        refused(w, case, field)
    w, status = run_lost(chapter9, steps="10")
    assert status == "done"


# ---------------------------------------------------------------------------
# A precision recipe, live


def start_train(page, recipe, seed="0"):
    """Choose a recipe and a seed and press Start; returns the widget and its settles() count from
    before the press (wait_settled(w, after=...) then waits for this run's end)."""
    w = widget(page, "precision-train")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    set_fields(w, recipe=recipe, seed=seed)
    before = settles(w)
    w.locator('[data-action="run"]').click()
    return w, before


def cpython_recipe(recipe, seed):
    """pylib's run of a recipe in CPython, on the corpus the page loads: its per-step records."""
    from pylib import model, train
    from pylib.systems import mixed_precision as mp
    vocab, train_ids, val_ids = corpus()
    cfg = model.GPTConfig(vocab_size=vocab.size)
    return mp.train_recipe(cfg, train.TrainConfig(seed=seed), train_ids, val_ids, recipe)[1]


def test_fp16_dynamic_recipe_runs_in_the_page_like_cpython(chapter9):
    """The fp16 recipe with dynamic loss scaling, trained in the page, against pylib's run in CPython.
    CPython trains on a thread while the page trains in its worker (waiting for the page holds no
    lock), so the test takes the longer of the two runs, not their sum."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reference = pool.submit(cpython_recipe, "fp16_dynamic", 0)
        w, before = start_train(chapter9, "fp16_dynamic")
        assert wait_settled(w, after=before) == "done"
        h = reference.result()
    r = result(w)
    assert r["steps"] == len(h) and r["diverged_at"] is None
    # Skips and the scale depend on whether one gradient element overflows: the page (no BLAS)
    # and CPython sum in different orders, so the counts may differ by a step or two.
    assert abs(r["skipped_steps"] - sum(1 for x in h if x.get("skipped"))) <= 2
    assert r["final_val"] == pytest.approx(h[-1]["val"], abs=0.02)
    # The first steps, before float32 summation-order differences (the page has no BLAS) compound:
    # the same losses and loss scale. The flushed share at s = 2^16 is ~1e-4 in CPython and 0 in
    # the page: the attention gradient of the first query row, d(att) = dy.v_0 - dy.y_0 with
    # y_0 = v_0, is exactly 0 in the page's plain loops and a ~1e-13 residual with BLAS, which
    # fp16 flushes even after scaling. So only its size is compared.
    for page_rec, ref in zip(r["first"], h[:5]):
        assert page_rec["step"] == ref["step"] and page_rec["scale"] == ref["scale"]
        assert page_rec["loss"] == pytest.approx(ref["loss"], rel=1e-5)
        assert page_rec["flushed"] <= 2e-4 and ref["flushed"] <= 2e-4
    # Over the run the share flushed is tiny in both, though not equal: it is set by the few steps
    # after an overflow halved the scale, and those steps differ between the two.
    assert r["flushed_mean"] < 1e-3 and np.mean([x["flushed"] for x in h]) < 1e-3
    assert int(w.locator('[data-readout="skipped"]').inner_text()) == r["skipped_steps"]
    assert r["steps_per_second"] > 0


def test_pure_bf16_recipe_reports_lost_updates(chapter9):
    """Pure bf16 weights lose updates to rounding from the first steps: a run stopped after 10 steps
    shows a share put back, and its summary the average share (never a non-zero share shown as 0)."""
    w, before = start_train(chapter9, "bf16_pure", seed="1")
    chapter9.wait_for_function("el => { const s = el.querySelector('[data-readout=\"step\"]').textContent; "
                               "return s !== '–' && +s >= 10; }", arg=w.element_handle(), timeout=TIMEOUT, polling=100)
    w.locator('[data-action="stop"]').click()
    assert wait_settled(w, after=before) == "stopped"
    lost, scale, text = w.evaluate("""el => [el.querySelector('[data-readout="lost"]').innerText,
        el.querySelector('[data-readout="scale"]').innerText, el.querySelector('[data-role="message"]').innerText]""")
    assert lost != "–" and float(lost) > 0
    # the summary gives the run's average share as a percentage, never a non-zero share shown as 0
    m = re.search(r"on average ([0-9.e+-]+)% of moved weights put back by rounding per step", text)
    assert m and float(m.group(1)) > 0, text
    assert scale == "–"


def test_precision_train_says_when_a_recipe_has_no_loss_scale(chapter9):
    w = widget(chapter9, "precision-train")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    title = w.locator('[data-role="scale-title"]')
    w.locator('select[name="recipe"]').select_option("bf16_pure")
    expect(title).to_contain_text("none in this recipe")
    w.locator('select[name="recipe"]').select_option("fp16_dynamic")
    expect(title).to_have_text("Loss scale s (log scale); grey points: skipped steps")


def test_precision_train_refuses_bad_seed(chapter9):
    """Each bad seed is refused under its field, which gets the focus (not <body>); nothing injected."""
    for raw in NASTY + ["-1", "1.5", "1e30"]:
        case = f"seed {raw!r}"
        w, before = start_train(chapter9, "fp32", seed=raw)
        assert wait_settled(w, after=before) == "error", case
        s = refused(w, case, "seed")
        assert s["focused"], f"{case}: the focus is not on the seed field"  # the field to fix, not <body>


# ---------------------------------------------------------------------------
# Quantising a gradient


def run_quant(page, **fields):
    w = widget(page, "quantise")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    wait_settled(w, ("done", "error"))  # the widget quantises its defaults when it mounts
    set_fields(w, tensor=fields.pop("tensor", "h.0.mlp.c_fc.weight"))
    wait_settled(w, ("done", "error"))  # choosing another tensor quantises it at once
    before = settles(w)
    set_fields(w, **{"bits": "4", "ratio": "1", **fields})
    w.locator('[data-action="run"]').click()
    return w, wait_settled(w, ("done", "error"), after=before)


@functools.cache
def cpython_gradient(name):
    """The gradient the quantise widget starts from, in CPython: the initial model's on the validation
    windows of the corpus the page loads."""
    from pylib import data, model, train
    vocab, _, val_ids = corpus()
    cfg = model.GPTConfig(vocab_size=vocab.size)
    x, y = data.eval_windows(val_ids, train.TrainConfig().batch_size, cfg.block_size)
    g = model.loss_and_grads(model.init_params(cfg, 0), cfg, x, y)[1][name]
    g.setflags(write=False)  # shared by the tests that use it
    return g


def test_quantise_matches_pylib(chapter9):
    from pylib.systems import quantise
    g = cpython_gradient("h.0.mlp.c_fc.weight")
    for bits, ratio in [("4", "1"), ("8", "0.2"), ("2", "0.05")]:
        case = f"{bits} bits, ratio {ratio}"
        w, status = run_quant(chapter9, bits=bits, ratio=ratio)
        assert status == "done", case
        r = result(w)
        fs = float(ratio) * quantise.amax_full_scale(g)
        gq, clipped = quantise.quantise_uniform(g, int(bits), fs)
        rel = float(np.linalg.norm(gq.astype(np.float64) - g) / np.linalg.norm(g.astype(np.float64)))
        assert r["clipped"] == pytest.approx(clipped, abs=2 / g.size), case  # the page's gradient may differ in the last bit
        assert r["rel_error"] == pytest.approx(rel, rel=1e-3), case
        assert r["max_error_in_range"] <= r["bound_in_range"] * (1 + 1e-6), case
        assert r["q_max"] == quantise.q_max(int(bits)), case


QUANTISE_BAD = ([(f, v) for f in ("bits", "ratio") for v in NASTY]
                + [("bits", "1"), ("bits", "9"), ("bits", "4.5"), ("ratio", "0"), ("ratio", "-1"), ("ratio", "11")])


def test_quantise_refuses_bad_input_and_works_after(chapter9):
    """Each bad field (the other at its default) is refused under it; then a good one quantises."""
    for field, raw in QUANTISE_BAD:
        case = f"{field}={raw!r}"
        w, status = run_quant(chapter9, **{field: raw})
        assert status == "error", case
        refused(w, case, field)
    w, status = run_quant(chapter9)
    assert status == "done"


# ---------------------------------------------------------------------------
# The forms: labels, hints and error slots, sliders


def test_every_field_is_labelled_and_tied_to_its_hint_and_error(chapter9):
    for name, want in [("rounding", {"value"}), ("lost-update", {"start", "increment", "steps", "format", "seed"}),
                       ("precision-train", {"recipe", "seed"}), ("quantise", {"tensor", "bits", "ratio"})]:
        assert want <= set(assert_fields_labelled(widget(chapter9, name))), name


def test_rounding_slider_works_with_the_keyboard_and_keeps_the_sign(chapter9):
    """The rounding calculator's slider (issue 13, part 8): log10 |value|, keyboard-operable, rounding as
    it moves; the field stays the exact entry; a negative value keeps its sign on the slider."""
    from pylib.systems import precision
    w, _ = round_value(chapter9, "1")
    drive_slider(w, "value", end="1e+39", typed="0.1")
    slider, field = w.locator('[data-slider-for="value"]'), w.locator('input[name="value"]')
    assert slider.input_value() == "4400"  # log10 0.1 = -1: (-1 + 45) / 84 of 8400 positions
    field.fill("-0.5")
    assert slider.input_value() == "4470"  # |-0.5|: log10 0.5 = -0.301
    wait_settled(w)  # drive_slider's keys computed (typing in the field computes nothing)
    before = settles(w)
    slider.focus()
    chapter9.keyboard.press("ArrowRight")
    assert field.input_value() == "-0.512861"  # position 4471: 10^-0.29, six significant digits, the sign kept
    assert wait_settled(w, after=before) == "done"
    assert result(w)["value"] == -0.512861
    bf16 = [f for f in result(w)["formats"] if f["format"] == "bf16"][0]
    assert bf16["stored"] == precision.decompose(-0.512861, "bf16")["stored"]


def test_quantise_bits_slider_requantises_as_it_moves(chapter9):
    w, status = run_quant(chapter9, bits="4", ratio="1")
    assert status == "done"
    drive_slider(w, "bits", end="8", typed="4")
    wait_settled(w)
    before = settles(w)
    w.locator('[data-slider-for="bits"]').focus()
    chapter9.keyboard.press("Home")
    assert w.locator('input[name="bits"]').input_value() == "2"
    assert wait_settled(w, after=before) == "done"
    assert result(w)["q_max"] == 1
    # the charts' text alternative follows the data
    expect(w.locator('[data-role="chart-sweep-summary"]')).to_contain_text("At 2 bits the relative error is lowest")


# ---------------------------------------------------------------------------
# A field checked when the reader leaves it (widget-kit.js checkOnLeave, op check_args)


def test_rounding_checks_the_value_on_leaving_its_field_and_keeps_the_last_table(chapter9):
    """A value the calculator refuses gets the op's own message under its field as the reader leaves it,
    before Compute: the last value's table and number line stay, with no note that they are stale (nothing
    was refused by a run); a fix clears the message and nothing is computed."""
    from pylib.web import precision_ops
    w, status = round_value(chapter9, "0.75")
    assert status == "done"
    shown = w.evaluate(SHOWN_JS)
    line = w.locator('[data-role="line-summary"]').inner_text()
    value = w.locator('input[name="value"]')
    for raw in ["1e301", "lots", "<b class=injected>1</b>"]:
        expected = python_refuses(precision_ops.validate_round, {"value": raw})["value"]
        expect(leave_field(w, "value", raw)).to_have_text(expected)
        expect(value).to_have_attribute("aria-invalid", "true")
        assert w.evaluate(SHOWN_JS) == shown, raw
        assert w.locator('[data-role="line-summary"]').inner_text() == line, raw
    assert chapter9.locator("[data-widget] b.injected").count() == 0
    expect(w.locator('[data-role="stale"]')).to_be_hidden()
    expect(leave_field(w, "value", "1_000")).to_be_empty()  # Python's float() reads it, as Compute would
    assert value.get_attribute("aria-invalid") is None
    assert w.evaluate(SHOWN_JS) == shown


def test_the_page_is_accessible_in_both_themes_and_reflows_on_a_phone(chapter9):
    # Last: after the tests above, with the widgets as they left them (a11y_checks.check_accessibility).
    check_accessibility(chapter9, "chapters/09-mixed-precision.html")
