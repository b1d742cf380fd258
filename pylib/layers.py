"""The layers of a GPT, each as a forward/backward pair with an explicit cache.

Every `*_forward` returns `(out, cache)`; the matching `*_backward(dout, cache)` returns the
gradients of its inputs and parameters. Nothing is stored between the two calls except what is
in the cache, as in llm.c's train_gpt2.c. Every function computes in the dtype of its inputs
(float32 for training, float64 for gradient checks): constants are Python floats, which NumPy 2
(NEP 50) does not let upcast an array.

Weights use PyTorch's layout, as nanoGPT does: a Linear weight is (out, in) and the layer computes
x @ w.T + b, so exporting to a nanoGPT state dict is only a renaming.

Legend: B batch, T time, C channels, H heads, D head size (C // H), V vocab, N = B*T rows.
"""

import math

import numpy as np

# ---------------------------------------------------------------------------
# Sums as matmuls
#
# NumPy reduces a short axis (16 to 64 numbers) row by row, several times slower than a
# matrix-vector product with a vector of ones, which BLAS (or NumPy's own matmul loop in
# Pyodide) streams through: about 4 us instead of 24 us for a (1024, 16) float32 array on the
# course machine (one thread).


def colsum(a2):
    """Sum over the rows of a 2-D array (N, C) -> (C,)."""
    return np.ones(a2.shape[0], dtype=a2.dtype) @ a2


def rowsum(a):
    """Sum over the last axis (..., C) -> (...), as one 2-D matrix-vector product."""
    C = a.shape[-1]
    return (a.reshape(-1, C) @ np.ones(C, dtype=a.dtype)).reshape(a.shape[:-1])


def rowmean(a):
    """Mean over the last axis (..., C) -> (...)."""
    return rowsum(a) * (1.0 / a.shape[-1])


# ---------------------------------------------------------------------------
# Chapter 9's hook: what a matrix product's inputs become in a lower precision
#
# MATMUL_INPUT is None (float32: nothing changes), or a function f(a, role) -> array that rounds
# one input of a matrix product; role is "activation", "weight" or "grad". The rounded
# activations are also what the caches keep, as a 16-bit run stores them.
# pylib.systems.mixed_precision sets it around one step and restores it after.

MATMUL_INPUT = None


def mm_in(a, role):
    """a as a matrix product receives it: unchanged unless MATMUL_INPUT is set."""
    return a if MATMUL_INPUT is None else MATMUL_INPUT(a, role)


# ---------------------------------------------------------------------------
# Linear


def linear_forward(x, w, b):
    """y = x @ w.T + b over the last axis; w is (out, in), b is (out,) or None."""
    x2 = mm_in(x.reshape(-1, x.shape[-1]), "activation")  # (N, in): one 2-D matmul, not a broadcast batch of them
    out = x2 @ mm_in(w, "weight").T  # (N, out)
    if b is not None:
        out += b
    return out.reshape(*x.shape[:-1], w.shape[0]), (x2, w, b is not None, x.shape)


def linear_backward(dout, cache):
    """Returns (dx, dw, db); db is None when the layer has no bias."""
    x2, w, has_bias, x_shape = cache
    d2 = mm_in(dout.reshape(-1, w.shape[0]), "grad")  # (N, out)
    dx = (d2 @ mm_in(w, "weight")).reshape(x_shape)  # (N, in)
    dw = d2.T @ x2  # (out, in)
    db = colsum(d2) if has_bias else None  # (out,)
    return dx, dw, db


# ---------------------------------------------------------------------------
# LayerNorm (Ba et al. 2016), over the last axis


def layernorm_forward(x, w, b, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * w + b, with the biased variance as in PyTorch."""
    xc = x - rowmean(x)[..., None]  # (..., C)
    rstd = (1.0 / np.sqrt(rowmean(xc * xc) + eps))[..., None]  # (..., 1)
    xhat = xc
    xhat *= rstd  # (..., C), reusing xc's memory
    out = xhat * w
    if b is not None:
        out += b
    return out, (xhat, w, rstd, b is not None)


def layernorm_backward(dout, cache):
    """Returns (dx, dw, db); see llm.c's doc/layernorm for the derivation."""
    xhat, w, rstd, has_bias = cache
    C = xhat.shape[-1]
    d2 = dout.reshape(-1, C)  # (N, C)
    dw = colsum(d2 * xhat.reshape(-1, C))  # (C,)
    db = colsum(d2) if has_bias else None  # (C,)
    dxhat = dout * w  # (..., C)
    dx = dxhat - rowmean(dxhat)[..., None]
    dx -= xhat * rowmean(dxhat * xhat)[..., None]
    dx *= rstd
    return dx, dw, db


# ---------------------------------------------------------------------------
# RMSNorm (Zhang & Sennrich 2019), over the last axis: LayerNorm without the centring and bias


def rmsnorm_forward(x, w, eps=1e-5):
    """x / sqrt(mean(x^2) + eps) * w."""
    rstd = (1.0 / np.sqrt(rowmean(x * x) + eps))[..., None]  # (..., 1)
    xhat = x * rstd  # (..., C)
    return xhat * w, (xhat, w, rstd)


def rmsnorm_backward(dout, cache):
    """Returns (dx, dw): LayerNorm's backward without the mean term (there is no centring)."""
    xhat, w, rstd = cache
    C = xhat.shape[-1]
    dw = colsum(dout.reshape(-1, C) * xhat.reshape(-1, C))  # (C,)
    dxhat = dout * w  # (..., C)
    dx = dxhat - xhat * rowmean(dxhat * xhat)[..., None]
    dx *= rstd
    return dx, dw


# ---------------------------------------------------------------------------
# GELU, tanh approximation (Hendrycks & Gimpel 2016; GPT-2's choice, PyTorch approximate='tanh')

_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def gelu_forward(x):
    """0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3); in-place steps save passes over memory."""
    t = x * x
    t *= _GELU_K * _GELU_A
    t += _GELU_K
    t *= x  # u = sqrt(2/pi) x (1 + 0.044715 x^2)
    np.tanh(t, out=t)
    out = t + 1.0
    out *= x
    out *= 0.5
    return out, (x, t)


def gelu_backward(dout, cache):
    """d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), with t = tanh(u)."""
    x, t = cache
    dudx = x * x
    dudx *= 3.0 * _GELU_A * _GELU_K
    dudx += _GELU_K
    sech2 = t * t
    np.subtract(1.0, sech2, out=sech2)  # 1 - tanh^2
    dudx *= sech2
    dudx *= x
    dudx += t
    dudx += 1.0
    dudx *= dout
    dudx *= 0.5
    return dudx


# ---------------------------------------------------------------------------
# Causal multi-head self-attention (Vaswani et al. 2017, section 3.2), softmax included

_CAUSAL_MASKS = {}


def causal_mask(T, dtype):
    """(T, T) additive mask: 0 on and below the diagonal, -inf above; built once per (T, dtype)."""
    key = (T, np.dtype(dtype))
    if key not in _CAUSAL_MASKS:
        upper = np.triu(np.ones((T, T), dtype=bool), k=1)
        _CAUSAL_MASKS[key] = np.where(upper, -np.inf, 0.0).astype(dtype)
    return _CAUSAL_MASKS[key]


def causal_softmax(scores, shift, extra_mask=None):
    """Masked softmax of (..., T, T) scores minus a per-row shift (..., T, 1), in place -> (probs, ok)."""
    # The shift leaves the softmax unchanged; it is there so that exp cannot overflow.
    # ok is False when a row sum came out infinite or NaN, i.e. the shift was too small.
    # extra_mask (optional, additive, broadcastable to scores) is combined with the causal one;
    # it must leave the diagonal at 0 (see doc_mask), so no row is ever fully masked.
    scores -= shift
    scores += causal_mask(scores.shape[-1], scores.dtype)
    if extra_mask is not None:
        scores += extra_mask
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        np.exp(scores, out=scores)
        sums = rowsum(scores)  # (..., T)
        scores *= (1.0 / sums)[..., None]
    return scores, bool(np.isfinite(sums).all())


def doc_mask(doc_ids, dtype):
    """Block-diagonal additive mask (B, 1, T, T) from doc_ids (B, T): 0 within a document, -inf across."""
    same = doc_ids[:, :, None] == doc_ids[:, None, :]  # (B, T, T); the diagonal is always True
    return np.where(same, 0.0, -np.inf).astype(dtype)[:, None]  # one mask shared by the H heads


def attention_forward(qkv, n_head, extra_mask=None, scale=None):
    """qkv (B, T, 3C) as nanoGPT's c_attn makes it -> y (B, T, C); cache holds the probabilities.

    extra_mask: optional additive mask broadcastable to (B, H, T, T), e.g. doc_mask(...), added to
    the causal one. Backward needs nothing more: masked entries have probability 0.
    scale: the multiplier of q.k, 1/sqrt(D) by default (muP uses ~1/D: pylib.model.GPTConfig).
    The attention logits are (q * scale) @ k.T, i.e. cache[0] @ cache[1].T.
    """
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_head
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    q, k, v = qkv.reshape(B, T, 3, n_head, D).transpose(2, 0, 3, 1, 4)  # 3 x (B, H, T, D)
    q = q * scale  # scaling q (B*T*C numbers) is cheaper than scaling the (B, H, T, T) scores
    q, k, v = mm_in(q, "activation"), mm_in(k, "activation"), mm_in(v, "activation")
    kt = k.transpose(0, 1, 3, 2)  # (B, H, D, T)
    # Stable softmax. Subtracting each row's own diagonal score q_t.k_t is as good as its max
    # unless a score exceeds the diagonal one by ~88 (exp overflows in float32), and it is far
    # cheaper: NumPy's max over a 64-long axis costs more than the exp. The diagonal term becomes
    # exp(0) = 1, so a row sum is never 0; an overflow shows as an infinite sum, and then the
    # row max over the unmasked scores, the textbook shift, is used instead.
    att = q @ kt  # (B, H, T, T)
    att, ok = causal_softmax(att, att.diagonal(0, -2, -1)[..., None].copy(), extra_mask)
    if not ok:
        att = q @ kt
        masked = att + causal_mask(T, att.dtype)
        if extra_mask is not None:
            masked += extra_mask
        att, _ = causal_softmax(att, masked.max(axis=-1, keepdims=True), extra_mask)
    att = mm_in(att, "activation")
    yh = att @ v  # (B, H, T, D)
    y = yh.transpose(0, 2, 1, 3).reshape(B, T, C)  # heads side by side again
    return y, (q, k, v, att, yh, scale)


def attention_backward(dy, cache):
    """dy (B, T, C) -> dqkv (B, T, 3C)."""
    q, k, v, att, yh, scale = cache  # q is already scaled
    B, H, T, D = q.shape
    dy = mm_in(dy.reshape(B, T, H, D).transpose(0, 2, 1, 3), "grad")  # (B, H, T, D)
    datt = dy @ v.transpose(0, 1, 3, 2)  # (B, H, T, T)
    dv = att.transpose(0, 1, 3, 2) @ dy  # (B, H, T, D)
    # softmax backward: ds = p * (dp - sum_j p_j dp_j); masked entries have p = 0, so ds = 0 there.
    # sum_j p_j dp_j = sum_j p_j (dy . v_j) = dy . y: a (B, H, T, D) product instead of a
    # (B, H, T, T) one (FlashAttention's D_i = do_i^T o_i: Dao et al. 2022, Appendix B.2, Eq. (4), and
    # Algorithm 4 in Appendix B.4).
    datt -= rowsum(dy * yh)[..., None]
    datt *= att
    datt = mm_in(datt, "grad")
    dq = (datt @ k) * scale  # (B, H, T, D)
    dk = datt.transpose(0, 1, 3, 2) @ q  # (B, H, T, D); q carries the scale
    dqkv = np.empty((B, T, 3, H, D), dtype=dy.dtype)
    dqkv[:, :, 0] = dq.transpose(0, 2, 1, 3)
    dqkv[:, :, 1] = dk.transpose(0, 2, 1, 3)
    dqkv[:, :, 2] = dv.transpose(0, 2, 1, 3)
    return dqkv.reshape(B, T, 3 * H * D)


# ---------------------------------------------------------------------------
# Embedding


def embedding_forward(idx, w):
    """Rows of w (V, C) picked by integer ids idx (...) -> (..., C)."""
    return w[idx], (idx, w.shape)


def embedding_backward(dout, cache):
    """dw (V, C): the rows of dout summed per id, as one (V, N) one-hot matmul (no np.add.at)."""
    idx, (V, C) = cache
    flat = idx.reshape(-1)  # (N,)
    onehot = np.zeros((V, flat.size), dtype=dout.dtype)  # (V, N)
    onehot[flat, np.arange(flat.size)] = 1.0
    return onehot @ dout.reshape(-1, C)  # (V, C)
