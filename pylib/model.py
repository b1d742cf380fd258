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
class GPT2Config:
    """The architecture of chapter 1: nanoGPT's GPT-2, with the course model's sizes as defaults."""

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

    @property
    def attn_scale(self):
        """Multiplier of q.k: 1/sqrt(D), D = n_embd / n_head the width of one head."""
        D = self.n_embd // self.n_head
        return 1.0 / math.sqrt(D)


# ---------------------------------------------------------------------------
# Variants, for the chapters on initialisation, normalisation and muP (7) and stability (8)


@dataclass(frozen=True)
class GPTConfig(GPT2Config):
    """GPT2Config plus the variants later chapters study. Every default is GPT-2's choice, so
    GPTConfig() is the course model and computes exactly what GPT2Config() describes."""

    norm: str = "layernorm"  # or "rmsnorm" (Zhang & Sennrich 2019): no centring, no bias
    norm_position: str = "pre"  # "pre" (GPT-2) or "post" (Vaswani et al. 2017: norm after each add)
    qk_norm: bool = False  # RMSNorm (learned gain) on each head's q and k (Dehghani et al. 2023)
    init_std: float = 0.02  # std of the weights and embeddings at initialisation (GPT-2's 0.02)
    mup_base_width: int = 0  # 0: standard parameterisation; > 0: muP relative to this n_embd
    mup_output_mult: bool = True  # muP only; False drops the 1/width_mult on the logits (an ablation)

    def __post_init__(self):
        super().__post_init__()
        if self.norm not in ("layernorm", "rmsnorm") or self.norm_position not in ("pre", "post"):
            raise ValueError("norm must be 'layernorm' or 'rmsnorm', norm_position 'pre' or 'post'")
        if not self.init_std > 0 or self.mup_base_width < 0:
            raise ValueError("init_std must be > 0 and mup_base_width >= 0")
        if self.mup_base_width and self.mup_base_width % self.n_head:
            raise ValueError("mup_base_width must be divisible by n_head")

    @property
    def width_mult(self):
        """muP's width multiplier n_embd / base width (1.0 under standard parameterisation)."""
        return self.n_embd / self.mup_base_width if self.mup_base_width else 1.0

    @property
    def attn_scale(self):
        """Multiplier of q.k: 1/sqrt(D); under muP sqrt(D_base)/D, i.e. 1/D up to a constant."""
        if not self.mup_base_width:
            return super().attn_scale
        D = self.n_embd // self.n_head
        return math.sqrt(self.mup_base_width // self.n_head) / D  # equals 1/sqrt(D) at the base width

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

    def add(name, out_in, bias=cfg.bias):
        shapes[name + ".weight"] = out_in
        if bias:
            shapes[name + ".bias"] = out_in[:1]

    norm_bias = cfg.bias and cfg.norm == "layernorm"  # RMSNorm has a gain only
    D = C // cfg.n_head
    for l in range(cfg.n_layer):
        add(f"h.{l}.ln_1", (C,), norm_bias)
        add(f"h.{l}.attn.c_attn", (3 * C, C))
        if cfg.qk_norm:
            add(f"h.{l}.attn.q_norm", (D,), False)  # one gain per head dimension, shared by heads
            add(f"h.{l}.attn.k_norm", (D,), False)
        add(f"h.{l}.attn.c_proj", (C, C))
        add(f"h.{l}.ln_2", (C,), norm_bias)
        add(f"h.{l}.mlp.c_fc", (4 * C, C))
        add(f"h.{l}.mlp.c_proj", (C, 4 * C))
    add("ln_f", (C,), norm_bias)
    return shapes


def count_params(cfg):
    """Number of parameters, from the shapes (the tied output head is counted once)."""
    return sum(math.prod(s) for s in param_shapes(cfg).values())


def is_norm_param(name):
    """True for the gains and biases of the norms (LayerNorm/RMSNorm, QK-norm)."""
    return ".ln_" in name or name.startswith("ln_") or name.endswith("_norm.weight")


def is_hidden_matrix(name):
    """True for the 2-D weights inside the blocks (not the embeddings): muP's "hidden" weights."""
    return name.startswith("h.") and name.endswith(".weight") and not is_norm_param(name)


def init_params(cfg, seed, dtype=np.float32):
    """nanoGPT's init: N(0, std) weights and embeddings, residual projections N(0, std/sqrt(2L)).

    std is cfg.init_std (0.02). Under muP the hidden matrices' std is further divided by
    sqrt(width_mult), so that their variance scales as 1/fan_in; embeddings keep std.
    """
    rng = np.random.default_rng(seed)
    values = {}
    for name, shape in param_shapes(cfg).items():
        if is_norm_param(name):
            value = np.ones(shape) if name.endswith(".weight") else np.zeros(shape)
        elif name.endswith(".bias"):
            value = np.zeros(shape)
        else:
            std = cfg.init_std
            if name.endswith("c_proj.weight"):
                std /= math.sqrt(2 * cfg.n_layer)
            if is_hidden_matrix(name):
                std /= math.sqrt(cfg.width_mult)
            value = rng.normal(0.0, std, size=shape)
        values[name] = value
    return pack_params(values, dtype)


def lr_multipliers(cfg):
    """Per-parameter learning-rate multipliers: 1 everywhere, except 1/width_mult on the hidden
    matrices under muP with Adam (Yang et al. 2022, Tensor Programs V, Table 3)."""
    return {name: (1.0 / cfg.width_mult if is_hidden_matrix(name) else 1.0) for name in param_shapes(cfg)}


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


def _put(g, name, dw, db=None):
    g[name + ".weight"] = dw
    if db is not None:
        g[name + ".bias"] = db


def norm_forward(cfg, p, name, x):
    """The norm with the params under name: LayerNorm (GPT-2), or chapter 7's RMSNorm."""
    if cfg.norm == "rmsnorm":
        return layers.rmsnorm_forward(x, p[name + ".weight"], cfg.ln_eps)
    return layers.layernorm_forward(x, p[name + ".weight"], p.get(name + ".bias"), cfg.ln_eps)


def norm_backward(cfg, g, name, dout, cache):
    """Backward of norm_forward: puts the param grads into g, returns dx."""
    if cfg.norm == "rmsnorm":
        dx, dw = layers.rmsnorm_backward(dout, cache)
        _put(g, name, dw)
    else:
        dx, dw, db = layers.layernorm_backward(dout, cache)
        _put(g, name, dw, db)
    return dx


def attn_forward(cfg, p, n, a, extra_mask):
    """The attention sublayer of block n: query/key/value projection, causal attention, output projection."""
    get = p.get
    qkv, c_qkv = layers.linear_forward(a, p[n + "attn.c_attn.weight"], get(n + "attn.c_attn.bias"))  # (B, T, 3C)
    qkv, c_qk = qk_norm_forward(cfg, p, n, qkv)  # chapter 8's QK-norm; unchanged when it is off
    y, c_att = layers.attention_forward(qkv, cfg.n_head, extra_mask, cfg.attn_scale)  # (B, T, C)
    y, c_aproj = layers.linear_forward(y, p[n + "attn.c_proj.weight"], get(n + "attn.c_proj.bias"))
    return y, (c_qkv, c_qk, c_att, c_aproj)


def attn_backward(cfg, g, n, dy, cache):
    c_qkv, c_qk, c_att, c_aproj = cache
    dy, dw, db = layers.linear_backward(dy, c_aproj)
    _put(g, n + "attn.c_proj", dw, db)
    dqkv = layers.attention_backward(dy, c_att)  # (B, T, 3C)
    dqkv = qk_norm_backward(cfg, g, n, dqkv, c_qk)
    da, dw, db = layers.linear_backward(dqkv, c_qkv)
    _put(g, n + "attn.c_attn", dw, db)
    return da


def qk_norm_forward(cfg, p, n, qkv):
    """Chapter 8's QK-norm: RMSNorm each head's query and key vectors (D numbers) before the dot
    product. (qkv, None) unchanged when cfg.qk_norm is off."""
    if not cfg.qk_norm:
        return qkv, None
    B, T, C3 = qkv.shape
    H = cfg.n_head
    q5 = qkv.reshape(B, T, 3, H, C3 // (3 * H)).copy()  # (B, T, 3, H, D)
    q5[:, :, 0], c_q = layers.rmsnorm_forward(q5[:, :, 0], p[n + "attn.q_norm.weight"], cfg.ln_eps)
    q5[:, :, 1], c_k = layers.rmsnorm_forward(q5[:, :, 1], p[n + "attn.k_norm.weight"], cfg.ln_eps)
    return q5.reshape(B, T, C3), (c_q, c_k)


def qk_norm_backward(cfg, g, n, dqkv, c_qk):
    """Backward of qk_norm_forward: puts the gains' grads into g, returns dqkv."""
    if c_qk is None:
        return dqkv
    B, T, C3 = dqkv.shape
    H = cfg.n_head
    d5 = dqkv.reshape(B, T, 3, H, C3 // (3 * H))
    d5[:, :, 0], dw = layers.rmsnorm_backward(d5[:, :, 0].copy(), c_qk[0])
    _put(g, n + "attn.q_norm", dw)
    d5[:, :, 1], dw = layers.rmsnorm_backward(d5[:, :, 1].copy(), c_qk[1])
    _put(g, n + "attn.k_norm", dw)
    return dqkv


def mlp_forward(p, n, m):
    """The MLP sublayer of block n: widen to 4C, GELU, project back to C."""
    get = p.get
    m, c_fc = layers.linear_forward(m, p[n + "mlp.c_fc.weight"], get(n + "mlp.c_fc.bias"))  # (B, T, 4C)
    m, c_gelu = layers.gelu_forward(m)
    m, c_mproj = layers.linear_forward(m, p[n + "mlp.c_proj.weight"], get(n + "mlp.c_proj.bias"))  # (B, T, C)
    return m, (c_fc, c_gelu, c_mproj)


def mlp_backward(g, n, dm, cache):
    c_fc, c_gelu, c_mproj = cache
    dm, dw, db = layers.linear_backward(dm, c_mproj)
    _put(g, n + "mlp.c_proj", dw, db)
    dm = layers.gelu_backward(dm, c_gelu)
    dm, dw, db = layers.linear_backward(dm, c_fc)
    _put(g, n + "mlp.c_fc", dw, db)
    return dm


def pre_ln_block_forward(cfg, p, n, h, extra_mask):
    """GPT-2's block n: each sublayer reads a norm of the residual stream h and adds its output to it."""
    a, c_ln1 = norm_forward(cfg, p, n + "ln_1", h)
    y, c_attn = attn_forward(cfg, p, n, a, extra_mask)
    h = h + y
    m, c_ln2 = norm_forward(cfg, p, n + "ln_2", h)
    m, c_mlp = mlp_forward(p, n, m)
    h = h + m
    return h, (c_ln1, c_attn, c_ln2, c_mlp)


def pre_ln_block_backward(cfg, g, n, dh, cache):
    """Backward of pre_ln_block_forward: the sublayers in reverse order; returns dh."""
    c_ln1, c_attn, c_ln2, c_mlp = cache
    dm = mlp_backward(g, n, dh, c_mlp)
    dm = norm_backward(cfg, g, n + "ln_2", dm, c_ln2)
    dh = dh + dm  # the residual: h reaches the loss through the branch and through the skip
    da = attn_backward(cfg, g, n, dh, c_attn)
    da = norm_backward(cfg, g, n + "ln_1", da, c_ln1)
    dh = dh + da
    return dh


def post_ln_block_forward(cfg, p, n, h, extra_mask):
    """Chapter 7's post-LN block (Vaswani et al. 2017): the norm comes after each addition."""
    y, c_attn = attn_forward(cfg, p, n, h, extra_mask)
    h, c_ln1 = norm_forward(cfg, p, n + "ln_1", h + y)
    m, c_mlp = mlp_forward(p, n, h)
    h, c_ln2 = norm_forward(cfg, p, n + "ln_2", h + m)
    return h, (c_ln1, c_attn, c_ln2, c_mlp)


def post_ln_block_backward(cfg, g, n, dh, cache):
    """Backward of post_ln_block_forward: every gradient passes through both norms on its way down."""
    c_ln1, c_attn, c_ln2, c_mlp = cache
    ds = norm_backward(cfg, g, n + "ln_2", dh, c_ln2)
    dh = ds + mlp_backward(g, n, ds, c_mlp)
    ds = norm_backward(cfg, g, n + "ln_1", dh, c_ln1)
    dh = ds + attn_backward(cfg, g, n, ds, c_attn)
    return dh


def block_forward(cfg, p, n, h, extra_mask):
    """Block n ("h.0.", ...) by cfg.norm_position: "pre" (GPT-2) or "post" (chapter 7).

    Pre-norm (GPT-2):  h = h + attn(norm_1(h));  h = h + mlp(norm_2(h))
    Post-norm:         h = norm_1(h + attn(h));  h = norm_2(h + mlp(h))
    """
    if cfg.norm_position == "post":
        return post_ln_block_forward(cfg, p, n, h, extra_mask)
    return pre_ln_block_forward(cfg, p, n, h, extra_mask)


def block_backward(cfg, g, n, dh, cache):
    """Backward of block_forward; returns dh."""
    if cfg.norm_position == "post":
        return post_ln_block_backward(cfg, g, n, dh, cache)
    return pre_ln_block_backward(cfg, g, n, dh, cache)


def mup_output(cfg, logits):
    """muP's output multiplier (chapter 7): logits / width_mult, so that they stay O(1) as the width
    grows. The logits unchanged under standard parameterisation. Its own backward too: it is linear."""
    if cfg.mup_base_width and cfg.mup_output_mult:
        return logits * (1.0 / cfg.width_mult)
    return logits


def forward(params, cfg, x):
    """Integer ids x (B, T) -> (logits (B, T, V), cache for backward)."""
    T = check_length(cfg, x)
    tok, c_tok = layers.embedding_forward(x, params["wte"])  # (B, T, C)
    h = tok + params["wpe"][:T]  # (B, T, C): the token's vector plus its position's
    caches = []
    for l in range(cfg.n_layer):
        h, c_block = block_forward(cfg, params, f"h.{l}.", h, None)  # None: only the causal mask
        caches.append(c_block)
    logits, c_lnf, c_head = head_forward(params, cfg, h)  # final norm, then the tied head
    return logits, (cfg, T, c_tok, caches, c_lnf, c_head, params["wpe"].shape, None)


def check_length(cfg, x):
    """x's sequence length T; a ValueError if it exceeds the context length."""
    T = x.shape[1]
    if T > cfg.block_size:
        raise ValueError(f"sequence length {T} exceeds block_size {cfg.block_size}")
    return T


def blocks_forward(params, cfg, h, extra_mask=None, trace=None):
    """The residual stream h (B, T, C) through the n_layer blocks -> (h, the blocks' caches).

    extra_mask, optional: added to every attention logit besides the causal mask (chapter 2's
    document mask). trace, optional list: h after each block is appended to it (copies)."""
    caches = []
    for l in range(cfg.n_layer):
        h, c_block = block_forward(cfg, params, f"h.{l}.", h, extra_mask)
        caches.append(c_block)
        if trace is not None:
            trace.append(h.copy())
    return h, caches


def head_forward(params, cfg, h):
    """The final norm, then the output head tied to the token embedding -> (logits, norm's cache, head's cache).
    mup_output leaves the logits as they are unless chapter 7's muP is on."""
    f, c_lnf = norm_forward(cfg, params, "ln_f", h)
    logits, c_head = layers.linear_forward(f, params["wte"], None)  # (B, T, V), tied to the embedding
    return mup_output(cfg, logits), c_lnf, c_head


def doc_forward(params, cfg, x, doc_ids, reset_positions=False):
    """forward for packed windows (chapter 2): doc_ids (B, T) gives each token's document
    (pylib.data.doc_ids_from_eos), attention is also block-diagonal (a token sees only earlier
    tokens of its own document), and with reset_positions the position embedding restarts at 0
    with each document."""
    T = check_length(cfg, x)
    tok, c_tok = layers.embedding_forward(x, params["wte"])  # (B, T, C)
    pos = doc_positions(doc_ids) if reset_positions else None  # (B, T) or None: 0..T-1 for all
    h = tok + (params["wpe"][:T] if pos is None else params["wpe"][pos])  # (B, T, C)
    h, caches = blocks_forward(params, cfg, h, layers.doc_mask(doc_ids, h.dtype))  # mask (B, 1, T, T)
    logits, c_lnf, c_head = head_forward(params, cfg, h)
    return logits, (cfg, T, c_tok, caches, c_lnf, c_head, params["wpe"].shape, pos)


def traced_forward(params, cfg, x, trace):
    """forward, appending the residual stream (B, T, C) after the embeddings and after each block
    to the list trace (copies), for chapter 7's activation statistics."""
    T = check_length(cfg, x)
    tok, c_tok = layers.embedding_forward(x, params["wte"])
    h = tok + params["wpe"][:T]
    trace.append(h.copy())
    h, caches = blocks_forward(params, cfg, h, trace=trace)
    logits, c_lnf, c_head = head_forward(params, cfg, h)
    return logits, (cfg, T, c_tok, caches, c_lnf, c_head, params["wpe"].shape, None)


def backward(dlogits, cache, df_extra=None, g=None):
    """dlogits (B, T, V) -> grads, a dict with the same keys (and shapes) as params.

    df_extra (B*T, C), optional: more gradient on the final norm's output (the head's input,
    cache[5][0]) from another head that reads it, e.g. pylib.studies.mtp's multi-token head.
    g, optional: the dict the gradients are put into as they are finished, in the backward's order
    (chapter 4's pylib.studies.backprop_order passes one that records that order)."""
    cfg, T, c_tok, caches, c_lnf, c_head, wpe_shape, pos = cache
    g = {} if g is None else g
    dlogits = mup_output(cfg, dlogits)
    df, dwte_head, _ = layers.linear_backward(dlogits, c_head)
    if df_extra is not None:
        df = df + df_extra.reshape(df.shape)
    dh = norm_backward(cfg, g, "ln_f", df, c_lnf)
    for l in reversed(range(cfg.n_layer)):
        dh = block_backward(cfg, g, f"h.{l}.", dh, caches[l])
    C = dh.shape[-1]
    if pos is None:
        dwpe = np.zeros(wpe_shape, dtype=dh.dtype)
        dwpe[:T] = dh.reshape(-1, T, C).sum(axis=0)  # (T, C): positions are shared across the batch
    else:
        dwpe = layers.embedding_backward(dh, (pos, wpe_shape))  # reset positions: rows summed per position
    g["wpe"] = dwpe
    g["wte"] = dwte_head + layers.embedding_backward(dh, c_tok)  # tied: both uses add up
    return {name: g[name] for name in param_shapes(cfg)}  # nanoGPT order


def forward_logits(params, cfg, x):
    """Logits (B, T, V) only, for evaluation and sampling."""
    return forward(params, cfg, x)[0]


# ---------------------------------------------------------------------------
# Loss


def loss_and_grads(params, cfg, x, y, mask=None, denom=None):
    """Mean cross-entropy over counted tokens and its grads; denom overrides the count (see pylib.loss)."""
    logits, cache = forward(params, cfg, x)
    loss, c_loss = xent.cross_entropy_forward(logits, y, mask, denom)
    return loss, backward(xent.cross_entropy_backward(c_loss), cache)


def doc_loss_and_grads(params, cfg, x, y, doc_ids, reset_positions=False):
    """loss_and_grads for packed windows (chapter 2): the forward is doc_forward."""
    logits, cache = doc_forward(params, cfg, x, doc_ids, reset_positions)
    loss, c_loss = xent.cross_entropy_forward(logits, y)
    return loss, backward(xent.cross_entropy_backward(c_loss), cache)


def z_loss_and_grads(params, cfg, x, y, coef, mask=None, denom=None):
    """loss_and_grads with chapter 8's z-loss term (coef * log(Z)^2 per counted token, pylib.loss)."""
    logits, cache = forward(params, cfg, x)
    loss, c_loss = xent.z_loss_forward(logits, y, coef, mask, denom)
    return loss, backward(xent.z_loss_backward(c_loss), cache)


def loss_sum_and_grads(params, cfg, x, y, mask=None):
    """(summed loss, counted tokens, grads of the summed loss): add these over microbatches."""
    count = xent.count_targets(y, mask)
    loss, grads = loss_and_grads(params, cfg, x, y, mask, denom=1.0)
    return loss, count, grads


def evaluate_loss(params, cfg, x, y, mask=None):
    """Mean cross-entropy without gradients."""
    return xent.cross_entropy_forward(forward_logits(params, cfg, x), y, mask)[0]
