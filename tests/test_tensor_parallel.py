"""Tensor and context parallelism: seed 000's two-device FFN, the course model's blocks split across
devices against the unsplit model, ring attention against full attention, and expert-parallel
all-to-all bytes (pylib.systems.tensor_parallel, pylib.systems.context_parallel)."""

import numpy as np
import pytest

from pylib import layers, model
from pylib.systems import context_parallel, tensor_parallel


def test_worked_example_turns_2_minus_1_into_9_6_with_one_all_reduce_each_way():
    r = tensor_parallel.worked_example()
    assert r["y"] == [9.0, 6.0] == r["y_unsplit"]  # the seed's numbers
    assert r["dx"] == r["dx_unsplit"]
    assert [d["partial_y"] for d in r["devices"]] == [[3.0, 6.0], [6.0, 0.0]]  # neither is the answer alone
    assert r["all_reduces"] == {"forward": 1, "backward": 1}


@pytest.mark.parametrize("tp,n_head,n_embd", [(1, 2, 16), (2, 2, 16), (2, 4, 32), (4, 4, 32)])
def test_tensor_parallel_model_gives_the_unsplit_loss_and_gradients(tp, n_head, n_embd):
    cfg = model.GPTConfig(n_layer=2, n_head=n_head, n_embd=n_embd)
    params = model.init_params(cfg, 0, np.float64)
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, cfg.vocab_size, (2, 2, cfg.block_size))
    loss, grads = model.loss_and_grads(params, cfg, x, y)
    tloss, tgrads, log = tensor_parallel.tp_loss_and_grads(params, cfg, x, y, tp)
    assert tloss == pytest.approx(loss, rel=1e-13)
    for name in grads:
        scale = np.abs(grads[name]).max()
        np.testing.assert_allclose(tgrads[name], grads[name], rtol=0, atol=1e-13 * scale, err_msg=name)
    # four all-reduces per block, each of one (B, T, C) activation
    assert len(log) == 4 * cfg.n_layer
    assert sum("forward" in e["where"] for e in log) == 2 * cfg.n_layer
    closed = tensor_parallel.all_reduces_per_block(cfg, 2, cfg.block_size, tp, itemsize=8)
    assert all(e["bytes"] == closed["bytes_each"] for e in log)
    assert all(e["wire_elements_per_device"] * 8 == closed["wire_bytes_each_per_device"] for e in log)


def test_one_device_alone_does_not_have_the_answer():
    """The partial sums differ from the result, so the all-reduce is doing the work the test checks."""
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0, np.float64)
    h = np.random.default_rng(2).normal(size=(2, 8, cfg.n_embd))
    shards = tensor_parallel.shard_block(cfg, params, "h.0.", 2)
    m, _ = layers.linear_forward(h, shards[0]["mlp.c_fc.weight"], shards[0]["mlp.c_fc.bias"])
    part, _ = layers.linear_forward(layers.gelu_forward(m)[0], shards[0]["mlp.c_proj.weight"], None)
    full, _ = model.mlp_forward(params, "h.0.", h)
    assert not np.allclose(part + params["h.0.mlp.c_proj.bias"], full)


def test_tensor_parallel_refuses_a_split_that_does_not_divide_the_heads():
    cfg = model.GPTConfig()
    with pytest.raises(ValueError, match="divide"):
        tensor_parallel.shard_block(cfg, model.init_params(cfg, 0), "h.0.", 3)


@pytest.mark.parametrize("devices", [1, 2, 4, 8, 16])
def test_ring_attention_equals_full_causal_attention(devices):
    cfg = model.GPTConfig()
    qkv = np.random.default_rng(devices).normal(size=(3, cfg.block_size, 3 * cfg.n_embd)) * 3
    full, _ = layers.attention_forward(qkv, cfg.n_head, None, cfg.attn_scale)
    ring, log = context_parallel.ring_attention(qkv, cfg.n_head, devices, cfg.attn_scale)
    np.testing.assert_allclose(ring, full, rtol=1e-12, atol=1e-14)
    assert len(log) == devices
    # causal: device i uses exactly the key blocks 0..i
    used = [sorted(s["key_blocks"][i] for s in log if s["key_blocks"][i] is not None) for i in range(devices)]
    assert used == [list(range(i + 1)) for i in range(devices)]


@pytest.mark.parametrize("devices,balanced", [(2, True), (4, True), (4, False), (8, True)])
def test_allgather_context_parallel_equals_full_attention_and_balances_the_causal_work(devices, balanced):
    cfg = model.GPTConfig()
    qkv = np.random.default_rng(devices).normal(size=(2, cfg.block_size, 3 * cfg.n_embd)) * 3
    full, _ = layers.attention_forward(qkv, cfg.n_head, None, cfg.attn_scale)
    y, log = context_parallel.allgather_attention(qkv, cfg.n_head, devices, cfg.attn_scale, balanced)
    np.testing.assert_allclose(y, full, rtol=1e-12, atol=1e-14)
    pairs = [e["pairs"] for e in log]
    assert pairs == context_parallel.causal_pairs_per_device(cfg.block_size, devices, balanced)
    assert sum(pairs) == cfg.block_size * (cfg.block_size + 1) // 2  # every kept pair exactly once
    n = cfg.block_size // devices
    if balanced:  # chunks i and 2P-1-i: every device the same work
        assert len(set(pairs)) == 1
    else:  # contiguous: the last device does 2P - 1 times the first's work, up to the diagonal's share
        assert pairs[-1] - pairs[0] == (devices - 1) * n * n


def test_expert_all_to_all_counts_only_tokens_that_leave_their_device():
    ids = np.array([[[0], [1], [2], [3]], [[0], [1], [2], [3]]])  # 2 devices, 4 experts, top-1
    r = context_parallel.all_to_all_bytes(ids, experts=4, devices=2, d_model=10, itemsize=2)
    assert r["bytes_per_device"] == [2 * 10 * 2, 2 * 10 * 2]  # device 0 sends experts 2, 3; device 1 sends 0, 1
    rng = np.random.default_rng(0)
    big = context_parallel.all_to_all_bytes(rng.integers(0, 8, (4, 20000, 2)), 8, 4, 16)
    assert np.allclose(big["bytes_per_device"], big["uniform_expectation"], rtol=0.02)
