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

from dataclasses import dataclass

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


# ---------------------------------------------------------------------------
# Held while checkpointing (pylib.systems.checkpointing does it; this is its formula)

RECOMPUTE_MODES = ("none", "selective", "full")


def recompute_bytes(cfg, B, T, recompute, itemsize=4, id_itemsize=8, with_loss=True):
    """Bytes pylib.systems.checkpointing holds, by part, for recompute in RECOMPUTE_MODES.

    "stored_layers": what the L blocks keep from their forward until their backward;
    "stored": that plus the final norm, the head, the loss and the ids, held at the end of the forward;
    "working": what one block's recomputation adds back during its backward (0 without recomputation);
    "peak": the most held at any moment of the step (pre-LN blocks; activation gradients not counted).
    Full: a block keeps only its input h (BTC) and recomputes everything else. Selective (Korthikanti
    et al. 2022, section 5): a block drops what attention computes from qkv (the scaled q, the
    probabilities BHT^2 and the heads' output) and recomputes it just before attention's backward.
    """
    if recompute not in RECOMPUTE_MODES:
        raise ValueError(f"recompute must be one of {RECOMPUTE_MODES}, not {recompute!r}")
    parts = activation_bytes(cfg, B, T, itemsize, id_itemsize, with_loss)
    C, H, L = cfg.n_embd, cfg.n_head, cfg.n_layer
    btc = B * T * C * itemsize
    # The attention core: q scaled (BTC), probabilities (B H T^2), heads' output (BTC) unless the
    # merged copy is a view of it (then c_proj's input keeps it alive).
    core = btc + B * H * T * T * itemsize + (btc if heads_merge_is_copy(H, T) else 0)
    outside = parts["final"] + parts["ids"] + parts["loss"]
    if recompute == "none":
        per_layer, working = parts["per_layer"], 0
    elif recompute == "full":
        per_layer, working = btc, parts["per_layer"]
    else:
        per_layer, working = parts["per_layer"] - core, core
    stored = L * per_layer + outside
    # The last block's recomputation happens once the loss, head and final norm have been freed:
    # the ids and every block's checkpoint are still held, and its recomputed buffers come back.
    # Selective recomputes after the block's MLP and second norm have been freed: their caches
    # (c_fc's input BTC, GELU's input and tanh and c_proj's input 4BTC each, xhat BTC and rstd BT) are gone.
    during = L * per_layer + parts["ids"] + working
    if recompute == "selective":
        during -= (14 * B * T * C + B * T) * itemsize
    return {"stored_layers": L * per_layer, "stored": stored, "working": working,
            "peak": max(stored, during)}


# ---------------------------------------------------------------------------
# The memory calculator: weights, gradients, optimiser state and activations of any GPT-like shape
#
# Legend (Korthikanti et al.'s letters): s sequence length, b micro-batch, h width (n_embd),
# a heads, L layers, v vocabulary, F the MLP's hidden width, Psi the parameter count.

PRECISIONS = {  # bytes per value of: weights used in compute, gradients, activations, fp32 master copy
    "fp32": {"weights": 4, "gradients": 4, "activations": 4, "master": 0},
    "mixed": {"weights": 2, "gradients": 2, "activations": 2, "master": 4},  # 16-bit compute, fp32 master
    # Megatron-LM's bf16 run: bf16 weights, fp32 main gradients (docs/user-guide/features/dist_optimizer.md: 18 bytes)
    "mixed_fp32_grads": {"weights": 2, "gradients": 4, "activations": 2, "master": 4},
}
OPTIMISER_STATES = {"sgd": 0, "momentum": 1, "adamw": 2}  # fp32 values kept per parameter
ACTIVATION_MODELS = ("korthikanti", "pylib")


@dataclass(frozen=True)
class TransformerShape:
    """A decoder-only transformer's shape, enough to count its parameters and its training memory.

    The defaults are the course's model (pylib.model.GPTConfig()). ffn_hidden is the MLP's hidden
    width F (4 n_embd in GPT-2); gated_mlp is a SwiGLU MLP (three matrices, LLaMA's); learned_pos a
    learned position table of seq_len rows (GPT-2's; LLaMA's rotary embeddings have no parameters);
    dropout decides whether the activation count includes dropout masks (Korthikanti et al. do).
    n_kv_head is the number of key/value heads under grouped-query attention (Ainslie et al. 2023;
    Llama 3 405B has 8 for its 128 query heads); None, the default, means one per query head.
    """

    n_layer: int = 1
    n_embd: int = 16
    n_head: int = 2
    vocab_size: int = 65
    seq_len: int = 64  # the context length the model is built for
    ffn_hidden: int = 64
    norm: str = "layernorm"  # or "rmsnorm"
    tied_head: bool = True
    bias: bool = True
    gated_mlp: bool = False
    learned_pos: bool = True
    dropout: bool = False
    name: str = ""
    n_kv_head: int | None = None  # grouped-query attention's key/value heads; None: n_head

    def __post_init__(self):
        problems = shape_problems(self)
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def head_dim(self):
        return self.n_embd // self.n_head

    @property
    def kv_heads(self):
        """Key/value heads: n_kv_head under grouped-query attention, else one per query head."""
        return self.n_head if self.n_kv_head is None else self.n_kv_head

    @property
    def kv_width(self):
        """Width of k (and of v): kv_heads x head_dim, n_embd without grouped-query attention."""
        return self.kv_heads * self.head_dim


MAX_DIM = 10 ** 9  # any one size above this is refused as a typo rather than a model


def shape_problems(shape):
    """Why a shape cannot exist, as sentences ([] when it can)."""
    out = []
    for field in ("n_layer", "n_embd", "n_head", "vocab_size", "seq_len", "ffn_hidden"):
        v = getattr(shape, field)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            out.append(f"{field} must be a whole number, not {v!r}")
        elif not 1 <= v <= MAX_DIM:
            out.append(f"{field} must be between 1 and {MAX_DIM:,}, not {v:,}")
    if not out and shape.n_embd % shape.n_head:
        out.append(f"{shape.n_head} heads do not divide the width {shape.n_embd}: "
                   f"each head needs a whole number of the {shape.n_embd} channels")
    kv = shape.n_kv_head
    if kv is not None:
        if isinstance(kv, bool) or not isinstance(kv, (int, np.integer)):
            out.append(f"n_kv_head must be a whole number, not {kv!r}")
        elif not out and not (1 <= kv <= shape.n_head and shape.n_head % kv == 0):
            out.append(f"{kv:,} key/value heads must divide the {shape.n_head:,} query heads: "
                       f"each key/value head serves a whole group of query heads")
    if shape.norm not in ("layernorm", "rmsnorm"):
        out.append(f"norm must be 'layernorm' or 'rmsnorm', not {shape.norm!r}")
    return out


def shape_from_config(cfg, name=""):
    """The TransformerShape of a pylib.model.GPTConfig (QK-norm's gains are not in the shape)."""
    if getattr(cfg, "qk_norm", False):
        raise ValueError("QK-norm's gains are not part of TransformerShape")
    return TransformerShape(n_layer=cfg.n_layer, n_embd=cfg.n_embd, n_head=cfg.n_head, vocab_size=cfg.vocab_size,
                            seq_len=cfg.block_size, ffn_hidden=4 * cfg.n_embd, norm=getattr(cfg, "norm", "layernorm"),
                            tied_head=True, bias=cfg.bias, gated_mlp=False, learned_pos=True, name=name)


def config_from_shape(shape):
    """The pylib.model.GPTConfig that builds shape; ValueError if pylib's model cannot."""
    from pylib import model
    if shape.gated_mlp or not shape.tied_head or not shape.learned_pos or shape.ffn_hidden != 4 * shape.n_embd:
        raise ValueError("pylib's model has a tied head, learned positions and a 4x GELU MLP only")
    if shape.kv_heads != shape.n_head:
        raise ValueError("pylib's model has one key/value head per query head (no grouped-query attention)")
    return model.GPTConfig(n_layer=shape.n_layer, n_embd=shape.n_embd, n_head=shape.n_head,
                           vocab_size=shape.vocab_size, block_size=shape.seq_len, bias=shape.bias, norm=shape.norm)


COURSE_MODEL = TransformerShape(name="the course's model")  # pylib.model.GPTConfig(): 5,376 parameters
# LLaMA 7B: 32 layers, width 4096, 32 heads (Touvron et al. 2023, Table 2); RMSNorm, SwiGLU, rotary
# positions (section 2.2); vocabulary 32,000, MLP width 11,008, context 2,048, untied head, no biases
# (the defaults of Hugging Face transformers' LlamaConfig, "a LLaMA llama-7b style configuration").
LLAMA_7B = TransformerShape(n_layer=32, n_embd=4096, n_head=32, vocab_size=32000, seq_len=2048, ffn_hidden=11008,
                            norm="rmsnorm", tied_head=False, bias=False, gated_mlp=True, learned_pos=False,
                            dropout=False, name="LLaMA 7B")
SHAPE_PRESETS = {"course": COURSE_MODEL, "llama-7b": LLAMA_7B}


def param_count_parts(shape):
    """Parameters by part: {"embeddings", "per_layer", "layers", "final_norm", "head", "total"}."""
    C, F, V, K = shape.n_embd, shape.ffn_hidden, shape.vocab_size, shape.kv_width
    b = 1 if shape.bias else 0
    norm = C * (2 if shape.norm == "layernorm" and shape.bias else 1)  # RMSNorm has a gain only
    attn = (C + 2 * K) * (C + b) + C * C + C * b  # q, k and v (k, v of width K), the output projection
    mlp = (3 * C * F + (2 * F + C) * b) if shape.gated_mlp else (2 * C * F + (F + C) * b)
    per_layer = 2 * norm + attn + mlp
    parts = {"embeddings": V * C + (shape.seq_len * C if shape.learned_pos else 0),
             "per_layer": per_layer, "layers": shape.n_layer * per_layer, "final_norm": norm,
             "head": 0 if shape.tied_head else V * C}
    parts["total"] = parts["embeddings"] + parts["layers"] + parts["final_norm"] + parts["head"]
    return parts


def param_count(shape):
    """Number of parameters of shape (a tied head counted once)."""
    return param_count_parts(shape)["total"]


def korthikanti_layer_bytes(shape, s, b, act_bytes=2, recompute="none", tp=1, sequence_parallel=False):
    """Activation bytes one layer keeps, after Korthikanti et al. 2022 (section 4.1, eq. 1; Table 2).

    Their count for 16-bit activations (act_bytes = 2) and 1-byte dropout masks:
      attention  QKV input 2sbh, Q and K 4sbh, V 2sbh, softmax output 2as^2b, its dropout mask as^2b
                 and dropped-out copy 2as^2b, projection input 2sbh, dropout mask sbh: 11sbh + 5as^2b;
      MLP        input 2sbh, second linear's input 2sbF, GELU input 2sbF, dropout mask sbh: 19sbh at F = 4h;
      norms      two inputs, 4sbh.
    Without dropout the masks go and attention over V reads the softmax output itself. A gated MLP
    (SwiGLU) keeps its input, the gate's and the up projection's outputs and the down projection's
    input: 2sbh + 6sbF (our extension of their count, not theirs). Selective recomputation drops the
    s^2 terms (section 5, eq. 6); full recomputation keeps the layer's input only, 2sbh (Table 2).
    Under grouped-query attention K and V are kv_width wide instead of h (our extension too).
    Tensor parallelism divides all but the norms, the two block inputs and the dropout masks by tp
    (eq. 2); sequence parallelism divides those too (eq. 4).
    """
    h, a, F = shape.n_embd, shape.n_head, shape.ffn_hidden
    e = act_bytes
    sbh, sbF, as2b = s * b * h, s * b * F, a * s * s * b
    sbk = s * b * shape.kv_width  # = sbh without grouped-query attention
    mask = 1 if shape.dropout else 0
    if recompute == "full":
        return e * sbh // (tp if sequence_parallel else 1)
    replicated = 2 * e * sbh + e * sbh + e * sbh + 2 * mask * sbh  # two norm inputs, QKV and MLP inputs, masks
    split = e * (sbh + sbk) + e * sbk + e * sbh  # Q and K, V, projection input
    split += (e * 2 * sbF + e * sbF) if shape.gated_mlp else (e * sbF + e * sbF)
    if recompute == "none":
        split += e * as2b + mask * (as2b + e * as2b)
    elif recompute != "selective":
        raise ValueError(f"recompute must be one of {RECOMPUTE_MODES}, not {recompute!r}")
    if sequence_parallel:
        return (replicated + split) / tp
    return replicated + split / tp


def korthikanti_outside_bytes(shape, s, b, act_bytes=2, tp=1, pp=1, sequence_parallel=False):
    """Activation bytes outside the layers (section 4.3): embedding dropout mask sbh p, and with one
    pipeline stage the final norm's input, the head's input (2sbh each at 16 bits) and the fp32 logits 4sbv."""
    h, v = shape.n_embd, shape.vocab_size
    div = tp if sequence_parallel else 1
    out = (s * b * h * pp if shape.dropout else 0) / div
    if pp == 1:
        out += (2 * act_bytes * s * b * h) / div + 4 * s * b * v / tp
    return out


def _whole(x, name):
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, not {x!r}")
    if x > MAX_DIM:
        raise ValueError(f"{name} must be at most {MAX_DIM:,}, not {x:,}")
    return int(x)


def training_memory(shape, micro_batch=1, seq_len=None, precision="mixed", optimizer="adamw", recompute="none",
                    zero_stage=0, dp=1, tp=1, pp=1, sequence_parallel=False, activation_model="korthikanti",
                    memory_efficient_attention=False):
    """Bytes per device to train shape: {"weights", "gradients", "optimizer", "master", "moments",
    "activations", "total", "params", "params_per_device", ...}.

    "activations" is what the forward pass leaves stored; "activations_peak" the most held during the
    step: with recomputation, a layer's backward first brings back what it dropped, on top of the
    other layers' checkpoints ("total_peak" counts that). memory_efficient_attention (Korthikanti path
    only): attention computed in tiles that never hold the s x s probabilities, forward or backward
    (FlashAttention; xformers' kernel, which LLaMA used): no s^2 term is stored or recomputed; the
    kernels' per-row softmax statistics (a few numbers per row and head) are not counted.

    precision "mixed": 16-bit weights, gradients and activations, an fp32 master copy of the weights
    and fp32 optimiser state (ZeRO's 2 + 2 + K bytes per parameter, K = 12 for Adam); "fp32": 4 bytes
    each, no master copy. optimizer: "adamw" (two moments), "momentum" (one buffer), "sgd" (none).
    The parameters are split evenly over tp x pp devices (tensor and pipeline parallelism); ZeRO
    (Rajbhandari et al. 2020, section 5) then shards over dp: stage 1 the optimiser state (master
    included), 2 the gradients too, 3 the weights too. Activations: per micro-batch of seq_len tokens;
    "korthikanti" is their count (korthikanti_layer_bytes) for L layers on every pipeline stage (the
    first stage of a 1F1B schedule holds L layers' worth, section 4.2.3); "pylib" is what pylib's own
    caches keep (activation_bytes, recompute_bytes), only for shapes pylib's model can build, one device.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {tuple(PRECISIONS)}, not {precision!r}")
    if optimizer not in OPTIMISER_STATES:
        raise ValueError(f"optimizer must be one of {tuple(OPTIMISER_STATES)}, not {optimizer!r}")
    if recompute not in RECOMPUTE_MODES:
        raise ValueError(f"recompute must be one of {RECOMPUTE_MODES}, not {recompute!r}")
    if activation_model not in ACTIVATION_MODELS:
        raise ValueError(f"activation_model must be one of {ACTIVATION_MODELS}, not {activation_model!r}")
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, not {zero_stage!r}")
    b = _whole(micro_batch, "micro_batch")
    s = _whole(shape.seq_len if seq_len is None else seq_len, "seq_len")
    dp, tp, pp = (_whole(x, n) for x, n in ((dp, "dp"), (tp, "tp"), (pp, "pp")))
    if shape.n_head % tp:
        raise ValueError(f"tensor parallelism over {tp} devices needs the {shape.n_head} heads to split evenly")
    if shape.n_layer % pp:
        raise ValueError(f"pipeline parallelism over {pp} stages needs the {shape.n_layer} layers to split evenly")
    if sequence_parallel and s % tp:
        raise ValueError(f"sequence parallelism needs the sequence length {s} to split over {tp} devices")
    if zero_stage and dp == 1:
        pass  # ZeRO over one device shards nothing: the counts below come out unsharded
    bytes_ = PRECISIONS[precision]
    psi = param_count(shape)
    psi_dev = psi / (tp * pp)
    shard = lambda stage: dp if zero_stage >= stage else 1  # noqa: E731
    weights = bytes_["weights"] * psi_dev / shard(3)
    gradients = bytes_["gradients"] * psi_dev / shard(2)
    moments = 4 * OPTIMISER_STATES[optimizer] * psi_dev / shard(1)
    master = bytes_["master"] * psi_dev / shard(1)
    if activation_model == "pylib":
        if memory_efficient_attention:
            raise ValueError("pylib's attention keeps its probabilities: memory_efficient_attention is for the Korthikanti count")
        if (dp, tp, pp) != (1, 1, 1) or sequence_parallel:
            raise ValueError("the pylib activation count is for one device")
        cfg = config_from_shape(shape)
        if s > cfg.block_size:
            raise ValueError(f"sequence length {s} exceeds the model's context {cfg.block_size}")
        held = recompute_bytes(cfg, b, s, recompute, itemsize=bytes_["activations"])
        activations, act_layers, act_peak = held["stored"], held["stored_layers"], held["peak"]
    else:
        e = bytes_["activations"]
        act_layers = shape.n_layer * korthikanti_layer_bytes(shape, s, b, e, recompute, tp, sequence_parallel)
        activations = act_layers + korthikanti_outside_bytes(shape, s, b, e, tp, pp, sequence_parallel)
        # The peak, as recompute_bytes models it for pylib: a layer's backward first recomputes what
        # it dropped (full: the whole layer; selective: the attention core, the s^2 terms) on top of
        # every layer's checkpoints, once the logits and the head are freed.
        layer = lambda mode: korthikanti_layer_bytes(shape, s, b, e, mode, tp, sequence_parallel)  # noqa: E731
        if memory_efficient_attention:  # the s^2 terms never exist: "none" stores what "selective" does
            act_layers = shape.n_layer * layer("full" if recompute == "full" else "selective")
            activations = act_layers + korthikanti_outside_bytes(shape, s, b, e, tp, pp, sequence_parallel)
            working = layer("selective") if recompute == "full" else 0
        else:
            working = {"none": 0, "selective": layer("none") - layer("selective"), "full": layer("none")}[recompute]
        act_peak = max(activations, act_layers + working)
    out = {"params": psi, "params_per_device": psi_dev, "weights": weights, "gradients": gradients,
           "optimizer": moments + master, "moments": moments, "master": master,
           "activations": activations, "activations_layers": act_layers, "activations_peak": act_peak,
           "seq_len": s, "micro_batch": b}
    out["model_states"] = weights + gradients + moments + master
    out["total"] = out["model_states"] + activations
    out["total_peak"] = out["model_states"] + act_peak
    return out


def bytes_per_param(precision="mixed", optimizer="adamw"):
    """Model-state bytes per parameter by part: {"weights", "gradients", "moments", "master", "total"}."""
    p = PRECISIONS[precision]
    out = {"weights": p["weights"], "gradients": p["gradients"], "moments": 4 * OPTIMISER_STATES[optimizer],
           "master": p["master"]}
    out["total"] = sum(out.values())
    return out


def activation_growth(shape, micro_batch, seq_lens, **kwargs):
    """training_memory at each sequence length: [{"seq_len", "weights", ..., "activations", "total"}]."""
    return [training_memory(shape, micro_batch, s, **kwargs) for s in seq_lens]
