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


def _decay_run(beta1, lr=0.01, wd=1.0, n=20_000, steps=1500, window=1000, seed=0):
    """AdamW on n weights fed pure-noise gradients (independent of the weights): over the last
    window steps, RMS of the weights, RMS of the Adam direction u (p' = (1 - lr wd) p - lr u) and
    the mean cosine between p and u."""
    rng = np.random.default_rng(seed)
    params = {"w": (0.5 * rng.standard_normal((n // 100, 100)))}  # 2-D: in the decay group
    state = optim.adamw_init(params)
    p_sq, u_sq, cos = [], [], []
    for t in range(steps):
        before = params["w"].ravel().copy()
        optim.adamw_step(params, {"w": rng.standard_normal(params["w"].shape)}, state, lr,
                         beta1=beta1, beta2=0.99, weight_decay=wd)
        if t >= steps - window:
            u = -(params["w"].ravel() - (1 - lr * wd) * before) / lr
            p_sq.append(np.mean(before**2))
            u_sq.append(np.mean(u**2))
            cos.append(before @ u / (np.linalg.norm(before) * np.linalg.norm(u)))
    return math.sqrt(np.mean(p_sq)), math.sqrt(np.mean(u_sq)), float(np.mean(cos))


def test_decoupled_decay_holds_uncorrelated_updates_at_the_random_walk_rms():
    # beta1 = 0: each step's direction is fresh noise, uncorrelated with the weights, so the weights
    # settle where the decay balances a random walk: RMS(p) = RMS(u) sqrt(lr / (wd (2 - lr wd))).
    # The start (RMS 0.5) is 3.5x that equilibrium; after 500 steps (about 10 relaxation times
    # 1 / (2 lr wd)) it has been forgotten.
    from pylib.studies.optim_state import decay_balance_rms, decay_equilibrium_rms
    rms_p, rms_u, cos = _decay_run(beta1=0.0)
    assert abs(cos) < 0.01
    assert rms_p == pytest.approx(decay_equilibrium_rms(0.01, 1.0, rms_u), rel=0.03)
    assert decay_balance_rms(0.01, 1.0, rms_u, 0.0) == pytest.approx(decay_equilibrium_rms(0.01, 1.0, rms_u), rel=1e-12)


def test_momentum_correlates_the_update_with_the_weights_and_the_balance_accounts_for_it():
    # beta1 = 0.9: the weights hold the last steps' directions, which momentum repeats, so <p, u> < 0
    # and the weights settle above the random-walk RMS; the balance with the measured cosine is
    # where they settle.
    from pylib.studies.optim_state import decay_balance_rms, decay_equilibrium_rms
    rms_p, rms_u, cos = _decay_run(beta1=0.9)
    assert cos < -0.02
    assert rms_p > 1.2 * decay_equilibrium_rms(0.01, 1.0, rms_u)
    assert rms_p == pytest.approx(decay_balance_rms(0.01, 1.0, rms_u, cos), rel=0.03)


def test_sd_interval_factors_match_the_chi_square_closed_forms():
    from pylib.compare import chi2_cdf, sd_interval_factors
    for x in (0.01, 0.5, 2.0, 7.0, 30.0):
        assert chi2_cdf(x, 2) == pytest.approx(1 - math.exp(-x / 2), rel=1e-12)  # df = 2: exponential
        assert chi2_cdf(x, 1) == pytest.approx(math.erf(math.sqrt(x / 2)), rel=1e-12)  # df = 1: a squared normal
    lo, hi = sd_interval_factors(3)  # three seeds: s^2 * 2 / sigma^2 ~ chi-square(2)
    assert lo == pytest.approx(math.sqrt(2 / (-2 * math.log(0.025))), rel=1e-9)
    assert hi == pytest.approx(math.sqrt(2 / (-2 * math.log(0.975))), rel=1e-9)
