"""Packing, padding and cross-document masking: document ids from EOS, the block-diagonal attention
mask and position reset (gradient-checked), and the leak test."""

import numpy as np

from pylib import data, layers, loss, model

CFG = model.GPTConfig()
EOS = CFG.vocab_size - 1


def packed_batch(B, T, seed=0):
    """Random non-EOS tokens with a few EOS placed in each row, so every row holds several documents."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, EOS, (B, T))
    y = rng.integers(0, CFG.vocab_size, (B, T))
    for b in range(B):
        x[b, rng.choice(np.arange(1, T - 1), size=2, replace=False)] = EOS
    return x, y


# ---------------------------------------------------------------------------


def doc_loss(params, x, y, doc_ids):
    """The loss of doc_forward with positions reset, without gradients."""
    logits = model.doc_forward(params, CFG, x, doc_ids, reset_positions=True)[0]
    return loss.cross_entropy_forward(logits, y)[0]


def test_eos_belongs_to_the_document_it_ends():
    x = np.array([[3, 4, EOS, 5, EOS, EOS, 6]])
    np.testing.assert_array_equal(data.doc_ids_from_eos(x, EOS), [[0, 0, 0, 1, 1, 2, 3]])


def test_positions_restart_at_each_document():
    doc_ids = np.array([[0, 0, 0, 1, 1, 2, 3], [5, 5, 5, 5, 5, 5, 5]])
    np.testing.assert_array_equal(model.doc_positions(doc_ids), [[0, 1, 2, 0, 1, 0, 0], [0, 1, 2, 3, 4, 5, 6]])


def test_doc_mask_is_block_diagonal_with_the_diagonal_allowed():
    doc_ids = np.array([[0, 0, 1, 1, 1, 2]])
    m = layers.doc_mask(doc_ids, np.float64)[0, 0]
    assert (np.diag(m) == 0).all()
    assert m[1, 0] == 0 and m[4, 2] == 0
    assert m[2, 1] == -np.inf and m[5, 4] == -np.inf and m[0, 5] == -np.inf


def test_padding_wastes_slots_packing_does_not():
    # Documents of 3 and 10 tokens (+ EOS) in windows of T+1 = 8: padding uses 1 + 2 windows.
    useful, slots = data.pad_documents([3, 10], 7)
    assert (useful, slots) == (15, 24)
    frac = data.packing_useful_fraction([3, 10], 7)
    assert frac["padded"] == 15 / 24 and frac["packed"] == 15 / 16


def test_every_param_gradient_matches_finite_differences_with_doc_mask_and_position_reset():
    # As tests/test_model.py's check, with the block-diagonal mask and reset positions on:
    # float64, centred differences, h = 1e-5, per-tensor error relative to its largest gradient < 1e-6.
    params = model.init_params(CFG, 0, dtype=np.float64)
    rng = np.random.default_rng(1)
    for name in params:
        params[name] += 0.1 * rng.standard_normal(params[name].shape)
    x, y = packed_batch(2, 8, seed=2)
    doc_ids = data.doc_ids_from_eos(x, EOS)
    assert doc_ids.max() >= 2  # several documents per row: the mask really cuts
    _, grads = model.doc_loss_and_grads(params, CFG, x, y, doc_ids, reset_positions=True)
    h = 1e-5
    for name, p in params.items():
        numeric = np.zeros_like(p)
        for i in np.ndindex(p.shape):
            old = p[i]
            p[i] = old + h
            plus = doc_loss(params, x, y, doc_ids)
            p[i] = old - h
            minus = doc_loss(params, x, y, doc_ids)
            p[i] = old
            numeric[i] = (plus - minus) / (2 * h)
        scale = max(np.abs(numeric).max(), np.abs(grads[name]).max())
        assert scale > 0, name
        err = np.abs(numeric - grads[name]).max() / scale
        assert err < 1e-6, f"{name}: relative error {err:.2e}"
    # With positions reset, no position past the longest document in a row gets gradient.
    longest = max(np.bincount(row).max() for row in doc_ids)
    assert (grads["wpe"][longest:] == 0).all()


def test_doc_mask_stops_leaks_across_documents():
    # Change one token of document A; with the mask, no logit of a later document B moves at all;
    # without it, every position after the change (in B too) moves.
    params = model.init_params(CFG, 0, dtype=np.float64)
    T = CFG.block_size
    rng = np.random.default_rng(0)
    x = rng.integers(0, EOS, (2, T))
    x[:, 30] = EOS  # A is positions 0..30, B is 31..63
    t = 10
    x2 = x.copy()
    x2[:, t] = (x2[:, t] + 1) % EOS
    doc_ids = data.doc_ids_from_eos(x, EOS)
    masked = model.doc_forward(params, CFG, x, doc_ids)[0]
    masked2 = model.doc_forward(params, CFG, x2, doc_ids)[0]
    np.testing.assert_array_equal(masked[:, 31:], masked2[:, 31:])  # B untouched, exactly
    assert (np.abs(masked[:, t:31] - masked2[:, t:31]).max(axis=-1) > 0).all()  # A itself sees it
    plain = model.forward_logits(params, CFG, x)
    plain2 = model.forward_logits(params, CFG, x2)
    assert (np.abs(plain[:, 31:] - plain2[:, 31:]).max(axis=-1) > 0).all()  # without: B sees A


def test_doc_mask_with_one_document_changes_nothing():
    params = model.init_params(CFG, 0, dtype=np.float64)
    x, _ = packed_batch(2, 16)
    x[x == EOS] = 0
    doc_ids = data.doc_ids_from_eos(x, EOS)
    np.testing.assert_allclose(
        model.doc_forward(params, CFG, x, doc_ids, reset_positions=True)[0],
        model.forward_logits(params, CFG, x), rtol=0, atol=1e-12)


def test_mixture_batch_follows_the_weights():
    a = np.zeros(500, dtype=np.uint8)
    b = np.ones(500, dtype=np.uint8)
    x, y, which = data.mixture_batch([a, b], [0.25, 0.75], 4000, 8, np.random.default_rng(0))
    assert abs(which.mean() - 0.75) < 0.03  # 4,000 draws: sd of the fraction is 0.007
    assert (x[which == 0] == 0).all() and (x[which == 1] == 1).all()
