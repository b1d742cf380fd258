"""Checks of a widget built on the widget kit (site/templates/macros.html, site/js/widget-kit.js), for
the chapters' browser tests: every field labelled and tied to its hint and error slot, a slider driven
by the keyboard with its number field following (and the reverse), and bad input shown in the slot of
the field it concerns. (axe-core itself runs over every page in test_a11y.py.)"""

import math

from playwright.sync_api import expect

from conftest import settle_after

# Every input, select and textarea of the widget (and any file input): its label text (label[for], a
# wrapping label or aria-label), the ids its aria-describedby names and which of them do not exist, and
# which id its error slot ([data-error-for=name]) has. Sliders, checkboxes, radios and file inputs need a
# label only; every other field also needs a hint/error description that exists, its error slot among it.
FIELDS = """root => [...root.querySelectorAll('[data-role="form"] :is(input, select, textarea), form :is(input, select, textarea), input[type=file]')]
  .filter((el, i, all) => !["hidden", "submit", "button"].includes(el.type) && all.indexOf(el) === i)
  .map((el) => {
    const byFor = el.id ? document.querySelector(`label[for="${CSS.escape(el.id)}"]`) : null;
    const wrap = el.closest("label");
    const described = (el.getAttribute("aria-describedby") || "").split(/\\s+/).filter(Boolean);
    const slot = el.name ? root.querySelector(`[data-error-for="${CSS.escape(el.name)}"]`) : null;
    return {
      name: el.name || `slider for ${el.dataset.sliderFor}`, type: el.type,
      label: ((byFor && byFor.textContent) || (wrap && wrap.textContent) || el.getAttribute("aria-label") || "").trim(),
      described: !["range", "checkbox", "radio", "file"].includes(el.type), ids: described,
      missing: described.filter((id) => !document.getElementById(id)),
      slot: slot ? slot.id : null,
    };
  })"""


def assert_fields_labelled(w):
    """Every field has a label; every field but sliders, checkboxes, radios and file inputs has an
    aria-describedby naming ids that exist, its error slot among them. Returns the fields' names."""
    fields = w.evaluate(FIELDS)
    assert fields, "the widget has no form fields"
    for f in fields:
        assert f["label"], f"unlabelled field: {f}"
        if f["described"]:
            assert f["ids"] and not f["missing"], f"aria-describedby names no element, or a missing one: {f}"
            assert f["slot"] and f["slot"] in f["ids"], f"no error slot, or not in aria-describedby: {f}"
    return [f["name"] for f in fields]


def drive_slider(w, name, end, typed, typed_pos=None):
    """Focus the slider of field `name`, press End: the field reads `end` (the slider's maximum, as the
    field writes it) and so does the slider's aria-valuetext; ArrowLeft lowers it one position and
    ArrowRight brings it back. Then type `typed` in the field: the slider moves (to position typed_pos
    when given), and the field keeps the text as typed. Returns the slider positions (at the end, after
    ArrowLeft, after typing)."""
    page = w.page
    field = w.locator(f'[name="{name}"]')
    slider = w.locator(f'[data-slider-for="{name}"]')
    slider.focus()
    page.keyboard.press("End")
    assert field.input_value() == end
    assert slider.get_attribute("aria-valuetext") == end
    at_end = int(slider.input_value())
    assert at_end == int(slider.get_attribute("max"))
    page.keyboard.press("ArrowLeft")
    assert float(field.input_value()) < float(end)
    assert int(slider.input_value()) == at_end - 1
    assert slider.get_attribute("aria-valuetext") == field.input_value()
    page.keyboard.press("ArrowRight")
    assert field.input_value() == end
    field.fill(typed)
    assert field.input_value() == typed
    after = int(slider.input_value())
    if typed_pos is not None:
        assert after == typed_pos
    else:
        assert after != at_end
    return at_end, at_end - 1, after


def error_slot(w, name):
    """The field's error slot, checked to be one its aria-describedby names."""
    slot = w.locator(f'[data-error-for="{name}"]')
    assert slot.get_attribute("id") in (w.locator(f'[name="{name}"]').first.get_attribute("aria-describedby") or "").split()
    return slot


def assert_error_in_slot(w, name, text=None, status_line='[data-role="message"]'):
    """The field `name` is marked invalid, its error slot (named by its aria-describedby) is visible and
    says why (containing text, when given), and the status line (a widget with two forms has one for
    each) tells the reader to check the form.
    Returns the slot's text."""
    from playwright.sync_api import expect
    slot = error_slot(w, name)
    expect(slot).to_be_visible()
    assert slot.inner_text().strip(), f"no message under the field {name}"
    if text:
        expect(slot).to_contain_text(text)
    expect(w.locator(f'[name="{name}"]').first).to_have_attribute("aria-invalid", "true")
    expect(w.locator(status_line)).to_contain_text("check")
    return slot.inner_text()


def round_ticks(chart):
    """The values of an SVG chart's axis labels (text[data-tick], the number each stands at), after
    checking that they are round: evenly spaced by a step of 1, 2 or 5 x 10^k, each a multiple of the
    step, and each label reading the number it stands at (not 2.34, 2.51 or 0.0, 4.1, 8.3)."""
    ticks = chart.locator("text[data-tick]").evaluate_all("els => els.map((e) => [e.textContent, +e.dataset.tick])")
    assert len(ticks) >= 3, ticks
    values = [v for _, v in ticks]
    step = values[1] - values[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert min(abs(mantissa - m) for m in (1, 2, 5, 10)) < 1e-9, ticks
    assert all(abs(b - a - step) < 1e-9 * step for a, b in zip(values, values[1:])), ticks
    assert all(abs(v / step - round(v / step)) < 1e-9 for v in values), ticks
    assert all(abs(float(text) - v) < 1e-9 * step for text, v in ticks), ticks
    return values


def chart_table(scope, role=None):
    """The chart's text-alternative table, read the way a reader gets it: open its <details> with a
    click, wait until it is filled, read it, and close it again. Returns {"header": [th texts],
    "rows": [[cell texts, the row's header first], ...]}.

    scope holds one chart frame, or give role, the details' data-role (e.g. "chart-weights-data")
    for a widget with several charts. The table is written by the frame's "toggle" listener (Plot's,
    or an SVG chart's), and "toggle" fires a task after the click, so reading the table at once can
    read it empty or stale; this waits for the event (a listener added now runs after the chart's
    own, which the widget added when it started). This is the only way a test reads a chart's table:
    tests/test_browser_tests.py fails a browser test that reaches for the table itself."""
    details = scope.locator(f'details[data-role="{role}"]' if role else ".kit-chart-data")
    assert details.count() == 1, f"{details.count()} chart tables match {role or '.kit-chart-data'} here"
    assert details.get_attribute("open") is None, "the chart's table is already open"

    def toggled():
        """Arm a one-shot toggle listener, click the summary, return whether the table ended up open."""
        details.evaluate("""d => { d.toggled = new Promise((done) => {
            d.addEventListener("toggle", () => done(d.open), { once: true });
            setTimeout(() => done(null), 10_000);
        }); }""")
        details.locator("summary").click()
        state = details.evaluate("d => d.toggled")
        assert state is not None, "no toggle event within 10 s of the click on the chart table's summary"
        return state

    assert toggled(), "the chart's data table closed instead of opening"
    table = details.evaluate("""d => ({
        header: [...d.querySelectorAll("thead th")].map((c) => c.textContent),
        rows: [...d.querySelectorAll("tbody tr")].map((tr) => [...tr.children].map((c) => c.textContent)),
    })""")
    assert not toggled(), "the chart's data table did not close again"
    return table


def set_fields(w, **fields):
    """Give w's fields these values as a reader does (type into a field, choose in a select), leaving
    alone the ones that already hold them: one call reads them all, where each fill or choice first
    waits for its field to be ready for input, which adds up on a busy machine."""
    now = w.evaluate("""(el, names) => Object.fromEntries(names.map((n) => {
        const f = el.querySelector(`[name="${n}"]`);
        return [n, [f.tagName, f.value]];
    }))""", list(fields))
    for name, value in fields.items():
        tag, current = now[name]
        if current == str(value):
            continue
        field = w.locator(f'[name="{name}"]')
        if tag == "SELECT":
            field.select_option(str(value))
        else:
            field.fill(str(value))


# Everything a refused input shows, read in one evaluate (each locator read is a round trip, and the
# bad-input tests loop over many cases): the status, data-result, the field's aria-invalid and
# aria-describedby, its error slot (id, visible, text), the status line, every readout's text, where the
# focus is, and any injected markup. Read once the widget has settled (settle_after / wait_settled): the kit writes the
# slots, aria-invalid and the message before it sets data-status, and moves the focus just after, in
# the same task.
REFUSAL = """(root, name) => {
  const field = root.querySelector(`[name="${CSS.escape(name)}"]`);
  const slot = root.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
  const box = slot && slot.getBoundingClientRect();
  return {
    status: root.dataset.status, result: root.getAttribute("data-result"),
    invalid: field && field.getAttribute("aria-invalid"),
    described: ((field && field.getAttribute("aria-describedby")) || "").split(/\\s+/).filter(Boolean),
    slot: slot && slot.id, slot_text: slot ? slot.innerText : "",
    slot_visible: !!slot && box.width > 0 && box.height > 0 && getComputedStyle(slot).visibility !== "hidden",
    message: root.querySelector('[data-role="message"]').textContent,
    readouts: Object.fromEntries([...root.querySelectorAll("[data-readout]")].map((r) => [r.dataset.readout, r.innerText.trim()])),
    focused: !!field && document.activeElement === field,
    output_hidden: !!root.querySelector('[data-role="output"]')?.hidden,
    injected: document.querySelectorAll("[data-widget] b.injected, [data-widget] img[src='x']").length,
  };
}"""


def refused(w, case, name=None, text=None):
    """The widget refused case's input: status "error", no data-result, nothing injected, no readout
    reading NaN, and (given the field's name) assert_error_in_slot's checks in one read: the field is
    aria-invalid, its error slot is one its aria-describedby names, visible and saying why (containing
    text, when given, spaces as the page lays them out), and the status line says to check the form.
    Returns the read."""
    s = w.evaluate(REFUSAL, name or "")
    assert s["status"] == "error", f"{case}: status {s['status']}, message {s['message']!r}"
    assert s["result"] is None, f"{case}: a data-result after an error"
    assert s["injected"] == 0, f"{case}: markup was injected"
    assert not [k for k, v in s["readouts"].items() if "NaN" in v], f"{case}: a readout reads NaN: {s['readouts']}"
    if name:
        assert s["slot"] and s["slot"] in s["described"], f"{case}: the error slot is not named by aria-describedby: {s}"
        assert s["slot_visible"] and s["slot_text"].strip(), f"{case}: no visible message under {name}: {s}"
        assert text is None or text in " ".join(s["slot_text"].split()), f"{case}: {text!r} not in {s['slot_text']!r}"
        assert s["invalid"] == "true", f"{case}: {name} is not aria-invalid"
        assert "check" in s["message"], f"{case}: the status line does not say to check the form: {s['message']!r}"
    return s


def enter(w, field, timeout=180_000, click=False, **fields):
    """Once Run is enabled, give w these fields (set_fields: only the ones that change are typed), press
    Enter in field (the form's Run, from the keyboard: a click's checks cost a tenth of a second of the
    page's CPU each), or click Run when click, and wait for the answer on the page's own signals
    (conftest.settle_after's wait). Returns the status it ended in; refused(w, ...) then reads what a
    refusal shows."""
    run = w.locator('[data-action="run"]')
    expect(run).to_be_enabled(timeout=timeout)
    set_fields(w, **fields)
    if click:
        return settle_after(w, run.click, timeout=timeout)
    w.locator(f'input[name="{field}"]').focus()
    return settle_after(w, lambda: w.page.keyboard.press("Enter"), timeout=timeout)


SCREENSHOTS = __import__("pathlib").Path(__file__).resolve().parents[2] / ".cache" / "screenshots"

# The widget's box and every descendant that sticks out past the viewport's right edge (a phone's
# 360 px): a tag, class and how far past, for the message. Left out: what sits in a box that scrolls
# sideways on purpose (the chart table's .kit-table-scroll, a widget's own .kit-scroll-x, a code block).
OVERFLOW = """root => {
    const W = document.documentElement.clientWidth;
    const out = [...root.querySelectorAll("*")].filter((el) => {
        const r = el.getBoundingClientRect();
        if (!r.width || el.closest(".kit-table-scroll, .kit-scroll-x, pre")) return false;
        return r.right > W + 1 && getComputedStyle(el).position !== "fixed";
    }).slice(0, 5).map((el) => `${el.tagName.toLowerCase()}.${el.className.baseVal ?? el.className} +${Math.round(el.getBoundingClientRect().right - W)} px`);
    return { page: document.documentElement.scrollWidth - W, out };
}"""


def screenshot_widget(w, name, widths=(1280, 360), height=900):
    """The done-when of issue 26: the widget photographed at a desktop's and a phone's width
    (.cache/screenshots/NAME-WIDTH.png, for a person to look at), and at each width nothing of it
    sticks out past the viewport (a box that scrolls sideways on purpose is left out: a table's
    scroller, a code block). The page's own viewport is put back afterwards."""
    page = w.page
    before = page.viewport_size
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        for width in widths:
            page.set_viewport_size({"width": width, "height": height})
            page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
            w.scroll_into_view_if_needed()
            # a chart redraws at its new width in a ResizeObserver callback (plot.js onResize): wait
            # up to 10 s for everything to fit, then say what does not
            fitted = f"root => {{ const f = ({OVERFLOW})(root); return f.page <= 1 && !f.out.length; }}"
            try:
                page.wait_for_function(f"() => ({fitted})(document.getElementById({w.get_attribute('id')!r}))", timeout=10_000)
            except Exception:
                pass
            fits = w.evaluate(OVERFLOW)
            assert fits["page"] <= 1 and not fits["out"], f"{name} at {width} px: {fits}"
            w.screenshot(path=str(SCREENSHOTS / f"{name}-{width}.png"))
    finally:
        if before:
            page.set_viewport_size(before)


# ---------------------------------------------------------------------------
# A field checked when the reader leaves it (widget-kit.js checkOnLeave, op check_args)


def leave_field(w, name, text, scope=None, timeout=120_000):
    """Type text into field name (inside scope, by default the widget w), leave it with Tab, and wait
    for Python's check of it (w's data-checks moves on and nothing is pending). Returns the field's
    error slot."""
    scope = scope or w
    field = scope.locator(f'input[name="{name}"]')
    before = int(w.get_attribute("data-checks") or 0)
    field.fill(text)
    field.press("Tab")
    w.page.wait_for_function("([el, n]) => Number(el.dataset.checks || 0) > n && !('pending' in el.dataset)",
                             arg=[w.element_handle(), before], timeout=timeout)
    return scope.locator(f'[data-error-for="{name}"]')


# what the widget shows of its last answer: status, settles, result, message, readouts, tables, charts' sentences
SHOWN_JS = """el => ({status: el.dataset.status, settles: el.dataset.settles, result: el.dataset.result ?? null,
    message: el.querySelector('[data-role="message"]').textContent,
    cells: [...el.querySelectorAll('[data-readout], tbody td, tbody th, .kit-chart-summary')].map((c) => c.textContent)})"""

# the form's values as the widget sends them (sliders left out: they follow their fields)
FORM_JS = """el => Object.fromEntries([...el.querySelectorAll('[data-role="form"] [name]')]
    .filter((i) => i.type !== 'range' && ((i.type !== 'radio' && i.type !== 'checkbox') || i.checked))
    .map((i) => [i.name, i.value]))"""


def python_refuses(validate, args):
    """The op's own check in CPython (the function the op calls): its messages for args, by field."""
    from pylib.web import InputError
    try:
        validate(args)
    except InputError as e:
        return e.errors
    return {}


# what a calculator shows of its last answer: a check on leaving a field must leave all of it as it was
SHOWN_LAST = """el => [el.dataset.status, el.dataset.settles, el.dataset.result,
    el.querySelector('[data-role="message"]').textContent,
    [...el.querySelectorAll('[data-readout], tbody td, tbody th')].map((c) => c.textContent)]"""


def expected_message(validate, args, name):
    """pylib's message for field name in args: what the op itself would refuse them with."""
    from pylib.web import InputError
    try:
        validate(args)
    except InputError as e:
        return e.errors[name]
    raise AssertionError(f"pylib accepts {args}")
