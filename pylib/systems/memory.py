"""Activation memory: what the forward pass keeps for the backward pass, counted and predicted.

`counted_activations` walks the caches that pylib.model.forward and pylib.loss.cross_entropy_forward
really return and counts every distinct buffer once: NumPy views (a reshape, a transpose, k and v
sliced out of the qkv matrix) share their base array's memory, so each array is traced to the
array that owns its memory, and parameters (the weights the caches also point to) are left out.

`activation_bytes` is the formula for the same count, derived in chapter 4 from the code of
pylib.layers; a test checks the two agree to the byte. Korthikanti et al. 2022 ("Reducing
Activation Recomputation in Large Transformer Models", section 4.1) give 34 s b h + 5 a s^2 b
bytes per layer for a 16-bit GPT with dropout; `korthikanti_bytes_per_layer` is their formula.

Legend: B batch, T time, C n_embd, H n_head, V vocab_size, L n_layer.
"""

import numpy as np

# ---------------------------------------------------------------------------
# Names for the fields of each layer's cache (the order pylib.layers returns them in)

LINEAR = ("input", "weight", None, None)  # (x2, w, has_bias, x_shape)
LAYERNORM = ("xhat", "weight", "rstd", None)  # (xhat, w, rstd, has_bias)
ATTENTION = ("q_scaled", "qkv", "qkv", "probs", "heads_out", None)  # (q, k, v, att, yh, scale): k, v view qkv
GELU = ("input", "tanh")  # (x, t)
# A block's cache is (c_ln1, (c_qkv, c_qk, c_att, c_aproj), c_ln2, (c_fc, c_gelu, c_mproj)),
# c_qk being None or the two QK-norm caches (RMSNorm: (xhat, w, rstd), named like LAYERNORM's).
BLOCK = (("ln_1", LAYERNORM),
         (("attn.c_attn", LINEAR), (("attn.q_norm", LAYERNORM), ("attn.k_norm", LAYERNORM)),
          ("attn", ATTENTION), ("attn.c_proj", LINEAR)),
         ("ln_2", LAYERNORM),
         (("mlp.c_fc", LINEAR), ("mlp.gelu", GELU), ("mlp.c_proj", LINEAR)))


def owner(a):
    """The array that owns a's memory (a itself unless a is a view)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def cache_arrays(cache, loss_cache=None):
    """[(name, array)] for every array in model.forward's cache (and the loss's), in forward order."""
    c_tok, caches, c_lnf, c_head = cache[2:6]  # (cfg, T, c_tok, caches, c_lnf, c_head, ...)
    out = [("ids", c_tok[0])]
    # Anything else the model keeps (e.g. reset positions, None by default) is counted too.
    out.extend((f"cache[{i}]", v) for i, v in enumerate(cache) if i >= 6 and isinstance(v, np.ndarray))

    def add(prefix, fields, c):
        out.extend((f"{prefix}.{f}", v) for f, v in zip(fields, c) if f and isinstance(v, np.ndarray))

    def walk(prefix, spec, c):  # spec is (name, fields) for one layer's cache, or a tuple of specs
        if c is None:
            return
        if isinstance(spec[0], str):
            add(prefix + spec[0], spec[1], c)
        else:
            for s, part in zip(spec, c):
                walk(prefix, s, part)

    for l, block in enumerate(caches):
        walk(f"h.{l}.", BLOCK, block)
    add("ln_f", LAYERNORM, c_lnf)
    add("lm_head", LINEAR, c_head)
    if loss_cache is not None:
        add("loss", ("probs", "targets", "mask"), loss_cache)
    return out


def counted_activations(params, cache, loss_cache=None):
    """Distinct activation buffers: [{name, shape, dtype, bytes}], each owner counted once; params excluded."""
    param_owners = {id(owner(p)) for p in params.values()}
    seen, rows = set(), []
    for name, a in cache_arrays(cache, loss_cache):
        base = owner(a)
        if id(base) in param_owners or id(base) in seen:
            continue
        seen.add(id(base))
        rows.append({"name": name, "shape": list(base.shape), "dtype": str(base.dtype), "bytes": int(base.nbytes)})
    return rows


def measure_activations(params, cfg, x, y):
    """Run the forward and the loss on (x, y) and count what their caches keep."""
    from pylib import loss as xent
    from pylib import model
    logits, cache = model.forward(params, cfg, x)
    _, loss_cache = xent.cross_entropy_forward(logits, y)
    return counted_activations(params, cache, loss_cache)


# ---------------------------------------------------------------------------
# The formula


def heads_merge_is_copy(n_head, T):
    """Merging heads, (B, H, T, D) -> (B, T, C), copies unless NumPy can reshape a view (H = 1 or T = 1)."""
    return n_head > 1 and T > 1


def activation_bytes(cfg, B, T, itemsize=4, id_itemsize=8, with_loss=True):
    """Bytes the caches keep, by part: {"per_layer", "layers", "final", "ids", "loss", "total"}.

    Per layer, in numbers of itemsize each: LayerNorm keeps xhat (BTC) and rstd (BT) twice; the
    inputs of c_attn and c_fc (BTC each); the qkv matrix (3BTC, k and v are views of it) and the
    scaled q (BTC); the probabilities (B H T^2); the heads' output (BTC) and its merged copy (BTC,
    the input of c_proj); GELU's input and tanh (4BTC each); and c_proj's input, GELU's output (4BTC).
    """
    C, H, V = cfg.n_embd, cfg.n_head, cfg.vocab_size
    btc = B * T * C
    merged = btc if heads_merge_is_copy(H, T) else 0
    per_layer = (2 * (btc + B * T)  # ln_1, ln_2: xhat and rstd
                 + 2 * btc  # inputs of c_attn and c_fc (the LayerNorm outputs)
                 + 3 * btc + btc  # qkv, scaled q
                 + B * H * T * T  # attention probabilities
                 + btc + merged  # heads' output, merged for c_proj
                 + 4 * btc * 2  # GELU input and tanh
                 + 4 * btc)  # GELU output = mlp.c_proj input
    final = (btc + B * T) + btc  # ln_f xhat, rstd; the head's input
    parts = {"per_layer": per_layer * itemsize, "layers": cfg.n_layer * per_layer * itemsize,
             "final": final * itemsize, "ids": B * T * id_itemsize,
             "loss": (B * T * V * itemsize + B * T * id_itemsize) if with_loss else 0}
    parts["total"] = parts["layers"] + parts["final"] + parts["ids"] + parts["loss"]
    return parts


def korthikanti_bytes_per_layer(s, b, h, a):
    """Korthikanti et al. 2022, eq. 1: 16-bit activations of one layer with dropout, no recomputation."""
    return 34 * s * b * h + 5 * a * s * s * b
