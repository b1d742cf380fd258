"""Chapter 10 in a real browser: the animated activation memory (one step of the live model in each
recompute mode, stepped through) and the memory calculator (LLaMA 7B and the course model), each with
bad input refused visibly and nothing injected. The page's numbers are compared with the same pylib
calls in CPython: the bytes held are integers counted from the caches, so they must agree exactly.
One shared page (conftest.chapter_fixture); a console error or a request off 127.0.0.1 fails a test."""

import dataclasses
import functools
import re

import pytest
from playwright.sync_api import expect

from a11y_checks import check_accessibility
from conftest import chapter_fixture, corpus, result, settle_after, settles, wait_settled, widget
from kit_checks import FORM_JS, SHOWN_JS, assert_fields_labelled, chart_table, drive_slider, leave_field, python_refuses, set_fields

chapter10 = chapter_fixture("10-")

TIMEOUT = 180_000  # ms: the longest op here is three steps of a 4-layer model in the page

NASTY = ["", "   ", "NaN", "-5", "0", "1e309", "123456789012345678901234567890", "🙂",
         "<b class=injected>x</b>", "<img src='x' onerror='alert(1)'>"]


def message(w):
    return w.locator('[data-role="message"]').inner_text()


def submit(w, ready=False, **fields):
    """Set the fields (set_fields), press Run and wait for that run's answer; returns its status.
    (A select's change may start a live update first: the wait is for the run pressed, after it.)
    ready: the widget is known to be settled (a loop's previous submit), so Run is not waited for
    again (the click still waits for it to be enabled)."""
    if not ready:
        expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    set_fields(w, **fields)
    return settle_after(w, lambda: w.locator('[data-action="run"]').click(), ("done", "error"), timeout=TIMEOUT)


# What a refused input left on the widget, read in one call (each locator read is a round trip):
# the field's aria-invalid and aria-describedby, its error slot (id, text, whether it is visible as
# Playwright's to_be_visible means it: a box and not visibility:hidden), the status line, a readout,
# and whether any markup typed was injected (conftest.no_injected_markup's selector).
ERROR_STATE = """(el, [name, readout]) => {
  const field = el.querySelector(`[name="${name}"]`);
  const slot = el.querySelector(`[data-error-for="${name}"]`);
  const box = slot ? slot.getBoundingClientRect() : null;
  return {
    invalid: field.getAttribute("aria-invalid"),
    describedby: (field.getAttribute("aria-describedby") || "").split(/\\s+/).filter(Boolean),
    slot_id: slot ? slot.id : null,
    slot_text: slot ? slot.innerText.trim() : "",
    slot_visible: !!slot && box.width > 0 && box.height > 0 && getComputedStyle(slot).visibility !== "hidden",
    message: el.querySelector('[data-role="message"]').innerText,
    readout: readout ? el.querySelector(`[data-readout="${readout}"]`).innerText : null,
    injected: document.querySelectorAll("[data-widget] b.injected, [data-widget] img[src='x']").length,
  };
}"""


def error_state(w, name, readout=None):
    return w.evaluate(ERROR_STATE, [name, readout])


# ---------------------------------------------------------------------------
# activation-timeline


@functools.cache
def cpython_timelines(n_layer, batch, seq_len):
    from pylib import data, model
    from pylib.systems import checkpointing
    vocab, _, val = corpus()
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=vocab.size, n_layer=n_layer)
    x, y = data.eval_windows(val, batch, seq_len)
    params = model.init_params(cfg, 0)
    return {m: checkpointing.timeline(params, cfg, x.copy(), y.copy(), m) for m in checkpointing.MODES}


def test_timeline_matches_cpython_byte_for_byte(chapter10):
    w = widget(chapter10, "activation-timeline")
    assert submit(w, n_layer="3", batch_size="4", seq_len="48") == "done"
    page = result(w)
    want = cpython_timelines(3, 4, 48)
    for mode, tl in want.items():
        assert page[mode]["held"] == [e["held"] for e in tl["events"]]
        assert page[mode]["peak"] == tl["peak"] == page[mode]["formula_peak"]
        assert page[mode]["stored"] == tl["stored"] == page[mode]["formula_stored"]
        assert page[mode]["set_by"] == list(tl["set_by"])
    assert "to the byte" in message(w)
    assert w.locator('[data-readout="peak_full"]').inner_text() != "–"


def test_timeline_steps_and_marks_the_peak(chapter10):
    w = widget(chapter10, "activation-timeline")
    assert submit(w, n_layer="2", batch_size="16", seq_len="64") == "done"
    n = max(len(v["held"]) for v in result(w).values())
    assert w.get_attribute("data-index") == str(n - 1)  # it opens at the end of the step
    assert w.locator(".at-peak").count() == 3  # one peak ring per mode
    w.locator('[data-action="back"]').click()
    assert w.get_attribute("data-index") == str(n - 2)
    w.locator('[data-role="scrub"]').fill("0")
    assert w.get_attribute("data-index") == "0"
    assert "Event 1 of" in w.locator('[data-role="now"]').inner_text()
    assert w.locator(".at-peak").count() == 0  # no peak has happened yet at the first event
    w.locator('[data-action="step"]').click()
    assert w.get_attribute("data-index") == "1"
    w.locator('[data-action="play"]').click()
    chapter10.wait_for_function("el => Number(el.dataset.index) >= 4", arg=w.element_handle(), timeout=20_000)
    w.locator('[data-action="play"]').click()  # pause
    held = result(w)["full"]["held"]
    assert max(held) == result(w)["full"]["peak"] and held[-1] == 0


TIMELINE_BAD = [(field, raw if raw != "65" or field == "seq_len" else ("33" if field == "batch_size" else "5"))
                for field in ("n_layer", "batch_size", "seq_len") for raw in NASTY + ["2.5", "65"]]  # 65: just above each field's limit


def test_timeline_refuses_bad_input_and_recovers(chapter10):
    """Each bad value of each field (TIMELINE_BAD), one after another: refused, the field marked invalid
    with its message in its error slot (named by its aria-describedby) and the status line saying to
    check the form, the readouts cleared, nothing injected; after each field's cases a good run works
    and the field is no longer marked. (Once one test per case, each with its own recovery run.)"""
    w = widget(chapter10, "activation-timeline")
    good = {"n_layer": "1", "batch_size": "2", "seq_len": "16"}
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    for i, (field, raw) in enumerate(TIMELINE_BAD):
        case = f"{field}={raw!r}"
        assert submit(w, ready=True, **{**good, field: raw}) == "error", case
        s = error_state(w, field, "peak_none")
        assert s["invalid"] == "true", f"{case}: {s}"
        assert s["message"].strip() and "check" in s["message"], f"{case}: {s}"
        assert s["slot_id"] in s["describedby"] and s["slot_visible"] and s["slot_text"], f"{case}: {s}"
        assert s["readout"] == "–", f"{case}: {s}"
        assert s["injected"] == 0, f"{case}: {s}"
        if i + 1 == len(TIMELINE_BAD) or TIMELINE_BAD[i + 1][0] != field:
            assert submit(w, ready=True, **good) == "done", f"{case}: no recovery"  # and it works afterwards
            assert w.locator(f'[name="{field}"]').get_attribute("aria-invalid") is None, case


def test_timeline_form_is_labelled_and_its_layer_slider_reruns_when_let_go(chapter10):
    """Every field labelled and tied to its hint and error slot; the layers slider works with the keyboard
    and, once the keys are quiet, runs the step again; the chart's text alternative is the data."""
    w = widget(chapter10, "activation-timeline")
    assert {"n_layer", "batch_size", "seq_len"} <= set(assert_fields_labelled(w))
    assert submit(w, n_layer="1", batch_size="2", seq_len="16") == "done"
    before = settles(w)
    drive_slider(w, "n_layer", end="4", typed="2")  # its keys' commit waits for them to be quiet: pending
    assert w.locator('[data-slider-for="n_layer"]').input_value() == "1"  # layers 1 to 4: positions 0 to 3
    assert wait_settled(w, ("done", "error"), timeout=TIMEOUT, after=before) == "done"  # the commit ran the step
    # The commit reads the fields when it fires, 800 ms after the last key: on a busy machine that can come
    # before drive_slider types "2" (typing does not commit), and the step ran with the slider's 4 layers.
    # Then Run runs it with the field as typed.
    layers = int(re.match(r"(\d+) layers?, ", message(w))[1])
    assert layers in (2, 4), message(w)
    if layers == 4:
        assert submit(w, ready=True) == "done"
    want = cpython_timelines(2, 2, 16)
    assert result(w)["full"]["held"] == [e["held"] for e in want["full"]["events"]]
    expect(w.locator('[data-role="chart-summary"]')).to_contain_text("One step of 2 layers, 2 × 16 tokens")
    rows = chart_table(w)["rows"]
    assert len(rows) == max(len(tl["events"]) for tl in want.values())
    last_full = rows[len(want["full"]["events"]) - 1]
    assert last_full[-1] == "0"  # full recomputation: nothing held at its last event


# ---------------------------------------------------------------------------
# memory-calculator


def test_calculator_llama_preset_matches_cpython(chapter10):
    from pylib.systems import memory
    w = widget(chapter10, "memory-calculator")
    expect(w.locator('[data-preset="llama-7b"]')).to_be_enabled(timeout=TIMEOUT)
    assert settle_after(w, lambda: w.locator('[data-preset="llama-7b"]').click()) == "done"
    r = result(w)
    assert r["params"] == 6_738_415_616
    # LLaMA as trained: memory-efficient attention (Touvron et al. 2023, section 2.4), no s x s term
    want = memory.training_memory(memory.LLAMA_7B, 1, 2048, precision="mixed", optimizer="adamw", recompute="none",
                                  memory_efficient_attention=True)
    for key in ("weights", "gradients", "optimizer", "activations", "activations_peak", "total"):
        assert r["memory"][key] == pytest.approx(want[key], rel=1e-12)
    assert w.locator('select[name="attention"]').input_value() == "memory_efficient"
    assert w.locator('[data-readout="params"]').inner_text() == "6,738,415,616"
    assert w.locator(".mem-seg").count() == 4


def test_calculator_settings_match_cpython(chapter10):
    from pylib.systems import memory
    w = widget(chapter10, "memory-calculator")
    status = submit(w, arch="llama", seq_len="8192", micro_batch="2", n_layer="32", n_embd="4096", n_head="32",
                    vocab_size="32000", ffn_hidden="11008", precision="fp32", recompute="selective", optimizer="momentum",
                    attention="standard")
    assert status == "done"
    r = result(w)
    want = memory.training_memory(memory.LLAMA_7B, 2, 8192, precision="fp32", optimizer="momentum", recompute="selective")
    assert r["memory"]["total"] == pytest.approx(want["total"], rel=1e-12)
    assert r["memory"]["activations_peak"] == pytest.approx(want["activations_peak"], rel=1e-12)
    assert 8192 in r["growth"]["seq_len"]
    i = r["growth"]["seq_len"].index(8192)
    assert r["growth"]["activations"][i] == pytest.approx(want["activations"], rel=1e-12)
    assert len(set(r["growth"]["weights"])) == 1  # the weights do not grow with the sequence
    # In fp32 with momentum the gradients and the momentum buffer take the weights' bytes at every length,
    # so their lines would lie on one another: each is drawn wider than the next, and the summary says so.
    assert r["growth"]["gradients"] == r["growth"]["weights"] == r["growth"]["optimizer"]
    width = {name: w.locator(f'[data-role="chart-growth"] g[data-series="{name}"] polyline').evaluate(
                 "el => parseFloat(getComputedStyle(el).strokeWidth)") for name in ("weights", "gradients", "optimizer", "activations")}
    assert width["weights"] > width["gradients"] > width["optimizer"] == width["activations"], width
    expect(w.locator('[data-role="chart-growth-summary"]')).to_contain_text(
        "The weights, the gradients and the optimiser state take the same bytes at every length: their lines lie on one another")


def test_calculator_slider_recomputes_as_it_moves_and_keeps_typed_values_exact(chapter10):
    """The sequence-length slider (log scale, keyboard-operable) writes a whole number into its field and
    recomputes at once; a typed value stays as typed; the chart's data table holds what pylib returned."""
    from pylib.systems import memory
    w = widget(chapter10, "memory-calculator")
    expect(w.locator('[data-preset="llama-7b"]')).to_be_enabled(timeout=TIMEOUT)
    for name, value in (("precision", "mixed"), ("optimizer", "adamw"), ("recompute", "none")):
        w.locator(f'select[name="{name}"]').select_option(value)  # each change recomputes too
    assert settle_after(w, lambda: w.locator('[data-preset="llama-7b"]').click()) == "done"
    assert result(w)["seq_len"] == 2048
    seq, slider = w.locator('[name="seq_len"]'), w.locator('[data-slider-for="seq_len"]')
    slider.focus()
    assert settle_after(w, lambda: chapter10.keyboard.press("End")) == "done"
    assert seq.input_value() == "131072" and result(w)["seq_len"] == 131072
    want = memory.training_memory(memory.LLAMA_7B, 1, 131072, precision="mixed", optimizer="adamw", recompute="none",
                                  memory_efficient_attention=True)
    assert result(w)["memory"]["total"] == pytest.approx(want["total"], rel=1e-12)
    chapter10.keyboard.press("ArrowLeft")
    assert seq.input_value().isdigit() and int(seq.input_value()) < 131072
    seq.fill("3000")
    assert seq.input_value() == "3000"
    assert settle_after(w, lambda: w.locator('[data-action="run"]').click()) == "done"
    assert result(w)["seq_len"] == 3000
    table = chart_table(w, "chart-growth-data")
    assert table["header"][0] == "sequence length (tokens)" and "activations (bytes)" in table["header"]
    assert len(table["rows"]) >= 2
    expect(w.locator('[data-role="chart-growth-summary"]')).to_contain_text("At your 3,000 tokens")


def test_calculator_course_preset_is_the_course_model(chapter10):
    w = widget(chapter10, "memory-calculator")
    expect(w.locator('[data-preset="course"]')).to_be_enabled(timeout=TIMEOUT)
    assert settle_after(w, lambda: w.locator('[data-preset="course"]').click()) == "done"
    assert result(w)["params"] == 5376
    assert w.locator('[name="arch"]').input_value() == "gpt2"


def test_calculator_refuses_heads_that_do_not_divide_the_width(chapter10):
    w = widget(chapter10, "memory-calculator")
    assert submit(w, arch="llama", n_embd="4096", n_head="30", seq_len="2048", micro_batch="1", n_layer="32",
                  vocab_size="32000", ffn_hidden="11008") == "error"
    # the message sits under the field, tied to it by aria-describedby; the status line names the field
    slot = w.locator('[data-error-for="n_head"]')
    assert "30 heads do not divide the width 4,096" in slot.inner_text()
    assert "Heads" in message(w)
    assert w.locator('[name="n_head"]').get_attribute("aria-invalid") == "true"
    assert slot.get_attribute("id") in w.locator('[name="n_head"]').get_attribute("aria-describedby").split()
    assert w.locator('[data-readout="total"]').inner_text() == "–"
    assert submit(w, n_head="32") == "done"


CALC_FIELDS = ["seq_len", "micro_batch", "n_layer", "n_embd", "n_head", "vocab_size", "ffn_hidden"]


def test_calculator_refuses_bad_input_and_recovers(chapter10):
    """Each NASTY value in each field, one after another: refused, the field marked invalid, a message,
    nothing injected; after each field's cases the good input computes LLaMA 7B again. (Once one test
    per case, each with its own recovery run.)"""
    w = widget(chapter10, "memory-calculator")
    good = {"arch": "llama", "seq_len": "2048", "micro_batch": "1", "n_layer": "32", "n_embd": "4096", "n_head": "32",
            "vocab_size": "32000", "ffn_hidden": "11008"}
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    for field in CALC_FIELDS:
        for raw in NASTY:
            case = f"{field}={raw!r}"
            assert submit(w, ready=True, **{**good, field: raw}) == "error", case
            s = error_state(w, field)
            assert s["invalid"] == "true", f"{case}: {s}"
            assert s["message"].strip(), f"{case}: {s}"
            assert s["injected"] == 0, f"{case}: {s}"
        assert submit(w, ready=True, **good) == "done", f"{field}: no recovery"
        assert result(w)["params"] == 6_738_415_616, field


# ---------------------------------------------------------------------------
# A field checked when the reader leaves it (widget-kit.js checkOnLeave, op check_args)


def test_calculator_checks_heads_on_leaving_the_field_and_keeps_the_last_figures(chapter10):
    """Heads that do not divide the width, or out of range, get the op's own message under the field as
    the reader leaves it, before Run (the check reads every field, as the op does); a fix clears it, and
    the last figures, chart sentences and tables stay."""
    from pylib.web import memory_ops
    w = widget(chapter10, "memory-calculator")
    assert submit(w, arch="llama", n_embd="4096", n_head="32", seq_len="2048", micro_batch="1", n_layer="32",
                  vocab_size="32000", ffn_hidden="11008") == "done"
    shown = w.evaluate(SHOWN_JS)
    form = w.evaluate(FORM_JS)
    heads = w.locator('input[name="n_head"]')
    for raw in ["30", "0", "<b class=injected>1</b>"]:
        expected = python_refuses(memory_ops.validate_memory_calc, {**form, "n_head": raw})["n_head"]
        expect(leave_field(w, "n_head", raw)).to_have_text(expected)
        expect(heads).to_have_attribute("aria-invalid", "true")
        assert w.evaluate(SHOWN_JS) == shown, raw
    assert chapter10.locator("[data-widget] b.injected").count() == 0
    expect(leave_field(w, "n_head", "64")).to_be_empty()
    assert heads.get_attribute("aria-invalid") is None
    assert w.evaluate(SHOWN_JS) == shown


def test_the_page_is_accessible_in_both_themes_and_reflows_on_a_phone(chapter10):
    # Last: after the tests above, with the widgets as they left them (a11y_checks.check_accessibility).
    check_accessibility(chapter10, "chapters/10-training-memory.html")
