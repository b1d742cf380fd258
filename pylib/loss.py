"""Cross-entropy over a vocabulary, with an optional 0/1 mask and an explicit denominator.

The loss is sum over counted positions of -log softmax(logits)[target], divided by `denom`
(default: the number of counted positions). Passing the same `denom` to every microbatch is what
makes gradient accumulation exact: the total is then normalised by the TOTAL number of counted
tokens, not by each microbatch's own count (a mean of means weights short microbatches too much).

Chapter 8's z-loss is a term added to it (z_loss_forward, z_loss_backward): coef * log(Z)^2 per
counted position, Z being the softmax normaliser sum_v exp(logit_v) (PaLM, Chowdhery et al. 2022,
section 5: coefficient 1e-4). It pulls log Z towards 0, so the logits cannot drift to large values
together; the probabilities, which ignore a shift, are unchanged by it. Its gradient is
2 coef log(Z) softmax(logits).

Legend: N positions (B*T flattened), V vocab.
"""

import numpy as np

# ---------------------------------------------------------------------------


def count_targets(targets, mask=None):
    """How many positions the loss counts: all of them, or the number of ones in mask."""
    return int(np.size(targets)) if mask is None else int(np.count_nonzero(mask))


def cross_entropy_forward(logits, targets, mask=None, denom=None):
    """logits (..., V), integer targets (...), mask (...) of 0/1 -> (loss, cache)."""
    V = logits.shape[-1]
    z = logits.reshape(-1, V)  # (N, V)
    t = targets.reshape(-1)  # (N,)
    rows = np.arange(t.size)
    zmax = z.max(axis=1, keepdims=True)  # (N, 1)
    z = z - zmax  # softmax is shift-invariant; exp never overflows
    z_target = z[rows, t]  # (N,)
    probs = np.exp(z, out=z)  # (N, V), in z's memory: one (N, V) array for the whole loss
    s = probs @ np.ones(V, dtype=probs.dtype)  # (N,) row sums (a matmul: see layers.rowsum)
    nll = np.log(s) - z_target  # (N,) -log p(target)
    weights = None if mask is None else np.asarray(mask).reshape(-1).astype(logits.dtype)  # (N,)
    if denom is None:
        denom = count_targets(t, mask)
    loss_sum = nll.sum() if weights is None else (nll * weights).sum()
    probs *= (1.0 / s)[:, None]
    return float(loss_sum) / denom, (probs, t, weights, denom, logits.shape)


def cross_entropy_backward(cache):
    """dlogits = (softmax - onehot(target)) / denom at counted positions, 0 at masked ones."""
    probs, t, weights, denom, shape = cache
    rows = np.arange(t.size)
    w = np.full(t.size, 1.0 / denom, dtype=probs.dtype) if weights is None else weights / denom  # (N,)
    dlogits = probs * w[:, None]  # a new array: the cache is left untouched
    dlogits[rows, t] -= w
    return dlogits.reshape(shape)


# ---------------------------------------------------------------------------
# Chapter 8: z-loss, a term added to the loss and to its gradient


def log_normaliser(logits):
    """log Z = log sum_v exp(logit_v) per position (N,), computed as cross_entropy_forward does."""
    V = logits.shape[-1]
    z = logits.reshape(-1, V)
    zmax = z.max(axis=1, keepdims=True)
    s = np.exp(z - zmax) @ np.ones(V, dtype=z.dtype)
    return np.log(s) + zmax[:, 0]


def z_loss_forward(logits, targets, coef, mask=None, denom=None):
    """Cross-entropy plus coef * log(Z)^2 at each counted position, over the same denom."""
    loss, cache = cross_entropy_forward(logits, targets, mask, denom)
    weights, denom = cache[2], cache[3]
    lse = log_normaliser(logits)  # (N,)
    zl = lse * lse
    term = coef * (zl.sum() if weights is None else (zl * weights).sum())
    return loss + float(term) / denom, (cache, coef, lse)


def z_loss_backward(cache):
    """Cross-entropy's dlogits, with the softmax scaled by 1 + 2 coef log Z (the term's gradient)."""
    (probs, t, weights, denom, shape), coef, lse = cache
    rows = np.arange(t.size)
    w = np.full(t.size, 1.0 / denom, dtype=probs.dtype) if weights is None else weights / denom  # (N,)
    dlogits = probs * (w * (1.0 + 2.0 * coef * lse))[:, None]
    dlogits[rows, t] -= w
    return dlogits.reshape(shape)
