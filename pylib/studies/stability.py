"""Training stability: attention statistics, a corrupted batch, per-layer gradient and weight
norms, dead MLP units, and where NaN comes from (each source next to its guard).

- Attention-logit growth (Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion
  Parameters"; reproduced at small scale by Wortsman et al. 2023, "Small-scale proxies for
  large-scale Transformer training instabilities", section 3.1.1): the largest attention logit
  |q.k| * scale and the mean attention entropy per layer, read from the forward cache; and the
  output's log normaliser log Z (what z-loss acts on), signed and in absolute value.
- One bad batch: a batch whose every input and target is one repeated token id, swapped in at
  chosen steps through a batch hook (pylib.guards.hook_batches); per-layer gradient norms
  through a gradient hook (pylib.guards.hook_grads).
- Diagnostics of a run's state: the weight norm of each layer group, and the MLP units that
  never fire (pre-activation never above 0) on a set of windows.
- NaN sources: log(0), exp overflow, a fully masked softmax row; each as the naive formula and
  as the guarded one.

Legend: B batch, T time, H heads, D head size, L layers, V vocab.
"""

import dataclasses
import math

import numpy as np

from pylib import layers, model, train

# ---------------------------------------------------------------------------
# The chapter's two training settings (measured by experiments/ch8.py, re-run live by the page)

ATTN = {  # attention-logit growth: a 2-layer model at 10x the default peak lr (0.01), held constant
    "preset": "decoder-2x32", "lr": 0.1, "warmup_steps": 10, "steps": 150, "batch_size": 8,
    "stats_interval": 10, "stats_windows": 8, "z_loss": 1e-4,  # PaLM's coefficient
}
BAD = {  # one bad batch: the default model and settings, shorter; a bad stretch of `repeats` steps
    "steps": 300, "inject_step": 150, "repeats": 3, "token": " ", "clip": 1.0, "skip_factor": 4.0,
    "lr_spike": 1.5,  # 150x the default peak lr (0.01), no bad batch: the optimisation-driven spike
}
DIAG_WINDOWS = 32  # fixed validation windows on which dead units are counted (2,048 tokens at T = 64)
RECOVERY = {"tolerance": 0.05, "window": 10, "tail": 50}  # spike_report's defaults: nats, steps, steps
PRE_SPIKE_STEPS = 10  # the steps "just before" a divergence whose gradient norms are reported
NORM_WINDOW = 20  # grad_norm_ratio compares a step's norm with the median of this many steps before it
CURES = ("none", "clip", "skip")


def attn_configs(vocab_size, qk_norm=False, z_loss=0.0, seed=0, lr=None):
    """(GPTConfig, TrainConfig) of the attention-growth runs."""
    mcfg = dataclasses.replace(model.GPTConfig.preset(ATTN["preset"]), vocab_size=vocab_size, qk_norm=qk_norm)
    tcfg = train.TrainConfig(lr=ATTN["lr"] if lr is None else lr, schedule="constant",
                             warmup_steps=ATTN["warmup_steps"], steps=ATTN["steps"],
                             batch_size=ATTN["batch_size"], z_loss=z_loss, seed=seed,
                             eval_interval=10**6, eval_windows=32)  # evals at step 0 and at the end
    return mcfg, tcfg


def bad_configs(vocab_size, cure="none", seed=0, lr=None, clip=None, skip_factor=None):
    """(GPTConfig, TrainConfig) of the bad-batch runs; cure is one of CURES."""
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=vocab_size)
    cure_kw = {"none": {"grad_clip": 0.0},
               "clip": {"grad_clip": BAD["clip"] if clip is None else clip},
               "skip": {"grad_clip": 0.0, "skip_factor": BAD["skip_factor"] if skip_factor is None else skip_factor}}[cure]
    tcfg = dataclasses.replace(train.TrainConfig(), steps=BAD["steps"], eval_interval=10**6, eval_windows=32,
                               seed=seed, **cure_kw, **({} if lr is None else {"lr": lr}))
    return mcfg, tcfg

# ---------------------------------------------------------------------------
# Attention statistics from the forward cache


def attention_logits(c_att):
    """The causal attention logits (B, H, T, T) of one layer from its cache; -inf above the diagonal."""
    q_scaled, k = c_att[0], c_att[1]  # (B, H, T, D) each; q already carries the scale
    scores = q_scaled @ k.swapaxes(-1, -2)  # (B, H, T, T)
    return scores + layers.causal_mask(scores.shape[-1], scores.dtype)


def attention_stats(params, cfg, x):
    """Per layer: the largest |attention logit| and the mean attention entropy (nats) on ids x (B, T)."""
    logits, cache = model.forward(params, cfg, x)
    max_logit, entropy = [], []
    for c_ln1, c_attn, c_ln2, c_mlp in cache[3]:
        c_att = c_attn[2]
        scores = attention_logits(c_att)  # (B, H, T, T)
        visible = np.isfinite(scores)
        max_logit.append(float(np.abs(np.where(visible, scores, 0.0)).max()))
        probs = c_att[3]  # (B, H, T, T), 0 where masked
        with np.errstate(divide="ignore", invalid="ignore"):
            plogp = np.where(probs > 0, probs * np.log(probs), 0.0)
        entropy.append(float(-plogp.sum(axis=-1).mean()))  # mean over batch, heads and query positions
    return {"max_logit": max_logit, "entropy": entropy, "log_z": output_log_z(logits),
            "log_z_signed": float(log_normaliser(logits).mean())}


def log_normaliser(logits):
    """log Z = log sum_v exp(logit_v) of every position's output softmax, (N,) float64."""
    z = logits.reshape(-1, logits.shape[-1]).astype(np.float64)  # (N, V)
    zmax = z.max(axis=1)
    return zmax + np.log(np.exp(z - zmax[:, None]).sum(axis=1))  # (N,)


def output_log_z(logits):
    """Mean |log Z| of the output softmax, Z = sum_v exp(logit_v): what z-loss pulls towards 0."""
    return float(np.abs(log_normaliser(logits)).mean())


def uniform_attention_entropy(T):
    """Mean entropy (nats) of causal attention spread evenly: position t sees t + 1 keys, ln(t + 1)."""
    return float(np.mean(np.log(np.arange(1, T + 1))))


# ---------------------------------------------------------------------------
# Gradient norms per layer, and a corrupted batch


def layer_of(name):
    """The group a parameter belongs to: "embeddings", "block 0 attention" (with its norm),
    "block 0 MLP" (with its norm), ..., or "final norm"."""
    if name in ("wte", "wpe"):
        return "embeddings"
    if name.startswith("h."):
        part = "attention" if (".attn." in name or ".ln_1." in name) else "MLP"
        return f"block {name.split('.')[1]} {part}"
    return "final norm"


def layer_names(cfg):
    """The groups of layer_of, in the model's order from input to output."""
    blocks = [f"block {l} {part}" for l in range(cfg.n_layer) for part in ("attention", "MLP")]
    return ["embeddings"] + blocks + ["final norm"]


def group_key(group):
    """A layer_names group as a results key: "block 0 attention" -> "block0_attention"."""
    return group.replace("block ", "block").replace(" ", "_").lower()


def _group_norms(tensors, cfg):
    """The L2 norm of each group of layer_names over a {parameter name: array} dict (float64 sums)."""
    sq = {name: 0.0 for name in layer_names(cfg)}
    for name, g in tensors.items():
        flat = g.ravel().astype(np.float64)
        sq[layer_of(name)] += float(np.dot(flat, flat))
    return [math.sqrt(sq[name]) for name in layer_names(cfg)]


def layer_grad_norms(grads, cfg):
    """The L2 norm of the gradient of each group of layer_names (float64 sums)."""
    return _group_norms(grads, cfg)


def layer_weight_norms(params, cfg):
    """The L2 norm of the weights of each group of layer_names (float64 sums), norm gains included.

    A group's norm growing step after step (at a constant loss) is the slow sign of a learning
    rate too high for it: attention weights growing is what drives attention-logit growth."""
    return _group_norms(params, cfg)


def mlp_preactivations(params, cfg, x):
    """Each block's MLP pre-activations (the input of its GELU), (N, 4C) per layer, on ids x (B, T)."""
    _, cache = model.forward(params, cfg, x)
    return [c_mlp[1][0].reshape(-1, c_mlp[1][0].shape[-1]) for _, _, _, c_mlp in cache[3]]


def dead_units(params, cfg, x):
    """Per layer, the fraction of MLP hidden units that never fire on ids x: pre-activation <= 0 at
    every one of the B*T positions.

    With ReLU such a unit outputs 0 and gets no gradient, and can stay dead for good. With GELU (the
    model's) it still outputs a small negative value and passes a small gradient, so "never fires"
    is the warning sign rather than a sentence: a large and growing fraction means capacity lost."""
    return [float((pre.max(axis=0) <= 0.0).mean()) for pre in mlp_preactivations(params, cfg, x)]


def grad_norm_hook(cfg):
    """A gradient hook (pylib.guards.hook_grads) recording each step's per-layer gradient norms (before clipping)."""
    def hook(record, grads):
        record["layer_grad_norms"] = layer_grad_norms(grads, cfg)
    return hook


def repeated_token_batch(x, y, token_id):
    """The corruption used here: every input and every target of the batch is token_id (B, T).

    The model is told, at every position of every window, that one character follows itself
    forever; nothing in the real text looks like that, so the loss and the gradient are large
    and all point the same way."""
    return np.full_like(x, token_id), np.full_like(y, token_id)


def bad_batch_hook(steps, token_id):
    """A batch hook (pylib.guards.hook_batches) that corrupts the batch at each step in steps (a set, shared: the
    page adds to it when the reader presses "Inject now"). The clean batch is still drawn, so the
    batch stream after the bad steps is the same as without them."""
    def hook(step, x, y):
        return repeated_token_batch(x, y, token_id) if step in steps else (x, y)
    return hook


# ---------------------------------------------------------------------------
# Spike diagnosis


def spike_report(history, ref_history, inject_step, tolerance=RECOVERY["tolerance"], window=RECOVERY["window"],
                 tail=RECOVERY["tail"]):
    """How a run with a bad batch at inject_step differs from the same run without it.

    Both histories are pylib.train records of the same seed, so every clean batch is identical
    and the loss difference is the bad batch's doing. Returns the spike height (largest loss
    excess on the clean steps after the bad one) and its step; the recovery, in steps after the
    bad one, until the excess averaged over the next `window` steps is below tolerance (None if
    that never happens in the run; 0 if the spike never exceeds tolerance); the lasting excess, the
    mean excess over the run's last `tail` steps; the grad norm and lr at the bad step; and the
    fractions of clipped and skipped steps.
    """
    by_step = {r["step"]: r for r in ref_history}
    excess = []  # (step, loss - clean loss) after the bad step
    for r in history:
        if r["step"] <= inject_step or r["step"] not in by_step:
            continue
        a, b = r.get("loss"), by_step[r["step"]].get("loss")
        excess.append((r["step"], math.inf if a is None or b is None else a - b))
    height, peak = max(((d, s) for s, d in excess), default=(0.0, None))
    diffs = [d for _, d in excess]
    recovery = 0 if height <= tolerance else None  # no spike above tolerance: nothing to recover from
    for i, (s, _) in enumerate(excess):
        if recovery is None and s >= peak and i + window <= len(excess) and np.mean(diffs[i:i + window]) < tolerance:
            recovery = s - inject_step
            break
    bad = next((r for r in history if r["step"] == inject_step), {})
    n = max(len(history), 1)
    return {
        "height": float(height),
        "peak_step": peak,
        "recovery_steps": recovery,
        "lasting_excess": float(np.mean(diffs[-tail:])) if diffs else 0.0,
        "grad_norm": bad.get("grad_norm"),
        "lr": bad.get("lr"),
        "clipped_fraction": sum(1 for r in history if r.get("clipped")) / n,
        "skipped_fraction": sum(1 for r in history if r.get("skipped")) / n,
        "skipped_bad": bool(bad.get("skipped")),
        "diverged_at": next((r["step"] for r in history if r.get("diverged")), None),
    }


def grad_norm_ratio(history, step, window=NORM_WINDOW):
    """A step's gradient norm over the median of the window steps before it (None if unknown)."""
    before = [r["grad_norm"] for r in history if step - window <= r["step"] < step and r.get("grad_norm")]
    now = next((r.get("grad_norm") for r in history if r["step"] == step), None)
    if not before or now is None:
        return None
    return now / float(np.median(before))


# ---------------------------------------------------------------------------
# Where NaN comes from: each source, naive and guarded (float32, as the model computes)


def naive_cross_entropy(logits, target):
    """-log(softmax(logits)[target]) as written: exp, divide, log. Underflows to log(0) = -inf."""
    z = np.asarray(logits, dtype=np.float32)
    with np.errstate(all="ignore"):
        p = np.exp(z) / np.exp(z).sum()
        return float(-np.log(p[target]))


def guarded_cross_entropy(logits, target):
    """The same loss by log-sum-exp, as pylib.loss.cross_entropy_forward computes it."""
    from pylib import loss
    z = np.asarray(logits, dtype=np.float32)
    return float(loss.cross_entropy_forward(z[None, :], np.array([target]))[0])


def naive_cross_entropy_grad(logits, target):
    """d loss / d logits by the chain rule through log p: (-1/p_target) * dp_target/dz. With
    p_target underflowed to 0 it is -inf * 0 = NaN; p - onehot (pylib.loss) has no division."""
    z = np.asarray(logits, dtype=np.float32)
    with np.errstate(all="ignore"):
        p = np.exp(z) / np.exp(z).sum()
        onehot = np.zeros_like(p)
        onehot[target] = 1.0
        return (-1.0 / p[target]) * (p[target] * (onehot - p))


def guarded_cross_entropy_grad(logits, target):
    """p - onehot(target), as pylib.loss.cross_entropy_backward computes it (one position)."""
    from pylib import loss
    z = np.asarray(logits, dtype=np.float32)
    return loss.cross_entropy_backward(loss.cross_entropy_forward(z[None, :], np.array([target]))[1])[0]


def naive_softmax(scores):
    """exp(s) / sum exp(s) as written: exp overflows to inf above ~88 in float32, and inf / inf = NaN."""
    s = np.asarray(scores, dtype=np.float32)
    with np.errstate(all="ignore"):
        e = np.exp(s)
        return e / e.sum(axis=-1, keepdims=True)


def shifted_softmax(scores):
    """Softmax after subtracting each row's max: the largest exponent is exp(0) = 1, so no overflow."""
    s = np.asarray(scores, dtype=np.float32)
    with np.errstate(all="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def masked_softmax(scores, mask):
    """The max-shifted softmax of scores where mask is True, -inf elsewhere. A row with nothing
    visible is all -inf: its max is -inf, -inf - (-inf) = NaN, and the whole row is NaN."""
    s = np.where(mask, np.asarray(scores, dtype=np.float32), np.float32(-np.inf))
    return shifted_softmax(s)


def safe_masked_softmax(scores, mask):
    """masked_softmax, except that a row with nothing visible gives zeros instead of NaN (and a
    zero gradient): the row attends to nothing. Other rows are unchanged."""
    s = np.where(mask, np.asarray(scores, dtype=np.float32), np.float32(-np.inf))
    empty = ~np.asarray(mask).any(axis=-1, keepdims=True)  # (..., 1)
    shift = np.where(empty, np.float32(0.0), s.max(axis=-1, keepdims=True))  # a finite shift everywhere
    e = np.exp(s - shift)  # exp(-inf) = 0: an empty row is all zeros
    sums = e.sum(axis=-1, keepdims=True)
    return e / np.where(empty, np.float32(1.0), sums)
