"""Chapter 1's experiment: the default run (TrainConfig()'s settings), once per seed.

Values: final train/val loss, validation perplexity, the generalisation gap, where the
validation loss reaches and leaves the unigram loss, and a sample. Curves: the three-seed mean
and sd at every evaluation step, which the chapter-1 widget draws as its band.
"""

import dataclasses
import math
import statistics
import time

import numpy as np

from experiments.common import SEEDS, mean_sd, rounded

PLATEAU_MARGIN = 0.1  # nats: "at the unigram loss" means within this of it


def first_step(history, key, predicate):
    """The first eval step whose record[key] satisfies predicate, or None."""
    return next((r["step"] for r in history if r.get(key) is not None and predicate(r[key])), None)


def run_default(corpus, seeds=SEEDS, train_cfg=None):
    """The default run (TrainConfig()'s settings) once per seed: finals, plateau, curves."""
    from pylib import data, model, sample, train
    model_cfg = model.GPTConfig()
    base = train_cfg or train.TrainConfig()
    unigram = data.unigram_loss(corpus.train, corpus.val, corpus.vocab.size)
    runs, samples, seconds = [], {}, {}
    for seed in seeds:
        cfg = dataclasses.replace(base, seed=seed)
        t0 = time.perf_counter()
        params, history = train.train(model_cfg, cfg, corpus.train, corpus.val)
        seconds[seed] = time.perf_counter() - t0
        runs.append(history)
        prompt, _ = corpus.vocab.encode("ROMEO:\n")
        ids = sample.generate(params, model_cfg, list(prompt), 200, temperature=0.8, seed=seed)
        samples[seed] = corpus.vocab.decode(ids)
    evals = [[r for r in h if r.get("val") is not None] for h in runs]
    steps = [r["step"] for r in evals[0]]
    values = {"ch1.unigram_loss": unigram, "ch1.ln_vocab": math.log(corpus.vocab.size)}
    for name, key in [("final_train", "train_eval"), ("final_val", "val")]:
        values[f"ch1.default.{name}.mean"], values[f"ch1.default.{name}.sd"] = mean_sd([e[-1][key] for e in evals])
    ppl = [math.exp(e[-1]["val"]) for e in evals]
    values["ch1.default.val_ppl.mean"], values["ch1.default.val_ppl.sd"] = mean_sd(ppl)
    gap = [e[-1]["val"] - e[-1]["train_eval"] for e in evals]
    values["ch1.default.gap.mean"], values["ch1.default.gap.sd"] = mean_sd(gap)
    reach = [first_step(e, "val", lambda v: v < unigram + PLATEAU_MARGIN) for e in evals]
    leave = [first_step(e, "val", lambda v: v < unigram - PLATEAU_MARGIN) for e in evals]
    if None not in reach and None not in leave:
        values["ch1.default.plateau_reached.mean"], values["ch1.default.plateau_reached.sd"] = mean_sd(reach)
        values["ch1.default.plateau_left.mean"], values["ch1.default.plateau_left.sd"] = mean_sd(leave)
    values["ch1.default.seeds"] = len(seeds)
    values["ch1.default.sample"] = samples[seeds[0]]
    curves = {"steps": steps}
    for key, name in [("train_eval", "train"), ("val", "val")]:
        per_step = np.array([[r[key] for r in e] for e in evals])  # (seeds, evals)
        curves[f"{name}_mean"] = rounded(per_step.mean(axis=0))
        curves[f"{name}_sd"] = rounded(per_step.std(axis=0, ddof=1))
    losses = np.array([[r["loss"] for r in h] for h in runs])  # (seeds, steps)
    curves["loss_mean"] = rounded(losses.mean(axis=0))
    settings = {k: v for k, v in dataclasses.asdict(base).items() if k != "seed"}
    return {"values": values, "curves": {"ch1.default": curves}, "settings": {"ch1.default": settings},
            "timings": {"ch1.default.seconds_per_run": statistics.median(seconds.values())}}




def run(corpus):
    return run_default(corpus)


def markdown(results):
    """results.md's section for chapter 1."""
    v = results["values"]
    lines = [
        "## Chapter 1: the default run",
        "",
        f"Settings: {', '.join(f'{k}={x}' for k, x in sorted(results['settings']['ch1.default'].items()))}; "
        f"seeds {', '.join(map(str, SEEDS))}. Mean ± sample sd over seeds.",
        "",
        "| quantity | value | key |",
        "| --- | --- | --- |",
    ]
    rows = [("final train loss (fixed train windows)", "ch1.default.final_train"),
            ("final validation loss", "ch1.default.final_val"),
            ("validation perplexity", "ch1.default.val_ppl"),
            ("generalisation gap (val − train)", "ch1.default.gap"),
            ("eval step where val loss first comes within 0.1 of the unigram loss", "ch1.default.plateau_reached"),
            ("eval step where val loss first drops 0.1 below the unigram loss", "ch1.default.plateau_left")]
    for label, key in rows:
        if f"{key}.mean" in v:
            lines.append(f"| {label} | {v[key + '.mean']:.4f} ± {v[key + '.sd']:.4f} | `{key}` |")
    lines += [f"| unigram (letter-frequency) loss | {v['ch1.unigram_loss']:.4f} | `ch1.unigram_loss` |",
              f"| ln V | {v['ch1.ln_vocab']:.4f} | `ch1.ln_vocab` |",
              "",
              f"Sample (seed {SEEDS[0]}, temperature 0.8, prompt `ROMEO:`):",
              "",
              "```",
              v["ch1.default.sample"].rstrip(),
              "```",
              ""]
    return lines
