"""A field is checked when the reader leaves it, by the op's own Python (widget-kit.js checkOnLeave,
op check_args in pylib/web/check_ops.py), before any Start or Compute: the message appears in the
field's slot, goes when the value is fixed, and the last result and its drawing stay as they were.
Where the page's Python is not up (the index starts it on demand; a chapter still loading it),
leaving a field does nothing and starts nothing."""

import pytest
from playwright.sync_api import expect

from conftest import PageLog, chapter_fixture, chapter_url, result, settle_after, widget
from kit_checks import chart_table, screenshot_widget

chapter1 = chapter_fixture("01-")
chapter14 = chapter_fixture("14-")

RUN_TIMEOUT = 300_000


def checks(w):
    return int(w.get_attribute("data-checks") or 0)


def leave(w, name, text):
    """Type text into field name, leave it with Tab, and wait for the check's answer (data-checks moves
    on and nothing is pending). Returns the field's slot."""
    field = w.locator(f'input[name="{name}"]')
    before = checks(w)
    field.fill(text)
    field.press("Tab")
    w.page.wait_for_function("([el, n]) => Number(el.dataset.checks || 0) > n && !('pending' in el.dataset)",
                             arg=[w.element_handle(), before], timeout=60_000)
    return w.locator(f'[data-error-for="{name}"]')


def shown(w):
    """What the widget shows of its last answer: status, settles, data-result and every readout and table cell."""
    return w.evaluate("""el => ({status: el.dataset.status, settles: el.dataset.settles, result: el.dataset.result,
        message: el.querySelector('[data-role="message"]').textContent,
        cells: [...el.querySelectorAll('[data-readout], tbody td, tbody th')].map((c) => c.textContent)})""")


def test_the_train_widget_checks_a_field_on_leaving_it_and_keeps_the_last_run(chapter1):
    """After a short run, nonsense and then an out-of-range learning rate each get Python's message under
    the field as the reader leaves it, without a Start; a value only Python reads as a number (1_000
    steps) gets none; the fixed value clears the message. No run starts, and the run's readouts, chart
    and its table stay the run's."""
    w = widget(chapter1, "train")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=RUN_TIMEOUT)
    w.locator('[data-action="reset-settings"]').click()
    w.locator('input[name="steps"]').fill("3")
    assert settle_after(w, lambda: w.locator('[data-action="run"]').click(), timeout=RUN_TIMEOUT) == "done"
    assert result(w)["steps"] == 3
    table = chart_table(w)  # fills the chart's table first: shown() reads its cells too
    before = shown(w)

    lr = w.locator('input[name="lr"]')
    slot = leave(w, "lr", "fast")
    expect(slot).to_have_text("Learning rate must be a number, not 'fast'.")
    expect(lr).to_have_attribute("aria-invalid", "true")
    slot = leave(w, "lr", "5000")
    expect(slot).to_have_text("Learning rate must be greater than 0 and at most 1000; got '5000'.")
    assert shown(w) == before and chart_table(w) == table

    slot = leave(w, "lr", "3e-3")
    expect(slot).to_be_empty()
    assert lr.get_attribute("aria-invalid") is None
    steps = leave(w, "steps", "1_000")  # float("1_000") is 1000.0: the run would take it, so the check does
    expect(steps).to_be_empty()
    assert shown(w) == before and chart_table(w) == table
    assert w.get_attribute("data-run-started") is None

    # Start still checks, with the same message
    leave(w, "steps", "0")
    message = w.locator('[data-error-for="steps"]').inner_text()
    assert message.startswith("Steps must be between 1 and")
    assert settle_after(w, lambda: w.locator('[data-action="run"]').click(), timeout=RUN_TIMEOUT) == "error"
    expect(w.locator('[data-error-for="steps"]')).to_have_text(message)
    w.locator('[data-action="reset-settings"]').click()


def test_the_compute_calculator_checks_a_field_on_leaving_it_and_keeps_its_figures(chapter14):
    """The compute calculator (ch14) computes typed values only on Compute: leaving its budget field with
    nonsense, a negative or a huge value shows Python's message under it, and the figures stay the last
    good ones; a fix clears it; Compute then gives the same message the check gave."""
    w = widget(chapter14, "compute-calculator")
    expect(w).to_have_attribute("data-status", "done", timeout=RUN_TIMEOUT)
    before = shown(w)
    assert before["result"]
    cases = [("lots", "The compute budget (FLOPs) must be a number, not 'lots'."),
             ("-5", "The compute budget (FLOPs) must be greater than 0 and at most 1e+30; got -5."),
             ("1e31", "The compute budget (FLOPs) must be greater than 0 and at most 1e+30; got 1e+31."),
             ("<b class=injected>1</b>", "The compute budget (FLOPs) must be a number, not '<b class=injected>1</b>'.")]
    for text, message in cases:
        slot = leave(w, "compute", text)
        expect(slot).to_have_text(message)
        expect(w.locator('input[name="compute"]')).to_have_attribute("aria-invalid", "true")
        assert shown(w) == before, text
    assert chapter14.locator("[data-widget] b.injected").count() == 0
    screenshot_widget(w, "compute-calculator-checked-on-leaving")

    slot = leave(w, "compute", "1_000e21")  # Python's float() reads it (1e24); JavaScript's Number() would not
    expect(slot).to_be_empty()
    assert w.locator('input[name="compute"]').get_attribute("aria-invalid") is None
    assert shown(w) == before

    leave(w, "mfu_percent", "150")
    message = "The utilisation (%) must be greater than 0 and at most 100; got 150."
    expect(w.locator('[data-error-for="mfu_percent"]')).to_have_text(message)
    assert settle_after(w, lambda: w.locator('[data-action="run"]').click()) == "error"
    expect(w.locator('[data-error-for="mfu_percent"]')).to_have_text(message)
    leave(w, "mfu_percent", "40")
    expect(w.locator('[data-error-for="mfu_percent"]')).to_be_empty()
    w.locator('[data-action="reset-settings"]').click()
    assert settle_after(w, lambda: w.locator('[data-action="run"]').click()) == "done"


@pytest.fixture(scope="module")
def site(fresh_context):
    """A context of its own, not the reader's profile, and the site's URL: (context, base URL)."""
    return fresh_context


def test_on_the_index_leaving_a_control_starts_no_python_and_throws_nothing(site):
    """The index starts Python only when Start is pressed: Tabbing through its widget's controls
    sends no check, so Python does not start (html has no data-pyodide), and the console stays clean."""
    context, url = site
    page = context.new_page()
    log = PageLog(page)
    page.goto(url)
    w = widget(page, "mini-train")
    w.scroll_into_view_if_needed()
    expect(w.locator('[data-action="run"]')).to_be_enabled()
    w.locator('[data-action="run"]').focus()
    for _ in range(6):
        page.keyboard.press("Tab")
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Tab")
    assert page.evaluate("document.documentElement.dataset.pyodide ?? null") is None
    assert w.get_attribute("data-pending") is None and checks(w) == 0
    assert log.problems() == []
    page.close()


def test_while_python_is_still_loading_leaving_a_field_sends_no_check_and_throws_nothing(site):
    """A chapter whose Python never comes up (its worker script answers nothing): a bad value, left,
    gets no message and no pending check (Start will check it), and the console stays clean."""
    context, url = site
    page = context.new_page()
    log = PageLog(page)
    page.route("**/static/js/worker.js", lambda route: route.fulfill(  # COEP: the page is cross-origin isolated
        status=200, content_type="text/javascript", headers={"Cross-Origin-Embedder-Policy": "require-corp"},
        body="self.addEventListener('message', () => {});"))
    page.goto(chapter_url(url, "14-"))
    expect(page.locator("html")).to_have_attribute("data-pyodide", "loading")
    w = widget(page, "compute-calculator")
    w.scroll_into_view_if_needed()
    field = w.locator('input[name="compute"]')
    field.fill("lots")
    field.press("Tab")
    assert w.get_attribute("data-pending") is None and checks(w) == 0
    expect(w.locator('[data-error-for="compute"]')).to_be_empty()
    assert page.evaluate("document.documentElement.dataset.pyodide") == "loading"
    assert log.problems() == []
    page.close()
