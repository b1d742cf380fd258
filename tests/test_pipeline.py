"""Pipeline parallelism: the schedule simulator against the closed forms, and the course model run
stage by stage in a schedule's order against the unsplit model (pylib.systems.pipeline)."""

import itertools

import numpy as np
import pytest

from pylib import model
from pylib.systems import pipeline

CASES = [("gpipe", p, m, 1) for p, m in [(2, 1), (2, 4), (4, 8), (4, 3), (8, 32)]] + \
        [("1f1b", p, m, 1) for p, m in [(2, 1), (2, 4), (4, 8), (4, 2), (8, 32)]] + \
        [("interleaved", p, m, v) for p, m, v in [(2, 4, 2), (4, 8, 2), (4, 4, 2), (4, 12, 3), (8, 32, 4)]]


def _dep_end(events, p, v):
    """(kind, virtual stage, microbatch) -> end time."""
    return {(k, c * p + s, mb): end for s, k, mb, c, start, end in events}


@pytest.mark.parametrize("schedule,p,m,v", CASES)
@pytest.mark.parametrize("tb", [1.0, 2.0, 3.5])
def test_simulated_events_respect_every_dependency_and_no_device_overlaps(schedule, p, m, v, tb):
    r = pipeline.simulate_pipeline(schedule, p, m, v, 1.0, tb)
    ev = r["events"]
    assert len(ev) == 2 * p * m * v  # every (virtual stage, microbatch) once forward, once backward
    ends = _dep_end(ev, p, v)
    assert len(ends) == len(ev)
    last = p * v - 1
    for s, k, mb, c, start, end in ev:
        j = c * p + s
        assert end - start == pytest.approx((1.0 if k == "F" else tb) / v)
        if k == "F" and j > 0:
            assert start >= ends[("F", j - 1, mb)]
        if k == "B":
            assert start >= ends[("B", j + 1, mb)] if j < last else start >= ends[("F", j, mb)]
            assert start >= ends[("F", j, mb)]
    for s in range(p):
        mine = sorted((e for e in ev if e[0] == s), key=lambda e: e[4])
        for a, b in zip(mine, mine[1:]):
            assert b[4] >= a[5]  # one thing at a time


@pytest.mark.parametrize("schedule,p,m,v", CASES)
@pytest.mark.parametrize("tb", [1.0, 2.0, 3.5])
def test_bubble_is_p_minus_1_over_vm_of_the_work_and_over_vm_plus_p_minus_1_of_the_time(schedule, p, m, v, tb):
    r = pipeline.simulate_pipeline(schedule, p, m, v, 1.0, tb)
    f = pipeline.bubble_formula(p, m, v)
    assert r["bubble_over_ideal"] == pytest.approx((p - 1) / (v * m), rel=1e-12)  # of the work
    assert r["bubble_fraction"] == pytest.approx((p - 1) / (v * m + p - 1), rel=1e-12)  # of the total time
    assert r["bubble_over_ideal"] == pytest.approx(f["over_ideal"]) and r["bubble_fraction"] == pytest.approx(f["of_total"])
    assert r["makespan"] == pytest.approx((m + (p - 1) / v) * (1.0 + tb))


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 3), (8, 32), (4, 2)])
def test_gpipe_holds_m_microbatches_and_1f1b_at_most_p(p, m):
    g = pipeline.simulate_pipeline("gpipe", p, m)
    o = pipeline.simulate_pipeline("1f1b", p, m)
    assert g["peak_in_flight"] == [m] * p
    assert o["peak_in_flight"] == [min(p - s, m) for s in range(p)]
    assert max(o["peak_in_flight"]) <= p
    assert g["makespan"] == o["makespan"]  # same bubble: 1F1B saves memory, not time


def test_interleaving_shrinks_the_bubble_but_holds_more_activations():
    one = pipeline.simulate_pipeline("1f1b", 4, 8)
    two = pipeline.simulate_pipeline("interleaved", 4, 8, 2)
    assert two["bubble_over_ideal"] == pytest.approx(one["bubble_over_ideal"] / 2)
    assert two["peak_activations"][0] > one["peak_activations"][0]


# ---------------------------------------------------------------------------
# Zero bubble (ZB-H1): the backward split into B (input gradient) and W (weight gradient)

ZB_SHAPES = [(2, 2), (2, 5), (3, 6), (4, 4), (4, 8), (8, 32)]  # m >= p
ZB_TIMES = [(1.0, 1.0, 1.0), (1.0, 1.5, 0.5), (2.0, 1.0, 0.75), (1.0, 3.0, 0.5), (0.5, 0.25, 0.25)]  # t_f, t_B, t_W; t_W <= t_B


def _zb_violations(events, p, times):
    """Every broken rule of a split-backward schedule's events: each (stage, microbatch) has one F,
    one B and one W of the right length; F after the previous stage's F; B after the next stage's B
    (the last stage: its own F); W after its own B; one thing at a time on each device."""
    tf, t_in, t_w = times
    ends, bad = {}, []
    for s, k, mb, c, start, end in events:
        if (k, s, mb) in ends:
            bad.append(f"{k}{mb} twice on stage {s}")
        ends[(k, s, mb)] = end
        if end - start != pytest.approx({"F": tf, "B": t_in, "W": t_w}[k]):
            bad.append(f"{k}{mb} on stage {s} lasts {end - start}")
    for s, k, mb, c, start, end in events:
        need = {"F": [("F", s - 1, mb)] if s > 0 else [],
                "B": [("B", s + 1, mb)] if s < p - 1 else [("F", s, mb)],
                "W": [("B", s, mb)]}[k]
        bad += [f"{k}{mb} on stage {s} starts before {d}" for d in need if d not in ends or start < ends[d]]
    for s in range(p):
        mine = sorted((e for e in events if e[0] == s), key=lambda e: e[4])
        bad += [f"stage {s} overlaps at {b[4]}" for a, b in zip(mine, mine[1:]) if b[4] < a[5]]
    m = len(events) // (3 * p)
    if len(events) != 3 * p * m or len(ends) != len(events):
        bad.append("missing passes")
    return bad


@pytest.mark.parametrize("p,m", ZB_SHAPES + [(4, 3), (4, 1)])
@pytest.mark.parametrize("times", ZB_TIMES + [(1.0, 0.5, 1.0)])
def test_zb_h1_respects_every_dependency_and_each_w_comes_after_its_b(p, m, times):
    r = pipeline.simulate_pipeline("zb-h1", p, m, 1, times[0], times[1] + times[2], times[1], times[2])
    assert _zb_violations(r["events"], p, times) == []
    if p > 1:  # the point of the split: some B runs before the next stage's W of that microbatch has ended
        ends = {(k, s, mb): end for s, k, mb, c, start, end in r["events"]}
        assert any(start < ends[("W", s + 1, mb)] for s, k, mb, c, start, end in r["events"] if k == "B" and s < p - 1)


def test_the_dependency_check_catches_planted_errors():
    r = pipeline.simulate_pipeline("zb-h1", 4, 8)
    good = r["events"]
    assert _zb_violations(good, 4, (1.0, 1.0, 1.0)) == []
    i = next(i for i, e in enumerate(good) if e[1] == "W" and e[0] == 2)
    s, k, mb, c, start, end = good[i]
    b_end = next(e[5] for e in good if e[:3] == (s, "B", mb))
    early = good[:i] + [(s, k, mb, c, b_end - 0.5, b_end + 0.5)] + good[i + 1:]  # W before its B ends
    assert any("before ('B', 2" in v for v in _zb_violations(early, 4, (1.0, 1.0, 1.0)))
    assert any("twice" in v for v in _zb_violations(good + [good[-1]], 4, (1.0, 1.0, 1.0)))
    j = next(i for i, e in enumerate(good) if e[1] == "B" and e[0] == 1)
    s, k, mb, c, start, end = good[j]
    nb = next(e[4] for e in good if e[:3] == (2, "B", mb))  # stage 1's B moved before stage 2's B
    assert any(f"B{mb} on stage 1 starts before ('B', 2" in v for v in _zb_violations(
        good[:j] + [(s, k, mb, c, nb, nb + 1.0)] + good[j + 1:], 4, (1.0, 1.0, 1.0)))


@pytest.mark.parametrize("p,m", ZB_SHAPES)
@pytest.mark.parametrize("times", ZB_TIMES)
def test_zb_h1_bubble_is_p_minus_1_times_tf_plus_tB_minus_tW_against_1f1bs_tf_plus_tB_plus_tW(p, m, times):
    tf, t_in, t_w = times
    zb = pipeline.simulate_pipeline("zb-h1", p, m, 1, tf, t_in + t_w, t_in, t_w)
    one = pipeline.simulate_pipeline("1f1b", p, m, 1, tf, t_in + t_w)
    ideal = m * (tf + t_in + t_w)
    assert zb["ideal"] == one["ideal"] == ideal
    # every time here is a multiple of 2^-2 and small: each sum is exact in float64, so == holds
    assert one["makespan"] - ideal == (p - 1) * (tf + t_in + t_w)
    assert zb["makespan"] - ideal == (p - 1) * (tf + t_in - t_w)
    f = pipeline.zb_h1_bubble(p, m, tf, t_in, t_w)
    assert zb["bubble_over_ideal"] == pytest.approx(f["over_ideal"], rel=1e-15)
    assert zb["bubble_fraction"] == pytest.approx(f["of_total"], rel=1e-15)


@pytest.mark.parametrize("p,m", ZB_SHAPES)
def test_zb_h1_bubble_is_a_third_of_1f1bs_when_f_b_and_w_take_the_same_time(p, m):
    zb = pipeline.simulate_pipeline("zb-h1", p, m)  # the defaults: t_f = 1, t_b = 2 split 1 + 1
    one = pipeline.simulate_pipeline("1f1b", p, m)
    assert (zb["t_b_input"], zb["t_b_weight"]) == (1.0, 1.0)
    assert 3 * (zb["makespan"] - zb["ideal"]) == one["makespan"] - one["ideal"] == 3 * (p - 1)
    assert zb["bubble_over_ideal"] == pytest.approx((p - 1) / (3 * m), rel=1e-15)  # the authors' (p-1)/3m


def test_zb_h1_with_a_long_weight_pass_keeps_a_bubble_of_p_minus_1_forwards():
    # t_W > t_B: the closed form (p-1)(t_f + t_B - t_W) would promise less than this order delivers
    for p, m in ZB_SHAPES:
        r = pipeline.simulate_pipeline("zb-h1", p, m, 1, 1.0, 1.5, 0.5, 1.0)
        assert r["makespan"] - r["ideal"] == (p - 1) * 1.0 > (p - 1) * (1.0 + 0.5 - 1.0)
        assert pipeline.zb_h1_bubble(p, m, 1.0, 0.5, 1.0) is None  # so the closed form is not offered
    assert pipeline.zb_h1_bubble(4, 3) is None  # nor with fewer microbatches than stages


@pytest.mark.parametrize("p,m", ZB_SHAPES + [(4, 3), (4, 2), (4, 1)])
def test_zb_h1_holds_at_most_what_1f1b_holds_on_its_first_stage(p, m):
    zb = pipeline.simulate_pipeline("zb-h1", p, m)
    one = pipeline.simulate_pipeline("1f1b", p, m)
    # a microbatch is held from its F until its W: every stage holds 1F1B's stage-1 peak, min(p, m)
    assert zb["peak_in_flight"] == [min(p, m)] * p
    assert max(zb["peak_in_flight"]) == max(one["peak_in_flight"]) == one["peak_in_flight"][0]


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 4), (3, 5), (4, 12), (8, 32), (4, 3), (4, 2)])
def test_zb_h1_order_is_pytorchs_zero_bubble_order_with_one_stage_per_rank(p, m):
    """torch 2.13, torch/distributed/pipelining/schedules.py: ScheduleInterleavedZeroBubble (the
    paper's ZB1P) with one local stage. Its per-rank order comes from _calculate_single_rank_operations,
    which reads four attributes; __init__ needs real stages (a process group), so it is skipped."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    z = schedules.ScheduleInterleavedZeroBubble.__new__(schedules.ScheduleInterleavedZeroBubble)
    z.pp_group_size, z.n_local_stages, z._n_microbatches = p, 1, m
    z.number_of_rounds = max(1, m // p)  # as __init__ sets them
    z.microbatches_per_round = m // z.number_of_rounds
    name = {"F": "F", "I": "B", "W": "W"}  # torch's I (BACKWARD_INPUT) is the paper's B
    for rank in range(p):
        theirs = [(name[a.computation_type.value], a.microbatch_index, a.stage_index)
                  for a in z._calculate_single_rank_operations(rank) if a is not None]
        ours = [(k, mb, rank) for k, mb, c in pipeline.device_order("zb-h1", rank, p, m)]
        assert ours == theirs, rank


@pytest.mark.parametrize("bad", [
    ("gpipe", 0, 4, 1), ("gpipe", 4, 0, 1), ("1f1b", 4, 4, 2), ("interleaved", 4, 6, 2),
    ("interleaved", 4, 2, 2), ("zigzag", 4, 4, 1), ("gpipe", 2.5, 4, 1), ("gpipe", True, 4, 1),
    ("zb-h1", 4, 4, 2), ("zb-h1", 4, 4, 1, 1.0, 2.0, 1.5, 1.0), ("zb-h1", 4, 4, 1, 1.0, 2.0, 2.0),
    ("zb-h1", 4, 4, 1, 1.0, 2.0, None, 0.0)])
def test_unschedulable_arguments_are_refused_with_a_message(bad):
    with pytest.raises(ValueError, match=r"\w"):
        pipeline.simulate_pipeline(*bad)


def _data(cfg, B=8, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, cfg.vocab_size, (B, cfg.block_size)), rng.integers(0, cfg.vocab_size, (B, cfg.block_size))


@pytest.mark.parametrize("schedule,stages,m,v", [
    ("gpipe", 2, 4, 1), ("gpipe", 4, 8, 1), ("1f1b", 2, 2, 1), ("1f1b", 3, 4, 1), ("1f1b", 4, 8, 1),
    ("interleaved", 2, 4, 2)])
def test_pipelined_four_layer_model_gives_the_unsplit_gradients(schedule, stages, m, v):
    cfg = model.GPTConfig(n_layer=4)
    params = model.init_params(cfg, 0, np.float64)
    x, y = _data(cfg)
    loss, grads = model.loss_and_grads(params, cfg, x, y)
    ploss, pgrads, order = pipeline.pipeline_loss_and_grads(params, cfg, x, y, stages, m, schedule, v)
    assert ploss == pytest.approx(loss, rel=1e-14)
    for name in grads:
        scale = np.abs(grads[name]).max()
        np.testing.assert_allclose(pgrads[name], grads[name], rtol=0, atol=1e-13 * scale, err_msg=name)
    # it really ran in the schedule's order: the first backward comes after the fill
    first_b = next(i for i, o in enumerate(order) if o[1] == "B")
    assert all(o[1] == "F" for o in order[:first_b]) and first_b >= stages * v


def test_stage_layers_cover_every_block_once():
    for n, s in itertools.product(range(1, 9), range(1, 9)):
        if s <= n:
            cut = pipeline.stage_layers(n, s)
            assert [l for r in cut for l in r] == list(range(n)) and all(len(r) >= 1 for r in cut)


def test_the_course_model_refuses_a_split_backward_schedule_it_cannot_run():
    cfg = model.GPTConfig(n_layer=4)
    params = model.init_params(cfg, 0, np.float64)
    x, y = _data(cfg)
    with pytest.raises(ValueError, match="split into B and W"):
        pipeline.pipeline_loss_and_grads(params, cfg, x, y, 2, 4, "zb-h1")


# ---------------------------------------------------------------------------
# The page op (pylib.web.model_parallel_ops.pipeline_schedule): the reader's schedule and GPipe in one call


@pytest.mark.parametrize("schedule,p,m,v", [("1f1b", 4, 8, 1), ("1f1b", 8, 4, 1), ("interleaved", 4, 8, 2),
                                            ("zb-h1", 4, 8, 1), ("zb-h1", 4, 3, 1)])
def test_page_op_returns_the_readers_schedule_and_gpipe_on_the_same_settings(schedule, p, m, v):
    import json
    from pylib import web
    out = json.loads(web.handle("pipeline_schedule", json.dumps(
        {"schedule": schedule, "stages": str(p), "microbatches": str(m), "chunks": str(v), "ratio": "2"})))
    assert out["ok"], out
    mine, ref = out["value"], out["value"]["reference"]
    assert (mine["schedule"], mine["chunks"]) == (schedule, v) and (ref["schedule"], ref["chunks"]) == ("gpipe", 1)
    for r in (mine, ref):
        assert (r["stages"], r["microbatches"], r["ratio"]) == (p, m, 2.0)
        sim = pipeline.simulate_pipeline(r["schedule"], p, m, r["chunks"], 1.0, 2.0)
        assert r["makespan"] == sim["makespan"] and r["peak_activations"] == sim["peak_activations"]
        assert len(r["start"]) == len(sim["events"])
    assert ref["peak_activations"][0] == m  # GPipe's first stage holds every microbatch
    if schedule == "1f1b":
        assert mine["peak_activations"][0] == min(p, m)  # 1F1B's holds at most p
        assert mine["makespan"] == pytest.approx(ref["makespan"])  # with the same bubble


def test_page_op_refuses_a_bad_combination_for_both_charts_with_the_fields_message():
    import json
    from pylib import web
    out = json.loads(web.handle("pipeline_schedule", json.dumps(
        {"schedule": "interleaved", "stages": "8", "microbatches": "4", "chunks": "2", "ratio": "2"})))
    assert not out["ok"] and "multiple of the stages" in out["errors"]["microbatches"]
    assert "value" not in out
