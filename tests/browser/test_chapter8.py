"""Chapter 8 in a real browser: the NaN sources, one bad batch (live, with Inject now, Stop and a
diverging run labelled) and attention-logit growth, each with bad input refused visibly and nothing
injected. The page's numbers are compared with the same pylib calls in CPython. One shared page
(conftest.chapter_fixture); a console error or a request off 127.0.0.1 fails a test."""


import re

import pytest
from playwright.sync_api import expect

from a11y_checks import check_accessibility
from conftest import chapter_fixture, corpus, result, settle_after, settles, wait_settled, widget
from kit_checks import SHOWN_JS, assert_fields_labelled, chart_table, drive_slider, leave_field, python_refuses, refused, set_fields

chapter8 = chapter_fixture("08-")

TIMEOUT = 180_000  # ms: the longest op here is a 300-step run of the default model in the page

NASTY = ["", "   ", "NaN", "-5", "1e309", "🙂", "<b class=injected>x</b>", "<img src='x' onerror='alert(1)'>"]


def message(w):
    return w.locator('[data-role="message"]').inner_text()


# ---------------------------------------------------------------------------
# NaN sources


def run_nan(page, which, logit="200"):
    w = widget(page, "nan-sources")
    button = w.locator(f'[data-action="run"][data-which="{which}"]')
    expect(button).to_be_enabled(timeout=TIMEOUT)
    w.locator('input[name="logit"]').fill(logit)
    return w, settle_after(w, button.click)


def test_each_nan_source_shows_nan_unguarded_and_a_number_guarded(chapter8):
    for which in ["log0", "overflow", "masked_row"]:
        w, status = run_nan(chapter8, which)
        assert status == "done", which
        r = result(w)
        assert r == {"which": which, "naive_bad": True, "guarded_bad": False}
        shown = w.evaluate("""el => ({
            naive: [...el.querySelectorAll('td[data-cell="naive"]')].map((c) => c.innerText),
            guarded: [...el.querySelectorAll('td[data-cell="guarded"]')].map((c) => c.innerText),
            bad: el.querySelectorAll(".nan-bad").length,
            explain: el.querySelector('[data-role="explain"]').innerText })""")
        assert any("nan" in t or "inf" in t for t in shown["naive"]), (which, shown)
        assert not any("nan" in t or "inf" in t for t in shown["guarded"]), (which, shown)
        assert shown["bad"] >= 1 and shown["explain"].strip(), (which, shown)


def test_nan_demo_matches_pylib(chapter8):
    from pylib.studies import stability
    w, status = run_nan(chapter8, "log0", "200")
    assert status == "done"
    cells = w.locator("tbody tr").nth(1).locator("td").all_inner_texts()
    assert cells[0] == "inf"
    assert float(cells[1]) == pytest.approx(stability.guarded_cross_entropy([0.0, -200.0], 1), rel=1e-4)


def test_enter_in_the_logit_field_runs_the_first_demo_without_leaving_the_page(chapter8):
    w, status = run_nan(chapter8, "overflow", "100")
    url = chapter8.url
    w.locator('input[name="logit"]').fill("300")
    assert settle_after(w, lambda: w.locator('input[name="logit"]').press("Enter")) == "done"
    assert result(w)["which"] == "log0"
    assert chapter8.url == url and result(w)["naive_bad"] is True


def test_small_logits_give_no_nan_and_say_so(chapter8):
    w, status = run_nan(chapter8, "overflow", "3")
    assert status == "done" and result(w)["naive_bad"] is False
    assert "No nan or inf" in message(w)


def test_nan_demo_refuses_bad_logits_visibly(chapter8):
    """Each bad logit is refused under its field (the message and the slot name the logit, the output
    is hidden, nothing injected); the third demo, which needs no logit, still works with it there."""
    for raw in [v for v in NASTY if v != "-5"] + ["2e6", "-2e6"]:  # -5 is a fine logit
        case = f"logit {raw!r}"
        w, status = run_nan(chapter8, "log0", raw)
        assert status == "error", case
        s = refused(w, case, "logit")
        assert "logit" in s["message"].lower() and "logit" in s["slot_text"].lower() and s["output_hidden"], f"{case}: {s}"
        w2, status = run_nan(chapter8, "masked_row", raw)
        assert status == "done" and result(w2)["which"] == "masked_row", case


# ---------------------------------------------------------------------------
# One bad batch


def press_run(w):
    """Press Start; returns the widget's settles() count from before, for wait_settled(w, after=...)."""
    before = settles(w)
    w.locator('[data-action="run"]').click()
    return before


def fill_bad(page, **fields):
    w = widget(page, "bad-batch")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    cure = fields.pop("cure", "none")
    if w.evaluate("(el, c) => !el.querySelector(`input[name=cure][value=${c}]`).checked", cure):
        w.locator(f'input[name="cure"][value="{cure}"]').check()
    from pylib import train
    defaults = {"inject_step": "150", "clip": "1", "skip_factor": "4", "lr": str(train.TrainConfig().lr), "seed": "0"}
    set_fields(w, **{**defaults, **fields})  # only the fields whose text differs are typed into
    return w


def test_bad_batch_with_skipping_skips_exactly_the_bad_stretch(chapter8):
    from pylib import data, guards, train
    from pylib.studies import stability
    w = fill_bad(chapter8, cure="skip", inject_step="150")
    assert wait_settled(w, after=press_run(w)) == "done"
    r = result(w)
    assert r["steps"] == 300 and r["diverged_at"] is None
    assert r["bad_steps_taken"] == 3 and r["bad_skipped"] == 3 and r["skipped_steps"] == 3
    assert r["grad_norm_ratio"] > 5
    assert w.locator('[data-readout="skipped"]').inner_text() == "3"
    # the same run in CPython, on the corpus as the page loads it (pylib.data.build_corpus's, from the built site)
    vocab, train_ids, val_ids = corpus()
    mcfg, tcfg = stability.bad_configs(vocab.size, "skip", 0)
    state = train.init_train_state(mcfg, tcfg)
    guards.hook_batches(state, stability.bad_batch_hook({150, 151, 152}, int(vocab.encode(" ")[0][0])))
    h = train.train_steps(state, mcfg, tcfg, train_ids, val_ids, tcfg.steps)
    assert r["final_loss"] == pytest.approx(h[-1]["loss"], abs=2e-3)
    assert r["skipped_steps"] == sum(1 for x in h if x.get("skipped"))
    # the weight-norm panel and the dead-unit readout show pylib's numbers for the same weights
    assert r["layer_weight_norms"] == pytest.approx(stability.layer_weight_norms(state["params"], mcfg), rel=1e-3)
    x_diag, _ = data.eval_windows(val_ids, stability.DIAG_WINDOWS, mcfg.block_size)
    dead = stability.dead_units(state["params"], mcfg, x_diag)
    units = 4 * mcfg.n_embd
    assert w.locator('[data-readout="dead"]').inner_text() == ", ".join(f"{round(f * units)} of {units}" for f in dead)
    drawn = chapter8.evaluate("el => el.querySelector('[data-role=\"chart-weights\"] canvas') !== null", w.element_handle())
    assert drawn
    # each chart's legend gives every series its own colour (the issue: two blues and two greens in one legend)
    colours = w.evaluate("""el => [...el.querySelectorAll('.kit-chart')].map((f) => [...f.querySelectorAll('.kit-swatch')]
        .map((s) => getComputedStyle(s).getPropertyValue('--c').trim()).filter(Boolean))""")
    assert len(colours) == 4 and len(colours[2]) == len(r["layer_weight_norms"])
    for chart in colours:
        assert len(set(chart)) == len(chart), colours
    # the text alternative: a sentence from the data and a table the reader can open
    expect(w.locator('[data-role="chart-loss-summary"]')).to_contain_text("bad batches at steps 150–152; 0 steps clipped, 3 skipped")
    table = chart_table(w, "chart-weights-data")
    assert table["header"][0] == "step" and len(table["header"]) == 1 + len(r["layer_weight_norms"])
    assert [float(v) for v in table["rows"][-1][1:]] == pytest.approx(r["layer_weight_norms"], rel=1e-3)
    # the y axes are as wide as their tick labels (plot.js): on a phone the loss chart's title sits beside
    # its "2.5"-wide numbers, not at a fixed 60 px (the issue measured 50 px of gap)
    loss_chart = w.locator('[data-role="chart-loss"]')
    old = chapter8.viewport_size
    chapter8.set_viewport_size({"width": 360, "height": 800})
    try:
        expect(loss_chart).not_to_have_attribute("data-y-axis-px", "60")
        assert 14 < int(loss_chart.get_attribute("data-y-axis-px")) <= 14 + 30, loss_chart.get_attribute("data-y-axis-px")
    finally:
        chapter8.set_viewport_size(old)


def test_bad_batch_inject_now_and_stop_mid_run(chapter8):
    """Inject now, a few steps into a run, injects the next three steps; Stop once they are met."""
    w = fill_bad(chapter8, cure="clip", inject_step="299")
    before = press_run(w)
    chapter8.wait_for_function("el => { const s = el.querySelector('[data-readout=\"step\"]').textContent; "
                               "return s !== '–' && +s >= 5; }", arg=w.element_handle(), timeout=TIMEOUT, polling=100)
    w.locator('[data-action="inject"]').click()
    # the message says the injection is on ("Injecting … at steps"), or, if the run has already passed
    # those steps when the locator looks (a loaded machine), that it happened ("… injected at steps")
    expect(w.locator('[data-role="message"]')).to_contain_text(
        re.compile(r"(Injecting bad batches|Bad batches injected) at steps"), timeout=TIMEOUT)
    # once the run has passed them, the message says so (each chunk rewrites it): Stop then
    expect(w.locator('[data-role="message"]')).to_contain_text("Bad batches injected at steps", timeout=TIMEOUT)
    w.locator('[data-action="stop"]').click()
    assert wait_settled(w, after=before) == "stopped"
    text, clipped = w.evaluate("""el => [el.querySelector('[data-role="message"]').innerText,
        el.querySelector('[data-readout="clipped"]').innerText]""")
    assert "Stopped after" in text and "3 bad batches met" in text, text
    assert int(clipped) >= 3  # the bad ones were clipped
    assert w.get_attribute("data-result") is None
    expect(w.locator('[data-action="run"]')).to_be_enabled()
    expect(w.locator('[data-action="inject"]')).to_be_disabled()


def test_bad_batch_diverging_run_is_labelled(chapter8):
    w = fill_bad(chapter8, cure="none", inject_step="299", lr="5")
    assert wait_settled(w, after=press_run(w)) == "done"
    r = result(w)
    assert r["diverged_at"] is not None and r["steps"] < 300
    flag = w.locator('[data-role="flag"]')
    expect(flag).to_be_visible()
    assert f"Diverged at step {r['diverged_at']}" in flag.inner_text()
    assert f"Diverged at step {r['diverged_at']}" in message(w)


BAD_BATCH_BAD = ([("inject_step", "300"), ("inject_step", "1e9"), ("inject_step", "-1"),
                  ("lr", "0"), ("lr", "-0.02"), ("lr", "100")]
                 + [("inject_step", v) for v in NASTY] + [("lr", v) for v in NASTY])


def test_bad_batch_refuses_bad_input_visibly(chapter8):
    """Each bad field (the others at their defaults) is refused under it; nothing injected."""
    for field, raw in BAD_BATCH_BAD:
        case = f"{field}={raw!r}"
        w = fill_bad(chapter8, **{field: raw})
        assert wait_settled(w, after=press_run(w)) == "error", case
        refused(w, case, field)


def test_bad_batch_refuses_bad_cure_settings(chapter8):
    """A bad setting of the chosen cure is refused under its field, which gets the focus (not <body>),
    and Start is enabled again."""
    for cure, field, raw in [("clip", "clip", "0"), ("clip", "clip", "🙂"), ("skip", "skip_factor", "0.5"),
                             ("skip", "skip_factor", "")]:
        case = f"cure {cure}, {field}={raw!r}"
        w = fill_bad(chapter8, cure=cure, **{field: raw})
        assert wait_settled(w, after=press_run(w)) == "error", case
        s = refused(w, case, field)
        assert s["focused"], f"{case}: the focus is not on {field}"
        expect(w.locator('[data-action="run"]')).to_be_enabled()


# ---------------------------------------------------------------------------
# Attention-logit growth


def start_attn(page, qk_norm=False, **fields):
    w = widget(page, "attn-growth")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    set_fields(w, **{"lr": "0.1", "seed": "0", **fields})  # only the fields whose text differs are typed into
    checked = w.evaluate("el => [el.querySelector('input[name=qk_norm]').checked, el.querySelector('input[name=z_loss]').checked]")
    if checked[0] != qk_norm:
        w.locator('input[name="qk_norm"]').set_checked(qk_norm)
    if checked[1]:
        w.locator('input[name="z_loss"]').set_checked(False)
    return w, press_run(w)


def test_attn_growth_qk_norm_keeps_logits_small_and_matches_pylib(chapter8):
    from pylib import data, train
    from pylib.studies import stability
    w, before = start_attn(chapter8, qk_norm=True)
    assert wait_settled(w, after=before) == "done"
    r = result(w)
    assert r["steps"] == stability.ATTN["steps"] and r["diverged_at"] is None
    points = {p["step"]: p for p in r["points"]}
    assert sorted(points) == list(range(0, r["steps"], 10)) + [r["steps"]] and r["last"] == points[r["steps"]]
    # At step 0 the page's statistics are CPython's. Later ones are not compared: at this learning
    # rate the page's and CPython's losses agree to ~1e-6 for the first five steps, then float32
    # rounding differences (no BLAS in the page) are amplified from step to step (measured once
    # with both: 1e-3 at step 6, 0.1 nats at step 10); only QK-norm's bound is checked there.
    vocab, _, val_ids = corpus()
    mcfg, tcfg = stability.attn_configs(vocab.size, qk_norm=True, seed=0)
    state = train.init_train_state(mcfg, tcfg)
    x, _ = data.eval_windows(val_ids, stability.ATTN["stats_windows"], mcfg.block_size)
    ref = stability.attention_stats(state["params"], mcfg, x)
    assert points[0]["max_logit"] == pytest.approx(ref["max_logit"], rel=1e-4)
    assert points[0]["entropy"] == pytest.approx(ref["entropy"], rel=1e-4)
    D = mcfg.n_embd // mcfg.n_head
    assert max(v for p in r["points"] for v in p["max_logit"]) < 10 * D  # QK-norm: |q||k|/sqrt(D) = sqrt(D) x gains


def test_attn_growth_stop_mid_run(chapter8):
    w, before = start_attn(chapter8, qk_norm=False)
    chapter8.wait_for_function("el => { const s = el.querySelector('[data-readout=\"step\"]').textContent; "
                               "return s !== '–' && +s >= 5; }", arg=w.element_handle(), timeout=TIMEOUT, polling=100)
    w.locator('[data-action="stop"]').click()
    assert wait_settled(w, after=before) == "stopped"
    assert "Stopped after" in message(w)
    expect(w.locator('[data-action="run"]')).to_be_enabled()


def test_attn_growth_diverging_run_is_labelled(chapter8):
    w, before = start_attn(chapter8, lr="3")
    assert wait_settled(w, after=before) == "done"
    r = result(w)
    assert r["diverged_at"] is not None
    assert f"Diverged at step {r['diverged_at']}" in w.locator('[data-role="flag"]').inner_text()


def test_attn_growth_refuses_bad_input_visibly(chapter8):
    """Each bad field (the other at its default) is refused under it; nothing injected."""
    for field, raw in [("lr", v) for v in NASTY + ["0", "11"]] + [("seed", "-1"), ("seed", "1.5")]:
        case = f"{field}={raw!r}"
        w, before = start_attn(chapter8, **{field: raw})
        assert wait_settled(w, after=before) == "error", case
        refused(w, case, field)


# ---------------------------------------------------------------------------
# The form: labels, hints and error slots, sliders


def test_every_field_is_labelled_and_tied_to_its_hint_and_error(chapter8):
    for name, want in [("nan-sources", {"logit"}), ("bad-batch", {"inject_step", "cure", "clip", "skip_factor", "lr", "seed"}),
                       ("attn-growth", {"lr", "seed", "qk_norm", "z_loss"})]:
        assert want <= set(assert_fields_labelled(widget(chapter8, name))), name


def test_bad_batch_step_slider_works_with_the_keyboard(chapter8):
    w = widget(chapter8, "bad-batch")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    drive_slider(w, "inject_step", end="299", typed="150")
    assert w.locator('input[name="inject_step"]').input_value() == "150"
    assert w.locator('[data-slider-for="inject_step"]').input_value() == "150"  # one position per step
    slider = w.locator('[data-slider-for="lr"]')  # the learning rate's, on a log scale
    w.locator('input[name="lr"]').fill("0.01")
    low = int(slider.input_value())
    w.locator('input[name="lr"]').fill("1")
    # 1e-4 to 10 is 5 decades: 0.01 to 1, two of them, is two fifths of the slider
    assert int(slider.input_value()) - low == pytest.approx(2 * int(slider.get_attribute("max")) / 5, abs=1)


# ---------------------------------------------------------------------------
# A field checked when the reader leaves it (widget-kit.js checkOnLeave, op check_args)


def test_nan_demo_checks_the_logit_on_leaving_its_field_and_keeps_the_last_demo(chapter8):
    """A bad logit gets the op's own message under its field as the reader leaves it, before any of the
    three buttons; a fix clears it; the last demo's table and its status stay, and nothing runs."""
    from pylib.web import stability_ops
    w, status = run_nan(chapter8, "log0", "30")
    assert status == "done"
    shown = w.evaluate(SHOWN_JS)
    logit = w.locator('input[name="logit"]')
    for raw in ["2e6", "lots", "<b class=injected>1</b>"]:
        expected = python_refuses(stability_ops.validate_nan_demo, {"which": "log0", "logit": raw})["logit"]
        expect(leave_field(w, "logit", raw)).to_have_text(expected)
        expect(logit).to_have_attribute("aria-invalid", "true")
        assert w.evaluate(SHOWN_JS) == shown, raw
    assert chapter8.locator("[data-widget] b.injected").count() == 0
    expect(w.locator('[data-role="output"]')).to_be_visible()
    expect(leave_field(w, "logit", "-40")).to_be_empty()
    assert logit.get_attribute("aria-invalid") is None
    assert w.evaluate(SHOWN_JS) == shown


def test_the_page_is_accessible_in_both_themes_and_reflows_on_a_phone(chapter8):
    # Last: after the tests above, with the widgets as they left them (a11y_checks.check_accessibility).
    check_accessibility(chapter8, "chapters/08-stability.html")
