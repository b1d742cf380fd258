"""Chapter 4 in a real browser: the nudge widget agrees with CPython's pylib.studies.gradcheck, refuses bad
input with a visible message and keeps working; the streamed gradient check fills its table, passes
at the initial and at the perturbed weights, and stops when asked. One shared page (conftest.chapter4); console errors and off-host requests fail."""

import json
import math

import pytest
from playwright.sync_api import expect

from a11y_checks import check_accessibility
from conftest import SETTLED_JS, chapter_fixture, corpus, settle_after, settles, wait_settled
from kit_checks import SHOWN_LAST, assert_fields_labelled, chart_table, expected_message, leave_field, screenshot_widget, set_fields

chapter4 = chapter_fixture("04-")
TIMEOUT = 120_000  # ms


def nudge_widget(page):
    return page.locator('[data-widget="grad-nudge"]').first


def check_widget(page):
    return page.locator('[data-widget="grad-check"]').first


def compare(page, name, index, h):
    w = nudge_widget(page)
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    w.locator('input[name="name"]').fill(str(name))
    w.locator('input[name="index"]').fill(str(index))
    w.locator('input[name="h"]').fill(str(h))
    return w, settle_after(w, lambda: w.locator('[data-action="run"]').click())


# What a refused input shows, read in one call once the answer has settled (kit_checks.
# assert_error_in_slot's checks, without a round trip for each): the status, data-result, the field's
# aria-invalid, its error slot (its id among the field's aria-describedby, shown, its text) and the
# status line's text.
SHOWN = """(el, name) => {
    const box = el.querySelector(`input[name="${name}"]`);
    const slot = el.querySelector(`[data-error-for="${name}"]`);
    const rect = slot && slot.getBoundingClientRect();
    return {
        status: el.dataset.status, result: el.dataset.result ?? null, invalid: box.getAttribute("aria-invalid"),
        described: (box.getAttribute("aria-describedby") || "").split(/\\s+/),
        slot_id: slot && slot.id, slot_text: slot ? slot.innerText.trim() : "",
        slot_shown: !!slot && rect.width > 0 && rect.height > 0 && getComputedStyle(slot).visibility !== "hidden",
        message: el.querySelector('[data-role="message"]').innerText,
    };
}"""


def enter(w, field, name, index, h):
    """Give the nudge widget these fields (set_fields: only the ones that change are typed), press
    Enter in field (the form's Run, from the keyboard: a click's checks cost a tenth of a second of
    the page's CPU each), wait for the answer on the page's own signals (settle_after's wait) and
    read what the widget shows for field (SHOWN)."""
    set_fields(w, name=name, index=index, h=h)
    w.locator(f'input[name="{field}"]').focus()
    before = settles(w)
    w.page.keyboard.press("Enter")
    w.page.wait_for_function(SETTLED_JS, arg=[w.element_handle(), ["done", "error", "stopped"], before],
                             timeout=TIMEOUT, polling=100)
    return w.evaluate(SHOWN, field)


def cpython_nudge(name, index, h):
    from pylib import model
    from pylib.studies import gradcheck

    vocab, train, _ = corpus()
    cfg = model.GPTConfig(vocab_size=vocab.size)
    params = gradcheck.float64_params(cfg, 0)
    x, y = gradcheck.fixed_batch(train, 2, 64)
    return gradcheck.nudge(params, cfg, x, y, name, index, h)


# ---------------------------------------------------------------------------


def test_nudge_runs_at_load_and_matches_cpython(chapter4):
    w = nudge_widget(chapter4)
    assert wait_settled(w) == "done"
    w, status = compare(chapter4, "h.0.mlp.c_fc.weight", 7, "1e-5")
    assert status == "done"
    r = json.loads(w.get_attribute("data-result"))
    ref = cpython_nudge("h.0.mlp.c_fc.weight", 7, 1e-5)
    assert r["analytic"] == pytest.approx(ref["analytic"], rel=1e-12)
    assert r["numeric"] == pytest.approx(ref["numeric"], rel=1e-6)
    assert r["rel_error"] < 1e-5
    assert w.locator('[data-readout="analytic"]').inner_text() != "–"
    assert w.locator(".uplot").count() == 1


def test_nudge_error_grows_for_a_tiny_step(chapter4):
    w, status = compare(chapter4, "wte", 100, "1e-13")
    assert status == "done"
    assert json.loads(w.get_attribute("data-result"))["rel_error"] > 1e-4  # rounding dominates


def test_nudge_refuses_bad_input_visibly_and_recovers(chapter4):
    """Each bad input, in its field: refused with a message, the field marked invalid with the reason
    in its error slot (kit_checks.assert_error_in_slot's checks), the last result withdrawn. After
    each field's cases (the cases go field by field) a good comparison works again and the field is no
    longer marked: so the first case of each field withdraws a result that was there."""
    w = nudge_widget(chapter4)
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    cases = [
        ("h.7.attn.nothing", 0, "1e-5", "name"),
        ("", 0, "1e-5", "name"),
        ("wte", 1040, "1e-5", "index"),  # wte has 65 x 16 = 1040 elements: 0..1039
        ("wte", -1, "1e-5", "index"),
        ("wte", "🙂", "1e-5", "index"),
        ("wte", 0, "0", "h"),
        ("wte", 0, "-1e-5", "h"),
        ("wte", 0, "NaN", "h"),
        ("wte", 0, "1e308", "h"),
        ("wte", 0, "", "h"),
    ]
    for k, (name, index, h, field) in enumerate(cases):
        case = f"name={name!r} index={index!r} h={h!r}"
        shown = enter(w, field, name, index, h)
        assert shown["status"] == "error", f"{case}: {shown}"
        assert shown["message"].strip() and "check" in shown["message"], f"{case}: the status line says {shown['message']!r}"
        assert shown["invalid"] == "true", f"{case}: {field} is not marked invalid"
        assert shown["slot_id"] and shown["slot_id"] in shown["described"], f"{case}: the error slot is not in aria-describedby"
        assert shown["slot_shown"] and shown["slot_text"], f"{case}: no message under {field}"
        assert shown["result"] is None, f"{case}: the last result is still shown"
        if k + 1 == len(cases) or cases[k + 1][3] != field:
            good = enter(w, field, "wpe", 3, "1e-5")
            assert good["status"] == "done", f"after {case}: {good}"
            assert good["invalid"] is None, f"after {case}: {field} is still marked invalid"


def test_nudge_checks_a_field_on_leaving_it_and_keeps_the_last_comparison(chapter4):
    """After a comparison, leaving the index or parameter field with a value pylib refuses shows its
    message (the op's own check, validate_nudge) under the field before any Compare; a fix clears it;
    the last comparison's readouts, chart and table stay, and nothing is computed."""
    from pylib import model
    from pylib.web import backprop_ops

    shapes = model.param_shapes(model.GPTConfig(vocab_size=corpus()[0].size))  # the page's model
    w, status = compare(chapter4, "wpe", 3, "1e-5")
    assert status == "done"
    table = chart_table(w)
    before = w.evaluate(SHOWN_LAST)
    good = {"name": "wpe", "index": "3", "h": "1e-5"}
    for name, raw in [("index", "1024"), ("name", "h.7.attn.nothing"), ("h", "2")]:
        message = expected_message(lambda args: backprop_ops.validate_nudge(args, shapes), {**good, name: raw}, name)
        expect(leave_field(w, name, raw)).to_have_text(message)
        expect(w.locator(f'input[name="{name}"]')).to_have_attribute("aria-invalid", "true")
        assert w.evaluate(SHOWN_LAST) == before, name
    screenshot_widget(w, "grad-nudge-checked-on-leaving")
    for name in ["index", "name", "h"]:
        expect(leave_field(w, name, good[name])).to_be_empty()
        assert w.locator(f'input[name="{name}"]').get_attribute("aria-invalid") is None
    assert w.evaluate(SHOWN_LAST) == before and chart_table(w) == table


def test_nudge_shows_markup_as_text(chapter4):
    w, status = compare(chapter4, '<img src=x onerror="alert(1)">', 0, "1e-5")
    assert status == "error"
    assert "<img" in w.locator('[data-error-for="name"]').inner_text()  # the message under the field
    assert w.locator("img").count() == 0


def test_every_field_is_labelled_and_described(chapter4):
    for name in ("grad-nudge", "grad-check", "backprop-order"):
        assert_fields_labelled(chapter4.locator(f'[data-widget="{name}"]').first)


def test_step_size_slider_is_keyboard_operable_and_follows_the_field(chapter4):
    """The log slider for h (13 decades, 20 positions each): End and Home reach its ends, arrows step
    along it (PageUp a tenth of it), the number field follows; typing moves the slider and stays exactly as typed; letting go
    of the keys compares at the slider's h."""
    w = nudge_widget(chapter4)
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    w.locator('input[name="name"]').fill("wpe")
    w.locator('input[name="index"]').fill("3")
    h, slider = w.locator('input[name="h"]'), w.locator('[data-slider-for="h"]')
    wait_settled(w)
    before = settles(w)
    slider.focus()
    chapter4.keyboard.press("End")
    assert float(h.input_value()) == pytest.approx(1)
    chapter4.keyboard.press("Home")
    assert float(h.input_value()) == pytest.approx(1e-13)
    for _ in range(3):  # PageUp: a tenth of the slider, 26 positions (Chromium's step for a range)
        chapter4.keyboard.press("PageUp")
    for _ in range(22):  # five decades up (100 positions): 1e-8
        chapter4.keyboard.press("ArrowRight")
    assert float(h.input_value()) == pytest.approx(1e-8)
    assert slider.get_attribute("aria-valuetext") == h.input_value()
    # the keys went quiet: it compares at the slider's h
    assert wait_settled(w, after=before) == "done"
    assert json.loads(w.get_attribute("data-result"))["h"] == pytest.approx(1e-8, rel=1e-9)
    h.fill("0.000123")
    assert h.input_value() == "0.000123"
    assert int(slider.input_value()) == round((math.log10(0.000123) + 13) * 20)
    h.fill("1e-5")


def test_nudge_chart_has_a_text_alternative(chapter4):
    w, status = compare(chapter4, "h.0.mlp.c_fc.weight", 7, "1e-5")
    assert status == "done"
    chart = w.locator('[data-role="chart"]')
    summary = w.locator('[data-role="chart-summary"]')
    assert chart.get_attribute("aria-describedby") == summary.get_attribute("id")
    expect(summary).to_contain_text("Your h = 1e-5: ")
    table = chart_table(w)
    assert table["header"] == ["h", "relative error (sweep)", "your h"]
    assert len(table["rows"]) >= 10


def test_gradient_check_streams_every_tensor_and_passes(chapter4):
    w = check_widget(chapter4)
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    assert settle_after(w, lambda: w.locator('[data-action="run"]').click()) == "done"
    r = json.loads(w.get_attribute("data-result"))
    n_params = nudge_widget(chapter4).locator("datalist option").count()
    assert r["complete"] and r["tensors"] == n_params
    assert w.locator('[data-role="rows"] tr').count() == n_params
    assert r["max"] < 1e-6
    assert "Done" in w.locator('[data-role="message"]').inner_text()


def test_gradient_check_at_perturbed_weights_passes_and_says_so(chapter4):
    w = check_widget(chapter4)
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    select = w.locator('select[name="weights"]')
    expect(select).to_be_enabled()
    select.select_option("perturbed")
    try:
        assert settle_after(w, lambda: w.locator('[data-action="run"]').click()) == "done"
        r = json.loads(w.get_attribute("data-result"))
        assert r["weights"] == "perturbed" and r["complete"]
        assert r["max"] < 1e-5  # the correct backward passes where gains and biases are not 1 and 0
        assert "Perturbed weights" in w.locator('[data-role="message"]').inner_text()
    finally:
        select.select_option("init")


def test_gradient_check_stops_when_asked(chapter4):
    w = check_widget(chapter4)
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    w.locator('[data-action="run"]').focus()
    before = settles(w)
    chapter4.keyboard.press("Enter")
    expect(w.locator('[data-action="stop"]')).to_be_enabled(timeout=TIMEOUT)
    expect(w.locator('[data-action="stop"]')).to_be_focused()  # focus moves to Stop, not to <body>
    chapter4.keyboard.press("Enter")
    assert wait_settled(w, after=before) == "stopped"  # a tensor or two per chunk: Stop lands long before the end
    expect(w.locator('[data-action="run"]')).to_be_focused()
    assert w.get_attribute("data-result") is None
    rows = w.locator('[data-role="rows"] tr').count()
    assert 1 <= rows < nudge_widget(chapter4).locator("datalist option").count()
    assert "Stopped" in w.locator('[data-role="message"]').inner_text()
    expect(w.locator('[data-action="run"]')).to_be_enabled()


# ---------------------------------------------------------------------------
# The order of the backward pass, stepped


def test_backprop_order_steps_through_the_order_pylib_recorded(chapter4):
    import numpy as np
    from pylib import model
    from pylib.studies import backprop_order, gradcheck
    from pylib.web import backprop_ops
    w = chapter4.locator('[data-widget="backprop-order"]').first
    expect(w.locator('[data-action="step"]')).to_be_enabled(timeout=TIMEOUT)
    vocab, train_ids, _ = corpus()
    cfg = model.GPTConfig(vocab_size=vocab.size)
    params = gradcheck.weights_at(cfg, backprop_ops.SEED, "init")
    x, y = gradcheck.fixed_batch(train_ids, *backprop_ops.BATCH)
    expected = backprop_order.backward_order(params, cfg, x, y)
    w.locator('[data-action="step"]').click()
    expect(w.locator('[data-role="backward"] li.bo-current')).to_have_text(
        f"{expected['backward'][0]['name']}‖g‖ = {expected['backward'][0]['grad_norm']:.2e}".replace("e-0", "e-").replace("e+0", "e+"))
    expect(w.locator('[data-role="forward"] li.bo-current')).to_have_text(expected["backward"][0]["name"])
    assert settle_after(w, lambda: w.locator('[data-action="run"]').click(), timeout=TIMEOUT) == "done"  # Play to the end
    r = json.loads(w.get_attribute("data-result"))
    assert r["order"] == [row["name"] for row in expected["backward"]] and r["order"][-1] == "wte"
    np.testing.assert_allclose(r["norms"], [row["grad_norm"] for row in expected["backward"]], rtol=1e-12)
    w.locator('[data-action="reset"]').click()
    expect(w.locator('[data-role="backward"] li.bo-pending')).to_have_count(len(expected["backward"]))


def test_the_page_is_accessible_in_both_themes_and_reflows_on_a_phone(chapter4):
    # Last: after the tests above, with the widgets as they left them (a11y_checks.check_accessibility).
    check_accessibility(chapter4, "chapters/04-backpropagation.html")
