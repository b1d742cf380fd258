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


def sgd_step(params, grads, state, lr, momentum=0.0, weight_decay=0.0, groups=None, lr_mult=None):
    """p -= lr * (momentum buffer); weight decay is L2 (added to the grad), as torch.optim.SGD.

    lr_mult, optional: {name: multiplier} of the learning rate per tensor."""
    decay = set((groups or param_groups(params))["decay"]) if weight_decay else set()
    state["t"] += 1
    for n, p in params.items():
        g = grads[n] + weight_decay * p if n in decay else grads[n]
        if momentum:
            buf = state["buf"][n]
            buf *= momentum
            buf += g
            g = buf
        p -= (lr if lr_mult is None else lr * lr_mult[n]) * g


# ---------------------------------------------------------------------------
# AdamW


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


def adamw_init(params):
    """First and second moment estimates (zeros, one flat array each) and the step counter t = 0."""
    n = sum(p.size for p in params.values())
    dtype = next(iter(params.values())).dtype
    return {"t": 0, "m": np.zeros(n, dtype), "v": np.zeros(n, dtype)}


def adamw_step(params, grads, state, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, groups=None,
               lr_mult=None, decoupled=True, mult_decay=True):
    """One AdamW step: decoupled decay p -= lr*wd*p (decay group only), then the Adam update.

    decoupled=False is Adam with L2 instead: wd*p is added to the gradient before the moments,
    as torch.optim.Adam(weight_decay=...) does, so the decay is divided by sqrt(v) like the rest.
    lr_mult, optional: {name: multiplier} of the learning rate per tensor (muP's, see
    pylib.model.lr_multipliers); it scales the decoupled decay too, as lr does, unless
    mult_decay=False: then every tensor decays by lr*wd whatever its multiplier, which is what
    mup's MuAdam/MuAdamW do by default (decoupled_wd=False multiplies wd by the width multiplier
    where it divides lr, so lr*wd stays the base model's).
    """
    # All parameters as one flat vector, with torch.optim.AdamW's order of operations. Params
    # that are not views of one buffer are gathered here and written back at the end.
    groups = groups or param_groups(params)
    flat = flat_buffer(params)
    p = flat if flat is not None else np.concatenate([v.ravel() for v in params.values()])
    g = np.concatenate([grads[n].ravel() for n in params])  # same order as p
    m, v = state["m"], state["v"]
    state["t"] += 1
    t = state["t"]
    bc1 = 1.0 - beta1**t  # bias corrections: m and v start at 0, so early averages are too small
    bc2 = 1.0 - beta2**t
    mult = None if lr_mult is None else flat_multipliers(params, lr_mult, state)
    if weight_decay and decoupled:
        shrink = (lr * weight_decay) * decay_mask(params, groups, state)
        p *= 1.0 - (shrink if mult is None or not mult_decay else shrink * mult)
    elif weight_decay:
        g += weight_decay * decay_mask(params, groups, state) * p  # L2: part of the gradient
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
    if flat is None:  # write back into the caller's separate arrays
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


def flat_multipliers(params, lr_mult, state):
    """Flat vector of per-tensor learning-rate multipliers; built once and kept in the state."""
    key = tuple(float(lr_mult[n]) for n in params)
    if state.get("mult_key") != key:
        dtype = state["m"].dtype
        state["mult"] = np.concatenate([np.full(p.size, lr_mult[n], dtype=dtype) for n, p in params.items()])
        state["mult_key"] = key
    return state["mult"]
