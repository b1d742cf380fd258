"""Chapter 14 in a real browser: the IsoFLOP explorer (fits of the measured sweep, a prediction at a
typed budget, extrapolation flagged) and the compute calculator, each with bad input refused visibly
and nothing injected. The page's numbers are compared with the same pylib calls in CPython. One
shared page (conftest.chapter_fixture); a console error or a request off 127.0.0.1 fails a test."""

import json
import pathlib

import pytest
from playwright.sync_api import expect

from a11y_checks import check_accessibility
from conftest import chapter_fixture, no_injected_markup, result, settle_after, wait_settled, widget
from kit_checks import assert_error_in_slot, assert_fields_labelled, chart_table, drive_slider, enter, refused, round_ticks, screenshot_widget, set_fields

chapter14 = chapter_fixture("14-")

TIMEOUT = 180_000
NASTY = ["", "   ", "NaN", "-5", "1e309", "🙂", "<b class=injected>x</b>", "<img src='x' onerror='alert(1)'>"]


def message(w):
    return w.locator('[data-role="message"]').inner_text()


def sweep():
    root = pathlib.Path(__file__).resolve().parents[2]
    return json.loads((root / "results.json").read_text())["curves"]["ch14.isoflop"]


def run(w, timeout=TIMEOUT):
    """Press Run (once it is enabled: choosing a budget computes first) and wait for the answer to the
    press; returns its status."""
    button = w.locator('[data-action="run"]')
    expect(button).to_be_enabled(timeout=timeout)
    return settle_after(w, button.click, ("done", "error"), timeout=timeout)


# ---------------------------------------------------------------------------
# IsoFLOP explorer: live, no button; each change (select, slider, typing) asks again


def choose(w, index, timeout=TIMEOUT):
    """Choose measured budget `index` in the select (it refits at once) and wait for the answer; returns its status."""
    select = w.locator('select[name="budget_index"]')
    expect(select).to_be_enabled(timeout=timeout)
    assert select.input_value() != str(index), "choosing the budget already chosen would not ask again"
    return settle_after(w, lambda: select.select_option(str(index)), timeout=timeout)


def predict_at(w, budget, timeout=TIMEOUT):
    """Type a prediction budget (it predicts again once the keys pause) and wait for the answer; returns its status."""
    field = w.locator('input[name="custom_budget"]')
    expect(field).to_be_enabled(timeout=timeout)
    assert field.input_value() != budget, "typing the budget already there would not ask again"
    return settle_after(w, lambda: field.fill(budget), timeout=timeout)


def budget_name(c):
    """A budget as the widget names it: 3e9, 1.2e10."""
    mantissa, exponent = f"{c:.1e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def test_isoflop_has_no_button_and_its_text_says_it_updates_live(chapter14):
    """The issue: a Fit button beside text that says the chart updates live. The widget now has no
    button that computes (no Run, nothing that submits), and its text says the charts follow the fields."""
    w = widget(chapter14, "isoflop")
    assert w.locator('[data-action="run"], [type="submit"]').count() == 0
    assert not [t for t in w.locator("button").all_inner_texts() if "fit" in t.lower()]
    assert "follow the fields as you change them" in w.locator(".widget-hint").inner_text()


def test_isoflop_fits_every_budget_as_cpython_does(chapter14):
    from pylib.web import scaling_ops
    w = widget(chapter14, "isoflop")
    series = sweep()["series"]
    current = int(w.locator('select[name="budget_index"]').input_value())
    for index in [i for i in range(len(series)) if i != current] + [current]:
        assert choose(w, index) == "done"
        page = result(w)
        cpython = scaling_ops.isoflop(None, {"series": series, "budget_index": index,
                                             "custom_budget": w.locator('input[name="custom_budget"]').input_value()})
        assert page["budget"] == cpython["budget"] and page["index"] == index
        assert page["optimum"]["n"] == pytest.approx(cpython["optimum"]["n"], rel=1e-9)
        assert page["optimum"]["loss"] == pytest.approx(cpython["optimum"]["loss"], rel=1e-9)
        assert page["laws"]["a"] == pytest.approx(cpython["laws"]["a"], rel=1e-9)
        chosen = w.locator("svg[data-role=plot] g.iso-budget.chosen")
        assert float(chosen.get_attribute("data-budget")) == page["budget"]
        assert chosen.locator("circle.mean").count() == len(series[index]["n"])
        assert chosen.locator("circle.seed").count() == sum(len(row) for row in series[index]["loss_per_seed"])
        assert chosen.locator("path.fit").count() == 1
        assert w.locator("svg[data-role=plot] circle.seed").count() == chosen.locator("circle.seed").count()  # seeds: the chosen budget's only
        round_ticks(w.locator("svg[data-role=plot]"))  # the loss axis at round values (the issue saw 2.34, 2.51)


def test_isoflop_draws_one_parabola_per_measured_budget_each_named(chapter14):
    """Hoffmann et al.'s figure 3, left: the whole family at once, each budget's parabola with its
    points and its minimum, named by its budget (not by its shade alone)."""
    from pylib.web import scaling_ops
    w = widget(chapter14, "isoflop")
    series = sweep()["series"]
    plot = w.locator("svg[data-role=plot]")
    expect(plot.locator("g.iso-budget")).to_have_count(len(series), timeout=TIMEOUT)
    cpython = scaling_ops.isoflop(None, {"series": series, "budget_index": 0})
    assert plot.locator("path.fit").count() == len(series)
    assert plot.locator("circle.mean").count() == sum(len(s["n"]) for s in series)
    inside = [f for f in cpython["family"] if f["optimum"] and f["optimum"]["inside"]]
    assert plot.locator("circle.iso-min").count() == len(inside)
    assert sorted(plot.locator("text.iso-name").all_text_contents()) == sorted(budget_name(f["budget"]) for f in inside)
    # the select names the budgets as the chart does
    assert w.locator('select[name="budget_index"] option').all_inner_texts() == [budget_name(s["budget"]) for s in series]
    # each budget its own shade of the ramp: as many colours as budgets
    strokes = plot.locator("path.fit").evaluate_all("ps => ps.map((p) => getComputedStyle(p).stroke)")
    assert len(set(strokes)) == len(series), strokes


def test_isoflop_right_panel_plots_the_ops_optima_and_its_power_law(chapter14):
    from pylib.web import scaling_ops
    w = widget(chapter14, "isoflop")
    wait_settled(w, timeout=TIMEOUT)
    page = result(w)
    cpython = scaling_ops.isoflop(None, {"series": sweep()["series"], "budget_index": page["index"],
                                         "custom_budget": w.locator('input[name="custom_budget"]').input_value()})
    laws = w.locator("svg[data-role=laws]")
    points = laws.locator("circle.optimum").evaluate_all("cs => cs.map((c) => [+c.dataset.c, +c.dataset.n])")
    assert len(points) == len(cpython["laws"]["budgets"]) >= 2
    for (c, n), c_op, n_op in zip(points, cpython["laws"]["budgets"], cpython["laws"]["optima_n"]):
        assert c == c_op and n == pytest.approx(n_op, rel=1e-9)
    assert laws.locator("path.law").count() == 1


def test_isoflop_slider_moves_the_prediction_and_flags_extrapolation_outside_the_budgets(chapter14):
    w = widget(chapter14, "isoflop")
    budgets = [s["budget"] for s in sweep()["series"]]
    laws = w.locator("svg[data-role=laws]")
    label, warn = laws.locator("text.iso-prediction-label"), w.locator('[data-role="warn"]')
    inside = f"{budgets[1]:g}"
    assert predict_at(w, inside) == "done"
    assert not result(w)["prediction"]["extrapolated"] and result(w)["prediction"]["extension"] is None
    expect(label).to_have_text("your budget")
    expect(label).to_have_attribute("data-extrapolated", "false")
    assert laws.locator("path.law-extension").count() == 0
    expect(warn).to_be_hidden()
    at_inside = laws.locator(".iso-prediction path").get_attribute("d")
    slider = w.locator('[data-slider-for="custom_budget"]')
    slider.focus()
    assert settle_after(w, lambda: chapter14.keyboard.press("End"), timeout=TIMEOUT) == "done"
    p = result(w)["prediction"]
    assert p["budget"] == 1e25 and p["extrapolated"]
    assert laws.locator(".iso-prediction path").get_attribute("d") != at_inside  # the diamond moved
    expect(label).to_have_text("extrapolation")
    expect(laws.locator("path.law-extension")).to_have_count(1)
    expect(warn).to_contain_text("Extrapolation")
    assert settle_after(w, lambda: chapter14.keyboard.press("Home"), timeout=TIMEOUT) == "done"  # 1e9: below the budgets
    assert result(w)["prediction"]["extrapolated"] and result(w)["prediction"]["budget"] == 1e9
    expect(label).to_have_text("extrapolation")
    assert predict_at(w, inside) == "done"
    expect(label).to_have_text("your budget")
    expect(warn).to_be_hidden()


def test_isoflop_first_predicts_inside_the_measured_budgets(chapter14):
    """The reader's first sight is the fit, not an alarm: the default budget lies between the measured
    ones (the issue saw a red "Extrapolation" on arrival), and dragging out is what extrapolates."""
    w = widget(chapter14, "isoflop")
    budgets = [s["budget"] for s in sweep()["series"]]
    default = float(w.locator('input[name="custom_budget"]').get_attribute("value"))
    assert min(budgets) <= default <= max(budgets)
    fresh = chapter14.context.new_page()
    try:
        fresh.goto(chapter14.url, wait_until="domcontentloaded")
        first = widget(fresh, "isoflop")
        expect(first).to_have_attribute("data-status", "done", timeout=TIMEOUT)
        assert result(first)["prediction"]["extrapolated"] is False
        expect(first.locator('[data-role="warn"]')).to_be_hidden()
    finally:
        fresh.close()


def test_isoflop_flags_an_extrapolated_prediction(chapter14):
    w = widget(chapter14, "isoflop")
    assert predict_at(w, "1e20") == "done"
    p = result(w)["prediction"]
    assert p["extrapolated"] and p["n"] > 0
    warn = w.locator('[data-role="warn"]')
    expect(warn).to_be_visible()
    assert "Extrapolation" in warn.inner_text()
    assert predict_at(w, str(sweep()["series"][1]["budget"])) == "done"
    assert not result(w)["prediction"]["extrapolated"]
    expect(warn).to_be_hidden()


def test_isoflop_refuses_a_bad_budget_and_keeps_the_last_drawing(chapter14):
    """Each bad budget, typed, is refused live: the field marked invalid, the reason (naming the budget) in
    its slot and the status line, nothing injected, the last good charts still drawn; then a good budget,
    entered with Enter, predicts again and the field is unmarked."""
    w = widget(chapter14, "isoflop")
    field = w.locator('input[name="custom_budget"]')
    assert predict_at(w, "1e11") == "done"
    drawn = w.locator("svg[data-role=plot]").inner_html(), w.locator("svg[data-role=laws]").inner_html()
    for bad in NASTY + ["0", "1e31"]:
        if field.input_value() == bad:
            continue
        assert predict_at(w, bad) == "error", bad
        shown = refused(w, f"budget={bad!r}", "custom_budget", "budget")
        assert "budget" in shown["message"].lower(), f"budget={bad!r}: {shown['message']!r}"
        assert (w.locator("svg[data-role=plot]").inner_html(), w.locator("svg[data-role=laws]").inner_html()) == drawn
    field.fill("1e11")
    assert settle_after(w, lambda: field.press("Enter"), timeout=TIMEOUT) == "done"
    assert field.get_attribute("aria-invalid") is None


def test_isoflop_screenshots(chapter14):
    """The two charts side by side at 1280 px and stacked at 360 px, nothing past the viewport's edge, in
    both themes (the photographs are for a person to look at)."""
    w = widget(chapter14, "isoflop")
    wait_settled(w, timeout=TIMEOUT)
    plot, laws = w.locator("svg[data-role=plot]"), w.locator("svg[data-role=laws]")
    try:
        for theme in ("light", "dark"):
            chapter14.evaluate("t => { document.documentElement.dataset.theme = t; }", theme)
            screenshot_widget(w, f"isoflop-{theme}")
        chapter14.set_viewport_size({"width": 1280, "height": 900})
        a, b = plot.bounding_box(), laws.bounding_box()
        assert abs(a["y"] - b["y"]) < 1 and b["x"] > a["x"] + a["width"], (a, b)  # side by side
        chapter14.set_viewport_size({"width": 360, "height": 900})
        a, b = plot.bounding_box(), laws.bounding_box()
        assert b["y"] > a["y"] + a["height"], (a, b)  # stacked
    finally:
        chapter14.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
        chapter14.set_viewport_size({"width": 1280, "height": 900})


# ---------------------------------------------------------------------------
# Compute calculator


def fill_calc(w, compute="5.88e23", mfu="40", tokens="1e12"):
    set_fields(w, compute=compute, mfu_percent=mfu, tokens=tokens)


def test_calculator_matches_cpython(chapter14):
    from pylib.web import scaling_ops
    w = widget(chapter14, "compute-calculator")
    fill_calc(w, "1e22", "35", "2e12")
    assert run(w) == "done"
    page = result(w)
    cpython = scaling_ops.calculator(None, {"compute": "1e22", "mfu_percent": "35", "tokens": "2e12"})
    for name in ("hoffmann", "hoffmann_unrounded", "besiroglu", "rule"):
        assert page["fits"][name]["n"] == pytest.approx(cpython["fits"][name]["n"], rel=1e-9)
        assert page["fits"][name]["d"] == pytest.approx(cpython["fits"][name]["d"], rel=1e-9)
    for key in ("flops", "gpu_days", "memory_bytes", "params"):
        assert page["llama"][key] == pytest.approx(cpython["llama"][key], rel=1e-9)
    assert w.locator('tbody[data-role="fits"] tr').count() == 4  # printed Chinchilla, at the TeX's precision, refit, rule


def test_calculator_refuses_bad_input_and_recovers(chapter14):
    """Each bad value (NASTY and 0) in each field, the others good: refused with a sentence, the field
    marked invalid with a message in its slot, no NaN shown, nothing injected. After each field's
    cases the good values compute again and the field is no longer marked."""
    w = widget(chapter14, "compute-calculator")
    good = dict(compute="5.88e23", mfu_percent="40", tokens="1e12")
    for field in good:
        for bad in NASTY + ["0"]:
            case = f"{field}={bad!r}"
            enter(w, field, TIMEOUT, **{**good, field: bad})
            shown = refused(w, case, field)  # and no readout, GPU-days among them, reads NaN
            assert shown["message"].strip(), f"{case}: no sentence says what is wrong"
        fill_calc(w)
        assert run(w) == "done"
        assert w.locator(f'input[name="{field}"]').get_attribute("aria-invalid") is None


def test_calculator_refuses_a_utilisation_above_100_percent(chapter14):
    w = widget(chapter14, "compute-calculator")
    fill_calc(w, mfu="150")
    assert run(w) == "error"
    assert "utilisation" in message(w).lower()
    assert_error_in_slot(w, "mfu_percent", "utilisation")


# ---------------------------------------------------------------------------
# The form and the chart: labels, sliders, text alternative


@pytest.mark.parametrize("name", ["isoflop", "compute-calculator"])
def test_every_field_is_labelled_and_described(chapter14, name):
    assert_fields_labelled(widget(chapter14, name))


def test_isoflop_budget_slider_works_by_keyboard_and_predicts_as_it_moves(chapter14):
    from pylib.web import scaling_ops
    w = widget(chapter14, "isoflop")
    if w.locator('input[name="custom_budget"]').input_value() != "1e11":
        assert predict_at(w, "1e11") == "done"
    drive_slider(w, "custom_budget", "1e+25", "1e12", typed_pos=60)  # 320 positions over 16 decades
    w.locator('[data-slider-for="custom_budget"]').focus()
    assert settle_after(w, lambda: chapter14.keyboard.press("End"), timeout=TIMEOUT) == "done"
    page = result(w)
    assert page["prediction"]["budget"] == 1e25
    index = int(w.locator('select[name="budget_index"]').input_value())
    cpython = scaling_ops.isoflop(None, {"series": sweep()["series"], "budget_index": index, "custom_budget": "1e25"})
    assert page["prediction"]["n"] == pytest.approx(cpython["prediction"]["n"], rel=1e-9)
    expect(w.locator('[data-role="warn"]')).to_contain_text("Extrapolation")


def test_isoflop_charts_have_a_text_alternative(chapter14):
    """Both panels: a sentence each and a table each (left: every budget's points, the chosen one's seeds;
    right: every budget's optimum and the prediction)."""
    w = widget(chapter14, "isoflop")
    series = sweep()["series"]
    if w.locator('select[name="budget_index"]').input_value() != "0":
        assert choose(w, 0) == "done"
    if w.locator('input[name="custom_budget"]').input_value() != "1e20":
        assert predict_at(w, "1e20") == "done"
    page = result(w)
    left = w.locator('[data-role="plot-summary"]')
    expect(left).to_contain_text(f"{min(page['loss']):.3f}")
    expect(left).to_contain_text(f"{len(series)} budgets")
    table = chart_table(w.locator('figure[data-chart="plot"]'))
    assert len(table["rows"]) == sum(len(s["n"]) for s in series)
    assert len(table["header"]) == 3 + len(series[0]["loss_per_seed"][0])
    chosen = [r for r in table["rows"] if "(chosen)" in r[0]]
    assert len(chosen) == len(series[0]["n"]) and all(r[3] != "–" for r in chosen)
    right = w.locator('[data-role="laws-summary"]')
    expect(right).to_contain_text(f"C^{page['laws']['a']:.2f}")
    expect(right).to_contain_text("extrapolation")
    table = chart_table(w.locator('figure[data-chart="laws"]'))
    assert len(table["rows"]) == len(page["laws"]["budgets"]) + 1
    assert table["rows"][-1][-1] == "prediction (extrapolated)"


def test_calculator_mfu_slider_works_by_keyboard(chapter14):
    w = widget(chapter14, "compute-calculator")
    fill_calc(w)
    assert run(w) == "done"
    drive_slider(w, "mfu_percent", "100", "40", typed_pos=39)
    w.locator('[data-slider-for="mfu_percent"]').focus()
    assert settle_after(w, lambda: chapter14.keyboard.press("End"), timeout=TIMEOUT) == "done"
    assert result(w)["llama"]["mfu_percent"] == 100


# ---------------------------------------------------------------------------
# Chinchilla's fit on the 245 runs


def test_chinchilla_fit_matches_cpython_and_refuses_bad_choices(chapter14):
    import time
    from pylib.web import scaling_ops
    w = widget(chapter14, "chinchilla-fit")
    args = {"loss": "huber", "drop_highest": "5", "min_tokens_per_param": "0", "compute": "5.88e23"}
    set_fields(w, **args)
    started = time.perf_counter()
    assert run(w) == "done"
    print(f"page's Huber fit: {time.perf_counter() - started:.2f} s")
    page, cpython = result(w), scaling_ops.chinchilla(None, args)
    assert page["points"] == 240
    # Pyodide's arithmetic differs from CPython's in the last bits, and the Huber objective is flat along
    # a valley where A, B and the exponents trade off: both stop at the same objective (L-BFGS's ftol is
    # 2.2e-9 of it), with A and B within 1e-3 and the exponents within 1e-4 of each other.
    print("page", page["constants"], page["objective"], "cpython", cpython["constants"], cpython["objective"])
    assert page["objective"] == pytest.approx(cpython["objective"], rel=1e-7)
    for k, tol in (("E", 1e-4), ("alpha", 1e-4), ("beta", 1e-4)):
        assert page["constants"][k] == pytest.approx(cpython["constants"][k], abs=tol)
    for k in ("A", "B"):
        assert page["constants"][k] == pytest.approx(cpython["constants"][k], rel=1e-3)
    assert page["optimum"]["tokens_per_param"] == pytest.approx(cpython["optimum"]["tokens_per_param"], rel=1e-3)
    set_fields(w, loss="squares")
    assert run(w) == "done"
    assert result(w)["constants"]["beta"] > page["constants"]["beta"] + 0.05  # least squares is pulled away
    set_fields(w, loss="likelihood")
    assert run(w) == "done"
    table = result(w)["constants"]  # Besiroglu et al.'s table, computed in the page
    assert (round(table["E"], 2), round(table["A"], 2), round(table["B"], 2)) == (1.82, 482.01, 2085.43)
    assert abs(table["alpha"] - 0.3478) < 1e-4 and abs(table["beta"] - 0.3658) < 1e-4
    set_fields(w, drop_highest="245")
    assert run(w) == "error"
    assert "at least five runs" in w.inner_text()
    assert w.locator('input[name="drop_highest"]').get_attribute("aria-invalid") == "true"
    set_fields(w, drop_highest="5", min_tokens_per_param="1000")  # no run saw 1,000 tokens per parameter
    assert run(w) == "error"
    assert w.locator('input[name="min_tokens_per_param"]').get_attribute("aria-invalid") == "true"
    set_fields(w, min_tokens_per_param="0")
    for bad in ("1e99", "<b class=injected>x</b>"):
        set_fields(w, drop_highest="5", compute=bad)
        assert run(w) == "error"
        assert w.locator('input[name="compute"]').get_attribute("aria-invalid") == "true"
    no_injected_markup(chapter14)


def test_chinchilla_fit_checks_a_field_on_leaving_it_and_keeps_the_last_fit(chapter14):
    """The fit runs only on Fit: after a good fit, values typed and left with Tab get scaling_chinchilla's
    own message under their field (the same words the fit gives), among them the one that needs the data:
    leaving out 245 of the 245 runs leaves too few. The fixed values clear them, and the fit on show (its
    result, readouts and table) stays; no fit runs."""
    from test_field_checks import leave, shown

    from pylib.web import InputError, scaling_ops
    w = widget(chapter14, "chinchilla-fit")
    good = {"loss": "huber", "drop_highest": "5", "min_tokens_per_param": "0", "compute": "5.88e23"}
    set_fields(w, **good)
    assert run(w) == "done"
    before = shown(w)
    for name, bad in (("drop_highest", "245"), ("min_tokens_per_param", "1000"), ("compute", "1e99"), ("compute", "lots")):
        with pytest.raises(InputError) as refusal:
            scaling_ops.validate_chinchilla({**good, name: bad})
        expect(leave(w, name, bad)).to_have_text(refusal.value.errors[name])
        expect(w.locator(f'input[name="{name}"]')).to_have_attribute("aria-invalid", "true")
        assert shown(w) == before, (name, bad)
        expect(leave(w, name, good[name])).to_be_empty()
        assert w.locator(f'input[name="{name}"]').get_attribute("aria-invalid") is None
    assert shown(w) == before


def test_the_page_is_accessible_in_both_themes_and_reflows_on_a_phone(chapter14):
    # Last: after the tests above, with the widgets as they left them (a11y_checks.check_accessibility).
    check_accessibility(chapter14, "chapters/14-scaling-laws.html")
