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

A step whose gradient was clipped is marked {"clipped": True}.

Chapter 1's loop is the whole loop. Later chapters' ideas are layered on in init_train_state,
which builds three functions the loop calls, from TrainConfig's later fields:
  state["loss_fn"](params, model_cfg, x, y, denom) -> (loss, grads): one microbatch's
    (pylib.model.loss_and_grads; chapter 8's z-loss: pylib.model.z_loss_and_grads);
  state["step_grads"](state, model_cfg, train_cfg, tokens, record) -> (loss, grads, tokens):
    the step's, over grad_accum microbatches (step_loss_and_grads);
  state["update"](state, train_cfg, record, grads, lr): the optimiser's step (apply_update:
    AdamW; chosen_update: chapter 5's Adam with L2, SGD and Muon, chapter 7's muP groups).
Chapter 8's guards wrap them (pylib.guards): skipping outlier steps, and hooks that replace a
microbatch or read the gradients before clipping.

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

from pylib import evaluation, guards, model, muon, mup, optim
from pylib.schedules import SCHEDULES, lr_at, warmup_cosine_lr

# ---------------------------------------------------------------------------
# Config


@dataclass(frozen=True)
class LoopConfig:
    """Chapter 1's training loop: AdamW, warmup then cosine, clipping, and periodic evaluation."""

    lr: float = 1e-2  # peak learning rate; see chapter 1 for why not 0.02 (seed spread)
    min_lr_ratio: float = 0.1  # the cosine ends at lr * min_lr_ratio (nanoGPT, Chinchilla)
    warmup_steps: int = 20
    steps: int = 400  # ~2 s in CPython, ~10-20 s in the page
    batch_size: int = 16  # B windows per microbatch
    grad_accum: int = 1  # microbatches per step
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99  # nanoGPT's shakespeare_char choice for small batches
    eps: float = 1e-8
    grad_clip: float = 1.0  # max global gradient norm; 0 turns clipping off
    seed: int = 0
    eval_interval: int = 10  # fine enough to see the short stay at the unigram loss
    eval_windows: int = 128  # fixed windows per split for train_eval / val (the curves' subset)
    final_eval: bool = False  # score the last step on the whole validation split too (val_full)

    def __post_init__(self):
        if self.steps < 1 or self.batch_size < 1 or self.grad_accum < 1 or self.eval_interval < 1:
            raise ValueError("steps, batch_size, grad_accum and eval_interval must be >= 1")

    @property
    def min_lr(self):
        return self.lr * self.min_lr_ratio

    def lr_at(self, step):
        """The learning rate at a 0-based step: warmup, then cosine (pylib.schedules)."""
        return warmup_cosine_lr(step, self.lr, self.warmup_steps, self.steps, self.min_lr)


@dataclass(frozen=True)
class TrainConfig(LoopConfig):
    """LoopConfig plus the options later chapters teach; each default leaves chapter 1's loop as it is."""

    optimizer: str = "adamw"  # chapter 5: see OPTIMIZERS
    momentum: float = 0.9  # chapter 5: SGD only
    schedule: str = "cosine"  # chapter 6: "cosine", "wsd" or "constant" (pylib.schedules), after the warmup
    decay_frac: float = 0.2  # chapter 6: WSD only, the fraction of the steps spent decaying
    mup_constant_decay: bool = False  # chapter 7: AdamW under muP decays every tensor by lr*wd (mup's default)
    skip_factor: float = 0.0  # chapter 8: skip a step whose grad norm > this x the recent median; 0: off
    z_loss: float = 0.0  # chapter 8: PaLM's z-loss coefficient (pylib.loss); 0: off

    def __post_init__(self):
        super().__post_init__()
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}")

    def lr_at(self, step):
        """The learning rate of the named schedule at a 0-based step."""
        return lr_at(self.schedule, step, self.lr, self.warmup_steps, self.steps, self.min_lr, self.decay_frac)


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
    """Fresh params, optimiser state, step 0, the batch rng, diverged = False, and the step's
    functions for the config (see the module docstring)."""
    params = model.init_params(model_cfg, train_cfg.seed)
    state = {
        "params": params,
        "groups": optim.param_groups(params),
        "step": 0,
        "batch_rng": np.random.default_rng([train_cfg.seed, 1]),
        "diverged": False,
        "loss_fn": model.loss_and_grads,
        "step_grads": step_loss_and_grads,
        "update": apply_update,
    }
    optimizer = option(train_cfg, "optimizer")
    init = {"sgd": optim.sgd_init, "muon": muon.muon_init}.get(optimizer, optim.adamw_init)
    if model_cfg.mup_base_width:  # chapter 7: one optimiser state per learning-rate group
        state["lr_mult"] = model.lr_multipliers(model_cfg)
        state["opt"] = mup.grouped_init(init, params, state["lr_mult"])
    else:
        state["opt"] = init(params)
    if optimizer != "adamw" or model_cfg.mup_base_width:  # chapters 5 and 7
        state["update"] = chosen_update
    if option(train_cfg, "z_loss"):  # chapter 8
        coef = train_cfg.z_loss
        state["loss_fn"] = lambda params, cfg, x, y, denom: model.z_loss_and_grads(params, cfg, x, y, coef, denom=denom)
    if option(train_cfg, "skip_factor") > 0:  # chapter 8
        guards.skip_outliers(state, train_cfg.skip_factor)
    return state


def option(train_cfg, name):
    """A later chapter's setting: the config's own, or TrainConfig's default for a LoopConfig."""
    return getattr(train_cfg, name, getattr(TrainConfig, name))


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


def accumulated_loss_and_grads(params, model_cfg, train_cfg, tokens, rng, loss_fn=model.loss_and_grads):
    """Loss and grads over grad_accum microbatches, normalised by the total token count."""
    from pylib.data import get_batch

    B, T = train_cfg.batch_size, model_cfg.block_size
    total = train_cfg.grad_accum * B * T  # every target counts in pretraining windows
    loss, grads = 0.0, None
    for _ in range(train_cfg.grad_accum):
        x, y = get_batch(tokens, B, T, rng)
        micro_loss, micro_grads = loss_fn(params, model_cfg, x, y, denom=total)
        loss += micro_loss
        if grads is None:
            grads = micro_grads
        else:
            for name, g in micro_grads.items():
                grads[name] += g
    return loss, grads, total


def step_loss_and_grads(state, model_cfg, train_cfg, tokens, record):
    """The step's loss and grads: accumulated_loss_and_grads with the state's rng and loss_fn."""
    return accumulated_loss_and_grads(state["params"], model_cfg, train_cfg, tokens, state["batch_rng"],
                                      state["loss_fn"])


def train_steps(state, model_cfg, train_cfg, train_tokens, val_tokens, n_steps, on_step=None):
    """Run up to n_steps more steps (never past train_cfg.steps); returns their records."""
    records = []
    for _ in range(n_steps):
        if state["diverged"] or state["step"] >= train_cfg.steps:
            break
        record = train_step(state, model_cfg, train_cfg, train_tokens, val_tokens)
        records.append(record)
        if on_step:
            on_step(record)
    return records


def train_step(state, model_cfg, tc, train_tokens, val_tokens):
    """One step: evaluate (every eval_interval steps), loss and grads, clip, update; returns its record."""
    params, step = state["params"], state["step"]
    last = step == tc.steps - 1
    record = {"step": step}
    if step % tc.eval_interval == 0 and not last:
        record.update(_evaluate(params, model_cfg, tc, train_tokens, val_tokens))
    t0 = time.perf_counter()
    lr = tc.lr_at(step)
    with np.errstate(all="ignore"):  # a diverging run overflows; it is caught just below
        loss, grads, n_tokens = state["step_grads"](state, model_cfg, tc, train_tokens, record)
        grad_norm = optim.clip_grad_norm(grads, tc.grad_clip)
    record.update(loss=_finite_or_none(loss), lr=float(lr), grad_norm=_finite_or_none(grad_norm))
    if not (math.isfinite(loss) and math.isfinite(grad_norm)) or loss > divergence_threshold(model_cfg.vocab_size):
        record["diverged"] = state["diverged"] = True  # not applied: the run ends here
        return record
    if tc.grad_clip > 0 and grad_norm > tc.grad_clip:
        record["clipped"] = True
    state["update"](state, tc, record, grads, lr)
    record["tokens_per_s"] = n_tokens / max(time.perf_counter() - t0, 1e-9)
    state["step"] += 1
    if last:
        record.update(_evaluate(params, model_cfg, tc, train_tokens, val_tokens))
        if tc.final_eval:
            record["val_full"] = _finite_or_none(evaluation.full_loss(params, model_cfg, val_tokens))
    return record


def apply_update(state, tc, record, grads, lr):
    """AdamW's step on state["params"], with the config's betas, eps and weight decay."""
    optim.adamw_step(state["params"], grads, state["opt"], lr, tc.beta1, tc.beta2, tc.eps, tc.weight_decay,
                     state["groups"])


def chosen_update(state, tc, record, grads, lr):
    """The update of tc.optimizer (chapter 5), on each muP learning-rate group apart (chapter 7)."""
    optimizer = option(tc, "optimizer")
    steps = {"adamw": optim.adamw_step, "adam_l2": optim.adam_l2_step, "sgd": optim.sgd_step, "muon": muon.muon_step}
    step = steps[optimizer]
    params, opt = state["params"], state["opt"]
    if "lr_mult" in state:
        constant_decay = option(tc, "mup_constant_decay") and optimizer == "adamw"
        mup.grouped_step(step, params, grads, opt, lr, state["lr_mult"], tc.weight_decay, constant_decay,
                         **_hyper(tc))
    else:
        step(params, grads, opt, lr, weight_decay=tc.weight_decay, groups=state["groups"], **_hyper(tc))


def _hyper(tc):
    """The optimiser's settings besides lr and weight decay."""
    if option(tc, "optimizer") == "sgd":
        return {"momentum": tc.momentum}
    return {"beta1": tc.beta1, "beta2": tc.beta2, "eps": tc.eps}


def train(model_cfg, train_cfg, train_tokens, val_tokens, on_step=None):
    """A whole run: returns (params, history), history being every step's record."""
    state = init_train_state(model_cfg, train_cfg)
    history = train_steps(state, model_cfg, train_cfg, train_tokens, val_tokens, train_cfg.steps, on_step)
    return state["params"], history
