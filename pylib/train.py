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
  and at eval steps train_eval and val (mean loss over fixed windows). Evals happen at step 0
  and every eval_interval steps, on the params the step starts from (nanoGPT's convention), and
  at the last step, after its update, so the last record describes the model that is returned.

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

from pylib import model, optim
from pylib.schedules import warmup_cosine_lr

# ---------------------------------------------------------------------------
# Config


@dataclass(frozen=True)
class TrainConfig:
    optimizer: str = "adamw"  # "adamw" or "sgd"
    lr: float = 2e-2  # peak learning rate; a 5k-parameter model takes a large one
    min_lr_ratio: float = 0.1  # the cosine ends at lr * min_lr_ratio (nanoGPT, Chinchilla)
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
    seed: int = 0
    eval_interval: int = 10  # fine enough to see the short stay at the unigram loss
    eval_windows: int = 64  # fixed windows per split for train_eval / val

    def __post_init__(self):
        if self.optimizer not in ("adamw", "sgd"):
            raise ValueError(f"unknown optimizer {self.optimizer!r}")
        if self.steps < 1 or self.batch_size < 1 or self.grad_accum < 1 or self.eval_interval < 1:
            raise ValueError("steps, batch_size, grad_accum and eval_interval must be >= 1")

    @property
    def min_lr(self):
        return self.lr * self.min_lr_ratio


def divergence_threshold(vocab_size):
    """Loss above which a run counts as diverged: 2 ln V (see the module docstring)."""
    return 2.0 * math.log(vocab_size)


# ---------------------------------------------------------------------------
# State


def init_train_state(model_cfg, train_cfg):
    """Fresh params, optimiser state, step 0, the batch rng, and diverged = False."""
    params = model.init_params(model_cfg, train_cfg.seed)
    opt = optim.adamw_init(params) if train_cfg.optimizer == "adamw" else optim.sgd_init(params)
    return {
        "params": params,
        "opt": opt,
        "groups": optim.param_groups(params),
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


def _accumulated_loss_and_grads(params, model_cfg, train_cfg, tokens, rng):
    """Loss and grads over grad_accum microbatches, normalised by the total token count."""
    from pylib.data import get_batch

    B, T = train_cfg.batch_size, model_cfg.block_size
    total = train_cfg.grad_accum * B * T  # every target counts in pretraining windows
    loss, grads = 0.0, None
    for _ in range(train_cfg.grad_accum):
        x, y = get_batch(tokens, B, T, rng)
        micro_loss, micro_grads = model.loss_and_grads(params, model_cfg, x, y, denom=total)
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
        lr = warmup_cosine_lr(step, tc.lr, tc.warmup_steps, tc.steps, tc.min_lr)
        with np.errstate(all="ignore"):  # a diverging run overflows; it is caught just below
            loss, grads, n_tokens = _accumulated_loss_and_grads(
                params, model_cfg, tc, train_tokens, state["batch_rng"])
            grad_norm = optim.clip_grad_norm(grads, tc.grad_clip)
        record.update(loss=_finite_or_none(loss), lr=float(lr), grad_norm=_finite_or_none(grad_norm))
        if not (math.isfinite(loss) and math.isfinite(grad_norm)) or loss > limit:
            record["diverged"] = True
            state["diverged"] = True
            records.append(record)
            if on_step:
                on_step(record)
            break
        if tc.optimizer == "adamw":
            optim.adamw_step(params, grads, state["opt"], lr, tc.beta1, tc.beta2, tc.eps,
                             tc.weight_decay, state["groups"])
        else:
            optim.sgd_step(params, grads, state["opt"], lr, tc.momentum, tc.weight_decay, state["groups"])
        record["tokens_per_s"] = n_tokens / max(time.perf_counter() - t0, 1e-9)
        state["step"] += 1
        if last:
            record.update(_evaluate(params, model_cfg, tc, train_tokens, val_tokens))
        records.append(record)
        if on_step:
            on_step(record)
    return records


def train(model_cfg, train_cfg, train_tokens, val_tokens, on_step=None):
    """A whole run: returns (params, history), history being every step's record."""
    state = init_train_state(model_cfg, train_cfg)
    history = train_steps(state, model_cfg, train_cfg, train_tokens, val_tokens, train_cfg.steps, on_step)
    return state["params"], history
