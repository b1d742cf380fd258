"""Chapter 13 in a real browser: one method of the four-worker toy trained in the page (with its
measured band, Stop, and the page's steps checked against CPython), the link race (alpha-beta times
checked against pylib, the winner changing with bandwidth) and the queue (M/D/1 and stragglers against
pylib), each with bad input refused visibly and nothing injected. One shared page
(conftest.chapter_fixture); a console error or a request off 127.0.0.1 fails a test."""

import concurrent.futures

import pytest
from playwright.sync_api import expect

from a11y_checks import check_accessibility
from conftest import chapter_fixture, corpus, result, settle_after, settles, wait_settled, widget
from kit_checks import assert_fields_labelled, chart_table, drive_slider, enter, refused, set_fields

chapter13 = chapter_fixture("13-")

TIMEOUT = 240_000
FIRST_STEPS = 8  # page vs CPython: float32 in both, matmuls summed in another order; early steps agree closely
REL = 1e-4


def submit(w, **fields):
    """Set the fields (set_fields) and press Start; returns settles(w) from before the press,
    for wait_settled(w, ..., after=) to wait for this run's end."""
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    set_fields(w, **fields)
    before = settles(w)
    w.locator('[data-action="run"]').click()
    return before


BAD = ["", "NaN", "-3", "1e309", "🎭", "<b class=injected>x</b>", "<img src=x onerror=alert(1)>"]

# ---------------------------------------------------------------------------
# slow-train


def cpython_slow_run(method, seed, steps):
    """pylib's run of a method in CPython, on the corpus the page loads: its state and its first
    steps' records (run_steps goes on from the state)."""
    from pylib.systems import slow_links as sl
    vocab, train, val = corpus()
    state = sl.init_run(sl.configured(method, seed=seed), train, val, vocab.size)
    return state, sl.run_steps(state, steps)


def test_slow_train_matches_cpython_and_stops(chapter13):
    """Quantised sync trained in the page, stopped once FIRST_STEPS steps are done: its first steps'
    losses, its bytes and its first validation (at step 0) against pylib's run in CPython, whose
    first FIRST_STEPS steps run on a thread while the page trains (the wait for the page holds no lock)."""
    from pylib.systems import slow_links as sl
    w = widget(chapter13, "slow-train")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reference = pool.submit(cpython_slow_run, "quant", 1, FIRST_STEPS)
        before = submit(w, method="quant", seed="1")
        w.page.wait_for_function("([el, n]) => el.dataset.runStarted !== 'false' && Number((el.querySelector('[data-readout=step]').textContent || '0').replace(/,/g, '')) >= n",
                                 arg=[w.element_handle(), FIRST_STEPS], timeout=TIMEOUT)
        w.locator('[data-action="stop"]').click()
        assert wait_settled(w, after=before) == "stopped"
        state, ref = reference.result()
    r = result(w)
    assert r["stopped"] and r["method"] == "quant" and r["steps"] >= FIRST_STEPS
    assert w.locator('.chart').first.evaluate("el => el.drawnBand !== null && el.drawnBand !== undefined")
    ref += sl.run_steps(state, r["steps"] - FIRST_STEPS)  # CPython on to the step the page stopped at
    assert r["losses"][:FIRST_STEPS] == pytest.approx([x["loss"] for x in ref if "loss" in x][:FIRST_STEPS], rel=REL)
    assert r["bytes"] == ref[-1]["bytes"]  # bytes are counted, not measured: exact
    assert r["vals"][0][1] == pytest.approx(ref[0]["val"], rel=REL)
    expect(w.locator('[data-readout="bytes_per_sync"]')).to_have_text(f"{sl.sync_wire_bytes(state):,}")


def test_slow_train_refuses_a_bad_seed_then_recovers(chapter13):
    w = widget(chapter13, "slow-train")
    for bad in ("-1", "2.5", "<b class=injected>x</b>", "🎭"):
        enter(w, "seed", TIMEOUT, method="dense", seed=bad)
        shown = refused(w, f"seed={bad!r}", "seed", "Seed")
        assert "Seed" in shown["message"], f"seed={bad!r}: the status line says {shown['message']!r}"
    before = submit(w, method="diloco", seed="0")
    w.page.wait_for_function("el => el.dataset.runStarted !== 'false' && Number((el.querySelector('[data-readout=step]').textContent || '0').replace(/,/g, '')) >= 10",
                             arg=w.element_handle(), timeout=TIMEOUT)
    w.locator('[data-action="stop"]').click()
    assert wait_settled(w, after=before) == "stopped"
    assert result(w)["syncs"] == result(w)["steps"] // 10


def test_slow_train_checks_the_seed_on_leaving_it_and_keeps_the_last_run(chapter13):
    """After a stopped run: a bad seed typed and left with Tab (no Start) gets run:slow_train's own
    message under the field, from slow_train_start's check (the same words the run gives); the fixed
    seed clears it. No run starts, and the last run's result, readouts and chart table stay."""
    from test_field_checks import leave, shown

    from pylib.web import InputError, slow_links_ops
    w = widget(chapter13, "slow-train")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    if w.get_attribute("data-result") is None:  # run alone: a short stopped run to keep on show
        before = submit(w, method="dense", seed="0")
        w.page.wait_for_function("el => el.dataset.runStarted === 'true'", arg=w.element_handle(), timeout=TIMEOUT)
        w.locator('[data-action="stop"]').click()
        assert wait_settled(w, after=before) == "stopped"
    table, before = chart_table(w), shown(w)
    seed = w.locator('input[name="seed"]')
    method = w.locator('select[name="method"]').input_value()
    for bad in ("-1", "2.5", "<b class=injected>x</b>"):
        with pytest.raises(InputError) as refusal:
            slow_links_ops.validate_train({"method": method, "seed": bad})
        expect(leave(w, "seed", bad)).to_have_text(refusal.value.errors["seed"])
        expect(seed).to_have_attribute("aria-invalid", "true")
        assert shown(w) == before, bad
    assert chapter13.locator("[data-widget] b.injected").count() == 0
    expect(leave(w, "seed", "0")).to_be_empty()
    assert seed.get_attribute("aria-invalid") is None
    assert shown(w) == before and chart_table(w) == table
    assert w.get_attribute("data-run-started") is None


# ---------------------------------------------------------------------------
# link-race


def fill(w, **fields):
    """Type the fields and press Run; returns the status of the answer to the press. Typing starts a
    live update once the keys pause, so one may fire between two fields with a mix of new and old
    values: Run drops a waiting one and overtakes one on its way, and the wait is for Run's answer
    with nothing left pending."""
    set_fields(w, **fields)
    return settle_after(w, lambda: w.locator('[data-action="run"]').click(), timeout=TIMEOUT)


def fill_and_wait(w, **fields):
    """fill(), which must give a result, of exactly these values; returns it."""
    assert fill(w, **fields) == "done"
    r = result(w)
    assert {k: r["settings"][k] for k in fields} == {k: float(v) for k, v in fields.items()}
    return r


def test_link_race_matches_pylib_and_the_winner_moves(chapter13):
    from pylib import model
    from pylib.systems import slow_links as sl
    w = widget(chapter13, "link-race")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    r = fill_and_wait(w, bandwidth="10", latency="0", step_ms="3", workers="4")
    shapes = model.param_shapes(model.GPTConfig(vocab_size=corpus()[0].size))
    for m in sl.METHODS:
        ref = sl.sync_cost(sl.configured(m), shapes, 4, 0.0, 1 / (10e6 / 8))
        assert r["rows"][m]["seconds"] == pytest.approx(ref["seconds"], rel=1e-12)
        assert r["rows"][m]["wire_bytes"] == ref["wire_bytes"]
    # The sixth row: the quantised arm priced as a quantised ring all-reduce, shown as its own table row.
    ref = sl.sync_cost(sl.configured("quant"), shapes, 4, 0.0, 1 / (10e6 / 8), quant_all_reduce=True)
    assert r["rows"]["quant_ar"]["wire_bytes"] == ref["wire_bytes"] < r["rows"]["quant"]["wire_bytes"]
    expect(w.locator('tr[data-method="quant_ar"] td').first).to_have_text("quantised ring all-reduce")
    slow_winner = r["winner"]
    fast_winner = fill_and_wait(w, bandwidth="10000000", latency="0", step_ms="3", workers="4")["winner"]
    assert slow_winner != fast_winner  # bytes decide on a slow link, steps on a fast one
    expect(w.locator("tr.sl-winner")).to_have_count(1)
    # The all-gather's wire grows with W: at 64 workers top-k sends more than the dense ring.
    rows = fill_and_wait(w, bandwidth="100", latency="0", step_ms="3", workers="64")["rows"]
    assert rows["topk"]["wire_bytes"] > rows["dense"]["wire_bytes"]


def test_link_race_refuses_bad_input_then_recovers(chapter13):
    """Each bad value, in its field (the others good): refused with the reason in the field's slot,
    the field marked invalid, nothing injected. After each field's cases the good values compute
    again, exactly those values."""
    w = widget(chapter13, "link-race")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    good = {"bandwidth": "100", "latency": "50", "step_ms": "3", "workers": "4"}
    cases = [("bandwidth", "0", "no sync would ever end"), ("workers", "0", "Workers"),
             ("workers", "1e9", "Workers")] + [("latency", b, "Latency") for b in BAD]
    for k, (field, value, text) in enumerate(cases):
        enter(w, field, TIMEOUT, **{**good, field: value})
        refused(w, f"{field}={value!r}", field, text)
        if k + 1 == len(cases) or cases[k + 1][0] != field:
            fill_and_wait(w, **good)


# ---------------------------------------------------------------------------
# queue


def test_queue_matches_pylib(chapter13):
    from pylib.systems import queueing
    w = widget(chapter13, "queue")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    r = fill_and_wait(w, rho="0.7", service_ms="10", workers="32", step_ms="100", spread_ms="20")
    ref = queueing.simulate_md1(0.7, 10.0, 50_000, 0)
    assert r["md1"]["mean"] == pytest.approx(ref["mean"], rel=1e-9)
    assert r["md1"]["exact"] == pytest.approx(0.7 * 10 / (2 * 0.3))
    slow = queueing.simulate_stragglers(32, 100.0, 20.0, 200_000 // 32, 0)
    assert r["stragglers"]["mean"] == pytest.approx(slow["mean"], rel=1e-9)
    assert r["stragglers"]["exact"] == pytest.approx(queueing.expected_slowest(32, 100.0, 20.0))


def test_queue_refuses_bad_input_then_recovers(chapter13):
    """Each bad value, in its field (the others good): refused with the reason in the field's slot,
    the field marked invalid, nothing injected. After each field's cases the good values simulate
    again, exactly those values."""
    w = widget(chapter13, "queue")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    good = {"rho": "0.5", "service_ms": "10", "workers": "8", "step_ms": "100", "spread_ms": "20"}
    cases = ([("rho", "1", "unstable"), ("rho", "1.5", "unstable"), ("workers", "0", "Workers"),
              ("workers", "1e9", "Workers"), ("spread_ms", "-1", "Spread")]
             + [("service_ms", b, "Transfer time") for b in BAD + ["0"]])
    for k, (field, value, text) in enumerate(cases):
        enter(w, field, TIMEOUT, **{**good, field: value})
        refused(w, f"{field}={value!r}", field, text)
        if k + 1 == len(cases) or cases[k + 1][0] != field:
            fill_and_wait(w, **good)


# ---------------------------------------------------------------------------
# The form and the charts: labels, sliders, text alternatives


@pytest.mark.parametrize("name", ["slow-train", "link-race", "queue"])
def test_every_field_is_labelled_and_described(chapter13, name):
    assert_fields_labelled(widget(chapter13, name))


def test_queue_load_slider_works_by_keyboard_and_follows_the_field(chapter13):
    w = widget(chapter13, "queue")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    fill_and_wait(w, rho="0.5", service_ms="10", workers="8", step_ms="100", spread_ms="20")
    drive_slider(w, "rho", "0.98", "0.5", typed_pos=48)
    w.locator('[data-slider-for="rho"]').focus()
    # the keyboard simulates again, as a drag does
    assert settle_after(w, lambda: chapter13.keyboard.press("End"), timeout=TIMEOUT) == "done"
    r = result(w)
    assert r["settings"]["rho"] == 0.98
    assert r["md1"]["exact"] == pytest.approx(0.98 * 10 / (2 * 0.02))


def test_link_race_bandwidth_slider_is_logarithmic_and_recomputes(chapter13):
    w = widget(chapter13, "link-race")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    fill_and_wait(w, bandwidth="100", latency="0", step_ms="3", workers="4")
    slider = w.locator('[data-slider-for="bandwidth"]')
    slider.focus()
    before = settles(w)
    chapter13.keyboard.press("Home")
    assert w.locator('input[name="bandwidth"]').input_value() == "1"
    for _ in range(4):  # PageUp: a tenth of the slider, 20 positions (Chromium's step for a range)
        chapter13.keyboard.press("PageUp")
    for _ in range(20):  # half of 200 positions over 7 decades: 10^3.5
        chapter13.keyboard.press("ArrowRight")
    assert float(w.locator('input[name="bandwidth"]').input_value()) == pytest.approx(10 ** 3.5, rel=1e-2)
    assert wait_settled(w, timeout=TIMEOUT, after=before) == "done"  # the last key's update, nothing pending
    assert abs(result(w)["settings"]["bandwidth"] - 3160) < 1


def test_link_race_and_queue_charts_have_text_alternatives(chapter13):
    w = widget(chapter13, "link-race")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    fill_and_wait(w, bandwidth="100", latency="0", step_ms="3", workers="4")
    expect(w.locator('[data-role="chart-summary"]')).to_contain_text("At the chosen 100 Mb/s")
    table = chart_table(w)
    assert table["header"][0] == "bandwidth (Mb/s)"
    assert len(table["rows"]) >= 10
    q = widget(chapter13, "queue")
    fill_and_wait(q, rho="0.7", service_ms="10", workers="32", step_ms="100", spread_ms="20")
    expect(q.locator('[data-role="wait-chart-summary"]')).to_contain_text("at your ρ = 0.7")
    expect(q.locator('[data-role="slow-chart-summary"]')).to_contain_text("at your W = 32")


def test_the_page_is_accessible_in_both_themes_and_reflows_on_a_phone(chapter13):
    # Last: after the tests above, with the widgets as they left them (a11y_checks.check_accessibility).
    check_accessibility(chapter13, "chapters/13-training-over-slow-links.html")
