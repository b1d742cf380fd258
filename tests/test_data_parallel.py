"""Data parallelism and ZeRO on the course model: same answer as one worker, whatever the split."""

import numpy as np
import pytest

from pylib import model, optim
from pylib.systems import collectives as col
from pylib.systems import data_parallel as dp


def batch(B, T, seed, V=65):
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


def rel(a, b):
    a, b = dp.flatten(a).astype(np.float64), dp.flatten(b).astype(np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def unequal_mask(B, T):
    """Very unequal valid tokens per row: row r counts its last (r * 7) % (T + 1) targets, row 0 all."""
    mask = np.zeros((B, T))
    for r in range(B):
        n = T if r == 0 else (r * 7) % (T + 1)
        if n:
            mask[r, T - n:] = 1
    return mask


@pytest.mark.parametrize("W", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("masked", [False, True])
def test_data_parallel_equals_one_worker_in_float64(W, masked):
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0, dtype=np.float64)
    x, y = batch(8, 32, seed=W)
    mask = unequal_mask(8, 32) if masked else None
    info = {}
    loss, grads = dp.data_parallel_loss_and_grads(params, cfg, x, y, W, mask=mask, info=info)
    ref_loss, ref = model.loss_and_grads(params, cfg, x, y, mask)
    assert abs(loss - ref_loss) <= 1e-12 * abs(ref_loss)
    assert rel(grads, ref) <= 1e-12
    for name in ref:
        np.testing.assert_allclose(grads[name], ref[name], rtol=1e-9, atol=1e-14)
    if masked and W == 8:
        assert max(info["counts"]) >= 4 * max(1, min(info["counts"]))  # the split really is unequal


def test_mean_of_means_is_wrong_when_counts_differ_and_right_when_equal():
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0, dtype=np.float64)
    x, y = batch(8, 32, seed=1)
    mask = unequal_mask(8, 32)
    mask[mask.sum(axis=1) == 0, -1] = 1  # every worker needs a token for its own mean
    ref_loss, ref = model.loss_and_grads(params, cfg, x, y, mask)
    loss, grads = dp.mean_of_worker_means(params, cfg, x, y, 4, mask)
    assert rel(grads, ref) > 1e-3 and abs(loss - ref_loss) > 1e-4
    loss, grads = dp.mean_of_worker_means(params, cfg, x, y, 4, None)  # equal counts: same mean
    ref_loss, ref = model.loss_and_grads(params, cfg, x, y)
    assert rel(grads, ref) <= 1e-12


def test_all_reduce_bytes_per_worker():
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    x, y = batch(8, 16, seed=2)
    info = {}
    dp.data_parallel_loss_and_grads(params, cfg, x, y, 4, info=info)
    N = model.count_params(cfg)
    assert sum(info["sent"]) == 2 * 3 * N  # 2(W-1) N over all workers: every chunk crosses W-1 links twice
    assert max(info["sent"]) - min(info["sent"]) <= 2 * 3  # uneven chunks differ by at most one element per step


@pytest.mark.parametrize("bad", [0, 1e9, float("nan"), 2.5, "x", 9])
def test_bad_worker_counts(bad):
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    x, y = batch(8, 8, seed=0)
    with pytest.raises(ValueError, match="workers"):
        dp.data_parallel_loss_and_grads(params, cfg, x, y, bad)


def reference_run(params, cfg, data, W, lr, hyper):
    """Plain data parallelism with pylib.optim.adamw_step on the whole params dict."""
    params = model.pack_params({k: v.copy() for k, v in params.items()})
    state = optim.adamw_init(params)
    for x, y, mask in data:
        _, grads = dp.data_parallel_loss_and_grads(params, cfg, x, y, W, mask=mask)
        optim.adamw_step(params, grads, state, lr, **hyper)
    return params


@pytest.mark.parametrize("W", [2, 3, 4])
def test_zero_stages_bit_identical_to_unsharded_adamw_float32(W):
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    mask = unequal_mask(8, 16)
    data = [(*batch(8, 16, seed=s), mask if s % 2 else None) for s in range(5)]
    hyper = dict(weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-8)
    ref = reference_run(params, cfg, data, W, 3e-3, hyper)
    moved = dp.flatten(ref) - dp.flatten(params)
    assert np.abs(moved).max() > 1e-3  # the steps really trained
    for stage in (0, 1, 2, 3):
        state = dp.zero_init(params, W, stage)
        for x, y, mask_s in data:
            dp.zero_step(state, cfg, x, y, 3e-3, mask=mask_s, **hyper)
        for i in range(W):
            got = dp.zero_params(state, worker=i)
            assert dp.flatten(got).tobytes() == dp.flatten(ref).tobytes(), (stage, i)


def test_zero_state_held_per_worker_and_traffic():
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    N, W = model.count_params(cfg), 4
    x, y = batch(8, 16, seed=0)
    held, sent = {}, {}
    for stage in (0, 1, 2, 3):
        state = dp.zero_init(params, W, stage)
        dp.zero_step(state, cfg, x, y, 1e-3)
        held[stage] = dp.held_elements(state)
        sent[stage] = state["sent"]
        expect = dp.zero_traffic_per_step(N, W, stage)
        assert abs(sum(sent[stage]) / W - expect) <= 3 * W  # chunks of N/W rounded
    shard = N // W  # 5376 / 4
    assert held[0] == {"params": N, "grads": N, "optimizer": 2 * N}
    assert held[1] == {"params": N, "grads": N, "optimizer": 2 * shard}
    assert held[2] == {"params": N, "grads": shard, "optimizer": 2 * shard}
    assert held[3] == {"params": shard, "grads": shard, "optimizer": 2 * shard}
    assert sum(sent[3]) * 2 == sum(sent[0]) * 3  # stage 3 sends 1.5 times plain DP


def test_zero3_backward_uses_the_regathered_weights():
    # The forward's cache holds views of the gathered buffer; stage 3 zeroes it and gathers again.
    # If the second gather were skipped the gradient would be computed with zero weights.
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 1)
    x, y = batch(4, 16, seed=3)
    s0, s3 = dp.zero_init(params, 2, 0), dp.zero_init(params, 2, 3)
    for _ in range(2):
        assert dp.zero_step(s0, cfg, x, y, 1e-2) == dp.zero_step(s3, cfg, x, y, 1e-2)
    assert dp.flatten(dp.zero_params(s3)).tobytes() == dp.flatten(dp.zero_params(s0)).tobytes()
    assert len(col.chunk_bounds(model.count_params(cfg), 2)) == 2


# ---------------------------------------------------------------------------
# The page ops (pylib.web.parallel_ops)

import json  # noqa: E402

from pylib import web  # noqa: E402
from pylib.systems import overlap  # noqa: E402


def call(op, args):
    return json.loads(web.handle(op, json.dumps(args)))


@pytest.fixture(scope="module")
def corpus(shared_corpus):
    return shared_corpus


@pytest.fixture(scope="module")
def session(corpus, tmp_path_factory):
    folder = tmp_path_factory.mktemp("site-data")
    (folder / "train.bin").write_bytes(corpus.train.tobytes())
    (folder / "val.bin").write_bytes(corpus.val.tobytes())
    (folder / "vocab.json").write_text(json.dumps(corpus.vocab.to_json()))
    web.SESSION.load_corpus(folder)
    return web.SESSION


@pytest.mark.parametrize("raw", [0, 1, 1e9, "NaN", 2.5, "", "🙂", "<b>4</b>", None, 9])
def test_ring_op_refuses_bad_worker_counts(session, raw):
    out = call("parallel_ring", {"workers": raw})
    assert out["ok"] is False and out["kind"] == "input" and "workers" in out["errors"]


def test_ring_op_is_the_ring_on_real_gradients(session):
    from pylib.web import parallel_ops
    out = call("parallel_ring", {"workers": "8"})["value"]
    vectors = parallel_ops.worker_gradients(session, 8)
    results, sent = col.ring_all_reduce(vectors)
    assert out["identical"] and len(out["steps"]) == 14
    assert out["wire_bytes"] == [4 * s for s in sent]
    last = out["steps"][-1]["firsts"]
    assert all(last[i] == [float(results[0][a]) for a, _ in out["bounds"]] for i in range(8))
    assert [g["sent"] for g in out["all_gather"]] == sorted(g["sent"] for g in out["all_gather"])
    assert [g["sent_whole"] for g in out["all_gather"]] == [4 * (q - 1) * out["elements"] for q in range(2, 9)]


def test_ring_op_counts_each_chunks_contributions_step_by_step(session):
    # The widget draws these counts as they are: they must be the simulator's, and each message
    # carries the count its chunk held at its sender before the step.
    out = call("parallel_ring", {"workers": "4"})["value"]
    sim = list(col.ring_all_reduce_steps(parallel_ops_vectors(session, 4)))
    assert out["initial_have"] == [[1] * 4 for _ in range(4)]
    before = out["initial_have"]
    for got, want in zip(out["steps"], sim, strict=True):
        assert got["have"] == want["have"]
        assert got["carried"] == [before[src][c] for src, _, c, _ in want["messages"]]
        before = got["have"]
    # reduce-scatter step k (1-based) sends sums of k workers' values; the all-gather sends whole sums
    assert [s["carried"] for s in out["steps"]] == [[k] * 4 for k in (1, 2, 3)] + [[4] * 4] * 3


def parallel_ops_vectors(session, p):
    from pylib.web import parallel_ops
    return parallel_ops.worker_gradients(session, p)


@pytest.mark.parametrize("raw", ["", "0", "1e9", "NaN", "1.5", "1 2 3 4 5", "<b>2</b>", "two"])
def test_dp_start_refuses_bad_worker_lists(session, raw):
    out = call("parallel_dp_start", {"workers": raw, "steps": "5"})
    assert out["ok"] is False and "workers" in out["errors"]


def test_dp_run_curves_lie_on_top_of_each_other(session):
    assert call("parallel_dp_start", {"workers": "1 4", "steps": "6"})["ok"]
    done = False
    while not done:
        done = call("parallel_dp_chunk", {})["value"]["done"]
    r = call("parallel_dp_finish", {})["value"]
    assert len(r["losses"]["1"]) == 6 and r["max_diff_from_first"]["4"] < 1e-4


@pytest.mark.parametrize("field,raw", [("workers", "0"), ("workers", "NaN"), ("stage", "4"), ("stage", "1.5"),
                                       ("steps", "1e9")])
def test_zero_op_refuses_bad_input(session, field, raw):
    args = {"workers": "4", "stage": "3", "steps": "2", field: raw}
    out = call("parallel_zero", args)
    assert out["ok"] is False and field in out["errors"]


def test_zero_op_bit_identical_and_held(session):
    r = call("parallel_zero", {"workers": "4", "stage": "3", "steps": "2"})["value"]
    assert r["bit_identical"]
    assert r["held"][0]["params"] == r["params"] // 4


def test_overlap_more_bandwidth_never_exposes_more():
    layer_bytes, seconds = overlap.layer_costs(model.GPTConfig(n_layer=8, n_embd=64, n_head=2), 16, 64, 1e9)
    exposed = [overlap.overlap_timeline(layer_bytes, seconds, 50e3, 8, 1e-5, 1 / (bw * 1e9))["exposed"]
               for bw in (0.01, 0.1, 1, 10)]
    assert exposed == sorted(exposed, reverse=True) and exposed[0] > 0
    one = overlap.overlap_timeline(layer_bytes, seconds, 1e12, 8, 1e-5, 1e-9)  # one bucket: nothing overlaps
    assert one["exposed"] == pytest.approx(one["comm_total"])
    assert len(overlap.buckets_in_ready_order(layer_bytes, 1)) == 8


def test_model_flops_match_korthikanti_eq7():
    cfg = model.GPTConfig(n_layer=3, n_embd=32, n_head=2)
    B, s, h, L, v = 4, cfg.block_size, 32, 3, cfg.vocab_size
    eq7 = 72 * B * L * s * h * h * (1 + s / (6 * h) + v / (12 * h * L))
    assert overlap.model_flops_per_step(cfg, B, s) == pytest.approx(eq7, rel=1e-12)


def test_selective_hardware_flops_follow_korthikanti_eq8_and_reproduce_table5():
    from types import SimpleNamespace
    cfg = model.GPTConfig(n_layer=3, n_embd=32, n_head=2)
    B, s, h, L, v = 4, cfg.block_size, 32, 3, cfg.vocab_size
    eq8 = 72 * B * L * s * h * h * (1 + s / (3 * h) + v / (12 * h * L))
    assert overlap.hardware_flops_per_step(cfg, B, s, "selective") == pytest.approx(eq8, rel=1e-12)
    forward = 72 * B * L * s * h * h * (1 + s / (6 * h) + v / (12 * h * L)) + L * 4 * B * s * s * h
    assert overlap.hardware_flops_per_step(cfg, B, s, "selective", "forward") == pytest.approx(forward, rel=1e-12)
    # Table 5 (selective recomputation + sequence parallelism): MFU and HFU of the 22B and 1T models
    # (Table 3 shapes, s = 2048, V = 51,200), each printed to 0.1 point: HFU = MFU x eq. 8 / eq. 7
    for h, L, mfu, hfu in ((6144, 48, 41.5, 43.7), (25600, 128, 56.3, 57.0)):
        shape = SimpleNamespace(n_layer=L, n_embd=h, vocab_size=51200)
        ratio = overlap.hardware_flops_per_step(shape, 1, 2048, "selective") / overlap.model_flops_per_step(shape, 1, 2048)
        assert round(mfu * ratio, 1) == hfu


@pytest.mark.parametrize("W", [2, 4, 8])
def test_zero_held_bytes_equal_chapter_10s_calculator(W):
    from pylib.systems import memory
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    x, y = batch(8, 16, seed=0)
    for stage in (0, 1, 2, 3):
        state = dp.zero_init(params, W, stage)
        dp.zero_step(state, cfg, x, y, 1e-3)
        held = dp.held_elements(state)
        m = memory.training_memory(memory.shape_from_config(cfg), precision="fp32", zero_stage=stage, dp=W)
        assert 4 * held["params"] == m["weights"]
        assert 4 * held["grads"] == m["gradients"]
        assert 4 * held["optimizer"] == m["optimizer"]


def test_mfu_measured_here_says_when_its_two_timings_disagree(session):
    """The page's MFU is two timings' ratio (pylib.web.parallel_ops.mfu_here): its figures agree with
    each other whatever the machine's load, and above_peak flags a ratio over 1, which the page then
    explains instead of showing it as an MFU."""
    from pylib.web import parallel_ops
    m = parallel_ops.mfu_here(session, {})
    assert m["peak_gflops"] > 0 and m["step_ms"] > 0 and m["matmul_size"] in (128, 256)
    assert m["mfu"] == pytest.approx(m["model_gflops"] / m["peak_gflops"], rel=1e-12)
    assert m["above_peak"] == (m["mfu"] > 1)
