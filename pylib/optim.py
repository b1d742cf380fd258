"""Optimisers on a dict of named arrays: SGD with momentum, AdamW, and global-norm clipping.

AdamW is decoupled weight decay (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization")
in PyTorch's form: torch.optim.AdamW's p *= 1 - lr * wd, the decay scaled by the (scheduled)
learning rate. The paper's Algorithm 2 (line 12) scales it by the schedule multiplier eta_t alone,
not by Adam's alpha, so there lr and wd are separate knobs; here the decay per step is lr * wd.
With Adam's bias correction (Kingma & Ba 2015, section 2); the update matches torch.optim.AdamW.

Weight decay groups follow nanoGPT's `configure_optimizers`: every tensor with 2 or more
dimensions is decayed (Linear weights AND the embeddings wte and wpe), every 1-D tensor (biases,
LayerNorm weights and biases) is not. Decaying the embeddings is nanoGPT's choice, kept so that
our runs are comparable with it; minGPT instead exempts embeddings.

All steps update params (and the optimiser state) IN PLACE and return nothing, as PyTorch does,
so arrays held elsewhere (e.g. by a widget) see the new values.
"""

import math

import numpy as np

# ---------------------------------------------------------------------------
# Groups and norms


def param_groups(params):
    """{"decay": names of tensors with ndim >= 2, "no_decay": biases and LayerNorm params}."""
    decay = [n for n, p in params.items() if p.ndim >= 2]
    no_decay = [n for n, p in params.items() if p.ndim < 2]
    return {"decay": decay, "no_decay": no_decay}


def global_grad_norm(grads):
    """L2 norm of all gradients taken together, as one vector (computed in float64)."""
    return math.sqrt(sum(float(np.dot(g.ravel(), g.ravel())) for g in grads.values()))


def clip_grad_norm(grads, max_norm):
    """Scale all grads in place so their global norm is at most max_norm; returns the pre-clip norm."""
    total = global_grad_norm(grads)
    if max_norm > 0 and total > max_norm:  # also skipped for a non-finite norm, which is reported
        scale = max_norm / (total + 1e-6)  # torch.nn.utils.clip_grad_norm_'s epsilon
        for g in grads.values():
            g *= scale
    return total


# ---------------------------------------------------------------------------
# SGD


def sgd_init(params):
    """Momentum buffers, one per param, and the step counter."""
    return {"t": 0, "buf": {n: np.zeros_like(p) for n, p in params.items()}}


def sgd_step(params, grads, state, lr, momentum=0.0, weight_decay=0.0, groups=None):
    """p -= lr * (momentum buffer); weight decay is L2 (added to the grad), as torch.optim.SGD."""
    decay = set((groups or param_groups(params))["decay"]) if weight_decay else set()
    state["t"] += 1
    for n, p in params.items():
        g = grads[n] + weight_decay * p if n in decay else grads[n]
        if momentum:
            buf = state["buf"][n]
            buf *= momentum
            buf += g
            g = buf
        p -= lr * g


# ---------------------------------------------------------------------------
# AdamW


def adamw_init(params):
    """First and second moment estimates (zeros, one flat array each) and the step counter t = 0."""
    n = sum(p.size for p in params.values())
    dtype = next(iter(params.values())).dtype
    return {"t": 0, "m": np.zeros(n, dtype), "v": np.zeros(n, dtype)}


def adamw_step(params, grads, state, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, groups=None):
    """One AdamW step: decoupled decay p -= lr*wd*p (decay group only), then the Adam update."""
    p, g = flat_params(params), flat_grads(params, grads)  # every tensor as one vector, same order
    m, v = state["m"], state["v"]
    state["t"] += 1
    t = state["t"]
    bc1 = 1.0 - beta1**t  # bias corrections: m and v start at 0, so early averages are too small
    bc2 = 1.0 - beta2**t
    if weight_decay:
        p *= 1.0 - (lr * weight_decay) * decay_mask(params, groups or param_groups(params), state)
    m *= beta1
    m += (1.0 - beta1) * g  # m: running mean of the gradient
    v *= beta2
    v += (1.0 - beta2) * (g * g)  # v: running mean of its square
    denom = np.sqrt(v)
    denom *= 1.0 / math.sqrt(bc2)
    denom += eps
    step = m / denom
    step *= lr / bc1
    p -= step
    write_back(params, p)


def adam_l2_step(params, grads, state, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, groups=None):
    """Adam with L2 (chapter 5): wd*p is added to the gradient before the moments, as
    torch.optim.Adam(weight_decay=...) does, so the decay is divided by sqrt(v) like the rest."""
    decay = set((groups or param_groups(params))["decay"])
    l2 = {n: grads[n] + weight_decay * p if weight_decay and n in decay else grads[n] for n, p in params.items()}
    adamw_step(params, l2, state, lr, beta1, beta2, eps, 0.0, groups)


# ---------------------------------------------------------------------------
# The flat-buffer path: speed, not maths


def flat_buffer(params):
    """The 1-D array that all params are consecutive views of (pylib.model.pack_params), or None."""
    # One update of the whole buffer replaces one per tensor; for a 5k-parameter model the
    # per-tensor version is mostly call overhead (16 tensors x ~10 NumPy calls each).
    arrays = list(params.values())
    base = arrays[0].base if arrays else None
    if base is None or base.ndim != 1 or not base.flags.c_contiguous:
        return None
    start, offset = base.__array_interface__["data"][0], 0
    for p in arrays:
        if p.base is not base or not p.flags.c_contiguous or p.dtype != base.dtype:
            return None
        if p.__array_interface__["data"][0] != start + offset * base.itemsize:
            return None
        offset += p.size
    return base if offset == base.size else None


def flat_params(params):
    """All params as one vector: the buffer they are views of, else a gathered copy (see write_back)."""
    flat = flat_buffer(params)
    return flat if flat is not None else np.concatenate([v.ravel() for v in params.values()])


def flat_grads(params, grads):
    """All grads as one new vector, in the params' order."""
    return np.concatenate([grads[n].ravel() for n in params])


def write_back(params, p):
    """Copy an updated gathered vector p into the caller's arrays; nothing to do for their own buffer."""
    if next(iter(params.values())).base is p:
        return
    offset = 0
    for value in params.values():
        value[...] = p[offset:offset + value.size].reshape(value.shape)
        offset += value.size


def decay_mask(params, groups, state):
    """Flat 0/1 vector, 1 on the decay group's elements; built once and kept in the state."""
    key = tuple(groups["decay"])
    if state.get("decay_key") != key:
        decay = set(key)
        dtype = state["m"].dtype
        state["decay_mask"] = np.concatenate(
            [np.full(p.size, 1.0 if n in decay else 0.0, dtype=dtype) for n, p in params.items()])
        state["decay_key"] = key
    return state["decay_mask"]
