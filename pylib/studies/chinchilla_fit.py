"""Chinchilla's parametric fit done the paper's way, in NumPy (it runs in the page under Pyodide).

Hoffmann et al. 2022 (section 3.3, eq. (3)) fit L(N, D) = E + A/N^α + B/D^β by minimising
a Huber loss (δ = 10⁻³) of the residuals in log L, with the prediction written as a log-sum-exp,

    log L̂ = LSE(a − α log N, b − β log D, e),    A = eᵃ, B = eᵇ, E = eᵉ,

using L-BFGS from "a grid of initialisations" (the grid here, α, β ∈ {0, 0.5, …, 2},
e ∈ {−1, −0.5, …, 1}, a, b ∈ {0, 5, …, 25}, is Besiroglu et al.'s notebook's). Besiroglu et al. 2024 ("Chinchilla Scaling: A replication attempt",
arXiv:2404.10102) refit it to 245 runs read off Hoffmann et al.'s Figure 4, leaving out the five
highest losses; their analysis notebook (epoch-research/analyzing-chinchilla, data_analysis.ipynb)
has the objective, the grid and the data (chinchilla_data/svg_extracted_data.csv here).

What is here: the objective with its analytic gradient (`huber_objective`), the same form by plain
least squares on L (`squares_objective`), the Huber likelihood with a fitted scale that gave
Besiroglu et al.'s table (`huber_likelihood_objective`, minimised by `bfgs` in `fit_likelihood`), an L-BFGS minimiser (`lbfgs`, Nocedal &
Wright 2006, algorithm 7.4 with a backtracking Armijo search), the grid search (`fit`), the data
(`load_points`) and the compute-optimal allocation under C = 6ND (`optimum`).

Legend: P points; x = (a, b, e, α, β) the parameters; N parameters, D tokens, L loss (nats/token).
"""

import csv
import math
import pathlib
from itertools import product

import numpy as np

DELTA = 1e-3  # Hoffmann et al.'s Huber δ (section 3.3)
NAMES = ("a", "b", "e", "alpha", "beta")
DATA = pathlib.Path(__file__).with_name("chinchilla_data") / "svg_extracted_data.csv"

# the grid of initialisations of Besiroglu et al.'s notebook (its "Replicate exactly" cell)
GRID = {"a": np.arange(0, 30, 5.0), "b": np.arange(0, 30, 5.0), "e": np.arange(-1, 1.5, 0.5),
        "alpha": np.arange(0, 2.5, 0.5), "beta": np.arange(0, 2.5, 0.5)}


# ---------------------------------------------------------------------------
# The data


def load_points(path=DATA):
    """The 245 runs of Besiroglu et al.'s extraction -> (N, D, L), arrays of shape (P,).

    D is the notebook's: Training FLOP / (6 · Model Size), i.e. C = 6ND inverted."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    n = np.array([float(r["Model Size"]) for r in rows])
    c = np.array([float(r["Training FLOP"]) for r in rows])
    loss = np.array([float(r["loss"]) for r in rows])
    return n, c / (6.0 * n), loss


def highest_losses(loss, k):
    """Indices of the k highest losses (Besiroglu et al. leave out k = 5)."""
    return np.argsort(np.asarray(loss, float))[::-1][:int(k)].tolist()


# ---------------------------------------------------------------------------
# The model and the objectives (each returns (value, gradient))


def log_prediction(x, log_n, log_d):
    """log L̂ = LSE(a − α log N, b − β log D, e) and its Jacobian (P, 5)."""
    a, b, e, alpha, beta = x
    t1, t2 = a - alpha * log_n, b - beta * log_d  # (P,)
    top = np.maximum(np.maximum(t1, t2), e)
    w1, w2, w3 = np.exp(t1 - top), np.exp(t2 - top), np.exp(e - top)
    total = w1 + w2 + w3
    jac = np.empty((log_n.size, 5))  # the softmax weights (each term's share of L̂), chained to x
    jac[:, 0], jac[:, 1], jac[:, 2] = w1 / total, w2 / total, w3 / total
    jac[:, 3], jac[:, 4] = -jac[:, 0] * log_n, -jac[:, 1] * log_d
    return top + np.log(total), jac


def huber(r, delta=DELTA):
    """Huber's loss of r: r²/2 inside ±δ, δ(|r| − δ/2) outside; and its derivative."""
    size = np.abs(r)
    return np.where(size <= delta, 0.5 * r * r, delta * (size - 0.5 * delta)), np.clip(r, -delta, delta)


def huber_objective(x, log_n, log_d, log_loss, delta=DELTA):
    """Σ Huber_δ(log L̂ − log L): Hoffmann et al.'s objective."""
    pred, jac = log_prediction(x, log_n, log_d)
    h, dh = huber(pred - log_loss, delta)
    return float(h.sum()), jac.T @ dh


def squares_objective(x, log_n, log_d, log_loss):
    """Σ (L̂ − L)²: plain least squares on the loss itself, same form and parameters."""
    pred, jac = log_prediction(x, log_n, log_d)
    l_hat, loss = np.exp(pred), np.exp(log_loss)
    r = l_hat - loss
    return float(np.sum(r * r)), jac.T @ (2.0 * r * l_hat)


def huber_log_normaliser(delta=DELTA):
    """log of ∫ exp(−Huber_δ(x)) dx: √(2π)(1 − 2Φ(−δ)) + 2 e^(−δ²/2)/δ."""
    return math.log(math.sqrt(2 * math.pi) * math.erf(delta / math.sqrt(2)) + 2 * math.exp(-0.5 * delta ** 2) / delta)


def huber_likelihood_objective(x, log_n, log_d, log_loss, delta=DELTA):
    """Negative log-likelihood of log L under a Huber density of scale s = e^σ, x = (a, b, e, α, β, σ):
    Σ Huber_δ(r/s) + P(log s + log Z_δ). The estimator behind Besiroglu et al.'s table (notebook's
    `objective`); with s fitted, it approaches least absolute deviations in log L."""
    pred, jac = log_prediction(x[:5], log_n, log_d)
    s = math.exp(x[5])
    h, dh = huber((log_loss - pred) / s, delta)
    grad = np.empty(6)
    grad[:5] = -(jac.T @ dh) / s
    grad[5] = -float(np.sum(dh * (log_loss - pred) / s)) + log_n.size
    return float(h.sum() + log_n.size * (x[5] + huber_log_normaliser(delta))), grad


OBJECTIVES = {"huber": huber_objective, "squares": squares_objective}


# ---------------------------------------------------------------------------
# L-BFGS


def lbfgs(fun, x0, memory=10, max_iter=1000, gtol=1e-5, ftol=2.220446049250313e-09):
    """Minimise fun(x) -> (value, gradient) by L-BFGS: the two-loop recursion for the direction
    (Nocedal & Wright, algorithm 7.4), a line search to the strong Wolfe conditions, and
    SciPy L-BFGS-B's stopping rules (max |gradient| <= gtol, or a relative decrease <= ftol).
    Returns {"x", "fun", "iterations", "converged"}."""
    x = np.array(x0, float)
    f, g = fun(x)
    if not np.isfinite(f):
        return {"x": x, "fun": float("inf"), "iterations": 0, "converged": False}
    s_hist, y_hist = [], []
    for it in range(1, max_iter + 1):
        if np.max(np.abs(g)) <= gtol:
            return {"x": x, "fun": f, "iterations": it - 1, "converged": True}
        q = g.copy()
        alphas = []
        for s, y in zip(reversed(s_hist), reversed(y_hist)):
            rho = 1.0 / (y @ s)
            alphas.append(rho * (s @ q))
            q -= alphas[-1] * y
        if s_hist:
            q *= (s_hist[-1] @ y_hist[-1]) / (y_hist[-1] @ y_hist[-1])
        else:
            q /= max(1.0, np.linalg.norm(g))  # the first step: a unit step along −g/|g|
        for (s, y), a in zip(zip(s_hist, y_hist), reversed(alphas)):
            q += s * (a - (y @ q) / (y @ s))
        d = -q
        slope = g @ d
        if not slope < 0:  # not a descent direction: forget the history, go down the gradient
            s_hist, y_hist = [], []
            d, slope = -g / max(1.0, np.linalg.norm(g)), -(g @ g) / max(1.0, np.linalg.norm(g))
        found = wolfe_step(fun, x, f, slope, d)
        if found is None:
            return {"x": x, "fun": f, "iterations": it, "converged": False}
        x_new, f_new, g_new = found
        s, y = x_new - x, g_new - g
        if s @ y > 1e-12 * (y @ y):  # keep only pairs with positive curvature
            s_hist.append(s)
            y_hist.append(y)
            if len(s_hist) > memory:
                s_hist.pop(0)
                y_hist.pop(0)
        decrease = (f - f_new) / max(abs(f), abs(f_new), 1.0)
        x, f, g = x_new, f_new, g_new
        if decrease <= ftol:
            return {"x": x, "fun": f, "iterations": it, "converged": True}
    return {"x": x, "fun": f, "iterations": max_iter, "converged": False}


def wolfe_step(fun, x, f0, slope0, d, c1=1e-4, c2=0.9, max_evals=40):
    """A step along d meeting the strong Wolfe conditions (Nocedal & Wright, algorithms 3.5 and 3.6,
    bisection in the zoom) -> (x, f, g), or None when none is found."""
    def at(t):
        fx, gx = fun(x + t * d)
        return fx, gx, (gx @ d if np.isfinite(fx) else np.nan)

    def zoom(lo, f_lo, hi, evals):
        while evals < max_evals:
            t = 0.5 * (lo + hi)
            ft, gt, st = at(t)
            evals += 1
            if not np.isfinite(ft) or ft > f0 + c1 * t * slope0 or ft >= f_lo:
                hi = t
            else:
                if abs(st) <= -c2 * slope0:
                    return x + t * d, ft, gt
                if st * (hi - lo) >= 0:
                    hi = lo
                lo, f_lo = t, ft
        if lo > 0:  # out of evaluations: the best sufficient-decrease point found
            f_best, g_best, _ = at(lo)
            return x + lo * d, f_best, g_best
        return None

    prev, f_prev, t = 0.0, f0, 1.0
    for evals in range(1, max_evals + 1):
        ft, gt, st = at(t)
        if not np.isfinite(ft) or ft > f0 + c1 * t * slope0 or (evals > 1 and ft >= f_prev):
            return zoom(prev, f_prev, t, evals)
        if abs(st) <= -c2 * slope0:
            return x + t * d, ft, gt
        if st >= 0:
            return zoom(t, ft, prev, evals)
        prev, f_prev, t = t, ft, 2.0 * t
    return None


# ---------------------------------------------------------------------------
# The fit


def grid_starts(grid=GRID):
    """Every combination of the grid's values, as (a, b, e, α, β) rows: (K, 5)."""
    return np.array(list(product(*(grid[k] for k in NAMES))), float)


def log_points(n_params, n_tokens, losses):
    """(log N, log D, log L) after checking them: three 1-D lists of one length, at least five points,
    every value positive and finite."""
    n, d, y = (np.asarray(v, float) for v in (n_params, n_tokens, losses))
    if not (n.ndim == d.ndim == y.ndim == 1 and n.size == d.size == y.size):
        raise ValueError("N, D and L must be three lists of the same length")
    if n.size < 5:
        raise ValueError(f"the parametric fit has five constants and needs at least five points (got {n.size})")
    if not (np.all(np.isfinite(n) & np.isfinite(d) & np.isfinite(y)) and np.all(n > 0) and np.all(d > 0)
            and np.all(y > 0)):
        raise ValueError("every N, D and L must be a positive finite number")
    return np.log(n), np.log(d), np.log(y)


def fit(n_params, n_tokens, losses, loss="huber", delta=DELTA, starts=None, keep=None):
    """Fit L = E + A/N^α + B/D^β with `loss` ("huber": Hoffmann et al.'s; "squares": least squares
    on L), L-BFGS from each start (default: the notebook's grid of 4,500); the best end wins.

    keep: run L-BFGS only from the `keep` starts whose objective is lowest (the grid is scored in
    one vectorised pass first), which is what makes the page's fit fast; None runs every start.
    Returns {"E", "A", "B", "alpha", "beta", "x", "objective", "starts_run", "points"}."""
    if loss not in OBJECTIVES:
        raise ValueError(f"unknown loss {loss!r}: choose one of {', '.join(OBJECTIVES)}")
    log_n, log_d, log_y = log_points(n_params, n_tokens, losses)
    if loss == "huber":
        def fun(x):
            return huber_objective(x, log_n, log_d, log_y, delta)
    else:
        def fun(x):
            return squares_objective(x, log_n, log_d, log_y)
    starts = grid_starts() if starts is None else np.asarray(starts, float).reshape(-1, 5)
    if keep is not None and keep < len(starts):
        with np.errstate(over="ignore", invalid="ignore"):
            scores = np.nan_to_num(grid_values(starts, log_n, log_d, log_y, loss, delta), nan=np.inf)
        starts = starts[np.argsort(scores, kind="stable")[:keep]]
    best = None
    with np.errstate(over="ignore", invalid="ignore"):  # a trial step may overflow; the line search refuses it
        for x0 in starts:
            res = lbfgs(fun, x0)
            if np.isfinite(res["fun"]) and (best is None or res["fun"] < best["fun"]):
                best = res
    a, b, e, alpha, beta = best["x"]
    return {"E": math.exp(e), "A": math.exp(a), "B": math.exp(b), "alpha": float(alpha), "beta": float(beta),
            "x": best["x"].tolist(), "objective": best["fun"], "starts_run": len(starts), "points": int(log_n.size),
            "loss": loss}


def grid_values(starts, log_n, log_d, log_loss, loss="huber", delta=DELTA):
    """The objective at every start at once: (K,)."""
    a, b, e, alpha, beta = (starts[:, i:i + 1] for i in range(5))  # (K, 1)
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.broadcast_to(e, (len(starts), log_n.size))])
    pred = np.logaddexp(np.logaddexp(terms[0], terms[1]), terms[2])  # (K, P)
    if loss == "huber":
        return huber(pred - log_loss, delta)[0].sum(axis=1)
    return np.sum((np.exp(pred) - np.exp(log_loss)) ** 2, axis=1)


HOFFMANN_TEX = (6.0073404, 6.0179186, 0.5267228, 0.33917084, 0.2849083)  # log A, log B, log E, α, β (notebook)


def bfgs(fun, x0, max_iter=1000, gtol=1e-5):
    """Minimise fun(x) -> (value, gradient) by BFGS with a dense inverse Hessian (Nocedal & Wright,
    algorithm 6.1, H₀ = I) and the strong-Wolfe search; it stops at max |gradient| <= gtol, or when
    the search finds no better step (what SciPy's BFGS reports as "precision loss")."""
    x = np.array(x0, float)
    f, g = fun(x)
    h = np.eye(x.size)
    for it in range(1, max_iter + 1):
        if np.max(np.abs(g)) <= gtol:
            return {"x": x, "fun": f, "iterations": it - 1, "converged": True}
        d = -h @ g
        found = wolfe_step(fun, x, f, g @ d, d)
        if found is None:
            return {"x": x, "fun": f, "iterations": it, "converged": False}
        x_new, f_new, g_new = found
        s, y = x_new - x, g_new - g
        if s @ y > 1e-12:
            rho, eye = 1.0 / (s @ y), np.eye(x.size)
            h = (eye - rho * np.outer(s, y)) @ h @ (eye - rho * np.outer(y, s)) + rho * np.outer(s, s)
        x, f, g = x_new, f_new, g_new
    return {"x": x, "fun": f, "iterations": max_iter, "converged": False}


def fit_likelihood(n_params, n_tokens, losses, x0=HOFFMANN_TEX, delta=DELTA):
    """Besiroglu et al.'s table estimator: the maximum likelihood of log L under a Huber density whose
    scale is fitted too, by BFGS from x0 (theirs: Hoffmann et al.'s constants at the TeX's precision,
    scale 1). Returns the constants, "scale", "log_likelihood", "converged" (False when the search
    stopped on precision, as theirs did)."""
    log_n, log_d, log_y = log_points(n_params, n_tokens, losses)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        res = bfgs(lambda x: huber_likelihood_objective(x, log_n, log_d, log_y, delta), list(x0) + [0.0])
    a, b, e, alpha, beta, sigma = res["x"]
    return {"E": math.exp(e), "A": math.exp(a), "B": math.exp(b), "alpha": float(alpha), "beta": float(beta),
            "scale": math.exp(sigma), "log_likelihood": -res["fun"], "objective": res["fun"],
            "converged": res["converged"], "points": int(log_n.size), "starts_run": 1, "loss": "likelihood"}


def optimum(constants, compute):
    """N_opt, D_opt under C = 6ND (Hoffmann et al. 2022, eq. (4)): N_opt = G (C/6)^(β/(α+β)),
    D_opt = G⁻¹ (C/6)^(α/(α+β)), G = (αA/(βB))^(1/(α+β))."""
    al, be, A, B = constants["alpha"], constants["beta"], constants["A"], constants["B"]
    g = (al * A / (be * B)) ** (1.0 / (al + be))
    return g * (compute / 6.0) ** (be / (al + be)), (compute / 6.0) ** (al / (al + be)) / g
