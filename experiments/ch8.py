"""Chapter 8's experiments: stability.

1. Attention-logit growth at a high learning rate (SETTINGS_ATTN): a 2-layer model, n_embd 32,
   4 heads, constant lr ATTN["lr"] after a short warmup, with and without QK-norm, with and without
   z-loss; every ATTN["stats_interval"] steps the largest |attention logit| and the mean attention entropy
   per layer, and the output's mean |log Z|, on fixed validation windows (pylib.studies.stability).
2. One bad batch (SETTINGS_BAD): the default model for BAD["steps"] steps; at step BAD["inject_step"] the
   batch is replaced by one made of a single repeated token (pylib.studies.stability.repeated_token_batch),
   for 1 step or for BAD["repeats"] consecutive steps; no cure (no clipping), clipping at 1.0, or
   outlier skipping. Each run is compared with the same seed and setting without the bad batch
   (identical clean batches): spike height, recovery steps, grad-norm ratio, clipped fraction.

Three seeds each (experiments.common.SEEDS); everything is deterministic.

Budget (timed with a small script, OPENBLAS_NUM_THREADS=1, on this machine): a 2x32 step at
B = 8 costs ~8.5 ms, a default step (B = 16) ~3 ms.
  attention:  4 settings x 3 seeds x 150 steps = 1,800 steps x 8.5 ms ~ 15 s (+ stats: ~1 s)
  bad batch:  3 cures x 3 runs (clean, 1 bad, 3 bad) x 3 seeds x 300 steps = 8,100 steps x 3 ms ~ 25 s
  total ~ 45 s on a quiet machine.
"""

import dataclasses
import time

import numpy as np

from experiments.common import SEEDS, mean_sd, rounded

from pylib.studies import stability

ATTN, BAD = stability.ATTN, stability.BAD  # the settings live in pylib: the page re-runs them
ATTN_SETTINGS = {  # name: (qk_norm, z_loss)
    "baseline": (False, 0.0),
    "qk_norm": (True, 0.0),
    "z_loss": (False, ATTN["z_loss"]),
    "qk_norm_z_loss": (True, ATTN["z_loss"]),
}


def attention_run(corpus, qk_norm, z_loss, seed):
    """One high-lr run; returns (stats rows every stats_interval steps, final val loss, history)."""
    from pylib import data, train
    mcfg, tcfg = stability.attn_configs(corpus.vocab.size, qk_norm, z_loss, seed)
    x, _ = data.eval_windows(corpus.val, ATTN["stats_windows"], mcfg.block_size)
    state = train.init_train_state(mcfg, tcfg)
    rows, history = [], []
    while state["step"] < tcfg.steps and not state["diverged"]:
        stats = stability.attention_stats(state["params"], mcfg, x)
        rows.append({"step": state["step"], **stats})
        history += train.train_steps(state, mcfg, tcfg, corpus.train, corpus.val, ATTN["stats_interval"])
    rows.append({"step": state["step"], **stability.attention_stats(state["params"], mcfg, x)})
    return rows, history[-1].get("val"), history


def bad_run(corpus, cure, seed, bad_steps):
    from pylib import train
    mcfg, tcfg = stability.bad_configs(corpus.vocab.size, cure, seed)
    state = train.init_train_state(mcfg, tcfg)
    state["batch_hook"] = stability.bad_batch_hook(set(bad_steps), int(corpus.vocab.encode(BAD["token"])[0][0]))
    state["grad_hook"] = stability.grad_norm_hook(mcfg)
    return train.train_steps(state, mcfg, tcfg, corpus.train, corpus.val, tcfg.steps)


def run(corpus):
    from pylib import train
    values, curves, timings = {}, {}, {}
    t0 = time.perf_counter()
    for name, (qk, zl) in ATTN_SETTINGS.items():
        per_seed = [attention_run(corpus, qk, zl, seed) for seed in SEEDS]
        rows = [r for r, _, _ in per_seed]
        rows = [r[:min(len(x) for x in rows)] for r in rows]  # a diverged seed stops early
        steps = [r["step"] for r in rows[0]]
        curve = {"steps": steps}
        for stat in ("max_logit", "entropy"):
            arr = np.array([[row[stat] for row in r] for r in rows])  # (seeds, points, layers)
            for l in range(arr.shape[2]):
                curve[f"{stat}_{l}_mean"] = rounded(arr[:, :, l].mean(axis=0), 4)
                curve[f"{stat}_{l}_sd"] = rounded(arr[:, :, l].std(axis=0, ddof=1), 4)
                for side, sign in (("lo", -1), ("hi", 1)):  # the band the page draws: mean -/+ sd
                    curve[f"{stat}_{l}_{side}"] = rounded(arr[:, :, l].mean(axis=0) + sign * arr[:, :, l].std(axis=0, ddof=1), 4)
                values[f"ch8.attn.{name}.{stat}_{l}.mean"], values[f"ch8.attn.{name}.{stat}_{l}.sd"] = \
                    mean_sd(arr[:, -1, l].tolist())
            peak = arr.max(axis=(1, 2)) if stat == "max_logit" else arr[:, -1, :].min(axis=1)
            key = "peak_max_logit" if stat == "max_logit" else "min_entropy"
            values[f"ch8.attn.{name}.{key}.mean"], values[f"ch8.attn.{name}.{key}.sd"] = mean_sd(peak.tolist())
        log_z = np.array([[row["log_z"] for row in r] for r in rows])  # (seeds, points)
        curve["log_z_mean"] = rounded(log_z.mean(axis=0), 4)
        values[f"ch8.attn.{name}.log_z.mean"], values[f"ch8.attn.{name}.log_z.sd"] = mean_sd(log_z[:, -1].tolist())
        finals = [v for _, v, _ in per_seed]
        diverged = sum(1 for _, _, h in per_seed if any(r.get("diverged") for r in h))
        values[f"ch8.attn.{name}.diverged_runs"] = diverged
        if None not in finals:
            values[f"ch8.attn.{name}.final_val.mean"], values[f"ch8.attn.{name}.final_val.sd"] = mean_sd(finals)
        curves[f"ch8.attn.{name}"] = curve
    timings["ch8.attn.seconds"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    for cure in stability.CURES:
        runs = {"clean": [], "bad1": [], "bad3": []}
        reports = {"bad1": [], "bad3": []}
        for seed in SEEDS:
            clean = bad_run(corpus, cure, seed, [])
            runs["clean"].append(clean)
            for kind, repeats in (("bad1", 1), ("bad3", BAD["repeats"])):
                bad = list(range(BAD["inject_step"], BAD["inject_step"] + repeats))
                h = bad_run(corpus, cure, seed, bad)
                runs[kind].append(h)
                rep = stability.spike_report(h, clean, bad[-1])
                rep["grad_norm_ratio"] = stability.grad_norm_ratio(h, BAD["inject_step"])
                reports[kind].append(rep)
        for kind, reps in reports.items():
            base = f"ch8.bad.{cure}.{kind}"
            for field in ("height", "lasting_excess", "grad_norm", "grad_norm_ratio", "clipped_fraction", "skipped_fraction"):
                values[f"{base}.{field}.mean"], values[f"{base}.{field}.sd"] = mean_sd([r[field] for r in reps])
            rec = [r["recovery_steps"] for r in reps]
            values[f"{base}.recovered_runs"] = sum(1 for r in rec if r is not None)
            if None not in rec:
                values[f"{base}.recovery_steps.mean"], values[f"{base}.recovery_steps.sd"] = mean_sd(rec)
            values[f"{base}.skipped_bad_runs"] = sum(1 for r in reps if r["skipped_bad"])
            values[f"{base}.diverged_runs"] = sum(1 for r in reps if r["diverged_at"] is not None)
        curve = {"steps": list(range(BAD["steps"]))}
        for kind, hs in runs.items():
            losses = np.array([[r["loss"] for r in h] for h in hs], dtype=float)  # (seeds, steps)
            mean, sd = losses.mean(axis=0), losses.std(axis=0, ddof=1)
            bad = [s for s in range(BAD["inject_step"], BAD["inject_step"] + {"clean": 0, "bad1": 1, "bad3": BAD["repeats"]}[kind])]
            for name, arr in (("mean", mean), ("sd", sd), ("lo", mean - sd), ("hi", mean + sd)):  # lo, hi: the page's band
                out = rounded(arr, 4)
                for s in bad:
                    out[s] = None  # the corrupted batch's own loss is not the text's
                curve[f"{kind}_{name}"] = out
        curves[f"ch8.bad.{cure}"] = curve
    clean_norms = [r["grad_norm"] for h in runs["clean"] for r in h[BAD["inject_step"] - stability.NORM_WINDOW:BAD["inject_step"]]]
    # The optimisation-driven spike: no bad batch, a learning rate far too large, no clipping.
    diverged, peaks = [], []
    for seed in SEEDS:
        mcfg, tcfg = stability.bad_configs(corpus.vocab.size, "none", seed, lr=BAD["lr_spike"])
        h = train.train(mcfg, tcfg, corpus.train, corpus.val)[1]
        at = next((r["step"] for r in h if r.get("diverged")), None)
        diverged.append(at)
        norms = [r["grad_norm"] for r in h if r.get("grad_norm") is not None and not r.get("diverged")]
        peaks.append(float(np.median(norms[-stability.PRE_SPIKE_STEPS:])))  # the steps just before it
    values["ch8.lr_spike.diverged_runs"] = sum(1 for d in diverged if d is not None)
    if None not in diverged:
        values["ch8.lr_spike.diverged_at.mean"], values["ch8.lr_spike.diverged_at.sd"] = mean_sd(diverged)
    values["ch8.lr_spike.norm_before.mean"], values["ch8.lr_spike.norm_before.sd"] = mean_sd(peaks)
    values["ch8.bad.clean_grad_norm_median"] = float(np.median(clean_norms))
    timings["ch8.bad.seconds"] = time.perf_counter() - t0

    from pylib import model
    values["ch8.seeds"] = len(SEEDS)
    settings = {
        "ch8.attn": {"model": ATTN["preset"],
                     "params": model.count_params(stability.attn_configs(corpus.vocab.size)[0]),
                     **{k: v for k, v in dataclasses.asdict(stability.attn_configs(corpus.vocab.size)[1]).items()
                        if k not in ("seed", "z_loss")},
                     "stats_interval": ATTN["stats_interval"], "stats_windows": ATTN["stats_windows"],
                     "settings": {k: {"qk_norm": q, "z_loss": z} for k, (q, z) in ATTN_SETTINGS.items()}},
        "ch8.bad": {"inject_step": BAD["inject_step"], "repeats": BAD["repeats"], "token": BAD["token"],
                    "skip_factor": BAD["skip_factor"], "clip": BAD["clip"], "cures": list(stability.CURES),
                    **{k: v for k, v in dataclasses.asdict(stability.bad_configs(corpus.vocab.size)[1]).items()
                       if k not in ("seed", "grad_clip", "skip_factor")}},
    }
    return {"values": values, "curves": curves, "settings": settings, "timings": timings}


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
    v = results["values"]
    pm = lambda k, f=".3f": f"{v[k + '.mean']:{f}} ± {v[k + '.sd']:{f}}" if k + ".mean" in v else "–"
    lines = ["## Chapter 8: stability", "",
             f"Attention at lr {ATTN['lr']} (constant after 10 warmup steps), decoder-2x32, B = {ATTN['batch_size']}, "
             f"{ATTN['steps']} steps; statistics on {ATTN['stats_windows']} fixed validation windows. Mean ± sd over "
             f"seeds {', '.join(map(str, SEEDS))}.", "",
             "| setting | peak max logit | final max logit L0 / L1 | min final entropy | final mean abs log Z | final val | diverged |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in ATTN_SETTINGS:
        b = f"ch8.attn.{name}"
        lines.append(f"| {name} | {pm(b + '.peak_max_logit', '.1f')} | {pm(b + '.max_logit_0', '.1f')} / "
                     f"{pm(b + '.max_logit_1', '.1f')} | {pm(b + '.min_entropy')} | {pm(b + '.log_z')} | "
                     f"{pm(b + '.final_val')} | {v[b + '.diverged_runs']} |")
    lines += ["", f"One bad batch: default model, {BAD['steps']} steps, every input and target a space "
              f"({BAD['token']!r}) at step {BAD['inject_step']} (1 step, or {BAD['repeats']} steps in a row); each run "
              f"compared with its clean twin. Median clean grad norm before the injection: "
              f"{v['ch8.bad.clean_grad_norm_median']:.3f}.", "",
              "| cure | bad steps | spike height (nats) | recovery steps (recovered runs) | excess over the last 50 steps | grad norm / median | clipped fraction | skipped fraction |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cure in stability.CURES:
        for kind, n in (("bad1", 1), ("bad3", BAD["repeats"])):
            b = f"ch8.bad.{cure}.{kind}"
            lines.append(f"| {cure} | {n} | {pm(b + '.height')} | {pm(b + '.recovery_steps', '.1f')} "
                         f"({v[b + '.recovered_runs']}) | {pm(b + '.lasting_excess')} | {pm(b + '.grad_norm_ratio', '.1f')} | "
                         f"{pm(b + '.clipped_fraction', '.4f')} | {pm(b + '.skipped_fraction', '.4f')} |")
    lines += ["", f"Learning rate {BAD['lr_spike']} (no bad batch, no clipping): diverged in "
              f"{v['ch8.lr_spike.diverged_runs']} of {len(SEEDS)} seeds, at step {pm('ch8.lr_spike.diverged_at', '.1f')}; "
              f"median grad norm of the {stability.PRE_SPIKE_STEPS} steps before: {pm('ch8.lr_spike.norm_before', '.2f')}."]
    return lines + [""]
