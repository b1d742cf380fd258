"""The layout planner (pylib.systems.planner): its parts are the course's own models (chapter 10's
memory, the pipeline bubble, chapter 11's alpha-beta costs), bad layouts are refused with reasons,
and the published runs are typed as their sources give them."""

import dataclasses

import pytest

from pylib.systems import collectives, memory, pipeline, planner

SHAPE = memory.TransformerShape(n_layer=8, n_embd=1024, n_head=16, vocab_size=51200, seq_len=2048, ffn_hidden=4096)
CLUSTER = planner.Cluster(gpus=16, gpus_per_node=8, memory_bytes=80e9, peak_flops=312e12,
                          intra_bytes_per_s=300e9, inter_bytes_per_s=25e9)


def test_memory_per_gpu_is_chapter_10s_calculator():
    layout = planner.Layout(dp=2, tp=4, pp=2, global_batch=32, micro_batch=2, recompute="selective",
                            sequence_parallel=True, zero_stage=1)
    p = planner.plan(SHAPE, CLUSTER, layout)
    direct = memory.training_memory(SHAPE, micro_batch=2, recompute="selective", zero_stage=1, dp=2, tp=4, pp=2,
                                    sequence_parallel=True)
    assert p["memory_per_gpu"] == direct["total"]


def test_sequence_parallelism_lowers_the_activation_memory_fed_to_chapter_10():
    base = planner.Layout(dp=2, tp=8, pp=1, global_batch=16)
    off = planner.plan(SHAPE, CLUSTER, base)["memory"]["activations"]
    on = planner.plan(SHAPE, CLUSTER, dataclasses.replace(base, sequence_parallel=True))["memory"]["activations"]
    assert on < off


def test_step_time_adds_the_bubble_the_simulator_measures():
    layout = planner.Layout(dp=1, tp=4, pp=4, global_batch=8)
    p = planner.plan(SHAPE, CLUSTER, layout)
    sim = pipeline.simulate_pipeline("1f1b", 4, p["microbatches"])
    assert p["bubble_over_ideal"] == pytest.approx(sim["bubble_over_ideal"])
    busy = p["step_seconds"] - p["time"]["data_parallel"]
    assert busy == pytest.approx((p["microbatches"] + 3) / p["microbatches"] * (busy - p["time"]["bubble"]))


def test_data_parallel_time_is_the_ring_all_reduce_of_the_gradients():
    layout = planner.Layout(dp=16, global_batch=64)
    p = planner.plan(SHAPE, CLUSTER, layout)
    grads = memory.training_memory(SHAPE, dp=16)["params_per_device"] * 2
    assert p["time"]["data_parallel"] == pytest.approx(
        collectives.ring_all_reduce_time(grads, 16, CLUSTER.inter_alpha, 1 / CLUSTER.inter_bytes_per_s))
    assert p["comm_bytes"]["tensor_parallel"] == 0 and p["comm_bytes"]["pipeline"] == 0


def test_tensor_parallel_bytes_are_four_activations_per_layer_and_microbatch():
    layout = planner.Layout(dp=2, tp=8, global_batch=4)
    p = planner.plan(SHAPE, CLUSTER, layout)
    act = 1 * SHAPE.seq_len * SHAPE.n_embd * 2
    assert p["comm_bytes"]["tensor_parallel"] == p["microbatches"] * SHAPE.n_layer * 4 * act


def test_model_flops_match_narayanan_eq3_with_recomputation():
    B, s, l, h, V = 512, 2048, 24, 2304, 51200
    shape = memory.TransformerShape(n_layer=l, n_embd=h, n_head=24, vocab_size=V, seq_len=s, ffn_hidden=4 * h)
    f = planner.step_flops(shape, B, "full")
    assert f["hardware"] == pytest.approx(96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)), rel=1e-12)
    assert f["model"] == pytest.approx(72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)), rel=1e-12)


@pytest.mark.parametrize("layout,words", [
    (planner.Layout(dp=3, tp=4, pp=2, global_batch=24), "does not match the 16 GPUs"),
    (planner.Layout(dp=16, tp=1, global_batch=24), "does not split"),
    (planner.Layout(dp=1, tp=1, pp=16, global_batch=16), "more than the 8 layers"),
    (planner.Layout(dp=2, pp=8, chunks=2, global_batch=8), "chunks"),
    (planner.Layout(dp=0, tp=16, global_batch=16), "whole number"),
    (planner.Layout(dp=2.5, tp=8, global_batch=16), "whole number"),
    (planner.Layout(dp=10 ** 9, global_batch=16), "whole number between"),
])
def test_bad_layouts_are_refused_with_the_reason(layout, words):
    with pytest.raises(ValueError, match=words):
        planner.plan(SHAPE, CLUSTER, layout)


def test_interleaving_needs_microbatches_a_multiple_of_the_stages():
    with pytest.raises(ValueError, match="multiple of PP"):
        planner.plan(SHAPE, CLUSTER, planner.Layout(dp=4, pp=4, chunks=2, global_batch=24))


def test_published_runs_have_layouts_that_multiply_to_their_gpu_counts():
    runs = planner.published_runs()
    assert len(runs) == 13
    for r in runs:
        l = r["layout"]
        assert l.dp * l.tp * l.pp * l.cp == r["cluster"].gpus, r["name"]
    # Narayanan et al.'s eq. 2 gives each Table 1 row's parameter count from its shape (to the table's rounding)
    for r, row in zip(runs, planner.MEGATRON_TABLE1):
        L, h, V, s = r["shape"].n_layer, r["shape"].n_embd, 51200, 2048
        P = 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))
        assert P / 1e9 == pytest.approx(row[0], abs=0.06), r["name"]


def test_reported_percentages_are_the_reported_throughput_over_the_cited_peak():
    for row in planner.MEGATRON_TABLE1:
        assert round(100 * row[8] / 312) == pytest.approx(row[9], abs=1)
    for row in planner.LLAMA3_TABLE4:
        assert 100 * row[7] * 1e12 / planner.H100_PEAK == pytest.approx(row[8], abs=1)


def test_calibration_rows_are_reproduced_and_the_others_predicted():
    rows = planner.compare_published()
    cal = [r for r in rows if r["calibration"]]
    assert len(cal) == 2 and all(abs(r["error"]) < 1e-6 for r in cal)
    assert sum(not r["calibration"] for r in rows) == 11


# ---------------------------------------------------------------------------
# The page ops (pylib.web.model_parallel_ops)


def test_page_ops_refuse_bad_input_field_by_field():
    import json
    from pylib import web
    bad = json.loads(web.handle("pipeline_schedule", json.dumps(
        {"schedule": "1f1b", "stages": "0", "microbatches": "1e9", "chunks": "NaN", "ratio": "<b>x</b>"})))
    assert not bad["ok"] and set(bad["errors"]) == {"stages", "microbatches", "chunks", "ratio"}
    few = json.loads(web.handle("pipeline_schedule", json.dumps(
        {"schedule": "interleaved", "stages": "8", "microbatches": "4", "chunks": "2", "ratio": "2"})))
    assert "multiple of the stages" in few["errors"]["microbatches"]
    runs = json.loads(web.handle("planner_runs", "{}"))["value"]["runs"]
    r = runs[6]
    args = {k: str(r[k]) for k in ("gpus", "dp", "tp", "pp", "cp", "global_batch", "micro_batch", "chunks")}
    args.update(run=r["name"], recompute=r["recompute"])
    good = json.loads(web.handle("planner_plan", json.dumps(args)))
    assert good["ok"] and good["value"]["microbatches"] == r["global_batch"] // r["dp"]
    mismatch = json.loads(web.handle("planner_plan", json.dumps({**args, "dp": "5"})))
    assert "does not match" in mismatch["errors"]["gpus"]
    for v in ["", "NaN", "2.5", "1e9", "🙂"]:
        out = json.loads(web.handle("planner_plan", json.dumps({**args, "tp": v})))
        assert not out["ok"] and ("tp" in out["errors"] or "gpus" in out["errors"])


def test_page_schedule_op_matches_the_simulator():
    import json
    from pylib import web
    v = json.loads(web.handle("pipeline_schedule", json.dumps(
        {"schedule": "interleaved", "stages": "8", "microbatches": "32", "chunks": "4", "ratio": "2"})))["value"]
    r = pipeline.simulate_pipeline("interleaved", 8, 32, 4, 1.0, 2.0)
    assert v["makespan"] == r["makespan"] and v["peak_in_flight"] == r["peak_in_flight"]
    assert v["bubble_over_ideal"] == pytest.approx(v["formula_over_ideal"])


def test_page_planner_fills_dp_when_asked_and_says_when_it_cannot():
    import json
    from pylib import web
    args = {"run": "Megatron GPT 145.6B", "gpus": "1536", "dp": "auto", "tp": "8", "pp": "8", "cp": "1",
            "global_batch": "2304", "micro_batch": "1", "chunks": "1", "recompute": "full"}
    out = json.loads(web.handle("planner_plan", json.dumps(args)))["value"]
    assert out["dp"] == 24
    bad = json.loads(web.handle("planner_plan", json.dumps({**args, "pp": "7"})))
    assert "does not divide the 1,536 GPUs" in bad["errors"]["dp"]


def test_llama3_schedule_takes_any_microbatch_count_with_bubble_p_minus_1_over_vm():
    layout = planner.Layout(dp=4, pp=4, chunks=2, global_batch=24, schedule="llama3")  # m = 6, not a multiple of 4
    p = planner.plan(SHAPE, CLUSTER, layout)
    assert p["bubble_over_ideal"] == pytest.approx(3 / (2 * 6))
    with pytest.raises(ValueError, match="schedule must be one of"):
        planner.plan(SHAPE, CLUSTER, dataclasses.replace(layout, schedule="zb"))


def test_causal_convention_halves_only_the_attention_term():
    shape = dataclasses.replace(SHAPE, seq_len=4096)
    full = planner.layer_forward_flops_per_token(shape)
    causal = planner.layer_forward_flops_per_token(shape, attention="causal")
    assert full - causal == 2 * shape.seq_len * shape.n_embd
    with pytest.raises(ValueError, match="attention must be"):
        planner.layer_forward_flops_per_token(shape, attention="sparse")


def test_llama3_sensitivity_sweeps_v_and_b_and_reproduces_the_fitted_row_where_peak_allows():
    rows = planner.llama3_sensitivity(chunks=(1, 4), micro_batches=(1, 2))
    assert [(r["chunks"], r["micro_batch"]) for r in rows] == [(1, 1), (1, 2), (4, 1), (4, 2)]
    for r in rows:
        m = [32 // r["micro_batch"], 16 // r["micro_batch"], 16 // r["micro_batch"]]  # Table 4's batch per DP group
        assert r["bubble_pct"] == pytest.approx([100 * 15 / (r["chunks"] * mi) for mi in m])
        if r["efficiency"] < 0.999:
            assert abs(r["error_pct"][0]) < 1e-4
        else:  # even the whole peak cannot reach 430 TFLOP/s with this bubble
            assert r["error_pct"][0] < 0
