"""Chapter 5's optimisers on the model: the settings they run with, and the state each keeps.

`COMPARISON` is the sweep that experiments/ch5.py measures and that the page's live widget
re-runs one setting of (`comparison_config`): the default model and batch, a short cosine run,
and per optimiser its TrainConfig overrides and the learning rates swept (about 3x apart).

State: counted from the arrays each optimiser's init allocates.

SGD without momentum needs no state. (pylib.optim.sgd_init allocates momentum buffers anyway, to
keep one code path; torch.optim.SGD does not when momentum = 0, and neither does this count.)
SGD with momentum keeps one buffer, Adam and AdamW keep two (m and v), and Muon keeps one buffer
for each hidden matrix plus AdamW's two moments for everything else (pylib.muon).
"""

import dataclasses
import math

import numpy as np

from pylib import model, muon, optim

# ---------------------------------------------------------------------------
# The comparison

COMPARISON_STEPS = 200
COMPARISON_EVAL_INTERVAL = 25
COMPARISON_EVAL_WINDOWS = 32  # fewer than TrainConfig's 128, for cost: the page scores both splits at
# 9 points of every live run, and the sweep has ~80 runs; the curves and the page's band use it, every
# final loss uses the whole validation split instead (pylib.evaluation)

# name -> (TrainConfig overrides, learning rates swept, label)
COMPARISON = {
    "sgd": (dict(optimizer="sgd", momentum=0.0, weight_decay=0.0), [0.1, 0.3, 1.0, 3.0, 10.0], "SGD"),
    "momentum": (dict(optimizer="sgd", momentum=0.9, weight_decay=0.0), [0.03, 0.1, 0.3, 1.0, 3.0],
                 "SGD + momentum 0.9"),
    "adam": (dict(optimizer="adamw", weight_decay=0.0), [0.003, 0.01, 0.03, 0.1, 0.3], "Adam"),
    "adamw": (dict(optimizer="adamw"), [0.003, 0.01, 0.03, 0.1, 0.3], "AdamW (decay 0.1)"),
    "muon": (dict(optimizer="muon"), [0.01, 0.03, 0.1, 0.3, 1.0], "Muon + AdamW"),
}
N_RATES = 5  # every optimiser sweeps this many rates (the chapter's table has one column per rate)


def comparison_config(name, lr, seed):
    """The TrainConfig of one run of the comparison: optimiser `name` at rate lr."""
    from pylib import train
    overrides, _, _ = COMPARISON[name]
    return dataclasses.replace(train.TrainConfig(), steps=COMPARISON_STEPS,
                               eval_interval=COMPARISON_EVAL_INTERVAL, eval_windows=COMPARISON_EVAL_WINDOWS,
                               lr=lr, seed=seed, **overrides)


# ---------------------------------------------------------------------------
# State

OPTIMISER_ROWS = [  # (key, label)
    ("sgd", "SGD"),
    ("momentum", "SGD + momentum"),
    ("adamw", "Adam / AdamW"),
    ("muon", "Muon (+ AdamW for the rest)"),
]


def count_floats(state):
    """Elements of every NumPy array in a (nested) optimiser state; counters are not counted."""
    if isinstance(state, np.ndarray):
        return int(state.size)
    if isinstance(state, dict):
        return sum(count_floats(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(count_floats(v) for v in state)
    return 0


def state_floats(key, params):
    """Floats of optimiser state for params, by OPTIMISER_ROWS key."""
    if key == "sgd":
        return 0  # plain SGD reads nothing but the gradient
    if key == "momentum":
        return count_floats(optim.sgd_init(params)["buf"])
    if key == "adamw":
        return count_floats(optim.adamw_init(params))
    if key == "muon":
        return count_floats(muon.muon_init(params))
    raise ValueError(f"unknown optimiser {key!r}")


def state_table(cfg=None, bytes_per_float=4):
    """[{key, label, floats, per_param, bytes_per_param, bytes}] for the model of cfg (default: the course's)."""
    cfg = cfg or model.GPTConfig()
    params = model.init_params(cfg, 0)
    n = sum(p.size for p in params.values())
    rows = []
    for key, label in OPTIMISER_ROWS:
        floats = state_floats(key, params)
        rows.append({"key": key, "label": label, "floats": floats, "per_param": floats / n,
                     "bytes_per_param": bytes_per_float * floats / n, "bytes": bytes_per_float * floats})
    return rows


def derived_values():
    """ch5.state.<key>.{floats, per_param, bytes_per_param, bytes} for the course model, float32."""
    out = {}
    for row in state_table():
        for field in ("floats", "per_param", "bytes_per_param", "bytes"):
            out[f"ch5.state.{row['key']}.{field}"] = row[field]
    return out


# ---------------------------------------------------------------------------
# Decoupled weight decay's equilibrium, and what a few seeds say about a spread


def decay_equilibrium_rms(lr, weight_decay, update_rms):
    """The RMS at which decoupled decay balances the update, if the update is uncorrelated with the weights.

    One step of PyTorch-form AdamW on a decayed weight is p' = (1 - lr wd) p - lr u, with u the Adam
    update direction. If u is uncorrelated with p, E[p'^2] = (1 - lr wd)^2 E[p^2] + lr^2 E[u^2], and
    the fixed point E[p'^2] = E[p^2] is E[p^2] = lr E[u^2] / (wd (2 - lr wd)): RMS(p) = RMS(u) *
    sqrt(lr / (wd (2 - lr wd))), about RMS(u) * sqrt(lr / (2 wd)) when lr wd << 1."""
    if not (lr > 0 and weight_decay > 0 and lr * weight_decay < 2):
        raise ValueError(f"need lr > 0, wd > 0 and lr * wd < 2; got lr {lr}, wd {weight_decay}")
    return update_rms * math.sqrt(lr / (weight_decay * (2.0 - lr * weight_decay)))


def decay_balance_rms(lr, weight_decay, update_rms, cos):
    """The RMS at which decoupled decay balances the update when the update u has mean cosine cos with
    the weights p (per element: <p, u> / N = cos RMS(p) RMS(u)).

    E[p'^2] = E[p^2] for p' = (1 - lr wd) p - lr u gives, with P = RMS(p), U = RMS(u), q = lr wd,
        wd (2 - q) P^2 + 2 (1 - q) cos U P - lr U^2 = 0,
    whose positive root is returned. cos = 0 is decay_equilibrium_rms (a random walk held in by the
    decay); for cos < 0 (the update pushes the weights outwards) and a small random-walk term it is
    about -cos U / wd: the decay balances a steady outward push."""
    if not (lr > 0 and weight_decay > 0 and lr * weight_decay < 2):
        raise ValueError(f"need lr > 0, wd > 0 and lr * wd < 2; got lr {lr}, wd {weight_decay}")
    q = lr * weight_decay
    a, b, c = weight_decay * (2.0 - q), 2.0 * (1.0 - q) * cos * update_rms, -lr * update_rms**2
    return (-b + math.sqrt(b * b - 4.0 * a * c)) / (2.0 * a)
