"""Chapter 5's experiments: the optimisers on the real model.

1. A learning-rate sweep per optimiser (SWEEP = pylib.studies.optim_state.COMPARISON): SGD, SGD
   with momentum, Adam (AdamW with weight decay 0), AdamW and Muon, five rates about 3x apart
   each, three seeds, SWEEP_STEPS steps of the default model and batch. A rate counts only if no seed diverged; the best rate is the lowest
   mean final validation loss. The runs at the best rate ARE the comparison of the optimisers
   (their curves are kept as bands): nothing is re-run.
2. Adam with L2 weight decay at AdamW's best rate and the same coefficient, three seeds, against
   those AdamW runs (and against Adam without decay): final validation loss and the RMS of the
   decayed weights.

Budget (counted, not felt): 5 optimisers x 5 rates x 3 seeds + 3 Adam-L2 runs (+ 3 Adam runs at
AdamW's rate if that is not Adam's best) = 78-81 runs of at most 200 steps = at most 16,200 steps
of the default model (B=16, T=64; runs that diverge stop early), each run with 9 evaluations of
2 x 32 windows. Timed with a small script (OPENBLAS_NUM_THREADS=1, load average ~10 on 2 cores):
one whole 200-step run costs 0.71 s of CPU with AdamW and 0.80 s with Muon, so the part is ~60 s
of CPU, ~65 s on a quiet machine (a first run of 63 runs took 144 s of wall time at load ~10);
the lead's limit for this part is 150 s. (Without OPENBLAS_NUM_THREADS=1, several measurements
at once on 2 cores made OpenBLAS's threads spin: 17 s of CPU per run.)
"""

import dataclasses
import math
import time

import numpy as np

from experiments.common import SEEDS, mean_sd, rounded
from pylib.studies.optim_state import COMPARISON as SWEEP  # the settings the page's live widget re-runs
from pylib.studies.optim_state import COMPARISON_EVAL_INTERVAL as EVAL_INTERVAL
from pylib.studies.optim_state import COMPARISON_EVAL_WINDOWS as EVAL_WINDOWS
from pylib.studies.optim_state import COMPARISON_STEPS as SWEEP_STEPS
from pylib.studies.optim_state import N_RATES
from pylib.studies.optim_state import comparison_config as sweep_config

NS_BAND_FROM = 0.01  # the chapter states Newton-Schulz's band for normalised singular values >= this


def decayed_rms(params):
    """RMS of the decay group's weights (matrices and embeddings) of a finished run."""
    from pylib import optim
    names = optim.param_groups(params)["decay"]
    total = sum(float(np.sum(params[n].astype(np.float64) ** 2)) for n in names)
    return math.sqrt(total / sum(params[n].size for n in names))


def run_setting(corpus, make_cfg):
    """One setting, three seeds: per-seed histories and final params' decayed RMS."""
    from pylib import model, train
    model_cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    runs = []
    for seed in SEEDS:
        params, history = train.train(model_cfg, make_cfg(seed), corpus.train, corpus.val)
        diverged = next((r["step"] for r in history if r.get("diverged")), None)
        runs.append({"history": history, "diverged_at": diverged,
                     "final_val": None if diverged is not None else history[-1]["val"],
                     "rms": None if diverged is not None else decayed_rms(params)})
    return runs


def band_curve(runs):
    """The three-seed mean and sd of the validation loss at each eval step (pylib.web's band format)."""
    evals = [[r for r in run["history"] if r.get("val") is not None] for run in runs]
    val = np.array([[r["val"] for r in e] for e in evals])  # (seeds, evals)
    train_eval = np.array([[r["train_eval"] for r in e] for e in evals])
    loss = np.array([[r["loss"] for r in run["history"]] for run in runs])  # (seeds, steps)
    return {"steps": [r["step"] for r in evals[0]],
            "val_mean": rounded(val.mean(axis=0)), "val_sd": rounded(val.std(axis=0, ddof=1)),
            "train_mean": rounded(train_eval.mean(axis=0)), "loss_mean": rounded(loss.mean(axis=0))}


def run(corpus):
    values, curves, settings, timings = {}, {}, {}, {}
    best_runs = {}
    for name, (overrides, lrs, label) in SWEEP.items():
        t0 = time.perf_counter()
        table = {"lrs": lrs, "val_mean": [], "val_sd": [], "diverged_seeds": []}
        best = None
        for k, lr in enumerate(lrs):
            runs = run_setting(corpus, lambda seed: sweep_config(name, lr, seed))
            n_div = sum(r["diverged_at"] is not None for r in runs)
            key = f"ch5.sweep.{name}.lr{k}"
            values[f"{key}.lr"] = lr
            values[f"{key}.diverged_seeds"] = n_div
            if n_div == 0:
                m, s = mean_sd([r["final_val"] for r in runs])
                values[f"{key}.final_val.mean"], values[f"{key}.final_val.sd"] = m, s
                values[f"{key}.cell"] = f"{m:.3f} ± {s:.3f}"
                if best is None or m < best[1]:
                    best = (k, m, runs)
            else:
                m = s = None
                first = min(r["diverged_at"] for r in runs if r["diverged_at"] is not None)
                values[f"{key}.cell"] = f"diverged ({n_div}/{len(runs)} seeds; first at step {first})"
            table["val_mean"].append(m)
            table["val_sd"].append(s)
            table["diverged_seeds"].append(n_div)
        k, m, runs = best
        best_runs[name] = runs
        values[f"ch5.best.{name}.lr"] = lrs[k]
        values[f"ch5.best.{name}.lr_index"] = k
        values[f"ch5.best.{name}.final_val.mean"], values[f"ch5.best.{name}.final_val.sd"] = \
            mean_sd([r["final_val"] for r in runs])
        values[f"ch5.best.{name}.edge"] = k in (0, len(lrs) - 1)  # best at the grid's edge?
        values[f"ch5.label.{name}"] = label
        curves[f"ch5.best.{name}"] = band_curve(runs)
        curves[f"ch5.sweep.{name}"] = table
        settings[f"ch5.sweep.{name}"] = {**overrides, "lrs": lrs, "steps": SWEEP_STEPS,
                                         "eval_interval": EVAL_INTERVAL, "eval_windows": EVAL_WINDOWS}
        timings[f"ch5.sweep.{name}.seconds"] = time.perf_counter() - t0

    # AdamW against Adam + L2 at AdamW's best rate, the same coefficient
    t0 = time.perf_counter()
    lr = values["ch5.best.adamw.lr"]
    from pylib import train
    wd = train.TrainConfig().weight_decay
    l2 = run_setting(corpus, lambda seed: dataclasses.replace(sweep_config("adamw", lr, seed), optimizer="adam_l2"))
    adam_at_lr = run_setting(corpus, lambda seed: sweep_config("adam", lr, seed)) \
        if lr != values["ch5.best.adam.lr"] else best_runs["adam"]
    for name, runs in [("adamw", best_runs["adamw"]), ("adam_l2", l2), ("adam", adam_at_lr)]:
        if any(r["diverged_at"] is not None for r in runs):
            values[f"ch5.decay.{name}.diverged"] = True
            continue
        values[f"ch5.decay.{name}.final_val.mean"], values[f"ch5.decay.{name}.final_val.sd"] = \
            mean_sd([r["final_val"] for r in runs])
        values[f"ch5.decay.{name}.rms.mean"], values[f"ch5.decay.{name}.rms.sd"] = mean_sd([r["rms"] for r in runs])
    values["ch5.decay.lr"], values["ch5.decay.weight_decay"] = lr, wd
    curves["ch5.decay.adam_l2"] = band_curve(l2)
    timings["ch5.decay.seconds"] = time.perf_counter() - t0
    values["ch5.seeds"] = len(SEEDS)
    values["ch5.steps"] = SWEEP_STEPS
    return {"values": values, "curves": curves, "settings": settings, "timings": timings}


def derived(corpus):
    """Build-time figures: optimiser state per parameter, the valley's theory, Adam's first steps."""
    from pylib import muon
    from pylib.studies import adam_trace, optim_state, quadratic
    lo, hi = muon.ns_singular_value_band(NS_BAND_FROM)
    return {**optim_state.derived_values(), **quadratic.derived_values(), **adam_trace.derived_values(),
            "ch5.ns.band_from": NS_BAND_FROM, "ch5.ns.band_lo": lo, "ch5.ns.band_hi": hi,
            "ch5.ns.steps": muon.NS_STEPS, "ch5.muon.momentum": muon.MOMENTUM, "ch5.muon.rms": muon.RMS_MATCH,
            "ch5.comparison.momentum": SWEEP["momentum"][0]["momentum"],
            "ch5.comparison.momentum_gain": 1.0 / (1.0 - SWEEP["momentum"][0]["momentum"]),
            "ch5.comparison.weight_decay": sweep_config("adamw", 1.0, 0).weight_decay}


def markdown(results):
    """results.md's section for chapter 5."""
    v = results["values"]
    if "ch5.seeds" not in v:
        return []
    lines = ["## Chapter 5: optimisers",
             "",
             f"Default model and batch, {v['ch5.steps']} steps (warmup 20, cosine), seeds "
             f"{', '.join(map(str, SEEDS))}; final validation loss, mean ± sample sd. A rate whose run "
             "diverged in any seed is not a candidate for the best.",
             "",
             "| optimiser | " + " | ".join(f"rate {k + 1}" for k in range(N_RATES)) + " | best rate |",
             "| --- | " + "--- | " * N_RATES + "--- |"]
    for name in SWEEP:
        cells = [f"{v[f'ch5.sweep.{name}.lr{k}.lr']:g}: {v[f'ch5.sweep.{name}.lr{k}.cell']}" for k in range(N_RATES)]
        lines.append(f"| {v[f'ch5.label.{name}']} | " + " | ".join(cells) + f" | {v[f'ch5.best.{name}.lr']:g} |")
    lines += ["",
              f"AdamW against Adam + L2 at rate {v['ch5.decay.lr']:g}, coefficient {v['ch5.decay.weight_decay']:g}:",
              "",
              "| optimiser | final val loss | RMS of decayed weights |",
              "| --- | --- | --- |"]
    for name in ["adamw", "adam_l2", "adam"]:
        if f"ch5.decay.{name}.final_val.mean" in v:
            lines.append(f"| {name} | {v[f'ch5.decay.{name}.final_val.mean']:.4f} ± {v[f'ch5.decay.{name}.final_val.sd']:.4f} | "
                         f"{v[f'ch5.decay.{name}.rms.mean']:.4f} ± {v[f'ch5.decay.{name}.rms.sd']:.4f} |")
        else:
            lines.append(f"| {name} | diverged | – |")
    return lines + [""]
