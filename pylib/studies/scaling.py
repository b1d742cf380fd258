"""Chapter 14's toy scaling study: IsoFLOP profiles of the course model's family, and their fits.

The family is the course model with one thing changed, its width n_embd (one layer, two heads,
context 64, vocabulary 65): WIDTHS go from well below the course model's 16 to well above it.
A compute budget C (FLOPs) buys each width D = C / F tokens, F = pylib.systems.flops'
training_flops_per_token (6N + 12LTC, attention included), i.e. a number of steps of B = 16
windows of T = 64 tokens. At each budget, the final losses against log N trace an IsoFLOP
profile; the minimum of a parabola fitted through it (in log N, and separately in log D) is that
budget's optimum, and straight lines through the optima in log-log give N_opt ∝ C^a and
D_opt ∝ C^b (Hoffmann et al. 2022, section 3.2, the "IsoFLOP profiles" approach).

Chinchilla's parametric form L(N, D) = E + A/N^α + B/D^β (section 3.3) is fitted too, by
variable projection: for fixed (α, β) the loss is linear in (E, A, B), solved exactly by
non-negative least squares over the eight active sets; (α, β) by a coarse-to-fine grid. That is
plain least squares on L, not Chinchilla's Huber loss on log L with L-BFGS: NumPy only.

Every learning-rate setting is the course's (peak 1e-2, cosine to its own end): not tuned per
size, which is one of the reasons the chapter gives for distrusting these exponents.

Legend: N parameters (pylib.model.count_params), D training tokens, C FLOPs, L loss (nats/token).
"""

import math
from itertools import product

import numpy as np

from pylib import model
from pylib.systems import flops

# ---------------------------------------------------------------------------
# The family and the budgets

N_HEAD = 2  # the course model's two heads at every width (head size n_embd / 2)
WIDTHS = (4, 6, 8, 12, 16, 24, 32, 48)  # n_embd; 16 is the course model
BATCH = 16  # windows per step, the course default
BUDGETS = {  # FLOPs -> the widths run at that budget (a window around its optimum, from a pilot)
    3e9: (4, 6, 8, 12, 16),
    6e9: (6, 8, 12, 16),
    1.2e10: (8, 12, 16, 24),
    2.4e10: (8, 12, 16, 24, 32, 48),
}
HELD_OUT_BUDGET = 9.6e10  # 4x the largest budget: predicted from the fits, then measured


def width_config(width, vocab_size=65):
    """The family's model of width n_embd: the course model otherwise."""
    return model.GPTConfig(n_embd=int(width), n_head=N_HEAD, vocab_size=vocab_size)


def steps_for_budget(cfg, budget, batch_size=BATCH):
    """Training steps that spend about budget FLOPs (at least 1): C / (F·B·T), rounded."""
    per_step = flops.training_flops_per_token(cfg) * batch_size * cfg.block_size
    return max(1, int(round(budget / per_step)))


def tokens(cfg, steps, batch_size=BATCH):
    """D: the tokens a run of steps sees."""
    return steps * batch_size * cfg.block_size


def warmup_for(steps):
    """The course's 20 warmup steps, or a tenth of a short run (at least 1)."""
    return max(1, min(20, steps // 10))


def width_for_params(n_target, vocab_size=65):
    """The even width (>= 2) whose parameter count is nearest n_target in log terms."""
    if not (n_target > 0 and math.isfinite(n_target)):
        raise ValueError("the target parameter count must be a positive number")
    best, w = None, 2
    while True:
        n = model.count_params(width_config(w, vocab_size))
        gap = abs(math.log(n / n_target))
        if best is not None and gap > best[0]:
            return best[1]
        best = (gap, w) if best is None or gap < best[0] else best
        w += 2


# ---------------------------------------------------------------------------
# Fits


def fit_parabola(x, y):
    """Least-squares y = c2 x² + c1 x + c0 -> (c2, c1, c0)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 3 or np.unique(x).size < 3:
        raise ValueError("a parabola needs at least three distinct x")
    c2, c1, c0 = np.polyfit(x, y, 2)
    return float(c2), float(c1), float(c0)


def parabola_minimum(x, y):
    """The vertex of the fitted parabola: {"x", "y", "inside"} (inside: within the measured x),
    or None when the parabola opens downwards (no minimum)."""
    c2, c1, c0 = fit_parabola(x, y)
    if not c2 > 0:
        return None
    xm = -c1 / (2 * c2)
    return {"x": xm, "y": c0 - c1 * c1 / (4 * c2), "inside": bool(min(x) <= xm <= max(x)),
            "coef": (c2, c1, c0)}


def isoflop_optimum(n_params, n_tokens, losses):
    """One budget's optimum from its points: parabolas in ln N and in ln D -> {"n", "d", "loss",
    "inside"} (inside: both vertices within the measured sizes), or None without a minimum."""
    by_n = parabola_minimum(np.log(n_params), losses)
    by_d = parabola_minimum(np.log(n_tokens), losses)
    if by_n is None or by_d is None:
        return None
    return {"n": math.exp(by_n["x"]), "d": math.exp(by_d["x"]), "loss": by_n["y"],
            "inside": by_n["inside"] and by_d["inside"], "coef_n": by_n["coef"], "coef_d": by_d["coef"]}


def fit_power_law(c, y):
    """y = k·c^a by least squares in log-log -> (a, k)."""
    lc, ly = np.log(np.asarray(c, float)), np.log(np.asarray(y, float))
    if lc.size < 2 or np.unique(lc).size < 2:
        raise ValueError("a power law needs at least two distinct budgets")
    a, ln_k = np.polyfit(lc, ly, 1)
    return float(a), float(math.exp(ln_k))


def _nnls3(X, y):
    """Non-negative least squares for 3 columns, exactly: the best of the 8 active sets."""
    sol, *_ = np.linalg.lstsq(X, y, rcond=None)
    if (sol >= 0).all():  # the unconstrained optimum is feasible, hence the constrained one
        return float(np.sum((X @ sol - y) ** 2)), sol
    best = (np.inf, np.zeros(3))
    for keep in product((False, True), repeat=3):
        cols = [i for i in range(3) if keep[i]]
        coef = np.zeros(3)
        if cols:
            sol, *_ = np.linalg.lstsq(X[:, cols], y, rcond=None)
            if (sol < 0).any():
                continue
            coef[cols] = sol
        err = float(np.sum((X @ coef - y) ** 2))
        if err < best[0]:
            best = (err, coef)
    return best


def fit_chinchilla(n_params, n_tokens, losses, alphas=None, betas=None, refine=3):
    """L = E + A/N^α + B/D^β by least squares (E, A, B >= 0) -> {"E", "A", "alpha", "B", "beta", "rmse"}.

    (α, β) on a grid (default 0.02..2.0), refined `refine` times around the best point; for
    each (α, β) the best (E, A, B) is exact (non-negative least squares)."""
    n, d, y = (np.asarray(v, float) for v in (n_params, n_tokens, losses))
    if not (n.size == d.size == y.size) or n.size < 5:
        raise ValueError("the parametric fit needs at least five (N, D, L) points")
    alphas = np.linspace(0.02, 2.0, 40) if alphas is None else np.asarray(alphas, float)
    betas = np.linspace(0.02, 2.0, 40) if betas is None else np.asarray(betas, float)
    best = None
    for level in range(refine + 1):
        for a in alphas:
            for b in betas:
                X = np.stack([np.ones_like(n), n ** -a, d ** -b], axis=1)  # (P, 3)
                err, coef = _nnls3(X, y)
                if best is None or err < best[0]:
                    best = (err, a, b, coef)
        if level < refine:  # a finer grid around the best (α, β), a tenth of the span
            sa, sb = (alphas[-1] - alphas[0]) / 10, (betas[-1] - betas[0]) / 10
            alphas = np.linspace(max(best[1] - sa, 1e-3), best[1] + sa, 21)
            betas = np.linspace(max(best[2] - sb, 1e-3), best[2] + sb, 21)
    err, a, b, (E, A, B) = best
    return {"E": float(E), "A": float(A), "alpha": float(a), "B": float(B), "beta": float(b),
            "rmse": math.sqrt(err / n.size)}


def chinchilla_loss(fit, n_params, n_tokens):
    """The parametric form's loss at (N, D)."""
    return fit["E"] + fit["A"] / n_params ** fit["alpha"] + fit["B"] / n_tokens ** fit["beta"]


def chinchilla_optimum(fit, c):
    """N_opt and D_opt of the parametric form under C = 6ND (Hoffmann et al. 2022, eq. (4)):
    N_opt = G (C/6)^a, D_opt = G⁻¹ (C/6)^b, a = β/(α+β), b = α/(α+β), G = (αA/(βB))^(1/(α+β))."""
    al, be = fit["alpha"], fit["beta"]
    G = (al * fit["A"] / (be * fit["B"])) ** (1.0 / (al + be))
    return G * (c / 6.0) ** (be / (al + be)), (c / 6.0) ** (al / (al + be)) / G


# ---------------------------------------------------------------------------
# A percentile bootstrap over seeds


def seed_resamples(loss_per_seed, resamples, seed=0):
    """Yields, resamples times, every point's loss as the mean of its seeds drawn with replacement.

    loss_per_seed: one (points, seeds) array per budget, drawn in that order from one generator
    (seed), so a seed gives the same resamples to every statistic computed from them."""
    rng = np.random.default_rng(seed)
    for _ in range(resamples):
        yield [np.take_along_axis(s, rng.integers(0, s.shape[1], s.shape), axis=1).mean(axis=1)
               for s in loss_per_seed]


def interval95(draws):
    """The percentile bootstrap's 95% interval: (2.5th, 97.5th percentile) of the draws."""
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


def position(x, low, high):
    """Where x lies against an interval: "below", "inside" or "above"."""
    return "below" if x < low else "above" if x > high else "inside"


def bootstrap_parametric_prediction(n_params, n_tokens, loss_per_seed, at, resamples, seed=0, **fit_kw):
    """The parametric form refitted (fit_chinchilla) on each of seed_resamples' resamples, and its
    loss at `at` = (N, D) -> {"low", "high" (interval95), "draws"}. n_params, n_tokens: one
    (points,) array per budget, matching loss_per_seed's (points, seeds)."""
    n, d = np.concatenate(n_params), np.concatenate(n_tokens)
    draws = [chinchilla_loss(fit_chinchilla(n, d, np.concatenate(means), **fit_kw), *at)
             for means in seed_resamples(loss_per_seed, resamples, seed)]
    low, high = interval95(draws)
    return {"low": low, "high": high, "draws": draws}


# ---------------------------------------------------------------------------
# The whole analysis of a sweep


def analyse(points):
    """points: [{"budget", "n", "d", "loss"}] (a run or a mean over seeds) -> the fits.

    Returns {"optima": {budget: isoflop_optimum or None}, "a", "k_n", "b", "k_d" (N_opt = k_n C^a,
    D_opt = k_d C^b over the budgets with a minimum), "loss_exp", "k_loss" (the optima's loss
    = k_loss C^loss_exp), "chinchilla": fit_chinchilla over all points}."""
    budgets = sorted({p["budget"] for p in points})
    optima = {}
    for c in budgets:
        ps = [p for p in points if p["budget"] == c]
        optima[c] = isoflop_optimum([p["n"] for p in ps], [p["d"] for p in ps], [p["loss"] for p in ps])
    found = [c for c in budgets if optima[c] is not None]
    out = {"optima": optima}
    if len(found) >= 2:
        out["a"], out["k_n"] = fit_power_law(found, [optima[c]["n"] for c in found])
        out["b"], out["k_d"] = fit_power_law(found, [optima[c]["d"] for c in found])
        out["loss_exp"], out["k_loss"] = fit_power_law(found, [optima[c]["loss"] for c in found])
    out["chinchilla"] = fit_chinchilla([p["n"] for p in points], [p["d"] for p in points],
                                       [p["loss"] for p in points])
    return out


# ---------------------------------------------------------------------------
# Published fits, for the page's calculator (each constant checked where cited)

CITED_FITS = {
    # Hoffmann et al. 2022's parametric fit (approach 3) as printed in their paper, quoted from the
    # analysis notebook of Besiroglu et al. 2024 (epoch-research/analyzing-chinchilla,
    # data_analysis.ipynb: "Parameters from Chinchilla paper"; `true_params_rounded`).
    "hoffmann": {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28},
    # The same fit at the precision of Hoffmann et al.'s TeX source, as the notebook gives it
    # (`true_params` = log A, log B, log E, α, β = 6.0073404, 6.0179186, 0.5267228, 0.33917084,
    # 0.2849083); Besiroglu et al.'s abstract blames the printed rounding for a biased optimum.
    "hoffmann_unrounded": {"E": math.exp(0.5267228), "A": math.exp(6.0073404), "B": math.exp(6.0179186),
                           "alpha": 0.33917084, "beta": 0.2849083},
    # Besiroglu et al. 2024's refit of the same form to data read off Hoffmann et al.'s figure 4
    # (same notebook, the printed estimates of its Huber-likelihood fit: A 482.00572, B 2085.43420,
    # E 1.81686, α 0.34781, β 0.36585; to the table's precision 482.01, 2085.43, 1.82, 0.3478, 0.3658).
    "besiroglu": {"E": 1.81686, "A": 482.00572, "B": 2085.43420, "alpha": 0.34781, "beta": 0.36585},
}
TOKENS_PER_PARAM = 20  # Hoffmann et al. 2022's rule of thumb (chapter 2 cites it)


def rule_of_thumb_optimum(c, tokens_per_param=TOKENS_PER_PARAM):
    """N and D with D = k·N and 6ND = C: N = sqrt(C / 6k)."""
    n = math.sqrt(c / (6.0 * tokens_per_param))
    return n, tokens_per_param * n
