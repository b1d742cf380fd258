"""The gradient noise scale and the critical batch size (McCandlish, Kaplan, Amodei et al. 2018,
"An Empirical Model of Large-Batch Training", arXiv:1812.06162).

A batch gradient G_B is the mean of B per-example gradients, so it is the true gradient G plus
noise with covariance Sigma / B:  E|G_B|^2 = |G|^2 + tr(Sigma) / B.  The simple noise scale

    B_simple = tr(Sigma) / |G|^2

is the batch size at which the noise in a batch gradient is as large as the signal. Measuring
|G_B|^2 at two batch sizes B_small < B_big and solving the two equations gives unbiased estimates
of |G|^2 and tr(Sigma) (their appendix A.1); here the two squared norms are averaged over many
batches first, and B_simple is the ratio of the two averaged estimates.

Steps to a target against batch size follow S = S_min (1 + B_noise / B) in their model, i.e.
S = S_min + E_min / B with E_min = S_min * B_noise the fewest examples; the critical batch is
B_crit = E_min / S_min (their section 2.3). `fit_critical_batch` fits that line.

The same model gives the best SGD learning rate at batch B as eps_opt(B) = eps_max / (1 + B_noise / B)
(their section 2): it grows almost in proportion to B while B << B_noise and saturates at eps_max
above it. `optimal_lr_factor` is the factor by which that best rate grows when the batch grows k-fold;
the linear scaling rule multiplies the rate by k, which is more than this factor for every k > 1.

An "example" here is one window of T tokens: the batch size B counts windows, as everywhere in
the course. Shapes: B windows, T tokens per window.
"""

import numpy as np

from pylib import data, model

# Chapter 6's estimate, here so that the page repeats it exactly: at these steps of the default
# cosine run, |G_B|^2 averaged over N_BATCHES batches of B_SMALL and of B_BIG windows, drawn by
# noise_rng(seed, step).
CHECKPOINTS = (0, 100, 400)
NOISE = dict(b_small=2, b_big=32, n_batches=32)


def noise_rng(seed, step):
    """The generator chapter 6's estimate at `step` of the run with `seed` draws its batches from."""
    return np.random.default_rng([seed, 6, step])

# ---------------------------------------------------------------------------
# |G_B|^2 and the two-batch-size estimator


def grad_sq_norm(params, cfg, x, y):
    """|G_B|^2: the squared global norm (float64) of the mean-loss gradient on the batch x, y (B, T)."""
    _, grads = model.loss_and_grads(params, cfg, x, y)
    return float(sum(np.sum(np.square(g, dtype=np.float64)) for g in grads.values()))


def unbiased_estimates(g2_small, g2_big, b_small, b_big):
    """(|G|^2, tr(Sigma)) from mean squared gradient norms at two batch sizes (McCandlish et al., A.1)."""
    if not 0 < b_small < b_big:
        raise ValueError("need 0 < b_small < b_big")
    g2 = (b_big * g2_big - b_small * g2_small) / (b_big - b_small)
    trace = (g2_small - g2_big) / (1.0 / b_small - 1.0 / b_big)
    return g2, trace


def simple_noise_scale(g2, trace):
    """B_simple = tr(Sigma) / |G|^2, or None when the |G|^2 estimate is not positive (noise swamps it)."""
    return trace / g2 if g2 > 0 else None


def estimate_noise_scale(params, cfg, tokens, b_small, b_big, n_batches, rng):
    """B_simple on the model params from n_batches random batches at each of two sizes.

    Returns {"g2_small", "g2_big" (the mean |G_B|^2 at each size), "g2", "trace", "b_simple"}.
    """
    T = cfg.block_size
    small = [grad_sq_norm(params, cfg, *data.get_batch(tokens, b_small, T, rng)) for _ in range(n_batches)]
    big = [grad_sq_norm(params, cfg, *data.get_batch(tokens, b_big, T, rng)) for _ in range(n_batches)]
    g2_small, g2_big = float(np.mean(small)), float(np.mean(big))
    g2, trace = unbiased_estimates(g2_small, g2_big, b_small, b_big)
    return {"g2_small": g2_small, "g2_big": g2_big, "g2": g2, "trace": trace,
            "b_simple": simple_noise_scale(g2, trace)}


# ---------------------------------------------------------------------------
# Steps to a target: the critical batch


def optimal_lr_factor(batch_size, k, b_noise):
    """eps_opt(k B) / eps_opt(B) with eps_opt(B) = eps_max / (1 + B_noise / B) (McCandlish et al., section 2).

    Equals (1 + B_noise / B) / (1 + B_noise / (k B)): about k while k B << B_noise, at most
    1 + B_noise / B however large k grows, and always below k for k > 1."""
    if batch_size <= 0 or k <= 0 or b_noise < 0:
        raise ValueError("need batch_size > 0, k > 0 and b_noise >= 0")
    return (1.0 + b_noise / batch_size) / (1.0 + b_noise / (k * batch_size))


def fit_critical_batch(batch_sizes, steps):
    """Least-squares fit of S = S_min + E_min / B; returns {"s_min", "e_min", "b_crit" (= E_min / S_min)}."""
    b = np.asarray(batch_sizes, dtype=np.float64)
    s = np.asarray(steps, dtype=np.float64)
    A = np.stack([np.ones_like(b), 1.0 / b], axis=1)  # (n, 2): S = [1, 1/B] @ [S_min, E_min]
    (s_min, e_min), *_ = np.linalg.lstsq(A, s, rcond=None)
    return {"s_min": float(s_min), "e_min": float(e_min),
            "b_crit": float(e_min / s_min) if s_min > 0 else None}


def bootstrap_critical_batch(batch_sizes, steps_per_seed, n_boot=2000, seed=0, level=0.95):
    """Percentile intervals for S_min, E_min and B_crit, resampling seeds within each batch size.

    steps_per_seed: one row per batch size, each that size's steps to the target, one per seed
    (every row the same length; no None). Each resample draws, for every batch size independently,
    as many seeds as it has, with replacement, fits fit_critical_batch to the resampled means, and
    keeps the three fitted values. index: the drawn seed indices, (n_boot, len(batch_sizes), n_seeds),
    so that other targets measured on the same runs can be resampled with the very same draws (their
    difference is then a paired bootstrap). A fit with S_min <= 0 has no finite critical batch: its
    B_crit counts as +inf (steps still falling like 1/B at every batch measured).

    Returns {"s_min", "e_min", "b_crit": (low, high) each, "n_boot", "n_infinite" (fits with S_min <= 0),
    "samples": {"s_min", "e_min", "b_crit": arrays of length n_boot}, "index"}. Seeded: the same
    arguments give the same answer."""
    steps = np.asarray(steps_per_seed, dtype=np.float64)  # (batch sizes, seeds)
    if steps.ndim != 2 or steps.shape[0] != len(batch_sizes) or steps.shape[1] < 2:
        raise ValueError("steps_per_seed needs one row per batch size and at least two seeds in each")
    if not np.all(np.isfinite(steps)):
        raise ValueError("steps_per_seed has a missing or non-finite count (a target not reached?)")
    if not 0 < level < 1 or n_boot < 1:
        raise ValueError("need 0 < level < 1 and n_boot >= 1")
    rng = np.random.default_rng(seed)
    index = rng.integers(0, steps.shape[1], size=(n_boot, *steps.shape))  # (n_boot, batch sizes, seeds)
    samples = resample_critical_batch(batch_sizes, steps, index)
    alpha = (1 - level) / 2
    # quantiles that pick resampled values (no interpolation), so that an infinite B_crit stays infinite
    bounds = {k: tuple(float(q) for q in np.quantile(v, [alpha, 1 - alpha], method="inverted_cdf"))
              for k, v in samples.items()}
    return {**bounds, "n_boot": n_boot, "n_infinite": int(np.sum(np.isinf(samples["b_crit"]))),
            "samples": samples, "index": index}


def resample_critical_batch(batch_sizes, steps_per_seed, index):
    """fit_critical_batch on each resample of the seeds that index (n_boot, batch sizes, seeds) draws;
    returns {"s_min", "e_min", "b_crit"}: arrays of length n_boot (B_crit +inf where S_min <= 0)."""
    steps = np.asarray(steps_per_seed, dtype=np.float64)  # (batch sizes, seeds)
    rows = np.arange(steps.shape[0])[None, :, None]
    means = steps[rows, index].mean(axis=2)  # (n_boot, batch sizes): each resample's mean steps
    fits = [fit_critical_batch(batch_sizes, m) for m in means]
    s_min = np.array([f["s_min"] for f in fits])
    e_min = np.array([f["e_min"] for f in fits])
    b_crit = np.array([np.inf if f["b_crit"] is None else f["b_crit"] for f in fits])
    return {"s_min": s_min, "e_min": e_min, "b_crit": b_crit}
