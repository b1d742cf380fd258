"""Chapter 10's exercises: the bytes of training, counted (pylib.exercises says how checks work)."""

import dataclasses

import numpy as np

from pylib import data, model, optim
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_number, near
from pylib.systems import checkpointing, memory

GB = 1e9
GIB = 2 ** 30

# ---------------------------------------------------------------------------
# 1. Predict: the model states of a larger LLaMA-style model

# LLaMA 7B's design (memory.LLAMA_7B) with 40 layers of width 5,120, 40 heads and an MLP of 13,824
LARGER = dataclasses.replace(memory.LLAMA_7B, n_layer=40, n_embd=5120, n_head=40, ffn_hidden=13824,
                             name="a 40-layer LLaMA-style model")


def larger_states_gb():
    """Model states of LARGER, mixed precision with AdamW, one device, in GB."""
    return memory.training_memory(LARGER, precision="mixed", optimizer="adamw")["model_states"] / GB


def check_larger_states(value, truth):
    if near(value, truth / 8):
        raise Wrong("That is the 16-bit weights alone, 2 bytes per parameter. Training also keeps their gradients, "
                    "Adam's two moments and the fp32 master copy.")
    if near(value, truth / 4):
        raise Wrong("That is 4 bytes per parameter: one fp32 copy of the weights. Count everything training keeps "
                    "for each parameter.")
    if near(value, truth * 18 / 16):
        raise Wrong("18 bytes per parameter is Megatron-LM's layout with fp32 main gradients; mixed precision as "
                    "ZeRO counts it keeps 16-bit gradients.")
    if near(value, truth * 12 / 16):
        raise Wrong("12 bytes per parameter leaves out the fp32 master copy of the weights, which the update goes "
                    "into because 16-bit weights would round small updates away.")
    if near(value, truth * GB / GIB):
        raise Wrong("That is the answer in GiB (2^30 bytes); the task asks for GB (10^9 bytes).")


# ---------------------------------------------------------------------------
# 2. Implement: the model-state bytes of a LLaMA-style shape, without pylib's calculator

STATES_STARTER = '''def model_state_bytes(n_layer, n_embd, ffn_hidden, vocab_size, precision, optimizer):
    """Bytes of model states to train a LLaMA-style model on one device (no activations).

    LLaMA-style: an RMSNorm (a gain, no bias) before each of a layer's two sublayers and one after the
    last layer; attention's q, k, v and output projections, n_embd x n_embd each; a SwiGLU MLP of
    hidden width ffn_hidden; rotary positions (no parameters); an untied output head; no biases.
    precision: "mixed" (16-bit weights and gradients, fp32 master copy), "mixed_fp32_grads"
    (16-bit weights, fp32 main gradients, fp32 master copy) or "fp32" (4-byte weights and gradients).
    optimizer: "adamw" (two fp32 moments), "momentum" (one fp32 buffer) or "sgd" (no state).
    Returns {"weights", "gradients", "moments", "master", "total"}, each in bytes.
    Count it yourself: pylib.systems.memory's functions are off limits here.
    """
    raise NotImplementedError
'''

STATES_SOLUTION = '''def model_state_bytes(n_layer, n_embd, ffn_hidden, vocab_size, precision, optimizer):
    C, F, V = n_embd, ffn_hidden, vocab_size
    per_layer = 4 * C * C + 3 * C * F + 2 * C  # q, k, v, out; gate, up, down; two RMSNorm gains
    params = 2 * V * C + n_layer * per_layer + C  # embedding and untied head, the layers, the final norm
    weight, grad, master = {"mixed": (2, 2, 4), "mixed_fp32_grads": (2, 4, 4), "fp32": (4, 4, 0)}[precision]
    states = {"sgd": 0, "momentum": 1, "adamw": 2}[optimizer]  # fp32 numbers per parameter
    out = {"weights": weight * params, "gradients": grad * params,
           "moments": 4 * states * params, "master": master * params}
    out["total"] = sum(out.values())
    return out
'''

STATES_PARTS = ("weights", "gradients", "moments", "master", "total")
_OFF_LIMITS = ("training_memory", "param_count", "param_count_parts", "bytes_per_param", "activation_growth")


def _llama_style(n_layer, n_embd, ffn_hidden, vocab_size):
    return dataclasses.replace(memory.LLAMA_7B, n_layer=n_layer, n_embd=n_embd, n_head=1, ffn_hidden=ffn_hidden,
                               vocab_size=vocab_size, name="")


def _states_want(shape, precision, optimizer):
    t = memory.training_memory(shape, precision=precision, optimizer=optimizer)
    return {"weights": t["weights"], "gradients": t["gradients"], "moments": t["moments"], "master": t["master"],
            "total": t["model_states"]}


def _call_without_calculator(fn, *args):
    """fn(*args) with pylib.systems.memory's counting functions replaced by a refusal."""
    saved = {name: getattr(memory, name) for name in _OFF_LIMITS}

    def refuse(name):
        def refused(*a, **k):
            raise Wrong(f"Your function calls pylib.systems.memory.{name}: count the parameters and the bytes "
                        "yourself, from the shape and the recipe.")
        return refused

    # ... also where the answer imported them by name (from pylib.systems.memory import param_count)
    originals = {id(f): name for name, f in saved.items()}
    imported = {k: v for k, v in fn.__globals__.items() if id(v) in originals}
    for name in _OFF_LIMITS:
        setattr(memory, name, refuse(name))
    for k, v in imported.items():
        fn.__globals__[k] = refuse(originals[id(v)])
    try:
        return fn(*args)
    finally:
        for name, f in saved.items():
            setattr(memory, name, f)
        fn.__globals__.update(imported)


def _states_got(fn, dims, precision, optimizer):
    out = _call_without_calculator(fn, *dims, precision, optimizer)
    if not isinstance(out, dict):
        raise Wrong(f"model_state_bytes should return a dict with keys {', '.join(STATES_PARTS)}; yours returns a "
                    f"{type(out).__name__}.")
    missing = [k for k in STATES_PARTS if k not in out]
    if missing:
        raise Wrong(f"Your dict has no {', '.join(repr(k) for k in missing)}: it needs {', '.join(STATES_PARTS)}.")
    return {k: expect_number(out[k], f"{k!r}") for k in STATES_PARTS}


def check_model_state_bytes(fn):
    dims = (32, 4096, 11008, 32000)  # LLaMA 7B's shape
    shape = _llama_style(*dims)
    P = memory.param_count(shape)
    L, C, F, V = dims
    got = _states_got(fn, dims, "mixed", "adamw")
    if not close(got["weights"], 2 * P, 1e-12):
        counted = got["weights"] / 2
        if close(counted, P - V * C, 1e-12):
            raise Wrong("Your count is one V x C matrix short: the head is untied, so the output head has its own "
                        "vocab_size x n_embd weights besides the embedding.")
        if close(counted, P - L * C * F, 1e-12):
            raise Wrong("Your count is one C x F matrix per layer short: a SwiGLU MLP has three matrices (gate, up "
                        "and down), not two.")
        if close(counted, P - (2 * L + 1) * C, 1e-9) or close(counted, P + (2 * L + 1) * C, 1e-9):
            raise Wrong("Your count is off by the norms: RMSNorm has one gain of n_embd numbers and no bias, two per "
                        "layer and one at the end.")
        raise Wrong(f"At LLaMA 7B's shape in mixed precision, your weights come to {counted:,.0f} parameters at "
                    "2 bytes each, which is not the shape's parameter count (the chapter gives it).")
    rng = np.random.default_rng(10)
    drawn = tuple(int(v) for v in rng.integers(1, [12, 512, 2048, 60000]))  # a random shape
    for precision in ("mixed", "mixed_fp32_grads", "fp32"):
        for optimizer in ("adamw", "momentum", "sgd"):
            for case in (dims, drawn, (1, 1, 1, 1)):
                want = _states_want(_llama_style(*case), precision, optimizer)
                got = _states_got(fn, case, precision, optimizer)
                p = memory.param_count(_llama_style(*case))
                for part in STATES_PARTS[:-1]:
                    if close(got[part], want[part], 1e-12):
                        continue
                    per = got[part] / p
                    where = f"{precision} with {optimizer}"
                    if part == "master" and precision == "fp32":
                        raise Wrong("fp32 training has no separate master copy: the fp32 weights already are one. "
                                    f"Yours keeps {per:g} bytes per parameter of it.")
                    if part == "moments" and optimizer == "momentum" and close(per, 8):
                        raise Wrong("SGD with momentum keeps one fp32 buffer per parameter, not two moments as "
                                    "Adam does.")
                    raise Wrong(f"The {part} for {where} come to {per:g} bytes per parameter in your count; "
                                "check that row of the chapter's table.")
                if not close(got["total"], sum(got[k] for k in STATES_PARTS[:-1]), 1e-12):
                    raise Wrong("Your parts are right but 'total' is not their sum.")
    return ("Right: your count matches pylib's calculator for LLaMA 7B, a random shape and a one-number shape, in "
            f"every recipe; LLaMA 7B with mixed-precision AdamW needs {16 * P / GIB:.1f} GiB of model states.")


# ---------------------------------------------------------------------------
# 3. Predict: the activations of a GPT-3-sized model, by Korthikanti et al.'s count

GPT3 = memory.TransformerShape(n_layer=96, n_embd=12288, n_head=96, vocab_size=51200, seq_len=2048,
                               ffn_hidden=4 * 12288, dropout=True, name="GPT-3 175B's shape")


def gpt3_activations_gb():
    """What GPT3's 96 layers keep (16-bit, dropout, no recomputation) for one sequence of 2,048 tokens, in GB."""
    return GPT3.n_layer * memory.korthikanti_layer_bytes(GPT3, GPT3.seq_len, 1, 2, "none") / GB


def check_gpt3_activations(value, truth):
    s, h, a = GPT3.seq_len, GPT3.n_embd, GPT3.n_head
    quad = 5 * a * s / h
    if near(value, truth * 34 / (34 + quad)):
        raise Wrong("That is the 34 sbh part only: without recomputation the layer also keeps attention's "
                    "s^2 terms, the 5as/h part, which at this length is larger than the rest.")
    if near(value, truth / GPT3.n_layer):
        raise Wrong("That is one layer; the model has 96 of them, and each keeps its own activations.")
    if near(value, truth * 2):
        raise Wrong("The formula already counts bytes of 16-bit activations: sbh(34 + 5as/h) is in bytes, so do not "
                    "multiply by 2 bytes per number again.")
    if near(value, truth * GB / GIB):
        raise Wrong("That is the answer in GiB (2^30 bytes); the task asks for GB (10^9 bytes).")


# ---------------------------------------------------------------------------
# 4. Investigate: change the recomputation, compare the step and the memory

RECOMPUTE_STARTER = '''from pylib.systems import checkpointing


def recompute_step(params, cfg, x, y):
    """Change one condition of the step: recomputation, "none" -> "selective" or "full".

    Return checkpointing.step's (loss, grads, held) for the changed step.
    The unchanged step is checkpointing.step(params, cfg, x, y, "none").
    """
    return checkpointing.step(params, cfg, x, y, "none")  # change this line only
'''

RECOMPUTE_SOLUTION = '''from pylib.systems import checkpointing


def recompute_step(params, cfg, x, y):
    return checkpointing.step(params, cfg, x, y, "selective")  # or "full"
'''


def _recompute_setup():
    """The chapter's course row: the course model (seed 0, float32) on 16 validation windows of 64 tokens."""
    c = corpus()
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=c.vocab.size)
    x, y = data.eval_windows(c.val, 16, cfg.block_size)[:2]
    return cfg, model.init_params(cfg, 0), x.copy(), y.copy()  # copies: separate ids and targets buffers


def _adamw_update(params, grads):
    p = model.pack_params({k: v.copy() for k, v in params.items()})
    before = {k: v.copy() for k, v in p.items()}
    optim.adamw_step(p, grads, optim.adamw_init(p), 1e-2, weight_decay=0.1)
    return {k: p[k] - before[k] for k in p}


def check_recompute_step(fn):
    cfg, params, x, y = _recompute_setup()
    B, T = x.shape
    seen = {}
    real = checkpointing.step

    def spy(params, cfg, x, y, recompute="none", *args, **kwargs):
        seen["mode"] = recompute
        return real(params, cfg, x, y, recompute, *args, **kwargs)

    imported = [k for k, v in fn.__globals__.items() if v is real]  # from pylib.systems.checkpointing import step
    checkpointing.step = spy
    fn.__globals__.update({k: spy for k in imported})
    try:
        out = fn({k: v.copy() for k, v in params.items()}, cfg, x.copy(), y.copy())
    finally:
        checkpointing.step = real
        fn.__globals__.update({k: real for k in imported})
    mode = seen.get("mode")
    if mode is None:
        raise Wrong("Your function did not call checkpointing.step: change its recompute argument and nothing else.")
    if mode == "none":
        raise Wrong("Your function still runs checkpointing.step with recompute=\"none\": that is the unchanged "
                    "step. Change the recomputation to \"selective\" or \"full\".")
    if not (isinstance(out, tuple) and len(out) == 3 and isinstance(out[1], dict)):
        raise Wrong("recompute_step should return checkpointing.step's (loss, grads, held).")
    loss, grads, held = expect_number(out[0], "The loss"), out[1], out[2]
    loss0, grads0, held0 = real(params, cfg, x, y, "none")
    if set(grads) != set(grads0):
        raise Wrong("Your grads do not have the model's parameter names.")
    worst = max(float(np.max(np.abs(np.asarray(grads[k], dtype=float) - grads0[k])) / (np.abs(grads0[k]).max() or 1.0))
                if np.shape(grads[k]) == grads0[k].shape else np.inf for k in grads0)
    if not (close(loss, loss0, 1e-5) and worst < 1e-4):
        raise Wrong(f"Your loss differs from the unchanged step's by {abs(loss - loss0):.2g} nats and the gradients "
                    f"by up to {worst:.2g} (relative), more than rounding. Recomputation "
                    "changes when things are computed, not what: did you change the batch or the weights too?")
    unequal = sum(int(np.count_nonzero(np.asarray(grads[k]) != grads0[k])) for k in grads0)
    if loss != loss0 or unequal or any(np.asarray(grads[k]).dtype != grads0[k].dtype for k in grads0):
        raise Wrong(f"Close, but not bit-identical: {unequal} gradient elements (and the loss by {abs(loss - loss0):.1e}) "
                    "differ from the unchanged step's. Recomputation calls the same functions on the same arrays, so "
                    "every bit should agree: did you change the precision, or anything else besides the recomputation?")
    up, up0 = _adamw_update(params, grads), _adamw_update(params, grads0)
    if any(not np.array_equal(up[k], up0[k]) for k in up0):
        raise Wrong("The AdamW updates from your gradients differ from the unchanged step's.")
    if not getattr(held, "events", None):
        raise Wrong("Your step's held timeline recorded nothing (record=False?): keep the recording on, so the "
                    "check can compare the memory.")
    stored = lambda h: h.events[max(i for i, e in enumerate(h.events) if e["phase"] == "forward")]["held"]  # noqa: E731
    peak, peak0 = held.peak()[1]["held"], held0.peak()[1]["held"]
    formula = memory.recompute_bytes(cfg, B, T, mode)
    agree = "agrees with" if (peak, stored(held)) == (formula["peak"], formula["stored"]) else "differs from"
    return (f"Right: with recompute=\"{mode}\" the loss, all {sum(g.size for g in grads0.values()):,} gradient "
            "elements and the AdamW update are bit-identical to the unchanged step's. What changed is the memory: "
            f"held at the end of the forward pass {stored(held0):,} -> {stored(held):,} bytes, peak "
            f"{peak0:,} -> {peak:,} bytes (the formula memory.recompute_bytes {agree} it). "
            + ("Full recomputation stores only each block's input, but before the block's backward the whole "
               f"block comes back, and with {cfg.n_layer} layer that is nearly everything. Try \"selective\" too."
               if mode == "full" else "Selective recomputation drops attention's core (the probabilities are its "
               "largest part) and brings it back one block at a time. Try \"full\" too, and compare the peaks."))


EXERCISES = [
    Exercise(
        id="ch10.larger_states", kind="predict", title="Model states of a larger LLaMA",
        task="""Take LLaMA 7B's design as the chapter describes it (RMSNorm, a SwiGLU MLP, rotary positions, an
untied head, no biases, a vocabulary of 32,000) and make it larger: 40 layers of width 5,120 with 40 heads
and an MLP width of 13,824. Trained on one device in mixed precision with AdamW, how many **GB**
(10⁹ bytes) of model states does it hold: weights, gradients, optimiser state and master copy, without
the activations?""",
        truth=larger_states_gb, check=check_larger_states, unit="GB",
        solution="""Per layer: 4 · 5120² for attention, 3 · 5120 · 13,824 for the SwiGLU MLP and 2 · 5120 for the
two gains, 317,204,480 parameters; 40 layers make 12.69 billion. The embedding and the untied head add
2 · 32,000 · 5120, and the final norm 5120: about 13.02 billion in all. Mixed precision with AdamW keeps
16 bytes per parameter (2 + 2 for the 16-bit weights and gradients, 4 + 4 + 4 for the master copy and
the two moments), about 208 GB, with no activation counted yet: more than two 80 GB devices.""",
        hints=("Count the parameters as `param_count_parts` does: per layer, attention's four square matrices, "
               "the MLP's three C × F matrices and two gains; then the embedding, the untied head and a gain.",
               "Then multiply by the bytes per parameter from the chapter's first table, mixed precision with AdamW."),
        mistakes=(Mistake("26", "16-bit weights alone"), Mistake("234", "Megatron-LM"),
                  Mistake("156", "master copy"), Mistake("194", "GiB")),
    ),
    Exercise(
        id="ch10.model_state_bytes", kind="implement", title="Sixteen bytes per parameter, from the shape",
        task="""Write the model-state count of a LLaMA-style model yourself, from its shape and its precision recipe:
its parameter count, then the bytes of each part per the chapter's table. The check compares it with
`memory.training_memory` on LLaMA 7B and other shapes, in every recipe, and refuses an answer that calls
pylib's calculator.""",
        starter=STATES_STARTER, function="model_state_bytes", solution=STATES_SOLUTION,
        check=check_model_state_bytes,
        hints=("Per layer: q, k, v and the output projection are four C × C matrices; the SwiGLU MLP has three "
               "C × F matrices; the two RMSNorms have a gain of C each.",
               "Outside the layers: the embedding (V × C), the untied head (another V × C) and the final norm's gain.",
               "Then bytes per parameter: weights and gradients by the precision, 4 bytes per optimiser number, and "
               "a 4-byte master copy only when the weights are 16-bit."),
        mistakes=(
            Mistake(STATES_SOLUTION.replace("params = 2 * V * C +", "params = V * C +"), "head is untied"),
            Mistake(STATES_SOLUTION.replace("3 * C * F", "2 * C * F"), "three matrices"),
            Mistake(STATES_SOLUTION.replace('"fp32": (4, 4, 0)', '"fp32": (4, 4, 4)'), "no separate master copy"),
            Mistake(STATES_SOLUTION.replace('"momentum": 1', '"momentum": 2'), "one fp32 buffer"),
        )),
    Exercise(
        id="ch10.gpt3_activations", kind="predict", title="The activations of GPT-3's layers",
        task="""Korthikanti et al.'s count, sbh(34 + 5as/h) bytes per layer, is for a 16-bit GPT with dropout. Take
the shape of GPT-3 175B (Brown et al. 2020, Table 2.1): 96 layers, width h = 12,288, a = 96 heads. Without
recomputation, how many **GB** (10⁹ bytes) of activations do its 96 layers keep for one sequence
(b = 1) of s = 2,048 tokens? Leave out the embedding, the final norm and the logits.""",
        truth=gpt3_activations_gb, check=check_gpt3_activations, unit="GB",
        solution="""sbh = 2048 · 12,288 = 25.2 million; 5as/h = 5 · 96 · 2048 / 12,288 = 80, more than the 34 of the
rest of the layer. One layer keeps 25.2 million × 114 bytes, 2.87 GB, and 96 layers 275 GB, for a single
sequence: more than three 80 GB devices. Selective recomputation drops the 80 and keeps 34/114 of it,
82 GB; full recomputation keeps 2sbh per layer, under 5 GB.""",
        hints=("Compute 5as/h first and compare it with 34: which part of the layer dominates at this length?",
               "The formula is bytes per layer, already at 2 bytes per number; multiply by the number of layers."),
        mistakes=(Mistake("82.2", "s^2 terms"), Mistake("2.87", "one layer"), Mistake("551", "multiply by 2 bytes"),
                  Mistake("256.5", "GiB")),
    ),
    Exercise(
        id="ch10.recompute_mode", kind="investigate", title="One condition changed: recomputation",
        task="""Run one step of the course model, on the chapter's batch of 16 windows, with recomputation turned on:
change `"none"` to `"selective"` or `"full"` and nothing else. The check compares your step's loss, every
gradient element and the AdamW update with the unchanged step's, and reports what happened to the bytes
held at the end of the forward pass and at the peak. Try both modes.""",
        starter=RECOMPUTE_STARTER, function="recompute_step", solution=RECOMPUTE_SOLUTION,
        check=check_recompute_step, needs_corpus=True,
        hints=("`checkpointing.step`'s fifth argument is the recompute mode: \"none\", \"selective\" or \"full\".",
               "How close should the gradients be? The chapter says what recomputation calls, and on which arrays."),
        mistakes=(
            Mistake(RECOMPUTE_STARTER, "still runs checkpointing.step with recompute=\"none\""),
            Mistake(RECOMPUTE_SOLUTION.replace("(params, cfg, x, y, \"selective\")",
                                               "(params, cfg, x[:, :32], y[:, :32], \"full\")"),
                    "did you change the batch or the weights too"),
            Mistake(RECOMPUTE_SOLUTION.replace("checkpointing.step(params,",
                                               "checkpointing.step({k: v.astype('float64') for k, v in params.items()},"),
                    "not bit-identical"),
            Mistake(RECOMPUTE_SOLUTION.replace('"selective")', '"full", record=False)'), "recorded nothing"),
        )),
]
