"""Gradient compressors for slow links: top-k, uniform quantisation, error feedback, and their bytes.

A worker on a slow link sends less than its whole float32 gradient. Three ways, each with its
byte count per worker per sync:

  top-k sparsification  send only the k entries of largest magnitude, as (position, value)
                        pairs: k * (index_bytes + 4) bytes, so at k = n it costs more than
                        sending the dense vector (Aji & Heafield 2017; Lin et al. 2018, "Deep
                        Gradient Compression");
  uniform quantisation  each entry as a `bits`-bit code with one float32 scale per vector
                        (pylib.systems.quantise, chapter 9): n * bits / 8 + 4 bytes;
  error feedback        what a compressor dropped is kept in a residual and added to the next
                        vector before compressing, so it is sent later instead of lost (Seide et
                        al. 2014; Karimireddy et al. 2019). Over many steps, what was sent plus
                        what is still held equals what came in.

Why compressed vectors are all-gathered: a ring all-reduce adds chunks as they travel, which
works only if every worker's chunk c covers the same positions in the same format. Top-k picks
different positions on each worker, and each worker's quantised vector has its own scale, so
the sums cannot be formed on the way: every worker's payload travels to every other worker
(an all-gather) and is decoded at the end. Each worker's wire bytes are then (W - 1) * payload,
growing with W, against the ring's 2 (W - 1) / W * n * 4, which does not
(`sync_wire_bytes`; pylib.systems.collectives counts both).

Legend: n elements in the flat vector, k kept entries, W workers, e the residual (n,).
"""

import numpy as np

from pylib.systems import collectives, quantise

VALUE_BYTES = 4  # float32 values
INDEX_BYTES = 4  # int32 positions (enough for n < 2**31; DeMo's reference sends int64)

# ---------------------------------------------------------------------------
# Top-k


def check_k(k, n):
    """k as an int in [1, n], or ValueError."""
    if isinstance(k, bool) or not float(k) == int(k) or not 1 <= int(k) <= n:
        raise ValueError(f"k must be a whole number from 1 to n = {n}, got {k!r}")
    return int(k)


def topk_compress(x, k):
    """The k entries of largest |x|: (positions int64 (k,) ascending, values float32 (k,))."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)  # (n,)
    k = check_k(k, x.size)
    idx = np.sort(np.argpartition(-np.abs(x), k - 1)[:k])  # (k,) the k largest magnitudes
    return idx, x[idx]


def topk_decompress(idx, values, n):
    """The dense (n,) float32 vector with values at idx and zeros elsewhere."""
    out = np.zeros(n, dtype=np.float32)
    out[idx] = values
    return out


def topk_bytes(k, index_bytes=INDEX_BYTES, value_bytes=VALUE_BYTES):
    """Payload of one top-k vector: every kept entry sends its position and its value."""
    return int(k) * (index_bytes + value_bytes)


def dense_bytes(n, value_bytes=VALUE_BYTES):
    """Payload of the dense float32 vector."""
    return int(n) * value_bytes


# ---------------------------------------------------------------------------
# Uniform quantisation (chapter 9's), with the amax of each vector as its full scale


def quantise_compress(x, bits):
    """x rounded to `bits`-bit levels between +-amax(x): the decoded float32 (n,) vector (zeros stay zeros)."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    if not np.any(x):
        return np.zeros_like(x)
    xq, _ = quantise.quantise_uniform(x, bits, quantise.amax_full_scale(x))
    return xq


def quantise_bytes(n, bits):
    """Payload of one quantised vector: n codes of `bits` bits (rounded up to whole bytes) and one float32 scale."""
    return -(-int(n) * int(bits) // 8) + quantise.SCALE_BYTES


# ---------------------------------------------------------------------------
# Error feedback


def error_feedback_step(grad, residual, compress):
    """One step of error feedback: (what is sent, the new residual).

    v = grad + residual; sent = compress(v); new residual = v - sent. compress maps a flat
    float32 vector to its decoded (dense) approximation."""
    v = np.asarray(grad, dtype=np.float32).reshape(-1) + residual  # (n,)
    sent = compress(v)
    return sent, v - sent


def topk_compressor(k):
    """compress(v) for error_feedback_step: v's top-k entries, dense, zeros elsewhere."""
    return lambda v: topk_decompress(*topk_compress(v, k), v.size)


def quantise_compressor(bits):
    """compress(v) for error_feedback_step: v quantised to `bits` bits at its amax."""
    return lambda v: quantise_compress(v, bits)


# ---------------------------------------------------------------------------
# Bytes on the wire per worker per sync


def sync_wire_bytes(kind, n, workers, payload_bytes=None):
    """Bytes each worker sends in one sync of an n-element vector over W workers.

    kind "all_reduce": the dense float32 vector on a ring, 2 (W-1)/W * 4n (collectives.traffic);
    kind "all_gather": a compressed payload that differs per worker, (W-1) * payload_bytes."""
    w = collectives.check_workers(workers)
    if kind == "all_reduce":
        return collectives.traffic("ring_all_reduce", n, w, itemsize=VALUE_BYTES)["wire_bytes"]
    if kind == "all_gather":
        if payload_bytes is None:
            raise ValueError("an all-gather needs the payload's bytes")
        return collectives.traffic("all_gather", payload_bytes, w, itemsize=1)["wire_bytes"]
    raise ValueError(f"unknown sync {kind!r}: all_reduce or all_gather")


def sync_seconds(kind, n, workers, alpha, beta, payload_bytes=None):
    """Time of one sync in the alpha-beta model (alpha s per message, beta s per byte).

    all_reduce: the ring, 2 (W-1) alpha + 2 (W-1)/W * 4n beta; all_gather of per-worker payloads
    P: (W-1) alpha + (W-1) P beta (collectives.ring_all_gather_time on the gathered W P bytes)."""
    w = collectives.check_workers(workers)
    if kind == "all_reduce":
        return collectives.ring_all_reduce_time(dense_bytes(n), w, alpha, beta)
    if kind == "all_gather":
        return collectives.ring_all_gather_time(w * payload_bytes, w, alpha, beta)
    raise ValueError(f"unknown sync {kind!r}: all_reduce or all_gather")
