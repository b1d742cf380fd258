"""Chapter 5's experiments: the optimisers on the real model, and weight decay.

Every final loss is the whole validation split (pylib.evaluation, TrainConfig(final_eval=True)),
stored as an arm with every seed (experiments.common.arm) so that the chapter can compare arms
through compare(). Curves (the page's bands) stay on the trainer's fixed subset, the evaluation
the page's live run uses: COMPARISON_EVAL_WINDOWS windows every COMPARISON_EVAL_INTERVAL steps.

1. A learning-rate sweep per optimiser (SWEEP = pylib.studies.optim_state.COMPARISON): SGD, SGD
   with momentum, Adam (AdamW with weight decay 0), AdamW and Muon, five rates about 3x apart
   each, three seeds, SWEEP_STEPS steps of the default model and batch. A rate counts only if no
   seed diverged; the best rate is the lowest mean final loss. The runs at the best rate ARE the
   comparison of the optimisers (their subset curves are kept as bands): nothing is re-run.
   Parts (PARTS) so that measure.py can spread them over the cores: one per optimiser, except that
   Adam, AdamW and the decay study share one (part_adam_decay), to run their common runs once.
2. Weight decay (part_decay), at one rate fixed in advance (DECAY_LR, the course's default peak
   rate): Adam without decay, and a small grid of coefficients for each of AdamW (decoupled,
   PyTorch's form p *= 1 - lr*wd) and Adam + L2, three seeds each; each method's best coefficient
   is the lowest mean final loss. Also the RMS of the decayed weights of every run.
3. The equilibrium of decoupled decay (part_equilibrium): AdamW at a constant rate after warmup,
   two large coefficients, three seeds; over the last EQ_WINDOW steps the RMS of the decayed
   weights against sqrt(lr / (wd (2 - lr wd))) times the RMS of the Adam update direction
   (pylib.studies.optim_state.decay_equilibrium_rms), both measured from the same steps.

Three more seeds (EXTRA_SEEDS) only for SGD's and momentum's best rates and for the decay study's
best coefficients and no decay, where three seeds left the chapter's comparisons unresolved; the
best is chosen on the first three seeds.

Budget (counted): 75 sweep runs (runs that diverge stop early and skip the final evaluation),
6 extra-seed sweep runs, 21 + 9 decay runs (6 of its 27 grid runs are the sweep's), 6 short
equilibrium runs. Timed with a small script (OPENBLAS_NUM_THREADS=1, quiet
machine): a 200-step run with its whole-split evaluation costs ~1.2-1.3 s of CPU (~0.6 s of it
the evaluation), (1.3-1.6 s at a load of 2), so ~95-115 s for the sweep, ~38-45 s for decay, ~4 s for the
equilibrium: ~140-165 s of CPU, about the 150 s the chapter may take.
"""

import dataclasses
import math
import time

import numpy as np

from experiments.common import (EVAL_FULL, REDUCED_EVAL, SEEDS, arm, final_val, is_small, paired_text, progress,
                                 rounded, run_parts, scaled, val_tokens)
from pylib.compare import sd_interval_factors
from pylib.studies.optim_state import COMPARISON as SWEEP  # the settings the page's live widget re-runs
from pylib.studies.optim_state import COMPARISON_EVAL_INTERVAL as EVAL_INTERVAL
from pylib.studies.optim_state import COMPARISON_EVAL_WINDOWS as EVAL_WINDOWS
from pylib.studies.optim_state import COMPARISON_STEPS as SWEEP_STEPS
from pylib.studies.optim_state import N_RATES
from pylib.studies.optim_state import comparison_config as sweep_config

NS_BAND_FROM = 0.01  # the chapter states Newton-Schulz's band for normalised singular values >= this
MARGIN = 0.02  # nats: the smallest difference in final loss the chapter would call a difference

DECAY_LR = 0.01  # fixed in advance: the course's default peak rate (TrainConfig().lr)
DECAY_GRID = {  # method -> coefficients tried (0 is the shared "no decay" arm, Adam)
    "adamw": [0.1, 0.3, 1.0, 3.0],
    "adam_l2": [0.001, 0.01, 0.1, 1.0],
}
EQ_LR = 0.01
EQ_WD = [1.0, 3.0]  # large enough that lr * wd * (steps) >> 1: the norm has time to settle
EQ_STEPS = 200
EQ_WINDOW = 50  # the last steps, over which the RMS of the weights and of the update are averaged

# Three more seeds, only where three left a comparison the chapter makes unresolved and the budget
# allows: the best rates of SGD and momentum, and the decay study's best coefficients and no decay.
# The best is chosen on SEEDS alone; the extra seeds are then added to it (never used to choose).
EXTRA_SEEDS = (3, 4, 5)
MORE_SEEDS_FOR = ("sgd", "momentum")

# The notebook's reduced size (experiments.common.small_size): two seeds and one more, 20-step runs (the
# 20-step warmup is kept, so these are all warmup; SGD's top rate still diverges within it) at batch 4, the
# final evaluation on the validation split's first val_windows windows instead of all of them (a whole-split
# pass costs more than a short run), and a 30-step equilibrium run averaged over its last 10 steps. Every
# rate and coefficient of the grids is kept: the chapter quotes each.
SMALL = {"seeds": (0, 1), "extra_seeds": (2,), "steps": 20, "batch_size": 4, "val_windows": 64,
         "eq_steps": 30, "eq_window": 10}


def seeds_now():
    """SEEDS, or SMALL's seeds at the reduced size."""
    return scaled(SEEDS, SMALL["seeds"])


def extra_seeds_now():
    """EXTRA_SEEDS, or SMALL's at the reduced size."""
    return scaled(EXTRA_SEEDS, SMALL["extra_seeds"])


def val_split(corpus, block_size=64):
    """The validation tokens the final losses are scored on: the whole split, or its first
    SMALL["val_windows"] windows at the reduced size."""
    return val_tokens(corpus.val, SMALL["val_windows"] * block_size + 1)


def run_config(name, lr, seed):
    """One sweep run's TrainConfig (pylib.studies.optim_state.comparison_config), with SMALL's steps and
    batch at the reduced size."""
    cfg = sweep_config(name, lr, seed)
    return scaled(cfg, dataclasses.replace(cfg, steps=SMALL["steps"], batch_size=SMALL["batch_size"]))


def decayed_rms(params):
    """RMS of the decay group's weights (matrices and embeddings)."""
    from pylib import optim
    names = optim.param_groups(params)["decay"]
    total = sum(float(np.sum(params[n].astype(np.float64) ** 2)) for n in names)
    return math.sqrt(total / sum(params[n].size for n in names))


def run_setting(corpus, make_cfg, seeds=None, cache=None):
    """One setting, every seed (default SEEDS, or SMALL's at the reduced size): per-seed histories, the
    final loss on the whole validation split (None if the run diverged) and the final params' decayed RMS.

    cache, optional: a dict {TrainConfig: run} shared by the settings of one part, so that a run two
    studies share (Adam at the decay study's rate is the sweep's Adam at that rate) is made once;
    the values are the same either way (same config, same seed: the same run)."""
    from pylib import model, train
    model_cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    seeds = seeds or seeds_now()
    val = val_split(corpus, model_cfg.block_size)
    runs = {}
    for seed in seeds:
        cfg = dataclasses.replace(make_cfg(seed), final_eval=True)
        if cache is not None and cfg in cache:
            runs[seed] = cache[cfg]
            continue
        params, history = train.train(model_cfg, cfg, corpus.train, val)
        diverged = next((r["step"] for r in history if r.get("diverged")), None)
        value = final_val(history)
        runs[seed] = {"history": history, "diverged_at": diverged, "final_val": value,
                      "rms": None if value is None else decayed_rms(params)}
        if cache is not None:
            cache[cfg] = runs[seed]
    return runs


def band_curve(runs):
    """The seeds' mean and sd of the SUBSET validation loss at each eval step (pylib.web's band
    format): the evaluation the page's live run shows, never the whole split."""
    runs = list(runs.values())
    evals = [[r for r in run["history"] if r.get("val") is not None] for run in runs]
    val = np.array([[r["val"] for r in e] for e in evals])  # (seeds, evals)
    train_eval = np.array([[r["train_eval"] for r in e] for e in evals])
    loss = np.array([[r["loss"] for r in run["history"]] for run in runs])  # (seeds, steps)
    return {"steps": [r["step"] for r in evals[0]],
            "val_mean": rounded(val.mean(axis=0)), "val_sd": rounded(val.std(axis=0, ddof=1)),
            "train_mean": rounded(train_eval.mean(axis=0)), "loss_mean": rounded(loss.mean(axis=0)),
            "eval_windows": EVAL_WINDOWS}


def per_seed(runs, field="final_val"):
    return {seed: run[field] for seed, run in runs.items()}


# ---------------------------------------------------------------------------
# 1. The sweep, one part per optimiser


def sweep_part(corpus, name, cache=None):
    values, curves, settings = {}, {}, {}
    overrides, lrs, label = SWEEP[name]
    t0 = time.perf_counter()
    table = {"lrs": lrs, "val_mean": [], "val_sd": [], "diverged_seeds": []}
    cells = []
    for k, lr in enumerate(progress(lrs, desc=f"{name}: rates", unit="rate")):
        runs = run_setting(corpus, lambda seed: run_config(name, lr, seed), cache=cache)
        n_div = sum(r["diverged_at"] is not None for r in runs.values())
        key = f"ch5.sweep.{name}.lr{k}"
        values[f"{key}.lr"] = lr
        values[f"{key}.diverged_seeds"] = n_div
        values.update(arm(f"{key}.final_val", per_seed(runs)))
        m, s = values[f"{key}.final_val.mean"], values[f"{key}.final_val.sd"]
        if n_div == 0:
            values[f"{key}.cell"] = f"{m:.3f} ± {s:.3f}"
        else:
            first = min(r["diverged_at"] for r in runs.values() if r["diverged_at"] is not None)
            values[f"{key}.cell"] = f"diverged ({n_div}/{len(runs)} seeds; first at step {first})"
        table["val_mean"].append(m)
        table["val_sd"].append(s)
        table["diverged_seeds"].append(n_div)
        cells.append(runs)
    ok = [k for k in range(len(lrs)) if values[f"ch5.sweep.{name}.lr{k}.final_val.mean"] is not None]
    k = min(ok, key=lambda i: values[f"ch5.sweep.{name}.lr{i}.final_val.mean"])
    values[f"ch5.best.{name}.lr"] = lrs[k]
    values[f"ch5.best.{name}.lr_index"] = k
    values.update(arm(f"ch5.best.{name}.final_val", per_seed(cells[k])))
    values[f"ch5.best.{name}.edge"] = k in (0, len(lrs) - 1)  # best at the grid's edge?
    # the neighbours of the best rate, for "is the best resolved from the next rate?"
    if k > 0:
        values.update(arm(f"ch5.best.{name}.below.final_val", per_seed(cells[k - 1])))
        values[f"ch5.best.{name}.below.lr"] = lrs[k - 1]
    if k + 1 < len(lrs):
        values[f"ch5.best.{name}.above.lr"] = lrs[k + 1]
        values[f"ch5.best.{name}.above.diverged_seeds"] = table["diverged_seeds"][k + 1]
        if table["diverged_seeds"][k + 1] == 0:
            values.update(arm(f"ch5.best.{name}.above.final_val", per_seed(cells[k + 1])))
    if name in MORE_SEEDS_FOR:
        more = run_setting(corpus, lambda seed: run_config(name, lrs[k], seed), extra_seeds_now())
        values.update(arm(f"ch5.best.{name}.more.final_val", {**per_seed(cells[k]), **per_seed(more)}))
    values[f"ch5.label.{name}"] = label
    curves[f"ch5.best.{name}"] = band_curve(cells[k])
    curves[f"ch5.sweep.{name}"] = table
    settings[f"ch5.sweep.{name}"] = {**overrides, "lrs": lrs, "steps": scaled(SWEEP_STEPS, SMALL["steps"]),
                                     "eval_interval": EVAL_INTERVAL, "eval_windows": EVAL_WINDOWS,
                                     "final": scaled("whole validation split", REDUCED_EVAL.format(SMALL["val_windows"], "windows"))}
    if is_small():  # the reduced size: say what changed
        settings[f"ch5.sweep.{name}"]["batch_size"] = SMALL["batch_size"]
    return {"values": values, "curves": curves, "settings": settings,
            "timings": {f"ch5.sweep.{name}.seconds": time.perf_counter() - t0}}


def part_sgd(corpus):
    out = sweep_part(corpus, "sgd")
    out["values"].update({"ch5.seeds": len(seeds_now()), "ch5.steps": scaled(SWEEP_STEPS, SMALL["steps"]),
                          "ch5.eval_windows": EVAL_WINDOWS,
                          "ch5.eval_interval": EVAL_INTERVAL})
    return out


def part_momentum(corpus):
    return sweep_part(corpus, "momentum")


def part_muon(corpus):
    return sweep_part(corpus, "muon")


# ---------------------------------------------------------------------------
# 2. Weight decay: a coefficient grid per method at one rate


def decay_config(method, wd, seed):
    """AdamW's sweep setting at DECAY_LR with coefficient wd, decoupled (adamw) or as L2 (adam_l2)."""
    return dataclasses.replace(run_config("adamw", DECAY_LR, seed), weight_decay=wd, optimizer=method)


def part_decay(corpus, cache=None):
    t0 = time.perf_counter()
    values, curves = {}, {}
    none = run_setting(corpus, lambda seed: decay_config("adamw", 0.0, seed), cache=cache)
    values.update(arm("ch5.decay.none.final_val", per_seed(none)))
    values.update(arm("ch5.decay.none.rms", per_seed(none, "rms")))
    for method, grid in DECAY_GRID.items():
        best = None
        for i, wd in enumerate(progress(grid, desc=f"decay: {method}", unit="coefficient")):
            runs = run_setting(corpus, lambda seed: decay_config(method, wd, seed), cache=cache)
            key = f"ch5.decay.{method}.wd{i}"
            values[f"{key}.wd"] = wd
            values.update(arm(f"{key}.final_val", per_seed(runs)))
            values.update(arm(f"{key}.rms", per_seed(runs, "rms")))
            m = values[f"{key}.final_val.mean"]
            values[f"{key}.cell"] = "diverged" if m is None else f"{m:.3f} ± {values[f'{key}.final_val.sd']:.3f}"
            if m is not None and (best is None or m < best[1]):
                best = (i, m, runs)
        i, _, runs = best
        values[f"ch5.decay.{method}.best.wd"] = grid[i]
        values[f"ch5.decay.{method}.best.wd_index"] = i
        values[f"ch5.decay.{method}.best.edge"] = i in (0, len(grid) - 1)
        values.update(arm(f"ch5.decay.{method}.best.final_val", per_seed(runs)))
        values.update(arm(f"ch5.decay.{method}.best.rms", per_seed(runs, "rms")))
        curves[f"ch5.decay.{method}.best"] = band_curve(runs)
        more = run_setting(corpus, lambda seed: decay_config(method, grid[i], seed), extra_seeds_now())
        values.update(arm(f"ch5.decay.{method}.best.more.final_val", {**per_seed(runs), **per_seed(more)}))
    more = run_setting(corpus, lambda seed: decay_config("adamw", 0.0, seed), extra_seeds_now())
    values.update(arm("ch5.decay.none.more.final_val", {**per_seed(none), **per_seed(more)}))
    values["ch5.decay.lr"] = DECAY_LR
    values["ch5.decay.grid_size"] = len(DECAY_GRID["adamw"])
    return {"values": values, "curves": curves,
            "settings": {"ch5.decay": {"lr": DECAY_LR, "grid": DECAY_GRID, "steps": scaled(SWEEP_STEPS, SMALL["steps"])}},
            "timings": {"ch5.decay.seconds": time.perf_counter() - t0}}


# ---------------------------------------------------------------------------
# 3. The equilibrium of decoupled decay


def equilibrium_run(corpus, wd, seed):
    """AdamW at EQ_LR (constant after warmup) with coefficient wd: over the last EQ_WINDOW steps (EQ_STEPS
    and EQ_WINDOW, or SMALL's eq_steps and eq_window at the reduced size), the
    RMS of the decayed weights, the RMS of the Adam update direction u (from p' = (1 - lr wd) p - lr u),
    the mean cosine between p and u, and the predicted equilibrium RMS."""
    from pylib import model, optim, train
    from pylib.studies.optim_state import decay_balance_rms, decay_equilibrium_rms
    eq_steps, eq_window = scaled(EQ_STEPS, SMALL["eq_steps"]), scaled(EQ_WINDOW, SMALL["eq_window"])
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    cfg = dataclasses.replace(train.TrainConfig(), lr=EQ_LR, weight_decay=wd, schedule="constant", steps=eq_steps,
                              seed=seed, eval_interval=eq_steps, eval_windows=8)
    state = train.init_train_state(mcfg, cfg)
    train.train_steps(state, mcfg, cfg, corpus.train, corpus.val, eq_steps - eq_window)
    names = optim.param_groups(state["params"])["decay"]
    flat = lambda: np.concatenate([state["params"][n].astype(np.float64).ravel() for n in names])  # noqa: E731
    mask = optim.decay_mask(state["params"], state["groups"], state["opt"]) > 0  # the same order as flat()
    opt = state["opt"]
    p_sq, u_sq, g_sq, cos = [], [], [], []
    for _ in range(eq_window):
        before, m_before = flat(), opt["m"][mask].astype(np.float64)
        (rec,) = train.train_steps(state, mcfg, cfg, corpus.train, corpus.val, 1)
        if rec.get("diverged"):
            raise RuntimeError(f"the equilibrium run diverged (wd {wd}, seed {seed})")
        lr = rec["lr"]
        u = -(flat() - (1.0 - lr * wd) * before) / lr
        # this step's (clipped) gradient from m_t = beta1 m_{t-1} + (1 - beta1) g_t, in units of sqrt(v_hat_t)
        g = (opt["m"][mask] - cfg.beta1 * m_before) / (1.0 - cfg.beta1)
        v_hat = opt["v"][mask].astype(np.float64) / (1.0 - cfg.beta2 ** opt["t"])
        p_sq.append(float(np.mean(before ** 2)))
        u_sq.append(float(np.mean(u ** 2)))
        g_sq.append(float(np.mean((g / (np.sqrt(v_hat) + cfg.eps)) ** 2)))
        cos.append(float(before @ u / (np.linalg.norm(before) * np.linalg.norm(u))))
    rms_p, rms_u, rms_g = (math.sqrt(np.mean(x)) for x in (p_sq, u_sq, g_sq))
    c = float(np.mean(cos))
    return {"rms": rms_p, "update_rms": rms_u, "cos": c, "grad_rms": rms_g,
            "predicted": decay_equilibrium_rms(EQ_LR, wd, rms_u),  # each step's update uncorrelated with p
            "walk": decay_equilibrium_rms(EQ_LR, wd, rms_g),  # a random walk of the normalised gradients
            "balance": decay_balance_rms(EQ_LR, wd, rms_u, c)}  # with the measured correlation


def part_equilibrium(corpus):
    t0 = time.perf_counter()
    values = {}
    for i, wd in enumerate(EQ_WD):
        runs = {seed: equilibrium_run(corpus, wd, seed) for seed in progress(seeds_now(), desc=f"equilibrium, wd {wd}", unit="seed")}
        key = f"ch5.equilibrium.wd{i}"
        values[f"{key}.wd"] = wd
        for field in ("rms", "update_rms", "grad_rms", "cos", "predicted", "walk", "balance"):
            values.update(arm(f"{key}.{field}", {s: r[field] for s, r in runs.items()}))
        values.update(arm(f"{key}.ratio", {s: r["rms"] / r["predicted"] for s, r in runs.items()}))
        values.update(arm(f"{key}.walk_ratio", {s: r["rms"] / r["walk"] for s, r in runs.items()}))
        values.update(arm(f"{key}.balance_ratio", {s: r["rms"] / r["balance"] for s, r in runs.items()}))
    values.update({"ch5.equilibrium.lr": EQ_LR, "ch5.equilibrium.steps": scaled(EQ_STEPS, SMALL["eq_steps"]),
                   "ch5.equilibrium.window": scaled(EQ_WINDOW, SMALL["eq_window"])})
    return {"values": values, "timings": {"ch5.equilibrium.seconds": time.perf_counter() - t0}}


def part_adam_decay(corpus):
    """Adam's and AdamW's sweeps and the decay study, in one task: the decay study's no-decay arm and
    its AdamW arm at 0.1 are the sweeps' Adam and AdamW at DECAY_LR, so they are run once."""
    cache, out = {}, {"values": {}, "curves": {}, "settings": {}, "timings": {}}
    for part in (sweep_part(corpus, "adam", cache), sweep_part(corpus, "adamw", cache), part_decay(corpus, cache)):
        for section, entries in part.items():
            out[section].update(entries)
    return out


PARTS = ["part_sgd", "part_momentum", "part_adam_decay", "part_muon", "part_equilibrium"]


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


def derived(corpus):
    """Build-time figures: optimiser state per parameter, the valley's theory, Adam's first steps,
    and what three seeds can say about a standard deviation."""
    from pylib import evaluation, model, muon
    from pylib.studies import adam_trace, optim_state, quadratic
    lo, hi = muon.ns_singular_value_band(NS_BAND_FROM)
    sd_lo, sd_hi = sd_interval_factors(len(SEEDS))
    init = model.init_params(dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size), 0)
    return {**optim_state.derived_values(), **quadratic.derived_values(), **adam_trace.derived_values(),
            "ch5.ns.band_from": NS_BAND_FROM, "ch5.ns.band_lo": lo, "ch5.ns.band_hi": hi,
            "ch5.ns.steps": muon.NS_STEPS, "ch5.muon.momentum": muon.MOMENTUM, "ch5.muon.rms": muon.RMS_MATCH,
            "ch5.comparison.momentum": SWEEP["momentum"][0]["momentum"],
            "ch5.comparison.momentum_gain": 1.0 / (1.0 - SWEEP["momentum"][0]["momentum"]),
            "ch5.comparison.weight_decay": sweep_config("adamw", 1.0, 0).weight_decay,
            "ch5.comparison.eval_windows": EVAL_WINDOWS,
            "ch5.sd_interval.lo": sd_lo, "ch5.sd_interval.hi": sd_hi,
            "ch5.init_rms": decayed_rms(init),
            "ch5.val_windows": len(evaluation.full_windows(corpus.val, model.GPTConfig().block_size)[0]),
            "ch5.margin": MARGIN,
            # relaxation time 1 / (2 lr wd) of the mean square under decoupled decay (pylib.studies.optim_state)
            "ch5.relax.decay": 1.0 / (2.0 * DECAY_LR * sweep_config("adamw", 1.0, 0).weight_decay),
            "ch5.relax.eq0": 1.0 / (2.0 * EQ_LR * EQ_WD[0]), "ch5.relax.eq1": 1.0 / (2.0 * EQ_LR * EQ_WD[1]), "ch5.adam.beta1": sweep_config("adamw", 1.0, 0).beta1,
            "ch5.c_attn_rows": 3 * model.GPTConfig().n_embd, "ch5.c_attn_cols": model.GPTConfig().n_embd}


def markdown(results):
    """results.md's section for chapter 5."""
    v = results["values"]
    if "ch5.seeds" not in v:
        return []
    sweep = results["settings"]["ch5.sweep.sgd"]
    seeds = sorted(map(int, v["ch5.best.sgd.final_val.per_seed"]), key=int)
    on = EVAL_FULL if sweep["final"] == "whole validation split" else sweep["final"]
    on_short = "the whole validation split" if sweep["final"] == "whole validation split" else sweep["final"]
    batch = f"batch {sweep['batch_size']}" if "batch_size" in sweep else "batch"
    lines = ["## Chapter 5: optimisers",
             "",
             f"Default model and {batch}, {v['ch5.steps']} steps (warmup 20, cosine), seeds "
             f"{', '.join(map(str, seeds))}; final loss on {on}, mean ± sample sd. A rate whose run "
             "diverged in any seed is not a candidate for the best. Paired comparisons: a − b over seeds, "
             f"95% t-interval, margin {MARGIN} nats for a null result.",
             "",
             "| optimiser | " + " | ".join(f"rate {k + 1}" for k in range(N_RATES)) + " | best rate |",
             "| --- | " + "--- | " * N_RATES + "--- |"]
    for name in SWEEP:
        if f"ch5.best.{name}.lr" not in v:
            continue
        cells = [f"{v[f'ch5.sweep.{name}.lr{k}.lr']:g}: {v[f'ch5.sweep.{name}.lr{k}.cell']}" for k in range(N_RATES)]
        lines.append(f"| {v[f'ch5.label.{name}']} | " + " | ".join(cells) + f" | {v[f'ch5.best.{name}.lr']:g} |")
    pairs = [("momentum", "sgd"), ("adam", "momentum"), ("adamw", "momentum"), ("adamw", "adam"), ("muon", "adamw")]
    lines += ["", "| at each best rate | paired difference |", "| --- | --- |"]
    for a, b in pairs:
        ka, kb = f"ch5.best.{a}.final_val", f"ch5.best.{b}.final_val"
        if f"{ka}.per_seed" in v and f"{kb}.per_seed" in v:
            lines.append(f"| {a} − {b} | {paired_text(v, ka, kb, MARGIN)} |")
    for name in MORE_SEEDS_FOR:
        if f"ch5.best.{name}.more.final_val.per_seed" in v:
            lines.append(f"| {name}: best rate, {v[f'ch5.best.{name}.more.final_val.n']} seeds | "
                         f"{v[f'ch5.best.{name}.more.final_val.mean']:.4f} ± {v[f'ch5.best.{name}.more.final_val.sd']:.4f} |")
    if all(f"ch5.best.{n}.more.final_val.per_seed" in v for n in ("momentum", "sgd")):
        lines.append(f"| momentum − sgd, {v['ch5.best.momentum.more.final_val.n']} seeds | "
                     f"{paired_text(v, 'ch5.best.momentum.more.final_val', 'ch5.best.sgd.more.final_val', MARGIN)} |")
    for name in SWEEP:
        for side in ("below", "above"):
            k = f"ch5.best.{name}.{side}.final_val"
            if f"{k}.per_seed" in v:
                lines.append(f"| {name}: best − the rate {side} | {paired_text(v, f'ch5.best.{name}.final_val', k, MARGIN)} |")
    if "ch5.decay.lr" in v:
        lines += ["", f"Weight decay at rate {v['ch5.decay.lr']:g} (final loss on {on_short}; "
                      "RMS of the decayed weights):", "",
                  "| method | coefficient | final loss | RMS |", "| --- | --- | --- | --- |",
                  f"| none | 0 | {v['ch5.decay.none.final_val.mean']:.4f} ± {v['ch5.decay.none.final_val.sd']:.4f} | "
                  f"{v['ch5.decay.none.rms.mean']:.4f} |"]
        for method, grid in DECAY_GRID.items():
            for i in range(len(grid)):
                key = f"ch5.decay.{method}.wd{i}"
                rms = v[f"{key}.rms.mean"]
                lines.append(f"| {method} | {v[f'{key}.wd']:g} | {v[f'{key}.cell']} | "
                             f"{'–' if rms is None else f'{rms:.4f}'} |")
        lines += ["", "| at each method's best coefficient | paired difference |", "| --- | --- |",
                  f"| adamw − adam_l2 | {paired_text(v, 'ch5.decay.adamw.best.final_val', 'ch5.decay.adam_l2.best.final_val', MARGIN)} |",
                  f"| adamw − none | {paired_text(v, 'ch5.decay.adamw.best.final_val', 'ch5.decay.none.final_val', MARGIN)} |",
                  f"| adam_l2 − none | {paired_text(v, 'ch5.decay.adam_l2.best.final_val', 'ch5.decay.none.final_val', MARGIN)} |"]
        n6 = v["ch5.decay.none.more.final_val.n"]
        lines += [f"| adamw − adam_l2, {n6} seeds | {paired_text(v, 'ch5.decay.adamw.best.more.final_val', 'ch5.decay.adam_l2.best.more.final_val', MARGIN)} |",
                  f"| adamw − none, {n6} seeds | {paired_text(v, 'ch5.decay.adamw.best.more.final_val', 'ch5.decay.none.more.final_val', MARGIN)} |",
                  f"| adam_l2 − none, {n6} seeds | {paired_text(v, 'ch5.decay.adam_l2.best.more.final_val', 'ch5.decay.none.more.final_val', MARGIN)} |"]
    if "ch5.equilibrium.lr" in v:
        lines += ["", f"Equilibrium of decoupled decay (AdamW, constant rate {v['ch5.equilibrium.lr']:g} after warmup, "
                      f"last {v['ch5.equilibrium.window']} of {v['ch5.equilibrium.steps']} steps):", "",
                  "| coefficient | RMS of weights | update RMS | cos(p, u) | walk of u | measured / it | "
                  "RMS of g/sqrt(v) | walk of g/sqrt(v) | measured / it | balance with cos | measured / it |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for i in range(len(EQ_WD)):
            key = f"ch5.equilibrium.wd{i}"
            lines.append(f"| {v[f'{key}.wd']:g} | {v[f'{key}.rms.mean']:.4f} | {v[f'{key}.update_rms.mean']:.4f} | "
                         f"{v[f'{key}.cos.mean']:+.3f} | {v[f'{key}.predicted.mean']:.4f} | "
                         f"{v[f'{key}.ratio.mean']:.2f} ± {v[f'{key}.ratio.sd']:.2f} | {v[f'{key}.grad_rms.mean']:.3f} | "
                         f"{v[f'{key}.walk.mean']:.4f} | {v[f'{key}.walk_ratio.mean']:.3f} ± {v[f'{key}.walk_ratio.sd']:.3f} | "
                         f"{v[f'{key}.balance.mean']:.4f} | "
                         f"{v[f'{key}.balance_ratio.mean']:.3f} ± {v[f'{key}.balance_ratio.sd']:.3f} |")
    return lines + [""]
