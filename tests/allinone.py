"""The all-in-one core as it was before chapter-level layering (commit b1f78d9), frozen as a test
oracle: tests/test_layering.py checks that each layered feature computes the same bits.

Only what the layering changed is kept here: AdamW with L2, muP multipliers and mup's decay rule
as flags; cross-entropy with z-loss inside; the forward with document masks and position resets;
and the training loop with its hooks, skipping, schedules and optimisers. Do not edit it to make
a test pass: it is the old behaviour.
"""

import math
import time

import numpy as np

from pylib import evaluation, layers, model, optim
from pylib.schedules import lr_at


def adamw_step(params, grads, state, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, groups=None,
               lr_mult=None, decoupled=True, mult_decay=True):
    groups = groups or optim.param_groups(params)
    flat = optim.flat_buffer(params)
    p = flat if flat is not None else np.concatenate([v.ravel() for v in params.values()])
    g = np.concatenate([grads[n].ravel() for n in params])
    m, v = state["m"], state["v"]
    state["t"] += 1
    t = state["t"]
    bc1 = 1.0 - beta1**t
    bc2 = 1.0 - beta2**t
    mult = None if lr_mult is None else flat_multipliers(params, lr_mult, state)
    if weight_decay and decoupled:
        shrink = (lr * weight_decay) * optim.decay_mask(params, groups, state)
        p *= 1.0 - (shrink if mult is None or not mult_decay else shrink * mult)
    elif weight_decay:
        g += weight_decay * optim.decay_mask(params, groups, state) * p
    m *= beta1
    m += (1.0 - beta1) * g
    v *= beta2
    v += (1.0 - beta2) * (g * g)
    denom = np.sqrt(v)
    denom *= 1.0 / math.sqrt(bc2)
    denom += eps
    step = m / denom
    step *= lr / bc1
    if mult is not None:
        step *= mult
    p -= step
    if flat is None:
        offset = 0
        for value in params.values():
            value[...] = p[offset:offset + value.size].reshape(value.shape)
            offset += value.size


def flat_multipliers(params, lr_mult, state):
    key = tuple(float(lr_mult[n]) for n in params)
    if state.get("mult_key") != key:
        dtype = state["m"].dtype
        state["mult"] = np.concatenate([np.full(p.size, lr_mult[n], dtype=dtype) for n, p in params.items()])
        state["mult_key"] = key
    return state["mult"]


def sgd_step(params, grads, state, lr, momentum=0.0, weight_decay=0.0, groups=None, lr_mult=None):
    decay = set((groups or optim.param_groups(params))["decay"]) if weight_decay else set()
    state["t"] += 1
    for n, p in params.items():
        g = grads[n] + weight_decay * p if n in decay else grads[n]
        if momentum:
            buf = state["buf"][n]
            buf *= momentum
            buf += g
            g = buf
        p -= (lr if lr_mult is None else lr * lr_mult[n]) * g


def cross_entropy_forward(logits, targets, mask=None, denom=None, z_loss=0.0):
    V = logits.shape[-1]
    z = logits.reshape(-1, V)
    t = targets.reshape(-1)
    rows = np.arange(t.size)
    zmax = z.max(axis=1, keepdims=True)
    z = z - zmax
    z_target = z[rows, t]
    probs = np.exp(z, out=z)
    s = probs @ np.ones(V, dtype=probs.dtype)
    nll = np.log(s) - z_target
    weights = None if mask is None else np.asarray(mask).reshape(-1).astype(logits.dtype)
    if denom is None:
        denom = int(np.size(t)) if mask is None else int(np.count_nonzero(mask))
    loss_sum = nll.sum() if weights is None else (nll * weights).sum()
    probs *= (1.0 / s)[:, None]
    lse = None
    if z_loss:
        lse = np.log(s) + zmax[:, 0]
        zl = lse * lse
        loss_sum = loss_sum + z_loss * (zl.sum() if weights is None else (zl * weights).sum())
    return float(loss_sum) / denom, (probs, t, weights, denom, logits.shape, z_loss, lse)


def cross_entropy_backward(cache):
    probs, t, weights, denom, shape, z_loss, lse = cache
    rows = np.arange(t.size)
    w = np.full(t.size, 1.0 / denom, dtype=probs.dtype) if weights is None else weights / denom
    scale = w if lse is None else w * (1.0 + 2.0 * z_loss * lse)
    dlogits = probs * scale[:, None]
    dlogits[rows, t] -= w
    return dlogits.reshape(shape)


def forward(params, cfg, x, doc_ids=None, reset_positions=False):
    B, T = x.shape
    p = params
    tok, c_tok = layers.embedding_forward(x, p["wte"])
    pos = model.doc_positions(doc_ids) if reset_positions else None
    h = tok + (p["wpe"][:T] if pos is None else p["wpe"][pos])
    extra_mask = None if doc_ids is None else layers.doc_mask(doc_ids, h.dtype)
    caches = []
    for l in range(cfg.n_layer):
        h, c_block = model.block_forward(cfg, p, f"h.{l}.", h, extra_mask)
        caches.append(c_block)
    f, c_lnf = model.norm_forward(cfg, p, "ln_f", h)
    logits, c_head = layers.linear_forward(f, p["wte"], None)
    logits = model.mup_output(cfg, logits)
    return logits, (cfg, T, c_tok, caches, c_lnf, c_head, p["wpe"].shape, pos)


def loss_and_grads(params, cfg, x, y, mask=None, denom=None, doc_ids=None, reset_positions=False, z_loss=0.0):
    logits, cache = forward(params, cfg, x, doc_ids, reset_positions)
    loss, c_loss = cross_entropy_forward(logits, y, mask, denom, z_loss)
    return loss, model.backward(cross_entropy_backward(c_loss), cache)


def init_train_state(model_cfg, train_cfg):
    params = model.init_params(model_cfg, train_cfg.seed)
    if train_cfg.optimizer == "muon":
        from pylib import muon
        opt = muon.muon_init(params)
    else:
        opt = optim.sgd_init(params) if train_cfg.optimizer == "sgd" else optim.adamw_init(params)
    return {"params": params, "opt": opt, "groups": optim.param_groups(params),
            "lr_mult": model.lr_multipliers(model_cfg) if model_cfg.mup_base_width else None,
            "recent_norms": [], "step": 0, "batch_rng": np.random.default_rng([train_cfg.seed, 1]),
            "diverged": False}


def _finite_or_none(value):
    return float(value) if math.isfinite(value) else None


def _evaluate(params, model_cfg, tc, train_tokens, val_tokens):
    from pylib.train import estimate_loss
    with np.errstate(all="ignore"):
        return {"train_eval": _finite_or_none(estimate_loss(params, model_cfg, train_tokens, tc.eval_windows)),
                "val": _finite_or_none(estimate_loss(params, model_cfg, val_tokens, tc.eval_windows))}


def _accumulated_loss_and_grads(params, model_cfg, tc, tokens, rng, batch_hook=None, step=0):
    from pylib.data import get_batch
    B, T = tc.batch_size, model_cfg.block_size
    total = tc.grad_accum * B * T
    loss, grads = 0.0, None
    for _ in range(tc.grad_accum):
        x, y = get_batch(tokens, B, T, rng)
        if batch_hook is not None:
            x, y = batch_hook(step, x, y)
        micro_loss, micro_grads = loss_and_grads(params, model_cfg, x, y, denom=total, z_loss=tc.z_loss)
        loss += micro_loss
        if grads is None:
            grads = micro_grads
        else:
            for name, g in micro_grads.items():
                grads[name] += g
    return loss, grads, total


def train_steps(state, model_cfg, tc, train_tokens, val_tokens, n_steps):
    records = []
    params = state["params"]
    limit = 2.0 * math.log(model_cfg.vocab_size)
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
        with np.errstate(all="ignore"):
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
            break
        recent = state.setdefault("recent_norms", [])
        if tc.skip_factor > 0 and len(recent) >= 10 and grad_norm > tc.skip_factor * float(np.median(recent)):
            record["skipped"] = True
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
    return records


def _apply_update(state, tc, grads, lr):
    params, opt, groups, mult = state["params"], state["opt"], state["groups"], state.get("lr_mult")
    if tc.optimizer in ("adamw", "adam_l2"):
        adamw_step(params, grads, opt, lr, tc.beta1, tc.beta2, tc.eps, tc.weight_decay, groups,
                   lr_mult=mult, decoupled=tc.optimizer == "adamw", mult_decay=not tc.mup_constant_decay)
    elif tc.optimizer == "sgd":
        sgd_step(params, grads, opt, lr, tc.momentum, tc.weight_decay, groups, lr_mult=mult)
    else:
        raise NotImplementedError(f"the oracle keeps no {tc.optimizer!r} step")
