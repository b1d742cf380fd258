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


@pytest.mark.parametrize("bad", [
    ("gpipe", 0, 4, 1), ("gpipe", 4, 0, 1), ("1f1b", 4, 4, 2), ("interleaved", 4, 6, 2),
    ("interleaved", 4, 2, 2), ("zigzag", 4, 4, 1), ("gpipe", 2.5, 4, 1), ("gpipe", True, 4, 1)])
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
