"""Activation memory: the formula in pylib.systems.memory matches the bytes the caches really keep."""

import numpy as np
import pytest

from pylib import model
from pylib.systems import memory


def ids(B, T, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 65, (B, T)), rng.integers(0, 65, (B, T))


@pytest.mark.parametrize("B, T, C, H, L", [
    (16, 64, 16, 2, 1),  # the course's model at its training batch
    (2, 8, 32, 4, 2),
    (3, 5, 8, 1, 3),  # one head: merging heads is a view, not a copy
    (1, 1, 16, 2, 1),  # one position: also a view
    (4, 64, 64, 4, 4),
])
def test_activation_formula_matches_counted_cache_bytes(B, T, C, H, L):
    cfg = model.GPTConfig(n_embd=C, n_head=H, n_layer=L)
    params = model.init_params(cfg, 0)
    x, y = ids(B, T, seed=L)
    rows = memory.measure_activations(params, cfg, x, y)
    assert sum(r["bytes"] for r in rows) == memory.activation_bytes(cfg, B, T)["total"]


def test_float64_doubles_the_float_buffers():
    cfg = model.GPTConfig()
    x, y = ids(2, 16, seed=0)
    rows = memory.measure_activations(model.init_params(cfg, 0, dtype=np.float64), cfg, x, y)
    assert sum(r["bytes"] for r in rows) == memory.activation_bytes(cfg, 2, 16, itemsize=8)["total"]


def test_views_and_parameters_are_not_counted():
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    x, y = ids(2, 8, seed=0)
    rows = memory.measure_activations(params, cfg, x, y)
    names = [r["name"] for r in rows]
    assert names.count("h.0.attn.qkv") == 1  # k and v are views of one (N, 3C) buffer
    assert not any("weight" in n for n in names)  # the caches point at the weights; they are params
    qkv = next(r for r in rows if r["name"] == "h.0.attn.qkv")
    assert qkv["bytes"] == 2 * 8 * 3 * cfg.n_embd * 4


def test_layer_count_scales_the_layer_part_only():
    one, two = (memory.activation_bytes(model.GPTConfig(n_layer=L), 4, 32) for L in (1, 2))
    assert two["total"] - one["total"] == one["per_layer"]


def test_korthikanti_formula_known_value():
    # Their GPT-3 175B example per layer (s=2048, b=1, h=12288, a=96): 34sbh + 5as^2b bytes.
    assert memory.korthikanti_bytes_per_layer(2048, 1, 12288, 96) == 34 * 2048 * 12288 + 5 * 96 * 2048 ** 2
