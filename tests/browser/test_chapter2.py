"""Chapter 2 in a real browser: the window, BPE, packed-mask/leak, mixture and own-text widgets work
on the real page and worker, agree with CPython where they compute the same thing, refuse bad
input with a visible message (nothing injected), and stop when asked. One shared page
(conftest.chapter2); a console error or a request off 127.0.0.1 fails any test."""

import json
import math
import re

import numpy as np
from playwright.sync_api import expect

from a11y_checks import check_accessibility
from conftest import chapter_fixture, corpus, settle_after, settles, wait_settled, widget
from kit_checks import assert_error_in_slot, assert_fields_labelled, chart_table, drive_slider, leave_field, screenshot_widget, set_fields

chapter2 = chapter_fixture("02-")
TIMEOUT = 120_000  # ms
MARKUP = '<img src=x onerror="window.__pwned=1"><b>bold</b><script>window.__pwned=1</script>'
# A 10 MB paste (10,000,000 characters), set as the box's value. Words, not one unbroken 10-million-letter
# word: the browser must lay the box out once it holds them, and prose it lays out several times faster.
PASTE_10MB = "el => { el.value = 'abcd efghi'.repeat(1000000); }"


def press(w, action="run", **fields):
    """Fill fields (by name) and press the action button. Returns the widget's settles() count from
    before, for wait_settled(w, after=...)."""
    expect(w.locator(f'[data-action="{action}"]')).to_be_enabled(timeout=TIMEOUT)
    before = settles(w)
    for name, value in fields.items():
        w.locator(f'[name="{name}"]').fill(str(value))
    w.locator(f'[data-action="{action}"]').click()
    return before


def press_10mb(w, box, **fields):
    """Fill fields, then paste 10 MB into the text box `box`, press Run and wait for the answer, which
    must be an error."""
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    for name, value in fields.items():
        w.locator(f'[name="{name}"]').fill(str(value))
    before = settles(w)
    w.locator(f'textarea[name="{box}"]').evaluate(PASTE_10MB)
    # the page lays the box out once it holds the paste: a busy machine takes a while
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    w.locator('[data-action="run"]').click()
    assert wait_settled(w, timeout=TIMEOUT, after=before) == "error"


def submit(w, action="run", timeout=TIMEOUT, **fields):
    """press(), then wait for the answer to it; returns the status it ended in."""
    before = press(w, action, **fields)
    return wait_settled(w, timeout=timeout, after=before)


def load_excerpt(w, start, n_chars):
    """BPE's "Load an excerpt": its call disables Learn merges (at the click) until the text is in the
    box, so Learn merges enabled again means the box holds this excerpt. Returns the text."""
    w.locator('[name="start"]').fill(str(start))
    w.locator('[name="n_chars"]').fill(str(n_chars))
    w.locator('[data-action="excerpt"]').click()
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    expect(w.locator('[data-action="excerpt"]')).to_be_enabled()
    assert w.get_attribute("data-status") == "ready", w.locator('[data-role="message"]').text_content()
    return w.locator("textarea").input_value()


def nothing_injected(page):
    assert page.evaluate("() => window.__pwned === undefined")
    assert page.locator('.widget img, .widget b, .widget script:not([type="application/json"])').count() == 0


# What a refused input shows, read in one call (a read per check costs a round trip, and the bad-input
# tests below loop over many cases): the checks of kit_checks.assert_error_in_slot (the field marked
# invalid, its error slot named by its aria-describedby, visible and saying why, the status line
# telling the reader to check the form), with the widget's status and result, the focus, and
# nothing_injected's. Read once the widget has settled: reportError writes them all before it does.
REFUSED_JS = """(el, [name, line]) => {
  const f = el.querySelector(`[name="${name}"]`), slot = el.querySelector(`[data-error-for="${name}"]`);
  const box = slot && slot.getBoundingClientRect(), status = el.querySelector(line);
  return {
    status: el.dataset.status, result: el.dataset.result ?? null, leak: el.dataset.leak ?? null,
    invalid: f.getAttribute("aria-invalid"),
    slot_described: !!slot && (f.getAttribute("aria-describedby") || "").split(/\\s+/).includes(slot.id),
    slot: slot ? slot.innerText.trim() : "",
    slot_visible: !!box && box.width > 0 && box.height > 0 && getComputedStyle(slot).visibility !== "hidden",
    line: status ? status.textContent : "", line_class: status ? status.className : "",
    focused: document.activeElement === f,
    injected: document.querySelectorAll('.widget img, .widget b, .widget script:not([type="application/json"])').length,
    pwned: window.__pwned !== undefined,
  };
}"""


def refused(w, name, case, text=None, status_line='[data-role="message"]'):
    """After a settled call: it ended in "error", shown as assert_error_in_slot requires (containing
    text, when given), and nothing_injected holds. Every message names the case. Returns the state."""
    st = w.evaluate(REFUSED_JS, [name, status_line])
    assert st["status"] == "error", f"{case!r}: {st}"
    assert st["slot_described"], f"{case!r}: the error slot of {name} is not in its aria-describedby"
    assert st["slot_visible"] and st["slot"], f"{case!r}: no visible message under the field {name}: {st}"
    if text:
        assert text in st["slot"], f"{case!r}: {text!r} not in {st['slot']!r}"
    assert st["invalid"] == "true", f"{case!r}: {name} not marked aria-invalid"
    assert "check" in st["line"], f"{case!r}: the status line does not say to check the form: {st['line']!r}"
    assert not st["pwned"] and st["injected"] == 0, f"{case!r}: markup became an element"
    return st


def session():
    from pylib import web

    s = web.Session()
    s.vocab, s.train_tokens, s.val_tokens = corpus()
    return s


# ---------------------------------------------------------------------------
# The widget kit: labels, sliders, error slots, charts' text alternatives

WIDGETS = ["windows", "bpe", "packmask", "dedup", "mixture", "owntext"]


def test_no_chart_shows_empty_axes_before_its_data(chapter2):
    """Before a run, a chart frame shows its placeholder sentence, not empty axes."""
    for name in ("mixture", "owntext"):
        w = widget(chapter2, name)
        expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
        svg = w.locator('svg[data-role="chart"]')
        assert svg.evaluate("el => el.childElementCount") == 0 and not svg.is_visible()
        expect(w.locator('[data-role="chart-summary"]')).to_contain_text("drawn here")


def test_every_field_is_labelled_and_tied_to_its_hint_and_error(chapter2):
    names = {}
    for name in WIDGETS:
        w = widget(chapter2, name)
        expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
        names[name] = assert_fields_labelled(w)
        # one polite live region per widget, the announcer: the message and readouts are not live
        assert w.locator("[aria-live]").count() == 1, name
        assert w.locator("[data-role=message][aria-live], [data-readout][aria-live]").count() == 0, name
    assert {"start", "split"} <= set(names["windows"]) and "slider for vocab_size" in names["bpe"]
    assert {"start", "mask", "position"} <= set(names["packmask"]) and "slider for bands" in names["dedup"]


def test_the_weight_slider_works_from_the_keyboard_and_follows_the_field(chapter2):
    w = widget(chapter2, "mixture")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    at_end, left, typed = drive_slider(w, "weight", "1", "0.25")
    assert at_end == 20 and typed == 5  # a linear slider in 0.05 steps
    w.locator('[data-slider-for="weight"]').focus()
    chapter2.keyboard.press("Home")
    assert w.locator('input[name="weight"]').input_value() == "0"
    chapter2.keyboard.press("ArrowRight")
    assert w.locator('input[name="weight"]').input_value() == "0.05"
    w.locator('input[name="weight"]').fill("0.5")
    # the steps slider is on a log scale: End is the limit, typing moves it
    field, slider = w.locator('input[name="steps"]'), w.locator('[data-slider-for="steps"]')
    slider.focus()
    chapter2.keyboard.press("End")
    assert field.input_value() == "2000"
    field.fill("400")
    assert int(slider.input_value()) == round(math.log10(400 / 10) / math.log10(2000 / 10) * 200)


def test_bad_input_shows_under_its_field_and_focus_goes_there(chapter2):
    w = widget(chapter2, "owntext")
    w.locator("textarea").fill(OWN_TEXT)
    w.locator('input[name="steps"]').fill("0")
    w.locator('[data-action="run"]').focus()
    assert settle_after(w, lambda: chapter2.keyboard.press("Enter")) == "error"
    assert "between 1 and 2,000" in assert_error_in_slot(w, "steps")
    expect(w.locator('input[name="steps"]')).to_be_focused()
    w.locator('input[name="steps"]').fill("200")


# ---------------------------------------------------------------------------
# Windows


def test_window_widget_shows_targets_shifted_by_one_as_cpython(chapter2):
    w = widget(chapter2, "windows")
    assert submit(w, start="12345") == "done"
    r = json.loads(w.get_attribute("data-result"))
    vocab, train, _ = corpus()
    assert r["start"] == 12345 and r["x"] == vocab.decode(train[12345:12409]).replace("\u2404\n\n", "\u2404")
    assert r["x"][1:] == r["y"][:-1]
    assert w.locator(".dw-cell").count() == 64


def test_window_widget_refuses_bad_starts_then_works(chapter2):
    """Each bad start (empty, negative, an emoji, markup, 1e99, NaN) is refused under its field with
    a message, nothing injected; then a good start runs and its error slot is empty again."""
    w = widget(chapter2, "windows")
    for raw in ["", "-5", "🎭", MARKUP, "1e99", "NaN"]:
        assert submit(w, start=raw) == "error", raw
        st = refused(w, "start", raw, "Start position")
        assert st["line"].strip(), f"{raw!r}: no message"
    assert submit(w, start="0") == "done"
    expect(w.locator('[data-error-for="start"]')).to_be_empty()


# ---------------------------------------------------------------------------
# BPE


def test_bpe_widget_learns_the_wikipedia_merges(chapter2):
    w = widget(chapter2, "bpe")
    assert submit(w, text="aaabdaaabac", vocab_size="100") == "done"
    r = json.loads(w.get_attribute("data-result"))
    assert r["vocab_size"] == 7 and r["n_merges"] == 3 and r["n_tokens"] == 5
    assert [t.strip() for t in w.locator('[data-role="merges"] .m-token').all_text_contents()] == ["aa", "ab", "aaab"]
    assert w.locator('[data-role="tokens"] .tok').all_text_contents() == ["aaab", "d", "aaab", "a", "c"]


def test_bpe_widget_on_corpus_text_matches_cpython(chapter2):
    from pylib import bpe

    w = widget(chapter2, "bpe")
    text = load_excerpt(w, start=1000, n_chars=3000)
    assert len(text) > 2000
    assert submit(w, vocab_size="120") == "done"
    r = json.loads(w.get_attribute("data-result"))
    tok, ids = bpe.train_bpe_on_text(text, 120 - len(set(text)))
    assert r["vocab_size"] == tok.vocab_size and r["n_tokens"] == ids.size


def test_bpe_widget_split_toggle_learns_within_words_as_cpython(chapter2):
    from pylib import bpe

    w = widget(chapter2, "bpe")
    text = "the cat sat on the mat; the cat ate the rat. " * 20
    w.locator("textarea").evaluate("(el, t) => { el.value = t; }", text)
    w.locator('input[name="split"]').check()
    try:
        assert submit(w, vocab_size="60") == "done"
        r = json.loads(w.get_attribute("data-result"))
        tok, ids = bpe.train_bpe_on_text(text, 60 - len(set(text)), split=True)
        assert r["split"] and r["vocab_size"] == tok.vocab_size and r["n_tokens"] == ids.size
        shown = [t.strip() for t in w.locator('[data-role="merges"] .m-token').all_text_contents()]
        assert shown == [s.replace(" ", "␣") for s in tok.token_strings()[len(tok.base):]]
        assert not any(bpe.crosses_pretokens(s) for s in tok.token_strings())
    finally:
        w.locator('input[name="split"]').uncheck()


def test_bpe_chart_has_a_text_alternative(chapter2):
    w = widget(chapter2, "bpe")
    assert submit(w, text="aaabdaaabac", vocab_size="100") == "done"
    r = json.loads(w.get_attribute("data-result"))
    summary = w.locator('[data-role="chart-summary"]').text_content()
    assert f"{r['chars_per_token']:.3f} at {r['vocab_size']}" in summary and "1.000 characters per token at vocabulary 4" in summary
    row = [row for row in chart_table(w)["rows"] if row[0] == "7"]
    assert len(row) == 1  # the last merge: vocabulary 7, this text's characters per token
    assert row[0][1] == f"{r['chars_per_token']:.4g}"


def test_bpe_widget_refuses_bad_input(chapter2):
    """Each bad text (empty, blank, over the limit) or vocabulary size (NaN, negative, an emoji) is
    refused under its field, the message says to check it, and the focus goes to the field to fix."""
    w = widget(chapter2, "bpe")
    for text, vocab, field, needle in [
        ("", "100", "text", "empty"), ("   \n ", "100", "text", "empty"), ("x" * 20001, "100", "text", "limit"),
        ("hello hello", "NaN", "vocab_size", "finite"), ("hello hello", "-4", "vocab_size", "between"),
        ("hello hello", "🎭", "vocab_size", "number"),
    ]:
        case = (text[:20], vocab)
        w.locator("textarea").evaluate("(el, t) => { el.value = t; }", text)
        assert submit(w, vocab_size=vocab) == "error", case
        refused(w, field, case, needle)
        expect(w.locator(f'[name="{field}"]'), f"{case}: focus").to_be_focused()  # the focus goes to the field to fix


def test_bpe_widget_keeps_emoji_and_markup_as_text(chapter2):
    w = widget(chapter2, "bpe")
    text = (MARKUP + " 🎭😀 to be 🎭 ") * 20
    w.locator("textarea").evaluate("(el, t) => { el.value = t; }", text)
    assert submit(w, vocab_size="80") == "done"
    shown = "".join(w.locator('[data-role="tokens"] .tok').all_text_contents())
    assert "🎭" in shown and "<img" in shown
    nothing_injected(chapter2)


def test_bpe_widget_stops(chapter2):
    w = widget(chapter2, "bpe")
    assert len(load_excerpt(w, start=0, n_chars=15000)) > 14000
    handle = w.element_handle()  # taken while the page is idle: a busy page can take over 30 s to give it
    before = press(w, vocab_size="1000")
    chapter2.wait_for_function("el => el.querySelectorAll('.bpe-merges li').length > 0", arg=handle, timeout=TIMEOUT)
    w.locator('[data-action="stop"]').click()
    assert wait_settled(w, after=before) == "stopped"
    r = json.loads(w.get_attribute("data-result"))
    assert r["stopped"] and 0 < r["n_merges"] < 1000 - 60


# ---------------------------------------------------------------------------
# Packing mask and leak test


def test_packmask_shows_a_window_with_two_documents_and_the_leak_test(chapter2):
    w = widget(chapter2, "packmask")
    assert wait_settled(w, ("done", "error")) == "done"  # the window is drawn when the widget mounts
    r = json.loads(w.get_attribute("data-result"))
    assert r["n_docs"] >= 2 and r["allowed_doc_mask"] < r["allowed_causal"] == 64 * 65 // 2
    assert submit(w, "leak", position="5") == "done"
    leak = json.loads(w.get_attribute("data-leak"))
    assert leak["max_other_masked"] == 0.0 and leak["max_other_unmasked"] > 0.0
    from pylib.web import data_ops as web_data

    expected = web_data.leak_test(session(), {"start": r["start"], "position": 5})
    assert abs(leak["max_other_unmasked"] - expected["max_other_unmasked"]) <= 1e-9 * max(1.0, expected["max_other_unmasked"])
    assert w.locator('[data-role="bars-masked"] rect').count() == 64
    # the text alternatives: the mask's rows and each bar chart's values, in tables; sentences with the numbers
    for role in ("grid", "bars-masked", "bars-unmasked"):
        frame = w.locator(f'[data-chart="{role}"]')
        assert len(chart_table(frame)["rows"]) == 64
    expect(w.locator('[data-role="bars-masked-summary"]')).to_contain_text(f"{leak['max_other_masked']:.2e}".replace("e+00", "e+0").replace("e-0", "e-"))
    expect(w.locator('[data-role="grid-summary"]')).to_contain_text(f"{r['n_docs']} documents")
    # the legends name the window's documents, every one and no other (the issue saw a document 3 the
    # window did not have), and the boundary's grey only when the causal-only mask shows it
    docs = list(range(1, r["n_docs"] + 1))
    assert legend_documents(w, "grid") == docs and "across a document boundary" not in legend(w, "grid")
    w.locator('select[name="mask"]').select_option("causal")  # redrawn in the page, no call
    expect(w.locator('[data-chart="grid"] .chart-legend li').last).to_have_text("across a document boundary")
    assert legend_documents(w, "grid") == docs
    w.locator('select[name="mask"]').select_option("doc_mask")
    expect(w.locator('[data-chart="grid"] .chart-legend li').last).not_to_have_text("across a document boundary")
    assert set(legend_documents(w, "bars-unmasked")) <= set(docs) and legend(w, "bars-unmasked")[-1] == "the changed position"


def legend(w, chart):
    return w.locator(f'[data-chart="{chart}"] .chart-legend li').all_text_contents()


def legend_documents(w, chart):
    """The document numbers the chart's legend names, in order."""
    return [int(n) for entry in legend(w, chart) if entry.startswith("document") for n in re.findall(r"\d+", entry)]


def test_leak_test_refuses_bad_positions(chapter2):
    """Each bad position (empty, 64, negative, an emoji, markup) is refused under its field, in the
    leak test's own status line, with no leak result and nothing injected."""
    w = widget(chapter2, "packmask")
    for raw in ["", "64", "-1", "🎭", MARKUP]:
        assert submit(w, "leak", position=raw) == "error", raw
        st = refused(w, "position", raw, "osition", status_line='[data-role="leak-message"]')
        assert st["leak"] is None, f"{raw!r}: a leak result"
        assert st["line_class"] == "widget-message error", f"{raw!r}: {st['line_class']}"


def test_leak_position_is_checked_on_leaving_it_and_the_last_test_stays(chapter2):
    """After a leak test, leaving the position field with an out-of-range value, or a position that holds
    an EOS, shows Python's message (pylib's validate_leak, the op's own check) under it before any
    press of the button; the fix clears it; the last test's bars, tables, message and result stay."""
    from pylib import web
    from pylib.web import data_ops as web_data

    w = widget(chapter2, "packmask")
    wait_settled(w, ("done", "error"))  # an earlier test may have left a refused position
    assert submit(w, "leak", position="5") == "done"
    start = json.loads(w.get_attribute("data-result"))["start"]
    part = w.locator('[data-role="leak-part"]')
    tables = [chart_table(w.locator(f'[data-chart="{c}"]')) for c in ("bars-masked", "bars-unmasked")]
    shown = "el => [el.dataset.status, el.dataset.settles, el.dataset.leak, el.querySelector('[data-role=\"leak-message\"]').textContent]"
    before = w.evaluate(shown)

    def message(position):
        try:
            web_data.validate_leak({"start": start, "position": position}, session())
        except web.InputError as e:
            return e.errors["position"]

    vocab, _, val = corpus()
    eos_at = [p for p in range(64) if val[start + p] == vocab.eos_id]
    assert eos_at  # the window the widget opens on holds a document boundary: an EOS there is refused
    cases = [("64", "Position must be between 0 and 63; got '64'."), ("2.5", message("2.5")),
             (str(eos_at[0]), "That position holds an EOS; pick a character inside a document.")]
    for raw, expected in cases:
        assert expected == message(raw), raw
        slot = leave_field(w, "position", raw, scope=part)
        expect(slot).to_have_text(expected)
        expect(part.locator('input[name="position"]')).to_have_attribute("aria-invalid", "true")
        assert w.evaluate(shown) == before, raw
    screenshot_widget(w, "packmask-checked-on-leaving")
    slot = leave_field(w, "position", "7", scope=part)
    expect(slot).to_be_empty()
    assert part.locator('input[name="position"]').get_attribute("aria-invalid") is None
    assert w.evaluate(shown) == before
    assert [chart_table(w.locator(f'[data-chart="{c}"]')) for c in ("bars-masked", "bars-unmasked")] == tables


def test_packmask_refuses_bad_starts(chapter2):
    """Each bad start (negative, an emoji, past the corpus) ends in an error with a message; then
    "auto" draws a window again."""
    w = widget(chapter2, "packmask")
    for raw in ["-1", "🎭", "99999999999"]:
        assert submit(w, start=raw) == "error", raw
        assert w.locator('[data-role="message"]').text_content().strip(), f"{raw!r}: no message"
    assert submit(w, start="auto") == "done"


# ---------------------------------------------------------------------------
# Mixture


def test_mixture_widget_runs_and_matches_cpython(chapter2):
    from pylib.web import data_ops as web_data

    w = widget(chapter2, "mixture")
    assert submit(w, weight="0.3", steps="6", seed="1") == "done"
    r = json.loads(w.get_attribute("data-result"))
    spans = json.loads(w.locator('[data-role="config"]').text_content())["spans"]
    s = session()
    web_data.mix_start(s, {"weight": "0.3", "steps": "6", "seed": "1", "spans": spans})
    while not web_data.mix_chunk(s, {})["done"]:
        pass
    expected = web_data.mix_finish(s, {})
    assert r["fractions"] == expected["fractions"]  # the same windows were drawn
    np.testing.assert_allclose(r["held_out"], expected["held_out"], rtol=1e-4)


def test_mixture_widget_refuses_bad_input(chapter2):
    """Each bad weight (over 1, empty, NaN, markup) or step count (0, an emoji) is refused under its
    field with a message, nothing injected."""
    w = widget(chapter2, "mixture")
    for weight, steps, field in [("1.5", "20", "weight"), ("", "20", "weight"), ("NaN", "20", "weight"),
                                 ("0.5", "0", "steps"), ("0.5", "🎭", "steps"), (MARKUP, "5", "weight")]:
        case = (weight, steps)
        assert submit(w, weight=weight, steps=steps) == "error", case
        st = refused(w, field, case)
        assert st["line"].strip(), f"{case}: no message"


def test_mixture_widget_stops(chapter2):
    w = widget(chapter2, "mixture")
    handle = w.element_handle()  # taken while the page is idle (see test_bpe_widget_stops)
    before = press(w, weight="0.5", steps="2000", seed="0")
    chapter2.wait_for_function("el => el.dataset.runStarted !== 'false' && el.querySelector('[data-readout=step]').textContent !== '–'", arg=handle, timeout=TIMEOUT)
    w.locator('[data-action="stop"]').click()
    assert wait_settled(w, after=before) == "stopped"
    assert json.loads(w.get_attribute("data-result"))["steps"] < 2000


# ---------------------------------------------------------------------------
# Own text


OWN_TEXT = ("🎭 Now is the winter of our discontent, <b>made</b> glorious summer by this sun of York. 😀\n"
            "And all the clouds that lour'd upon our house in the deep bosom of the ocean buried.\n") * 8


def test_own_text_trains_and_samples_as_text(chapter2):
    w = widget(chapter2, "owntext")
    w.locator("textarea").fill(OWN_TEXT)
    assert submit(w, steps="10", seed="0") == "done"
    r = json.loads(w.get_attribute("data-result"))
    assert r["steps"] == 10 and r["final_val_loss"] is not None
    expect(w.locator('[data-role="sample"]')).not_to_be_empty()
    assert w.locator('[data-readout="vocab"]').text_content() == str(len(set(OWN_TEXT)) + 1)  # all kinds kept, + EOS
    nothing_injected(chapter2)


def test_own_text_refuses_unusable_text(chapter2):
    """Empty text, and texts too short (plain, or markup), are refused under the text box, nothing injected."""
    w = widget(chapter2, "owntext")
    for text, needle in [("", "empty"), ("short text", "at least"), (MARKUP, "at least")]:
        w.locator("textarea").fill(text)
        assert submit(w, steps="10") == "error", text
        refused(w, "text", text, needle)


def test_own_text_rejects_a_10_mb_paste_with_a_message(chapter2):
    w = widget(chapter2, "owntext")
    # the other field first, then the paste, then Run, and the refusal read in one call: each action on
    # the page while the box holds 10 MB can lay it out again, seconds of the page's time each
    press_10mb(w, "text", steps="10")
    refused(w, "text", "a 10 MB paste", "10,000,000 characters")
    # and the widget keeps working (the text replaced as the paste was: fill() would first select and
    # delete the 10 MB in the box, seconds of the page's time for nothing this test checks)
    w.locator("textarea").evaluate("(el, t) => { el.value = t; }", OWN_TEXT)
    assert submit(w, steps="5") == "done"


def test_own_text_stops(chapter2):
    w = widget(chapter2, "owntext")
    w.locator("textarea").fill(OWN_TEXT)
    handle = w.element_handle()  # taken while the page is idle (see test_bpe_widget_stops)
    before = press(w, steps="2000")
    chapter2.wait_for_function("el => el.dataset.runStarted !== 'false' && el.querySelector('[data-readout=step]').textContent !== '–'", arg=handle, timeout=TIMEOUT)
    w.locator('[data-action="stop"]').click()
    assert wait_settled(w, after=before) == "stopped"
    expect(w.locator('[data-role="sample"]')).not_to_be_empty()


# ---------------------------------------------------------------------------
# Deduplication of one pair


DEDUP_KEYS = ["jaccard", "estimate", "standard_error", "p_candidate", "n_shingles", "n_shared", "n_union", "bands",
              "rows", "shared_bands", "candidate", "verdict", "normalised"]


def dedup_cpython(text_a, text_b, k, n_hashes, bands):
    from experiments.ch2 import NEAR_DUP
    from pylib.studies import dedup
    r = dedup.compare_pair(text_a, text_b, k=k, n_hashes=n_hashes, bands=bands, threshold=NEAR_DUP["threshold"])
    return {key: r[key] for key in DEDUP_KEYS}


def dedup_page(w):
    r = json.loads(w.get_attribute("data-result"))
    return {key: r[key] for key in DEDUP_KEYS}


def test_dedup_widget_matches_cpython_for_every_example_and_slider_setting(chapter2):
    from pylib.web import data_ops
    w = widget(chapter2, "dedup")
    assert wait_settled(w) in ("done", "error")  # the widget compares its first example when it mounts
    n_examples = w.locator('select[name="example"] option').count()
    assert n_examples == len(data_ops.DEDUP_EXAMPLES)
    for i, example in enumerate(data_ops.DEDUP_EXAMPLES):
        assert settle_after(w, lambda: w.locator('select[name="example"]').select_option(str(i))) == "done"
        assert w.locator('textarea[name="text_a"]').input_value() == example["texts"][0]
        assert dedup_page(w) == dedup_cpython(*example["texts"], 5, 64, 16)
    # the sliders recompute at once: more bands of fewer rows, then fewer hash functions than bands (which
    # brings the bands down to n). Both are log sliders over 1..256 with 200 positions.
    position = lambda v: round(math.log(v) / math.log(256) * 200)
    for field, value, (n, b) in [("bands", 32, (64, 32)), ("n_hashes", 20, (20, 20)), ("n_hashes", 256, (256, 20))]:
        slider = w.locator(f'[data-slider-for="{field}"]')
        assert settle_after(w, lambda: slider.evaluate("(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input')); }",
                                                       position(value))) == "done"
        assert w.locator('input[name="n_hashes"]').input_value() == str(n)
        assert w.locator('input[name="bands"]').input_value() == str(b)
        assert dedup_page(w) == dedup_cpython(*data_ops.DEDUP_EXAMPLES[-1]["texts"], 5, n, b)
    assert w.locator(".dd-band").count() == 20
    assert w.locator(".dd-band.shared").count() == len(dedup_page(w)["shared_bands"])


def test_dedup_widget_shows_emoji_and_markup_as_text(chapter2):
    w = widget(chapter2, "dedup")
    text_a, text_b = MARKUP + " 🎭🎭 to be", "🎭 <b>to be</b>, or not"
    assert submit(w, text_a=text_a, text_b=text_b, k="3", n_hashes="100", bands="25") == "done"
    assert dedup_page(w) == dedup_cpython(text_a, text_b, 3, 100, 25)
    assert w.locator('[data-role="norm-a"]').text_content() == dedup_page(w)["normalised"][0]
    nothing_injected(chapter2)


def test_dedup_widget_refuses_bad_input_and_keeps_working(chapter2):
    """Each bad field (an empty or blank text, k out of range or not a number, n_hashes infinite,
    NaN, negative or huge, bands markup or over 64; the other fields good) is refused under its field
    with no result and nothing injected; then the good fields compare as CPython does."""
    from pylib.web import data_ops
    w = widget(chapter2, "dedup")
    good = dict(zip(["text_a", "text_b"], data_ops.DEDUP_EXAMPLES[0]["texts"]), k="5", n_hashes="64", bands="16")
    for field, raw, needle in [
        ("text_a", "", "Text A is empty"), ("text_b", "   ", "Text B is empty"), ("k", "0", "between 1 and 20"),
        ("k", "🎭", "must be a number"), ("n_hashes", "1e309", "finite"), ("n_hashes", "NaN", "finite"),
        ("n_hashes", "-3", "between 1"), ("n_hashes", "99999999999999999999", "between 1"), ("bands", MARKUP, "must be a number"),
        ("bands", "65", "between 1 and 64"),
    ]:
        case = (field, raw)
        expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
        before = settles(w)
        set_fields(w, **{**good, field: raw})
        w.locator('[data-action="run"]').click()
        assert wait_settled(w, timeout=TIMEOUT, after=before) == "error", case
        st = refused(w, field, case, needle)
        assert st["result"] is None, f"{case}: a result"
    assert submit(w, **good) == "done"
    assert dedup_page(w) == dedup_cpython(good["text_a"], good["text_b"], 5, 64, 16)


def test_dedup_widget_refuses_a_10_mb_paste_with_a_message(chapter2):
    w = widget(chapter2, "dedup")
    press_10mb(w, "text_b", text_a="to be or not to be")  # the other field first (see the own-text test)
    refused(w, "text_b", "a 10 MB paste", "10,000,000 characters")
    # the text replaced as the paste was (fill() would first select and delete the 10 MB in the box)
    w.locator('textarea[name="text_b"]').evaluate("el => { el.value = 'to be, or not to be'; }")
    assert submit(w) == "done"


def test_the_page_is_accessible_in_both_themes_and_reflows_on_a_phone(chapter2):
    # Last: after the tests above, with the widgets as they left them (a11y_checks.check_accessibility).
    check_accessibility(chapter2, "chapters/02-data-and-tokenisation.html")
