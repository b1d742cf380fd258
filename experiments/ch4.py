"""Chapter 4's measurements: the gradient check, activation memory, and per-layer gradient norms.

- The gradient check: every element of every parameter of the course's model (seed 0, float64) on
  a fixed real batch, centred differences with h = pylib.studies.gradcheck.H_DEFAULT; per tensor the
  largest error relative to the tensor's largest gradient; at the initial weights and again at
  perturbed ones (LayerNorm gains away from 1, biases away from 0), and a LayerNorm backward that
  ignores its gain, checked at both.
- Activation memory: the bytes the forward's caches keep (pylib.systems.memory, counted), by tensor, at
  the training batch (TrainConfig().batch_size x block_size), float32; and the formula's total.
- The residual highway: the gradient norm of each block's parameters in the decoder-4x64 preset,
  at initialisation and after a short training run, on a fixed batch, three seeds.
"""

import dataclasses
import time

import numpy as np

from experiments.common import SEEDS, arm, paired_text, progress, run_parts, scaled

HIGHWAY_PRESET = "decoder-4x64"
HIGHWAY_STEPS = 100  # a short run: enough to leave the initialisation
HIGHWAY_LR = 1e-2
CHECK_BATCH = (2, 64)
# the notebook's reduced size (experiments.common.small_size): two seeds and a short run for the highway,
# and the gradient checks on a few elements per tensor instead of every element (or the page's SUBSET)
SMALL = {"seeds": (0, 1), "highway_steps": 10, "check_elements": 8}


def highway_cfg(corpus):
    from pylib import model
    return dataclasses.replace(model.GPTConfig.preset(HIGHWAY_PRESET), vocab_size=corpus.vocab.size)


def block_grad_norms(params, cfg, x, y):
    """{"embeddings", "h.0", ..., "ln_f"}: the L2 norm of each group's parameter gradients."""
    from pylib import model
    grads = model.loss_and_grads(params, cfg, x, y)[1]
    groups = {}
    for name, g in grads.items():
        key = "embeddings" if name in ("wte", "wpe") else ("ln_f" if name.startswith("ln_f") else ".".join(name.split(".")[:2]))
        groups[key] = groups.get(key, 0.0) + float((g.astype(np.float64) ** 2).sum())
    return {k: v ** 0.5 for k, v in groups.items()}


def run_highway(corpus, lr=HIGHWAY_LR):
    """Block gradient norms at init and after a short run at peak rate lr, per seed."""
    from pylib import data, model, train
    cfg = highway_cfg(corpus)
    x, y = data.eval_windows(corpus.train, 16, cfg.block_size)
    seeds, steps = scaled(SEEDS, SMALL["seeds"]), scaled(HIGHWAY_STEPS, SMALL["highway_steps"])
    at = {"init": [], "trained": []}
    for seed in progress(seeds, desc=f"highway, {steps} steps", unit="seed"):
        tc = dataclasses.replace(train.TrainConfig(), seed=seed, steps=steps, lr=lr,
                                 warmup_steps=10, eval_interval=steps, eval_windows=8)
        at["init"].append(block_grad_norms(model.init_params(cfg, seed), cfg, x, y))
        params, _ = train.train(cfg, tc, corpus.train, corpus.val)
        at["trained"].append(block_grad_norms(params, cfg, x, y))
    values = {}
    for when, runs in at.items():
        for group in runs[0]:
            values.update(arm(f"ch4.highway.{when}.{group}", {seed: r[group] for seed, r in zip(seeds, runs)}))
        values.update(arm(f"ch4.highway.{when}.first_over_last",
                          {seed: r["h.0"] / r[f"h.{cfg.n_layer - 1}"] for seed, r in zip(seeds, runs)}))
    values["ch4.highway.n_layer"] = cfg.n_layer
    values["ch4.highway.steps"] = steps
    settings = {"preset": HIGHWAY_PRESET, "steps": steps, "lr": lr, "batch": "16 fixed train windows"}
    return values, settings


def run_gradcheck(corpus, which="init"):
    """Every element of every parameter at the seed-0 weights, `which` = "init" or "perturbed"
    (pylib.studies.gradcheck.weights_at); keys ch4.gradcheck.* and ch4.gradcheck.perturbed.*."""
    from pylib import model
    from pylib.studies import gradcheck
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    params = gradcheck.weights_at(cfg, 0, which)
    x, y = gradcheck.fixed_batch(corpus.train, *CHECK_BATCH)
    rows = gradcheck.check_all(params, cfg, x, y, subset=scaled(None, SMALL["check_elements"]))
    tag = "ch4.gradcheck" if which == "init" else f"ch4.gradcheck.{which}"
    values = {f"{tag}.{r['name']}.max": r["max"] for r in rows}
    worst = max(rows, key=lambda r: r["max"])
    values.update({f"{tag}.max": worst["max"], f"{tag}.worst_tensor": worst["name"],
                   f"{tag}.elements": sum(r["checked"] for r in rows),
                   f"{tag}.median_of_medians": float(np.median([r["median"] for r in rows]))})
    return values


def run_bug_demo(corpus):
    """A LayerNorm backward that ignores its gain, checked at init and at perturbed weights (the page's
    subset of elements per tensor): the largest error and the tensor it is in."""
    from pylib import model
    from pylib.studies import gradcheck
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    x, y = gradcheck.fixed_batch(corpus.train, *CHECK_BATCH)
    values = {}
    with gradcheck.layernorm_backward_ignoring_gain():
        for which in ("init", "perturbed"):
            rows = gradcheck.check_all(gradcheck.weights_at(cfg, 0, which), cfg, x, y,
                                       subset=scaled(gradcheck.SUBSET, SMALL["check_elements"]))
            worst = max(rows, key=lambda r: r["max"])
            values[f"ch4.gradcheck.bug_ignore_gain.{which}.max"] = worst["max"]
            values[f"ch4.gradcheck.bug_ignore_gain.{which}.worst_tensor"] = worst["name"]
    return values


def activation_batch(corpus):
    from pylib import model, train
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    return cfg, train.TrainConfig().batch_size, cfg.block_size


def run_activations(corpus):
    from pylib import data, model
    from pylib.systems import memory
    cfg, B, T = activation_batch(corpus)
    x, y = data.eval_windows(corpus.train, B, T)
    x, y = x.copy(), y.copy()  # separate buffers, as the formula counts them (eval_windows makes views of one)
    rows = memory.measure_activations(model.init_params(cfg, 0), cfg, x, y)
    values = {f"ch4.act.{r['name']}": r["bytes"] for r in rows}
    values.update({"ch4.act.total": sum(r["bytes"] for r in rows), "ch4.act.B": B, "ch4.act.T": T,
                   "ch4.act.rows": [r["name"] for r in rows]})
    return values


PARTS = ["part_gradcheck", "part_gradcheck_perturbed", "part_activations", "part_highway"]  # independent


def part_gradcheck(corpus):
    t0 = time.perf_counter()
    values = run_gradcheck(corpus, "init")
    return {"values": values, "timings": {"ch4.gradcheck_seconds": time.perf_counter() - t0}}


def part_gradcheck_perturbed(corpus):
    from pylib.studies import gradcheck
    t0 = time.perf_counter()
    values = {**run_gradcheck(corpus, "perturbed"), **run_bug_demo(corpus),
              "ch4.gradcheck.perturb_gain_sd": gradcheck.PERTURB_GAIN_SD,
              "ch4.gradcheck.perturb_bias_sd": gradcheck.PERTURB_BIAS_SD}
    return {"values": values, "timings": {"ch4.gradcheck_perturbed_seconds": time.perf_counter() - t0}}


def part_activations(corpus):
    return {"values": run_activations(corpus)}


def part_highway(corpus):
    t0 = time.perf_counter()
    values, settings = run_highway(corpus)
    return {"values": values, "settings": {"ch4.highway": settings},
            "timings": {"ch4.highway_seconds": time.perf_counter() - t0}}


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


def derived(corpus):
    """The activation formula at the chapter's batch, and Korthikanti et al.'s for the same shapes."""
    from pylib import model
    from pylib.studies import gradcheck
    from pylib.systems import memory
    from pylib.web import backprop_ops as web_backprop
    cfg, B, T = activation_batch(corpus)
    parts = memory.activation_bytes(cfg, B, T)
    k16 = memory.korthikanti_bytes_per_layer(T, B, cfg.n_embd, cfg.n_head)
    return {"ch4.formula.per_layer": parts["per_layer"], "ch4.formula.total": parts["total"],
            "ch4.formula.loss": parts["loss"], "ch4.formula.final": parts["final"],
            "ch4.formula.B": B, "ch4.formula.T": T,
            "ch4.korthikanti.per_layer_16bit": k16,
            "ch4.formula.per_layer_16bit": parts["per_layer"] // 2,
            "ch4.highway.n_params": model.count_params(highway_cfg(corpus)),
            "ch4.fd_passes": 2 * model.count_params(cfg),  # two forward passes per weight
            "ch4.check_subset": gradcheck.SUBSET,
            "ch4.key_bias_first": cfg.n_embd, "ch4.key_bias_last": 2 * cfg.n_embd - 1,  # c_attn's bias is [q | k | v]
            "ch4.page_batch_B": web_backprop.BATCH[0], "ch4.page_batch_T": web_backprop.BATCH[1]}


def markdown(results):
    """results.md's section for chapter 4."""
    from pylib import model
    from pylib.studies import gradcheck
    v = results["values"]
    every = v["ch4.gradcheck.elements"] == model.count_params(model.GPTConfig())  # False at the reduced size
    seeds = sorted(map(int, v["ch4.highway.init.h.0.per_seed"]))
    lines = ["## Chapter 4: backpropagation", "",
             f"Gradient check (float64, {'every element' if every else 'a few elements per tensor'}, h = 1e-5, "
             f"batch {CHECK_BATCH[0]} × {CHECK_BATCH[1]}): "
             f"largest error relative to its tensor's largest gradient {v['ch4.gradcheck.max']:.2e} "
             f"(`{v['ch4.gradcheck.worst_tensor']}`), {v['ch4.gradcheck.elements']:,} elements.", "",
             "| tensor | max rel. error | key |", "| --- | --- | --- |"]
    skip = ("ch4.gradcheck.perturbed.", "ch4.gradcheck.bug_ignore_gain.")
    for key in sorted(k for k in v if k.startswith("ch4.gradcheck.") and k.endswith(".max") and k != "ch4.gradcheck.max"
                      and not k.startswith(skip)):
        lines.append(f"| {key[len('ch4.gradcheck.'):-4]} | {v[key]:.2e} | `{key}` |")
    lines += ["", f"The same check at perturbed weights (LayerNorm gains ~ N(1, {v['ch4.gradcheck.perturb_gain_sd']}²), "
              f"biases ~ N(0, {v['ch4.gradcheck.perturb_bias_sd']}²)): largest error {v['ch4.gradcheck.perturbed.max']:.2e} "
              f"(`{v['ch4.gradcheck.perturbed.worst_tensor']}`, key `ch4.gradcheck.perturbed.max`).", "",
              f"A LayerNorm backward that ignores its gain ({gradcheck.SUBSET if every else SMALL['check_elements']} elements per "
              "tensor at most):", "",
              "| weights | largest error | tensor | key |", "| --- | --- | --- | --- |"]
    for which in ("init", "perturbed"):
        k = f"ch4.gradcheck.bug_ignore_gain.{which}"
        lines.append(f"| {which} | {v[k + '.max']:.2e} | `{v[k + '.worst_tensor']}` | `{k}.max` |")
    lines += ["", f"Activation bytes kept by the caches (B = {v['ch4.act.B']}, T = {v['ch4.act.T']}, float32):", "",
              "| tensor | bytes |", "| --- | --- |"]
    lines += [f"| {name} | {v['ch4.act.' + name]:,} |" for name in v["ch4.act.rows"]]
    lines += [f"| total | {v['ch4.act.total']:,} |", "",
              f"Gradient norm per block, {HIGHWAY_PRESET}, mean ± sd over seeds {', '.join(map(str, seeds))}:", "",
              "| group | at init | after training |", "| --- | --- | --- |"]
    groups = [k[len("ch4.highway.init."):-5] for k in sorted(v)
              if k.startswith("ch4.highway.init.") and k.endswith(".mean")]
    for g in groups:
        lines.append(f"| {g} | {v[f'ch4.highway.init.{g}.mean']:.4f} ± {v[f'ch4.highway.init.{g}.sd']:.4f} | "
                     f"{v[f'ch4.highway.trained.{g}.mean']:.4f} ± {v[f'ch4.highway.trained.{g}.sd']:.4f} |")
    lines += ["", "Trained minus init, paired by seed:", "", "| group | trained − init |", "| --- | --- |"]
    for g in groups:
        lines.append(f"| {g} | {paired_text(v, f'ch4.highway.trained.{g}', f'ch4.highway.init.{g}', 0.0, '+.4f')} |")
    return lines + [""]
