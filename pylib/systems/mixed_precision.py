"""Training the course model in a lower precision: the recipes of chapter 9, emulated in float32.

A recipe says, for each place where a real mixed-precision run rounds, which format it rounds to:
  - the inputs of every matrix product in the forward pass (activations and weights), which are
    also the activations the caches keep for the backward pass (pylib.layers.MATMUL_INPUT);
  - the gradients entering the backward pass's matrix products ("grad" role), and the parameter
    gradients the backward pass returns;
  - the weights between steps and the optimiser's moments m and v.
Everything else computes in float32, as autocast does for softmax, the norms and the loss: the
elementwise operations, the residual stream, the loss, and every matrix product's accumulation
(a float32 sum of rounded inputs, as tensor cores accumulate). Values are rounded with
pylib.systems.precision, bit-exact to the formats.

RECIPES:
  fp32           nothing rounded (the baseline: identical to pylib.train's run, tested).
  bf16_master    bf16 matmul inputs and gradients; float32 master weights, Adam moments and
                 accumulation (Micikevicius et al. 2018's recipe, with bf16 for fp16).
  bf16_pure      the same compute, and the weights and moments stored in bf16 too (the model
                 "loaded in bf16"): every update is rounded back to bf16.
  bf16_pure_sr   as bf16_pure, the weights rounded stochastically (unbiased) after each update.
  fp16_noscale   fp16 compute and gradients, float32 master weights, no loss scaling: small
                 gradients flush to zero; the share flushed is recorded per step.
  fp16_dynamic   as fp16_noscale with dynamic loss scaling (DynamicLossScaler): the loss (hence
                 every gradient) is multiplied by s; the gradients are divided by s BEFORE
                 clipping; a step with an inf/NaN gradient is skipped and s halved; after
                 growth_interval clean steps s doubles.
  fp8            FP8 with per-tensor scaling: forward matmul inputs in E4M3, backward gradients
                 in E5M2, each tensor multiplied by a power of two that brings its amax near the
                 format's maximum before rounding, and divided by it after ("current" scaling: the
                 tensor's own amax, not a history of past amaxes); float32 master weights.

Legend: B batch, T time, V vocab; s the loss scale.
"""

import contextlib
import math
import time
from dataclasses import dataclass

import numpy as np

from pylib import data, evaluation, layers, loss as xent, model, optim, train
from pylib.schedules import lr_at
from pylib.systems import precision

# ---------------------------------------------------------------------------
# Recipes


@dataclass(frozen=True)
class Recipe:
    """Where a run rounds, and to what ("fp32": not rounded)."""

    forward: str = "fp32"  # matmul inputs in the forward pass (activations and weights)
    grad: str = "fp32"  # gradients entering backward matmuls, and the parameter gradients
    weights: str = "fp32"  # the stored weights and Adam moments between steps
    stochastic: bool = False  # round the stored weights stochastically (needs weights != "fp32")
    amax_scaling: bool = False  # per-tensor power-of-two scaling to the format's range (FP8)
    loss_scaling: bool = False  # dynamic loss scaling (DynamicLossScaler)
    param_grad_fp32: bool = False  # parameter gradients kept in float32 (FP8: wgrad written in high precision)


RECIPES = {
    "fp32": Recipe(),
    "bf16_master": Recipe("bf16", "bf16"),
    "bf16_pure": Recipe("bf16", "bf16", "bf16"),
    "bf16_pure_sr": Recipe("bf16", "bf16", "bf16", stochastic=True),
    "fp16_noscale": Recipe("fp16", "fp16"),
    "fp16_dynamic": Recipe("fp16", "fp16", loss_scaling=True),
    "fp8": Recipe("fp8_e4m3", "fp8_e5m2", amax_scaling=True, param_grad_fp32=True),
}
LABELS = {
    "fp32": "fp32",
    "bf16_master": "bf16 compute, fp32 master weights",
    "bf16_pure": "pure bf16 weights",
    "bf16_pure_sr": "pure bf16 weights, stochastic rounding",
    "fp16_noscale": "fp16, no loss scaling",
    "fp16_dynamic": "fp16, dynamic loss scaling",
    "fp8": "FP8 (E4M3 forward, E5M2 gradients), per-tensor scaling",
}

# PyTorch's torch.amp.GradScaler defaults are init_scale 2**16, growth_factor 2, backoff_factor 0.5,
# growth_interval 2000; a 400-step run would never grow s with 2000, so the course uses 50.
SCALER = {"init_scale": 2.0 ** 16, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 50}


def recipe(name):
    """RECIPES[name], or ValueError naming the recipes."""
    if name not in RECIPES:
        raise ValueError(f"unknown recipe {name!r}; one of {', '.join(RECIPES)}")
    return RECIPES[name]


# ---------------------------------------------------------------------------
# Dynamic loss scaling


class DynamicLossScaler:
    """Dynamic loss scaling with skip-on-inf (Micikevicius et al. 2018, abstract; torch.amp.GradScaler).

    scale() multiplies the loss's gradient by s; unscale_(grads) divides the gradients by s and
    says whether they are all finite; update(found_inf) halves s after an overflow (the step is
    skipped) and doubles it after growth_interval clean steps in a row.
    """

    def __init__(self, init_scale=SCALER["init_scale"], growth_factor=SCALER["growth_factor"],
                 backoff_factor=SCALER["backoff_factor"], growth_interval=SCALER["growth_interval"]):
        if not (init_scale > 0 and growth_factor > 1 and 0 < backoff_factor < 1 and growth_interval >= 1):
            raise ValueError("need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1")
        self.scale = float(init_scale)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.clean_steps = 0  # steps since the last overflow or growth

    def unscale_(self, grads):
        """Divide every gradient by s in place (float32 master gradients); True if all are finite."""
        inv = 1.0 / self.scale
        finite = True
        for g in grads.values():
            if finite and not np.isfinite(g).all():
                finite = False
            g *= inv
        return finite

    def update(self, found_inf):
        """After a step: halve s on overflow (the step was skipped), double it after growth_interval clean steps."""
        if found_inf:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
        else:
            self.clean_steps += 1
            if self.clean_steps == self.growth_interval:
                self.scale *= self.growth_factor
                self.clean_steps = 0

    def state_dict(self):
        """What a checkpoint keeps (chapter 15): the scale, the count of clean steps and the settings,
        as torch.amp.GradScaler.state_dict keeps its scale, growth tracker and factors."""
        return {"scale": self.scale, "clean_steps": self.clean_steps, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval}

    def load_state_dict(self, state):
        """Restore what state_dict gave (chapter 15: a resume continues with the adapted scale, not
        init_scale); ValueError, and nothing changed, for a value out of range."""
        def number(key):
            v = state.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"the loss scaler's {key} must be a finite number, not {v!r}")
            return v
        scale, growth, backoff = number("scale"), number("growth_factor"), number("backoff_factor")
        interval, clean = number("growth_interval"), number("clean_steps")
        if not (scale > 0 and growth > 1 and 0 < backoff < 1 and float(interval).is_integer() and interval >= 1):
            raise ValueError("need scale > 0, growth_factor > 1, 0 < backoff_factor < 1, a whole growth_interval >= 1")
        if not (float(clean).is_integer() and 0 <= clean < interval):
            raise ValueError(f"clean_steps must be a whole number in 0..{int(interval) - 1}, not {clean!r}")
        self.scale, self.growth_factor, self.backoff_factor = float(scale), float(growth), float(backoff)
        self.growth_interval, self.clean_steps = int(interval), int(clean)


# ---------------------------------------------------------------------------
# Rounding a tensor as the recipe says


def pow2_scale(amax, fmt):
    """The power of two that brings amax up to at most fmt's maximum: 2^floor(log2(max / amax)); 1 for 0 or non-finite amax."""
    if not (amax > 0 and math.isfinite(amax)):
        return 1.0
    return 2.0 ** math.floor(math.log2(precision.max_value(fmt) / amax))


def round_tensor(a, fmt, amax_scaling=False):
    """a rounded to fmt, as float32; with amax_scaling, scaled by pow2_scale first and unscaled after (both exact)."""
    if fmt == "fp32":
        return a
    if not amax_scaling:
        return precision.round_to(a, fmt)
    a = np.asarray(a, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        amax = float(np.max(np.abs(a))) if a.size else 0.0
    s = pow2_scale(amax, fmt)
    return precision.round_to(a * np.float32(s), fmt) * np.float32(1.0 / s)


class StepCounts:
    """Gradient elements seen and flushed to zero by the rounding during one step."""

    def __init__(self):
        self.nonzero = 0
        self.flushed = 0

    def add(self, a, r):
        nz = a != 0
        self.nonzero += int(np.count_nonzero(nz))
        self.flushed += int(np.count_nonzero(nz & (r == 0)))

    @property
    def flushed_fraction(self):
        return self.flushed / self.nonzero if self.nonzero else 0.0


@contextlib.contextmanager
def matmul_rounding(rec, counts=None):
    """Within the block, every matrix product's inputs are rounded as rec says (pylib.layers.MATMUL_INPUT)."""
    if rec.forward == "fp32" and rec.grad == "fp32":
        yield
        return

    def hook(a, role):
        fmt = rec.grad if role == "grad" else rec.forward
        r = round_tensor(a, fmt, rec.amax_scaling)
        if counts is not None and role == "grad" and fmt != "fp32":
            counts.add(a, r)
        return r

    old = layers.MATMUL_INPUT
    layers.MATMUL_INPUT = hook
    try:
        yield
    finally:
        layers.MATMUL_INPUT = old


# ---------------------------------------------------------------------------
# One step


def loss_and_grads(params, cfg, x, y, rec, loss_scale=1.0, counts=None):
    """The batch loss (float32 arithmetic) and the parameter gradients of loss * loss_scale, rounded as rec says."""
    with matmul_rounding(rec, counts):
        logits, cache = model.forward(params, cfg, x)
        loss, c_loss = xent.cross_entropy_forward(logits, y)
        dlogits = xent.cross_entropy_backward(c_loss)
        if loss_scale != 1.0:
            dlogits *= np.float32(loss_scale)  # the loss multiplied by s: every gradient is s times larger
        grads = model.backward(dlogits, cache)
    if rec.grad != "fp32" and not rec.param_grad_fp32:
        for name, g in grads.items():
            r = precision.round_to(g, rec.grad)
            if counts is not None:
                counts.add(g, r)
            grads[name] = r
    return loss, grads


def init_state(cfg, tcfg, rec_name):
    """pylib.train's state (same params, same batch stream) plus the recipe, its scaler and its rng."""
    rec = recipe(rec_name)
    if tcfg.optimizer != "adamw" or tcfg.grad_accum != 1 or tcfg.z_loss or cfg.mup_base_width:
        raise ValueError("the precision recipes run AdamW with one microbatch, no z-loss, standard parameterisation")
    state = train.init_train_state(cfg, tcfg)
    state["recipe"] = rec_name
    state["scaler"] = DynamicLossScaler() if rec.loss_scaling else None
    state["round_rng"] = np.random.default_rng([tcfg.seed, 9])  # stochastic rounding: its own stream
    if rec.weights != "fp32":
        _store(state, rec, stochastic=False)  # the model is loaded in bf16 (nearest)
    return state


def resume_state(state, rec_name):
    """A recipe's state from a train state that pylib.checkpoint.load_checkpoint returned: the
    recipe, its loss scaler restored from the checkpoint (load_state_dict; a fresh scaler would
    start again at init_scale), and the rounding stream the checkpoint kept. The weights and Adam
    moments were saved already rounded, so they are not rounded again."""
    rec = recipe(rec_name)
    saved = state.pop("loss_scaler", None)
    if rec.loss_scaling and saved is None:
        raise ValueError(f"the checkpoint has no loss scaler, which recipe {rec_name!r} needs")
    if not rec.loss_scaling and saved is not None:
        raise ValueError(f"the checkpoint has a loss scaler, which recipe {rec_name!r} does not use")
    state["recipe"] = rec_name
    state["scaler"] = None
    if rec.loss_scaling:
        state["scaler"] = DynamicLossScaler()
        state["scaler"].load_state_dict(saved)
    if "round_rng" not in state:
        raise ValueError("the checkpoint has no rounding stream (round_rng): it was not saved from a recipe's state")
    return state


def _store(state, rec, stochastic):
    """Round the weights (and the Adam moments) to rec.weights, in place in their flat buffers."""
    flat = optim.flat_buffer(state["params"])
    if stochastic:
        flat[...] = precision.round_stochastic(flat, rec.weights, state["round_rng"])
    else:
        flat[...] = precision.round_to(flat, rec.weights)
    for k in ("m", "v"):
        state["opt"][k][...] = precision.round_to(state["opt"][k], rec.weights)


def recipe_steps(state, cfg, tcfg, train_tokens, val_tokens, n_steps, on_step=None):
    """Up to n_steps more steps of state's recipe; returns their records.

    A record has pylib.train's step, loss, lr, grad_norm (after unscaling), tokens_per_s, val at
    eval steps (the fixed subset, float32 evaluation of the stored weights) and val_full at the
    last step with final_eval; and, for rounded recipes, flushed (the share of non-zero gradient
    elements that rounding made zero); with weights stored in 16 bits, lost (the share of the
    weights the float32 update moved that rounding put back: updates lost); with loss scaling,
    scale (s used by the step) and skipped (an overflow: no update).
    """
    rec = recipe(state["recipe"])
    scaler = state["scaler"]
    limit = train.divergence_threshold(cfg.vocab_size)
    records = []
    for _ in range(n_steps):
        if state["diverged"] or state["step"] >= tcfg.steps:
            break
        step = state["step"]
        last = step == tcfg.steps - 1
        record = {"step": step}
        if step % tcfg.eval_interval == 0 and not last:
            record["val"] = _val(state["params"], cfg, tcfg, val_tokens)
        t0 = time.perf_counter()
        lr = lr_at(tcfg.schedule, step, tcfg.lr, tcfg.warmup_steps, tcfg.steps, tcfg.min_lr, tcfg.decay_frac)
        x, y = data.get_batch(train_tokens, tcfg.batch_size, cfg.block_size, state["batch_rng"])
        counts = StepCounts() if rec.grad != "fp32" else None
        s = scaler.scale if scaler else 1.0
        with np.errstate(all="ignore"):
            loss, grads = loss_and_grads(state["params"], cfg, x, y, rec, s, counts)
            found_inf = False
            if scaler:
                record["scale"] = s
                found_inf = not scaler.unscale_(grads)  # unscale BEFORE clipping: the clip sees true norms
            grad_norm = optim.clip_grad_norm(grads, tcfg.grad_clip) if not found_inf else math.inf
        record.update(loss=train._finite_or_none(loss), lr=float(lr),
                      grad_norm=None if found_inf else train._finite_or_none(grad_norm))
        if counts is not None:
            record["flushed"] = counts.flushed_fraction
        if scaler:
            scaler.update(found_inf)
        if found_inf:
            record["skipped"] = True  # an overflow in the scaled gradients: no update, s halved
        elif not (math.isfinite(loss) and math.isfinite(grad_norm)) or loss > limit:
            record["diverged"] = True
            state["diverged"] = True
            records.append(record)
            if on_step:
                on_step(record)
            break
        else:
            if tcfg.grad_clip > 0 and grad_norm > tcfg.grad_clip:
                record["clipped"] = True
            flat = optim.flat_buffer(state["params"])
            before = flat.copy() if rec.weights != "fp32" else None
            optim.adamw_step(state["params"], grads, state["opt"], lr, tcfg.beta1, tcfg.beta2, tcfg.eps,
                             tcfg.weight_decay, state["groups"])
            if rec.weights != "fp32":
                moved = flat != before  # the float32 update changed these weights...
                _store(state, rec, rec.stochastic)
                record["lost"] = float(np.count_nonzero(moved & (flat == before))) / max(int(np.count_nonzero(moved)), 1)
                # ...and rounding the stored weight put these back where they were: the update is lost
        record["tokens_per_s"] = tcfg.batch_size * cfg.block_size / max(time.perf_counter() - t0, 1e-9)
        state["step"] += 1
        if last:
            record["val"] = _val(state["params"], cfg, tcfg, val_tokens)
            if tcfg.final_eval:
                record["val_full"] = train._finite_or_none(evaluation.full_loss(state["params"], cfg, val_tokens))
        records.append(record)
        if on_step:
            on_step(record)
    return records


def _val(params, cfg, tcfg, val_tokens):
    with np.errstate(all="ignore"):
        return train._finite_or_none(train.estimate_loss(params, cfg, val_tokens, tcfg.eval_windows))


def train_recipe(cfg, tcfg, train_tokens, val_tokens, rec_name, on_step=None):
    """A whole run in one recipe: (params, history)."""
    state = init_state(cfg, tcfg, rec_name)
    history = recipe_steps(state, cfg, tcfg, train_tokens, val_tokens, tcfg.steps, on_step)
    return state["params"], history


# ---------------------------------------------------------------------------
# The one-condition comparison (one step on a fixed batch, fp32 against a recipe)


def rel_error(a, b):
    """||a - b|| / ||b||, over every element (float64)."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    nb = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / nb) if nb else float(np.linalg.norm(a))


def one_step_comparison(cfg, tcfg, x, y, rec_name="bf16_master"):
    """Forward, backward and one AdamW update on the fixed batch (x, y) from the same weights, in
    fp32 and in rec_name. Returns the relative errors of the logits, the loss, each gradient and
    the update, and the share of update elements whose sign differs."""
    rec = recipe(rec_name)
    out = {}
    runs = {}
    for name, r in (("fp32", RECIPES["fp32"]), (rec_name, rec)):
        state = init_state(cfg, tcfg, "fp32")
        params = state["params"]
        with matmul_rounding(r):
            logits = model.forward(params, cfg, x)[0]
        loss, grads = loss_and_grads(params, cfg, x, y, r)
        g_raw = {k: v.copy() for k, v in grads.items()}
        before = optim.flat_buffer(params).copy()
        lr = lr_at(tcfg.schedule, 0, tcfg.lr, tcfg.warmup_steps, tcfg.steps, tcfg.min_lr, tcfg.decay_frac)
        optim.clip_grad_norm(grads, tcfg.grad_clip)
        optim.adamw_step(params, grads, state["opt"], lr, tcfg.beta1, tcfg.beta2, tcfg.eps, tcfg.weight_decay,
                         state["groups"])
        runs[name] = {"logits": logits, "loss": loss, "grads": g_raw, "update": optim.flat_buffer(params) - before}
    a, b = runs[rec_name], runs["fp32"]
    out["logits_rel"] = rel_error(a["logits"], b["logits"])
    out["logits_max_abs"] = float(np.max(np.abs(a["logits"] - b["logits"])))
    out["loss_abs"] = abs(a["loss"] - b["loss"])
    out["grads_rel"] = {k: rel_error(a["grads"][k], b["grads"][k]) for k in b["grads"]}
    out["grads_rel_all"] = rel_error(np.concatenate([g.ravel() for g in a["grads"].values()]),
                                     np.concatenate([g.ravel() for g in b["grads"].values()]))
    out["update_rel"] = rel_error(a["update"], b["update"])
    out["update_sign_differs"] = float(np.mean(np.sign(a["update"]) != np.sign(b["update"])))
    # An element's gradient sign is resolved when its fp32 magnitude exceeds the rounding's change
    # of it; Adam's first step is lr * g / (|g| + eps), about lr * sign(g), so only unresolved
    # elements can flip their update.
    g32 = np.concatenate([g.ravel() for g in b["grads"].values()]).astype(np.float64)
    g16 = np.concatenate([g.ravel() for g in a["grads"].values()]).astype(np.float64)
    out["unresolved_fraction"] = float(np.mean(np.abs(g32) <= np.abs(g16 - g32)))
    u = precision.spacing_at_one(rec.forward) / 2  # the unit roundoff: the largest relative error of one rounding
    out["unit_roundoff"] = u
    depth = matmuls_on_path(cfg)
    out["matmuls_on_path"] = depth
    out["tolerance_logits"] = 2 * u * depth  # a product of two rounded inputs: <= 2u, once per matmul on the path
    out["tolerance_grads"] = 2 * u * 2 * depth  # the backward path crosses as many matmuls again, with rounded gradients
    return out


def matmuls_on_path(cfg):
    """Matrix products on the longest forward path: per block qkv, q.k, att.v, attention proj, fc, mlp proj; then the head."""
    return 6 * cfg.n_layer + 1
