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
