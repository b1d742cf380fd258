"""Chapter 10's measurements: training memory on the course's model.

1. Bytes held (part_memory): one forward and backward of each SHAPES entry with no recomputation,
   full and selective (pylib.systems.checkpointing), on a fixed batch of validation windows. For each:
   the bytes held when the forward ends and at the step's peak, counted from pylib's own caches
   (pylib.systems.memory's owner accounting), the tensor that sets the peak, and whether every
   gradient equals pylib.model.backward's bit for bit (the count of unequal elements). The formulas
   beside them (memory.recompute_bytes, Korthikanti et al.'s count) are derived at build time.
2. Extra compute time (part_time): the step in each mode, TIME_REPEATS times, the modes interleaved
   so that a slow moment of the machine hits all three; the fastest repeat of each is kept (the
   least disturbed) and the ratio to no recomputation reported. These times, and the percentages
   derived from them, go in the "timings" section: they are the one thing a second run does not
   reproduce (the chapter quotes them as timings).
3. PyTorch's engine (part_torch, companions/ch10_checkpoint.py): the same models, weights and batches
   through torch.utils.checkpoint per block, float32 and float64, fully and selectively (a policy
   through create_selective_checkpoint_contexts that recomputes the attention core only). The
   gradients against pylib's (checkpointing.step, "none", "selective" and "full") and recomputed
   against plain; the bytes autograd keeps for the backward (and the policy saves), by saved-tensor
   hooks and by torch.profiler on the CPU, against pylib's count and against the companion's
   prediction (the difference must be 0). One torch thread: deterministic.

Everything is deterministic apart from the timings (fixed windows, init seed 0; no training, so
no seeds to average: the counts are exact and the gradients are compared element by element).

Budget (OPENBLAS_NUM_THREADS=1): the fastest steps measured, without the bookkeeping, are ~2-3 ms
(course, B = 16, T = 64), ~16-33 ms (wide, B = 8) and ~10 ms (long, B = 2, T = 256); full
recomputation adds up to a forward pass. With the bookkeeping (a count over the live buffers after
each operation) a step costs a few times more.
  memory: 3 shapes x (3 timelines + 3 steps + 1 reference step) ~ 0.7 s
  time:   3 shapes x 3 modes x (TIME_REPEATS + 1) steps ~ 26 x (8 + 60 + 40) ms ~ 3 s idle
Measured under contention from seven other runs on two cores: 0.7 s and 9.9 s of task time (10.6 s),
so an idle run is well inside the chapter's 30 s.
  torch:  3 shapes x 2 dtypes x (2 pylib steps + 2 PyTorch steps, and in float32 one more forward under
          the profiler); importing torch, checkpoint's first call (torch._dynamo) and the profiler's first
          start (torch._inductor) are fixed costs. Measured at a load of 11-19 on two cores: 52-78 s of task
          time; not yet timed on a quiet machine. The selective mode (one more pylib step and PyTorch step
          per shape and dtype, one more profiled forward in float32) added 1.6-2.5 s to the compare calls
          at a load of 9-12 (old 2.4-3.5 s, new 4.9-5.1 s, warm); the whole part took 15.5 s of task time.
"""

import dataclasses
import time

import numpy as np

from experiments.common import needs_torch, progress, run_parts, scaled

SHAPES = {  # name: (GPTConfig overrides, B, T)
    "course": ({}, 16, 64),  # the course's model at its training batch
    "wide": (dict(n_layer=4, n_head=4, n_embd=64), 8, 64),  # pylib.model's "decoder-4x64" preset
    "long": (dict(n_layer=2, n_head=8, n_embd=32, block_size=256), 2, 256),  # attention-heavy: 5as/h = 320
}
MODES = ("none", "selective", "full")
TIME_REPEATS = 25
SMALL = {"time_repeats": 2}  # the notebook's reduced size (experiments.common.small_size): every shape, fewer timed steps


def shape_batch(corpus, name, shapes=None):
    """(cfg, x, y): the model of shapes[name] (default SHAPES) and B windows of T tokens, evenly spaced in the
    validation split."""
    from pylib import data, model
    overrides, B, T = (shapes or SHAPES)[name]
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size, **overrides)
    x, y = data.eval_windows(corpus.val, B, T)[:2]
    return cfg, x.copy(), y.copy()  # copies: views of one windows array would share the ids buffer


def part_memory(corpus, shapes=None):
    """The bytes held in each mode, for every shape in shapes (default SHAPES)."""
    from pylib import model
    from pylib.systems import checkpointing
    shapes = shapes or SHAPES
    t0 = time.perf_counter()
    v = {}
    for name, (_, B, T) in progress(shapes.items(), desc="memory", unit="shape"):
        cfg, x, y = shape_batch(corpus, name, shapes)
        params = model.init_params(cfg, 0)
        _, ref = model.loss_and_grads(params, cfg, x, y)
        k = f"ch10.ckpt.{name}"
        v.update({f"{k}.B": B, f"{k}.T": T, f"{k}.L": cfg.n_layer, f"{k}.C": cfg.n_embd, f"{k}.H": cfg.n_head})
        for mode in MODES:
            tl = checkpointing.timeline(params, cfg, x, y, mode)
            _, grads, _ = checkpointing.step(params, cfg, x, y, mode, record=False)
            km = f"{k}.{mode}"  # the formulas beside these counts are derived at build time (derived())
            v.update({f"{km}.stored": tl["stored"], f"{km}.peak": tl["peak"],
                      f"{km}.peak_phase": tl["events"][tl["peak_index"]]["phase"],
                      f"{km}.peak_tensor": tl["set_by"][0], f"{km}.peak_tensor_bytes": tl["set_by"][1],
                      f"{km}.unequal_elements": int(sum(np.count_nonzero(grads[n] != ref[n]) for n in ref))})
        v[f"{k}.grad_elements"] = int(sum(g.size for g in ref.values()))
    return {"values": v, "timings": {"ch10.memory.seconds": time.perf_counter() - t0}}


def part_time(corpus, shapes=None):
    """The fastest of TIME_REPEATS (SMALL's at the reduced size) interleaved steps in each mode, for every shape in
    shapes (default SHAPES)."""
    from pylib import model
    from pylib.systems import checkpointing
    shapes = shapes or SHAPES
    repeats = scaled(TIME_REPEATS, SMALL["time_repeats"])
    t0 = time.perf_counter()
    v, timed = {}, {}
    for name in progress(shapes, desc="time", unit="shape"):
        cfg, x, y = shape_batch(corpus, name, shapes)
        params = model.init_params(cfg, 0)
        for mode in MODES:  # one untimed step each first
            checkpointing.step(params, cfg, x, y, mode, record=False)
        times = {m: [] for m in MODES}
        for _ in range(repeats):
            for mode in MODES:
                s = time.perf_counter()
                checkpointing.step(params, cfg, x, y, mode, record=False)
                times[mode].append(time.perf_counter() - s)
        for mode in MODES:
            best = min(times[mode])
            timed[f"ch10.time.{name}.{mode}.ms"] = 1e3 * best
            if mode != "none":
                timed[f"ch10.time.{name}.{mode}.extra_pct"] = 100 * (best / min(times["none"]) - 1)
    v["ch10.time.repeats"] = repeats
    return {"values": v, "timings": {**timed, "ch10.time.seconds": time.perf_counter() - t0}}


@needs_torch("ch10.torch")
def part_torch(corpus):
    from pylib import model
    t0 = time.perf_counter()
    import torch
    from companions import ch10_checkpoint as ckpt
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same sums in the same order on every run
    try:
        v = {"ch10.torch.status": f"measured with torch {torch.__version__} on the CPU",
             "ch10.torch.rng_state_bytes": ckpt.rng_state_bytes()}
        for name, (_, B, T) in progress(SHAPES.items(), desc="PyTorch", unit="shape"):
            cfg, x, y = shape_batch(corpus, name)
            params = model.init_params(cfg, 0)
            k = f"ch10.torch.{name}"
            for dtype, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
                r = ckpt.compare(params, cfg, x, y, dtype, count=tag == "f32")  # bytes: float32 only
                v[f"{k}.{tag}.unequal_to_plain"] = r["unequal_to_plain"]["full"]
                v[f"{k}.selective.{tag}.unequal_to_plain"] = r["unequal_to_plain"]["selective"]
                for mode in ckpt.MODES:
                    worst = max(r["grads"][mode].values())  # the worst tensor's max |pylib - torch| / max |pylib|
                    if tag == "f64":
                        v[f"{k}.{mode}.f64.worst_rel"] = worst
                        continue
                    v[f"{k}.{mode}.f32.worst_u"] = worst / 2.0 ** -24  # in units of float32's roundoff
                    saved, prof, pylib_stored = r["saved"][mode], r["profiled"][mode], r["pylib_stored"][mode]
                    km = f"{k}.{mode}"
                    terms = sum(ckpt.pylib_minus_torch(cfg, B, T, mode).values())  # pylib's count less PyTorch's
                    extras = sum(ckpt.profiler_minus_hooks(cfg, B, T, mode).values())  # the profiler's less the hooks'
                    v.update({f"{km}.saved": saved, f"{km}.profiled": prof, f"{km}.pylib_stored": pylib_stored,
                              f"{km}.ratio": saved / pylib_stored,
                              f"{km}.unexplained": pylib_stored - saved - terms,
                              f"{km}.profiler_unexplained": prof - saved - extras,
                              f"{km}.predicted_unexplained": saved - r["predicted"][mode]})
        v["ch10.torch.unexplained_max"] = max(abs(val) for kk, val in v.items() if kk.endswith("unexplained"))
        cfg, _, _ = shape_batch(corpus, "course")
        _, B, T = SHAPES["course"]
        v.update({f"ch10.torch.course.pylib_minus_torch.{t}": b for t, b in ckpt.pylib_minus_torch(cfg, B, T).items()})
        v.update({f"ch10.torch.course.selective.pylib_minus_torch.{t}": b
                  for t, b in ckpt.pylib_minus_torch(cfg, B, T, "selective").items()})
    finally:
        torch.set_num_threads(threads)
    return {"values": v, "timings": {"ch10.torch.seconds": time.perf_counter() - t0}}


PARTS = ["part_memory", "part_time", "part_torch"]


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


def derived(corpus):
    """The calculator's figures: bytes per parameter, LLaMA 7B, the course model."""
    from pylib import model
    from pylib.systems import memory
    d = {}
    for part, val in memory.bytes_per_param("mixed_fp32_grads", "adamw").items():
        d[f"ch10.bpp.mixed_fp32_grads.adamw.{part}"] = val
    for prec in ("mixed", "fp32"):
        for opt in ("adamw", "momentum", "sgd"):
            for part, val in memory.bytes_per_param(prec, opt).items():
                d[f"ch10.bpp.{prec}.{opt}.{part}"] = val
    llama = memory.LLAMA_7B
    d.update({"ch10.llama.params": memory.param_count(llama), "ch10.llama.L": llama.n_layer,
              "ch10.llama.C": llama.n_embd, "ch10.llama.H": llama.n_head, "ch10.llama.V": llama.vocab_size,
              "ch10.llama.F": llama.ffn_hidden, "ch10.llama.s": llama.seq_len})
    parts = memory.param_count_parts(llama)
    d.update({f"ch10.llama.params.{k}": v for k, v in parts.items()})
    gib = 2 ** 30
    for rc in MODES:
        r = memory.training_memory(llama, 1, 2048, precision="mixed", optimizer="adamw", recompute=rc)
        d[f"ch10.llama.b1.{rc}.activations_gib"] = r["activations"] / gib
        d[f"ch10.llama.b1.{rc}.total_gib"] = r["total"] / gib
    r = memory.training_memory(llama, 1, 2048, precision="mixed")
    for k in ("weights", "gradients", "moments", "master", "optimizer", "model_states"):
        d[f"ch10.llama.{k}_gib"] = r[k] / gib
    d["ch10.llama.model_states_gb"] = r["model_states"] / 1e9
    none, sel, full = (d[f"ch10.llama.b1.{rc}.activations_gib"] for rc in ("none", "selective", "full"))
    d["ch10.llama.b1.selective.saved_pct"] = 100 * (1 - sel / none)
    d["ch10.llama.b1.full.saved_pct"] = 100 * (1 - full / none)
    r32 = memory.training_memory(llama, 1, 2048, precision="fp32")
    d["ch10.llama.fp32.activations_gib"] = r32["activations"] / gib
    d["ch10.llama.fp32.model_states_gib"] = r32["model_states"] / gib
    d["ch10.llama.layer_as_over_h"] = 5 * llama.n_head * 2048 / llama.n_embd  # Korthikanti's 5as/h at s = 2048
    d["ch10.llama.layer_2as_over_h"] = 2 * llama.n_head * 2048 / llama.n_embd  # without dropout: 2as/h
    # The peak of the step (one layer recomputed on top of the checkpoints), and LLaMA as trained:
    # memory-efficient attention, which never holds the s x s probabilities (Touvron et al. 2023, section 2.4).
    for rc in MODES:
        r = memory.training_memory(llama, 1, 2048, recompute=rc)
        d[f"ch10.llama.b1.{rc}.peak_gib"] = r["activations_peak"] / gib
        fa = memory.training_memory(llama, 1, 2048, recompute=rc, memory_efficient_attention=True)
        d[f"ch10.llama.fa.b1.{rc}.activations_gib"] = fa["activations"] / gib
        d[f"ch10.llama.fa.b1.{rc}.peak_gib"] = fa["activations_peak"] / gib
    d["ch10.llama.b1.full.peak_saved_pct"] = 100 * (1 - d["ch10.llama.b1.full.peak_gib"] / d["ch10.llama.b1.none.peak_gib"])
    d["ch10.llama.b1.full.stored_with_layer_gib"] = (
        memory.training_memory(llama, 1, 2048, recompute="full")["activations"]
        + memory.korthikanti_layer_bytes(llama, 2048, 1, 2, "none")) / gib
    d["ch10.llama.b1.full.stored_with_layer_saved_pct"] = 100 * (1 - d["ch10.llama.b1.full.stored_with_layer_gib"] / none)
    d["ch10.llama.one_layer_gib"] = memory.korthikanti_layer_bytes(llama, 2048, 1, 2, "none") / gib
    d["ch10.llama.fa.full.peak_saved_pct"] = 100 * (1 - d["ch10.llama.fa.b1.full.peak_gib"] / d["ch10.llama.fa.b1.none.peak_gib"])
    for s in (4096, 8192):
        r = memory.training_memory(llama, 1, s, precision="mixed")
        d[f"ch10.llama.s{s}.activations_gib"] = r["activations"] / gib
        d[f"ch10.llama.s{s}"] = s
        fa = memory.training_memory(llama, 1, s, precision="mixed", memory_efficient_attention=True)
        d[f"ch10.llama.fa.s{s}.activations_gib"] = fa["activations"] / gib
    # The formulas beside the measured counts (chapter 10's tables): derived, not measured
    for name, (overrides, B, T) in SHAPES.items():
        cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size, **overrides)
        shape = memory.shape_from_config(cfg)
        for mode in MODES:
            k = f"ch10.formula.{name}.{mode}"
            d[f"{k}.peak"] = memory.recompute_bytes(cfg, B, T, mode)["peak"]
            d[f"{k}.ours_layer_16bit"] = memory.recompute_bytes(cfg, B, T, mode, itemsize=2)["stored_layers"] // cfg.n_layer
            d[f"{k}.korthikanti_layer"] = memory.korthikanti_layer_bytes(dataclasses.replace(shape, dropout=True), T, B, 2, mode)
            d[f"{k}.korthikanti_layer_nodropout"] = memory.korthikanti_layer_bytes(shape, T, B, 2, mode)
    # The course model
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    shape = memory.shape_from_config(cfg)
    d["ch10.course.params"] = memory.param_count(shape)
    d["ch10.course.params_pylib"] = model.count_params(cfg)
    r = memory.training_memory(shape, 16, 64, precision="fp32", optimizer="adamw", activation_model="pylib")
    for k in ("weights", "gradients", "optimizer", "activations", "model_states", "total"):
        d[f"ch10.course.{k}"] = r[k]
    d["ch10.course.act_over_states"] = r["activations"] / r["model_states"]
    from pylib.web import memory_ops
    d["ch10.timeline_layers"] = memory_ops.LIMITS["timeline_layers"]
    d["ch10.timeline_batch"] = memory_ops.LIMITS["timeline_batch"]
    return d


def markdown(results, shapes=None):
    """results.md's section for chapter 10 (the rows of shapes, default SHAPES)."""
    v, t = results["values"], results.get("timings", {})
    lines = ["## Chapter 10: training memory", "",
             "Bytes of activations held in one forward and backward (float32, pylib's own cache accounting), "
             "and the fastest of "
             f"{v.get('ch10.time.repeats', TIME_REPEATS)} interleaved steps (step times: timings, not reproducible).", "",
             "| model | B × T | mode | held after forward | peak | peak set by | unequal grad elements | step (ms) | extra time |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in shapes or SHAPES:
        k = f"ch10.ckpt.{name}"
        if f"{k}.none.stored" not in v:
            continue
        for mode in MODES:
            km, kt = f"{k}.{mode}", f"ch10.time.{name}.{mode}"
            ms = f"{t[kt + '.ms']:.2f}" if kt + ".ms" in t else "–"
            extra = f"{t[kt + '.extra_pct']:+.0f}%" if kt + ".extra_pct" in t else "–"
            lines.append(f"| {name} (L={v[k + '.L']}, C={v[k + '.C']}, H={v[k + '.H']}) | {v[k + '.B']} × {v[k + '.T']} | "
                         f"{mode} | {v[km + '.stored']:,} | {v[km + '.peak']:,} | `{v[km + '.peak_tensor']}` "
                         f"({v[km + '.peak_tensor_bytes']:,} B, {v[km + '.peak_phase']}) | "
                         f"{v[km + '.unequal_elements']} of {v[k + '.grad_elements']:,} | {ms} | {extra} |")
    if "ch10.torch.course.none.saved" in v:
        lines += ["", f"PyTorch's torch.utils.checkpoint per block ({v['ch10.torch.status']}; selective: with a policy "
                  "that recomputes the attention core only): bytes autograd keeps for the backward (saved-tensor "
                  "hooks, and what the policy saves, distinct storages, parameters excluded; the CPU memory "
                  "profiler), pylib's count, and the worst gradient difference from pylib (per tensor, relative "
                  "to its largest entry).", "",
                  "| model | mode | hooks | profiler | pylib | hooks / pylib "
                  "| unexplained (pylib, profiler, prediction) | float32 worst (u) | float64 worst "
                  "| recomputed ≠ plain (f32, f64) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for name in SHAPES:
            for mode in MODES:
                k = f"ch10.torch.{name}.{mode}"
                if k + ".saved" not in v:  # measured before the selective mode was added
                    continue
                kn = {"none": None, "selective": k, "full": f"ch10.torch.{name}"}[mode]
                unequal = f"{v[kn + '.f32.unequal_to_plain']}, {v[kn + '.f64.unequal_to_plain']}" if kn else "–"
                lines.append(f"| {name} | {mode} | {v[k + '.saved']:,} | {v[k + '.profiled']:,} | "
                             f"{v[k + '.pylib_stored']:,} | {v[k + '.ratio']:.3f} | {v[k + '.unexplained']}, "
                             f"{v[k + '.profiler_unexplained']}, {v[k + '.predicted_unexplained']} | "
                             f"{v[k + '.f32.worst_u']:.1f} | {v[k + '.f64.worst_rel']:.1e} | {unequal} |")
        for mode, prefix in (("no recomputation", "ch10.torch.course.pylib_minus_torch."),
                             ("selective", "ch10.torch.course.selective.pylib_minus_torch.")):
            terms = ", ".join(f"{kk.rsplit('.', 1)[1]} {val:+,}" for kk, val in v.items() if kk.startswith(prefix))
            if terms:
                lines += ["", f"pylib less PyTorch, course model, {mode} (bytes): {terms}."]
        lines += ["", "Largest unexplained "
                  f"remainder: {v['ch10.torch.unexplained_max']}. Checkpoint's CPU RNG state: "
                  f"{v['ch10.torch.rng_state_bytes']:,} bytes per call."]
    elif "ch10.torch.status" in v:
        lines += ["", f"PyTorch's torch.utils.checkpoint: {v['ch10.torch.status']}."]
    return lines + [""]
