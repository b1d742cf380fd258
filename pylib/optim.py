"""Optimisers on a dict of named arrays: SGD with momentum, AdamW, and global-norm clipping.

AdamW is Loshchilov & Hutter (2019), "Decoupled Weight Decay Regularization", Algorithm 2, with
Adam's bias correction (Kingma & Ba 2015, section 2); the update matches torch.optim.AdamW.

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
    """First and second moment estimates (zeros) and the step counter t = 0."""
    return {
        "t": 0,
        "m": {n: np.zeros_like(p) for n, p in params.items()},
        "v": {n: np.zeros_like(p) for n, p in params.items()},
    }


def adamw_step(params, grads, state, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, groups=None):
    """One AdamW step: decoupled decay p -= lr*wd*p (decay group only), then the Adam update."""
    decay = set((groups or param_groups(params))["decay"])
    state["t"] += 1
    t = state["t"]
    bc1 = 1.0 - beta1**t  # bias corrections: m and v start at 0, so early averages are too small
    bc2 = 1.0 - beta2**t
    step_size = lr / bc1
    for n, p in params.items():
        g, m, v = grads[n], state["m"][n], state["v"][n]
        if weight_decay and n in decay:
            p *= 1.0 - lr * weight_decay
        m *= beta1
        m += (1.0 - beta1) * g
        v *= beta2
        v += (1.0 - beta2) * (g * g)
        denom = np.sqrt(v)
        denom *= 1.0 / math.sqrt(bc2)
        denom += eps
        p -= step_size * (m / denom)
