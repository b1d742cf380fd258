"""Checks of a widget built on the widget kit (site/templates/macros.html, site/js/widget-kit.js), for
the chapters' browser tests: every field labelled and tied to its hint and error slot, a slider driven
by the keyboard with its number field following (and the reverse), and bad input shown in the slot of
the field it concerns. (axe-core itself runs over every page in test_a11y.py.)"""

# Every input, select and textarea of the widget's form: its label text (label[for], a wrapping label or
# aria-label), the ids its aria-describedby names and which of them do not exist, and whether it is a
# kit field (inside [data-field]) and which id its error slot has.
FIELDS = """root => [...root.querySelectorAll('[data-role="form"] :is(input, select, textarea)')]
  .filter((el) => !["hidden", "submit", "button"].includes(el.type))
  .map((el) => {
    const byFor = el.id ? document.querySelector(`label[for="${CSS.escape(el.id)}"]`) : null;
    const wrap = el.closest("label");
    const described = (el.getAttribute("aria-describedby") || "").split(/\\s+/).filter(Boolean);
    const field = el.closest("[data-field]");
    const slot = field && field.querySelector("[data-error-for]");
    return {
      name: el.name || `slider for ${el.dataset.sliderFor}`, type: el.type,
      label: ((byFor && byFor.textContent) || (wrap && wrap.textContent) || el.getAttribute("aria-label") || "").trim(),
      kit: Boolean(field) && !el.dataset.sliderFor, described,
      missing: described.filter((id) => !document.getElementById(id)),
      slot: slot ? slot.id : null,
    };
  })"""


def assert_fields_labelled(w):
    """Every field has a label; every kit field's aria-describedby names ids that exist, its error slot
    among them. Returns the fields' names."""
    fields = w.evaluate(FIELDS)
    assert fields, "the widget has no form fields"
    for f in fields:
        assert f["label"], f"unlabelled field: {f}"
        if f["kit"]:
            assert f["described"] and not f["missing"], f"aria-describedby names no element, or a missing one: {f}"
            assert f["slot"] and f["slot"] in f["described"], f"the error slot is not in aria-describedby: {f}"
    return [f["name"] for f in fields]


def drive_slider(w, name, end, typed):
    """Focus the slider of field `name`, press End: the field reads `end` (the slider's maximum, as the
    field writes it); ArrowLeft lowers it; the slider's aria-valuetext is the field's text. Then type
    `typed` in the field: the slider moves, and the field keeps the text as typed. Returns the slider
    positions (at the end, after ArrowLeft, after typing)."""
    page = w.page
    field = w.locator(f'[name="{name}"]')
    slider = w.locator(f'[data-slider-for="{name}"]')
    slider.focus()
    page.keyboard.press("End")
    assert field.input_value() == end
    at_end = int(slider.input_value())
    assert at_end == int(slider.get_attribute("max"))
    page.keyboard.press("ArrowLeft")
    left = float(field.input_value())
    assert left < float(end)
    assert int(slider.input_value()) == at_end - 1
    assert slider.get_attribute("aria-valuetext") == field.input_value()
    field.fill(typed)
    assert field.input_value() == typed
    after = int(slider.input_value())
    assert after != at_end - 1
    return at_end, at_end - 1, after


def assert_error_in_slot(w, name):
    """The field `name` is marked invalid and its error slot, named by its aria-describedby, says why."""
    field = w.locator(f'[name="{name}"]')
    slot = w.locator(f'[data-error-for="{name}"]')
    assert field.get_attribute("aria-invalid") == "true"
    assert slot.inner_text().strip(), f"no message under the field {name}"
    assert slot.get_attribute("id") in (field.get_attribute("aria-describedby") or "").split()
    return slot.inner_text()
