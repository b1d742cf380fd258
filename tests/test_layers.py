"""Every layer's backward against centred finite differences, in float64.

One helper does it for all layers: draw a random upstream gradient dout, form the scalar
loss = (out * dout).sum(), and compare the layer's backward with centred differences of that
loss, element by element. Tolerance: the max error relative to the largest gradient entry must be
below 1e-7. With h = 1e-5 in float64 the difference formula's own error is about h^2 (1e-10)
plus rounding of about 1e-16 / h (1e-11), so 1e-7 leaves room for nothing but a correct backward.
"""

import math

import numpy as np
import pytest

from pylib import layers
from pylib.loss import cross_entropy_backward, cross_entropy_forward

H = 1e-5
TOL = 1e-7


def rel_error(analytic, numeric):
    """max |a - n| / max(|a|, |n|) over all elements."""
    scale = max(np.abs(analytic).max(), np.abs(numeric).max(), 1e-12)
    return float(np.abs(analytic - numeric).max() / scale)


def numeric_grad(loss, x):
    """Centred differences of loss() with respect to every element of x (perturbed in place)."""
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + H
        plus = loss()
        x[i] = old - H
        minus = loss()
        x[i] = old
        grad[i] = (plus - minus) / (2 * H)
    return grad


def check_backward(forward, backward, inputs, seed=0):
    """forward(*inputs) -> (out, cache); backward(dout, cache) -> one grad per input (None = skip)."""
    rng = np.random.default_rng(seed)
    out, cache = forward(*inputs)
    dout = rng.standard_normal(np.shape(out))
    grads = backward(dout, cache)

    def loss():
        return float((forward(*inputs)[0] * dout).sum())

    checked = 0
    for x, g in zip(inputs, grads):
        if g is None:
            continue
        assert g.shape == x.shape and g.dtype == np.float64
        err = rel_error(g, numeric_grad(loss, x))
        assert err < TOL, f"input of shape {x.shape}: relative error {err:.2e}"
        checked += 1
    assert checked > 0


def randn(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


# ---------------------------------------------------------------------------


def test_linear_backward_matches_finite_differences():
    check_backward(layers.linear_forward, layers.linear_backward, [randn(2, 3, 4), randn(5, 4, seed=2), randn(5, seed=3)])


def test_layernorm_backward_matches_finite_differences():
    w, b = 1.0 + 0.5 * randn(6, seed=2), randn(6, seed=3)
    check_backward(layers.layernorm_forward, layers.layernorm_backward, [randn(2, 3, 6), w, b])


def test_gelu_backward_matches_finite_differences():
    check_backward(layers.gelu_forward, lambda d, c: (layers.gelu_backward(d, c),), [3 * randn(4, 5)])


def test_attention_backward_matches_finite_differences():
    n_head = 2
    check_backward(
        lambda qkv: layers.attention_forward(qkv, n_head),
        lambda d, c: (layers.attention_backward(d, c),),
        [randn(2, 5, 3 * 8)],  # B=2, T=5, C=8, two heads of 4
    )


def test_embedding_backward_matches_finite_differences():
    idx = np.array([[0, 3, 3], [5, 0, 3]])  # repeated ids: their gradients must add up
    check_backward(
        lambda w: layers.embedding_forward(idx, w),
        lambda d, c: (layers.embedding_backward(d, c),),
        [randn(6, 4)],
    )


def test_cross_entropy_backward_matches_finite_differences():
    targets = np.array([[1, 4, 0], [2, 2, 3]])
    mask = np.array([[1, 0, 1], [1, 1, 0]])
    check_backward(
        lambda z: cross_entropy_forward(z, targets, mask),
        lambda d, c: (d * cross_entropy_backward(c),),
        [randn(2, 3, 5)],
    )


# ---------------------------------------------------------------------------


def naive_attention(qkv, n_head):
    """Textbook causal attention, head by head, with the max-subtracted softmax, in float64."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_head
    q, k, v = np.split(qkv, 3, axis=-1)
    y = np.zeros((B, T, C))
    for b in range(B):
        for h in range(n_head):
            s = slice(h * D, (h + 1) * D)
            scores = q[b, :, s] @ k[b, :, s].T / math.sqrt(D)
            scores[np.triu_indices(T, 1)] = -np.inf
            p = np.exp(scores - scores.max(axis=1, keepdims=True))
            y[b, :, s] = (p / p.sum(axis=1, keepdims=True)) @ v[b, :, s]
    return y


def test_attention_matches_naive_reference():
    qkv = randn(2, 7, 3 * 8)
    y, _ = layers.attention_forward(qkv, 2)
    np.testing.assert_allclose(y, naive_attention(qkv, 2), rtol=1e-12, atol=1e-12)


def test_attention_survives_scores_that_overflow_exp():
    # Scores near +-1e4: shifting by the diagonal score overflows exp, so the max-shift path runs.
    qkv = 100.0 * randn(2, 7, 3 * 8)
    y, cache = layers.attention_forward(qkv.astype(np.float32), 2)
    assert np.isfinite(y).all() and np.isfinite(cache[3]).all()
    np.testing.assert_allclose(y, naive_attention(qkv, 2), rtol=1e-3, atol=1e-2)


def test_causal_softmax_rows_sum_to_one_and_respect_the_mask():
    att = layers.attention_forward(randn(3, 6, 3 * 4), 2)[1][3]  # cache: q, k, v, att, ...
    np.testing.assert_allclose(att.sum(axis=-1), 1.0, rtol=1e-12)
    assert (att[..., np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0).all()


def test_layers_compute_in_the_dtype_of_their_inputs():
    x32 = randn(2, 3, 8).astype(np.float32)
    w, b = np.ones(8, np.float32), np.zeros(8, np.float32)
    assert layers.layernorm_forward(x32, w, b)[0].dtype == np.float32
    assert layers.gelu_forward(x32)[0].dtype == np.float32
    assert layers.attention_forward(randn(2, 3, 24).astype(np.float32), 2)[0].dtype == np.float32
    assert layers.linear_forward(x32, np.ones((4, 8), np.float32), None)[0].dtype == np.float32


@pytest.mark.parametrize("x", [-3.0, -0.5, 0.0, 0.7, 2.5])
def test_gelu_is_the_tanh_approximation(x):
    expected = 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    assert layers.gelu_forward(np.array([x]))[0][0] == pytest.approx(expected, rel=1e-14, abs=1e-15)
