"""Cross-entropy over a vocabulary, with an optional 0/1 mask and an explicit denominator.

The loss is sum over counted positions of -log softmax(logits)[target], divided by `denom`
(default: the number of counted positions). Passing the same `denom` to every microbatch is what
makes gradient accumulation exact: the total is then normalised by the TOTAL number of counted
tokens, not by each microbatch's own count (a mean of means weights short microbatches too much).

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
    z = z - z.max(axis=1, keepdims=True)  # softmax is shift-invariant; exp never overflows
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
    if weights is None:
        dlogits = probs * (1.0 / denom)  # a new array: the cache is left untouched
        dlogits[rows, t] -= 1.0 / denom
    else:
        w = weights / denom  # (N,)
        dlogits = probs * w[:, None]
        dlogits[rows, t] -= w
    return dlogits.reshape(shape)
