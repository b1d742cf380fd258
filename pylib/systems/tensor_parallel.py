"""Tensor parallelism: each layer's matrices split across devices (Shoeybi et al. 2019, Megatron-LM).

An MLP is two matmuls. The first is split by column (each device holds some of the hidden units
and computes them from the whole input); the second by row (each device multiplies its hidden
units by its rows of the second matrix and holds a partial sum of the output). One all-reduce adds
the partial outputs. Megatron calls the two conjugate operators f and g (section 3, Figure 3):

    f: identity in the forward, all-reduce in the backward  (before the column-split matmul)
    g: all-reduce in the forward, identity in the backward  (after the row-split matmul)

Attention is split the same way by heads: c_attn by column (each device computes its heads'
q, k, v), c_proj by row. So a block does two all-reduces in the forward and two in the backward,
each of one (B, T, C) activation.

`worked_example` is seed 000's two-device FFN ([2, -1] in, [9, 6] out); `tp_loss_and_grads`
runs the course model with every block split across `tp` simulated devices, summing with
pylib.systems.collectives.ring_all_reduce, and logs every all-reduce.

Legend: B batch, T time, C n_embd, H n_head, D head size, tp devices, d device index.
"""

import numpy as np

from pylib import layers, loss as xent, model
from pylib.systems import collectives

# ---------------------------------------------------------------------------
# Seed 000's worked example: two devices, one FFN, x = [2, -1] -> y = [9, 6]

# The seed gives only the input and the output; these integer matrices are the course's choice of
# one FFN that maps one to the other (y = relu(x W1) W2, row-vector convention).
EXAMPLE_W1 = np.array([[2.0, 1.0], [1.0, 0.0]])  # (in, hidden): column k goes to device k
EXAMPLE_W2 = np.array([[1.0, 2.0], [3.0, 0.0]])  # (hidden, out): row k goes to device k
EXAMPLE_X = np.array([2.0, -1.0])
EXAMPLE_DY = np.array([1.0, 1.0])  # the upstream gradient followed back in the backward


def worked_example(x=EXAMPLE_X, w1=EXAMPLE_W1, w2=EXAMPLE_W2, dy=EXAMPLE_DY):
    """Two devices compute relu(x W1) W2: column split, row split, one all-reduce each way.

    Returns every intermediate per device, the two all-reduces' results, and the unsplit answer."""
    devices = []
    for d in range(2):
        h = max(float(x @ w1[:, d]), 0.0)  # device d's hidden unit: x times its column of W1
        partial_y = h * w2[d]  # its row of W2: a partial sum of the whole output
        devices.append({"w1_column": w1[:, d].tolist(), "w2_row": w2[d].tolist(), "h": h,
                        "partial_y": partial_y.tolist()})
    y = sum(np.array(dv["partial_y"]) for dv in devices)  # g: the forward all-reduce
    for d, dv in enumerate(devices):
        dh = float(dy @ w2[d]) * (dv["h"] > 0)  # dy is replicated (g's backward is the identity)
        dv["dh"] = dh
        dv["partial_dx"] = (dh * w1[:, d]).tolist()  # a partial sum of the input gradient
    dx = sum(np.array(dv["partial_dx"]) for dv in devices)  # f: the backward all-reduce
    h_full = np.maximum(x @ w1, 0.0)
    y_full = h_full @ w2
    dx_full = ((dy @ w2.T) * (h_full > 0)) @ w1.T
    return {"x": x.tolist(), "devices": devices, "y": y.tolist(), "dx": dx.tolist(),
            "y_unsplit": y_full.tolist(), "dx_unsplit": dx_full.tolist(), "dy": dy.tolist(),
            "all_reduces": {"forward": 1, "backward": 1}}


# ---------------------------------------------------------------------------
# The course model's block, split across tp devices


def _all_reduce(parts, log, where):
    """Sum the devices' partial (B, T, C) arrays on the ring; log the collective and its bytes."""
    results, sent = collectives.ring_all_reduce(parts)
    log.append({"where": where, "elements": int(parts[0].size), "bytes": int(parts[0].nbytes),
                "wire_elements_per_device": max(sent)})
    return results[0].astype(parts[0].dtype, copy=False)


def shard_block(cfg, params, n, tp):
    """Device d's slices of block n's matrices: heads d*H/tp.. of c_attn/c_proj, hidden units of the MLP."""
    C, H = cfg.n_embd, cfg.n_head
    if tp < 1 or H % tp or (4 * C) % tp:
        raise ValueError(f"tp ({tp}) must divide the heads ({H}) and the MLP width ({4 * C})")
    Cl, Fl = C // tp, 4 * C // tp
    p = params
    shards = []
    for d in range(tp):
        rows = np.concatenate([np.arange(k * C + d * Cl, k * C + (d + 1) * Cl) for k in range(3)])  # q, k, v
        cols = slice(d * Cl, (d + 1) * Cl)
        hid = slice(d * Fl, (d + 1) * Fl)
        shards.append({
            "attn.c_attn.weight": p[n + "attn.c_attn.weight"][rows],  # (3C/tp, C): column-parallel
            "attn.c_attn.bias": p[n + "attn.c_attn.bias"][rows],
            "attn.c_attn.rows": rows,
            "attn.c_proj.weight": p[n + "attn.c_proj.weight"][:, cols],  # (C, C/tp): row-parallel
            "mlp.c_fc.weight": p[n + "mlp.c_fc.weight"][hid],  # (4C/tp, C): column-parallel
            "mlp.c_fc.bias": p[n + "mlp.c_fc.bias"][hid],
            "mlp.c_fc.rows": hid,
            "mlp.c_proj.weight": p[n + "mlp.c_proj.weight"][:, hid],  # (C, 4C/tp): row-parallel
            "attn.c_proj.cols": cols,
        })
    return shards


def tp_block_forward(cfg, params, n, h, tp, log):
    """Pre-LN block n with attention heads and MLP units split across tp devices -> (h, cache)."""
    if cfg.norm_position != "pre" or cfg.qk_norm or cfg.norm != "layernorm" or not cfg.bias:
        raise ValueError("the tensor-parallel block implements the course model's GPT-2 block only")
    p = params
    shards = shard_block(cfg, params, n, tp)
    H = cfg.n_head // tp
    a, c_ln1 = model.norm_forward(cfg, p, n + "ln_1", h)  # replicated: every device holds a
    parts, c_attn = [], []
    for sh in shards:
        qkv, c1 = layers.linear_forward(a, sh["attn.c_attn.weight"], sh["attn.c_attn.bias"])  # (B, T, 3C/tp)
        y, c2 = layers.attention_forward(qkv, H, None, cfg.attn_scale)  # (B, T, C/tp): its own heads
        part, c3 = layers.linear_forward(y, sh["attn.c_proj.weight"], None)  # (B, T, C): a partial sum
        parts.append(part)
        c_attn.append((c1, c2, c3))
    y = _all_reduce(parts, log, "forward: attention output (g)") + p[n + "attn.c_proj.bias"]
    h = h + y
    m, c_ln2 = model.norm_forward(cfg, p, n + "ln_2", h)
    parts, c_mlp = [], []
    for sh in shards:
        u, c1 = layers.linear_forward(m, sh["mlp.c_fc.weight"], sh["mlp.c_fc.bias"])  # (B, T, 4C/tp)
        u, c2 = layers.gelu_forward(u)
        part, c3 = layers.linear_forward(u, sh["mlp.c_proj.weight"], None)  # (B, T, C): a partial sum
        parts.append(part)
        c_mlp.append((c1, c2, c3))
    h = h + _all_reduce(parts, log, "forward: MLP output (g)") + p[n + "mlp.c_proj.bias"]
    return h, (shards, c_ln1, c_attn, c_ln2, c_mlp)


def tp_block_backward(cfg, g, n, dh, cache, log):
    """Backward of tp_block_forward: each device's weight grads are put back in place; returns dh."""
    shards, c_ln1, c_attn, c_ln2, c_mlp = cache
    C = cfg.n_embd
    g[n + "mlp.c_fc.weight"] = np.empty((4 * C, C), dh.dtype)
    g[n + "mlp.c_fc.bias"] = np.empty(4 * C, dh.dtype)
    g[n + "mlp.c_proj.weight"] = np.empty((C, 4 * C), dh.dtype)
    g[n + "mlp.c_proj.bias"] = layers.colsum(dh.reshape(-1, C))  # replicated bias: same on each device
    parts = []
    for sh, (c1, c2, c3) in zip(shards, c_mlp):
        du, dw, _ = layers.linear_backward(dh, c3)  # dh is replicated: g's backward is the identity
        g[n + "mlp.c_proj.weight"][:, sh["mlp.c_fc.rows"]] = dw
        du = layers.gelu_backward(du, c2)
        dm, dw, db = layers.linear_backward(du, c1)  # dm: this device's partial input gradient
        g[n + "mlp.c_fc.weight"][sh["mlp.c_fc.rows"]] = dw
        g[n + "mlp.c_fc.bias"][sh["mlp.c_fc.rows"]] = db
        parts.append(dm)
    dm = _all_reduce(parts, log, "backward: MLP input gradient (f)")
    dh = dh + model.norm_backward(cfg, g, n + "ln_2", dm, c_ln2)
    g[n + "attn.c_attn.weight"] = np.empty((3 * C, C), dh.dtype)
    g[n + "attn.c_attn.bias"] = np.empty(3 * C, dh.dtype)
    g[n + "attn.c_proj.weight"] = np.empty((C, C), dh.dtype)
    g[n + "attn.c_proj.bias"] = layers.colsum(dh.reshape(-1, C))
    parts = []
    for sh, (c1, c2, c3) in zip(shards, c_attn):
        dy, dw, _ = layers.linear_backward(dh, c3)
        g[n + "attn.c_proj.weight"][:, sh["attn.c_proj.cols"]] = dw
        dqkv = layers.attention_backward(dy, c2)
        da, dw, db = layers.linear_backward(dqkv, c1)
        g[n + "attn.c_attn.weight"][sh["attn.c_attn.rows"]] = dw
        g[n + "attn.c_attn.bias"][sh["attn.c_attn.rows"]] = db
        parts.append(da)
    da = _all_reduce(parts, log, "backward: attention input gradient (f)")
    return dh + model.norm_backward(cfg, g, n + "ln_1", da, c_ln1)


def tp_loss_and_grads(params, cfg, x, y, tp):
    """The course model with every block split across tp devices -> (loss, grads, all-reduce log).

    Embeddings, norms and the head are replicated (computed identically on every device), as in
    Megatron-LM's GPT (the vocabulary split of the embedding is left out: V = 65 here)."""
    p = params
    log = []
    B, T = x.shape
    tok, c_tok = layers.embedding_forward(x, p["wte"])
    h = tok + p["wpe"][:T]  # (B, T, C)
    caches = []
    for l in range(cfg.n_layer):
        h, c = tp_block_forward(cfg, p, f"h.{l}.", h, tp, log)
        caches.append(c)
    f, c_lnf = model.norm_forward(cfg, p, "ln_f", h)
    logits, c_head = layers.linear_forward(f, p["wte"], None)
    loss, c_loss = xent.cross_entropy_forward(logits, y)
    g = {}
    df, dwte, _ = layers.linear_backward(xent.cross_entropy_backward(c_loss), c_head)
    dh = model.norm_backward(cfg, g, "ln_f", df, c_lnf)
    for l in reversed(range(cfg.n_layer)):
        dh = tp_block_backward(cfg, g, f"h.{l}.", dh, caches[l], log)
    g["wpe"] = np.zeros_like(p["wpe"])
    g["wpe"][:T] = dh.sum(axis=0)
    g["wte"] = dwte + layers.embedding_backward(dh, c_tok)
    return loss, {name: g[name] for name in model.param_shapes(cfg)}, log


def all_reduces_per_block(cfg, batch, seq, tp, itemsize=4):
    """The closed form: 2 forward + 2 backward all-reduces of a (B, T, C) activation per block,
    each device sending 2(tp-1)/tp of it on the ring."""
    n = batch * seq * cfg.n_embd
    t = collectives.traffic("ring_all_reduce", n, tp, itemsize)
    return {"count": 4, "forward": 2, "backward": 2, "bytes_each": n * itemsize,
            "wire_bytes_each_per_device": t["wire_bytes"], "bytes_per_block": 4 * n * itemsize}
