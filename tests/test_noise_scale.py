"""The gradient noise scale (McCandlish et al. 2018) and the critical-batch fit: known answers from
synthetic gradients whose mean and covariance are set by the test, and the model's batch gradient
as the mean of per-window gradients."""

import numpy as np
import pytest

from pylib import data, model
from pylib.studies import lr_sweep, noise_scale, target

CFG = model.GPTConfig()


def test_unbiased_estimates_invert_the_expected_squared_norm():
    # E|G_B|^2 = |G|^2 + tr(Sigma) / B, exactly, at two batch sizes -> both recovered exactly
    g2, trace = 0.3, 4.5
    expected = lambda b: g2 + trace / b
    got_g2, got_trace = noise_scale.unbiased_estimates(expected(2), expected(32), 2, 32)
    assert got_g2 == pytest.approx(g2, rel=1e-12)
    assert got_trace == pytest.approx(trace, rel=1e-12)
    assert noise_scale.simple_noise_scale(got_g2, got_trace) == pytest.approx(trace / g2, rel=1e-12)


def test_unbiased_estimates_need_two_different_batch_sizes():
    with pytest.raises(ValueError):
        noise_scale.unbiased_estimates(1.0, 1.0, 8, 8)


def test_noise_scale_is_undefined_when_the_signal_estimate_is_not_positive():
    assert noise_scale.simple_noise_scale(-0.01, 3.0) is None
    assert noise_scale.simple_noise_scale(0.0, 3.0) is None


def test_estimator_recovers_the_noise_scale_of_synthetic_per_example_gradients():
    # per-example gradients G + noise, noise ~ N(0, diag(sigma^2)): B_simple = sum(sigma^2) / |G|^2 = 40
    rng = np.random.default_rng(0)
    P = 50
    G = rng.normal(size=P)
    G *= 0.5 / np.linalg.norm(G)  # |G|^2 = 0.25
    sigma = np.full(P, np.sqrt(10.0 / P))  # tr(Sigma) = 10
    def mean_sq_norm(b, n):
        batches = G + rng.normal(size=(n, b, P)) * sigma  # (n, b, P)
        return float(np.mean(np.sum(batches.mean(axis=1) ** 2, axis=1)))
    g2, trace = noise_scale.unbiased_estimates(mean_sq_norm(2, 20000), mean_sq_norm(32, 20000), 2, 32)
    # 20,000 batches: the relative standard error of each mean is well under 1%
    assert trace == pytest.approx(10.0, rel=0.03)
    assert g2 == pytest.approx(0.25, rel=0.1)
    assert noise_scale.simple_noise_scale(g2, trace) == pytest.approx(40.0, rel=0.12)


def test_batch_gradient_is_the_mean_of_per_window_gradients():
    # the "example" of the estimator is one window: |G_B|^2 is the squared norm of the mean of B window gradients
    corpus_tokens = np.arange(5000) % CFG.vocab_size
    x, y = data.get_batch(corpus_tokens.astype(np.uint8), 4, CFG.block_size, np.random.default_rng(3))
    params = model.init_params(CFG, 0, dtype=np.float64)
    per_window = [model.loss_and_grads(params, CFG, x[i:i + 1], y[i:i + 1])[1] for i in range(4)]
    mean = {k: sum(g[k] for g in per_window) / 4 for k in per_window[0]}
    expected = sum(float(np.sum(v ** 2)) for v in mean.values())
    assert noise_scale.grad_sq_norm(params, CFG, x, y) == pytest.approx(expected, rel=1e-10)


def test_fit_critical_batch_recovers_a_known_line():
    # S = 50 + 800 / B  ->  S_min = 50, E_min = 800, B_crit = 16
    bs = [2, 4, 8, 16, 32, 64]
    fit = noise_scale.fit_critical_batch(bs, [50 + 800 / b for b in bs])
    assert fit["s_min"] == pytest.approx(50)
    assert fit["e_min"] == pytest.approx(800)
    assert fit["b_crit"] == pytest.approx(16)


def test_steps_to_target_is_the_first_eval_at_or_below_the_target():
    # chapter 6's batch-size study reads steps to target with chapter 13's pylib.studies.target
    evals = [{"step": 10, "val": 3.0}, {"step": 20, "val": 2.7}, {"step": 30, "val": None},
             {"step": 40, "val": 2.6}, {"step": 50, "val": 2.5}]
    assert target.steps_to_target(evals, 2.65) == 40
    assert target.steps_to_target(evals, 2.7) == 20
    assert target.steps_to_target(evals, 1.0) is None


def test_ladder_is_half_decades():
    assert lr_sweep.ladder(1e-3, 1) == [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]
    assert lr_sweep.ladder(0.01, 0.01) == [0.01]


def test_good_band_excludes_diverged_rates_and_rates_far_from_the_best():
    rates = [0.001, 0.01, 0.1, 1.0, 10.0]
    means = [3.0, 2.55, 2.5, 2.58, None]
    assert lr_sweep.good_band(rates, means, [0, 0, 0, 0, 3], tolerance=0.1) == (0.01, 1.0)
    assert lr_sweep.good_band(rates, means, [0, 0, 0, 1, 3], tolerance=0.1) == (0.01, 0.1)  # one seed diverged at 1
    assert lr_sweep.good_band(rates, [None] * 5, [3] * 5) is None


def test_rung_outcome_reports_divergence_step():
    assert lr_sweep.rung_outcome([{"step": 0}, {"step": 1, "diverged": True}]) == \
        {"final_val": None, "final_val_full": None, "final_train": None, "diverged_at": 1}
    assert lr_sweep.rung_outcome([{"step": 199, "val": 2.5, "train_eval": 2.4}])["final_val"] == 2.5


def test_rung_outcome_keeps_the_subset_and_the_whole_split_apart():
    # the page's sweep compares its subset value with the ladder's subset value; the chapter's table uses val_full
    out = lr_sweep.rung_outcome([{"step": 199, "val": 2.50, "val_full": 2.51, "train_eval": 2.4}])
    assert (out["final_val"], out["final_val_full"]) == (2.50, 2.51)
    assert lr_sweep.rung_outcome([{"step": 199, "val": 2.50, "train_eval": 2.4}])["final_val_full"] is None


def test_optimal_lr_factor_is_nearly_linear_far_below_the_noise_scale_and_saturates_above_it():
    # eps_opt(B) = eps_max / (1 + B_noise / B): the factor for a k-fold batch, by hand at three points
    assert noise_scale.optimal_lr_factor(4, 2, 44.0) == pytest.approx(12.0 / 6.5, rel=1e-12)
    assert noise_scale.optimal_lr_factor(1, 2, 1e6) == pytest.approx(2.0, rel=1e-5)  # B << B_noise: linear
    assert noise_scale.optimal_lr_factor(1000, 16, 10.0) == pytest.approx(1.01 / 1.000625, rel=1e-12)  # B >> B_noise
    for k in (2, 4, 8, 16, 1000):  # never more than k (the linear rule over-shoots), never more than 1 + B_noise / B
        factor = noise_scale.optimal_lr_factor(4, k, 30.0)
        assert 1.0 < factor < k and factor < 1 + 30.0 / 4
    assert noise_scale.optimal_lr_factor(4, 1, 30.0) == 1.0
    with pytest.raises(ValueError):
        noise_scale.optimal_lr_factor(0, 2, 30.0)


def test_noise_scale_estimate_is_deterministic_for_a_seeded_rng():
    # build.py --measure must give identical values twice: the estimate depends only on its rng's seed
    tokens = (np.arange(20000) * 7 % CFG.vocab_size).astype(np.uint8)
    params = model.init_params(CFG, 0)
    first, second = (noise_scale.estimate_noise_scale(params, CFG, tokens, 2, 8, 3, np.random.default_rng([0, 6]))
                     for _ in range(2))
    assert first == second
    assert first["g2_small"] > first["g2_big"] > 0  # a smaller batch has the noisier, larger-norm gradient


BOOT_B = (2, 4, 8, 16, 32, 64)


def _steps_on_a_line(s_min, e_min, noise, n_seeds, rng):
    """Per-seed steps S = S_min + E_min / B plus noise: one row per batch size in BOOT_B."""
    return [[s_min + e_min / b + noise * rng.standard_normal() for _ in range(n_seeds)] for b in BOOT_B]


def test_bootstrap_critical_batch_covers_the_true_line_and_is_seeded():
    rng = np.random.default_rng(1)
    steps = _steps_on_a_line(50.0, 1000.0, 5.0, 8, rng)
    a = noise_scale.bootstrap_critical_batch(BOOT_B, steps, n_boot=400, seed=3)
    b = noise_scale.bootstrap_critical_batch(BOOT_B, steps, n_boot=400, seed=3)
    assert a["b_crit"] == b["b_crit"] and np.array_equal(a["index"], b["index"])  # deterministic
    assert a["s_min"][0] < 50.0 < a["s_min"][1] and a["e_min"][0] < 1000.0 < a["e_min"][1]
    assert a["b_crit"][0] < 20.0 < a["b_crit"][1] and a["n_infinite"] == 0
    fit = noise_scale.fit_critical_batch(BOOT_B, np.mean(steps, axis=1))  # the point fit lies inside its interval
    assert a["b_crit"][0] <= fit["b_crit"] <= a["b_crit"][1]


def test_bootstrap_critical_batch_is_a_point_when_the_seeds_agree_and_widens_with_their_spread():
    exact = [[20.0 + 640.0 / b] * 3 for b in BOOT_B]  # every seed on the line S = 20 + 640 / B: B_crit = 32
    point = noise_scale.bootstrap_critical_batch(BOOT_B, exact, n_boot=50, seed=0)
    assert point["b_crit"] == pytest.approx((32.0, 32.0)) and point["s_min"] == pytest.approx((20.0, 20.0))
    rng = np.random.default_rng(2)
    narrow = noise_scale.bootstrap_critical_batch(BOOT_B, _steps_on_a_line(20.0, 640.0, 1.0, 3, rng), n_boot=300, seed=0)
    wide = noise_scale.bootstrap_critical_batch(BOOT_B, _steps_on_a_line(20.0, 640.0, 10.0, 3, rng), n_boot=300, seed=0)
    assert np.diff(wide["e_min"])[0] > np.diff(narrow["e_min"])[0]


def test_bootstrap_counts_fits_without_a_finite_critical_batch_as_infinite():
    steps = [[-10.0 + 400.0 / b] * 2 for b in BOOT_B]  # S_min < 0: steps still falling like 1/B everywhere
    out = noise_scale.bootstrap_critical_batch(BOOT_B, steps, n_boot=20, seed=0)
    assert out["n_infinite"] == 20 and out["b_crit"] == (np.inf, np.inf)


def test_resampling_two_targets_with_the_same_draws_pairs_them():
    rng = np.random.default_rng(4)
    low = _steps_on_a_line(40.0, 2000.0, 8.0, 3, rng)
    boot = noise_scale.bootstrap_critical_batch(BOOT_B, low, n_boot=200, seed=1)
    again = noise_scale.resample_critical_batch(BOOT_B, low, boot["index"])  # the same draws give the same fits
    assert np.array_equal(again["b_crit"], boot["samples"]["b_crit"])


@pytest.mark.parametrize("steps, message", [
    ([[1.0, 2.0]] * 5, "one row per batch size"),
    ([[1.0]] * 6, "at least two seeds"),
    ([[1.0, None]] * 6, "non-finite"),
])
def test_bootstrap_critical_batch_refuses_bad_input(steps, message):
    with pytest.raises((ValueError, TypeError), match=message):
        noise_scale.bootstrap_critical_batch(BOOT_B, steps, n_boot=10)
