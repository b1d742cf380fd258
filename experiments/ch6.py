"""Chapter 6's experiments: the learning-rate ladder, schedules and warmup, steps to a target
loss against batch size, the linear scaling rule, and the gradient noise scale; three seeds each.

Every final validation loss is on the whole validation split (TrainConfig(final_eval=True), read
with experiments.common.final_val) and is stored as an arm (every seed, experiments.common.arm) so
that the chapter can compare arms paired by seed. Curves and the steps-to-target counts use the
trainer's fixed subset of validation windows (TrainConfig().eval_windows); the page's live sweep
shows the same subset, so the ladder's curve for it (curves "ch6.ladder") is on the subset too, and
so is each rung's validation curve during training (curves "ch6.ladder.val_curves", every
TrainConfig().eval_interval steps), which the page draws for the rungs nearest its slider.

Three parts (PARTS), run by measure.py as separate tasks: the ladder; the schedules with the noise
scale at checkpoints of the default run; the batch-size study followed by the scaling rules (one
task, because the scaling section's McCandlish prediction uses the batch study's B_crit).

Budget (one default step, B = 16, T = 64, is ~5.4 ms in CPython on a quiet core; one whole-split
evaluation is ~0.8 s):
  - ladder: 9 rates x 3 seeds x 200 steps, minus the diverged rungs' early ends, plus a whole-split
    evaluation per finished rung and 20 subset evaluations (of the train and validation windows) per
    finished run for the curves (one evaluation ~ 6 steps): ~30 s + ~17 s + ~28 s
  - schedules: 5 arms x 3 seeds x 400 steps (the sixth, lr 1 without warmup, diverges at once)
    ~33 s + 15 evaluations ~12 s; noise scale: 3 checkpoints x 3 seeds x 32 batches of 2 and of
    32 windows ~4 s (the checkpoints are taken from the default cosine runs: no extra training)
  - batch size: B = 2..64 until the target, evaluated on the 128-window subset every ~160 windows
    of training data ~25 s
  - scaling: 13 arms x 3 seeds, each 2,560 windows (= 160 default steps) ~35 s, plus 39 whole-split
    evaluations ~31 s
  total ~220 s of CPU over the three tasks, ~115 s of wall time on 2 cores.
"""

import dataclasses
import math
import time

import numpy as np

from experiments.common import (REDUCED_EVAL, SEEDS, arm, final_val, is_small, mean_sd, paired_text, progress, rounded,
                                 run_parts, scaled)
from pylib.studies.noise_scale import CHECKPOINTS as NOISE_CHECKPOINTS, NOISE, noise_rng  # the page repeats them

# ---------------------------------------------------------------------------
# Settings

LADDER = dict(lo=1e-3, hi=10.0, per_decade=2)  # 0.001, 0.003, ..., 3, 10

SCHEDULE_ARMS = {  # name: changes to TrainConfig() (400 steps, peak lr 1e-2, warmup 20)
    "cosine": {},
    "wsd": {"schedule": "wsd"},
    "constant": {"schedule": "constant"},
    "cosine_no_warmup": {"warmup_steps": 0},
    "cosine_high": {"lr": 1.0},  # near the top of the ladder's trainable rates
    "cosine_high_no_warmup": {"lr": 1.0, "warmup_steps": 0},
}
SCHEDULE_EVAL_INTERVAL = 50
NOISE_FIELDS = ("b_simple", "g2", "trace")

BATCH_SIZES = (2, 4, 8, 16, 32, 64)
BATCH_TARGETS = (2.9, 2.8, 2.7)  # nats on the fixed validation subset; every setting reaches each within BATCH_MAX_STEPS
BATCH_TARGET = 2.7  # the main one (the table); lower ones fall inside a transition whose timing the seed sets
BATCH_MAX_STEPS = 3000
BATCH_LR = 2e-2  # one peak lr, constant after the warmup, for every B (twice the default run's peak)

SCALING_BASE = dict(batch_size=4, lr=5e-3, steps=640, warmup_steps=32)
SCALING_KS = (1, 2, 4, 8, 16)
SCALING_RULES = ("linear", "sqrt", "fixed")  # rate x k, rate x sqrt(k) (nothing else rescaled), rate unchanged
# A rate sweep at the two largest k, where every rule lost: base rate x 2^j for j = 0 .. log2(k) + 1. The rules
# already ran x1 and x k (and x sqrt(k)); SCALING_SWEEP_EXTRA adds the other powers of two, and one above x k.
SCALING_SWEEP_KS = (8, 16)
SCALING_SWEEP_FACTORS = {8: (1, 2, 4, 8, 16), 16: (1, 2, 4, 8, 16, 32)}  # multiples of the base rate

LADDER_MORE_SEEDS = (3, 4, 5, 6, 7)  # rungs 4 and 5 only: their three-seed verdict sat at the edge (+0.007)
LADDER_MORE_SEEDS_RUNGS = (4, 5)
BATCH_BOOT = dict(n_boot=2000, seed=6)  # the bootstrap over seeds of S_min, E_min and B_crit (seeded)

LOSS_MARGIN = 0.02  # nats: the smallest difference in final loss that would matter here (a null result needs one)

# The notebook's reduced size (experiments.common.small_size). Every rate, schedule, batch size and k of the
# grids is kept (the chapter quotes each), and so are the noise checkpoints, so the schedules still run 400
# steps. Two seeds and one more; batch 4 for the ladder and batch 1 for the schedules (runs of 30 and 400
# steps); the trainer's subset of 16 validation windows instead of 128; the final losses on the validation
# split's first 64 windows instead of all of them; 4 batches per noise estimate; the batch study's targets
# higher (reachable in a few hundred windows), at most 400 steps, 200 bootstrap resamples; the scaling runs
# 16 base steps (k = 16: 1 step) with a 1-step warmup.
SMALL = {"seeds": (0, 1), "more_seeds": (2,), "ladder_steps": 30, "ladder_batch": 4, "sched_batch": 1,
         "eval_windows": 16, "val_windows": 64, "noise_batches": 4, "batch_targets": (3.4, 3.3, 3.2),
         "batch_target": 3.2, "batch_max_steps": 400, "n_boot": 200,
         "scaling_base": dict(batch_size=4, lr=5e-3, steps=16, warmup_steps=1)}


def seeds_now():
    """SEEDS, or SMALL's seeds at the reduced size."""
    return scaled(SEEDS, SMALL["seeds"])


def noise_now():
    """NOISE (pylib.studies.noise_scale), with SMALL's batches per estimate at the reduced size."""
    return scaled(NOISE, {**NOISE, "n_batches": SMALL["noise_batches"]})


def batch_targets_now():
    """(BATCH_TARGETS, BATCH_TARGET), or SMALL's at the reduced size."""
    return scaled((BATCH_TARGETS, BATCH_TARGET), (SMALL["batch_targets"], SMALL["batch_target"]))


def scaling_base():
    """SCALING_BASE, or SMALL's at the reduced size."""
    return scaled(SCALING_BASE, SMALL["scaling_base"])


def eval_windows_now():
    """The trainer's subset of validation windows: TrainConfig().eval_windows, or SMALL's at the reduced size."""
    from pylib import train
    return scaled(train.TrainConfig().eval_windows, SMALL["eval_windows"])


def final_eval_text(results):
    """What the final losses are on, as results.md says it (the reduced size says so)."""
    return results["settings"].get("ch6.ladder", {}).get("final_eval_small", "the whole validation split")


def _corpus_args(corpus):
    """The training split, and the validation split the runs are scored on: the whole of it, or its first
    SMALL["val_windows"] windows at the reduced size."""
    from pylib import model
    return corpus.train, scaled(corpus.val, corpus.val[:SMALL["val_windows"] * model.GPTConfig().block_size + 1])


def _model_cfg(corpus):
    from pylib import model
    return dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)


def _pm(xs, fmt=".3f"):
    m, s = mean_sd(xs)
    return f"{m:{fmt}} ± {s:{fmt}}"


# ---------------------------------------------------------------------------
# The ladder


def run_ladder(corpus, model_cfg):
    from pylib import train
    from pylib.studies import lr_sweep
    rates = lr_sweep.ladder(**LADDER)
    SEEDS, more_seeds = seeds_now(), scaled(LADDER_MORE_SEEDS, SMALL["more_seeds"])  # the constants, or SMALL's
    base = dataclasses.replace(train.TrainConfig(), final_eval=True)
    if is_small():
        base = dataclasses.replace(base, batch_size=SMALL["ladder_batch"], eval_windows=SMALL["eval_windows"])

    def rung(lr, seed, base):  # pylib's rung (lr_sweep.rung_config), with SMALL's steps at the reduced size
        cfg = lr_sweep.rung_config(lr, seed, base)
        steps = SMALL["ladder_steps"]
        return scaled(cfg, dataclasses.replace(cfg, steps=steps, eval_interval=steps))
    full, subset, diverged_at, histories = [], [], [], []  # per rung, per seed
    for lr in progress(rates, desc="ladder", unit="rate"):
        # evaluated on the subset every base.eval_interval steps too, for the curves (evaluation draws
        # no random numbers and changes no parameter: every final value is the same as without it)
        hs = [train.train(model_cfg, dataclasses.replace(rung(lr, seed, base), eval_interval=base.eval_interval),
                          *_corpus_args(corpus))[1] for seed in SEEDS]
        histories.append(hs)
        outs = [lr_sweep.rung_outcome(h) for h in hs]
        full.append([o["final_val_full"] for o in outs])
        subset.append([o["final_val"] for o in outs])
        diverged_at.append([o["diverged_at"] for o in outs])
    n_div = [sum(d is not None for d in ds) for ds in diverged_at]
    complete = lambda xs: None not in xs  # noqa: E731
    means = [mean_sd(f)[0] if complete(f) else None for f in full]
    values = {"ch6.ladder.steps": rung(rates[0], 0, base).steps, "ch6.ladder.n_rates": len(rates),
              "ch6.ladder.lowest_lr": rates[0], "ch6.ladder.highest_lr": rates[-1],
              "ch6.ladder.band_tolerance": lr_sweep.BAND_TOLERANCE, "ch6.ladder.n_seeds": len(SEEDS)}
    for i, lr in enumerate(rates):  # one row of the chapter's table per rung
        values[f"ch6.ladder.r{i}.lr"] = lr
        values[f"ch6.ladder.r{i}.diverged_seeds"] = n_div[i]
        values[f"ch6.ladder.r{i}.diverged_steps"] = ", ".join(str(d) for d in diverged_at[i] if d is not None) or "none"
        values.update(arm(f"ch6.ladder.r{i}.final_val", dict(zip(SEEDS, full[i]))))
        values[f"ch6.ladder.r{i}.final"] = (_pm(full[i]) if complete(full[i])
                                            else f"diverged ({n_div[i]} of {len(SEEDS)} seeds)")
    ok = [i for i, m in enumerate(means) if m is not None and n_div[i] == 0]
    best = min(ok, key=lambda i: means[i])
    values["ch6.ladder.best_lr"] = rates[best]
    values.update(arm("ch6.ladder.best.final_val", dict(zip(SEEDS, full[best]))))
    for name, j in (("below_best", best - 1), ("above_best", best + 1)):  # the best rung's neighbours
        if 0 <= j < len(rates) and j in ok:
            values[f"ch6.ladder.{name}_lr"] = rates[j]
            values.update(arm(f"ch6.ladder.{name}.final_val", dict(zip(SEEDS, full[j]))))
    band = lr_sweep.good_band(rates, means, n_div)
    values["ch6.ladder.good_lo"], values["ch6.ladder.good_hi"] = band
    first_div = next(i for i, n in enumerate(n_div) if n > 0)
    values["ch6.ladder.first_diverged_lr"] = rates[first_div]
    # the warmup's rate at the last update each diverged run applied (the diverging step is not applied)
    cfg = rung(rates[first_div], 0, base)
    last_lrs = [cfg.lr_at(d - 1) for d in diverged_at[first_div] if d is not None and d > 0]
    values["ch6.ladder.first_diverged_step_min"] = min(d for d in diverged_at[first_div] if d is not None)
    values["ch6.ladder.first_diverged_last_lr_min"] = round(min(last_lrs), 3)
    values["ch6.ladder.first_diverged_last_lr_max"] = round(max(last_lrs), 3)
    values["ch6.ladder.warmup_steps"] = cfg.warmup_steps
    values["ch6.ladder.first_diverged_seeds"] = n_div[first_div]
    values["ch6.ladder.first_diverged_step_max"] = max(d for d in diverged_at[first_div] if d is not None)
    values["ch6.ladder.best_rungs_below_divergence"] = first_div - best
    values["ch6.ladder.best_factor_below_divergence"] = round(rates[first_div] / rates[best], 6)
    values["ch6.ladder.good_hi_rungs_below_divergence"] = first_div - rates.index(band[1])
    top = max(ok)
    values["ch6.ladder.highest_trained_lr"] = rates[top]
    values.update(arm("ch6.ladder.highest_trained.final_val", dict(zip(SEEDS, full[top]))))
    values.update(arm("ch6.ladder.lowest.final_val", dict(zip(SEEDS, full[0]))))
    for i in LADDER_MORE_SEEDS_RUNGS:  # more seeds for the rungs whose comparison sat at the edge
        more = {seed: lr_sweep.rung_outcome(train.train(model_cfg, rung(rates[i], seed, base),
                                                        *_corpus_args(corpus))[1])["final_val_full"]
                for seed in more_seeds}
        values.update(arm(f"ch6.ladder.r{i}.more_seeds.final_val", {**dict(zip(SEEDS, full[i])), **more}))
    values["ch6.ladder.more_seeds_n"] = len(SEEDS) + len(more_seeds)
    # the page's live sweep shows the trainer's subset: its measured points and band use the same
    sub_means = [mean_sd(f)[0] if complete(f) else None for f in subset]
    sub_sds = [mean_sd(f)[1] if complete(f) else None for f in subset]
    sub_band = lr_sweep.good_band(rates, sub_means, n_div)
    values["ch6.ladder.subset_good_lo"], values["ch6.ladder.subset_good_hi"] = sub_band
    curve = {"evaluation": f"subset: {base.eval_windows} fixed validation windows (TrainConfig.eval_windows)",
             "eval_windows": base.eval_windows, "lrs": rates,
             "final_mean": [None if m is None else round(m, 5) for m in sub_means],
             "final_sd": [None if s is None else round(s, 5) for s in sub_sds],
             "finals": [[None if v is None else round(v, 5) for v in f] for f in subset],
             "good_band": list(sub_band), "diverged": n_div, "diverged_at": diverged_at}
    return values, curve, ladder_val_curves(rates, histories, base, SEEDS)


def ladder_val_curves(rates, histories, base, seeds=SEEDS):
    """Each rung's validation-loss curve on the subset at its evaluation steps: every seed's (ending at
    the last evaluation before it diverged) and the mean and sd over all seeds wherever every seed has
    the point (so a rung with a diverged seed has a mean that ends early; it never averages fewer seeds)."""
    steps = max(([r["step"] for r in h if "val" in r] for hs in histories for h in hs), key=len)
    per_seed, means, sds = [], [], []
    for hs in histories:
        rung = []  # each seed's curve
        for h in hs:
            vals = []
            for r in h:
                if "val" not in r:
                    continue
                if r["val"] is None:  # not finite: the curve ends here
                    break
                assert r["step"] == steps[len(vals)], "every rung is evaluated at the same steps"
                vals.append(r["val"])
            rung.append(vals)
        n = min(len(v) for v in rung)
        arr = np.array([v[:n] for v in rung])  # (seeds, evals every seed has)
        per_seed.append([rounded(v) for v in rung])
        means.append(rounded(arr.mean(axis=0)))
        sds.append(rounded(arr.std(axis=0, ddof=1)) if len(rung) > 1 else None)
    return {"evaluation": f"subset: {base.eval_windows} fixed validation windows (TrainConfig.eval_windows), "
                          "the same as curves ch6.ladder's final losses",
            "eval_windows": base.eval_windows, "eval_interval": base.eval_interval, "lrs": rates, "seeds": list(seeds),
            "steps": steps,
            "about": "steps: the evaluation steps of a run that finishes (the last after its update); per_seed[rung][seed]: "
                     "the loss at steps[0..len-1], ending at the last evaluation before a divergence; mean and sd[rung]: "
                     "over every seed, only at the steps every seed reached (sd: sample sd, ddof 1)",
            "per_seed": per_seed, "mean": means, "sd": sds, "n_seeds": len(seeds)}


# ---------------------------------------------------------------------------
# Schedules and warmup, with the noise scale at checkpoints of the default run


def run_schedules(corpus, model_cfg):
    from pylib import train
    from pylib.studies import noise_scale
    values, curves, noise = {}, {}, {c: [] for c in NOISE_CHECKPOINTS}
    SEEDS, NOISE = seeds_now(), noise_now()  # the constants, or SMALL's at the reduced size
    BATCH_TARGETS, BATCH_TARGET = batch_targets_now()
    for name, changes in progress(SCHEDULE_ARMS.items(), desc="schedules", unit="arm"):
        cfg0 = dataclasses.replace(train.TrainConfig(), eval_interval=SCHEDULE_EVAL_INTERVAL, final_eval=True, **changes)
        if is_small():
            cfg0 = dataclasses.replace(cfg0, batch_size=SMALL["sched_batch"], eval_windows=SMALL["eval_windows"])
        finals, val_curves, lr_curve, div = [], [], None, []
        for seed in SEEDS:
            cfg = dataclasses.replace(cfg0, seed=seed)
            state = train.init_train_state(model_cfg, cfg)
            history = []
            for checkpoint in (NOISE_CHECKPOINTS if name == "cosine" else (cfg.steps,)):
                history += train.train_steps(state, model_cfg, cfg, *_corpus_args(corpus), checkpoint - state["step"])
                if name == "cosine":
                    rng = noise_rng(seed, checkpoint)
                    noise[checkpoint].append(noise_scale.estimate_noise_scale(
                        state["params"], model_cfg, corpus.train, rng=rng, **NOISE))
            last = history[-1]
            div.append(last["step"] if last.get("diverged") else None)
            finals.append(final_val(history))
            val_curves.append([(r["step"], r["val"]) for r in history if r.get("val") is not None])
            lr_curve = [r["lr"] for r in history]
        key = f"ch6.sched.{name}"
        values.update(arm(f"{key}.final_val", dict(zip(SEEDS, finals))))
        values[f"{key}.diverged_seeds"] = sum(d is not None for d in div)
        if None not in finals:
            values[f"{key}.final"] = _pm(finals)
        else:
            values[f"{key}.diverged_at_max"] = max(d for d in div if d is not None)
            values[f"{key}.final"] = (f"diverged ({values[f'{key}.diverged_seeds']} of {len(SEEDS)} seeds, "
                                      f"by step {values[f'{key}.diverged_at_max']})")
        steps = [s for s, _ in val_curves[0]]
        if all(len(c) == len(steps) for c in val_curves):
            arr = np.array([[v for _, v in c] for c in val_curves])  # (seeds, evals), on the subset
            if name == "cosine":  # where the default run's mean subset curve passes the batch study's targets
                for j, target in enumerate(BATCH_TARGETS):
                    step = next((s for s, m in zip(steps, arr.mean(axis=0)) if m <= target), None)
                    values[f"ch6.sched.cosine.t{j}.target_step"] = step
                    if target == BATCH_TARGET:
                        values["ch6.sched.cosine.target_step"] = step
            curves[key] = {"evaluation": f"subset: {cfg0.eval_windows} fixed validation windows",
                           "steps": steps, "val_mean": rounded(arr.mean(axis=0)),
                           "val_sd": rounded(arr.std(axis=0, ddof=1)), "lr": rounded(lr_curve, 7)}
    for c, rows in noise.items():
        for field in NOISE_FIELDS:
            values.update(arm(f"ch6.noise.step{c}.{field}", {s: r[field] for s, r in zip(SEEDS, rows)}))
    first, last = NOISE_CHECKPOINTS[1], NOISE_CHECKPOINTS[2]
    for field in NOISE_FIELDS:  # how much each grew from the middle checkpoint to the end, seed by seed
        ratios = {s: (b[field] / a[field] if a[field] and b[field] is not None else None)  # None: no estimate
                  for s, a, b in zip(SEEDS, noise[first], noise[last])}
        values.update(arm(f"ch6.noise.{field}_ratio_end_to_mid", ratios))
    values.update({"ch6.noise.b_small": NOISE["b_small"], "ch6.noise.b_big": NOISE["b_big"],
                   "ch6.noise.n_batches": NOISE["n_batches"], "ch6.sched.high_lr": SCHEDULE_ARMS["cosine_high"]["lr"],
                   "ch6.sched.eval_interval": SCHEDULE_EVAL_INTERVAL, "ch6.sched.eval_windows": cfg0.eval_windows})
    return values, curves


# ---------------------------------------------------------------------------
# Batch size: steps to a target loss (on the fixed validation subset)


BATCH_EVAL_EVERY_WINDOWS = 160


def batch_eval_interval(batch_size):
    """Evaluate about every BATCH_EVAL_EVERY_WINDOWS windows of training data, at least every 5 steps."""
    return max(5, BATCH_EVAL_EVERY_WINDOWS // batch_size)


def steps_to_target_run(corpus, model_cfg, batch_size, seed, targets=None):
    """Train at batch_size (constant lr after warmup) until the val loss on the fixed subset reaches the
    lowest target; returns {target: the first evaluated step at or below it (None if never)}."""
    from pylib import train
    from pylib.studies import target as to_target
    targets = targets or batch_targets_now()[0]
    cfg = dataclasses.replace(train.TrainConfig(), batch_size=batch_size, lr=BATCH_LR, schedule="constant",
                              steps=scaled(BATCH_MAX_STEPS, SMALL["batch_max_steps"]), eval_interval=10**9, seed=seed,
                              eval_windows=eval_windows_now())
    state = train.init_train_state(model_cfg, cfg)
    every, evals = batch_eval_interval(batch_size), []
    while state["step"] < cfg.steps and not state["diverged"]:
        train.train_steps(state, model_cfg, cfg, *_corpus_args(corpus), every)
        evals.append({"step": state["step"], "val": train.estimate_loss(state["params"], model_cfg, _corpus_args(corpus)[1], cfg.eval_windows)})
        if evals[-1]["val"] <= min(targets):
            break
    return {t: to_target.steps_to_target(evals, t) for t in targets}


def run_batch_sizes(corpus, model_cfg):
    """Steps to each target against B (one run per B and seed serves every target), and the fit per target.

    The main target's keys are ch6.batch.B{B}.steps / .windows, ch6.batch.b_crit, ...; every target's
    fit is also under ch6.batch.t{j}.* (j indexes BATCH_TARGETS)."""
    from pylib.studies import noise_scale
    SEEDS, (BATCH_TARGETS, BATCH_TARGET) = seeds_now(), batch_targets_now()  # the constants, or SMALL's
    BATCH_BOOT_NOW = scaled(BATCH_BOOT, {**BATCH_BOOT, "n_boot": SMALL["n_boot"]})
    runs = {B: [steps_to_target_run(corpus, model_cfg, B, seed) for seed in SEEDS]
            for B in progress(BATCH_SIZES, desc="batch sizes", unit="B")}
    boot_b_crit = {}  # target index -> (steps per batch size and seed, its bootstrap)
    values, curve = {}, {"evaluation": f"subset: {eval_windows_now()} fixed validation windows",
                         "batch_sizes": list(BATCH_SIZES), "targets": list(BATCH_TARGETS),
                         "eval_every": [batch_eval_interval(B) for B in BATCH_SIZES]}
    for j, target in enumerate(BATCH_TARGETS):
        main = target == BATCH_TARGET
        prefix = [f"ch6.batch.t{j}"] + (["ch6.batch"] if main else [])
        steps_mean, steps_sd = [], []
        for B in BATCH_SIZES:
            steps = [r[target] for r in runs[B]]
            for p in prefix:
                values.update(arm(f"{p}.B{B}.steps", dict(zip(SEEDS, steps))))
                values.update(arm(f"{p}.B{B}.windows", {s: (None if n is None else n * B) for s, n in zip(SEEDS, steps)}))
            m, sd = mean_sd(steps) if None not in steps else (None, None)
            steps_mean.append(m)
            steps_sd.append(sd)
        reached = [(B, m) for B, m in zip(BATCH_SIZES, steps_mean) if m is not None]
        fit = noise_scale.fit_critical_batch([b for b, _ in reached], [m for _, m in reached])
        for p in prefix:
            values.update({f"{p}.target": target, f"{p}.fit_s_min": fit["s_min"], f"{p}.fit_e_min": fit["e_min"],
                           f"{p}.b_crit": fit["b_crit"]})
        if len(reached) == len(BATCH_SIZES):  # every batch size reached the target in every seed
            per_seed = [[r[target] for r in runs[B]] for B in BATCH_SIZES]
            boot = noise_scale.bootstrap_critical_batch(BATCH_SIZES, per_seed, **BATCH_BOOT_NOW)
            boot_b_crit[j] = (per_seed, boot)
            for p in prefix:
                for q in ("s_min", "e_min", "b_crit"):
                    values[f"{p}.boot.{q}.low"], values[f"{p}.boot.{q}.high"] = boot[q]
                values[f"{p}.boot.n_infinite"] = boot["n_infinite"]
        curve[f"t{j}"] = {"target": target, "steps_mean": steps_mean, "steps_sd": steps_sd,
                          "per_seed": [[r[target] for r in runs[B]] for B in BATCH_SIZES], "fit": fit}
        if main:
            for i, (B, m, sd) in enumerate(zip(BATCH_SIZES, steps_mean, steps_sd)):  # the chapter's table rows
                values[f"ch6.batch.r{i}.B"] = B
                values[f"ch6.batch.r{i}.steps"] = f"{m:.0f} ± {sd:.0f}" if m is not None else "not reached"
                values[f"ch6.batch.r{i}.windows"] = f"{m * B:.0f}" if m is not None else "–"
            values["ch6.batch.fewest_windows_B"] = min(reached, key=lambda r: r[1] * r[0])[0]
    if 0 in boot_b_crit and len(BATCH_TARGETS) - 1 in boot_b_crit:
        # the lowest target's B_crit minus the highest's, on the very same resamples (one run serves both targets)
        last = len(BATCH_TARGETS) - 1
        lo_boot = boot_b_crit[last][1]
        hi = noise_scale.resample_critical_batch(BATCH_SIZES, boot_b_crit[0][0], lo_boot["index"])["b_crit"]
        diff = lo_boot["samples"]["b_crit"] - hi  # +inf where the lower target's fit had S_min <= 0
        values["ch6.batch.boot.b_crit_diff.low"], values["ch6.batch.boot.b_crit_diff.high"] = (
            float(q) for q in np.quantile(diff, [0.025, 0.975], method="inverted_cdf"))
        values["ch6.batch.boot.b_crit_larger_share"] = float(np.mean(diff > 0))
    values["ch6.batch.boot.n_boot"] = BATCH_BOOT_NOW["n_boot"]
    values.update({"ch6.batch.lr": BATCH_LR, "ch6.batch.max_steps": scaled(BATCH_MAX_STEPS, SMALL["batch_max_steps"]),
                   "ch6.batch.eval_windows": eval_windows_now(),
                   "ch6.batch.smallest": BATCH_SIZES[0], "ch6.batch.largest": BATCH_SIZES[-1]})
    return values, curve


# ---------------------------------------------------------------------------
# The linear scaling rule (and two others), on the same number of training windows


def scaling_sweep_config(k, factor, seed):
    """The scaling runs' config at B x k and steps / k with the rate base x factor (the rate sweep)."""
    return dataclasses.replace(scaling_config(k, "fixed", seed), lr=scaling_base()["lr"] * factor)


def sweep_arm(corpus, k, factor, seeds=None):
    """The scaling runs at B x k and steps / k with the rate base x factor (scaling_sweep_config), once per seed
    (default SEEDS, or SMALL's at the reduced size): {seed: final loss, None if the run diverged}. For a
    setting of the reader's own (the notebook); the measured sweep is run_scaling_sweep."""
    from pylib import train
    return {seed: final_val(train.train(_model_cfg(corpus), scaling_sweep_config(k, factor, seed), *_corpus_args(corpus))[1])
            for seed in progress(seeds or seeds_now(), desc=f"k {k}, rate x {factor}", unit="seed")}


def run_scaling_sweep(corpus, model_cfg, values):
    """At each k in SCALING_SWEEP_KS, the rate swept over SCALING_SWEEP_FACTORS (runs the rules made are reused);
    keys ch6.scaling.sweep.k{k}.x{factor}.final_val, the best mean's factor, and the best against the base run."""
    from pylib import train
    out, curve = {}, {}
    SEEDS, SCALING_BASE = seeds_now(), scaling_base()  # the constants, or SMALL's at the reduced size
    for k in progress(SCALING_SWEEP_KS, desc="scaling: rate sweep", unit="k"):
        reuse = {1: "fixed", k: "linear"}
        means = {}
        for factor in SCALING_SWEEP_FACTORS[k]:
            key = f"ch6.scaling.sweep.k{k}.x{factor}.final_val"
            if factor in reuse:
                per_seed = values[f"ch6.scaling.{reuse[factor]}.k{k}.final_val.per_seed"]
                out.update(arm(key, {int(s): v for s, v in per_seed.items()}))
            else:
                out.update(arm(key, {seed: final_val(train.train(model_cfg, scaling_sweep_config(k, factor, seed),
                                                                 *_corpus_args(corpus))[1]) for seed in SEEDS}))
            means[factor] = out[f"{key}.mean"]
        ok = {f: m for f, m in means.items() if m is not None}
        best = min(ok, key=ok.get)
        out[f"ch6.scaling.sweep.k{k}.best_factor"] = best
        out[f"ch6.scaling.sweep.k{k}.best_lr"] = float(f"{SCALING_BASE['lr'] * best:.3g}")
        out[f"ch6.scaling.sweep.k{k}.top_factor"] = max(SCALING_SWEEP_FACTORS[k])
        out[f"ch6.scaling.sweep.k{k}.top_lr"] = float(f"{SCALING_BASE['lr'] * max(SCALING_SWEEP_FACTORS[k]):.3g}")
        out[f"ch6.scaling.sweep.k{k}.steps"] = SCALING_BASE["steps"] // k
        out.update(arm(f"ch6.scaling.sweep.k{k}.best.final_val",
                       {int(s): v for s, v in out[f"ch6.scaling.sweep.k{k}.x{best}.final_val.per_seed"].items()}))
        for factor in SCALING_SWEEP_FACTORS[k]:
            m = means[factor]
            out[f"ch6.scaling.sweep.k{k}.x{factor}.final"] = (_pm([v for v in out[f"ch6.scaling.sweep.k{k}.x{factor}.final_val.per_seed"].values()])
                                                              if m is not None else "diverged")
            out[f"ch6.scaling.sweep.k{k}.x{factor}.lr"] = float(f"{SCALING_BASE['lr'] * factor:.3g}")
        curve[f"k{k}"] = {"factors": list(SCALING_SWEEP_FACTORS[k]), "mean": [means[f] for f in SCALING_SWEEP_FACTORS[k]]}
    return out, curve


def scaling_config(k, rule, seed):
    """B x k windows and steps / k (the same tokens); lr x k ("linear"), x sqrt(k) ("sqrt": the rate
    only; betas and eps stay the default's) or unchanged ("fixed"). Scored on the whole split at the end."""
    from pylib import train
    b = scaling_base()
    lr = b["lr"] * {"linear": k, "sqrt": math.sqrt(k), "fixed": 1}[rule]
    return dataclasses.replace(train.TrainConfig(), batch_size=b["batch_size"] * k, lr=lr, steps=b["steps"] // k,
                               warmup_steps=max(1, b["warmup_steps"] // k), eval_interval=b["steps"], seed=seed,
                               final_eval=True, eval_windows=eval_windows_now())


def run_scaling(corpus, model_cfg, b_noise=None, b_noise_by_target=None):
    """The three rules at every k; with b_noise (the batch study's B_crit at its main target),
    McCandlish's prediction, and with b_noise_by_target ({j: B_crit at BATCH_TARGETS[j]}) the same
    prediction for each target's B_crit (keys ch6.scaling.t{j}.r{i}.*)."""
    from pylib import train
    from pylib.studies import noise_scale
    values, curve = {}, {"ks": list(SCALING_KS), "evaluation": "whole validation split"}
    SEEDS, SCALING_BASE = seeds_now(), scaling_base()  # the constants, or SMALL's at the reduced size
    base_finals = None  # k = 1 is the same run for every rule: measured once and stored under each rule
    for rule in progress(SCALING_RULES, desc="scaling rules", unit="rule"):
        means, sds, divs = [], [], []
        for k in SCALING_KS:
            if k == 1 and base_finals is not None:
                finals = base_finals
            else:
                finals = [final_val(train.train(model_cfg, scaling_config(k, rule, seed), *_corpus_args(corpus))[1])
                          for seed in SEEDS]
                if k == 1:
                    base_finals = finals
            values.update(arm(f"ch6.scaling.{rule}.k{k}.final_val", dict(zip(SEEDS, finals))))
            divs.append(sum(f is None for f in finals))
            m, s = mean_sd(finals) if None not in finals else (None, None)
            means.append(m)
            sds.append(s)
        curve[f"{rule}_mean"], curve[f"{rule}_sd"], curve[f"{rule}_diverged"] = means, sds, divs
        for i, (k, m, s, d) in enumerate(zip(SCALING_KS, means, sds, divs)):  # the chapter's table rows
            values[f"ch6.scaling.r{i}.k"] = k
            values[f"ch6.scaling.r{i}.batch"] = SCALING_BASE["batch_size"] * k
            values[f"ch6.scaling.r{i}.{rule}_lr"] = float(f'{scaling_config(k, rule, 0).lr:.3g}')
            values[f"ch6.scaling.r{i}.{rule}"] = f"{m:.3f} ± {s:.3f}" if m is not None else f"diverged ({d} of {len(SEEDS)} seeds)"
    b = SCALING_BASE
    values.update({"ch6.scaling.base_batch": b["batch_size"], "ch6.scaling.base_lr": b["lr"],
                   "ch6.scaling.base_steps": b["steps"], "ch6.scaling.max_k": SCALING_KS[-1],
                   "ch6.scaling.max_batch": b["batch_size"] * SCALING_KS[-1],
                   "ch6.scaling.max_lr": b["lr"] * SCALING_KS[-1],
                   "ch6.scaling.min_steps": b["steps"] // SCALING_KS[-1],
                   "ch6.scaling.windows": b["batch_size"] * b["steps"]})
    if b_noise is not None:  # eps_opt(kB) / eps_opt(B) against the linear rule's k (McCandlish et al., section 2)
        values["ch6.scaling.mccandlish.b_noise"] = b_noise
        for i, k in enumerate(SCALING_KS):
            factor = noise_scale.optimal_lr_factor(b["batch_size"], k, b_noise)
            values[f"ch6.scaling.r{i}.opt_factor"] = round(factor, 2)
            values[f"ch6.scaling.r{i}.overshoot"] = round(k / factor, 2)
            values[f"ch6.scaling.r{i}.opt_lr"] = float(f"{b['lr'] * factor:.3g}")
        values["ch6.scaling.mccandlish.max_factor"] = round(1 + b_noise / b["batch_size"], 1)
    for j, bn in (b_noise_by_target or {}).items():
        if bn is None:
            continue
        for i, k in enumerate(SCALING_KS):
            factor = noise_scale.optimal_lr_factor(b["batch_size"], k, bn)
            values[f"ch6.scaling.t{j}.r{i}.opt_factor"] = round(factor, 2)
            values[f"ch6.scaling.t{j}.r{i}.overshoot"] = round(k / factor, 2)
    return values, curve


# ---------------------------------------------------------------------------

PARTS = ["part_ladder", "part_schedules", "part_batch"]  # independent: measure.py may run them at once


def part_ladder(corpus):
    t0 = time.perf_counter()
    values, curve, val_curves = run_ladder(corpus, _model_cfg(corpus))
    return {"values": values, "curves": {"ch6.ladder": curve, "ch6.ladder.val_curves": val_curves},
            "settings": {"ch6.ladder": {**LADDER, **scaled({}, {"final_eval_small": REDUCED_EVAL.format(SMALL["val_windows"], "windows"),
                                                                 "batch_size": SMALL["ladder_batch"]})}},
            "timings": {"ch6.ladder.seconds": time.perf_counter() - t0}}


def part_schedules(corpus):
    t0 = time.perf_counter()
    values, curves = run_schedules(corpus, _model_cfg(corpus))
    return {"values": values, "curves": curves,
            "settings": {"ch6.schedules": {"arms": SCHEDULE_ARMS, "noise": noise_now(), "noise_checkpoints": list(NOISE_CHECKPOINTS),
                                           **scaled({}, {"batch_size": SMALL["sched_batch"]})}},
            "timings": {"ch6.schedules.seconds": time.perf_counter() - t0}}


def part_batch(corpus):
    """Steps to the target against B, then the scaling rules (which use the fitted B_crit)."""
    model_cfg, timings = _model_cfg(corpus), {}
    t0 = time.perf_counter()
    values, batch_curve = run_batch_sizes(corpus, model_cfg)
    timings["ch6.batch.seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    scaling_values, scaling_curve = run_scaling(
        corpus, model_cfg, b_noise=values["ch6.batch.b_crit"],
        b_noise_by_target={j: values[f"ch6.batch.t{j}.b_crit"] for j in range(len(batch_targets_now()[0]))})
    timings["ch6.scaling.seconds"] = time.perf_counter() - t0
    values.update(scaling_values)
    t0 = time.perf_counter()
    sweep_values, sweep_curve = run_scaling_sweep(corpus, model_cfg, values)
    timings["ch6.scaling_sweep.seconds"] = time.perf_counter() - t0
    values.update(sweep_values)
    scaling_curve["sweep"] = sweep_curve
    return {"values": values, "curves": {"ch6.batch": batch_curve, "ch6.scaling": scaling_curve},
            "settings": {"ch6.batch": {"batch_sizes": list(BATCH_SIZES), "targets": list(batch_targets_now()[0]),
                                       "target": batch_targets_now()[1], "lr": BATCH_LR},
                         "ch6.scaling": {"base": scaling_base(), "ks": list(SCALING_KS), "rules": list(SCALING_RULES),
                                         "sweep_factors": {str(k): list(f) for k, f in SCALING_SWEEP_FACTORS.items()}}},
            "timings": timings}


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


def derived(corpus):
    """Build-time values for chapter 6's widgets and prose (cheap: no training)."""
    from pylib import model, train
    from pylib.studies import lr_sweep
    from pylib.web import schedule_ops as web_schedule
    default = train.TrainConfig()
    return {
        "ch6.default_lr": default.lr,
        "ch6.grad_clip": default.grad_clip,
        "ch6.default_steps": default.steps,
        "ch6.default_warmup": default.warmup_steps,
        "ch6.default_beta1": default.beta1,
        "ch6.default_beta2": default.beta2,
        "ch6.eval_windows": default.eval_windows,
        "ch6.min_lr_ratio": default.min_lr_ratio,
        "ch6.wsd_decay_percent": round(100 * default.decay_frac),
        "ch6.init_std": model.GPTConfig().init_std,
        "ch6.noise_mid_step": NOISE_CHECKPOINTS[1],
        "ch6.noise_end_step": NOISE_CHECKPOINTS[2],
        "ch6.noise_checkpoints": list(NOISE_CHECKPOINTS),
        "ch6.noise_n_batches": NOISE["n_batches"],
        "ch6.noise_b_small": NOISE["b_small"],
        "ch6.noise_b_big": NOISE["b_big"],
        "ch6.batch_eval_every_windows": BATCH_EVAL_EVERY_WINDOWS,
        "ch6.ladder_steps": lr_sweep.LADDER_STEPS,
        "ch6.loss_margin": LOSS_MARGIN,
        "ch6.sweep_default_rates": web_schedule.LIMITS["sweep_default_rates"],
        "ch6.sweep_max_rates": web_schedule.LIMITS["sweep_max_rates"],
        "ch6.lrchange_steps": web_schedule.LIMITS["lrchange_steps"],
    }


def ladder_curve_lines(vc, every=50):
    """results.md's table of the rungs' mean validation curves (subset), every `every` steps and the last."""
    if not vc:
        return []
    cols = [j for j, s in enumerate(vc["steps"]) if s % every == 0] + [len(vc["steps"]) - 1]
    lines = [f"Validation loss during training on the same subset (every {vc['eval_interval']} steps in "
             f"results.json, curves `ch6.ladder.val_curves`), mean over all {vc['n_seeds']} seeds; – where a seed "
             "had diverged:", "",
             "| lr | " + " | ".join(f"step {vc['steps'][j]}" for j in cols) + " |", "| --- |" + " --- |" * len(cols)]
    for lr, mean in zip(vc["lrs"], vc["mean"]):
        lines.append(f"| {lr:g} | " + " | ".join(f"{mean[j]:.4f}" if j < len(mean) else "–" for j in cols) + " |")
    return lines + [""]


def markdown(results):
    """results.md's section for chapter 6."""
    v, c = results["values"], results["curves"]
    f = lambda key, fmt=".4f": format(v[key], fmt) if v.get(key) is not None else "–"  # noqa: E731
    pm = lambda key, fmt=".4f": (f"{v[key + '.mean']:{fmt}} ± {v[key + '.sd']:{fmt}}"  # noqa: E731
                                 if v.get(key + ".mean") is not None else "–")

    def cmp(a, b, margin=LOSS_MARGIN, fmt="+.3f"):
        try:
            return paired_text(v, a, b, margin, fmt)
        except (KeyError, ValueError) as e:
            return f"– ({e})"

    st = results["settings"]
    seeds = sorted(map(int, v["ch6.ladder.best.final_val.per_seed"]))
    NOISE = st["ch6.schedules"]["noise"]  # the constants, or SMALL's if the results are the reduced size
    BATCH_TARGETS, BATCH_TARGET = st["ch6.batch"]["targets"], st["ch6.batch"]["target"]
    SCALING_BASE = st["ch6.scaling"]["base"]
    ws = "whole split" if "final_eval_small" not in st["ch6.ladder"] else "reduced split"
    small = ("" if "final_eval_small" not in st["ch6.ladder"] else
             f" The notebook's reduced size: batch {st['ch6.ladder']['batch_size']} on the ladder and "
             f"{st['ch6.schedules']['batch_size']} on the schedules.")
    lines = ["## Chapter 6: learning rate, schedules and batch size", "",
             f"Seeds {', '.join(map(str, seeds))}; mean ± sample sd over seeds. Final validation losses are on "
             f"{final_eval_text(results)}; steps to the target and the curves are on the trainer's fixed subset "
             f"of validation windows. Paired comparisons: a − b, 95% t-interval, margin {LOSS_MARGIN} nats.{small}", "",
             f"### The learning-rate ladder ({f('ch6.ladder.steps', 'd')} steps, default settings otherwise)", "",
             f"| lr | final val loss ({ws}) | final val loss (subset) | diverged seeds (at step) |",
             "| --- | --- | --- | --- |"]
    lad = c.get("ch6.ladder", {})
    for i, (lr, m, s, n, at) in enumerate(zip(lad.get("lrs", []), lad.get("final_mean", []), lad.get("final_sd", []),
                                              lad.get("diverged", []), lad.get("diverged_at", []))):
        sub = f"{m:.4f} ± {s:.4f}" if m is not None else "–"
        lines.append(f"| {lr:g} | {pm(f'ch6.ladder.r{i}.final_val')} | {sub} | "
                     f"{n} ({', '.join(str(a) for a in at if a is not None)}) |")
    lines += ["", f"Best rate {f('ch6.ladder.best_lr', 'g')}; good band (within {f('ch6.ladder.band_tolerance', 'g')} "
              f"nats of the best, no divergence; {ws}) {f('ch6.ladder.good_lo', 'g')} – {f('ch6.ladder.good_hi', 'g')} "
              f"(on the subset: {f('ch6.ladder.subset_good_lo', 'g')} – {f('ch6.ladder.subset_good_hi', 'g')}); "
              f"first rate with a diverged seed {f('ch6.ladder.first_diverged_lr', 'g')}.", "",
              f"- rung below the best ({f('ch6.ladder.below_best_lr', 'g')}) − best: "
              f"{cmp('ch6.ladder.below_best.final_val', 'ch6.ladder.best.final_val')}",
              f"- rung above the best ({f('ch6.ladder.above_best_lr', 'g')}) − best: "
              f"{cmp('ch6.ladder.above_best.final_val', 'ch6.ladder.best.final_val')}", "",
              *ladder_curve_lines(c.get("ch6.ladder.val_curves")),
              "### Schedules (400 steps)", "",
              f"| arm | final val loss ({ws}) | diverged seeds | arm − cosine, paired |", "| --- | --- | --- | --- |"]
    for name, changes in SCHEDULE_ARMS.items():
        vs = cmp(f"ch6.sched.{name}.final_val", "ch6.sched.cosine.final_val") if name != "cosine" else ""
        lines.append(f"| {name} {changes or ''} | {pm(f'ch6.sched.{name}.final_val')} | "
                     f"{f(f'ch6.sched.{name}.diverged_seeds', 'd')} | {vs} |")
    lines += ["", f"WSD − constant: {cmp('ch6.sched.wsd.final_val', 'ch6.sched.constant.final_val')}", "",
              f"### Gradient noise scale (B_small = {NOISE['b_small']}, B_big = {NOISE['b_big']}, "
              f"{NOISE['n_batches']} batches each, default cosine run)", "",
              "| step | B_simple (windows) | abs(G)^2 | tr(Sigma) |", "| --- | --- | --- | --- |"]
    for cp in NOISE_CHECKPOINTS:
        lines.append(f"| {cp} | {pm(f'ch6.noise.step{cp}.b_simple', '.2f')} | {pm(f'ch6.noise.step{cp}.g2', '.4g')} | "
                     f"{pm(f'ch6.noise.step{cp}.trace', '.4g')} |")
    lines += ["", f"End / step {NOISE_CHECKPOINTS[1]}, seed by seed: B_simple {pm('ch6.noise.b_simple_ratio_end_to_mid', '.2f')}, "
              f"abs(G)^2 {pm('ch6.noise.g2_ratio_end_to_mid', '.2f')}, tr(Sigma) {pm('ch6.noise.trace_ratio_end_to_mid', '.2f')}.", "",
              f"### Steps to val loss {BATCH_TARGET} on the fixed subset (lr {BATCH_LR}, constant after warmup)", "",
              "| B | steps | windows (B × steps) |", "| --- | --- | --- |"]
    for B in BATCH_SIZES:
        lines.append(f"| {B} | {pm(f'ch6.batch.B{B}.steps', '.1f')} | {pm(f'ch6.batch.B{B}.windows', '.0f')} |")
    lines += ["", "| target (subset) | S_min | E_min | B_crit = E_min / S_min (windows) |", "| --- | --- | --- | --- |"]
    for j, t in enumerate(BATCH_TARGETS):
        lines.append(f"| {t} | {f(f'ch6.batch.t{j}.fit_s_min', '.1f')} | {f(f'ch6.batch.t{j}.fit_e_min', '.0f')} | "
                     f"{f(f'ch6.batch.t{j}.b_crit', '.2f')} |")
    lines += ["", f"Bootstrap over seeds (each batch size's seeds resampled with replacement, {f('ch6.batch.boot.n_boot', 'd')} "
              "resamples, 95% percentile intervals; with three seeds these intervals are too narrow, not too wide):", "",
              "| target (subset) | S_min | E_min | B_crit | fits with S_min <= 0 |", "| --- | --- | --- | --- | --- |"]
    for j, t in enumerate(BATCH_TARGETS):
        b = f"ch6.batch.t{j}.boot"
        lines.append(f"| {t} | [{f(b + '.s_min.low', '.1f')}, {f(b + '.s_min.high', '.1f')}] | "
                     f"[{f(b + '.e_min.low', '.0f')}, {f(b + '.e_min.high', '.0f')}] | "
                     f"[{f(b + '.b_crit.low', '.1f')}, {f(b + '.b_crit.high', '.1f')}] | {f(b + '.n_infinite', 'd')} |")
    lines += ["", f"B_crit at {BATCH_TARGETS[-1]} minus at {BATCH_TARGETS[0]}, same resamples: "
              f"[{f('ch6.batch.boot.b_crit_diff.low', '.1f')}, {f('ch6.batch.boot.b_crit_diff.high', '.1f')}]; "
              f"larger in a share {f('ch6.batch.boot.b_crit_larger_share', '.3f')} of the resamples.", ""]
    lines += ["",
              f"### Scaling rules (base B = {SCALING_BASE['batch_size']}, lr {SCALING_BASE['lr']}, "
              f"{SCALING_BASE['steps']} steps; B × k for steps / k; {ws})", "",
              "| k | lr × k | lr × sqrt(k) only | lr fixed | linear − base | McCandlish eps_opt factor |",
              "| --- | --- | --- | --- | --- | --- |"]
    for i, k in enumerate(SCALING_KS):
        vs = cmp(f"ch6.scaling.linear.k{k}.final_val", "ch6.scaling.linear.k1.final_val") if k > 1 else ""
        lines.append(f"| {k} | {pm(f'ch6.scaling.linear.k{k}.final_val')} | {pm(f'ch6.scaling.sqrt.k{k}.final_val')} | "
                     f"{pm(f'ch6.scaling.fixed.k{k}.final_val')} | {vs} | {f(f'ch6.scaling.r{i}.opt_factor', '.2f')} |")
    lines += [""]
    for k in SCALING_KS[1:]:
        lines.append(f"- k = {k}: linear − fixed {cmp(f'ch6.scaling.linear.k{k}.final_val', f'ch6.scaling.fixed.k{k}.final_val')}; "
                     f"sqrt − linear {cmp(f'ch6.scaling.sqrt.k{k}.final_val', f'ch6.scaling.linear.k{k}.final_val')}")
    lines += ["", f"Rate sweep at the largest k (rate = base × factor; {ws}; best against the base run, paired):", "",
              "| k | steps | " + " | ".join(f"× {x}" for x in SCALING_SWEEP_FACTORS[SCALING_SWEEP_KS[-1]]) + " | best − base |",
              "| --- | --- |" + " --- |" * (len(SCALING_SWEEP_FACTORS[SCALING_SWEEP_KS[-1]]) + 1)]
    for k in SCALING_SWEEP_KS:
        cells = [pm(f"ch6.scaling.sweep.k{k}.x{x}.final_val") if x in SCALING_SWEEP_FACTORS[k] else "–"
                 for x in SCALING_SWEEP_FACTORS[SCALING_SWEEP_KS[-1]]]
        lines.append(f"| {k} | {SCALING_BASE['steps'] // k} | " + " | ".join(cells) + " | "
                     f"{cmp(f'ch6.scaling.sweep.k{k}.best.final_val', 'ch6.scaling.linear.k1.final_val')} |")
    lines += ["", f"More seeds (0-{v['ch6.ladder.more_seeds_n'] - 1}) for ladder rungs {LADDER_MORE_SEEDS_RUNGS}: r5 − r4 "
              f"{cmp('ch6.ladder.r5.more_seeds.final_val', 'ch6.ladder.r4.more_seeds.final_val')}"]
    return lines + [""]
