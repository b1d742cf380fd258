"""Muon (pylib.muon): the Newton-Schulz update is close to orthogonal, and the optimiser trains."""

import numpy as np
import pytest

from pylib import model, muon, train


def normalised_singular_values(G):
    return np.linalg.svd(G / np.linalg.norm(G), compute_uv=False)


@pytest.mark.parametrize("shape", [(48, 16), (16, 64), (64, 16)])
def test_newton_schulz_singular_values_lie_in_the_quintic_band(shape):
    # The quintic does not drive singular values to 1 exactly: five iterations map every
    # normalised singular value in [0.01, 1] into a band, about [0.68, 1.13], that
    # ns_singular_value_band computes from the polynomial itself.
    rng = np.random.default_rng(0)
    G = rng.standard_normal(shape)
    assert normalised_singular_values(G).min() >= 0.01  # the band below assumes it
    lo, hi = muon.ns_singular_value_band(0.01)
    assert 0.6 < lo < 0.7 and 1.1 < hi < 1.2
    s = np.linalg.svd(muon.newton_schulz(G), compute_uv=False)
    assert s.min() >= lo - 1e-6 and s.max() <= hi + 1e-6
    # and the singular vectors are G's: X = U diag(f(s)) V^T
    U, sv, Vt = np.linalg.svd(G, full_matrices=False)
    expected = U @ np.diag(muon.ns_scalar(sv / np.linalg.norm(G))) @ Vt
    np.testing.assert_allclose(muon.newton_schulz(G), expected, atol=1e-6)


def test_newton_schulz_keeps_an_orthogonal_matrix_orthogonal():
    Q, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((16, 16)))
    X = muon.newton_schulz(Q)
    scale = np.linalg.norm(X) / np.linalg.norm(Q)
    lo, hi = muon.ns_singular_value_band(0.01)
    assert lo <= scale <= hi
    np.testing.assert_allclose(X / scale, Q, atol=1e-6)  # the same matrix, up to one scale
    np.testing.assert_allclose((X / scale) @ (X / scale).T, np.eye(16), atol=1e-6)


def test_muon_updates_hidden_matrices_and_adamw_the_rest():
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    matrices, rest = muon.muon_split(params)
    assert set(matrices) == {"h.0.attn.c_attn.weight", "h.0.attn.c_proj.weight",
                             "h.0.mlp.c_fc.weight", "h.0.mlp.c_proj.weight"}
    assert "wte" in rest and "wpe" in rest and "ln_f.weight" in rest
    state = muon.muon_init(params)
    # state: one buffer per matrix element, AdamW's two per other element
    n_matrix = sum(params[n].size for n in matrices)
    n_rest = sum(params[n].size for n in rest)
    assert muon.state_floats(state) == n_matrix + 2 * n_rest
    before = {n: p.copy() for n, p in params.items()}
    rng = np.random.default_rng(2)
    grads = {n: rng.standard_normal(p.shape).astype(p.dtype) for n, p in params.items()}
    muon.muon_step(params, grads, state, lr=0.01)
    for n in matrices:  # no weight decay: the step is exactly -lr * scale * NS(nesterov momentum)
        update = (1 - muon.MOMENTUM) * grads[n] * muon.MOMENTUM + (1 - muon.MOMENTUM) * grads[n]
        expected = before[n] - 0.01 * muon.update_scale(params[n].shape) * muon.newton_schulz(update)
        np.testing.assert_allclose(params[n], expected, atol=1e-6)
        step = params[n] - before[n]  # RMS matched to AdamW's ~0.2 * lr
        assert 0.1 * 0.01 < np.sqrt(np.mean(step**2)) < 0.3 * 0.01
    for n in rest:  # Adam's first step: lr * sign(g) per element
        np.testing.assert_allclose(params[n], before[n] - 0.01 * np.sign(grads[n]), atol=1e-5)


def test_muon_trains_the_model():
    tokens = np.tile(np.arange(7, dtype=np.uint8), 800)  # a cycle: each token fixes the next
    cfg = model.GPTConfig()
    tc = train.TrainConfig(optimizer="muon", lr=0.03, steps=60, batch_size=4, eval_interval=1000, eval_windows=4)
    _, history = train.train(cfg, tc, tokens, tokens)
    assert not any(r.get("diverged") for r in history)
    first = np.mean([r["loss"] for r in history[:5]])
    last = np.mean([r["loss"] for r in history[-5:]])
    assert last < 0.5 * first  # from about ln 65 to well below half of it
