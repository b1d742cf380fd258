"""Chapter 10's page ops (training memory): validation of what the reader typed, and thin calls into
pylib.systems.memory and pylib.systems.checkpointing. No numerics of its own.

Ops (see pylib.web.all_ops):
  memory_presets    {} -> the calculator's presets as form values (LLaMA 7B, the course's model)
  memory_calc       {arch, seq_len, micro_batch, n_layer, n_embd, n_head, vocab_size, ffn_hidden,
                     precision, recompute, optimizer, attention} -> memory.training_memory on one device, the
                     parameter count, and the same at other sequence lengths (instant)
  memory_timeline   {n_layer, batch_size, seq_len} -> the bytes held through one forward and backward
                     of the course's model in each recompute mode (checkpointing.timeline)
"""

import dataclasses

from pylib import data, model
from pylib.systems import checkpointing, memory
from pylib.web import InputError, collect_fields, parse_field, parse_int
from pylib.web.check_ops import checked_by

LIMITS = {  # the calculator's fields; beyond these the numbers stop describing any model
    "seq_len": 10 ** 7, "micro_batch": 10 ** 6, "n_layer": 10 ** 4, "n_embd": 10 ** 6,
    "n_head": 10 ** 5, "vocab_size": 10 ** 8, "ffn_hidden": 10 ** 7,
    "growth_points": 9,  # sequence lengths in the growth chart: powers of two around the reader's
    # the animated timeline runs the real model in the page: a few layers, the course's batch at most
    "timeline_layers": 4, "timeline_batch": 32,
}
LABELS = {"seq_len": "Sequence length", "micro_batch": "Micro-batch", "n_layer": "Layers", "n_embd": "Width",
          "n_head": "Heads", "vocab_size": "Vocabulary", "ffn_hidden": "MLP width", "batch_size": "Batch"}
ARCHS = {  # the architecture choices: the fields of TransformerShape a reader does not type
    "llama": dict(norm="rmsnorm", tied_head=False, bias=False, gated_mlp=True, learned_pos=False, dropout=False),
    "gpt2": dict(norm="layernorm", tied_head=True, bias=True, gated_mlp=False, learned_pos=True, dropout=False),
}
ATTENTION = {"memory_efficient": True, "standard": False}  # the s x s probabilities never held, or kept
CHOICES = {"arch": tuple(ARCHS), "precision": tuple(memory.PRECISIONS), "recompute": memory.RECOMPUTE_MODES,
           "optimizer": tuple(memory.OPTIMISER_STATES), "attention": tuple(ATTENTION)}


def parse_choice(raw, key):
    """One of CHOICES[key], or InputError."""
    if raw not in CHOICES[key]:
        raise InputError({key: f"{key.capitalize()} must be one of {', '.join(CHOICES[key])}."})
    return raw


def _int_field(key):
    return lambda raw: parse_field(parse_int, key, LABELS[key], raw, 1, LIMITS[key])


def presets():
    """The calculator's presets as form values: LLaMA 7B and the course's model."""
    def values(shape, arch, micro_batch, attention):
        return {"arch": arch, "seq_len": shape.seq_len, "micro_batch": micro_batch, "n_layer": shape.n_layer,
                "n_embd": shape.n_embd, "n_head": shape.n_head, "vocab_size": shape.vocab_size,
                "ffn_hidden": shape.ffn_hidden, "attention": attention, "recompute": "none"}
    # LLaMA trained with xformers' memory-efficient attention (Touvron et al. 2023, section 2.4); the
    # course's model keeps its probabilities (pylib.layers.attention_forward).
    return {"llama-7b": values(memory.LLAMA_7B, "llama", 1, "memory_efficient"),
            "course": values(memory.COURSE_MODEL, "gpt2", 16, "standard")}


def growth_lengths(seq_len):
    """Powers of two around seq_len (and seq_len itself), within [1, LIMITS["seq_len"]]."""
    k = max(seq_len.bit_length() - 1, 0)
    half = LIMITS["growth_points"] // 2
    lo = max(k - half, 0)
    out = sorted({2 ** i for i in range(lo, lo + LIMITS["growth_points"])} | {seq_len})
    return [s for s in out if s <= LIMITS["seq_len"]]


def validate_memory_calc(args):
    """The calculator's form values -> checked values (a width the heads divide), or InputError
    (op check_args too)."""
    fields = {k: _int_field(k) for k in ("seq_len", "micro_batch", "n_layer", "n_embd", "n_head", "vocab_size",
                                         "ffn_hidden")}
    fields.update({k: (lambda raw, k=k: parse_choice(raw, k)) for k in CHOICES})
    v = collect_fields(fields, args)
    if v["n_embd"] % v["n_head"]:  # a model that cannot exist: say why, on the heads field
        raise InputError({"n_head": f"{v['n_head']:,} heads do not divide the width {v['n_embd']:,}: each head "
                                    f"needs a whole number of the {v['n_embd']:,} channels (try a divisor of the width)."})
    return v


@checked_by(validate_memory_calc)
def memory_calc(session, args):
    """The reader's shape and settings -> training_memory at their sequence length and around it."""
    v = validate_memory_calc(args)
    shape = memory.TransformerShape(n_layer=v["n_layer"], n_embd=v["n_embd"], n_head=v["n_head"],
                                    vocab_size=v["vocab_size"], seq_len=v["seq_len"], ffn_hidden=v["ffn_hidden"],
                                    **ARCHS[v["arch"]])
    settings = dict(precision=v["precision"], optimizer=v["optimizer"], recompute=v["recompute"],
                    memory_efficient_attention=ATTENTION[v["attention"]])
    keys = ("weights", "gradients", "moments", "master", "optimizer", "activations", "activations_peak",
            "model_states", "total", "total_peak")
    r = memory.training_memory(shape, v["micro_batch"], v["seq_len"], **settings)
    growth = memory.activation_growth(shape, v["micro_batch"], growth_lengths(v["seq_len"]), **settings)
    return {**v, "params": memory.param_count(shape), "parts": memory.param_count_parts(shape),
            "bytes_per_param": memory.bytes_per_param(v["precision"], v["optimizer"]),
            "memory": {k: float(r[k]) for k in keys},
            "growth": {"seq_len": [g["seq_len"] for g in growth],
                       **{k: [float(g[k]) for g in growth] for k in keys}}}


def validate_memory_timeline(args):
    """{n_layer, batch_size, seq_len} -> checked values (seq_len at most the course model's block), or
    InputError (op check_args too)."""
    block_size = model.GPTConfig().block_size
    return collect_fields({
        "n_layer": lambda raw: parse_field(parse_int, "n_layer", LABELS["n_layer"], raw, 1, LIMITS["timeline_layers"]),
        "batch_size": lambda raw: parse_field(parse_int, "batch_size", LABELS["batch_size"], raw, 1, LIMITS["timeline_batch"]),
        "seq_len": lambda raw: parse_field(parse_int, "seq_len", LABELS["seq_len"], raw, 1, block_size),
    }, args)


@checked_by(validate_memory_timeline)
def memory_timeline(session, args):
    """{n_layer, batch_size, seq_len} -> each recompute mode's timeline through one step of the course's
    model (seed 0) on fixed validation windows: events (phase, what, held, largest buffer added), peak."""
    session._need_corpus()
    base = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    v = validate_memory_timeline(args)
    cfg = dataclasses.replace(base, n_layer=v["n_layer"])
    params = model.init_params(cfg, 0)
    x, y = data.eval_windows(session.val_tokens, v["batch_size"], v["seq_len"])
    x, y = x.copy(), y.copy()  # two buffers, as a training batch is (views of one array would share)
    out = {**v, "modes": {}}
    for mode in checkpointing.MODES:
        tl = checkpointing.timeline(params, cfg, x, y, mode)
        f = memory.recompute_bytes(cfg, v["batch_size"], v["seq_len"], mode)
        out["modes"][mode] = {
            "events": [{"phase": e["phase"], "what": e["what"], "held": e["held"], "change": e["change"],
                        "largest": e["added"][0] if e["added"] else None} for e in tl["events"]],
            "peak_index": tl["peak_index"], "peak": tl["peak"], "set_by": tl["set_by"], "stored": tl["stored"],
            "formula_peak": f["peak"], "formula_stored": f["stored"], "loss": tl["loss"]}
    return out


def memory_presets(session, args):
    """The calculator's presets (form values)."""
    return presets()


OPS = {
    "memory_presets": memory_presets,
    "memory_calc": memory_calc,
    "memory_timeline": memory_timeline,
}
