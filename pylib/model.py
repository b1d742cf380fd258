"""A GPT-2-style decoder in NumPy, the same architecture as nanoGPT's `GPT` (Karpathy, model.py).

Token and learned position embeddings, n_layer pre-LayerNorm blocks (causal multi-head
self-attention, then a 4x MLP with tanh-GELU, each added to the residual stream), a final
LayerNorm, and an output head tied to the token embedding (Press & Wolf 2017), as in GPT-2.
The default config is the course's 5,376-parameter model.

Parameters are a plain dict of named arrays. The names are nanoGPT's state-dict names without
the "transformer." prefix (e.g. "h.0.attn.c_attn.weight"), and the layout is PyTorch's (a Linear
weight is (out, in)), so pylib.export only renames. `forward` returns (logits, cache) and
`backward(dlogits, cache)` returns a grads dict with the same keys as the params.

Legend: B batch, T time, C n_embd, H n_head, V vocab_size, L n_layer.
"""

import math
from dataclasses import dataclass

import numpy as np

from pylib import layers, loss as xent

# ---------------------------------------------------------------------------
# Config


@dataclass(frozen=True)
class GPTConfig:
    block_size: int = 64  # T max: the context length
    vocab_size: int = 65  # V: 64 characters + end-of-document
    n_layer: int = 1  # L
    n_head: int = 2  # H
    n_embd: int = 16  # C
    bias: bool = True  # biases in Linear layers and LayerNorms, as GPT-2
    dropout: float = 0.0  # kept for nanoGPT parity; this library implements only 0
    gelu: str = "tanh"  # GELU's tanh approximation (GPT-2's; PyTorch approximate='tanh')
    ln_eps: float = 1e-5  # LayerNorm epsilon, PyTorch's default

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError("n_embd must be divisible by n_head")
        if self.dropout != 0.0 or self.gelu != "tanh":
            raise ValueError("only dropout=0 and gelu='tanh' are implemented")

    @classmethod
    def preset(cls, name):
        """A named config from PRESETS."""
        return PRESETS[name]


PRESETS = {
    "decoder-5k": GPTConfig(),  # the course's model: 5,376 parameters
    "decoder-2x32": GPTConfig(n_layer=2, n_head=4, n_embd=32),  # deeper and wider, ~30k
    "decoder-4x64": GPTConfig(n_layer=4, n_head=4, n_embd=64),  # ~210k, for later chapters
}


def param_shapes(cfg):
    """Every parameter's name and shape, in nanoGPT's state-dict order."""
    C, V = cfg.n_embd, cfg.vocab_size
    shapes = {"wte": (V, C), "wpe": (cfg.block_size, C)}

    def add(name, out_in):
        shapes[name + ".weight"] = out_in
        if cfg.bias:
            shapes[name + ".bias"] = out_in[:1]

    for l in range(cfg.n_layer):
        add(f"h.{l}.ln_1", (C,))
        add(f"h.{l}.attn.c_attn", (3 * C, C))
        add(f"h.{l}.attn.c_proj", (C, C))
        add(f"h.{l}.ln_2", (C,))
        add(f"h.{l}.mlp.c_fc", (4 * C, C))
        add(f"h.{l}.mlp.c_proj", (C, 4 * C))
    add("ln_f", (C,))
    return shapes


def count_params(cfg):
    """Number of parameters, from the shapes (the tied output head is counted once)."""
    return sum(math.prod(s) for s in param_shapes(cfg).values())


def init_params(cfg, seed, dtype=np.float32):
    """nanoGPT's init: N(0, 0.02) weights and embeddings, residual projections N(0, 0.02/sqrt(2L))."""
    rng = np.random.default_rng(seed)
    values = {}
    for name, shape in param_shapes(cfg).items():
        if ".ln_" in name or name.startswith("ln_"):
            value = np.ones(shape) if name.endswith(".weight") else np.zeros(shape)
        elif name.endswith(".bias"):
            value = np.zeros(shape)
        else:
            std = 0.02 / math.sqrt(2 * cfg.n_layer) if name.endswith("c_proj.weight") else 0.02
            value = rng.normal(0.0, std, size=shape)
        values[name] = value
    return pack_params(values, dtype)


def pack_params(values, dtype=None):
    """Copy named arrays into one contiguous buffer; returns a dict of views into it, same order."""
    # They stay separate named tensors for the reader, but the optimiser can update all of them
    # with a handful of whole-buffer operations (see pylib.optim.flat_buffer).
    dtype = dtype or next(iter(values.values())).dtype
    flat = np.empty(sum(np.size(v) for v in values.values()), dtype=dtype)
    params, offset = {}, 0
    for name, value in values.items():
        n = np.size(value)
        flat[offset:offset + n] = np.ravel(value)
        params[name] = flat[offset:offset + n].reshape(np.shape(value))
        offset += n
    return params


# ---------------------------------------------------------------------------
# Forward and backward


def doc_positions(doc_ids):
    """Positions that restart at 0 where each document starts: (B, T) doc ids -> (B, T) positions."""
    B, T = doc_ids.shape
    t = np.broadcast_to(np.arange(T), (B, T))
    starts = np.ones((B, T), dtype=bool)
    starts[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]  # documents are contiguous runs in a window
    return t - np.maximum.accumulate(np.where(starts, t, 0), axis=1)  # t minus its run's start


def forward(params, cfg, x, doc_ids=None, reset_positions=False):
    """Integer ids x (B, T) -> (logits (B, T, V), cache for backward).

    doc_ids (B, T), optional: each token's document (pylib.data.doc_ids_from_eos). Given, attention
    is also block-diagonal (a token sees only earlier tokens of its own document), and with
    reset_positions the position embedding restarts at 0 with each document.
    """
    B, T = x.shape
    if T > cfg.block_size:
        raise ValueError(f"sequence length {T} exceeds block_size {cfg.block_size}")
    if reset_positions and doc_ids is None:
        raise ValueError("reset_positions needs doc_ids")
    p = params
    get = p.get  # biases are None when cfg.bias is False
    tok, c_tok = layers.embedding_forward(x, p["wte"])  # (B, T, C)
    pos = doc_positions(doc_ids) if reset_positions else None  # (B, T) or None: 0..T-1 for all
    h = tok + (p["wpe"][:T] if pos is None else p["wpe"][pos])  # (B, T, C)
    extra_mask = None if doc_ids is None else layers.doc_mask(doc_ids, h.dtype)  # (B, 1, T, T)
    caches = []
    for l in range(cfg.n_layer):
        n = f"h.{l}."
        a, c_ln1 = layers.layernorm_forward(h, p[n + "ln_1.weight"], get(n + "ln_1.bias"), cfg.ln_eps)
        qkv, c_qkv = layers.linear_forward(a, p[n + "attn.c_attn.weight"], get(n + "attn.c_attn.bias"))  # (B, T, 3C)
        y, c_att = layers.attention_forward(qkv, cfg.n_head, extra_mask)  # (B, T, C)
        y, c_aproj = layers.linear_forward(y, p[n + "attn.c_proj.weight"], get(n + "attn.c_proj.bias"))
        h = h + y
        m, c_ln2 = layers.layernorm_forward(h, p[n + "ln_2.weight"], get(n + "ln_2.bias"), cfg.ln_eps)
        m, c_fc = layers.linear_forward(m, p[n + "mlp.c_fc.weight"], get(n + "mlp.c_fc.bias"))  # (B, T, 4C)
        m, c_gelu = layers.gelu_forward(m)
        m, c_mproj = layers.linear_forward(m, p[n + "mlp.c_proj.weight"], get(n + "mlp.c_proj.bias"))  # (B, T, C)
        h = h + m
        caches.append((c_ln1, c_qkv, c_att, c_aproj, c_ln2, c_fc, c_gelu, c_mproj))
    f, c_lnf = layers.layernorm_forward(h, p["ln_f.weight"], get("ln_f.bias"), cfg.ln_eps)
    logits, c_head = layers.linear_forward(f, p["wte"], None)  # (B, T, V), tied to the embedding
    return logits, (cfg, T, c_tok, caches, c_lnf, c_head, p["wpe"].shape, pos)


def backward(dlogits, cache, df_extra=None):
    """dlogits (B, T, V) -> grads, a dict with the same keys (and shapes) as params.

    df_extra (B*T, C), optional: more gradient on the final LayerNorm's output (the head's input,
    cache[5][0]) from another head that reads it, e.g. pylib.mtp's multi-token head."""
    cfg, T, c_tok, caches, c_lnf, c_head, wpe_shape, pos = cache
    g = {}

    def put(name, dw, db):
        g[name + ".weight"] = dw
        if db is not None:
            g[name + ".bias"] = db

    df, dwte_head, _ = layers.linear_backward(dlogits, c_head)
    if df_extra is not None:
        df = df + df_extra.reshape(df.shape)
    dh, dw, db = layers.layernorm_backward(df, c_lnf)
    put("ln_f", dw, db)
    for l in reversed(range(cfg.n_layer)):
        n = f"h.{l}."
        c_ln1, c_qkv, c_att, c_aproj, c_ln2, c_fc, c_gelu, c_mproj = caches[l]
        dm, dw, db = layers.linear_backward(dh, c_mproj)
        put(n + "mlp.c_proj", dw, db)
        dm = layers.gelu_backward(dm, c_gelu)
        dm, dw, db = layers.linear_backward(dm, c_fc)
        put(n + "mlp.c_fc", dw, db)
        dm, dw, db = layers.layernorm_backward(dm, c_ln2)
        put(n + "ln_2", dw, db)
        dh = dh + dm  # the residual branch and the skip both reach h
        dy, dw, db = layers.linear_backward(dh, c_aproj)
        put(n + "attn.c_proj", dw, db)
        dqkv = layers.attention_backward(dy, c_att)
        da, dw, db = layers.linear_backward(dqkv, c_qkv)
        put(n + "attn.c_attn", dw, db)
        da, dw, db = layers.layernorm_backward(da, c_ln1)
        put(n + "ln_1", dw, db)
        dh = dh + da
    C = dh.shape[-1]
    if pos is None:
        dwpe = np.zeros(wpe_shape, dtype=dh.dtype)
        dwpe[:T] = dh.reshape(-1, T, C).sum(axis=0)  # (T, C): positions are shared across the batch
    else:
        dwpe = layers.embedding_backward(dh, (pos, wpe_shape))  # reset positions: rows summed per position
    g["wpe"] = dwpe
    g["wte"] = dwte_head + layers.embedding_backward(dh, c_tok)  # tied: both uses add up
    return {name: g[name] for name in param_shapes(cfg)}  # nanoGPT order


def forward_logits(params, cfg, x, doc_ids=None, reset_positions=False):
    """Logits (B, T, V) only, for evaluation and sampling."""
    return forward(params, cfg, x, doc_ids, reset_positions)[0]


# ---------------------------------------------------------------------------
# Loss


def loss_and_grads(params, cfg, x, y, mask=None, denom=None, doc_ids=None, reset_positions=False):
    """Mean cross-entropy over counted tokens and its grads; denom overrides the count (see pylib.loss)."""
    logits, cache = forward(params, cfg, x, doc_ids, reset_positions)
    loss, c_loss = xent.cross_entropy_forward(logits, y, mask, denom)
    return loss, backward(xent.cross_entropy_backward(c_loss), cache)


def loss_sum_and_grads(params, cfg, x, y, mask=None):
    """(summed loss, counted tokens, grads of the summed loss): add these over microbatches."""
    count = xent.count_targets(y, mask)
    loss, grads = loss_and_grads(params, cfg, x, y, mask, denom=1.0)
    return loss, count, grads


def evaluate_loss(params, cfg, x, y, mask=None, doc_ids=None, reset_positions=False):
    """Mean cross-entropy without gradients."""
    logits = forward_logits(params, cfg, x, doc_ids, reset_positions)
    return xent.cross_entropy_forward(logits, y, mask)[0]
