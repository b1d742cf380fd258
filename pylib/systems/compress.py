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

Why top-k is all-gathered: a ring all-reduce adds chunks as they travel, which works only if
every worker's chunk c covers the same positions. Top-k picks different positions on each
worker, so the sums cannot be formed on the way: every worker's payload travels to every other
worker (an all-gather) and is decoded at the end. Each worker's wire bytes are then
(W - 1) * payload, growing with W, against the ring's 2 (W - 1) / W * n * 4, which does not
(`sync_wire_bytes`; pylib.systems.collectives counts both).

Quantised vectors keep every position, so they can be all-reduced: each hop decodes the
running sum it receives, adds its own float32 chunk, and quantises the new sum again at that
chunk's own scale before passing it on; the finished chunk is quantised once and forwarded
unchanged. That is INTELLECT-1's int8 all-reduce (Jaghouar et al. 2024; the prime repository,
src/zeroband/C/csrc/collectives.cpp, ring_allreduce: uniform_8bit_quantize before every send,
fast_index_add on receipt). Its wire bytes are the ring's, at bits / 32 of the float32 size,
plus one scale per message (`quantised_ring_all_reduce`, `quantised_all_reduce_bytes`).

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
# A quantised ring all-reduce (INTELLECT-1's int8 all-reduce, at any bit width)


def _quantised_message(x, bits):
    """What one hop puts on the wire for chunk x: (its decoded float32 values, its bytes)."""
    return quantise_compress(x, bits), quantise_bytes(x.size, bits)


def quantised_ring_all_reduce(vectors, bits):
    """Sum W equal-length vectors on a ring whose every message is `bits`-bit codes and one scale.

    Reduce-scatter step s: worker i sends chunk (i - s - 1) mod W, its running sum quantised at the
    chunk's amax; the receiver decodes it and adds its own float32 chunk. After W - 1 steps worker i
    holds the sum of chunk i, quantises it once, and the all-gather forwards those codes unchanged,
    so every worker ends with the same values. Returns (list of W results (n,), bytes each sent)."""
    bufs = [np.asarray(v, dtype=np.float32).reshape(-1).copy() for v in vectors]  # W x (n,)
    w = collectives.check_workers(len(bufs), low=2)
    n = bufs[0].size
    if any(b.size != n for b in bufs):
        raise ValueError("every worker's vector must have the same length")
    bounds = collectives.chunk_bounds(n, w)
    sent = [0] * w
    for s in range(w - 1):  # reduce-scatter: every worker sends at once, so read before writing
        out = []
        for i in range(w):
            a, b = bounds[(i - s - 1) % w]
            out.append((i, a, b, *_quantised_message(bufs[i][a:b], bits)))
        for i, a, b, values, nbytes in out:
            dst = (i + 1) % w
            bufs[dst][a:b] = values + bufs[dst][a:b]
            sent[i] += nbytes
    for i in range(w):  # the owner quantises its finished chunk, so all copies agree bit for bit
        a, b = bounds[i]
        bufs[i][a:b] = quantise_compress(bufs[i][a:b], bits)
    for s in range(w - 1):  # all-gather: worker i forwards chunk (i - s) mod W; codes travel unchanged
        out = []
        for i in range(w):
            a, b = bounds[(i - s) % w]
            out.append((i, a, b, bufs[i][a:b].copy(), quantise_bytes(b - a, bits)))
        for i, a, b, values, nbytes in out:
            bufs[(i + 1) % w][a:b] = values
            sent[i] += nbytes
    return bufs, sent


def quantised_all_reduce_bytes(n, workers, bits):
    """The most wire bytes any worker sends in quantised_ring_all_reduce: worker i sends every chunk
    but chunk i in the reduce-scatter and every chunk but chunk i + 1 in the all-gather, each as
    codes of `bits` bits and one float32 scale; 2 (W - 1) * quantise_bytes(n / W) when W divides n."""
    w = collectives.check_workers(workers, low=2)
    sizes = [b - a for a, b in collectives.chunk_bounds(int(n), w)]
    msg = [quantise_bytes(c, bits) for c in sizes]
    total = sum(msg)
    return max(2 * total - msg[i] - msg[(i + 1) % w] for i in range(w))


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
