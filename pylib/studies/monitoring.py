"""Monitoring a run: the dashboard's metrics (each with the moment it measures), health checks,
and the logged run exported as JSONL or CSV.

The metrics follow what is usually charted for a pretraining run: loss, gradient norm, learning
rate, the weight norm of each layer, the fraction of clipped steps and tokens per second. Each is
read at a stated moment of the step (METRICS), since a chart that mixes moments (a loss from
before the update, a weight norm from after it) is read wrongly.

Health checks, each with a known right answer:
  - the initial loss is about ln V: an untrained model spreads its probability nearly evenly over
    the V tokens (weights of std 0.02 give logits near 0);
  - the model can memorise one batch: trained on the same batch over and over, the loss on it
    falls far below ln V; if it does not, the gradient or the update is broken;
  - the loss has a floor, the entropy of the data: on a source whose entropy rate is known (a
    Markov chain drawn here), the held-out loss approaches that rate and never goes below it
    beyond sampling noise; a held-out loss below it means a leak (held-out text seen in training).
    A first loss far below ln V is no sign of a leak (an untrained model cannot exploit one): it
    points at the loss itself.

Legend: V vocab, N tokens.
"""

import csv
import io
import json
import math

import numpy as np

from pylib import guards, train
from pylib.studies import stability

METRICS = {  # name: (what it is, the moment it measures)
    "loss": ("the training batch's mean loss (nats per token)",
             "this step's batch, on the weights before this step's update"),
    "grad_norm": ("the global gradient norm",
                  "this step's gradient, before clipping"),
    "lr": ("the learning rate of the schedule",
           "the rate this step's update used"),
    "weight_norm": ("the norm of each layer group's weights",
                    "after this step's update"),
    "clipped_fraction": ("the share of the steps so far whose gradient was clipped",
                         "steps 0 to this one, inclusive"),
    "tokens_per_s": ("training tokens per second of wall time",
                     "this step only: drawing the batch, forward, backward, clipping and the update; "
                     "evaluations and page drawing excluded"),
    "val": ("the validation loss on the fixed subset of windows",
            "every eval_interval steps, on the weights this step starts from (after that many steps); "
            "the last one on the final weights, after the last step's update, so it is drawn at the step count"),
}


# ---------------------------------------------------------------------------
# The dashboard


def dashboard_record(record, params, model_cfg, counts, steps=None):
    """One dashboard row from a pylib.train record and the weights after its step.

    counts: {"steps", "clipped"}, running totals kept by the caller (updated here). steps: the run's
    length; a row with a validation loss gets val_step, the number of steps done on the weights it
    measured: the record's step, except at the last step (steps - 1), whose evaluation pylib.train
    makes after the update, on the final weights (val_step = steps)."""
    counts["steps"] += 1
    counts["clipped"] += 1 if record.get("clipped") else 0
    with np.errstate(all="ignore"):
        norms = stability.layer_weight_norms(params, model_cfg)
    row = {"step": record["step"], "loss": record.get("loss"), "grad_norm": record.get("grad_norm"),
           "lr": record.get("lr"), "clipped": bool(record.get("clipped")),
           "clipped_fraction": counts["clipped"] / counts["steps"],
           "tokens_per_s": record.get("tokens_per_s"),
           "weight_norms": [v if math.isfinite(v) else None for v in norms]}
    for key in ("val", "train_eval", "diverged"):
        if key in record:
            row[key] = record[key]
    if "val" in record:
        row["val_step"] = record["step"] + 1 if steps is not None and record["step"] == steps - 1 else record["step"]
    return row


# ---------------------------------------------------------------------------
# Health checks


def initial_loss_check(loss0, vocab_size, tolerance=0.1):
    """Is the first loss within tolerance nats of ln V? {"expected", "loss", "gap", "tolerance", "ok"}."""
    expected = math.log(vocab_size)
    gap = None if loss0 is None else loss0 - expected
    return {"expected": expected, "loss": loss0, "gap": gap, "tolerance": tolerance,
            "ok": gap is not None and abs(gap) <= tolerance}


def overfit_one_batch(model_cfg, train_cfg, tokens, steps, seed=0):
    """Train on one fixed batch for `steps` steps; returns the batch's loss before each step."""
    from pylib.data import get_batch

    state = train.init_train_state(model_cfg, train_cfg)
    x, y = get_batch(tokens, train_cfg.batch_size, model_cfg.block_size, np.random.default_rng([seed, 2]))
    guards.hook_batches(state, lambda step, _x, _y: (x, y))  # the same batch at every step
    history = train.train_steps(state, model_cfg, train_cfg, tokens, tokens, steps)
    return [r["loss"] for r in history]


def markov_source(vocab_size, concentration, seed):
    """A random first-order Markov chain: transition matrix P (V, V), rows Dirichlet(concentration),
    and its stationary distribution pi (V,)."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(vocab_size, concentration), size=vocab_size)  # (V, V)
    pi = np.full(vocab_size, 1.0 / vocab_size)
    for _ in range(10_000):  # power iteration; the chain is dense, so it mixes fast
        nxt = pi @ P
        if np.abs(nxt - pi).sum() < 1e-15:
            break
        pi = nxt
    return P, pi


def entropy_rate(P, pi):
    """The chain's entropy rate, sum_i pi_i H(P_i) in nats per token: the lowest expected loss
    any predictor can reach on it."""
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(P > 0, P * np.log(P), 0.0)
    return float(-(pi * plogp.sum(axis=1)).sum())


def sample_markov(P, n, seed):
    """n tokens (N,) uint8 from the chain, started from token 0."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(P, axis=1)  # (V, V)
    u = rng.random(n)
    out = np.empty(n, dtype=np.uint8)
    s = 0
    for i in range(n):
        s = min(int(np.searchsorted(cdf[s], u[i], side="right")), P.shape[0] - 1)
        out[i] = s
    return out


# ---------------------------------------------------------------------------
# Export


def to_jsonl(rows):
    """The logged run as JSON Lines: one record per line, NaN and infinities as null."""
    return "".join(json.dumps(_finite(r), allow_nan=False) + "\n" for r in rows)


def _finite(r):
    out = {}
    for k, v in r.items():
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        elif isinstance(v, list):
            v = [None if isinstance(x, float) and not math.isfinite(x) else x for x in v]
        out[k] = v
    return out


def to_csv(rows, layer_names=None):
    """The logged run as CSV: one row per step; a list column (weight_norms) becomes one column
    per entry, named after layer_names; missing values are empty cells."""
    columns, flat_rows = [], []
    for r in rows:
        flat = {}
        for k, v in _finite(r).items():
            if isinstance(v, list):
                for i, x in enumerate(v):
                    name = f"{k}.{layer_names[i]}" if layer_names and i < len(layer_names) else f"{k}.{i}"
                    flat[name] = x
            else:
                flat[k] = v
        for k in flat:
            if k not in columns:
                columns.append(k)
        flat_rows.append(flat)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for flat in flat_rows:
        writer.writerow({k: ("" if flat.get(k) is None else flat[k]) for k in columns})
    return buf.getvalue()
