"""Context parallelism (ring attention; all-gather with causal balance) and expert parallelism's
all-to-all, on the course model's shapes.

Context parallelism cuts the sequence into P blocks, one per device. Each device keeps its block
of queries and passes its block of keys and values round a ring; after P - 1 passes every query
block has met every key block, and an online softmax (a running max, a running sum and a running
weighted sum of values, rescaled when the max grows; Milakov & Gimelshein 2018, as FlashAttention
uses it, Dao et al. 2022 section 3.1) gives exactly softmax(q k^T) v without any device ever
holding the whole (T, T) score matrix. Ring Attention is Liu et al. 2023. Causal masking makes
the blocks above the diagonal empty; they are skipped, so with contiguous blocks the device holding
the last queries works about 2P - 1 times as long as the one holding the first. Llama 3 (section 3.3.2)
removes the imbalance and the ring both: it cuts the sequence into 2P chunks, gives device i chunks
i and 2P - 1 - i, all-gathers the keys and values (small under grouped-query attention) and lets
each device attend with its own queries (`allgather_attention`).

Expert parallelism puts each expert of a mixture-of-experts layer on one device; each token is
sent to the devices of its top-k experts and the results are sent back: two all-to-alls per MoE
layer (Lepikhin et al. 2020, GShard). `all_to_all_bytes` counts what a given routing sends.

Legend: B batch, T time, C n_embd, H heads, D head size, P devices (blocks), Tb = T / P.
"""

import numpy as np

# ---------------------------------------------------------------------------
# Ring attention


def ring_attention(qkv, n_head, devices, scale=None):
    """Causal attention of nanoGPT's qkv (B, T, 3C) computed blockwise on a ring -> (y (B, T, C), log).

    Equals pylib.layers.attention_forward(qkv, n_head)[0] to rounding. log: per ring step, which
    key block each device used, and the bytes of keys and values each device sent on."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_head
    P = devices
    if P < 1 or T % P:
        raise ValueError(f"the sequence length ({T}) must split evenly across {P} devices")
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    Tb = T // P
    q, k, v = qkv.reshape(B, T, 3, n_head, D).transpose(2, 0, 3, 1, 4)  # 3 x (B, H, T, D)
    q = q * scale
    blocks = lambda a: [a[:, :, i * Tb:(i + 1) * Tb] for i in range(P)]  # noqa: E731
    qs, kv = blocks(q), list(zip(blocks(k), blocks(v)))  # device i holds qs[i] and, at first, kv[i]
    run_max = [np.full((B, n_head, Tb, 1), -np.inf, q.dtype) for _ in range(P)]
    run_sum = [np.zeros((B, n_head, Tb, 1), q.dtype) for _ in range(P)]
    acc = [np.zeros((B, n_head, Tb, D), q.dtype) for _ in range(P)]
    inner = np.where(np.triu(np.ones((Tb, Tb), bool), 1), -np.inf, 0.0).astype(q.dtype)  # diagonal block
    log = []
    held = list(range(P))  # which key/value block device i holds now
    for step in range(P):
        used = []
        for i in range(P):
            j = held[i]
            if j > i:  # every key in block j comes after every query in block i
                used.append(None)
                continue
            kj, vj = kv[j]
            s = qs[i] @ kj.transpose(0, 1, 3, 2)  # (B, H, Tb, Tb)
            if j == i:
                s = s + inner
            new_max = np.maximum(run_max[i], s.max(axis=-1, keepdims=True))
            rescale = np.exp(run_max[i] - new_max)  # the old terms, measured from the new max
            e = np.exp(s - new_max)
            run_sum[i] = run_sum[i] * rescale + e.sum(axis=-1, keepdims=True)
            acc[i] = acc[i] * rescale + e @ vj
            run_max[i] = new_max
            used.append(j)
        sent = 0
        if step < P - 1:  # pass the key/value blocks one device to the right
            held = [held[(i - 1) % P] for i in range(P)]
            sent = 2 * B * Tb * C * q.itemsize
        log.append({"step": step, "key_blocks": used, "bytes_sent_per_device": sent})
    yh = np.concatenate([acc[i] / run_sum[i] for i in range(P)], axis=2)  # (B, H, T, D)
    return yh.transpose(0, 2, 1, 3).reshape(B, T, C), log


# ---------------------------------------------------------------------------
# All-gather context parallelism with causal load balancing (Llama 3, section 3.3.2)


def cp_chunks(devices, balanced=True):
    """Which of the sequence's chunks each device holds: balanced, device i holds chunks i and
    2P - 1 - i of 2P; contiguous, device i holds chunk i of P."""
    P = devices
    return [[i, 2 * P - 1 - i] for i in range(P)] if balanced else [[i] for i in range(P)]


def causal_pairs_per_device(T, devices, balanced=True):
    """(query, key) pairs the causal mask keeps for each device's queries: its share of the work."""
    chunks = cp_chunks(devices, balanced)
    n = T // len(sum(chunks, []))  # positions per chunk
    return [sum(sum(c * n + t + 1 for t in range(n)) for c in cs) for cs in chunks]


def allgather_attention(qkv, n_head, devices, scale=None, balanced=True):
    """Causal attention of qkv (B, T, 3C) with the sequence split over devices, keys and values
    all-gathered -> (y (B, T, C), log).

    Each device holds the queries, keys and values of its chunks (cp_chunks), all-gathers everyone's
    keys and values, and attends with its own queries to every earlier position. log: each device's
    chunks, its (query, key) pairs under the mask, and the bytes it sends in the all-gather."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_head
    chunks = cp_chunks(devices, balanced)
    parts = len(sum(chunks, []))
    if devices < 1 or T % parts:
        raise ValueError(f"the sequence length ({T}) must split into {parts} equal chunks for {devices} devices")
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    n = T // parts
    q, k, v = qkv.reshape(B, T, 3, n_head, D).transpose(2, 0, 3, 1, 4)  # 3 x (B, H, T, D)
    y = np.zeros((B, n_head, T, D), q.dtype)
    log = []
    for i, cs in enumerate(chunks):
        pos = np.concatenate([np.arange(c * n, (c + 1) * n) for c in cs])  # this device's query positions
        # the all-gather: every device's keys and values, put back in sequence order
        s = (q[:, :, pos] * scale) @ k.transpose(0, 1, 3, 2)  # (B, H, len(pos), T)
        keep = pos[:, None] >= np.arange(T)[None, :]
        s = np.where(keep, s, -np.inf)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        y[:, :, pos] = (e / e.sum(axis=-1, keepdims=True)) @ v
        log.append({"device": i, "chunks": cs, "pairs": int(keep.sum()),
                    "allgather_bytes_sent": 2 * B * len(pos) * C * q.itemsize * (devices - 1)})
    return y.transpose(0, 2, 1, 3).reshape(B, T, C), log


# ---------------------------------------------------------------------------
# Expert parallelism


def all_to_all_bytes(expert_ids, experts, devices, d_model, itemsize=2):
    """Bytes each device sends in one MoE layer's dispatch all-to-all (the combine sends as many back).

    expert_ids (devices, N, k): the top-k experts of each of the N tokens on each device; experts
    are spread evenly, expert e living on device e // (experts / devices). A token's copy leaves
    its device when its expert lives elsewhere. Returns per-device bytes and the uniform-routing
    expectation N k (P - 1) / P d_model itemsize."""
    ids = np.asarray(expert_ids)
    if experts % devices:
        raise ValueError(f"the experts ({experts}) must spread evenly over {devices} devices")
    per = experts // devices
    P, N, k = ids.shape
    home = np.arange(P)[:, None, None]
    leaving = (ids // per) != home  # (P, N, k)
    sent = leaving.reshape(P, -1).sum(axis=1) * d_model * itemsize
    return {"bytes_per_device": sent.tolist(),
            "uniform_expectation": N * k * (P - 1) / P * d_model * itemsize}
