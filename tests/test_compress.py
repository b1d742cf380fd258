"""Compressors: top-k counts positions and values, error feedback loses nothing, and why compressed vectors are all-gathered."""

import numpy as np
import pytest

from pylib.systems import collectives as col
from pylib.systems import compress as cp


def vec(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def test_topk_at_k_equals_n_is_the_dense_vector_and_costs_more_bytes():
    x = vec(5376)
    idx, vals = cp.topk_compress(x, x.size)
    assert np.array_equal(cp.topk_decompress(idx, vals, x.size), x)
    # Every entry sends a position as well as its value: at k = n, top-k costs more than dense.
    assert cp.topk_bytes(x.size) == x.size * (cp.INDEX_BYTES + cp.VALUE_BYTES)
    assert cp.topk_bytes(x.size) > cp.dense_bytes(x.size)


def test_topk_keeps_the_largest_magnitudes():
    x = np.array([0.1, -5.0, 2.0, 0.0, -3.0, 1.0], np.float32)
    idx, vals = cp.topk_compress(x, 3)
    assert idx.tolist() == [1, 2, 4] and vals.tolist() == [-5.0, 2.0, -3.0]
    dense = cp.topk_decompress(idx, vals, x.size)
    assert dense.tolist() == [0.0, -5.0, 2.0, 0.0, -3.0, 0.0]


@pytest.mark.parametrize("k", [0, -1, 7, 2.5, True])
def test_topk_rejects_bad_k(k):
    with pytest.raises(ValueError):
        cp.topk_compress(np.ones(6, np.float32), k)


@pytest.mark.parametrize("compressor", [cp.topk_compressor(20), cp.quantise_compressor(4), cp.quantise_compressor(2)])
def test_error_feedback_sent_plus_residual_equals_the_inputs(compressor):
    # What the compressor drops is sent later: after T steps, all that was sent plus the residual
    # still held equals all that came in (up to float32 rounding of the running sums).
    n, steps = 500, 50
    residual = np.zeros(n, np.float32)
    total_in, total_sent = np.zeros(n), np.zeros(n)
    for t in range(steps):
        g = vec(n, seed=t)
        sent, residual = cp.error_feedback_step(g, residual, compressor)
        total_in += g
        total_sent += sent
        assert not np.array_equal(sent, g)  # something was held back this step
    np.testing.assert_allclose(total_sent + residual, total_in, atol=1e-4)
    # The residual stays bounded: it is re-sent, not accumulated for ever.
    assert np.abs(residual).max() < np.abs(total_in).max()


def test_without_error_feedback_the_dropped_part_is_lost():
    n, steps = 500, 50
    comp = cp.topk_compressor(20)
    total_in, total_sent = np.zeros(n), np.zeros(n)
    for t in range(steps):
        g = vec(n, seed=t)
        total_in += g
        total_sent += comp(g)
    assert np.abs(total_sent - total_in).max() > 1.0


def test_quantise_bytes_counts_codes_and_the_scale():
    assert cp.quantise_bytes(5, 4) == 3 + 4  # five 4-bit codes fill 3 bytes, plus a float32 scale
    assert cp.quantise_bytes(5376, 8) == 5376 + 4
    q = cp.quantise_compress(np.zeros(4, np.float32), 4)
    assert np.array_equal(q, np.zeros(4))


@pytest.mark.parametrize("w", [2, 4, 8])
def test_all_reduce_wire_bytes_match_the_simulated_ring(w):
    n = 5376
    _, sent = col.ring_all_reduce([vec(n, s) for s in range(w)])
    assert sent[0] * cp.VALUE_BYTES == cp.sync_wire_bytes("all_reduce", n, w) == 2 * (w - 1) / w * n * 4


@pytest.mark.parametrize("w", [2, 4, 8])
def test_compressed_vectors_are_all_gathered_and_the_wire_is_w_minus_1_payloads(w):
    n, k = 5376, 168
    payloads = [cp.topk_compress(vec(n, s), k) for s in range(w)]
    # The workers' positions differ, so a ring cannot add chunk c on the way: the chunks do not line up.
    assert len({tuple(idx[:10]) for idx, _ in payloads}) == w
    # All-gather the (positions, values) bytes; every worker decodes all W payloads and sums them.
    blobs = [np.frombuffer(idx.astype(np.int32).tobytes() + vals.tobytes(), np.uint8) for idx, vals in payloads]
    gathered, sent = col.all_gather(blobs)
    payload = cp.topk_bytes(k)
    assert all(b.size == payload for b in blobs)
    assert sent == [(w - 1) * payload] * w == [cp.sync_wire_bytes("all_gather", n, w, payload)] * w
    expect = np.sum([cp.topk_decompress(i, v, n) for i, v in payloads], axis=0)
    for g in gathered:
        got = np.zeros(n, np.float32)
        for blob in np.split(g, w):
            idx = np.frombuffer(blob[:4 * k].tobytes(), np.int32)
            vals = np.frombuffer(blob[4 * k:].tobytes(), np.float32)
            got = got + cp.topk_decompress(idx, vals, n)
        np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)


def test_all_gather_grows_with_workers_and_the_ring_does_not():
    n, payload = 5376, cp.topk_bytes(168)
    ring = [cp.sync_wire_bytes("all_reduce", n, w) for w in (2, 4, 16, 64)]
    gather = [cp.sync_wire_bytes("all_gather", n, w, payload) for w in (2, 4, 16, 64)]
    assert max(ring) < 2 * n * 4  # bounded by twice the vector
    assert gather == [(w - 1) * payload for w in (2, 4, 16, 64)]
    # Past some W the compressed all-gather sends more than the dense ring.
    assert gather[0] < ring[0] and gather[-1] > ring[-1]


@pytest.mark.parametrize("w", [0, 1e9, -3, float("nan"), 2.5])
def test_bad_worker_counts_are_refused(w):
    with pytest.raises(ValueError):
        cp.sync_wire_bytes("all_reduce", 100, w)


def test_sync_seconds_alpha_beta():
    n, w, a, b = 1000, 4, 1e-3, 1e-6
    assert cp.sync_seconds("all_reduce", n, w, a, b) == pytest.approx(2 * 3 * a + 2 * 3 / 4 * 4000 * b)
    assert cp.sync_seconds("all_gather", n, w, a, b, payload_bytes=100) == pytest.approx(3 * a + 3 * 100 * b)


@pytest.mark.parametrize("w,n,bits", [(2, 5376, 8), (4, 5376, 4), (3, 1001, 8), (8, 5376, 8)])
def test_quantised_ring_all_reduce_agrees_everywhere_and_sends_codes(w, n, bits):
    vectors = [vec(n, s) for s in range(w)]
    results, sent = cp.quantised_ring_all_reduce(vectors, bits)
    # The finished chunks travel as codes, unchanged: every worker ends with the same bits.
    assert all(np.array_equal(r, results[0]) for r in results)
    # Each hop rounds the running sum to the chunk's own grid (error <= step / 2, step = amax / q_max);
    # a chunk is rounded W times (W - 1 hops and the owner's), and no partial sum exceeds sum_i max|x_i|.
    exact = np.sum(vectors, axis=0, dtype=np.float64)
    bound = w * sum(np.abs(v).max() for v in vectors) / (2 * (2 ** (bits - 1) - 1))
    err = np.abs(results[0] - exact).max()
    assert 0 < err <= bound
    # Bytes: 2(W-1) messages, each a chunk's codes and one float32 scale; the closed form is the largest.
    assert max(sent) == cp.quantised_all_reduce_bytes(n, w, bits)
    if n % w == 0:
        assert sent == [2 * (w - 1) * (-(-(n // w) * bits // 8) + 4)] * w


def test_quantised_all_reduce_sends_bits_over_32_of_the_ring_and_less_than_the_all_gather():
    n, w = 5376, 4
    ring = cp.sync_wire_bytes("all_reduce", n, w)
    ar8 = cp.quantised_all_reduce_bytes(n, w, 8)
    assert ar8 == ring * 8 / 32 + 2 * (w - 1) * 4  # the ring's bytes at 8 of 32 bits, plus one scale per message
    # The all-gather of the same codes sends (W-1) whole payloads; the ring sends 2(W-1)/W of one.
    assert ar8 < cp.sync_wire_bytes("all_gather", n, w, cp.quantise_bytes(n, 8))
    # More bits, a finer grid: the all-reduced sum lands closer to the exact one.
    vectors = [vec(n, s) for s in range(w)]
    exact = np.sum(vectors, axis=0, dtype=np.float64)
    errs = [np.abs(cp.quantised_ring_all_reduce(vectors, b)[0][0] - exact).max() for b in (4, 8, 16)]
    assert errs[0] > errs[1] > errs[2]


@pytest.mark.parametrize("w", [1, 0, 2.5])
def test_quantised_all_reduce_refuses_bad_worker_counts(w):
    with pytest.raises(ValueError):
        cp.quantised_all_reduce_bytes(100, w, 8)
