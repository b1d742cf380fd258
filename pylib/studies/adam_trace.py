"""Adam, one weight at a time: its moments, bias correction, and where weight decay goes.

`first_steps` runs pylib.optim.adamw_step on a single weight for a given sequence of gradients
and reports, per step, the moments m and v that it keeps, their bias-corrected versions, and the
step taken with the correction (what Adam does; Kingma & Ba 2015, Algorithm 1) and without it.
m and v start at zero, so for the first steps they are too small by the factors 1 - beta1^t and
1 - beta2^t; with beta2 close to 1, v is far too small for a long time, and the uncorrected step
m / sqrt(v) is too large.

`decay_split` shows decoupled decay (AdamW) against L2 (Adam with wd * p in the gradient) on two
weights of the same value whose gradients differ in scale: L2's decay passes through the division
by sqrt(v), so the weight with the large gradients is barely decayed (Loshchilov & Hutter 2019,
section 2).
"""

import numpy as np

from pylib import optim

# ---------------------------------------------------------------------------


def first_steps(grads, lr=1.0, beta1=0.9, beta2=0.999, eps=1e-8):
    """Per step t = 1..len(grads): g, m, v, m_hat, v_hat, step (corrected) and step_uncorrected.

    The corrected step is the change pylib.optim.adamw_step makes to the weight (sign flipped);
    the uncorrected one is lr * m / (sqrt(v) + eps) from the same m and v.
    """
    params = {"w": np.zeros(1, dtype=np.float64)}
    state = optim.adamw_init(params)
    rows = []
    for g in grads:
        before = float(params["w"][0])
        optim.adamw_step(params, {"w": np.array([g], dtype=np.float64)}, state, lr, beta1, beta2, eps)
        t = state["t"]
        m, v = float(state["m"][0]), float(state["v"][0])
        rows.append({"t": t, "g": float(g), "m": m, "v": v,
                     "m_hat": m / (1.0 - beta1**t), "v_hat": v / (1.0 - beta2**t),
                     "step": before - float(params["w"][0]),
                     "step_uncorrected": float(lr * m / (np.sqrt(v) + eps))})
    return rows


EPS_SIZES = (1e-4, 1e-6, 1e-8, 1e-10, 1e-12)  # gradient sizes around the default eps = 1e-8


def first_step_by_size(sizes=EPS_SIZES, lr=1.0, beta1=0.9, beta2=0.999, eps=1e-8):
    """Adam's first step, in units of lr, for a gradient of each size in sizes (first_steps).

    Bias-corrected, the first step is lr * |g| / (|g| + eps): the full lr when |g| >> eps, about
    lr * |g| / eps when |g| << eps. Below eps, Adam's step no longer ignores the gradient's scale:
    it grows in proportion to it, as plain gradient descent's does at rate lr / eps.
    """
    return [first_steps([g], lr, beta1, beta2, eps)[0]["step"] / lr for g in sizes]


def decay_paths(grad_scales=(0.001, 10.0), weight=1.0, lr=0.01, weight_decay=0.1, steps=100, seed=0,
                beta1=0.9, beta2=0.99):
    """Step by step, how much weight decay each weight has received: AdamW vs Adam + L2.

    Two (or more) weights start at `weight`; weight i gets random-sign gradients of size
    grad_scales[i] (the same signs under both optimisers), through pylib.optim.adamw_step. The
    decay's share is measured as the difference from a run without decay. Returns {"adamw",
    "adam_l2"}: (steps + 1, n) lists, row t the shrinkage caused by the decay after t steps.
    """
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(steps, len(grad_scales)))
    scales = np.asarray(grad_scales, dtype=np.float64)

    def run(wd, decoupled):
        params = {"w": np.full((1, len(scales)), weight, dtype=np.float64)}  # 2-D: in the decay group
        state = optim.adamw_init(params)
        path = [params["w"][0].copy()]
        for s in signs:
            step = optim.adamw_step if decoupled else optim.adam_l2_step
            step(params, {"w": (s * scales)[None, :]}, state, lr, beta1, beta2, 1e-8, weight_decay=wd)
            path.append(params["w"][0].copy())
        return np.array(path)  # (steps + 1, n)

    free = run(0.0, True)
    return {"adamw": (free - run(weight_decay, True)).tolist(),
            "adam_l2": (free - run(weight_decay, False)).tolist(),
            "grad_scales": scales.tolist()}


def decay_split(grad_scales=(0.001, 10.0), weight=1.0, lr=0.01, weight_decay=0.1, steps=100, seed=0,
                beta1=0.9, beta2=0.99):
    """How much weight decay each weight received after `steps` steps: the last row of decay_paths.

    Returns {"adamw": [...], "adam_l2": [...], "grad_scales": [...]}: per weight, the total
    shrinkage caused by the decay."""
    paths = decay_paths(grad_scales, weight, lr, weight_decay, steps, seed, beta1, beta2)
    return {"adamw": paths["adamw"][-1], "adam_l2": paths["adam_l2"][-1], "grad_scales": paths["grad_scales"]}


def derived_values():
    """ch5.adam.* and ch5.decay_split.* for the chapter (build time)."""
    rows = first_steps([1.0] * 10, lr=1.0, beta1=0.9, beta2=0.999)
    split = decay_split()
    from pylib import train
    eps = train.TrainConfig().eps  # the course's (and Kingma and Ba's) 1e-8
    by_size = first_step_by_size(EPS_SIZES, eps=eps)
    defaults = decay_split.__defaults__  # grad_scales, weight, lr, weight_decay, steps, ...
    return {
        "ch5.decay_split.weight": defaults[1],
        "ch5.decay_split.beta1": defaults[6],
        "ch5.decay_split.beta2": defaults[7],
        "ch5.decay_split.lr": defaults[2],
        "ch5.decay_split.weight_decay": defaults[3],
        "ch5.decay_split.steps": defaults[4],
        "ch5.adam.first_step": rows[0]["step"],
        "ch5.adam.first_step_uncorrected": rows[0]["step_uncorrected"],
        "ch5.adam.tenth_step_uncorrected": rows[9]["step_uncorrected"],
        "ch5.decay_split.small_grad": split["grad_scales"][0],
        "ch5.decay_split.large_grad": split["grad_scales"][1],
        "ch5.decay_split.adamw_small": split["adamw"][0],
        "ch5.decay_split.adamw_large": split["adamw"][1],
        "ch5.decay_split.l2_small": split["adam_l2"][0],
        "ch5.decay_split.l2_large": split["adam_l2"][1],
        "ch5.adam.eps": eps,
        **{f"ch5.adam.first_step_at_size{i}": size for i, size in enumerate(EPS_SIZES)},
        **{f"ch5.adam.first_step_size{i}": step for i, step in enumerate(by_size)},
    }
