"""A narrow valley: gradient descent and momentum on an ill-conditioned quadratic.

    f(x, y) = 1/2 (x^2 / kappa + y^2)

The curvature is 1 across the valley (y) and 1/kappa along it (x); kappa is the condition
number. Gradient descent with rate lr multiplies each coordinate by (1 - lr * curvature) per
step, so it is stable only for lr < 2 (the steep direction) and then crawls along the flat one at
(1 - lr / kappa) per step. Heavy-ball momentum (Polyak 1964) carries speed along the valley; with
its best rate and beta its contraction per step is (sqrt(kappa) - 1) / (sqrt(kappa) + 1) against
gradient descent's (kappa - 1) / (kappa + 1) (Goh 2017, "Why Momentum Really Works", Distill).

The trajectories are made by pylib.optim.sgd_step itself, on a params dict holding the point.
Coordinates: x along the valley, y across it; the page plots them on equal axes.
"""

import math

import numpy as np

from pylib import optim

START = (-9.0, 2.5)  # where every trajectory starts
VIEW = (-10.0, 10.0, -3.0, 3.0)  # x_min, x_max, y_min, y_max of the plot
DIVERGE_FACTOR = 100.0  # a trajectory whose f exceeds this x f(START) has diverged
TOLERANCE = 1e-3  # "converged": f below this x f(START)
DEFAULTS = {"lr": 1.0, "kappa": 50.0, "momentum": 0.9, "steps": 100}

# ---------------------------------------------------------------------------
# The function


def curvatures(kappa):
    """(along the valley, across it): the Hessian's eigenvalues."""
    return np.array([1.0 / kappa, 1.0])


def value(xy, kappa):
    """f at points xy (..., 2)."""
    xy = np.asarray(xy, dtype=np.float64)
    return 0.5 * np.sum(curvatures(kappa) * xy * xy, axis=-1)


def gradient(xy, kappa):
    """grad f = H xy, H = diag(1/kappa, 1)."""
    return curvatures(kappa) * xy


def contours(kappa, levels=8, points=181):
    """Level sets of f as closed polylines: [{level, xs, ys}], levels geometric from f(START) down."""
    f0 = float(value(START, kappa))
    out = []
    theta = np.linspace(0.0, 2.0 * math.pi, points)
    for k in range(levels):
        level = f0 * 0.25**k  # each level a quarter of the one before: equal spacing in log f
        ax, ay = np.sqrt(2.0 * level / curvatures(kappa))  # the ellipse's semi-axes
        out.append({"level": level, "xs": (ax * np.cos(theta)).tolist(), "ys": (ay * np.sin(theta)).tolist()})
    return out


# ---------------------------------------------------------------------------
# Trajectories


def trajectory(kappa, lr, steps, momentum=0.0):
    """Points of SGD (momentum 0) or heavy-ball momentum from START, by pylib.optim.sgd_step.

    Returns {xs, ys, values, diverged_at (step or None), converged_at (first step with
    f < TOLERANCE f0, or None), final}. A diverging run stops at the first point whose f exceeds
    DIVERGE_FACTOR x f0, so nothing is drawn off to infinity.
    """
    params = {"xy": np.array(START, dtype=np.float64)}
    state = optim.sgd_init(params)
    f0 = float(value(START, kappa))
    xs, ys, values = [START[0]], [START[1]], [f0]
    diverged_at = converged_at = None
    for step in range(1, steps + 1):
        grads = {"xy": gradient(params["xy"], kappa)}
        optim.sgd_step(params, grads, state, lr, momentum=momentum)
        f = float(value(params["xy"], kappa))
        if not math.isfinite(f) or f > DIVERGE_FACTOR * f0:
            diverged_at = step
            break
        xs.append(float(params["xy"][0]))
        ys.append(float(params["xy"][1]))
        values.append(f)
        if converged_at is None and f < TOLERANCE * f0:
            converged_at = step
    return {"xs": xs, "ys": ys, "values": values, "diverged_at": diverged_at,
            "converged_at": converged_at, "final": values[-1], "f0": f0}


def best_gd_lr(kappa):
    """Gradient descent's best fixed rate on this quadratic: 2 / (lambda_min + lambda_max)."""
    lo, hi = curvatures(kappa)
    return 2.0 / (lo + hi)


def best_momentum(kappa):
    """Polyak's heavy-ball optimum: (lr, beta) = (4 / (sqrt(L) + sqrt(mu))^2, ((sqrt(k) - 1) / (sqrt(k) + 1))^2)."""
    mu, L = curvatures(kappa)
    lr = 4.0 / (math.sqrt(L) + math.sqrt(mu)) ** 2
    beta = ((math.sqrt(kappa) - 1.0) / (math.sqrt(kappa) + 1.0)) ** 2
    return lr, beta


def valley(kappa, lr, steps, momentum):
    """What the page draws: contours, the SGD and the momentum trajectory, and the view."""
    return {"contours": contours(kappa), "sgd": trajectory(kappa, lr, steps, 0.0),
            "momentum": trajectory(kappa, lr, steps, momentum), "view": list(VIEW), "start": list(START),
            "stable_lr": 2.0 / float(curvatures(kappa).max())}


def derived_values():
    """Build-time figures for chapter 5's valley, at DEFAULTS["kappa"]."""
    kappa = DEFAULTS["kappa"]
    lr_gd = best_gd_lr(kappa)
    lr_hb, beta_hb = best_momentum(kappa)
    budget = 2000
    gd = trajectory(kappa, lr_gd, budget)
    hb = trajectory(kappa, lr_hb, budget, beta_hb)
    default_gd = trajectory(kappa, DEFAULTS["lr"], DEFAULTS["steps"])
    default_hb = trajectory(kappa, DEFAULTS["lr"], DEFAULTS["steps"], DEFAULTS["momentum"])
    return {
        "ch5.valley.kappa": kappa,
        "ch5.valley.lr": DEFAULTS["lr"],
        "ch5.valley.momentum": DEFAULTS["momentum"],
        "ch5.valley.steps": DEFAULTS["steps"],
        "ch5.valley.tolerance": TOLERANCE,
        "ch5.valley.stable_lr": 2.0,
        "ch5.valley.gd_best_lr": float(lr_gd),
        "ch5.valley.gd_rate": (kappa - 1) / (kappa + 1),
        "ch5.valley.gd_best_steps": gd["converged_at"],
        "ch5.valley.hb_best_lr": lr_hb,
        "ch5.valley.hb_best_beta": beta_hb,
        "ch5.valley.hb_rate": (math.sqrt(kappa) - 1) / (math.sqrt(kappa) + 1),
        "ch5.valley.hb_best_steps": hb["converged_at"],
        "ch5.valley.default_gd_ratio": default_gd["final"] / default_gd["f0"],
        "ch5.valley.default_hb_ratio": default_hb["final"] / default_hb["f0"],
    }
