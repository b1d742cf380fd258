"""Multi-token prediction: one extra head that predicts token t+2 from position t's final state.

After Gloeckle et al. 2024 ("Better & Faster Large Language Models via Multi-token Prediction":
extra output heads on a shared trunk, losses summed) and DeepSeek-V3's MTP module (2024, sec.
2.2: an extra prediction depth whose loss is added with a weight lambda, dropped at inference or
used for speculative decoding). Scaled down to one extra head:

    f      = the final LayerNorm's output at position t (what the main head unembeds)
    g      = f W^T + b                  a C x C projection, the head's own (mtp.c_proj)
    u      = LayerNorm(g)               its own gain and shift (mtp.ln), so logits keep their scale
    logits = u wte^T                    the tied unembedding, shared with the main head

Its parameter cost is C^2 + C + 2C (see count_mtp_params). The loss is
main + lambda * mtp, the trunk gets gradient from both heads, and wte from three uses.

Targets never cross a document boundary. Documents are packed with EOS after each one, and an EOS
belongs to the document it ends. The t+2 target is counted only if tokens t and t+2 are in the same
document, that is, unless token t or token t+1 is an EOS; and position T-1's target, token T+1,
lies outside the window, so it is not counted either (the windows are exactly pylib.train's).

Legend: B batch, T time, C n_embd, V vocab, N = B*T.
"""

import math

import numpy as np

from pylib import layers, loss as xent, model, optim
from pylib.schedules import warmup_cosine_lr

# ---------------------------------------------------------------------------
# Targets


def mtp_targets(x, y, eos_id):
    """x, y (B, T) from a window (y = x shifted by one) -> t+2 targets y2 (B, T) and mask (B, T)."""
    y2 = np.zeros_like(y)
    y2[:, :-1] = y[:, 1:]  # token t+2 is the next position's next token
    mask = np.ones(y.shape, dtype=np.float32)
    mask[:, -1] = 0.0  # token T+1 is not in the window
    mask[(x == eos_id) | (y == eos_id)] = 0.0  # an EOS at t or t+1: t+2 is in another document
    return y2, mask


# ---------------------------------------------------------------------------
# Parameters


def mtp_param_shapes(cfg):
    """The extra head's parameters: a C x C projection with bias and a LayerNorm."""
    C = cfg.n_embd
    return {"mtp.c_proj.weight": (C, C), "mtp.c_proj.bias": (C,), "mtp.ln.weight": (C,), "mtp.ln.bias": (C,)}


def count_mtp_params(cfg):
    """Parameters the extra head adds (the unembedding is shared, so it adds none)."""
    return sum(math.prod(s) for s in mtp_param_shapes(cfg).values())


def init_params(cfg, seed, dtype=np.float32):
    """The trunk exactly as pylib.model.init_params(cfg, seed), plus the head from its own stream."""
    trunk = model.init_params(cfg, seed, dtype)
    rng = np.random.default_rng([seed, 2])  # a separate stream: the trunk's init does not move
    C = cfg.n_embd
    head = {"mtp.c_proj.weight": rng.normal(0.0, 0.02, size=(C, C)), "mtp.c_proj.bias": np.zeros(C),
            "mtp.ln.weight": np.ones(C), "mtp.ln.bias": np.zeros(C)}
    return model.pack_params({**trunk, **{k: v.astype(dtype) for k, v in head.items()}}, dtype)


# ---------------------------------------------------------------------------
# Forward and backward of the head


def head_forward(params, cfg, f):
    """f (N, C), the final LayerNorm's output -> (logits (N, V) for token t+2, cache)."""
    p = params
    g, c_proj = layers.linear_forward(f, p["mtp.c_proj.weight"], p["mtp.c_proj.bias"])  # (N, C)
    u, c_ln = layers.layernorm_forward(g, p["mtp.ln.weight"], p["mtp.ln.bias"], cfg.ln_eps)  # (N, C)
    logits, c_head = layers.linear_forward(u, p["wte"], None)  # (N, V), tied
    return logits, (c_proj, c_ln, c_head)


def head_backward(dlogits, cache):
    """dlogits (N, V) -> (df (N, C), grads of the head's params, dwte (V, C))."""
    c_proj, c_ln, c_head = cache
    du, dwte, _ = layers.linear_backward(dlogits, c_head)
    dg, dlw, dlb = layers.layernorm_backward(du, c_ln)
    df, dw, db = layers.linear_backward(dg, c_proj)
    grads = {"mtp.c_proj.weight": dw, "mtp.c_proj.bias": db, "mtp.ln.weight": dlw, "mtp.ln.bias": dlb}
    return df, grads, dwte


def loss_and_grads(params, cfg, x, y, eos_id, lam):
    """(main + lam * mtp loss, main loss, mtp loss, grads of the total for every param)."""
    logits, cache = model.forward(params, cfg, x)  # (B, T, V)
    main, c_main = xent.cross_entropy_forward(logits, y)
    f = cache[5][0]  # (N, C): the input of the tied head, i.e. the final LayerNorm's output
    logits2, c_mtp = head_forward(params, cfg, f)
    y2, mask2 = mtp_targets(x, y, eos_id)
    n2 = xent.count_targets(y2, mask2)
    if n2:
        extra, c_loss2 = xent.cross_entropy_forward(logits2, y2, mask2)
        dlogits2 = lam * xent.cross_entropy_backward(c_loss2)  # (N, V)
    else:  # no t+2 target in this batch: the head gets no loss and no gradient
        extra, dlogits2 = 0.0, np.zeros_like(logits2)
    df, head_grads, dwte2 = head_backward(dlogits2, c_mtp)
    grads = model.backward(xent.cross_entropy_backward(c_main), cache, df_extra=df)
    grads["wte"] = grads["wte"] + dwte2  # the unembedding is used by both heads
    grads.update(head_grads)
    return main + lam * extra, main, extra, {k: grads[k] for k in params}


# ---------------------------------------------------------------------------
# Training with the extra head


def train(model_cfg, train_cfg, lam, train_tokens, val_tokens, eos_id):
    """pylib.train's loop (same windows, schedule, clipping, AdamW, evals), on main + lam * mtp.

    Returns (params, history); records: step, loss (main head), mtp_loss, lr, grad_norm, and
    train_eval/val (the main head only) at pylib.train's eval steps; with train_cfg.final_eval the
    last record also has val_full, the main head's loss on the whole validation split
    (pylib.evaluation), as pylib.train does. Gradient accumulation and divergence handling are
    left out: a non-finite loss raises.
    """
    from pylib import evaluation
    from pylib.data import get_batch
    from pylib.train import estimate_loss

    tc = train_cfg
    if tc.grad_accum != 1 or tc.optimizer != "adamw":
        raise ValueError("mtp.train supports grad_accum=1 and adamw only")
    params = init_params(model_cfg, tc.seed)
    opt, groups = optim.adamw_init(params), optim.param_groups(params)
    rng = np.random.default_rng([tc.seed, 1])  # pylib.train's batch stream
    history = []

    def evaluate():
        return {"train_eval": estimate_loss(params, model_cfg, train_tokens, tc.eval_windows),
                "val": estimate_loss(params, model_cfg, val_tokens, tc.eval_windows)}

    for step in range(tc.steps):
        last = step == tc.steps - 1
        record = {"step": step}
        if step % tc.eval_interval == 0 and not last:
            record.update(evaluate())
        lr = warmup_cosine_lr(step, tc.lr, tc.warmup_steps, tc.steps, tc.min_lr)
        x, y = get_batch(train_tokens, tc.batch_size, model_cfg.block_size, rng)
        _, main, extra, grads = loss_and_grads(params, model_cfg, x, y, eos_id, lam)
        if not (math.isfinite(main) and math.isfinite(extra)):
            raise FloatingPointError(f"non-finite loss at step {step}")
        grad_norm = optim.clip_grad_norm(grads, tc.grad_clip)
        optim.adamw_step(params, grads, opt, lr, tc.beta1, tc.beta2, tc.eps, tc.weight_decay, groups)
        record.update(loss=float(main), mtp_loss=float(extra), lr=float(lr), grad_norm=float(grad_norm))
        if last:
            record.update(evaluate())
            if tc.final_eval:  # the main head only: the extra head's parameters are not used
                record["val_full"] = float(evaluation.full_loss(params, model_cfg, val_tokens))
        history.append(record)
    return params, history
