"""Collectives in pure NumPy: ring all-reduce, reduce-scatter, all-gather, a naive all-reduce,
Rabenseifner's halving/doubling, a binomial tree, a two-level (node, cluster) all-reduce, and their costs.

p simulated workers each hold an array; a collective moves chunks between them as messages and
counts every element sent. The ring all-reduce is a reduce-scatter followed by an all-gather:
the flat vector is cut into p chunks; in each of p-1 reduce-scatter steps every worker sends one
chunk to its right-hand neighbour, who adds it to its own copy, so worker i ends holding the full
sum of chunk i; in p-1 all-gather steps the finished chunks travel once more round the ring and
are copied. Each worker sends 2(p-1)/p of the vector, whatever p is.

Two byte counts per worker (chapter 11, "Payload vs wire bytes"):
  payload bytes: what the worker puts into the collective (its vector, or its shard for all-gather);
  wire bytes:    what it actually sends, forwarding included.
In an all-gather a worker originates one shard but forwards p-2 others, so its wire bytes are
(p-1) shards: they grow with p while its payload stays one shard.

Costs use the alpha-beta (latency-bandwidth) model, t = alpha + n*beta per message of n bytes,
counted step by step from the algorithms below; the reduction's arithmetic and contention are left out.

Legend: p workers, n elements in the full vector, k elements in one shard, c chunk index.
"""

import math

import numpy as np

# ---------------------------------------------------------------------------
# Chunks


def chunk_bounds(n, p):
    """[(start, stop)] of the p chunks of a length-n vector (np.array_split's sizes: first ones 1 longer)."""
    base, extra = divmod(int(n), int(p))
    out, start = [], 0
    for c in range(int(p)):
        stop = start + base + (1 if c < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def check_workers(p, low=1, high=1024):
    """p as an int, or ValueError saying what is wrong (0, NaN, 1e9, 2.5, text...)."""
    if isinstance(p, bool):
        raise ValueError(f"number of workers must be a whole number, got {p!r}")
    try:
        f = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"number of workers must be a whole number, got {p!r}") from None
    if not math.isfinite(f) or f != int(f):
        raise ValueError(f"number of workers must be a whole number, got {p!r}")
    if not low <= f <= high:
        raise ValueError(f"number of workers must be between {low} and {high}, got {p!r}")
    return int(f)


def _flat_inputs(vectors):
    """The workers' arrays as flat float copies, checked to share one shape: (list of (n,), shape)."""
    if len(vectors) < 1:
        raise ValueError("a collective needs at least one worker")
    shape = np.shape(vectors[0])
    for v in vectors:
        if np.shape(v) != shape:
            raise ValueError(f"every worker's array must have the same shape; got {np.shape(v)} and {shape}")
    return [np.array(v, copy=True).reshape(-1) for v in vectors], shape


# ---------------------------------------------------------------------------
# The ring, one step at a time


def ring_all_reduce_steps(vectors):
    """Yield the ring all-reduce's 2(p-1) steps; each a dict of the messages sent and the buffers after it.

    Step dict: phase ("reduce-scatter" or "all-gather"), step (0-based within the phase),
    messages [(src, dst, chunk, elements)], buffers (the p flat arrays, live: copy to keep),
    have[i][c] (how many workers' values worker i's chunk c holds), sent[i] (elements so far).
    Reduce-scatter step s: worker i sends chunk (i-s-1) mod p to worker i+1, who adds it in;
    after p-1 steps worker i holds the whole sum of chunk i. All-gather step s: worker i sends
    chunk (i-s) mod p, and the receiver copies it.
    """
    bufs, _ = _flat_inputs(vectors)
    p, n = len(bufs), bufs[0].size
    bounds = chunk_bounds(n, p)
    have = [[1] * p for _ in range(p)]
    sent = [0] * p
    for phase in ("reduce-scatter", "all-gather"):
        for s in range(p - 1):
            shift = s + 1 if phase == "reduce-scatter" else s
            messages = []
            # Every worker sends at once: read all outgoing chunks before anyone writes.
            outgoing = []
            for i in range(p):
                c = (i - shift) % p
                a, b = bounds[c]
                outgoing.append((i, (i + 1) % p, c, bufs[i][a:b].copy(), have[i][c]))
            for src, dst, c, data, h in outgoing:
                a, b = bounds[c]
                if phase == "reduce-scatter":
                    bufs[dst][a:b] = data + bufs[dst][a:b]  # the running sum arrives, the receiver adds its own
                    have[dst][c] += h
                else:
                    bufs[dst][a:b] = data  # a finished chunk: copied, bit for bit
                    have[dst][c] = h
                sent[src] += b - a
                messages.append((src, dst, c, b - a))
            yield {"phase": phase, "step": s, "messages": messages, "buffers": bufs,
                   "have": [row[:] for row in have], "sent": sent[:]}


def ring_all_reduce(vectors):
    """Sum p equal-shape arrays on a ring: (list of p results, list of elements each worker sent)."""
    bufs, shape = _flat_inputs(vectors)
    sent = [0] * len(bufs)
    for step in ring_all_reduce_steps(bufs):
        bufs, sent = step["buffers"], step["sent"]
    return [b.reshape(shape) for b in bufs], sent


def reduce_scatter(vectors):
    """Ring reduce-scatter: (list of p shards, worker i's being the sum of chunk i; elements each sent)."""
    bufs, _ = _flat_inputs(vectors)
    p = len(bufs)
    bounds = chunk_bounds(bufs[0].size, p)
    sent = [0] * p
    for step in ring_all_reduce_steps(bufs):
        if step["phase"] == "all-gather":
            break
        bufs, sent = step["buffers"], step["sent"]
    return [bufs[i][a:b].copy() for i, (a, b) in enumerate(bounds)], sent


def all_gather(shards):
    """Ring all-gather of one 1-D shard per worker (sizes may differ): (p copies of the concatenation, elements each sent).

    Step s: worker i sends shard (i-s) mod p to worker i+1. Worker i sends every shard but
    shard i+1's, so with equal shards of k elements each worker sends (p-1)*k.
    """
    shards = [np.asarray(s).reshape(-1) for s in shards]
    p = len(shards)
    if p < 1:
        raise ValueError("a collective needs at least one worker")
    held = [{i: shards[i].copy()} for i in range(p)]
    sent = [0] * p
    for s in range(p - 1):
        outgoing = [(i, (i - s) % p) for i in range(p)]
        for i, c in outgoing:
            held[(i + 1) % p][c] = held[i][c].copy()
            sent[i] += shards[c].size
    return [np.concatenate([h[c] for c in range(p)]) for h in held], sent


def naive_all_reduce(vectors):
    """Everyone sends its whole vector to everyone else; each adds them in worker order: (results, elements sent)."""
    bufs, shape = _flat_inputs(vectors)
    p, n = len(bufs), bufs[0].size
    total = bufs[0].copy()
    for v in bufs[1:]:
        total = total + v
    return [total.copy().reshape(shape) for _ in range(p)], [(p - 1) * n] * p


# ---------------------------------------------------------------------------
# Other all-reduces: halving/doubling, a binomial tree, and two levels (node, cluster)


def _power_of_two(p):
    if p < 1 or p & (p - 1):
        raise ValueError(f"halving/doubling needs a power-of-two number of workers, not {p}")
    return p.bit_length() - 1


def halving_doubling_all_reduce(vectors):
    """Rabenseifner's all-reduce for p = 2^k workers: (results, elements each sent, steps).

    Reduce-scatter by recursive halving: at distance d = p/2, p/4, ..., 1 worker i swaps half of
    the range it still owns with partner i XOR d (keeping the lower half if i's bit d is 0) and
    adds what it receives; after log2 p steps it owns the sum of chunk i. All-gather by recursive
    doubling reverses it. Each worker sends n/2 + n/4 + ... + n/p twice: 2(p-1)/p n, like the ring,
    in 2 log2 p steps instead of 2(p-1)."""
    bufs, shape = _flat_inputs(vectors)
    p = len(bufs)
    k = _power_of_two(p)
    bounds = chunk_bounds(bufs[0].size, p)
    span = lambda lo, hi: (bounds[lo][0], bounds[hi - 1][1])  # noqa: E731  elements of chunks lo..hi-1
    own = [(0, p)] * p  # the chunk range each worker still reduces
    sent, steps = [0] * p, 0
    for level in range(k):  # recursive halving
        d = p >> (level + 1)
        outgoing = []
        for i in range(p):
            lo, hi = own[i]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if not i & d else ((mid, hi), (lo, mid))
            a, b = span(*give)
            outgoing.append((i, i ^ d, give, bufs[i][a:b].copy(), keep))
        for i, j, give, data, keep in outgoing:
            a, b = span(*give)
            bufs[j][a:b] = bufs[j][a:b] + data
            sent[i] += b - a
            own[i] = keep
        steps += 1
    for level in reversed(range(k)):  # recursive doubling
        d = p >> (level + 1)
        outgoing = [(i, i ^ d, own[i], bufs[i][slice(*span(*own[i]))].copy()) for i in range(p)]
        for i, j, rng, data in outgoing:
            a, b = span(*rng)
            bufs[j][a:b] = data
            sent[i] += b - a
        own = [(min(own[i][0], own[i ^ d][0]), max(own[i][1], own[i ^ d][1])) for i in range(p)]
        steps += 1
    return [b.reshape(shape) for b in bufs], sent, steps


def tree_all_reduce(vectors):
    """A binomial tree: reduce onto worker 0, then broadcast back: (results, elements each sent, steps).

    Reduce step at distance d = 1, 2, 4, ...: worker i with i mod 2d = d sends its whole partial sum
    to i - d. The broadcast runs the same edges backwards. 2 ceil(log2 p) steps of n elements."""
    bufs, shape = _flat_inputs(vectors)
    p, n = len(bufs), bufs[0].size
    sent, steps, d = [0] * p, 0, 1
    while d < p:
        for i in range(d, p, 2 * d):
            bufs[i - d] = bufs[i - d] + bufs[i]
            sent[i] += n
        steps, d = steps + 1, 2 * d
    while d > 1:
        d //= 2
        for i in range(d, p, 2 * d):
            bufs[i] = bufs[i - d].copy()
            sent[i - d] += n
        steps += 1
    return [b.reshape(shape) for b in bufs], sent, steps


def two_level_all_reduce(vectors, per_node):
    """All-reduce over nodes of `per_node` workers (worker w on node w // per_node): a ring
    reduce-scatter inside each node, a ring all-reduce of each shard across the nodes (between the
    workers of equal local rank), a ring all-gather inside each node -> (results, {"intra": elements
    each worker sent inside its node, "inter": between nodes}).

    Only n/per_node of each worker's vector crosses the slow link: 2(N-1)/N n/g, against the flat
    ring's 2(p-1)/p n, most of it between nodes."""
    bufs, shape = _flat_inputs(vectors)
    p, g = len(bufs), int(per_node)
    if g < 1 or p % g:
        raise ValueError(f"{p} workers do not split into nodes of {g}")
    nodes = p // g
    intra, inter = [0] * p, [0] * p
    shards = [None] * p
    for node in range(nodes):
        ws = range(node * g, (node + 1) * g)
        got, s1 = reduce_scatter([bufs[w] for w in ws])
        for j, w in enumerate(ws):
            shards[w], intra[w] = got[j], intra[w] + s1[j]
    for j in range(g):
        ws = [node * g + j for node in range(nodes)]
        got, s2 = ring_all_reduce([shards[w] for w in ws])
        for r, w in enumerate(ws):
            shards[w], inter[w] = got[r], inter[w] + s2[r]
    out = [None] * p
    for node in range(nodes):
        ws = range(node * g, (node + 1) * g)
        full, s3 = all_gather([shards[w] for w in ws])
        for j, w in enumerate(ws):
            out[w], intra[w] = full[j].reshape(shape), intra[w] + s3[j]
    return out, {"intra": intra, "inter": inter}


# ---------------------------------------------------------------------------
# Bytes per worker, closed forms


def traffic(kind, n, p, itemsize=4):
    """{payload_bytes, wire_bytes} per worker of one collective on n elements (k = n per worker for all-gather).

    kind: "ring_all_reduce" (2(p-1)/p n), "reduce_scatter" ((p-1)/p n), "naive_all_reduce"
    ((p-1) n), or "all_gather", where n is each worker's shard and the wire carries (p-1) n.
    Exact when p divides n; the simulations count uneven chunks element by element.
    """
    p = check_workers(p)
    if kind == "ring_all_reduce":
        payload, wire = n, 2 * (p - 1) * n / p
    elif kind == "reduce_scatter":
        payload, wire = n, (p - 1) * n / p
    elif kind == "naive_all_reduce":
        payload, wire = n, (p - 1) * n
    elif kind == "all_gather":
        payload, wire = n, (p - 1) * n
    else:
        raise ValueError(f"unknown collective {kind!r}")
    return {"payload_bytes": payload * itemsize, "wire_bytes": wire * itemsize}


# ---------------------------------------------------------------------------
# The alpha-beta model (seconds; alpha per message, beta per byte, nbytes of the whole vector)


def ring_all_reduce_time(nbytes, p, alpha, beta):
    """2(p-1) alpha + 2 (p-1)/p n beta: the ring's 2(p-1) steps, each moving n/p bytes."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes * beta


def tree_all_reduce_time(nbytes, p, alpha, beta):
    """2 ceil(log2 p) (alpha + n beta): a binomial-tree reduce to one root, then a broadcast back."""
    if p <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(p)) * (alpha + nbytes * beta)


def naive_all_reduce_time(nbytes, p, alpha, beta):
    """(p-1)(alpha + n beta): each worker sends its whole vector to the other p-1, one after another."""
    if p <= 1:
        return 0.0
    return (p - 1) * (alpha + nbytes * beta)


def ring_all_gather_time(nbytes, p, alpha, beta):
    """(p-1) alpha + (p-1)/p n beta, n the gathered result's bytes (each worker's shard is n/p)."""
    if p <= 1:
        return 0.0
    return (p - 1) * alpha + (p - 1) / p * nbytes * beta


def halving_doubling_all_reduce_time(nbytes, p, alpha, beta):
    """2 log2(p) alpha + 2 (p-1)/p n beta (Rabenseifner): the ring's bytes in log2 p steps each way.

    For p not a power of two, ceil(log2 p) steps each way (the extra workers fold in first; that
    fold's extra bytes are left out here)."""
    if p <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(p)) * alpha + 2 * (p - 1) / p * nbytes * beta


def two_level_all_reduce_time(nbytes, nodes, per_node, intra_alpha, intra_beta, inter_alpha, inter_beta):
    """Reduce-scatter and all-gather rings inside a node, a ring all-reduce of n/g across the nodes."""
    g = per_node
    inside = 0.0 if g <= 1 else 2 * ((g - 1) * intra_alpha + (g - 1) / g * nbytes * intra_beta)
    return inside + ring_all_reduce_time(nbytes / g, nodes, inter_alpha, inter_beta)


ALL_REDUCE_TIMES = {"ring": ring_all_reduce_time, "tree": tree_all_reduce_time, "naive": naive_all_reduce_time,
                    "halving_doubling": halving_doubling_all_reduce_time}


def fit_alpha_beta(sizes, seconds, p):
    """(alpha, beta) of the ring all-reduce model through (bytes, seconds) points, least squares on relative error.

    t = alpha * 2(p-1) + beta * 2(p-1)/p * n is linear in (alpha, beta). Each point's row is divided
    by its time, so a 64-byte message counts as much as a 16 MB one (plain least squares would let
    the largest sizes decide alpha too).
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    seconds = np.asarray(seconds, dtype=np.float64)
    A = np.stack([np.full_like(sizes, 2.0 * (p - 1)), 2.0 * (p - 1) / p * sizes], axis=1)  # (m, 2)
    w = 1.0 / seconds
    (alpha, beta), *_ = np.linalg.lstsq(A * w[:, None], seconds * w, rcond=None)
    return float(alpha), float(beta)
