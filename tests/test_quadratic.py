"""The narrow valley (pylib.studies.quadratic) and Adam's first steps (pylib.studies.adam_trace), against closed forms."""

import math

import numpy as np
import pytest

from pylib.studies import adam_trace, quadratic


def test_gradient_descent_matches_the_closed_form_on_the_valley():
    # Each coordinate is multiplied by (1 - lr * curvature) per step.
    kappa, lr, steps = 20.0, 0.5, 30
    t = quadratic.trajectory(kappa, lr, steps)
    factors = 1.0 - lr * quadratic.curvatures(kappa)
    expected = np.array(quadratic.START) * factors**steps
    np.testing.assert_allclose([t["xs"][-1], t["ys"][-1]], expected, rtol=1e-12)


def test_gradient_descent_diverges_just_above_two_over_the_largest_curvature():
    kappa = 50.0
    assert quadratic.trajectory(kappa, 1.99, 500)["diverged_at"] is None
    t = quadratic.trajectory(kappa, 2.01, 2000)
    assert t["diverged_at"] is not None
    # nothing past the divergence is returned: every kept point is within the limit
    assert max(t["values"]) <= quadratic.DIVERGE_FACTOR * t["f0"]
    assert len(t["xs"]) == t["diverged_at"]


def test_momentum_reaches_the_minimum_in_fewer_steps_at_its_best_settings():
    kappa = 100.0
    gd = quadratic.trajectory(kappa, quadratic.best_gd_lr(kappa), 5000)
    lr, beta = quadratic.best_momentum(kappa)
    hb = quadratic.trajectory(kappa, lr, 5000, beta)
    assert gd["converged_at"] is not None and hb["converged_at"] is not None
    # rates (k-1)/(k+1) and (sqrt k - 1)/(sqrt k + 1): steps roughly in ratio sqrt(kappa)
    assert hb["converged_at"] * 4 < gd["converged_at"]


def test_contours_are_level_sets_of_the_function():
    for c in quadratic.contours(30.0):
        xy = np.stack([c["xs"], c["ys"]], axis=-1)
        np.testing.assert_allclose(quadratic.value(xy, 30.0), c["level"], rtol=1e-12)


def test_bias_corrected_first_steps_are_full_size_for_a_constant_gradient():
    rows = adam_trace.first_steps([0.3] * 5, lr=1.0, beta1=0.9, beta2=0.999)
    for r in rows:
        assert r["step"] == pytest.approx(1.0, rel=1e-6)
        assert r["m_hat"] == pytest.approx(0.3) and r["v_hat"] == pytest.approx(0.09)
    # without the correction the first step is (1 - beta1) g / (sqrt(1 - beta2) |g| + eps), about 3.16
    assert rows[0]["step_uncorrected"] == pytest.approx(0.1 * 0.3 / (math.sqrt(0.001 * 0.09) + 1e-8), rel=1e-9)


def test_adam_first_step_is_full_size_only_for_gradients_well_above_eps():
    # Corrected, the first step is |g| / (|g| + eps) times the rate: full size for |g| >> eps, half at
    # |g| = eps, and about |g| / eps below it, where doubling the gradient doubles the step.
    sizes = (1e-3, 1e-8, 1e-11, 2e-11)
    steps = adam_trace.first_step_by_size(sizes, lr=0.5, eps=1e-8)
    for g, step in zip(sizes, steps):
        assert step == pytest.approx(g / (g + 1e-8), rel=1e-9)
    assert steps[0] > 0.9999 and steps[1] == pytest.approx(0.5) and steps[2] < 1e-2
    assert steps[3] / steps[2] == pytest.approx(2.0, rel=1e-3)  # no longer scale-invariant


def test_l2_decay_inside_adam_spares_weights_with_large_gradients():
    split = adam_trace.decay_split(grad_scales=(0.001, 10.0))
    small, large = split["adam_l2"]
    assert split["adamw"][0] == pytest.approx(split["adamw"][1], rel=0.1)  # decoupled: same decay
    assert large < 0.2 * split["adamw"][1] and small > 2 * split["adamw"][0]
