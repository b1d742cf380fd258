"""Chapter 8's experiments: stability.

1. Attention-logit growth at a high learning rate (SETTINGS_ATTN): a 2-layer model, n_embd 32,
   4 heads, constant lr ATTN["lr"] after a short warmup, with and without QK-norm, with and without
   z-loss; every ATTN["stats_interval"] steps the largest |attention logit| and the mean attention
   entropy per layer, and the output's log Z (mean |log Z| and mean signed log Z), on
   ATTN["stats_windows"] fixed validation windows (pylib.studies.stability). At the end: the loss on
   the whole validation split (pylib.evaluation; every setting but "both", for the time it costs),
   each layer group's weight norm, and the fraction
   of dead MLP units on DIAG_WINDOWS fixed validation windows.
2. One bad batch (SETTINGS_BAD): the default model for BAD["steps"] steps; at step BAD["inject_step"] the
   batch is replaced by one made of a single repeated token (pylib.studies.stability.repeated_token_batch),
   for 1 step or for BAD["repeats"] consecutive steps; no cure (no clipping), clipping at 1.0, or
   outlier skipping. Each run is compared with the same seed and setting without the bad batch
   (identical clean batches): spike height, recovery steps, grad-norm ratio, clipped fraction (all
   on the training batches' losses), and the final loss on the whole validation split (the clean
   runs and the bad stretches; the single bad batch only without a cure). Without a cure, the
   weight norm of each layer group and the dead MLP units before and after, clean and bad.
3. The optimisation-driven spike: the default model at BAD["lr_spike"], no bad batch, no clipping.

Every per-seed quantity is stored as an arm (experiments.common.arm: key.per_seed, .mean, .sd, .n)
so that the chapter compares arms paired by seed (pylib.compare). Three seeds each
(experiments.common.SEEDS), and MORE_SEEDS besides for z-loss against none on layer 0's largest
attention logit, which three seeds could not resolve, and for QK-norm against none on the final loss,
whose three-seed verdict sat at the edge (its interval ended at -0.005); everything is deterministic. PARTS run as
separate tasks.

Budget (OPENBLAS_NUM_THREADS=1, this machine): a 2x32 step at B = 8 ~8.5 ms, its whole-split
evaluation ~3.3 s; a default step (B = 16) ~3 ms, its whole-split evaluation ~0.8 s.
  attention:  4 settings x 3 seeds x (150 steps + stats) ~ 13 s, + 9 evaluations ~ 30 s (not "both")
  bad batch:  3 cures x 3 runs x 3 seeds x 300 steps ~ 25 s, + 21 evaluations ~ 17 s
  more seeds: baseline, z-loss and QK-norm, seeds MORE_SEEDS: 15 runs ~ 20 s, + 10 evaluations ~ 33 s
    (baseline and QK-norm only)
  lr spike:   3 runs diverging within ~40 steps ~ 1 s
"""

import dataclasses
import time

import numpy as np

from experiments.common import (REDUCED_EVAL, SEEDS, arm, final_val, paired_text, progress, rounded, run_parts, scaled,
                                 val_tokens)

from pylib import guards
from pylib.studies import stability

ATTN, BAD = stability.ATTN, stability.BAD  # the settings live in pylib: the page re-runs them
ATTN_SETTINGS = {  # name: (qk_norm, z_loss)
    "baseline": (False, 0.0),
    "qk_norm": (True, 0.0),
    "z_loss": (False, ATTN["z_loss"]),
    "qk_norm_z_loss": (True, ATTN["z_loss"]),
}
SCORED = ("baseline", "qk_norm", "z_loss")  # whole-split final loss (3.3 s a run); "both" is shown for its statistics only
MORE_SEEDS = (3, 4, 5, 6, 7)  # z-loss against none on layer 0's largest logit; QK-norm against none on the final loss
MORE_SEEDS_SCORED = ("baseline", "qk_norm")  # their extra seeds are scored on the whole split too
MARGIN = 0.02  # nats: the loss difference below which two arms count as the same (chosen before measuring)

# The notebook's reduced size (experiments.common.small_size): two seeds and one more; the attention runs
# 20 steps at batch 4; the bad-batch runs 40 steps at batch 4 with the bad batch at step 20 (the grad-norm ratio needs
# the NORM_WINDOW steps before it); the final losses on the validation split's first 64 windows instead of
# all of them (a whole-split pass costs more than a short run). The lr-spike runs are as measured (they stop
# where they diverge).
SMALL = {"seeds": (0, 1), "more_seeds": (2,), "attn_steps": 20, "attn_batch": 4, "bad_steps": 40, "inject_step": 20,
         "bad_batch": 4, "val_windows": 64}


def seeds_now():
    """SEEDS, or SMALL's seeds at the reduced size."""
    return scaled(SEEDS, SMALL["seeds"])


def more_seeds_now():
    """MORE_SEEDS, or SMALL's at the reduced size."""
    return scaled(MORE_SEEDS, SMALL["more_seeds"])


def bad_now():
    """stability.BAD, with SMALL's steps and injection step at the reduced size."""
    return scaled(BAD, {**BAD, "steps": SMALL["bad_steps"], "inject_step": SMALL["inject_step"]})


def val_split(corpus, block_size):
    """The validation tokens the final losses are scored on: the whole split, or its first
    SMALL["val_windows"] windows at the reduced size."""
    return val_tokens(corpus.val, SMALL["val_windows"] * block_size + 1)


def attn_configs(vocab_size, qk_norm=False, z_loss=0.0, seed=0):
    """stability.attn_configs, with SMALL's steps and batch at the reduced size."""
    mcfg, tcfg = stability.attn_configs(vocab_size, qk_norm, z_loss, seed)
    return mcfg, scaled(tcfg, dataclasses.replace(tcfg, steps=SMALL["attn_steps"], batch_size=SMALL["attn_batch"]))


def bad_configs(vocab_size, cure="none", seed=0):
    """stability.bad_configs, with SMALL's steps and batch at the reduced size."""
    mcfg, tcfg = stability.bad_configs(vocab_size, cure, seed)
    return mcfg, scaled(tcfg, dataclasses.replace(tcfg, steps=SMALL["bad_steps"], batch_size=SMALL["bad_batch"]))


def diag_windows(corpus, block_size):
    from pylib import data
    return data.eval_windows(corpus.val, stability.DIAG_WINDOWS, block_size)[0]


def diagnostics(params, cfg, x):
    """{group key: weight norm} and {"dead_{l}": fraction of dead MLP units} of one model."""
    norms = stability.layer_weight_norms(params, cfg)
    out = {f"weight_norm.{stability.group_key(g)}": n for g, n in zip(stability.layer_names(cfg), norms)}
    out.update({f"dead_{l}": d for l, d in enumerate(stability.dead_units(params, cfg, x))})
    return out


def attention_run(corpus, qk_norm, z_loss, seed, final_eval=True):
    """One high-lr run: (stats rows every stats_interval steps, history, diagnostics at init and at the end)."""
    from pylib import data, train
    mcfg, tcfg = attn_configs(corpus.vocab.size, qk_norm, z_loss, seed)
    tcfg = dataclasses.replace(tcfg, final_eval=final_eval)
    val = val_split(corpus, mcfg.block_size)
    x, _ = data.eval_windows(corpus.val, ATTN["stats_windows"], mcfg.block_size)
    xd = diag_windows(corpus, mcfg.block_size)
    state = train.init_train_state(mcfg, tcfg)
    diag = {"init": diagnostics(state["params"], mcfg, xd)}
    rows, history = [], []
    while state["step"] < tcfg.steps and not state["diverged"]:
        stats = stability.attention_stats(state["params"], mcfg, x)
        rows.append({"step": state["step"], **stats})
        history += train.train_steps(state, mcfg, tcfg, corpus.train, val, ATTN["stats_interval"])
    rows.append({"step": state["step"], **stability.attention_stats(state["params"], mcfg, x)})
    diag["final"] = diagnostics(state["params"], mcfg, xd)
    return rows, history, diag


def attention_settings(corpus, names):
    values, curves = {}, {}
    SEEDS = seeds_now()  # the constant, or SMALL's at the reduced size
    for name in names:
        qk, zl = ATTN_SETTINGS[name]
        per_seed = {seed: attention_run(corpus, qk, zl, seed, name in SCORED)
                    for seed in progress(SEEDS, desc=f"attention: {name}", unit="seed")}
        rows = {s: r for s, (r, _, _) in per_seed.items()}
        n_points = min(len(r) for r in rows.values())  # a diverged seed stops early
        steps = [row["step"] for row in rows[SEEDS[0]][:n_points]]
        curve = {"steps": steps}
        base = f"ch8.attn.{name}"
        for stat in ("max_logit", "entropy"):
            arr = np.array([[row[stat] for row in rows[s][:n_points]] for s in SEEDS])  # (seeds, points, layers)
            for l in range(arr.shape[2]):
                mean, sd = arr[:, :, l].mean(axis=0), arr[:, :, l].std(axis=0, ddof=1)
                curve[f"{stat}_{l}_mean"], curve[f"{stat}_{l}_sd"] = rounded(mean, 4), rounded(sd, 4)
                curve[f"{stat}_{l}_lo"], curve[f"{stat}_{l}_hi"] = rounded(mean - sd, 4), rounded(mean + sd, 4)  # the page's band
                values.update(arm(f"{base}.{stat}_{l}", {s: rows[s][-1][stat][l] for s in SEEDS}))
            if stat == "max_logit":
                values.update(arm(f"{base}.peak_max_logit", {s: max(max(row[stat]) for row in rows[s]) for s in SEEDS}))
            else:
                values.update(arm(f"{base}.min_entropy", {s: min(rows[s][-1][stat]) for s in SEEDS}))
        log_z = np.array([[row["log_z"] for row in rows[s][:n_points]] for s in SEEDS])  # (seeds, points)
        signed = np.array([[row["log_z_signed"] for row in rows[s][:n_points]] for s in SEEDS])
        curve["log_z_mean"], curve["log_z_signed_mean"] = rounded(log_z.mean(axis=0), 4), rounded(signed.mean(axis=0), 4)
        values.update(arm(f"{base}.log_z", {s: rows[s][-1]["log_z"] for s in SEEDS}))
        values.update(arm(f"{base}.log_z_signed", {s: rows[s][-1]["log_z_signed"] for s in SEEDS}))
        values.update(arm(f"{base}.log_z_signed_min", {s: min(row["log_z_signed"] for row in rows[s]) for s in SEEDS}))
        values.update(arm(f"{base}.log_z_signed_start", {s: rows[s][0]["log_z_signed"] for s in SEEDS}))
        values[f"{base}.log_z_lowest_at_start_runs"] = sum(  # seeds whose log Z never went below its step-0 value
            1 for s in SEEDS if min(row["log_z_signed"] for row in rows[s]) == rows[s][0]["log_z_signed"])
        values[f"{base}.diverged_runs"] = sum(1 for _, h, _ in per_seed.values() if any(r.get("diverged") for r in h))
        if name in SCORED:
            values.update(arm(f"{base}.final_val", {s: final_val(h) for s, (_, h, _) in per_seed.items()}))
        for when in ("init", "final"):
            for k in per_seed[SEEDS[0]][2][when]:
                values.update(arm(f"{base}.{when}.{k}", {s: d[when][k] for s, (_, _, d) in per_seed.items()}))
        curves[base] = curve
    return values, curves


def attn_settings_record(corpus):
    from pylib import model
    mcfg, tcfg = attn_configs(corpus.vocab.size)
    final = scaled("the whole validation split (pylib.evaluation)", REDUCED_EVAL.format(SMALL["val_windows"], "windows"))
    return {"model": ATTN["preset"], "params": model.count_params(mcfg),
            **{k: v for k, v in dataclasses.asdict(tcfg).items() if k not in ("seed", "z_loss")},
            "final_eval": f"{final}, settings {', '.join(SCORED)}",
            "stats_interval": ATTN["stats_interval"], "stats_windows": ATTN["stats_windows"],
            "diag_windows": stability.DIAG_WINDOWS,
            "settings": {k: {"qk_norm": q, "z_loss": z} for k, (q, z) in ATTN_SETTINGS.items()}}


def bad_run(corpus, cure, seed, bad_steps, final_eval):
    """One default-model run with bad batches at bad_steps: (history, diagnostics at init and at the end)."""
    from pylib import train
    mcfg, tcfg = bad_configs(corpus.vocab.size, cure, seed)
    tcfg = dataclasses.replace(tcfg, final_eval=final_eval)
    state = train.init_train_state(mcfg, tcfg)
    guards.hook_batches(state, stability.bad_batch_hook(set(bad_steps), int(corpus.vocab.encode(BAD["token"])[0][0])))
    guards.hook_grads(state, stability.grad_norm_hook(mcfg))
    xd = diag_windows(corpus, mcfg.block_size)
    diag = {"init": diagnostics(state["params"], mcfg, xd)}
    history = train.train_steps(state, mcfg, tcfg, corpus.train, val_split(corpus, mcfg.block_size), tcfg.steps)
    diag["final"] = diagnostics(state["params"], mcfg, xd)
    return history, diag


KINDS = {"clean": 0, "bad1": 1, "bad3": BAD["repeats"]}


def bad_cure(corpus, cure):
    """The clean, single and repeated bad-batch runs of one cure, over the seeds."""
    SEEDS, BAD = seeds_now(), bad_now()  # the constants, or SMALL's at the reduced size
    values, curves = {}, {}
    runs = {kind: {} for kind in KINDS}
    reports = {"bad1": {}, "bad3": {}}
    for seed in progress(SEEDS, desc=f"bad batch: {cure}", unit="seed"):
        for kind, repeats in KINDS.items():
            bad = list(range(BAD["inject_step"], BAD["inject_step"] + repeats))
            final_eval = kind != "bad1" or cure == "none"  # the whole-split loss where the text compares it
            runs[kind][seed] = bad_run(corpus, cure, seed, bad, final_eval)
            if repeats:
                h = runs[kind][seed][0]
                rep = stability.spike_report(h, runs["clean"][seed][0], bad[-1])
                rep["grad_norm_ratio"] = stability.grad_norm_ratio(h, BAD["inject_step"])
                reports[kind][seed] = rep
    for kind, reps in reports.items():
        base = f"ch8.bad.{cure}.{kind}"
        for field in ("height", "lasting_excess", "grad_norm", "grad_norm_ratio", "clipped_fraction",
                      "skipped_fraction", "recovery_steps"):
            values.update(arm(f"{base}.{field}", {s: r[field] for s, r in reps.items()}))
        values[f"{base}.recovered_runs"] = sum(1 for r in reps.values() if r["recovery_steps"] is not None)
        values[f"{base}.skipped_bad_runs"] = sum(1 for r in reps.values() if r["skipped_bad"])
        values[f"{base}.diverged_runs"] = sum(1 for r in reps.values() if r["diverged_at"] is not None)
    for kind, by_seed in runs.items():
        if "val_full" in by_seed[SEEDS[0]][0][-1]:
            values.update(arm(f"ch8.bad.{cure}.{kind}.final_val", {s: final_val(h) for s, (h, _) in by_seed.items()}))
        if cure == "none":
            for when in ("init", "final"):
                for k in by_seed[SEEDS[0]][1][when]:
                    values.update(arm(f"ch8.bad.none.{kind}.{when}.{k}", {s: d[when][k] for s, (_, d) in by_seed.items()}))
    curve = {"steps": list(range(BAD["steps"]))}
    for kind, by_seed in runs.items():
        losses = np.array([[r["loss"] for r in by_seed[s][0]] for s in SEEDS], dtype=float)  # (seeds, steps)
        mean, sd = losses.mean(axis=0), losses.std(axis=0, ddof=1)
        bad = range(BAD["inject_step"], BAD["inject_step"] + KINDS[kind])
        for name, arr in (("mean", mean), ("sd", sd), ("lo", mean - sd), ("hi", mean + sd)):  # lo, hi: the page's band
            out = rounded(arr, 4)
            for s in bad:
                out[s] = None  # the corrupted batch's own loss is not the text's
            curve[f"{kind}_{name}"] = out
    curves[f"ch8.bad.{cure}"] = curve
    if cure == "none":
        clean_norms = [r["grad_norm"] for h, _ in runs["clean"].values()
                       for r in h[BAD["inject_step"] - stability.NORM_WINDOW:BAD["inject_step"]]]
        values["ch8.bad.clean_grad_norm_median"] = float(np.median(clean_norms))
    return values, curves


def bad_settings_record(corpus):
    BAD = bad_now()  # the constant, or SMALL's at the reduced size
    final = scaled("the whole validation split (pylib.evaluation)", REDUCED_EVAL.format(SMALL["val_windows"], "windows"))
    return {"inject_step": BAD["inject_step"], "repeats": BAD["repeats"], "token": BAD["token"],
            "skip_factor": BAD["skip_factor"], "clip": BAD["clip"], "cures": list(stability.CURES),
            "final_eval": f"{final}: clean and bad3 runs, and bad1 without a cure",
            "diag_windows": stability.DIAG_WINDOWS,
            **{k: v for k, v in dataclasses.asdict(bad_configs(corpus.vocab.size)[1]).items()
               if k not in ("seed", "grad_clip", "skip_factor")}}


def lr_spike(corpus):
    """The optimisation-driven spike: no bad batch, a learning rate far too large, no clipping."""
    from pylib import train
    diverged, before = {}, {}
    for seed in seeds_now():
        mcfg, tcfg = stability.bad_configs(corpus.vocab.size, "none", seed, lr=BAD["lr_spike"])
        h = train.train(mcfg, tcfg, corpus.train, corpus.val)[1]
        diverged[seed] = next((r["step"] for r in h if r.get("diverged")), None)
        norms = [r["grad_norm"] for r in h if r.get("grad_norm") is not None and not r.get("diverged")]
        before[seed] = float(np.median(norms[-stability.PRE_SPIKE_STEPS:]))  # the steps just before it
    values = {"ch8.lr_spike.diverged_runs": sum(1 for d in diverged.values() if d is not None)}
    values.update(arm("ch8.lr_spike.diverged_at", diverged))
    values.update(arm("ch8.lr_spike.norm_before", before))
    return values


# ---------------------------------------------------------------------------
# The parts measure.py runs as separate tasks (independent of each other)

PARTS = ["part_attn", "part_attn_qk", "part_bad_none", "part_bad_clip", "part_bad_skip", "part_lr_spike"]


def _more_seeds_final_val(values, name, more):
    """The arm ch8.attn.{name}.more_seeds.final_val: the three seeds' whole-split losses and MORE_SEEDS' (more: seed -> run)."""
    return arm(f"ch8.attn.{name}.more_seeds.final_val",
               {**{int(k): v for k, v in values[f"ch8.attn.{name}.final_val.per_seed"].items()},
                **{s: final_val(run[1]) for s, run in more.items()}})


def _attn_part(corpus, names, label):
    t0 = time.perf_counter()
    values, curves = attention_settings(corpus, names)
    if "baseline" in names and "z_loss" in names:  # how many times larger z-loss left layer 0's largest logit
        values.update(arm("ch8.attn.z_loss_over_baseline.max_logit_0", {  # the three seeds
            s: values["ch8.attn.z_loss.max_logit_0.per_seed"][str(s)] / values["ch8.attn.baseline.max_logit_0.per_seed"][str(s)]
            for s in seeds_now()}))
        logit = {}
        for name in ("baseline", "z_loss"):  # three seeds cannot tell: more seeds for this comparison only
            qk, zl = ATTN_SETTINGS[name]
            # the baseline's extra seeds are also scored on the whole split: QK-norm's loss gain is paired with them
            more = {s: attention_run(corpus, qk, zl, s, final_eval=name in MORE_SEEDS_SCORED)
                    for s in progress(more_seeds_now(), desc=f"attention: {name}, more seeds", unit="seed")}
            logit[name] = {**{int(k): v for k, v in values[f"ch8.attn.{name}.max_logit_0.per_seed"].items()},
                           **{s: more[s][0][-1]["max_logit"][0] for s in more_seeds_now()}}
            values.update(arm(f"ch8.attn.{name}.more_seeds.max_logit_0", logit[name]))
            if name in MORE_SEEDS_SCORED:
                values.update(_more_seeds_final_val(values, name, more))
        values.update(arm("ch8.attn.z_loss_over_baseline.more_seeds.max_logit_0",
                          {s: logit["z_loss"][s] / logit["baseline"][s] for s in logit["baseline"]}))
    if "qk_norm" in names:  # QK-norm's loss gain sat at the edge with three seeds: more seeds for it
        qk, zl = ATTN_SETTINGS["qk_norm"]
        values.update(_more_seeds_final_val(values, "qk_norm", {s: attention_run(corpus, qk, zl, s) for s in
                                                                progress(more_seeds_now(), desc="attention: qk_norm, more seeds",
                                                                         unit="seed")}))
    settings = {"ch8.attn": attn_settings_record(corpus)} if "baseline" in names else {}  # once for the chapter
    return {"values": values, "curves": curves, "settings": settings,
            "timings": {f"ch8.attn.{label}.seconds": time.perf_counter() - t0}}


def part_attn(corpus):
    return _attn_part(corpus, ["baseline", "z_loss"], "plain")


def part_attn_qk(corpus):
    return _attn_part(corpus, ["qk_norm", "qk_norm_z_loss"], "qk")


def _bad_part(corpus, cure):
    t0 = time.perf_counter()
    values, curves = bad_cure(corpus, cure)
    settings = {"ch8.bad": bad_settings_record(corpus)} if cure == "none" else {}  # once for the chapter
    return {"values": values, "curves": curves, "settings": settings,
            "timings": {f"ch8.bad.{cure}.seconds": time.perf_counter() - t0}}


def part_bad_none(corpus):
    out = _bad_part(corpus, "none")
    out["values"]["ch8.seeds"] = len(seeds_now())
    return out


def part_bad_clip(corpus):
    return _bad_part(corpus, "clip")


def part_bad_skip(corpus):
    return _bad_part(corpus, "skip")


def part_lr_spike(corpus):
    t0 = time.perf_counter()
    return {"values": lr_spike(corpus), "timings": {"ch8.lr_spike.seconds": time.perf_counter() - t0}}


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


def derived(corpus):
    """The settings the chapter and its widgets quote, and the NaN demonstrations' inputs."""
    from pylib import model, train
    from pylib.studies import stability
    from pylib.web import stability_ops as web_stability
    return {
        "ch8.attn_lr": ATTN["lr"],
        "ch8.attn_lr_ratio": ATTN["lr"] / train.TrainConfig().lr,
        "ch8.attn_steps": ATTN["steps"],
        "ch8.attn_batch": ATTN["batch_size"],
        "ch8.attn_params": model.count_params(stability.attn_configs(corpus.vocab.size)[0]),
        "ch8.uniform_entropy": stability.uniform_attention_entropy(model.GPTConfig().block_size),
        "ch8.bad_steps": BAD["steps"],
        "ch8.inject_step": BAD["inject_step"],
        "ch8.bad_repeats": BAD["repeats"],
        "ch8.skip_factor": BAD["skip_factor"],
        "ch8.clip": BAD["clip"],
        "ch8.bad_token_name": "space" if BAD["token"] == " " else BAD["token"],
        "ch8.z_loss": ATTN["z_loss"],
        "ch8.stats_interval": ATTN["stats_interval"],
        "ch8.stats_windows": ATTN["stats_windows"],
        "ch8.attn_layers": stability.attn_configs(corpus.vocab.size)[0].n_layer,
        "ch8.attn_width": stability.attn_configs(corpus.vocab.size)[0].n_embd,
        "ch8.attn_heads": stability.attn_configs(corpus.vocab.size)[0].n_head,
        "ch8.attn_warmup": ATTN["warmup_steps"],
        "ch8.default_lr": train.TrainConfig().lr,
        "ch8.warmup_steps": train.TrainConfig().warmup_steps,
        "ch8.beta2": train.TrainConfig().beta2,
        "ch8.lr_spike": BAD["lr_spike"],
        "ch8.lr_spike_ratio": BAD["lr_spike"] / train.TrainConfig().lr,
        "ch8.recovery_tolerance": stability.RECOVERY["tolerance"],
        "ch8.recovery_window": stability.RECOVERY["window"],
        "ch8.lasting_tail": stability.RECOVERY["tail"],
        "ch8.norm_window": stability.NORM_WINDOW,
        "ch8.diag_windows": stability.DIAG_WINDOWS,
        "ch8.mlp_units": 4 * model.GPTConfig().n_embd,
        "ch8.attn_mlp_units": 4 * stability.attn_configs(corpus.vocab.size)[0].n_embd,
        "ch8.margin": MARGIN,
        "ch8.pre_spike_steps": stability.PRE_SPIKE_STEPS,
        "ch8.logit_max": web_stability.LIMITS["logit_max"],  # the page's input limits
        "ch8.widget_lr_max": web_stability.LIMITS["lr_max"],
        "ch8.skip_factor_min": web_stability.LIMITS["skip_factor_min"],
        "ch8.float16_max": float(np.finfo(np.float16).max),
        "ch8.float32_log_underflow": float(-np.log(np.finfo(np.float32).smallest_subnormal)),
        "ch8.float32_exp_limit": float(np.log(np.finfo(np.float32).max)),
    }


def markdown(results):
    """results.md's section for chapter 8."""
    from experiments.common import EVAL_FULL
    v, st = results["values"], results["settings"]
    # what the results were measured with: the constants, or SMALL's if they are the reduced size
    small = "reduced size" in st["ch8.attn"]["final_eval"]
    on, ws = (REDUCED_EVAL.format(SMALL["val_windows"], "windows"), "reduced split") if small else (EVAL_FULL, "whole split")
    seeds = sorted(map(int, v["ch8.attn.baseline.final_val.per_seed"]))
    attn_steps, BAD = st["ch8.attn"]["steps"], {**stability.BAD, **st["ch8.bad"]}
    bad_batch = f" (batch {st['ch8.bad']['batch_size']})" if small else ""

    def pm(k, f=".3f"):
        return f"{v[k + '.mean']:{f}} ± {v[k + '.sd']:{f}}" if v.get(k + ".mean") is not None else "–"

    def cmp(a, b, margin=0.0, fmt="+.3f"):
        return paired_text(v, a, b, margin, fmt) if f"{a}.per_seed" in v and f"{b}.per_seed" in v else "–"

    lines = ["## Chapter 8: stability", "",
             f"Attention at lr {ATTN['lr']} (constant after {ATTN['warmup_steps']} warmup steps), "
             f"{ATTN['preset']}, B = {st['ch8.attn']['batch_size']}, {attn_steps} steps; attention statistics and log Z on "
             f"{ATTN['stats_windows']} fixed validation windows; final validation loss on {on}; dead MLP units "
             f"(pre-activation never above 0) on {stability.DIAG_WINDOWS} fixed validation windows. Mean ± sd over "
             f"seeds {', '.join(map(str, seeds))}.", "",
             "| setting | peak max logit | final max logit L0 / L1 | min final entropy | final mean abs log Z "
             f"| final mean log Z (lowest on the way) | final val ({ws}) | dead units L0 / L1 | diverged |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in ATTN_SETTINGS:
        b = f"ch8.attn.{name}"
        lines.append(f"| {name} | {pm(b + '.peak_max_logit', '.1f')} | {pm(b + '.max_logit_0', '.1f')} / "
                     f"{pm(b + '.max_logit_1', '.1f')} | {pm(b + '.min_entropy')} | {pm(b + '.log_z')} | "
                     f"{pm(b + '.log_z_signed')} ({pm(b + '.log_z_signed_min')}) | {pm(b + '.final_val')} | "
                     f"{pm(b + '.final.dead_0')} / {pm(b + '.final.dead_1')} | {v.get(b + '.diverged_runs', '–')} |")
    lines += ["", "Paired by seed (a − b, 95% t-interval; losses with a ±{:g}-nat margin for a null result):".format(MARGIN), ""]
    pairs = [("qk_norm", "baseline", "final_val", MARGIN), ("qk_norm", "baseline", "more_seeds.final_val", MARGIN),
             ("qk_norm", "baseline", "max_logit_0", 0.0),
             ("qk_norm", "baseline", "entropy_0", 0.0), ("z_loss", "baseline", "final_val", MARGIN),
             ("z_loss", "baseline", "max_logit_0", 0.0), ("z_loss", "baseline", "more_seeds.max_logit_0", 0.0),
             ("z_loss", "baseline", "log_z", 0.0),
             ("z_loss", "baseline", "log_z_signed", 0.0), ("qk_norm_z_loss", "qk_norm", "entropy_0", 0.0)]
    for a, b, stat, margin in pairs:
        lines.append(f"- {a} − {b}, {stat}: {cmp(f'ch8.attn.{a}.{stat}', f'ch8.attn.{b}.{stat}', margin)}")
    lines.append(f"- z_loss / baseline, layer 0's final max logit, seeds 0-{v['ch8.attn.z_loss_over_baseline.more_seeds.max_logit_0.n'] - 1}: "
                 f"{pm('ch8.attn.z_loss_over_baseline.more_seeds.max_logit_0', '.2f')}")
    groups = [k[len("ch8.attn.baseline.final.weight_norm."):-len(".mean")] for k in sorted(v)
              if k.startswith("ch8.attn.baseline.final.weight_norm.") and k.endswith(".mean")]
    lines += ["", "Weight norm per layer group (attention runs), at initialisation and at the end:", "",
              "| group | init | " + " | ".join(ATTN_SETTINGS) + " |", "| --- | --- | " + " | ".join("---" for _ in ATTN_SETTINGS) + " |"]
    for g in groups:
        lines.append(f"| {g} | {pm('ch8.attn.baseline.init.weight_norm.' + g, '.2f')} | "
                     + " | ".join(pm(f"ch8.attn.{n}.final.weight_norm.{g}", ".2f") for n in ATTN_SETTINGS) + " |")
    tail = min(stability.RECOVERY["tail"], BAD["steps"] - BAD["inject_step"] - 1)  # spike_report's, in a short run
    lines += ["", f"One bad batch: default model{bad_batch}, {BAD['steps']} steps, every input and target a space "
              f"({BAD['token']!r}) at step {BAD['inject_step']} (1 step, or {BAD['repeats']} steps in a row); each run "
              f"compared with its clean twin on the training batches' losses; final loss on {on}. "
              f"Median clean grad norm before the injection: {v.get('ch8.bad.clean_grad_norm_median', float('nan')):.3f}.", "",
              f"| cure | bad steps | spike height (nats) | recovery steps (recovered runs) | excess over the last {tail} steps "
              f"| grad norm / median | clipped fraction | skipped fraction | final val ({ws}) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cure in stability.CURES:
        lines.append(f"| {cure} | 0 | | | | | | | {pm(f'ch8.bad.{cure}.clean.final_val')} |")
        for kind, n in (("bad1", 1), ("bad3", BAD["repeats"])):
            b = f"ch8.bad.{cure}.{kind}"
            lines.append(f"| {cure} | {n} | {pm(b + '.height')} | {pm(b + '.recovery_steps', '.1f')} "
                         f"({v.get(b + '.recovered_runs', '–')}) | {pm(b + '.lasting_excess')} | {pm(b + '.grad_norm_ratio', '.1f')} | "
                         f"{pm(b + '.clipped_fraction', '.4f')} | {pm(b + '.skipped_fraction', '.4f')} | {pm(b + '.final_val')} |")
    lines += ["", "Paired by seed:", ""]
    for kind in ("bad1", "bad3"):
        for a, b in (("clip", "none"), ("skip", "none"), ("skip", "clip")):
            lines.append(f"- spike height, {kind}, {a} − {b}: {cmp(f'ch8.bad.{a}.{kind}.height', f'ch8.bad.{b}.{kind}.height')}")
    for cure in stability.CURES:
        for kind in ("bad1", "bad3"):
            a = f"ch8.bad.{cure}.{kind}.final_val"
            if f"{a}.per_seed" in v:
                lines.append(f"- final val ({ws}), {cure}, {kind} − clean: "
                             f"{cmp(a, f'ch8.bad.{cure}.clean.final_val', MARGIN)}")
    groups = [k[len("ch8.bad.none.clean.final.weight_norm."):-len(".mean")] for k in sorted(v)
              if k.startswith("ch8.bad.none.clean.final.weight_norm.") and k.endswith(".mean")]
    lines += ["", "Without a cure: weight norm per layer group and dead MLP units, at initialisation and at the end:", "",
              "| | init | clean | 1 bad | 3 bad |", "| --- | --- | --- | --- | --- |"]
    for g in groups + ["dead_0"]:
        k = g if g.startswith("dead") else f"weight_norm.{g}"
        lines.append(f"| {g} | {pm('ch8.bad.none.clean.init.' + k, '.3f')} | "
                     + " | ".join(pm(f"ch8.bad.none.{kind}.final.{k}", ".3f") for kind in KINDS) + " |")
    lines += ["", f"Learning rate {BAD['lr_spike']} (no bad batch, no clipping): diverged in "
              f"{v.get('ch8.lr_spike.diverged_runs', '–')} of {len(v['ch8.lr_spike.diverged_at.per_seed'])} seeds, at step {pm('ch8.lr_spike.diverged_at', '.1f')}; "
              f"median grad norm of the {stability.PRE_SPIKE_STEPS} steps before: {pm('ch8.lr_spike.norm_before', '.2f')}."]
    return lines + [""]
