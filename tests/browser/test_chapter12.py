"""Chapter 12 in a real browser: the pipeline Gantt charts (the reader's schedule above GPipe), tensor parallelism step by step and the
layout planner, each against the same pylib call in CPython, with bad input refused visibly and
nothing injected. In-page times are printed (benchmarks, never asserted). One shared page
(conftest.chapter_fixture); a console error or a request off 127.0.0.1 fails a test."""

import json
import re

import pytest
from playwright.sync_api import expect

from a11y_checks import check_accessibility
from conftest import chapter_fixture, chapter_url, close_page, open_reader_page, result, settle_after, wait_settled, widget
from kit_checks import (assert_error_in_slot, assert_fields_labelled, chart_table, drive_slider, enter, refused, round_ticks,
                        screenshot_widget, set_fields)

chapter12 = chapter_fixture("12-")

TIMEOUT = 120_000
BAD = ["", "0", "NaN", "-1", "2.5", "1e9", "1e309", "🙂", "<b class=injected>x</b>", "<img src=x onerror=alert(1)>"]


def press_run(w, statuses=("done", "error")):
    """Press Run and wait for the answer to it (a live update of typed fields that was still waiting
    is dropped, one on its way is overtaken); returns its status."""
    return settle_after(w, lambda: w.locator('[data-action="run"]').click(), statuses, timeout=TIMEOUT)


def slide(w, name, position):
    """Move field name's slider to position (as a drag does: it recomputes at once), wait for the
    answer, which must be a result; returns it."""
    assert settle_after(w, lambda: w.locator(f'[data-slider-for="{name}"]').fill(str(position)), timeout=TIMEOUT) == "done"
    return result(w)


# ---------------------------------------------------------------------------
# The Gantt chart


def test_gantt_draws_the_default_schedule_and_matches_cpython(chapter12):
    from pylib.systems import pipeline
    w = widget(chapter12, "pipeline-gantt")
    assert wait_settled(w, ["done", "error"]) == "done"
    r = result(w)
    sim = pipeline.simulate_pipeline(r["schedule"], r["stages"], r["microbatches"], r["chunks"], 1.0, r["ratio"])
    assert r["makespan"] == pytest.approx(sim["makespan"]) and r["peak_in_flight"] == sim["peak_in_flight"]
    assert r["bubble_fraction"] == pytest.approx(r["formula_of_total"])
    assert w.locator('[data-role="chart"] rect').count() > r["events"]  # every event, plus the idle rows
    assert_round_time_ticks(w, max(r["makespan"], r["reference"]["makespan"]))


def assert_round_time_ticks(w, makespan):
    """Each chart's time axis is labelled at round times, from 0 to the longer schedule's makespan at most
    (the issue saw 0.0, 4.1, 8.3)."""
    for role in ("chart", "reference"):
        values = round_ticks(w.locator(f'[data-role="{role}"]'))
        assert values[0] == 0 and values[-1] <= makespan, (role, values)


def test_gantt_at_8_stages_by_32_microbatches_interleaved_stays_responsive(chapter12):
    from pylib.systems import pipeline
    w = widget(chapter12, "pipeline-gantt")
    set_fields(w, schedule="interleaved", stages="8", microbatches="32", chunks="4")
    assert press_run(w) == "done"
    r = result(w)
    assert (r["schedule"], r["stages"], r["microbatches"], r["chunks"]) == ("interleaved", 8, 32, 4)
    sim = pipeline.simulate_pipeline("interleaved", 8, 32, 4, 1.0, r["ratio"])
    assert r["bubble_over_ideal"] == pytest.approx(sim["bubble_over_ideal"]) == pytest.approx(7 / (4 * 32))
    assert_round_time_ticks(w, max(r["makespan"], r["reference"]["makespan"]))
    times = []
    for m in (24, 16, 32):  # drags of the microbatch slider
        r = slide(w, "microbatches", m - 1)  # positions 0..63 are 1..64
        assert r["microbatches"] == m
        times.append(r["ms"])
    print(f"\nin-page Gantt update at 8 stages x (16-32) microbatches x 4 chunks: {', '.join(f'{t:.0f}' for t in times)} ms")


def test_gantt_refuses_bad_input_and_recovers(chapter12):
    """Every bad value in every field (stages, microbatches, chunks, ratio; 2.5 is a valid ratio) is
    refused: an error, the field marked invalid, a message under it and in the status line, nothing
    injected. The field's good value back, the next field; the widget computes again at the end."""
    w = widget(chapter12, "pipeline-gantt")
    good = {"stages": "4", "microbatches": "8", "chunks": "2", "ratio": "2"}
    set_fields(w, schedule="interleaved", **good)
    for field in good:
        for bad in BAD:
            if field == "ratio" and bad in ("2.5",):
                continue  # a valid ratio
            enter(w, field, TIMEOUT, **{field: bad})
            shown = refused(w, f"{field}={bad!r}", field)
            assert shown["message"].strip(), f"{field}={bad!r}: no message in the status line"
        set_fields(w, **{field: good[field]})
    assert press_run(w) == "done"


# Everything the charts show about the settings they were drawn for, read at once: the titles, the stale
# line, the readouts, the summaries, each chart's box count and its memory bars' values.
SHOWN = """el => ({
    titles: [...el.querySelectorAll(".mp-chart-title")].map((t) => t.textContent),
    stale: el.querySelector('[data-role="stale"]').hidden ? null : el.querySelector('[data-role="stale"]').textContent,
    readouts: Object.fromEntries([...el.querySelectorAll("[data-readout]")].map((r) => [r.dataset.readout, r.textContent.trim()])),
    summaries: ["chart", "reference"].map((n) => el.querySelector(`[data-role="${n}-summary"]`).textContent),
    boxes: ["chart", "reference"].map((n) => el.querySelectorAll(`[data-role="${n}"] rect.mp-box`).length),
    bars: ["chart", "reference"].map((n) => [...el.querySelectorAll(`[data-role="${n}"] rect.mp-mem`)].map((b) => ({
        value: +b.dataset.value, width: +b.getAttribute("width"),
        label: el.querySelector(`[data-role="${n}"] text.mp-mem-label[data-stage="${b.dataset.stage}"]`).textContent }))),
})"""


def test_gantt_says_why_interleaving_needs_a_multiple_of_the_stages(chapter12):
    """The refused combination says why, under its field, and everything drawn stays at the last good
    settings together: the charts, their titles (which name those settings), the readouts and the
    summaries are what they were, and a line says that they show the last good settings, naming them.
    The next good combination draws again and the line goes."""
    w = widget(chapter12, "pipeline-gantt")
    set_fields(w, schedule="interleaved", stages="4", microbatches="8", chunks="2", ratio="2")
    assert press_run(w) == "done"
    good = w.evaluate(SHOWN)
    assert good["stale"] is None and good["boxes"] == [2 * 4 * 8 * 2, 2 * 4 * 8], good
    assert "4 stages × 8 microbatches × 2 chunks" in good["titles"][0] and "4 stages × 8 microbatches" in good["titles"][1]
    # One field only: typing recomputes once the keys pause (60 ms), so changing two fields could draw
    # a good combination in between (8 stages x 8 microbatches, once, on a loaded CI machine).
    set_fields(w, microbatches="6")
    assert press_run(w) == "error"
    assert_error_in_slot(w, "microbatches", "multiple of the stages")
    expect(w.locator('[data-role="message"]')).to_contain_text("Microbatches m")
    shown = w.evaluate(SHOWN)
    assert {k: shown[k] for k in shown if k != "stale"} == {k: good[k] for k in good if k != "stale"}, (good, shown)
    assert shown["stale"] and "last good settings" in shown["stale"], shown
    assert "interleaved 1F1B and GPipe, 4 stages × 8 microbatches × 2 chunks" in shown["stale"], shown
    set_fields(w, microbatches="16")
    assert press_run(w) == "done"
    again = w.evaluate(SHOWN)
    assert again["stale"] is None and again["boxes"] == [2 * 4 * 16 * 2, 2 * 4 * 16], again
    assert "4 stages × 16 microbatches × 2 chunks" in again["titles"][0], again


def test_gantt_draws_the_schedule_and_gpipe_on_the_same_settings_and_time_scale(chapter12):
    """One call draws both charts: the reader's schedule above, GPipe below on the same stages,
    microbatches and ratio (one chunk); a time tick stands at the same x in both, so a schedule that
    ends sooner (ZB-H1) ends further left than GPipe, by its makespan; 1F1B ends where GPipe does."""
    w = widget(chapter12, "pipeline-gantt")
    ends = """el => ["chart", "reference"].map((n) => {
        const boxes = [...el.querySelectorAll(`[data-role="${n}"] rect.mp-box`)];
        const ticks = Object.fromEntries([...el.querySelectorAll(`[data-role="${n}"] text[data-tick]`)]
            .map((t) => [t.dataset.tick, +t.getAttribute("x")]));
        return { right: Math.max(...boxes.map((b) => +b.getAttribute("x") + +b.getAttribute("width") + 0.6)), ticks };
    })"""
    for schedule, ratio in (("1f1b", "2"), ("zb-h1", "1")):
        set_fields(w, schedule=schedule, stages="4", microbatches="8", chunks="1", ratio=ratio)
        assert press_run(w) == "done"
        r = result(w)
        g = r["reference"]
        assert (r["schedule"], g["schedule"]) == (schedule, "gpipe")
        assert (g["stages"], g["microbatches"], g["chunks"], g["ratio"]) == (4, 8, 1, float(ratio))
        mine, ref = w.evaluate(ends)
        assert mine["ticks"] == ref["ticks"] and len(mine["ticks"]) >= 3, (mine, ref)
        t0, t1 = sorted(mine["ticks"], key=float)[:2]
        left, px = mine["ticks"][t0], (mine["ticks"][t1] - mine["ticks"][t0]) / (float(t1) - float(t0))
        assert mine["right"] - left == pytest.approx(r["makespan"] * px, abs=1)
        assert ref["right"] - left == pytest.approx(g["makespan"] * px, abs=1)
        if schedule == "1f1b":
            assert r["makespan"] == pytest.approx(g["makespan"]) and r["bubble_fraction"] == pytest.approx(g["bubble_fraction"])
        else:
            assert r["makespan"] < g["makespan"] and mine["right"] < ref["right"] - 20
        titles = w.locator(".mp-chart-title")
        expect(titles.nth(1)).to_contain_text("GPipe, for reference: 4 stages × 8 microbatches")


@pytest.mark.parametrize("p,m", [(4, 8), (8, 4), (2, 16)])
def test_gantt_memory_bars_are_each_schedules_peak_activations_on_one_scale(chapter12, p, m):
    """Each stage's bar, under both schedules, is the op's peak_activations (the same call in CPython),
    labelled with its number: GPipe's stage 1 holds m microbatches, 1F1B's min(p, m); one pixel scale
    for the bars of both charts, so the longer bar is the larger number."""
    from pylib.web import model_parallel_ops
    w = widget(chapter12, "pipeline-gantt")
    set_fields(w, schedule="1f1b", stages=str(p), microbatches=str(m), chunks="1", ratio="2")
    assert press_run(w) == "done"
    ref = model_parallel_ops.pipeline_schedule({"schedule": "1f1b", "stages": str(p), "microbatches": str(m),
                                                "chunks": "1", "ratio": "2"})
    shown = w.evaluate(SHOWN)
    mine, gpipe = shown["bars"]
    assert [b["value"] for b in mine] == ref["peak_activations"] and len(mine) == p
    assert [b["value"] for b in gpipe] == ref["reference"]["peak_activations"]
    assert [float(b["label"]) for b in mine + gpipe] == [b["value"] for b in mine + gpipe]
    assert gpipe[0]["value"] == m and mine[0]["value"] == min(p, m)
    px = [b["width"] / b["value"] for b in mine + gpipe]
    assert max(px) == pytest.approx(min(px), rel=1e-6), px
    assert shown["readouts"]["peak"] == str(min(p, m)) and shown["readouts"]["gpipe_peak"] == str(m)


def test_gantt_zero_bubble_draws_b_and_w_and_matches_cpython(chapter12):
    from pylib.systems import pipeline
    w = widget(chapter12, "pipeline-gantt")
    set_fields(w, schedule="zb-h1", stages="4", microbatches="8", chunks="1", ratio="2")
    assert press_run(w) == "done"
    r = result(w)
    assert (r["schedule"], r["stages"], r["microbatches"], r["chunks"], r["ratio"]) == ("zb-h1", 4, 8, 1, 2)
    sim = pipeline.simulate_pipeline("zb-h1", 4, 8, 1, 1.0, 2.0)
    assert r["makespan"] == pytest.approx(sim["makespan"]) and r["peak_in_flight"] == sim["peak_in_flight"]
    one = pipeline.simulate_pipeline("1f1b", 4, 8, 1, 1.0, 2.0)
    assert r["bubble_over_ideal"] == pytest.approx(r["formula_over_ideal"]) == pytest.approx(one["bubble_over_ideal"] / 3)
    assert r["events"] == 3 * 4 * 8
    for kind in "FBW":  # every pass drawn, W in its own colour
        expect(w.locator(f'[data-role="chart"] rect[data-kind="{kind}"]')).to_have_count(4 * 8)
    expect(w.locator('[data-role="chart"] rect[data-kind="W"].s3')).to_have_count(4 * 8)
    # not by colour alone: every B and W box has its hatching over it, forwards none
    hatched = w.locator('[data-role="chart"] rect.mp-hatch').evaluate_all("els => els.map((e) => e.getAttribute('fill'))")
    assert len(hatched) == 2 * 4 * 8 and len(set(hatched)) == 2, hatched
    expect(w.locator('[data-readout="formula_over_ideal"]').locator("xpath=preceding-sibling::dt")).to_contain_text("t_W")
    table = chart_table(w, "chart-data")
    assert table["header"][3] == "W boxes" and table["rows"][0][3] == "8"  # stage 1 runs all 8 of its W passes
    w.locator('input[name="microbatches"]').fill("3")  # fewer microbatches than stages: no closed form
    assert press_run(w) == "done"
    expect(w.locator('[data-readout="formula_over_ideal"]')).to_contain_text("holds for m ≥ p")
    w.locator('input[name="chunks"]').fill("2")
    assert press_run(w) == "error"
    assert_error_in_slot(w, "chunks", "one chunk per stage")
    w.locator('input[name="chunks"]').fill("1")
    assert press_run(w) == "done"


# ---------------------------------------------------------------------------
# Tensor parallelism


def test_tensor_parallel_steps_through_the_seeds_example_and_checks_the_model(chapter12):
    from pylib.systems import tensor_parallel
    from pylib.web import model_parallel_ops
    w = widget(chapter12, "tensor-parallel")
    assert wait_settled(w, ["done", "error"]) == "done"
    ex = json.loads(w.get_attribute("data-example"))
    assert ex["y"] == tensor_parallel.worked_example()["y"] == [9.0, 6.0]
    for _ in range(6):
        w.locator('[data-action="next"]').click()
    assert w.get_attribute("data-step") == "7"
    expect(w.locator('[data-role="reduce"]')).to_contain_text("[9, 3]")
    expect(w.locator('[data-action="next"]')).to_be_disabled()
    expect(w.locator('[data-action="back"]')).to_be_focused()  # Next, disabled at the end, hands focus to Back
    assert press_run(w) == "done"
    r = result(w)
    ref = model_parallel_ops.tp_check({})
    assert r["per_block"] == ref["per_block"] == 4 and r["bytes_each"] == ref["bytes_each"]
    assert r["tp_loss"] == pytest.approx(ref["tp_loss"], rel=1e-12)
    assert r["max_rel_grad_diff"] < 1e-12
    print(f"\nin-page tensor-parallel check of the 2-layer model: {r['ms']:.0f} ms")


# ---------------------------------------------------------------------------
# The planner


def test_planner_matches_cpython_and_recomputes_on_every_drag(chapter12):
    from pylib.web import model_parallel_ops
    w = widget(chapter12, "planner")
    assert wait_settled(w, ["done", "error"]) == "done"
    r = result(w)
    args = {"run": r["run"], "gpus": "1536", "dp": "auto", "tp": "8", "pp": "8", "cp": "1", "global_batch": "2304",
            "micro_batch": "1", "chunks": "1", "recompute": "full"}
    ref = model_parallel_ops.planner_plan(args)
    assert r["dp"] == ref["dp"] and r["step_seconds"] == pytest.approx(ref["step_seconds"], rel=1e-12)
    assert r["mfu"] == pytest.approx(ref["mfu"], rel=1e-12)
    times = []
    for k in (2, 4, 3):  # PP = 4, 16, 8 by the slider
        out = slide(w, "pp", k)  # positions 0..7 are 1..128, powers of two
        assert out["dp"] == 1536 // (8 * 2 ** k)
        times.append(out["ms"])
    print(f"\nin-page planner update per drag: {', '.join(f'{t:.0f}' for t in times)} ms")
    rows = w.locator('[data-role="table"] tbody tr')
    assert rows.count() == 13


def test_planner_refuses_bad_layouts_and_recovers(chapter12):
    """Every bad value (and 7, which divides nothing) in each of gpus, dp, tp, pp and global_batch is
    refused with a message and nothing injected; the field's value back, the next field; the planner
    computes again at the end."""
    w = widget(chapter12, "planner")
    assert wait_settled(w, ["done", "error"]) == "done"
    for field in ("gpus", "dp", "tp", "pp", "global_batch"):
        good = w.locator(f'input[name="{field}"]').input_value()
        for bad in BAD + ["7"]:
            enter(w, field, TIMEOUT, **{field: bad})
            shown = refused(w, f"{field}={bad!r}")  # a layout can be refused for another field's sake
            assert shown["message"].strip(), f"{field}={bad!r}: no message"
        set_fields(w, **{field: good})
    assert press_run(w) == "done"


def test_run_pressed_while_typing_computes_once(chapter12):
    """Run pressed while a typed value's live update still waits for the keys to pause: the kit's
    calculator drops that update (calc.soon), so the plan is computed once, and the status does not
    go back to "running" for a second computation of the same fields just after."""
    w = widget(chapter12, "planner")
    assert wait_settled(w, ["done", "error"]) == "done"
    assert settle_after(w, lambda: w.evaluate("""el => {
        el.resultWrites = 0;
        new MutationObserver((records) => { el.resultWrites += records.length; })
          .observe(el, { attributes: true, attributeFilter: ["data-result"] });
        const box = el.querySelector('input[name="tp"]');
        box.value = box.value;  // typed: the live update is now 60 ms away
        box.dispatchEvent(new Event("input", { bubbles: true }));
        el.querySelector('[data-role="form"]').requestSubmit();  // and Run, before it
    }"""), ["done", "error"]) == "done"
    chapter12.wait_for_timeout(600)  # ten times the typing pause: a live update would have started
    assert w.get_attribute("data-status") == "done"
    assert w.evaluate("el => el.resultWrites") == 1


def test_planner_names_a_product_that_misses_the_gpu_count(chapter12):
    w = widget(chapter12, "planner")
    w.locator('input[name="dp"]').fill("5")
    assert press_run(w) == "error"
    assert_error_in_slot(w, "gpus", "does not match")
    expect(w.locator('[data-role="message"]')).to_contain_text("GPUs")
    w.locator('input[name="dp"]').fill("auto")
    assert press_run(w) == "done"


# ---------------------------------------------------------------------------
# The form and the charts: labels, sliders, error slots, text alternatives


@pytest.mark.parametrize("name", ["pipeline-gantt", "planner"])
def test_every_field_is_labelled_and_described(chapter12, name):
    assert_fields_labelled(widget(chapter12, name))


def test_gantt_stage_slider_works_by_keyboard_and_follows_the_field(chapter12):
    w = widget(chapter12, "pipeline-gantt")
    set_fields(w, schedule="1f1b", microbatches="16", chunks="1", ratio="2")
    drive_slider(w, "stages", "16", "5", typed_pos=4)
    w.locator('[data-slider-for="stages"]').focus()
    # the keyboard recomputes, as a drag does
    assert settle_after(w, lambda: chapter12.keyboard.press("End"), timeout=TIMEOUT) == "done"
    r = result(w)
    assert (r["schedule"], r["stages"], r["microbatches"]) == ("1f1b", 16, 16)
    assert r["bubble_fraction"] == pytest.approx(r["formula_of_total"])


def test_gantt_charts_have_a_text_alternative(chapter12):
    """Both charts: a sentence naming the schedule, its idle share and stage 1's peak against the other's,
    and a table per stage with the boxes, the busy and idle time and the peak activations."""
    w = widget(chapter12, "pipeline-gantt")
    set_fields(w, schedule="1f1b", stages="4", microbatches="8", chunks="1", ratio="2")
    assert press_run(w) == "done"
    r = result(w)
    g = r["reference"]
    assert (r["schedule"], r["stages"], r["microbatches"], r["chunks"], r["ratio"]) == ("1f1b", 4, 8, 1, 2)
    summary, ref_summary = w.locator('[data-role="chart-summary"]'), w.locator('[data-role="reference-summary"]')
    expect(summary).to_contain_text(f"idle {100 * r['bubble_fraction']:.1f}%")
    expect(summary).to_contain_text("Stage 1 holds at most 4 microbatches' activations, against 8 under GPipe")
    expect(ref_summary).to_contain_text(f"idle {100 * g['bubble_fraction']:.1f}%")
    expect(ref_summary).to_contain_text("Stage 1 holds at most 8 microbatches' activations, against 4 under 1F1B")
    for role, peaks in (("chart-data", r["peak_activations"]), ("reference-data", g["peak_activations"])):
        table = chart_table(w, role)
        assert table["header"][-1] == "peak activations (microbatches)" and len(table["rows"]) == 4
        assert table["rows"][0][1:3] == ["8", "8"]  # stage 1: 8 forwards and 8 backwards
        assert [float(row[-1]) for row in table["rows"]] == peaks
    expect(w.locator('[data-role="chart"]')).to_have_attribute("aria-label", re.compile(r"^1F1B, 4 stages × 8 microbatches"))
    expect(w.locator('[data-role="reference"]')).to_have_attribute("aria-label", re.compile(r"^GPipe, 4 stages × 8 microbatches"))


def test_gantt_fits_a_phone_and_a_desktop(reader_profile, browser, site_url):
    """Photographed at 1280 and 360 px (.cache/screenshots/pipeline-gantt-*.png) with nothing past the
    viewport; on the phone the memory bars go under each chart, still one bar per stage. On a page of
    its own: at 360 px the chapter's code blocks are laid out narrower, and the height each then keeps
    while off screen would be wrong for the shared page's later tests (test_code_blocks_...)."""
    page = open_reader_page(reader_profile, browser, chapter_url(site_url, "12-"), viewport={"width": 1100, "height": 1000})
    try:
        w = widget(page, "pipeline-gantt")
        assert wait_settled(w, ["done", "error"], timeout=TIMEOUT) == "done"
        screenshot_widget(w, "pipeline-gantt")
        for role in ("chart", "reference"):
            expect(w.locator(f'[data-role="{role}"] rect.mp-mem')).to_have_count(4)
        assert not page.log.problems(), page.log.console  # no console error, no request off 127.0.0.1
    finally:
        close_page(page)


def test_planner_bars_have_a_text_alternative_and_their_own_legends(chapter12):
    w = widget(chapter12, "planner")
    wait_settled(w)  # the plan computed when it mounted, or by the tests before
    assert settle_after(w, lambda: w.locator('select[name="run"]').select_option(index=6), timeout=TIMEOUT) == "done"
    r = result(w)
    assert r["dp"] > 0
    expect(w.locator('[data-role="bars-summary"]')).to_contain_text(f"{r['memory_total_gb']:.1f} GB in all")
    assert w.locator('[data-role="bars"] .chart-legend').count() == 2
    for legend in w.locator('[data-role="bars"] .chart-legend').all():  # no colour twice within a bar
        classes = [c for c in legend.locator(".kit-swatch").evaluate_all("els => els.map(e => e.className)")]
        assert len(set(classes)) == len(classes)


# Every highlighted code block on the page: its --lines (build.py) against the lines it shows, whether
# its tokens were skipped (content-visibility: auto, site.css) while it was off screen, and its height
# then and once scrolled into view and drawn. Chromium skips a block that has left the viewport a
# frame or more after it left (it decides after a frame is drawn, and applies it in the next), and a
# busy machine delays that: back at the top, the blocks are read once every one far below is skipped,
# or after 5 s of frames (then the test reports the ones still laid out).
CODE_BLOCKS = """async () => {
    const frames = () => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
    // An exercise's cell is left out: its static block gives way to the editor when it comes into
    // view (cells.js), so once scrolled to it is hidden, not drawn (test_cells covers the cells)
    const pres = [...document.querySelectorAll("figure.code:not(.cell-code) pre")];
    // Chromium keeps a content-visibility: auto block laid out while it is within 150% of the
    // viewport's height beyond its edge (measured: laid out 2,328 px below the top of a 1,000 px
    // viewport, skipped at 2,558): "far below" is past three viewport heights
    const farBelow = (pre) => pre.getBoundingClientRect().top > 3 * innerHeight;
    const skipped = (pre) => !pre.firstElementChild.checkVisibility({ contentVisibilityAuto: true });
    window.scrollTo(0, 0);
    const started = performance.now();
    do await frames(); while (pres.some((pre) => farBelow(pre) && !skipped(pre)) && performance.now() - started < 5000);
    const out = pres.map((pre) => {
        const rect = pre.getBoundingClientRect();
        return { pre, lines: pre.style.getPropertyValue("--lines").trim(), shown: pre.textContent.replace(/\\n$/, "").split("\\n").length,
                 offScreen: farBelow(pre), skipped: skipped(pre),
                 focusable: pre.tabIndex === 0,
                 held: rect.height, caption: pre.closest("figure")?.querySelector("figcaption")?.textContent.trim() ?? "(no caption)" };
    });
    for (const block of out) {
        // In view, the block is laid out a frame or more later: wait until it is drawn
        block.pre.scrollIntoView({ block: "center" });
        const shown = performance.now();
        do await frames(); while (skipped(block.pre) && performance.now() - shown < 5000);
        block.stillSkipped = skipped(block.pre);
        block.drawn = block.pre.getBoundingClientRect().height;
        block.overflows = block.pre.scrollWidth > block.pre.clientWidth + 1;
        delete block.pre;
    }
    window.scrollTo(0, 0);
    return out;
}"""


def test_code_blocks_off_screen_are_skipped_and_hold_their_drawn_height(chapter12):
    """The chapter with the most code (20 blocks besides the exercises' cells): a block far from the
    viewport is not laid out (its tokens are skipped), yet it holds the height it has once drawn, to a
    pixel, so nothing below it moves as the reader scrolls; it is in the tab order, while still
    skipped, exactly when it scrolls sideways once drawn (scrollers.js); and every block says how many
    lines it shows."""
    chapter12.evaluate("window.scrollTo(0, 0)")
    blocks = chapter12.evaluate(CODE_BLOCKS)
    assert len(blocks) >= 20, blocks
    for b in blocks:
        assert b["lines"] == str(b["shown"]), b
        if b["offScreen"]:
            assert b["skipped"], b
        assert not b["stillSkipped"], b  # in view, it was drawn within 5 s
        assert b["focusable"] == b["overflows"], b
        assert abs(b["held"] - b["drawn"]) <= 1, b
    assert sum(b["offScreen"] for b in blocks) >= 15, blocks
    assert sum(b["offScreen"] and b["overflows"] for b in blocks) >= 5, blocks  # at 1,100 px, most of this chapter's do


def test_the_widgets_show_the_model_not_their_own_timing(chapter12):
    """How long the page took to compute an update is the developer's figure, not the reader's: the
    Gantt chart, the tensor-parallel check and the planner keep it in their data-result (the tests
    above print it) and show no readout of it."""
    for name in ("pipeline-gantt", "tensor-parallel", "planner"):
        w = widget(chapter12, name)
        assert w.locator('[data-readout="ms"]').count() == 0, name
        assert "in-page time" not in w.inner_text(), name


def test_the_page_is_accessible_in_both_themes_and_reflows_on_a_phone(chapter12):
    # Last: after the tests above, with the widgets as they left them (a11y_checks.check_accessibility).
    check_accessibility(chapter12, "chapters/12-model-parallelism.html")
