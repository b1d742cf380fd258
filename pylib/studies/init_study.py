"""Statistics of a model at and just after initialisation: what chapter 7 measures and plots.

- `init_stats`: the loss at initialisation, the standard deviation of the residual stream after
  the embeddings and after each block, and the gradient norm of each block's parameters, on one
  fixed batch. Swept over init scales (`init_scale_sweep`) and depths and norm placements
  (`depth_stats`).
- `coord_check`: Yang et al. (2022), "Tensor Programs V" (µTransfer), appendix on the coordinate
  check: train a few steps and record the size (root mean square) of each coordinate of the
  activations after every step. Under standard parameterisation it grows with width; under µP it
  stays flat.
- `lr_sweep_summary`: the best learning rate per width from a grid of final losses, with
  diverged runs kept apart (never averaged as NaN).

Legend: B batch, T time, C n_embd, L n_layer, V vocab_size.
"""

import dataclasses
import math

import numpy as np

from pylib import loss as xent, model

# ---------------------------------------------------------------------------
# The settings of chapter 7's runs, shared by experiments/ch7.py and the page (pylib.web.init_ops)

DEPTH_MAX = 8  # the depth family: n_layer 1..8 at the course model's width (n_layer 1 is the course model)
# The page's run (and its measured band): 150 steps at peak lr 0.02. The curve is on a 64-window subset
# of the validation split (half the default 128: an 8-block model's evaluation costs 8 times the
# course model's, and the page repeats it every 25 steps).
DEPTH_TRAIN = {"steps": 150, "batch_size": 8, "lr": 2e-2, "eval_interval": 25, "eval_windows": 64}
DEPTH_WARMUP = 20  # warmup steps of the "with warmup" runs (the default run's); the others have none
DEPTH_TRAIN_DEPTHS = (8,)  # the depth measured with three seeds (the band in the page)
# the peak rates each placement is run at, a factor of 2 apart; DEPTH_TRAIN's is among them. The grid
# reaches two steps below and one above the first one's (5e-3 .. 2e-2), where three of four picks sat at an edge.
DEPTH_LRS = (1.25e-3, 2.5e-3, 5e-3, 1e-2, 2e-2, 4e-2)
EMBED_UNIT_STD = 1.0  # the position embedding's std in the check with the stream entering block 1 at size ~1

COORD_WIDTHS = (16, 32, 64, 128)  # n_embd; n_head stays the course model's 2, so the head size grows
COORD_BASE_WIDTH = 16  # muP's base width: at 16 the muP model is the standard one
COORD_STEPS = 5  # the coordinate check's steps (Yang et al. 2022 plot the first few)
COORD_LR = 1e-2  # Adam, constant learning rate, no warmup: every step is a full-size step
COORD_BATCH = 8
COORD_PROBE_WINDOWS = 4  # fixed validation windows the sizes are measured on


def depth_train_key(depth, position, warmup):
    """The results.json curve name of a depth-training setting, e.g. "ch7.depth_train.L8.post.nowarmup"."""
    return f"ch7.depth_train.L{depth}.{position}.{'warmup' if warmup else 'nowarmup'}"


def depth_train_settings():
    """Every measured depth-training setting: {key: (depth, position, warmup)}."""
    return {depth_train_key(L, p, w): (L, p, w) for L in DEPTH_TRAIN_DEPTHS for p in ("pre", "post")
            for w in (False, True)}


def depth_train_config(base, depth, position, warmup, seed, lr=None):
    """(model config, train config) of a short run at this depth and norm placement (lr: the
    page's, DEPTH_TRAIN["lr"], unless given)."""
    from pylib import train
    mcfg = dataclasses.replace(base, n_layer=depth, norm_position=position)
    tcfg = dataclasses.replace(train.TrainConfig(), **DEPTH_TRAIN, warmup_steps=DEPTH_WARMUP if warmup else 0,
                               seed=seed)
    return mcfg, (tcfg if lr is None else dataclasses.replace(tcfg, lr=lr))


def coord_train_config(base, width, mup, seed, lr=COORD_LR):
    """(model config, train config) of one coordinate-check run: Adam, constant lr, no warmup."""
    from pylib import train
    mcfg = width_config(base, width, COORD_BASE_WIDTH if mup else 0)
    tcfg = dataclasses.replace(train.TrainConfig(), lr=lr, schedule="constant", warmup_steps=0,
                               batch_size=COORD_BATCH, steps=COORD_STEPS + 1, seed=seed)
    return mcfg, tcfg


# ---------------------------------------------------------------------------
# Statistics at initialisation


def rms(a):
    """Root mean square of every coordinate of a (as a Python float, computed in float64)."""
    a = np.asarray(a, dtype=np.float64)
    return float(np.sqrt(np.mean(a * a)))


def block_grad_norms(grads, cfg):
    """L2 norm of the gradients of each block's parameters: [norm of h.0.*, ..., norm of h.{L-1}.*]."""
    out = []
    for l in range(cfg.n_layer):
        prefix = f"h.{l}."
        total = sum(float(np.sum(np.asarray(g, dtype=np.float64) ** 2)) for n, g in grads.items() if n.startswith(prefix))
        out.append(math.sqrt(total))
    return out


def init_stats(cfg, seed, x, y, wpe_std=None):
    """At init (seed): {loss, act_std (L + 1: embeddings, then each block's output), grad_norm (L),
    logit_std}, on the batch x, y (B, T).

    wpe_std: if given, the position embedding is redrawn at this std (the same draw, rescaled), so
    that the stream enters block 1 at about that size; the token embedding, tied to the output
    layer, keeps cfg.init_std."""
    params = model.init_params(cfg, seed)
    if wpe_std is not None:
        params["wpe"] *= wpe_std / cfg.init_std
    trace = []
    with np.errstate(all="ignore"):  # a huge init scale overflows float32: reported as None
        logits, cache = model.traced_forward(params, cfg, x, trace)  # logits (B, T, V)
        loss, c_loss = xent.cross_entropy_forward(logits, y)
        grads = model.backward(xent.cross_entropy_backward(c_loss), cache)
        act_std = [float(np.std(h, dtype=np.float64)) for h in trace]  # L + 1 values
        grad_norm = block_grad_norms(grads, cfg)
        logit_std = float(np.std(logits, dtype=np.float64))
    clean = lambda v: v if math.isfinite(v) else None
    return {"loss": clean(float(loss)), "act_std": [clean(v) for v in act_std],
            "grad_norm": [clean(v) for v in grad_norm], "logit_std": clean(logit_std)}


def init_scale_sweep(cfg, init_stds, seed, x, y):
    """init_stats for each init_std (the config's init_std replaced): a list in the same order."""
    return [init_stats(dataclasses.replace(cfg, init_std=s), seed, x, y) for s in init_stds]


def depth_stats(cfg, depths, positions, seed, x, y, wpe_std=None):
    """{position: [init_stats at n_layer = L for L in depths]} for norm positions "pre"/"post"."""
    return {pos: [init_stats(dataclasses.replace(cfg, n_layer=L, norm_position=pos), seed, x, y, wpe_std)
                  for L in depths] for pos in positions}


# ---------------------------------------------------------------------------
# The coordinate check (Yang et al. 2022, Tensor Programs V)


def coordinate_sizes(params, cfg, x):
    """RMS of one coordinate of: the embeddings' output, the last block's output (the residual
    stream before the final norm), the first layer's attention logits (q.k times the scale,
    causal entries only) and the output logits, on the batch x."""
    trace = []
    with np.errstate(all="ignore"):
        logits, cache = model.traced_forward(params, cfg, x, trace)
        q_scaled, k = cache[3][0][1][2][:2]  # layer 0's attention cache: (q * scale, k, ...), (B, H, T, D)
        scores = q_scaled @ k.swapaxes(-1, -2)  # (B, H, T, T)
        T = scores.shape[-1]
        causal = np.tril(np.ones((T, T), dtype=bool))
        return {"embed": rms(trace[0]), "residual": rms(trace[-1]), "attn_logits": rms(scores[..., causal]),
                "logits": rms(logits)}


COORD_KEYS = ("embed", "residual", "attn_logits", "logits")


def coord_check(cfg, train_cfg, train_tokens, x_probe, n_steps):
    """Train n_steps steps of train_cfg from init; after 0..n_steps steps, coordinate_sizes on x_probe.

    Returns {key: [size after t steps for t in 0..n_steps]} for key in COORD_KEYS, plus "diverged_at"
    (the step at which the run diverged, or None; sizes after it are None)."""
    from pylib import train

    train_cfg = dataclasses.replace(train_cfg, eval_windows=1)  # the trainer's own evals are not used here
    state = train.init_train_state(cfg, train_cfg)
    sizes = {k: [] for k in COORD_KEYS}
    diverged_at = None
    for t in range(n_steps + 1):
        if diverged_at is None:
            now = coordinate_sizes(state["params"], cfg, x_probe)
            for k in COORD_KEYS:
                sizes[k].append(now[k] if math.isfinite(now[k]) else None)
        else:
            for k in COORD_KEYS:
                sizes[k].append(None)
        if t < n_steps and diverged_at is None:
            rec = train.train_steps(state, cfg, train_cfg, train_tokens, train_tokens, 1)
            if rec and rec[-1].get("diverged"):
                diverged_at = rec[-1]["step"]
    return {**sizes, "diverged_at": diverged_at}


def width_config(base, width, mup_base_width=0):
    """The base config at another width (n_head kept), under SP (0) or µP relative to mup_base_width."""
    return dataclasses.replace(base, n_embd=width, mup_base_width=mup_base_width)


# ---------------------------------------------------------------------------
# Learning-rate sweeps


def lr_sweep_summary(lrs, finals):
    """lrs: the grid; finals: per lr, a list of final losses over seeds (None = diverged).

    Returns {"mean": per lr the mean over seeds, or None if any seed diverged; "diverged": per lr
    the number of diverged seeds; "best_lr": the lr with the lowest mean (None if all diverged);
    "best_index"}."""
    means, diverged = [], []
    for runs in finals:
        bad = sum(1 for v in runs if v is None or not math.isfinite(v))
        diverged.append(bad)
        means.append(None if bad else float(np.mean(runs)))
    ok = [i for i, m in enumerate(means) if m is not None]
    best = min(ok, key=lambda i: means[i]) if ok else None
    return {"mean": means, "diverged": diverged, "best_index": best, "best_lr": None if best is None else lrs[best]}
