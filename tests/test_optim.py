"""Optimisers, clipping and the learning-rate schedule."""

import math

import numpy as np
import pytest

from pylib import model, optim
from pylib.schedules import warmup_cosine_lr

CFG = model.GPTConfig()


def grads_like(params, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return {k: scale * rng.standard_normal(v.shape).astype(v.dtype) for k, v in params.items()}


# ---------------------------------------------------------------------------


def test_param_groups_exclude_norms_and_biases():
    groups = optim.param_groups(model.init_params(CFG, 0))
    assert set(groups["decay"]) == {
        "wte", "wpe", "h.0.attn.c_attn.weight", "h.0.attn.c_proj.weight",
        "h.0.mlp.c_fc.weight", "h.0.mlp.c_proj.weight",
    }  # nanoGPT: every 2-D tensor, embeddings included
    assert all(n.endswith(".bias") or ".ln_" in n or n.startswith("ln_") for n in groups["no_decay"])
    assert len(groups["decay"]) + len(groups["no_decay"]) == len(model.param_shapes(CFG))


def test_bias_correction_makes_first_step_full_size():
    # With beta1 = 0.9, beta2 = 0.999 the first moments are m_1 = 0.1 g and v_1 = 0.001 g^2, so an
    # uncorrected first step would be lr * 0.1 / sqrt(0.001) = 3.16 lr. Corrected, m/sqrt(v) = g/|g|
    # and every parameter moves by lr (eps is made negligible).
    params = model.init_params(CFG, 0, dtype=np.float64)
    before = {k: v.copy() for k, v in params.items()}
    lr = 1e-3
    optim.adamw_step(params, grads_like(params, scale=1e-2), optim.adamw_init(params), lr,
                     beta1=0.9, beta2=0.999, eps=1e-12, weight_decay=0.0)
    for k in params:
        np.testing.assert_allclose(np.abs(params[k] - before[k]), lr, rtol=1e-6)


def test_weight_decay_is_decoupled():
    # With a zero gradient Adam's update is 0, so only the decoupled decay acts: p *= 1 - lr*wd,
    # and only on the decay group. (L2 regularisation would instead go through m / sqrt(v).)
    params = model.init_params(CFG, 0, dtype=np.float64)
    for v in params.values():
        v += 0.5
    before = {k: v.copy() for k, v in params.items()}
    zero = {k: np.zeros_like(v) for k, v in params.items()}
    lr, wd = 0.1, 0.5
    groups = optim.param_groups(params)
    optim.adamw_step(params, zero, optim.adamw_init(params), lr, weight_decay=wd, groups=groups)
    for k in groups["decay"]:
        np.testing.assert_allclose(params[k], before[k] * (1 - lr * wd), rtol=1e-12)
    for k in groups["no_decay"]:
        np.testing.assert_array_equal(params[k], before[k])


def test_adamw_step_size_does_not_scale_with_gradient_size():
    p1, p2 = model.init_params(CFG, 0, np.float64), model.init_params(CFG, 0, np.float64)
    g = grads_like(p1)
    optim.adamw_step(p1, g, optim.adamw_init(p1), 1e-3, eps=0.0)
    optim.adamw_step(p2, {k: 1000 * v for k, v in g.items()}, optim.adamw_init(p2), 1e-3, eps=0.0)
    for k in p1:
        np.testing.assert_allclose(p1[k], p2[k], rtol=1e-12)


def test_sgd_momentum_accumulates():
    params = {"w": np.array([1.0, 2.0])}
    state = optim.sgd_init(params)
    g = {"w": np.array([1.0, -1.0])}
    optim.sgd_step(params, g, state, lr=0.1, momentum=0.9)
    optim.sgd_step(params, g, state, lr=0.1, momentum=0.9)
    np.testing.assert_allclose(params["w"], [1.0 - 0.1 - 0.19, 2.0 + 0.1 + 0.19])


def test_clip_grad_norm_scales_to_max_norm_and_returns_preclip_norm():
    params = model.init_params(CFG, 0, np.float64)
    grads = grads_like(params)
    norm = math.sqrt(sum((g ** 2).sum() for g in grads.values()))
    assert optim.global_grad_norm(grads) == pytest.approx(norm, rel=1e-12)
    before = {k: v.copy() for k, v in grads.items()}
    assert optim.clip_grad_norm(grads, 1.0) == pytest.approx(norm, rel=1e-12)
    assert optim.global_grad_norm(grads) == pytest.approx(1.0, rel=1e-5)
    for k in grads:  # direction kept
        np.testing.assert_allclose(grads[k], before[k] / norm, rtol=1e-5)
    small = grads_like(params, scale=1e-4)
    kept = {k: v.copy() for k, v in small.items()}
    optim.clip_grad_norm(small, 1.0)
    for k in small:
        np.testing.assert_array_equal(small[k], kept[k])


def test_schedule_warms_up_then_decays_to_min_lr():
    max_lr, min_lr, warmup, total = 1e-2, 1e-3, 20, 400
    lrs = [warmup_cosine_lr(s, max_lr, warmup, total, min_lr) for s in range(total + 10)]
    assert lrs[0] == pytest.approx(max_lr / (warmup + 1))  # nanoGPT: lr * (step + 1) / (warmup + 1)
    assert lrs[warmup - 1] < max_lr and lrs[warmup] == pytest.approx(max_lr)
    assert all(a < b for a, b in zip(lrs[:warmup], lrs[1:warmup + 1]))  # rising
    assert all(a >= b for a, b in zip(lrs[warmup:total], lrs[warmup + 1:total + 1]))  # then falling
    assert lrs[total] == pytest.approx(min_lr) and lrs[-1] == min_lr
    assert lrs[(warmup + total) // 2] == pytest.approx((max_lr + min_lr) / 2)  # cosine midpoint
