"""Chapter 3 in a real browser: the p - y table, the loss-denominator editor, the accumulation
gradient comparison and the batch x 4 / accumulation 4 run, each with bad input refused visibly and
nothing injected. The page's numbers are compared with the same pylib calls in CPython. One shared
page (conftest.chapter_fixture); a console error or a request off 127.0.0.1 fails a test."""

import concurrent.futures
import json
import math
import re

import pytest
from playwright.sync_api import expect

from a11y_checks import check_accessibility
from conftest import chapter_fixture, corpus, result, settle_after, settles, wait_settled, widget
from kit_checks import assert_fields_labelled, chart_table, drive_slider, leave_field, refused, screenshot_widget, set_fields

chapter3 = chapter_fixture("03-")

TIMEOUT = 120_000  # ms: the longest op here is a short training run in the page

# ---------------------------------------------------------------------------
# The widget kit: labels, error slots, focus, charts' text alternatives

WIDGETS = ["logit-grad", "loss-denominator", "accum-gradient", "accum-curves", "perplexity"]


def test_no_chart_shows_empty_axes_before_its_data(chapter3):
    w = widget(chapter3, "accum-curves")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    expect(w.locator(".kit-chart-placeholder")).to_be_visible()
    assert w.locator("canvas").count() == 0


def test_every_field_is_labelled_and_tied_to_its_hint_and_error(chapter3):
    for name in WIDGETS:
        w = widget(chapter3, name)
        expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
        assert_fields_labelled(w)
        assert w.locator("[aria-live]").count() == 1, name  # the announcer alone
    # the denominator table's cells: each input has its own label and its error slot
    w = widget(chapter3, "loss-denominator")
    expect(w).to_have_attribute("data-status", "done", timeout=TIMEOUT)
    cells = w.evaluate("""root => [...root.querySelectorAll("tbody input")].map((el) => ({
        label: root.querySelector(`label[for="${CSS.escape(el.id)}"]`)?.textContent ?? null,
        described: el.getAttribute("aria-describedby"),
        matches: document.querySelectorAll(`#${CSS.escape(el.getAttribute("aria-describedby"))}`).length,
        slot: root.querySelector(`[data-error-for="${CSS.escape(el.name)}"]`)?.id ?? null,
    }))""")
    assert len(cells) >= 2
    for cell in cells:
        assert cell["label"] and re.fullmatch(r"Sequence \d+: (counted tokens|summed loss)", cell["label"]), cell
        assert cell["matches"] == 1, cell
        assert cell["described"] == cell["slot"], cell


def test_calculators_keep_the_focus_on_the_button_pressed(chapter3):
    """Compute-style buttons are disabled while Python works; the focus comes back to them, not <body>."""
    for name in ("accum-gradient", "perplexity", "loss-denominator"):
        w = widget(chapter3, name)
        button = w.locator('[data-action="run"]')
        expect(button).to_be_enabled(timeout=TIMEOUT)
        button.focus()
        assert settle_after(w, lambda: chapter3.keyboard.press("Enter")) == "done"
        expect(button).to_be_focused()
    w = widget(chapter3, "loss-denominator")
    w.locator('tbody tr [data-action="remove"]').first.focus()
    chapter3.keyboard.press("Enter")  # its row goes: the focus moves to the next row's Remove
    expect(w.locator('tbody tr [data-action="remove"]').first).to_be_focused()
    assert settle_after(w, lambda: w.locator('[data-action="example-a"]').click()) == "done"


# ---------------------------------------------------------------------------
# p - y


def show_logit_grad(page, **fields):
    w = widget(page, "logit-grad")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    model = fields.pop("model", "untrained")
    w.locator(f'input[name="model"][value="{model}"]').check()
    set_fields(w, **fields)  # only the fields whose text differs are typed into
    return w, settle_after(w, lambda: w.locator('[data-action="run"]').click())


def test_logit_grad_untrained_matches_pylib(chapter3):
    from pylib import data, model
    from pylib.studies import objective
    w, status = show_logit_grad(chapter3, window=3, position=40, k=5)
    assert status == "done"
    r = result(w)
    vocab, _, val = corpus()
    cfg = model.GPTConfig()
    x, y = data.eval_windows(val, 64, cfg.block_size)
    logits = model.forward_logits(model.init_params(cfg, 0), cfg, x[3:4, :41])[0, 40]
    p, onehot, grad = objective.logit_gradient(logits, int(y[3, 40]))
    assert r["target"] == int(y[3, 40])
    ids = objective.top_k_rows(p, onehot, grad, 5)
    assert [row["id"] for row in r["rows"]] == ids
    for row in r["rows"]:
        assert row["p"] == pytest.approx(p[row["id"]], abs=1e-6)
        assert row["grad"] == pytest.approx(p[row["id"]] - onehot[row["id"]], abs=1e-6)
    assert abs(r["grad_sum"]) < 1e-6 and r["loss"] == pytest.approx(-math.log(p[int(y[3, 40])]), abs=1e-5)
    expect(w.locator(".lg-is-target")).to_have_count(1)


LOGIT_GRAD_BAD = [
    ("window", "", "empty"), ("window", "-1", "between"), ("position", "64", "between"),
    ("position", "2.5", "whole number"), ("k", "NaN", "finite"), ("k", "\U0001F600", "must be a number"),
    ("window", "<img src=x onerror=alert(1)>", "must be a number"), ("k", "1e400", "finite"),
]


def test_logit_grad_refuses_bad_input_visibly(chapter3):
    """Each bad field (the others good) is refused: its message under it, the field aria-invalid, the
    status line says to check the form, no data-result, nothing injected; and Show works afterwards."""
    good = {"window": 0, "position": 10, "k": 3}
    for field, value, text in LOGIT_GRAD_BAD:
        case = f"{field}={value!r}"
        w, status = show_logit_grad(chapter3, **{**good, field: value})
        assert status == "error", case
        refused(w, case, field, text)
    w, status = show_logit_grad(chapter3, **good)  # and it still works
    assert status == "done" and result(w)["rows"]


def test_logit_grad_checks_a_field_on_leaving_it_and_keeps_the_last_answer(chapter3):
    """After Show, leaving the position or top-k field with an out-of-range value shows Python's message
    (the op's own check, validate_logit_grad) under it before any Show; the fix clears it; the last
    answer's rows, readouts, status and result stay, and nothing is computed."""
    from pylib.web import objective_ops

    w, status = show_logit_grad(chapter3, window=0, position=10, k=3)
    assert status == "done"
    shown = """el => [el.dataset.status, el.dataset.settles, el.dataset.result,
        el.querySelector('[data-role="message"]').textContent,
        [...el.querySelectorAll('[data-readout], tbody td')].map((c) => c.textContent)]"""
    before = w.evaluate(shown)
    good = {"model": "untrained", "window": "0", "position": "10", "k": "3"}
    for name, raw in [("position", "64"), ("k", "0"), ("window", "abc")]:
        try:
            objective_ops.validate_logit_grad({**good, name: raw})
            raise AssertionError(f"{name}={raw!r} passed pylib's check")
        except objective_ops.InputError as e:
            expected = e.errors[name]
        slot = leave_field(w, name, raw)
        expect(slot).to_have_text(expected)
        expect(w.locator(f'input[name="{name}"]')).to_have_attribute("aria-invalid", "true")
        assert w.evaluate(shown) == before, name
    screenshot_widget(w, "logit-grad-checked-on-leaving")
    for name, raw in [("position", "10"), ("k", "3"), ("window", "0")]:
        expect(leave_field(w, name, raw)).to_be_empty()
        assert w.locator(f'input[name="{name}"]').get_attribute("aria-invalid") is None
    assert w.evaluate(shown) == before


STOP_AT = 20  # pretraining steps before Stop: the loss over the 8 positions below is already ~10 nats lower


def test_logit_grad_training_moves_the_focus_to_stop_and_back(chapter3):
    """Show with the trained model trains it first: focus goes to Stop (not <body>), and back to Show.
    Stop (pressed after STOP_AT of the 200 steps) keeps the model as it is at that step, and Show uses it."""
    w = widget(chapter3, "logit-grad")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    w.locator('input[name="model"][value="trained"]').check()
    w.locator('[data-action="run"]').focus()
    before = settles(w)
    chapter3.keyboard.press("Enter")
    expect(w.locator('[data-action="stop"]')).to_be_focused()
    chapter3.wait_for_function(
        "([el, n]) => { const m = /step (\\d+) of/.exec(el.querySelector('[data-role=message]').textContent); return m && +m[1] >= n; }",
        arg=[w.element_handle(), STOP_AT], timeout=TIMEOUT, polling=100)
    w.locator('[data-action="stop"]').click()
    assert wait_settled(w, after=before) == "done", w.locator('[data-role="message"]').text_content()
    expect(w.locator('[data-action="run"]')).to_be_focused()
    r = result(w)
    assert r["model"] == "trained" and STOP_AT <= r["trained_steps"] < 200
    expect(w.locator('[data-role="message"]')).to_contain_text(f"Training was stopped at step {r['trained_steps']}")
    w.locator('input[name="model"][value="untrained"]').check()


def test_logit_grad_trained_model_predicts_better_than_untrained(chapter3):
    w, status = show_logit_grad(chapter3, model="trained", window=5, position=50, k=3)
    assert status == "done", w.locator('[data-role="message"]').text_content()
    r = result(w)
    assert r["model"] == "trained" and r["trained_steps"] >= 1
    w2, _ = show_logit_grad(chapter3, model="untrained", window=5, position=50, k=3)
    untrained = result(w2)
    # Loss over many positions is what training lowers; one position is noisy, so compare 8
    # (the 16 Shows in one evaluate: SHOW_EACH).
    cases = [[which, 5, pos, 1] for which in ("trained", "untrained") for pos in range(20, 60, 5)]
    losses = {"trained": [], "untrained": []}
    for (which, _, pos, _), (status, raw) in zip(cases, w.evaluate(SHOW_EACH, cases)):
        assert status == "done" and raw, (which, pos, status)
        shown = json.loads(raw)
        assert shown["model"] == which, (which, pos)
        losses[which].append(shown["loss"])
    assert sum(losses["trained"]) < sum(losses["untrained"]) - 1.0
    assert untrained["model"] == "untrained"


# Show pressed for each [model, window, position, k] in turn, the fields set as typed (an input event
# each, as typing sends), each answer waited for by the widget's own signals (data-settles moved on,
# nothing pending) before the next: one round trip for a sweep that would take a handful per Show.
SHOW_EACH = """async (root, cases) => {
  const form = root.querySelector('[data-role="form"]');
  const settled = (before) => Number(root.getAttribute("data-settles") || 0) > before && !root.hasAttribute("data-pending");
  const out = [];
  for (const [model, window, position, k] of cases) {
    form.querySelector(`input[name="model"][value="${model}"]`).click();
    for (const [name, value] of [["window", window], ["position", position], ["k", k]]) {
      const field = form.elements.namedItem(name);
      field.value = String(value);
      field.dispatchEvent(new Event("input", { bubbles: true }));
    }
    const before = Number(root.getAttribute("data-settles") || 0);
    form.querySelector('[data-action="run"]').click();
    const t0 = performance.now();
    while (!settled(before)) {
      if (performance.now() - t0 > 120_000) throw new Error(`no answer to Show within 120 s: ${model}, position ${position}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    out.push([root.getAttribute("data-status"), root.getAttribute("data-result")]);
  }
  return out;
}"""


# ---------------------------------------------------------------------------
# The denominator table


def fill_rows(w, rows):
    """Make the table have exactly these (count, loss) rows, then Compute; returns the status of the
    answer. Rows go with their Remove button and come with Add, from the keyboard (Remove hands the
    focus to the row before's, Add keeps it); only cells that differ are typed into. Removing or adding
    a row, and typing, each ask again on their own: the answer waited for is the last one, Compute's."""
    page = w.page
    before = settles(w)
    n = w.locator("tbody tr").count()
    if n > len(rows):
        w.locator('tbody tr [data-action="remove"]').last.focus()
        for _ in range(n - len(rows)):
            page.keyboard.press("Enter")
    elif n < len(rows):
        w.locator('[data-action="add"]').focus()
        for _ in range(len(rows) - n):
            page.keyboard.press("Enter")
    expect(w.locator("tbody tr")).to_have_count(len(rows))
    shown = w.evaluate("""el => [...el.querySelectorAll("tbody tr")].map((tr) =>
        [tr.querySelector('input[data-name="count"]').value, tr.querySelector('input[data-name="loss"]').value])""")
    for i, ((count, loss), (count_now, loss_now)) in enumerate(zip(rows, shown)):
        tr = w.locator("tbody tr").nth(i)
        if count_now != str(count):
            tr.locator(f'input[name="count.{i}"]').fill(str(count))
        if loss_now != str(loss):
            tr.locator(f'input[name="loss.{i}"]').fill(str(loss))
    w.locator('[data-action="run"]').click()
    return wait_settled(w, after=before)


def test_denominator_examples_match_the_outline(chapter3):
    from pylib.studies import objective
    w = widget(chapter3, "loss-denominator")
    expect(w).to_have_attribute("data-status", "done", timeout=TIMEOUT)
    for button, key in [("example-a", "a"), ("example-b", "b")]:
        assert settle_after(w, lambda: w.locator(f'[data-action="{button}"]').click()) == "done"
        r = result(w)
        expected = objective.compare_denominators(*zip(*objective.WORKED_EXAMPLES[key]))
        assert r["token_weighted"] == pytest.approx(expected["token_weighted"])
        assert r["mean_of_means"] == pytest.approx(expected["mean_of_means"])
    assert result(w)["token_weighted"] == pytest.approx(1.6) and result(w)["mean_of_means"] == pytest.approx(2.5)


def test_denominator_equal_counts_agree(chapter3):
    w = widget(chapter3, "loss-denominator")
    assert fill_rows(w, [(4, 1), (4, 9), (4, 2)]) == "done"
    r = result(w)
    assert r["token_weighted"] == pytest.approx(r["mean_of_means"]) == pytest.approx(1.0)


DENOMINATOR_BAD = [
    ([(-1, 1)], "count.0", "between 0"), ([(2.5, 1)], "count.0", "whole number"), ([(1, -3)], "loss.0", "between 0"),
    ([(1, "nan")], "loss.0", "finite"), ([("", 1)], "count.0", "empty"), ([(0, 0), (0, 0)], "message", "At least one token"),
    ([(0, 5)], "loss.0", "no counted tokens"), ([("<b class=injected>1</b>", 1)], "count.0", "must be a number"),
    ([("\U0001F600", "\U0001F600")], "loss.0", "must be a number"), ([(1, "1e400")], "loss.0", "finite"),
]


def test_denominator_refuses_bad_input_visibly(chapter3):
    """A bad cell's message sits under that cell (tied to it by aria-describedby); a message about the
    whole table is the widget's message. No data-result, nothing injected; and the table computes again
    afterwards."""
    w = widget(chapter3, "loss-denominator")
    for rows, where, text in DENOMINATOR_BAD:
        case = f"rows {rows}"
        assert fill_rows(w, rows) == "error", case
        if where == "message":
            s = refused(w, case)
            assert text in s["message"], f"{case}: {s['message']!r}"
        else:
            s = refused(w, case, where, text)
            assert "check Sequence 1" in s["message"], f"{case}: {s['message']!r}"
    assert fill_rows(w, [(2, 4), (6, 6)]) == "done"  # and it recovers
    assert result(w)["token_weighted"] == pytest.approx(1.25)


def test_denominator_rows_are_capped(chapter3):
    """Add (pressed with Enter, and by clicks, which fire the same handler) keeps the focus until the
    table is full; then it is disabled, the focus goes into the last row, and the full table computes."""
    w = widget(chapter3, "loss-denominator")
    cap = int(w.get_attribute("data-rows-max"))
    add = w.locator('[data-action="add"]')
    add.focus()
    chapter3.keyboard.press("Enter")  # Add keeps the focus until the table is full
    expect(add).to_be_focused()
    # all but the last press in one evaluate (a key press per row is a round trip each)
    kept = add.evaluate("""(b, cap) => { let kept = true;
        while (b.closest("[data-widget]").querySelectorAll("tbody tr").length < cap - 1) { b.click(); kept &&= document.activeElement === b; }
        return kept; }""", cap)
    assert kept, "Add lost the focus before the table was full"
    expect(add).to_be_enabled()
    chapter3.keyboard.press("Enter")  # the last row
    expect(add).to_be_disabled()
    assert w.locator("tbody tr").count() == cap
    expect(w.locator('input[name="count.%d"]' % (cap - 1))).to_be_focused()  # not <body>
    assert fill_rows(w, [(1, 1)] * cap) == "done"
    assert result(w)["total_tokens"] == cap
    assert settle_after(w, lambda: w.locator('[data-action="example-a"]').click()) == "done"  # back to two rows


def test_denominator_with_no_rows_says_so(chapter3):
    w = widget(chapter3, "loss-denominator")
    assert fill_rows(w, []) == "error"
    expect(w.locator('[data-role="message"]')).to_contain_text("at least one sequence")
    assert fill_rows(w, [(2, 4), (6, 6)]) == "done"


# ---------------------------------------------------------------------------
# Gradient accumulation


def compare_gradients(page, counts):
    w = widget(page, "accum-gradient")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    for i, n in enumerate(counts):
        w.locator(f'input[name="count.{i}"]').fill(str(n))
    return w, settle_after(w, lambda: w.locator('[data-action="run"]').click())


def test_accum_gradient_matches_results(chapter3):
    from conftest import ROOT
    values = json.loads((ROOT / "results.json").read_text())["values"]
    w, status = compare_gradients(chapter3, [64, 8, 32, 4])
    assert status == "done"
    r = result(w)
    assert r["tokens"] == [512, 64, 256, 32]
    assert r["mean_of_means"] == pytest.approx(values["ch3.grad.mean_of_means_rel_err"], rel=1e-3)
    assert r["token_weighted"] < 1e-5
    w, status = compare_gradients(chapter3, [16, 16, 16, 16])
    assert result(w)["mean_of_means"] < 1e-5  # equal counts: both exact


ACCUM_GRADIENT_BAD = [
    ([0, 0, 0, 0], "message", "At least one"), ([65, 1, 1, 1], "count.0", "between 0"), (["x", 1, 1, 1], "count.0", "must be a number"),
    (["", 1, 1, 1], "count.0", "empty"), ([1, 1, 1, "<b class=injected>b</b>"], "count.3", "must be a number"),
]


def test_accum_gradient_refuses_bad_input_visibly(chapter3):
    for counts, where, text in ACCUM_GRADIENT_BAD:
        case = f"counts {counts}"
        w, status = compare_gradients(chapter3, counts)
        assert status == "error", case
        if where == "message":
            s = refused(w, case)
            assert text in s["message"], f"{case}: {s['message']!r}"
        else:
            refused(w, case, where, text)
    w, status = compare_gradients(chapter3, [64, 8, 32, 4])  # and it works again
    assert status == "done"


CHECKED_STEPS = 10  # the page's first steps, against CPython's same steps (the runs' own schedule)


def cpython_accum(seed, steps):
    """pylib's first `steps` steps of both runs (batch x 4 and accumulation), on the corpus the page
    loads, with the whole runs' settings (the learning-rate schedule is the 100-step run's): their records."""
    from pylib import model, train
    from pylib.web.objective_ops import accum_settings
    _, tr, va = corpus()
    out = []
    for cfg in accum_settings(seed):
        state = train.init_train_state(model.GPTConfig(), cfg)
        out.append(train.train_steps(state, model.GPTConfig(), cfg, tr, va, steps))
    return out


def test_accum_curves_run_lies_on_top_and_stop_works(chapter3):
    """The page's two runs agree to rounding over all their steps (seed 0), and each run's first
    CHECKED_STEPS losses, in the chart's table, are CPython's (CPython computes them on a thread while
    the page trains, so the test takes the longer of the two). Then Stop mid-run."""
    from pylib.web.objective_ops import accum_settings
    big, _ = accum_settings(0)
    w = widget(chapter3, "accum-curves")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    w.locator('input[name="seed"]').fill("0")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reference = pool.submit(cpython_accum, 0, CHECKED_STEPS)
        assert settle_after(w, lambda: w.locator('[data-action="run"]').click()) == "done", \
            w.locator('[data-role="message"]').text_content()
        hb, ha = reference.result()
    r = result(w)
    expected = max(abs(a["loss"] - b["loss"]) for a, b in zip(ha, hb))
    assert r["steps"] == big.steps
    assert r["max_abs_dloss"] < 1e-3 and expected < 1e-3  # seed 0: rounding only (results.md)
    # the chart's text alternative: a sentence with the last losses, and a table of both runs per step
    expect(w.locator('[data-role="chart-summary"]')).to_contain_text(f"After {big.steps} steps")
    table = chart_table(w)
    assert table["header"] == ["step", "batch × 4", "accumulation"]
    assert table["rows"][-1][0] == str(big.steps - 1)
    rows = {int(row[0]): row for row in table["rows"]}  # the table may list every other step
    compared = [(rows[b["step"]], b, a) for b, a in zip(hb, ha) if b["step"] in rows]
    assert len(compared) >= CHECKED_STEPS // 2, sorted(rows)[:CHECKED_STEPS]
    for row, b, a in compared:
        assert float(row[1]) == pytest.approx(b["loss"], rel=1e-3) and float(row[2]) == pytest.approx(a["loss"], rel=1e-3), row
    # Stop mid-run: status "stopped", no data-result, and the widget runs again afterwards.
    before = settles(w)
    w.locator('[data-action="run"]').click()
    chapter3.wait_for_function("el => el.dataset.runStarted !== 'false' && el.querySelector('[data-readout=step]').textContent !== '–'",
                               arg=w.element_handle(), timeout=TIMEOUT)
    w.locator('[data-action="stop"]').click()
    assert wait_settled(w, after=before) == "stopped"
    assert w.get_attribute("data-result") is None
    expect(w.locator('[data-role="message"]')).to_contain_text("Stopped after")


ACCUM_CURVES_BAD = [("-3", "between"), ("abc", "must be a number"), ("", "empty"), ("<b class=injected>1</b>", "must be a number")]


def test_accum_curves_refuse_bad_seed(chapter3):
    """Each bad seed is refused under its field, which gets the focus (not <body>); nothing injected."""
    w = widget(chapter3, "accum-curves")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    for seed, text in ACCUM_CURVES_BAD:
        case = f"seed {seed!r}"
        w.locator('input[name="seed"]').fill(seed)
        assert settle_after(w, lambda: w.locator('[data-action="run"]').click()) == "error", case
        s = refused(w, case, "seed", text)
        assert s["focused"], f"{case}: the focus is not on the seed field"


# ---------------------------------------------------------------------------
# Perplexity as a number of equally likely tokens


def set_tau(page, value):
    w = widget(page, "perplexity")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=180_000)
    return w, settle_after(w, lambda: w.locator('input[name="tau"]').fill(str(value)))  # typing asks Python again


def test_perplexity_at_temperature_one_is_the_unigram_line_computed_in_cpython(chapter3):
    import math
    from pylib import data
    from pylib.studies import objective
    vocab, train_ids, val_ids = corpus()
    w, status = set_tau(chapter3, "1")
    assert status == "done"
    assert result(w)["val_ppl"] == pytest.approx(math.exp(data.unigram_loss(train_ids, val_ids, vocab.size)), rel=1e-12)
    w, status = set_tau(chapter3, "0.2")
    r = objective.tempered_unigram(train_ids, val_ids, vocab.size, 0.2)
    assert result(w)["own_ppl"] == pytest.approx(r["own_ppl"], rel=1e-12)
    assert result(w)["val_ppl"] == pytest.approx(r["val_ppl"], rel=1e-12)
    assert w.locator(".ppl-bar").count() == vocab.size


def test_perplexity_slider_drives_the_temperature(chapter3):
    """The temperature's log slider, by the keyboard: End is 100, the field follows and the page asks
    Python again; ArrowLeft steps down one of 200 positions over log10(0.05)..log10(100); typing moves it."""
    w = widget(chapter3, "perplexity")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=180_000)
    at_end, left, typed = drive_slider(w, "tau", "100", "1")
    assert at_end == 200 and typed == round(math.log10(1 / 0.05) / math.log10(100 / 0.05) * 200)
    w.locator('[data-slider-for="tau"]').focus()
    assert settle_after(w, lambda: chapter3.keyboard.press("End")) == "done"
    assert w.locator('input[name="tau"]').input_value() == "100"
    assert result(w)["tau"] == 100
    assert result(w)["own_ppl"] > 60
    chapter3.keyboard.press("Home")
    assert w.locator('input[name="tau"]').input_value() == "0.05"


PERPLEXITY_BAD = ["", "NaN", "-1", "0", "1e309", "1000", "🙂", "<b class=injected>x</b>"]


def test_perplexity_refuses_bad_temperatures_and_recovers(chapter3):
    for bad in PERPLEXITY_BAD:
        case = f"tau {bad!r}"
        w, status = set_tau(chapter3, bad)
        assert status == "error", case
        s = refused(w, case, "tau")
        assert "emperature" in s["slot_text"], f"{case}: {s['slot_text']!r}"
    w, status = set_tau(chapter3, "1")
    assert status == "done"


def test_the_page_is_accessible_in_both_themes_and_reflows_on_a_phone(chapter3):
    # Last: after the tests above, with the widgets as they left them (a11y_checks.check_accessibility).
    check_accessibility(chapter3, "chapters/03-the-objective.html")
