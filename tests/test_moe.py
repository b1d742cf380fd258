"""Mixture-of-experts routing (pylib.systems.moe): capacity, dropped tokens, the load-balancing loss."""

import numpy as np
import pytest

from pylib.systems import moe


def test_capacity_follows_switch_transformers_formula():
    assert moe.expert_capacity(1024, 8) == 128
    assert moe.expert_capacity(1024, 8, capacity_factor=1.25) == 160
    assert moe.expert_capacity(1000, 8, top_k=2, capacity_factor=1.0) == 250
    assert moe.expert_capacity(10, 3) == 4  # rounded up
    for bad in [dict(tokens=-1, experts=4), dict(tokens=4, experts=0), dict(tokens=4, experts=2, capacity_factor=0)]:
        with pytest.raises(ValueError):
            moe.expert_capacity(**bad)


def test_dispatch_drops_exactly_what_overflows_each_expert_in_token_order():
    ids = np.array([[0], [0], [1], [0], [2], [0]])  # expert 0 is sent 4 tokens, capacity 2
    d = moe.dispatch_with_capacity(ids, 3, capacity=2)
    assert d["load"].tolist() == [4, 1, 1]
    assert d["kept"][:, 0].tolist() == [True, True, True, False, True, False]
    assert d["dropped"] == 2
    # top-2: a token's second choice queues behind earlier tokens' choices
    ids2 = np.array([[0, 1], [1, 0], [0, 2]])
    d2 = moe.dispatch_with_capacity(ids2, 3, capacity=2)
    assert d2["kept"].tolist() == [[True, True], [True, True], [False, True]] and d2["dropped"] == 1


def test_more_capacity_drops_fewer_tokens_and_enough_drops_none():
    rng = np.random.default_rng(0)
    N, E, k = 4096, 16, 2
    probs = rng.dirichlet(np.ones(E) * 0.5, N)
    ids = moe.route_top_k(probs, k)
    drops = [moe.dispatch_with_capacity(ids, E, moe.expert_capacity(N, E, k, cf))["dropped"] for cf in (0.5, 1.0, 1.5, 4.0)]
    assert drops == sorted(drops, reverse=True) and drops[0] > 0 and drops[-1] == 0
    assert drops[0] >= N * k // 2  # at half the capacity at least half the pairs cannot fit


def test_load_balancing_loss_is_k_when_uniform_and_E_when_collapsed():
    E, N = 8, 64
    uniform = np.full((N, E), 1 / E)
    ids = np.arange(N)[:, None] % E  # every expert gets N / E tokens
    assert moe.load_balancing_loss(uniform, ids, E) == pytest.approx(1.0)
    ids2 = np.stack([np.arange(N) % E, (np.arange(N) + 1) % E], axis=1)
    assert moe.load_balancing_loss(uniform, ids2, E) == pytest.approx(2.0)
    collapsed = np.zeros((N, E))
    collapsed[:, 3] = 1.0
    assert moe.load_balancing_loss(collapsed, np.full((N, 1), 3), E) == pytest.approx(E)
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(E), N)
    assert 0 < moe.load_balancing_loss(probs, moe.route_top_k(probs, 1), E) <= E  # sum f_i P_i <= max P_i <= 1


def test_implied_utilisation_inverts_gpu_hours_per_trillion_tokens():
    r = moe.implied_utilisation(100e3, 10e9, 10, 4096, 8, 64, 64, 1e15)
    assert r["tokens_per_gpu_s"] == pytest.approx(1e12 / 100e3 / 3600)
    assert r["flops_per_token"] == pytest.approx(6 * 10e9 + 3 * 10 * 2 * 4096 * 8 * 128)
    causal = moe.implied_utilisation(100e3, 10e9, 10, 4096, 8, 64, 64, 1e15, attention="causal")
    assert r["flops_per_token"] - causal["flops_per_token"] == pytest.approx(3 * 10 * 4096 * 8 * 128)
