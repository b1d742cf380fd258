"""Activation checkpointing on the course's model: keep less in the forward, recompute it in the backward.

`step` runs one forward and backward of pylib.model in one of three modes:

- "none": every block keeps its caches, as pylib.model.forward does;
- "full" (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"; what Korthikanti et al.
  2022 call full activation recomputation): a block keeps only its input h; just before its backward
  it runs its forward again from h, and the caches come back for the length of that backward;
- "selective" (Korthikanti et al. 2022, section 5): a block keeps everything except what attention
  computes from the qkv matrix, the scaled queries, the probabilities (B H T^2, the big one) and the
  heads' output, and recomputes that part just before attention's backward.

The recomputation calls the same functions on the same inputs, so the gradients are bit-identical
to those of pylib.model.backward (a test checks every element). `Held` counts what is held at each
moment as pylib.systems.memory counts caches, each buffer's owner once and the parameters left out;
its events are the timeline chapter 10 draws. The gradients of the activations (dh, dlogits), which
live one at a time, are not counted; nor are buffers a forward frees as it goes.

Pre-LN blocks (GPT-2's, the course's) without document masks; QK-norm, RMSNorm and muP are supported.
Legend: B batch, T time, C n_embd, H n_head, V vocab_size, L n_layer.
"""

import numpy as np

from pylib import layers, loss as xent, model
from pylib.systems import memory

MODES = memory.RECOMPUTE_MODES  # ("none", "selective", "full")

# ---------------------------------------------------------------------------
# What is held


def named(prefix, fields, cache):
    """[(prefix.field, array)] for the arrays of one layer's cache (fields as in pylib.systems.memory)."""
    return [(f"{prefix}.{f}", v) for f, v in zip(fields, cache) if f and isinstance(v, np.ndarray)]


def attn_arrays(n, c_attn):
    """The named arrays of an attention sublayer's cache (c_att may have had its core dropped)."""
    c_qkv, c_qk, c_att, c_aproj = c_attn
    out = named(n + "attn.c_attn", memory.LINEAR, c_qkv)
    if c_qk is not None:
        out += named(n + "attn.q_norm", memory.LAYERNORM, c_qk[0]) + named(n + "attn.k_norm", memory.LAYERNORM, c_qk[1])
    out += named(n + "attn", memory.ATTENTION, c_att) + named(n + "attn.c_proj", memory.LINEAR, c_aproj)
    return out


class Held:
    """The activations held during a step, and a timeline of every change.

    Each event is {"phase", "what", "held", "change", "added": [(name, bytes)]}: "held" is the bytes held
    after it, counted over distinct owners (a view and its base once), parameters excluded."""

    def __init__(self, params, record=True):
        self.record = record  # False: count nothing (for timing the step without the bookkeeping)
        self.param_owners = {id(memory.owner(p)) for p in params.values()}
        self.live = {}  # what -> [(name, array)]
        self.events = []

    def held(self):
        seen, total = set(), 0
        for arrays in self.live.values():
            for _, a in arrays:
                o = memory.owner(a)
                if id(o) not in self.param_owners and id(o) not in seen:
                    seen.add(id(o))
                    total += o.nbytes
        return total

    def add(self, phase, what, arrays):
        if not self.record:
            return
        before = self.held()
        self.live[what] = arrays
        owners = {}
        for name, a in arrays:
            o = memory.owner(a)
            if id(o) not in self.param_owners:
                owners.setdefault(id(o), (name, int(o.nbytes)))
        self._record(phase, what, before, sorted(owners.values(), key=lambda r: -r[1]))

    def free(self, phase, what):
        if not self.record:
            return
        before = self.held()
        del self.live[what]
        self._record(phase, what, before, [])

    def _record(self, phase, what, before, added):
        now = self.held()
        self.events.append({"phase": phase, "what": what, "held": now, "change": now - before, "added": added})

    def peak(self):
        """(index of the first event at the most bytes held, that event)."""
        i = max(range(len(self.events)), key=lambda k: (self.events[k]["held"], -k))
        return i, self.events[i]


# ---------------------------------------------------------------------------
# One step


def drop_attention_core(c_attn):
    """Selective: keep the attention cache's k and v (views of qkv) and scale; drop q, probs, heads' output."""
    c_qkv, c_qk, (q, k, v, att, yh, scale), c_aproj = c_attn
    return (c_qkv, c_qk, (None, k, v, None, None, scale), c_aproj)


def recompute_attention_core(cfg, c_attn):
    """Selective: run attention again from the kept qkv matrix; returns the full attention cache."""
    c_qkv, c_qk, (_, k, _, _, _, scale), c_aproj = c_attn
    B, H, T, D = k.shape
    qkv = memory.owner(k).reshape(B, T, 3 * H * D)  # (B, T, 3C): the array k and v are views of
    _, c_att = layers.attention_forward(qkv, cfg.n_head, None, scale)
    return (c_qkv, c_qk, c_att, c_aproj)


def block_forward(cfg, p, n, h, recompute, held, phase="forward"):
    """Pre-LN block n, sublayer by sublayer as pylib.model.pre_ln_block_forward; returns (h, cache)."""
    a, c_ln1 = model.norm_forward(cfg, p, n + "ln_1", h)
    held.add(phase, n + "ln_1", named(n + "ln_1", memory.LAYERNORM, c_ln1))
    y, c_attn = model.attn_forward(cfg, p, n, a, None)
    if recompute == "selective":
        c_attn = drop_attention_core(c_attn)
    held.add(phase, n + "attn", attn_arrays(n, c_attn))
    h = h + y  # (B, T, C)
    m, c_ln2 = model.norm_forward(cfg, p, n + "ln_2", h)
    held.add(phase, n + "ln_2", named(n + "ln_2", memory.LAYERNORM, c_ln2))
    m, c_mlp = model.mlp_forward(p, n, m)
    held.add(phase, n + "mlp", [a for c, f in zip(c_mlp, ("mlp.c_fc", "mlp.gelu", "mlp.c_proj"))
                                for a in named(n + f, memory.GELU if f == "mlp.gelu" else memory.LINEAR, c)])
    h = h + m
    return h, (c_ln1, c_attn, c_ln2, c_mlp)


def block_backward(cfg, g, n, dh, cache, recompute, held):
    """Backward of block_forward, as pylib.model.pre_ln_block_backward, freeing each cache once used."""
    c_ln1, c_attn, c_ln2, c_mlp = cache
    dm = model.mlp_backward(g, n, dh, c_mlp)
    held.free("backward", n + "mlp")
    dm = model.norm_backward(cfg, g, n + "ln_2", dm, c_ln2)
    held.free("backward", n + "ln_2")
    dh = dh + dm
    if recompute == "selective":
        c_attn = recompute_attention_core(cfg, c_attn)
        held.add("recompute", n + "attn.core", named(n + "attn", memory.ATTENTION, c_attn[2]))
    da = model.attn_backward(cfg, g, n, dh, c_attn)
    if recompute == "selective":
        held.free("backward", n + "attn.core")
    held.free("backward", n + "attn")
    da = model.norm_backward(cfg, g, n + "ln_1", da, c_ln1)
    held.free("backward", n + "ln_1")
    return dh + da


def step(params, cfg, x, y, recompute="none", record=True):
    """One forward and backward on ids x, targets y (B, T) -> (loss, grads, held).

    grads equal pylib.model.loss_and_grads's bit for bit in every mode; held.events is the timeline
    (empty when record is False)."""
    if recompute not in MODES:
        raise ValueError(f"recompute must be one of {MODES}, not {recompute!r}")
    if cfg.norm_position != "pre":
        raise ValueError("checkpointing is written for pre-LN blocks")
    p, held = params, Held(params, record)
    B, T = x.shape
    if T > cfg.block_size:
        raise ValueError(f"sequence length {T} exceeds block_size {cfg.block_size}")
    # Forward
    tok, c_tok = layers.embedding_forward(x, p["wte"])  # (B, T, C)
    held.add("forward", "ids", [("ids", x)])
    h = tok + p["wpe"][:T]  # (B, T, C)
    caches = []
    for l in range(cfg.n_layer):
        n = f"h.{l}."
        if recompute == "full":
            held.add("forward", n + "input", [(n + "input", h)])  # the checkpoint
            caches.append(h)
            h, _ = model.pre_ln_block_forward(cfg, p, n, h, None)  # its caches are dropped at once
        else:
            h, c_block = block_forward(cfg, p, n, h, recompute, held)
            caches.append(c_block)
    f, c_lnf = model.norm_forward(cfg, p, "ln_f", h)
    held.add("forward", "ln_f", named("ln_f", memory.LAYERNORM, c_lnf))
    logits, c_head = layers.linear_forward(f, p["wte"], None)  # (B, T, V)
    held.add("forward", "lm_head", named("lm_head", memory.LINEAR, c_head))
    logits = model.mup_output(cfg, logits)
    loss, c_loss = xent.cross_entropy_forward(logits, y)
    held.add("forward", "loss", named("loss", ("probs", "targets", "mask"), c_loss))
    # Backward, as pylib.model.backward
    g = {}
    dlogits = model.mup_output(cfg, xent.cross_entropy_backward(c_loss))
    held.free("backward", "loss")
    df, dwte_head, _ = layers.linear_backward(dlogits, c_head)
    held.free("backward", "lm_head")
    dh = model.norm_backward(cfg, g, "ln_f", df, c_lnf)
    held.free("backward", "ln_f")
    for l in reversed(range(cfg.n_layer)):
        n = f"h.{l}."
        cache = caches[l]
        if recompute == "full":
            _, cache = block_forward(cfg, p, n, cache, "none", held, phase="recompute")
            held.free("recompute", n + "input")
        dh = block_backward(cfg, g, n, dh, cache, recompute, held)
    C = dh.shape[-1]
    dwpe = np.zeros(p["wpe"].shape, dtype=dh.dtype)
    dwpe[:T] = dh.reshape(-1, T, C).sum(axis=0)  # (T, C)
    g["wpe"] = dwpe
    g["wte"] = dwte_head + layers.embedding_backward(dh, c_tok)
    held.free("backward", "ids")
    return loss, {name: g[name] for name in model.param_shapes(cfg)}, held


def timeline(params, cfg, x, y, recompute="none"):
    """The bytes held through one step: {"events", "peak_index", "peak", "set_by", "stored", "loss"}.

    "stored" is what is held when the forward ends; "set_by" the largest buffer that the peak's event
    allocated (the tensor that sets the peak)."""
    loss, _, held = step(params, cfg, x, y, recompute)
    i, ev = held.peak()
    end_of_forward = max(k for k, e in enumerate(held.events) if e["phase"] == "forward")
    return {"events": held.events, "peak_index": i, "peak": ev["held"],
            "set_by": ev["added"][0] if ev["added"] else None,
            "stored": held.events[end_of_forward]["held"], "loss": loss}
