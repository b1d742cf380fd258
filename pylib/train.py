"""The training loop, runnable a chunk of steps at a time (the page calls it between UI updates).

It follows nanoGPT's train.py: random windows from the token stream, warmup + cosine learning
rate, gradient accumulation, global-norm clipping, AdamW with nanoGPT's decay groups, and
periodic loss estimates on fixed windows of the train and validation streams.

Randomness has two separate, seeded streams, so changing one never shifts the other:
  - initial weights: np.random.default_rng(seed) (inside pylib.model.init_params);
  - batches: np.random.default_rng([seed, 1]), kept in the train state between chunks.
The same seeds give bit-identical records in CPython whether the run is made in one call or in
chunks.

One record per step, JSON-ready (Python floats and ints; None instead of NaN or inf):
  step (0-based), loss (this step's training loss: the batch loss before its update), lr,
  grad_norm (global, before clipping), tokens_per_s (of the step itself, evaluation excluded),
  and at eval steps train_eval and val (mean loss over the same eval_windows evenly spaced
  windows in every run: a fixed subset, for curves). Evals happen at step 0 and every
  eval_interval steps, on the params the step starts from (nanoGPT's convention), and at the
  last step, after its update, so the last record describes the model that is returned. With
  final_eval, the last record also has val_full: the loss on the whole validation split
  (pylib.evaluation), the course's one evaluation for final numbers.

Optional per-run hooks, kept in the train state (not in the config, which must stay a value):
  state["batch_hook"](step, x, y) -> (x, y) may replace a microbatch (e.g. inject a corrupted
  batch); state["grad_hook"](record, grads) sees the step's gradients before clipping and may
  add entries to the record (e.g. per-layer gradient norms).

Outlier skipping (skip_factor > 0): a step whose gradient norm exceeds skip_factor times the
median of the last 20 applied steps' norms (once 10 have been applied) is not applied and is
marked {"skipped": True}; the run goes on with the next batch. A clipped step is marked
{"clipped": True}.

Divergence: a step whose loss or gradient norm is not finite, or whose loss exceeds 2 ln V, is
marked {"diverged": True} (and has no tokens_per_s), is not applied, and ends the run. A loss of
2 ln V means the model gives the right token probability 1/V^2 on (geometric) average, far worse
than uniform guessing (ln V). A healthy run starts at ln V and goes down, so crossing 2 ln V
means the updates are destroying the model, not training it.
"""

import math
import time
from dataclasses import dataclass

import numpy as np

from pylib import evaluation, model, optim
from pylib.schedules import SCHEDULES, lr_at

# ---------------------------------------------------------------------------
# Config


@dataclass(frozen=True)
class TrainConfig:
    optimizer: str = "adamw"  # see OPTIMIZERS
    lr: float = 1e-2  # peak learning rate; see chapter 1 for why not 0.02 (seed spread)
    min_lr_ratio: float = 0.1  # the cosine ends at lr * min_lr_ratio (nanoGPT, Chinchilla)
    schedule: str = "cosine"  # "cosine", "wsd" or "constant" (pylib.schedules), after the warmup
    decay_frac: float = 0.2  # WSD only: the fraction of the steps spent decaying
    warmup_steps: int = 20
    steps: int = 400  # ~2 s in CPython, ~10-20 s in the page
    batch_size: int = 16  # B windows per microbatch
    grad_accum: int = 1  # microbatches per step
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99  # nanoGPT's shakespeare_char choice for small batches
    eps: float = 1e-8
    momentum: float = 0.9  # SGD only
    grad_clip: float = 1.0  # max global gradient norm; 0 turns clipping off
    skip_factor: float = 0.0  # skip a step whose grad norm > this x the recent median; 0: off
    z_loss: float = 0.0  # PaLM's z-loss coefficient (pylib.loss); 0: off
    seed: int = 0
    eval_interval: int = 10  # fine enough to see the short stay at the unigram loss
    eval_windows: int = 128  # fixed windows per split for train_eval / val (the curves' subset)
    final_eval: bool = False  # score the last step on the whole validation split too (val_full)
    mup_constant_decay: bool = False  # AdamW under muP: decay every tensor by lr*wd, not lr*mult*wd (mup's default)

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}")
        if self.steps < 1 or self.batch_size < 1 or self.grad_accum < 1 or self.eval_interval < 1:
            raise ValueError("steps, batch_size, grad_accum and eval_interval must be >= 1")

    @property
    def min_lr(self):
        return self.lr * self.min_lr_ratio


OPTIMIZERS = {
    "adamw": "AdamW: Adam with decoupled weight decay",
    "adam_l2": "Adam with L2 weight decay added to the gradient",
    "sgd": "SGD, with momentum unless momentum = 0",
    "muon": "Muon on the hidden matrices, AdamW on the rest (pylib.muon)",
}


def divergence_threshold(vocab_size):
    """Loss above which a run counts as diverged: 2 ln V (see the module docstring)."""
    return 2.0 * math.log(vocab_size)


# ---------------------------------------------------------------------------
# State


def init_train_state(model_cfg, train_cfg):
    """Fresh params, optimiser state, step 0, the batch rng, and diverged = False."""
    params = model.init_params(model_cfg, train_cfg.seed)
    if train_cfg.optimizer == "muon":
        from pylib import muon
        opt = muon.muon_init(params)
    else:
        opt = optim.sgd_init(params) if train_cfg.optimizer == "sgd" else optim.adamw_init(params)
    return {
        "params": params,
        "opt": opt,
        "groups": optim.param_groups(params),
        "lr_mult": model.lr_multipliers(model_cfg) if model_cfg.mup_base_width else None,
        "recent_norms": [],  # the last applied steps' gradient norms, for skip_factor
        "step": 0,
        "batch_rng": np.random.default_rng([train_cfg.seed, 1]),
        "diverged": False,
    }


def estimate_loss(params, model_cfg, tokens, n_windows):
    """Mean loss over n_windows fixed, evenly spaced windows of tokens."""
    from pylib.data import eval_windows  # lazily: pylib.data is another module's concern

    x, y = eval_windows(tokens, n_windows, model_cfg.block_size)
    return float(model.evaluate_loss(params, model_cfg, x, y))


# ---------------------------------------------------------------------------
# Steps


def _finite_or_none(value):
    return float(value) if math.isfinite(value) else None


def _evaluate(params, model_cfg, train_cfg, train_tokens, val_tokens):
    """{"train_eval", "val"} on fixed windows; None for a non-finite estimate."""
    with np.errstate(all="ignore"):
        return {
            "train_eval": _finite_or_none(estimate_loss(params, model_cfg, train_tokens, train_cfg.eval_windows)),
            "val": _finite_or_none(estimate_loss(params, model_cfg, val_tokens, train_cfg.eval_windows)),
        }


def _accumulated_loss_and_grads(params, model_cfg, train_cfg, tokens, rng, batch_hook=None, step=0):
    """Loss and grads over grad_accum microbatches, normalised by the total token count."""
    from pylib.data import get_batch

    B, T = train_cfg.batch_size, model_cfg.block_size
    total = train_cfg.grad_accum * B * T  # every target counts in pretraining windows
    loss, grads = 0.0, None
    for _ in range(train_cfg.grad_accum):
        x, y = get_batch(tokens, B, T, rng)
        if batch_hook is not None:
            x, y = batch_hook(step, x, y)
        micro_loss, micro_grads = model.loss_and_grads(params, model_cfg, x, y, denom=total,
                                                       z_loss=train_cfg.z_loss)
        loss += micro_loss
        if grads is None:
            grads = micro_grads
        else:
            for name, g in micro_grads.items():
                grads[name] += g
    return loss, grads, total


def train_steps(state, model_cfg, train_cfg, train_tokens, val_tokens, n_steps, on_step=None):
    """Run up to n_steps more steps (never past train_cfg.steps); returns their records."""
    records = []
    params, tc = state["params"], train_cfg
    limit = divergence_threshold(model_cfg.vocab_size)
    for _ in range(n_steps):
        if state["diverged"] or state["step"] >= tc.steps:
            break
        step = state["step"]
        last = step == tc.steps - 1
        record = {"step": step}
        if step % tc.eval_interval == 0 and not last:
            record.update(_evaluate(params, model_cfg, tc, train_tokens, val_tokens))
        t0 = time.perf_counter()
        lr = lr_at(tc.schedule, step, tc.lr, tc.warmup_steps, tc.steps, tc.min_lr, tc.decay_frac)
        with np.errstate(all="ignore"):  # a diverging run overflows; it is caught just below
            loss, grads, n_tokens = _accumulated_loss_and_grads(
                params, model_cfg, tc, train_tokens, state["batch_rng"], state.get("batch_hook"), step)
            if state.get("grad_hook"):
                state["grad_hook"](record, grads)
            grad_norm = optim.clip_grad_norm(grads, tc.grad_clip)
        record.update(loss=_finite_or_none(loss), lr=float(lr), grad_norm=_finite_or_none(grad_norm))
        if not (math.isfinite(loss) and math.isfinite(grad_norm)) or loss > limit:
            record["diverged"] = True
            state["diverged"] = True
            records.append(record)
            if on_step:
                on_step(record)
            break
        recent = state.setdefault("recent_norms", [])
        if tc.skip_factor > 0 and len(recent) >= 10 and grad_norm > tc.skip_factor * float(np.median(recent)):
            record["skipped"] = True  # an outlier: this batch's update is dropped
        else:
            if tc.grad_clip > 0 and grad_norm > tc.grad_clip:
                record["clipped"] = True
            _apply_update(state, tc, grads, lr)
            recent.append(grad_norm)
            del recent[:-20]
        record["tokens_per_s"] = n_tokens / max(time.perf_counter() - t0, 1e-9)
        state["step"] += 1
        if last:
            record.update(_evaluate(params, model_cfg, tc, train_tokens, val_tokens))
            if tc.final_eval:
                record["val_full"] = _finite_or_none(evaluation.full_loss(params, model_cfg, val_tokens))
        records.append(record)
        if on_step:
            on_step(record)
    return records


def _apply_update(state, tc, grads, lr):
    """One optimiser step on state["params"], by tc.optimizer."""
    params, opt, groups, mult = state["params"], state["opt"], state["groups"], state.get("lr_mult")
    if tc.optimizer in ("adamw", "adam_l2"):
        optim.adamw_step(params, grads, opt, lr, tc.beta1, tc.beta2, tc.eps, tc.weight_decay, groups,
                         lr_mult=mult, decoupled=tc.optimizer == "adamw", mult_decay=not tc.mup_constant_decay)
    elif tc.optimizer == "muon":
        from pylib import muon
        muon.muon_step(params, grads, opt, lr, tc.beta1, tc.beta2, tc.eps, tc.weight_decay, groups, lr_mult=mult)
    else:
        optim.sgd_step(params, grads, opt, lr, tc.momentum, tc.weight_decay, groups, lr_mult=mult)


def train(model_cfg, train_cfg, train_tokens, val_tokens, on_step=None):
    """A whole run: returns (params, history), history being every step's record."""
    state = init_train_state(model_cfg, train_cfg)
    history = train_steps(state, model_cfg, train_cfg, train_tokens, val_tokens, train_cfg.steps, on_step)
    return state["params"], history
