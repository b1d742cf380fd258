"""Chapter 12 in a real browser: the pipeline Gantt chart, tensor parallelism step by step and the
layout planner, each against the same pylib call in CPython, with bad input refused visibly and
nothing injected. In-page times are printed (benchmarks, never asserted). One shared page
(conftest.chapter_fixture); a console error or a request off 127.0.0.1 fails a test."""

import json

import pytest
from playwright.sync_api import expect

from conftest import chapter_fixture, result, settle_after, wait_settled, widget
from kit_checks import assert_error_in_slot, assert_fields_labelled, chart_table, drive_slider, enter, refused, round_ticks, set_fields

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
    assert w.locator("svg rect").count() > r["events"]  # every event, plus the idle rows
    assert_round_time_ticks(w, r["makespan"])


def assert_round_time_ticks(w, makespan):
    """The time axis is labelled at round times, from 0 to the makespan at most (the issue saw 0.0, 4.1, 8.3)."""
    values = round_ticks(w.locator('[data-role="chart"]'))
    assert values[0] == 0 and values[-1] <= makespan, values


def test_gantt_at_8_stages_by_32_microbatches_interleaved_stays_responsive(chapter12):
    from pylib.systems import pipeline
    w = widget(chapter12, "pipeline-gantt")
    set_fields(w, schedule="interleaved", stages="8", microbatches="32", chunks="4")
    assert press_run(w) == "done"
    r = result(w)
    assert (r["schedule"], r["stages"], r["microbatches"], r["chunks"]) == ("interleaved", 8, 32, 4)
    sim = pipeline.simulate_pipeline("interleaved", 8, 32, 4, 1.0, r["ratio"])
    assert r["bubble_over_ideal"] == pytest.approx(sim["bubble_over_ideal"]) == pytest.approx(7 / (4 * 32))
    assert_round_time_ticks(w, r["makespan"])
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


def test_gantt_says_why_interleaving_needs_a_multiple_of_the_stages(chapter12):
    """The refused combination says why, and withdraws the schedule drawn before it: no boxes, the
    readouts "–", an empty data table and a summary that says no schedule is drawn. The next good
    combination draws again."""
    w = widget(chapter12, "pipeline-gantt")
    set_fields(w, schedule="interleaved", stages="4", microbatches="8", chunks="2")
    assert press_run(w) == "done" and w.locator("svg rect.mp-box").count() > 0
    set_fields(w, stages="8", microbatches="4")
    assert press_run(w) == "error"
    assert_error_in_slot(w, "microbatches", "multiple of the stages")
    expect(w.locator('[data-role="message"]')).to_contain_text("Microbatches m")
    shown = w.evaluate("""el => ({
        boxes: el.querySelectorAll("svg rect").length, chart: el.querySelector("svg").textContent,
        readouts: [...el.querySelectorAll("[data-readout]")].map((r) => r.textContent.trim()),
        summary: el.querySelector('[data-role$="summary"]').textContent })""")
    assert shown["boxes"] == 0 and "No schedule" in shown["chart"], shown
    assert shown["readouts"] and all(r == "–" for r in shown["readouts"]), shown
    assert chart_table(w)["rows"] == [] and "No schedule" in shown["summary"], shown
    set_fields(w, microbatches="16")
    assert press_run(w) == "done" and w.locator("svg rect.mp-box").count() > 0


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
        expect(w.locator(f'svg rect[data-kind="{kind}"]')).to_have_count(4 * 8)
    expect(w.locator('svg rect[data-kind="W"].s3')).to_have_count(4 * 8)
    expect(w.locator('[data-readout="formula_over_ideal"]').locator("xpath=preceding-sibling::dt")).to_contain_text("t_W")
    table = chart_table(w)
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


def test_gantt_chart_has_a_text_alternative(chapter12):
    w = widget(chapter12, "pipeline-gantt")
    set_fields(w, schedule="gpipe", stages="4", microbatches="8", chunks="1", ratio="2")
    assert press_run(w) == "done"
    r = result(w)
    assert (r["schedule"], r["stages"], r["microbatches"], r["chunks"], r["ratio"]) == ("gpipe", 4, 8, 1, 2)
    summary = w.locator('[data-role="chart-summary"]')
    expect(summary).to_contain_text(f"idle {100 * r['bubble_fraction']:.1f}%")
    rows = chart_table(w)["rows"]
    assert len(rows) == 4
    assert rows[0][1:3] == ["8", "8"]  # stage 1: 8 forwards and 8 backwards


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
