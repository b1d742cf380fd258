"""Chapter 6's experiments: the learning-rate ladder, schedules and warmup, steps to a target
loss against batch size, the linear scaling rule, and the gradient noise scale; three seeds each.

Budget (counted, not felt; one default step, B = 16, T = 64, is ~5.4 ms in CPython on a quiet
core, and a step costs roughly in proportion to B above B = 8, ~0.6-1 ms below):
  - ladder: 9 rates x 3 seeds x 200 steps, minus the diverged rungs' early ends: <= 5,400 steps ~ 29 s
  - schedules: 5 arms x 3 seeds x 400 steps (the sixth, lr 1 without warmup, diverges at once)
    = 6,000 steps ~ 33 s (evals every 50 steps)
  - batch size: B = 2..64 until the target: ~1,100 + 600 + 150 + 100 + 90 + 80 steps of growing
    cost per seed, plus sparse 32-window evals ~ 6 s a seed, ~ 20 s
  - linear scaling: 13 arms x 3 seeds, each 2,560 windows (= 160 default steps) ~ 35 s
  - noise scale: 3 checkpoints x 3 seeds x 32 batches of 2 and of 32 windows ~ 4 s (the checkpoints
    are taken from the schedules' default cosine runs, so they cost no extra training)
  total ~ 120 s on a quiet machine. Under load, OpenBLAS's threads make it far slower (the first
  --only ch6 run, at load average 6-10 on 2 cores, took 1,071 s, 624 s of it in the ladder).
"""

import dataclasses
import math
import time

import numpy as np

from experiments.common import SEEDS, mean_sd, rounded

# ---------------------------------------------------------------------------
# Settings

LADDER = dict(lo=1e-3, hi=10.0, per_decade=2)  # 0.001, 0.003, ..., 3, 10

SCHEDULE_ARMS = {  # name: changes to TrainConfig() (400 steps, peak lr 2e-2, warmup 20)
    "cosine": {},
    "wsd": {"schedule": "wsd"},
    "constant": {"schedule": "constant"},
    "cosine_no_warmup": {"warmup_steps": 0},
    "cosine_high": {"lr": 1.0},  # near the top of the ladder's trainable rates
    "cosine_high_no_warmup": {"lr": 1.0, "warmup_steps": 0},
}
SCHEDULE_EVAL_INTERVAL = 50
NOISE_CHECKPOINTS = (0, 100, 400)  # steps of the default cosine run
NOISE = dict(b_small=2, b_big=32, n_batches=32)

BATCH_SIZES = (2, 4, 8, 16, 32, 64)
BATCH_TARGET = 2.65  # nats of validation loss; every setting reaches it within BATCH_MAX_STEPS
BATCH_MAX_STEPS = 3000
BATCH_LR = 2e-2  # the default peak lr, constant after the warmup, for every B
BATCH_EVAL_WINDOWS = 32

SCALING_BASE = dict(batch_size=4, lr=5e-3, steps=640, warmup_steps=32)
SCALING_KS = (1, 2, 4, 8, 16)


def _corpus_args(corpus):
    return corpus.train, corpus.val


# ---------------------------------------------------------------------------
# The ladder


def run_ladder(corpus, model_cfg):
    from pylib import train
    from pylib.studies import lr_sweep
    rates = lr_sweep.ladder(**LADDER)
    finals, diverged_at = [], []
    for lr in rates:
        outs = [lr_sweep.rung_outcome(train.train(model_cfg, lr_sweep.rung_config(lr, seed), *_corpus_args(corpus))[1])
                for seed in SEEDS]
        finals.append([o["final_val"] for o in outs])
        diverged_at.append([o["diverged_at"] for o in outs])
    means = [mean_sd(f)[0] if None not in f else None for f in finals]
    sds = [mean_sd(f)[1] if None not in f else None for f in finals]
    n_div = [sum(d is not None for d in ds) for ds in diverged_at]
    values = {"ch6.ladder.steps": lr_sweep.LADDER_STEPS, "ch6.ladder.n_rates": len(rates),
              "ch6.ladder.lowest_lr": rates[0], "ch6.ladder.highest_lr": rates[-1],
              "ch6.ladder.band_tolerance": lr_sweep.BAND_TOLERANCE}
    for i, lr in enumerate(rates):  # one row of the chapter's table per rung
        values[f"ch6.ladder.r{i}.lr"] = lr
        values[f"ch6.ladder.r{i}.diverged_seeds"] = n_div[i]
        values[f"ch6.ladder.r{i}.diverged_steps"] = ", ".join(str(d) for d in diverged_at[i] if d is not None) or "none"
        values[f"ch6.ladder.r{i}.final_val"] = (f"{means[i]:.3f} ± {sds[i]:.3f}" if means[i] is not None
                                                else f"diverged ({n_div[i]} of {len(SEEDS)} seeds)")
    ok = [i for i, m in enumerate(means) if m is not None and n_div[i] == 0]
    best = min(ok, key=lambda i: means[i])
    values["ch6.ladder.best_lr"] = rates[best]
    values["ch6.ladder.best_val.mean"], values["ch6.ladder.best_val.sd"] = means[best], sds[best]
    band = lr_sweep.good_band(rates, means, n_div)
    values["ch6.ladder.good_lo"], values["ch6.ladder.good_hi"] = band
    first_div = next(i for i, n in enumerate(n_div) if n > 0)
    values["ch6.ladder.first_diverged_lr"] = rates[first_div]
    values["ch6.ladder.first_diverged_seeds"] = n_div[first_div]
    values["ch6.ladder.first_diverged_step_max"] = max(d for d in diverged_at[first_div] if d is not None)
    values["ch6.ladder.highest_trained_lr"] = rates[max(ok)]
    values["ch6.ladder.highest_trained_val.mean"], values["ch6.ladder.highest_trained_val.sd"] = means[max(ok)], sds[max(ok)]
    values["ch6.ladder.lowest_val.mean"], values["ch6.ladder.lowest_val.sd"] = means[0], sds[0]
    curve = {"lrs": rates, "final_mean": [None if m is None else round(m, 5) for m in means],
             "final_sd": [None if s is None else round(s, 5) for s in sds],
             "finals": [[None if v is None else round(v, 5) for v in f] for f in finals],
             "diverged": n_div, "diverged_at": diverged_at}
    return values, curve


# ---------------------------------------------------------------------------
# Schedules and warmup, with the noise scale at checkpoints of the default run


def run_schedules(corpus, model_cfg):
    from pylib import train
    from pylib.studies import noise_scale
    values, curves, noise, per_seed = {}, {}, {c: [] for c in NOISE_CHECKPOINTS}, {}
    for name, changes in SCHEDULE_ARMS.items():
        cfg0 = dataclasses.replace(train.TrainConfig(), eval_interval=SCHEDULE_EVAL_INTERVAL, **changes)
        finals, val_curves, lr_curve, div = [], [], None, []
        for seed in SEEDS:
            cfg = dataclasses.replace(cfg0, seed=seed)
            state = train.init_train_state(model_cfg, cfg)
            history = []
            for checkpoint in (NOISE_CHECKPOINTS if name == "cosine" else (cfg.steps,)):
                history += train.train_steps(state, model_cfg, cfg, *_corpus_args(corpus), checkpoint - state["step"])
                if name == "cosine":
                    rng = np.random.default_rng([seed, 6, checkpoint])
                    noise[checkpoint].append(noise_scale.estimate_noise_scale(
                        state["params"], model_cfg, corpus.train, rng=rng, **NOISE))
            last = history[-1]
            div.append(last["step"] if last.get("diverged") else None)
            finals.append(last.get("val") if not last.get("diverged") else None)
            val_curves.append([(r["step"], r["val"]) for r in history if r.get("val") is not None])
            lr_curve = [r["lr"] for r in history]
        key = f"ch6.sched.{name}"
        per_seed[name] = finals
        values[f"{key}.diverged_seeds"] = sum(d is not None for d in div)
        if None not in finals:
            values[f"{key}.final_val.mean"], values[f"{key}.final_val.sd"] = mean_sd(finals)
            values[f"{key}.final"] = "{:.3f} ± {:.3f}".format(*mean_sd(finals))
        else:
            values[f"{key}.diverged_at_max"] = max(d for d in div if d is not None)
            values[f"{key}.final"] = (f"diverged ({values[f'{key}.diverged_seeds']} of {len(SEEDS)} seeds, "
                                      f"by step {values[f'{key}.diverged_at_max']})")
        steps = [s for s, _ in val_curves[0]]
        if all(len(c) == len(steps) for c in val_curves):
            arr = np.array([[v for _, v in c] for c in val_curves])  # (seeds, evals)
            if name == "cosine":  # where the default run passes the batch study's target, between checkpoints
                values["ch6.sched.cosine.target_step"] = next(
                    (s for s, m in zip(steps, arr.mean(axis=0)) if m <= BATCH_TARGET), None)
            curves[key] = {"steps": steps, "val_mean": rounded(arr.mean(axis=0)),
                           "val_sd": rounded(arr.std(axis=0, ddof=1)), "lr": rounded(lr_curve, 7)}
    for name in ("wsd", "constant", "cosine_no_warmup"):  # paired by seed: same init, same batches
        a, b = per_seed.get(name), per_seed["cosine"]
        if a and None not in a and None not in b:
            diffs = [x - y for x, y in zip(a, b)]
            values[f"ch6.sched.{name}.minus_cosine.mean"], values[f"ch6.sched.{name}.minus_cosine.sd"] = mean_sd(diffs)
            values[f"ch6.sched.{name}.minus_cosine.n_better"] = sum(d < 0 for d in diffs)
            values[f"ch6.sched.{name}.paired"] = "{:+.3f} ± {:.3f}".format(*mean_sd(diffs))
    for c, rows in noise.items():
        for field in ("b_simple", "g2", "trace"):
            xs = [r[field] for r in rows]
            if None not in xs:
                values[f"ch6.noise.step{c}.{field}.mean"], values[f"ch6.noise.step{c}.{field}.sd"] = mean_sd(xs)
    values.update({"ch6.noise.b_small": NOISE["b_small"], "ch6.noise.b_big": NOISE["b_big"],
                   "ch6.noise.n_batches": NOISE["n_batches"], "ch6.sched.high_lr": SCHEDULE_ARMS["cosine_high"]["lr"],
                   "ch6.sched.eval_interval": SCHEDULE_EVAL_INTERVAL})
    return values, curves


# ---------------------------------------------------------------------------
# Batch size: steps to a target loss


BATCH_EVAL_EVERY_WINDOWS = 160


def batch_eval_interval(batch_size):
    """Evaluate about every BATCH_EVAL_EVERY_WINDOWS windows of training data, at least every 5 steps."""
    return max(5, BATCH_EVAL_EVERY_WINDOWS // batch_size)


def steps_to_target_run(corpus, model_cfg, batch_size, seed):
    """Train at batch_size (constant lr after warmup) until the val loss on fixed windows <= target."""
    from pylib import train
    from pylib.studies import noise_scale
    cfg = dataclasses.replace(train.TrainConfig(), batch_size=batch_size, lr=BATCH_LR, schedule="constant",
                              steps=BATCH_MAX_STEPS, eval_interval=10**9, eval_windows=8, seed=seed)
    state = train.init_train_state(model_cfg, cfg)
    every, evals = batch_eval_interval(batch_size), []
    while state["step"] < cfg.steps and not state["diverged"]:
        train.train_steps(state, model_cfg, cfg, *_corpus_args(corpus), every)
        evals.append((state["step"], train.estimate_loss(state["params"], model_cfg, corpus.val, BATCH_EVAL_WINDOWS)))
        if evals[-1][1] <= BATCH_TARGET:
            break
    return noise_scale.steps_to_target(evals, BATCH_TARGET)


def run_batch_sizes(corpus, model_cfg):
    from pylib.studies import noise_scale
    values, steps_mean, steps_sd, per_seed = {}, [], [], []
    for B in BATCH_SIZES:
        steps = [steps_to_target_run(corpus, model_cfg, B, seed) for seed in SEEDS]
        per_seed.append(steps)
        if None in steps:
            values[f"ch6.batch.B{B}.not_reached"] = sum(s is None for s in steps)
            steps_mean.append(None)
            steps_sd.append(None)
            continue
        m, s = mean_sd(steps)
        steps_mean.append(m)
        steps_sd.append(s)
        values[f"ch6.batch.B{B}.steps.mean"], values[f"ch6.batch.B{B}.steps.sd"] = m, s
        values[f"ch6.batch.B{B}.windows.mean"] = m * B
    for i, (B, m, sd) in enumerate(zip(BATCH_SIZES, steps_mean, steps_sd)):  # the chapter's table rows
        values[f"ch6.batch.r{i}.B"] = B
        values[f"ch6.batch.r{i}.steps"] = f"{m:.0f} ± {sd:.0f}" if m is not None else "not reached"
        values[f"ch6.batch.r{i}.windows"] = f"{m * B:.0f}" if m is not None else "–"
    reached = [(B, m) for B, m in zip(BATCH_SIZES, steps_mean) if m is not None]
    fit = noise_scale.fit_critical_batch([b for b, _ in reached], [m for _, m in reached])
    values.update({"ch6.batch.target": BATCH_TARGET, "ch6.batch.lr": BATCH_LR, "ch6.batch.max_steps": BATCH_MAX_STEPS,
                   "ch6.batch.eval_windows": BATCH_EVAL_WINDOWS, "ch6.batch.fit_s_min": fit["s_min"],
                   "ch6.batch.fit_e_min": fit["e_min"], "ch6.batch.b_crit": fit["b_crit"],
                   "ch6.batch.smallest": BATCH_SIZES[0], "ch6.batch.largest": BATCH_SIZES[-1]})
    fewest = min(reached, key=lambda r: r[1] * r[0])
    values["ch6.batch.fewest_windows_B"] = fewest[0]
    curve = {"batch_sizes": list(BATCH_SIZES), "steps_mean": steps_mean, "steps_sd": steps_sd, "per_seed": per_seed,
             "eval_every": [batch_eval_interval(B) for B in BATCH_SIZES]}
    return values, curve


# ---------------------------------------------------------------------------
# The linear scaling rule


def scaling_config(k, rule, seed):
    """B x k windows and steps / k (the same tokens); lr x k ("linear"), x sqrt(k) ("sqrt") or unchanged ("fixed")."""
    from pylib import train
    b = SCALING_BASE
    lr = b["lr"] * {"linear": k, "sqrt": math.sqrt(k), "fixed": 1}[rule]
    return dataclasses.replace(train.TrainConfig(), batch_size=b["batch_size"] * k, lr=lr, steps=b["steps"] // k,
                               warmup_steps=max(1, b["warmup_steps"] // k), eval_interval=b["steps"], seed=seed)


def run_scaling(corpus, model_cfg):
    from pylib import train
    values, curve = {}, {"ks": list(SCALING_KS)}
    base_finals = None  # k = 1 is measured once, in the first rule's loop, and reused by the others
    for rule in ("linear", "sqrt", "fixed"):
        means, sds, divs = [], [], []
        for k in SCALING_KS:
            if k == 1 and rule != "linear":
                finals = base_finals  # the same runs: k = 1 is the base for both rules
            else:
                finals = []
                for seed in SEEDS:
                    _, h = train.train(model_cfg, scaling_config(k, rule, seed), *_corpus_args(corpus))
                    finals.append(None if h[-1].get("diverged") else h[-1]["val"])
                if k == 1:
                    base_finals = finals
            divs.append(sum(f is None for f in finals))
            if None in finals:
                means.append(None)
                sds.append(None)
                continue
            m, s = mean_sd(finals)
            means.append(m)
            sds.append(s)
            values[f"ch6.scaling.{rule}.k{k}.final_val.mean"], values[f"ch6.scaling.{rule}.k{k}.final_val.sd"] = m, s
            if k > 1:
                values[f"ch6.scaling.{rule}.k{k}.minus_base"] = m - values["ch6.scaling.linear.k1.final_val.mean"]
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
    return values, curve


# ---------------------------------------------------------------------------


def run(corpus):
    from pylib import model
    model_cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    out = {"values": {}, "curves": {}, "settings": {}, "timings": {}}
    parts = [("ladder", run_ladder), ("schedules", run_schedules), ("batch", run_batch_sizes), ("scaling", run_scaling)]
    for name, fn in parts:
        t0 = time.perf_counter()
        values, curve = fn(corpus, model_cfg)
        out["timings"][f"ch6.{name}.seconds"] = time.perf_counter() - t0
        out["values"].update(values)
        if name == "schedules":
            out["curves"].update(curve)
        else:
            out["curves"][f"ch6.{name}"] = curve
    out["settings"]["ch6.experiments"] = {"ladder": LADDER, "schedule_arms": SCHEDULE_ARMS, "noise": NOISE,
                              "noise_checkpoints": list(NOISE_CHECKPOINTS), "batch_sizes": list(BATCH_SIZES),
                              "batch_target": BATCH_TARGET, "batch_lr": BATCH_LR, "scaling_base": SCALING_BASE,
                              "scaling_ks": list(SCALING_KS)}
    return out


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
        "ch6.min_lr_ratio": default.min_lr_ratio,
        "ch6.wsd_decay_percent": round(100 * default.decay_frac),
        "ch6.init_std": model.GPTConfig().init_std,
        "ch6.noise_mid_step": NOISE_CHECKPOINTS[1],
        "ch6.noise_end_step": NOISE_CHECKPOINTS[2],
        "ch6.batch_eval_every_windows": BATCH_EVAL_EVERY_WINDOWS,
        "ch6.ladder_steps": lr_sweep.LADDER_STEPS,
        "ch6.sweep_default_rates": web_schedule.LIMITS["sweep_default_rates"],
        "ch6.sweep_max_rates": web_schedule.LIMITS["sweep_max_rates"],
        "ch6.lrchange_steps": web_schedule.LIMITS["lrchange_steps"],
    }


def markdown(results):
    """results.md's section for chapter 6."""
    v, c = results["values"], results["curves"]
    f = lambda key, fmt=".4f": format(v[key], fmt) if key in v else "–"
    pm = lambda key, fmt=".4f": f"{v[key + '.mean']:{fmt}} ± {v[key + '.sd']:{fmt}}" if key + ".mean" in v else "–"
    lines = ["## Chapter 6: learning rate, schedules and batch size", "",
             f"Seeds {', '.join(map(str, SEEDS))}; mean ± sample sd over seeds.", "",
             f"### The learning-rate ladder ({f('ch6.ladder.steps', 'd')} steps, default settings otherwise)", "",
             "| lr | final val loss | diverged seeds (at step) |", "| --- | --- | --- |"]
    lad = c.get("ch6.ladder", {})
    for lr, m, s, n, at in zip(lad.get("lrs", []), lad.get("final_mean", []), lad.get("final_sd", []),
                               lad.get("diverged", []), lad.get("diverged_at", [])):
        loss = f"{m:.4f} ± {s:.4f}" if m is not None else "–"
        lines.append(f"| {lr:g} | {loss} | {n} ({', '.join(str(a) for a in at if a is not None)}) |")
    lines += ["", f"Best rate {f('ch6.ladder.best_lr', 'g')}; good band (within {f('ch6.ladder.band_tolerance', 'g')} "
              f"nats of the best, no divergence) {f('ch6.ladder.good_lo', 'g')} – {f('ch6.ladder.good_hi', 'g')}; "
              f"first rate with a diverged seed {f('ch6.ladder.first_diverged_lr', 'g')}.", "",
              "### Schedules (400 steps)", "", "| arm | final val loss | diverged seeds |", "| --- | --- | --- |"]
    for name, changes in SCHEDULE_ARMS.items():
        lines.append(f"| {name} {changes or ''} | {pm(f'ch6.sched.{name}.final_val')} | "
                     f"{f(f'ch6.sched.{name}.diverged_seeds', 'd')} |")
    lines += ["", f"### Gradient noise scale (B_small = {NOISE['b_small']}, B_big = {NOISE['b_big']}, "
              f"{NOISE['n_batches']} batches each, default cosine run)", "",
              "| step | B_simple (windows) | abs(G)^2 | tr(Sigma) |", "| --- | --- | --- | --- |"]
    for cp in NOISE_CHECKPOINTS:
        lines.append(f"| {cp} | {pm(f'ch6.noise.step{cp}.b_simple', '.2f')} | {pm(f'ch6.noise.step{cp}.g2', '.4g')} | "
                     f"{pm(f'ch6.noise.step{cp}.trace', '.4g')} |")
    lines += ["", f"### Steps to val loss {BATCH_TARGET} (lr {BATCH_LR}, constant after warmup)", "",
              "| B | steps | windows (B × steps) |", "| --- | --- | --- |"]
    for B in BATCH_SIZES:
        lines.append(f"| {B} | {pm(f'ch6.batch.B{B}.steps', '.1f')} | {f(f'ch6.batch.B{B}.windows.mean', '.0f')} |")
    lines += ["", f"Fit S = S_min + E_min / B: S_min {f('ch6.batch.fit_s_min', '.1f')}, E_min {f('ch6.batch.fit_e_min', '.0f')}, "
              f"B_crit = E_min / S_min = {f('ch6.batch.b_crit', '.2f')} windows.", "",
              f"### Linear scaling rule (base B = {SCALING_BASE['batch_size']}, lr {SCALING_BASE['lr']}, "
              f"{SCALING_BASE['steps']} steps; B × k for steps / k)", "",
              "| k | lr × k | lr × sqrt(k) | lr fixed |", "| --- | --- | --- | --- |"]
    for k in SCALING_KS:
        lines.append(f"| {k} | {pm(f'ch6.scaling.linear.k{k}.final_val')} | {pm(f'ch6.scaling.sqrt.k{k}.final_val')} | "
                     f"{pm(f'ch6.scaling.fixed.k{k}.final_val')} |")
    return lines + [""]
