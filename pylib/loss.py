"""Cross-entropy over a vocabulary, with an optional 0/1 mask and an explicit denominator.

The loss is sum over counted positions of -log softmax(logits)[target], divided by `denom`
(default: the number of counted positions). Passing the same `denom` to every microbatch is what
makes gradient accumulation exact: the total is then normalised by the TOTAL number of counted
tokens, not by each microbatch's own count (a mean of means weights short microbatches too much).

With z_loss > 0 the loss also gets z_loss * log(Z)^2 per counted position, Z being the softmax
normaliser sum_v exp(logit_v) (PaLM, Chowdhery et al. 2022, section 5: coefficient 1e-4). It pulls
log Z towards 0, so the logits cannot drift to large values together; the probabilities, which
ignore a shift, are unchanged by it. Its gradient is 2 z_loss log(Z) softmax(logits).

Legend: N positions (B*T flattened), V vocab.
"""

import numpy as np

# ---------------------------------------------------------------------------


def count_targets(targets, mask=None):
    """How many positions the loss counts: all of them, or the number of ones in mask."""
    return int(np.size(targets)) if mask is None else int(np.count_nonzero(mask))


def cross_entropy_forward(logits, targets, mask=None, denom=None, z_loss=0.0):
    """logits (..., V), integer targets (...), mask (...) of 0/1 -> (loss, cache); see z_loss above."""
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
    lse = None
    if z_loss:
        lse = np.log(s) + zmax[:, 0]  # (N,) log Z
        zl = lse * lse
        loss_sum = loss_sum + z_loss * (zl.sum() if weights is None else (zl * weights).sum())
    return float(loss_sum) / denom, (probs, t, weights, denom, logits.shape, z_loss, lse)


def cross_entropy_backward(cache):
    """dlogits = (softmax - onehot(target)) / denom at counted positions, 0 at masked ones."""
    probs, t, weights, denom, shape, z_loss, lse = cache
    rows = np.arange(t.size)
    w = np.full(t.size, 1.0 / denom, dtype=probs.dtype) if weights is None else weights / denom  # (N,)
    scale = w if lse is None else w * (1.0 + 2.0 * z_loss * lse)  # (N,): z-loss adds 2 z log Z softmax
    dlogits = probs * scale[:, None]  # a new array: the cache is left untouched
    dlogits[rows, t] -= w
    return dlogits.reshape(shape)
