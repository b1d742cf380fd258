"""Chapter 3's experiments: the objective.

1. Batch x 4 against accumulation 4 (pylib.studies.objective.accumulation_pair, the settings of the page's
   widget, pylib.web.objective_ops.accum_settings), float32 and float64: the largest |loss difference|
   per seed, where and how fast the two runs' weights separate (by tensor, the key biases apart), and
   the final losses of both on the whole validation split (arms, paired by seed).
2. Accumulation with unequal microbatches: relative error of the mean of means and of the
   token-weighted accumulation against the one-big-batch gradient, on the page widget's example.
3. Multi-token prediction: the default run with and without the t+2 head (lambda = MTP_WEIGHT);
   the main head's final loss on the whole validation split, as two arms paired by seed.

derived(): the worked examples of the loss denominator, the unigram perplexity, the head's size.
"""

import dataclasses
import math
import statistics
import time

import numpy as np

from experiments.common import SEEDS, paired_text, progress, rounded, run_parts, scaled, scored_on, val_tokens

MTP_WEIGHT = 0.3  # lambda: DeepSeek-V3's weight for its first 10T tokens
GRAD_EXAMPLE_COUNTS = [64, 8, 32, 4]  # counted targets per window in each of 4 microbatches


def derived(corpus):
    from pylib import data, model
    from pylib.studies import mtp, objective
    out = {}
    for name, rows in objective.WORKED_EXAMPLES.items():
        r = objective.compare_denominators(*zip(*rows))
        out[f"ch3.example_{name}.token_weighted"] = r["token_weighted"]
        out[f"ch3.example_{name}.mean_of_means"] = r["mean_of_means"]
    out["ch3.unigram_ppl"] = math.exp(data.unigram_loss(corpus.train, corpus.val, corpus.vocab.size))
    out["ch3.mtp_head_params"] = mtp.count_mtp_params(model.GPTConfig())
    out["ch3.mtp_weight"] = MTP_WEIGHT
    from pylib.web.objective_ops import LIMITS  # the page widgets' settings, for the prose and templates
    for key in ["pretrain_steps", "windows", "rows_max", "top_k_max", "accum", "accum_batch", "accum_steps",
                "micro_counts"]:
        out[f"ch3.{key}"] = LIMITS[key]
    out["ch3.accum_big_batch"] = LIMITS["accum"] * LIMITS["accum_batch"]
    out["ch3.tau_log10_min"] = round(math.log10(LIMITS["tau_min"]), 4)  # the perplexity widget's slider
    out["ch3.tau_log10_max"] = round(math.log10(LIMITS["tau_max"]), 4)
    out["ch3.grad_example_counts"] = ", ".join(map(str, GRAD_EXAMPLE_COUNTS))
    return out


FIRST_STEPS = 10  # "the first steps": before the two runs' rounding differences can compound
MARGIN = 0.02  # nats: a difference in final loss smaller than this is called no difference (set in advance)
MTP_SEEDS = SEEDS  # the MTP comparison's seeds
# The notebook's reduced size (experiments.common.small_size): the accumulation pair keeps its three seeds
# (the chapter names each) but runs accum_steps steps, just past FIRST_STEPS; MTP runs two seeds of
# mtp_steps steps (its subset curves, which the chapter does not use, only at the first and last step);
# the final losses are scored on the first val_tokens tokens of the validation split.
SMALL = {"accum_steps": 12, "seeds": (0, 1), "mtp_steps": 30, "val_tokens": 32_768}


def val_split(corpus):
    """The validation stream the runs evaluate on: the whole split, or its start at the reduced size."""
    return val_tokens(corpus.val, SMALL["val_tokens"])


def accumulation_pair_trace(corpus, seed, dtype, final_eval=False):
    """Batch x 4 and accumulation 4 (the page widget's settings) in dtype, step by step.

    Returns (history_big, history_accum, diffs): diffs[t] is pylib.studies.objective.parameter_difference
    of the two runs' weights after step t's update."""
    from pylib import model, train
    from pylib.studies import objective
    from pylib.web.objective_ops import accum_settings
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    cfgs = [dataclasses.replace(tc, final_eval=final_eval, steps=scaled(tc.steps, SMALL["accum_steps"]))
            for tc in accum_settings(seed)]
    states = [objective.init_train_state(cfg, tc, dtype) for tc in cfgs]
    probes = [objective.key_bias_probe(state, cfg) for state in states]
    hb, ha, diffs = [], [], []
    val = val_split(corpus)
    for _ in range(cfgs[0].steps):
        hb += train.train_steps(states[0], cfg, cfgs[0], corpus.train, val, 1)
        ha += train.train_steps(states[1], cfg, cfgs[1], corpus.train, val, 1)
        diffs.append(objective.parameter_difference(states[0]["params"], states[1]["params"], cfg))
    return hb, ha, diffs, probes[0] + probes[1]


def burst(hb, diffs):
    """The largest one-step growth of the loss-relevant weight difference from step FIRST_STEPS on.

    Growth at step t = difference after step t's update / difference after step t-1's. Returns
    {step, growth, dloss (the batch loss of step t minus that of step t-1, batch x 4 run),
    key (the tensor holding the largest part of the difference after step t), median (the median
    growth over the same steps)}."""
    from pylib.studies import objective
    rel = [objective.loss_relevant_difference(d) for d in diffs]
    growth = {t: rel[t] / rel[t - 1] for t in range(max(FIRST_STEPS, 1), len(rel)) if rel[t - 1] > 0}
    t = max(growth, key=growth.get)
    relevant = {k: v for k, v in diffs[t].items() if not k.endswith("c_attn.bias.k")}
    return {"step": t, "growth": growth[t], "dloss": hb[t]["loss"] - hb[t - 1]["loss"],
            "key": max(relevant, key=relevant.get), "median": statistics.median(growth.values()),
            "relevant_final": rel[-1]}


def part_accumulation(corpus):
    from experiments.common import arm, final_val
    from pylib.web.objective_ops import accum_settings
    t0 = time.perf_counter()
    values, curves = {}, {}
    for dtype, tag in [(np.float32, "ch3.accum"), (np.float64, "ch3.accum.f64")]:
        overall, first, finals, medians, keybias = [], [], {"big": {}, "accum": {}}, [], []
        keygrads, keysteps = [], []  # every step of both runs of every seed (objective.key_bias_probe)
        for seed in progress(SEEDS, desc=f"accumulation pair, {np.dtype(dtype).name}", unit="seed"):
            hb, ha, diffs, probe = accumulation_pair_trace(corpus, seed, dtype, final_eval=dtype == np.float32)
            keygrads += [r["grad"] for r in probe]
            keysteps += [r["step_frac"] for r in probe]
            d = [abs(a["loss"] - b["loss"]) for a, b in zip(ha, hb)]
            overall.append(max(d))
            first.append(max(d[:FIRST_STEPS]))
            values[f"{tag}.max_abs_dloss.seed{seed}"] = max(d)
            b = burst(hb, diffs)
            for k in ("step", "growth", "dloss", "key", "relevant_final"):
                values[f"{tag}.burst.seed{seed}.{k}"] = b[k]
            values[f"{tag}.burst.seed{seed}.lr_frac"] = hb[b["step"]]["lr"] / accum_settings(seed)[0].lr
            medians.append(b["median"])
            keybias.append(diffs[-1]["h.0.attn.c_attn.bias.k"])
            if dtype == np.float32:
                finals["big"][seed], finals["accum"][seed] = final_val(hb), final_val(ha)
            if dtype == np.float32 and seed == SEEDS[0]:
                curves = {"steps": [r["step"] for r in hb], "loss_big": rounded([r["loss"] for r in hb], 7),
                          "loss_accum": rounded([r["loss"] for r in ha], 7)}
        values[f"{tag}.max_abs_dloss"] = max(overall)
        values[f"{tag}.max_abs_dloss_first"] = max(first)
        values[f"{tag}.burst.median_growth"] = statistics.median(medians)
        values[f"{tag}.keybias_final_max"] = max(keybias)
        values[f"{tag}.keybias_grad_max"] = max(keygrads)
        values[f"{tag}.keybias_grad_median"] = statistics.median(keygrads)
        values[f"{tag}.keybias_step_frac_max"] = max(keysteps)
        if dtype == np.float32:
            values.update(arm("ch3.accum.final_val_big", finals["big"]))
            values.update(arm("ch3.accum.final_val_accum", finals["accum"]))
            values["ch3.accum.max_abs_dval"] = max(abs(finals["big"][s] - finals["accum"][s]) for s in SEEDS)
    big, acc = (dataclasses.replace(tc, steps=scaled(tc.steps, SMALL["accum_steps"])) for tc in accum_settings(0))
    values["ch3.accum.first_steps"] = FIRST_STEPS
    values["ch3.accum.steps"] = big.steps
    values["ch3.accum.batch_big"] = big.batch_size
    values["ch3.accum.batch_micro"] = acc.batch_size
    values["ch3.accum.microbatches"] = acc.grad_accum
    values["ch3.accum.warmup_steps"] = big.warmup_steps
    settings = {k: v for k, v in dataclasses.asdict(acc).items() if k != "seed"}
    return {"values": values, "curves": {"ch3.accum": curves}, "settings": {"ch3.accum": settings},
            "timings": {"ch3.accum.seconds": time.perf_counter() - t0}}


def part_gradient_example(corpus):
    from pylib import data, model
    from pylib.studies import objective
    from pylib.web.objective_ops import LIMITS
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    B = LIMITS["accum_batch"]
    x, y = data.get_batch(corpus.train, B * len(GRAD_EXAMPLE_COUNTS), cfg.block_size, np.random.default_rng(0))
    r = objective.accumulation_errors(model.init_params(cfg, 0), cfg, x, y, GRAD_EXAMPLE_COUNTS)
    values = {"ch3.grad.mean_of_means_rel_err": r["mean_of_means"],
              "ch3.grad.token_weighted_rel_err": r["token_weighted"],
              "ch3.grad.counts": ", ".join(map(str, r["tokens"]))}
    return {"values": values, "settings": {"ch3.grad": {
        "counts_per_window": GRAD_EXAMPLE_COUNTS, "windows_per_microbatch": B,
        "model": "untrained, seed 0, float32", "batch_rng": "default_rng(0)"}}}


def part_mtp(corpus, lam=MTP_WEIGHT):
    """The default run with and without the t+2 head at weight lam, paired by seed."""
    from experiments.common import arm, final_val
    from pylib import model, train
    from pylib.studies import mtp
    t0 = time.perf_counter()
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    plain, with_head, seconds = {}, {}, []
    seeds, val = scaled(MTP_SEEDS, SMALL["seeds"]), val_split(corpus)
    default = train.TrainConfig()
    base = dataclasses.replace(default, steps=scaled(default.steps, SMALL["mtp_steps"]),
                               eval_interval=scaled(default.eval_interval, SMALL["mtp_steps"]))
    for seed in progress(seeds, desc=f"MTP and plain, {base.steps} steps", unit="seed"):
        tc = dataclasses.replace(base, seed=seed, final_eval=True)
        _, h0 = train.train(cfg, tc, corpus.train, val)
        t1 = time.perf_counter()
        _, h1 = mtp.train(cfg, tc, lam, corpus.train, val, corpus.vocab.eos_id)
        seconds.append(time.perf_counter() - t1)
        plain[seed], with_head[seed] = final_val(h0), final_val(h1)
    values = {**arm("ch3.mtp.val_plain", plain), **arm("ch3.mtp.val_mtp", with_head),
              "ch3.mtp.lambda": lam, "ch3.mtp.margin": MARGIN}
    settings = {k: v for k, v in dataclasses.asdict(base).items() if k != "seed"}
    return {"values": values, "settings": {"ch3.mtp": {**settings, "lambda": lam, "seeds": list(seeds)}},
            "timings": {"ch3.mtp.seconds": time.perf_counter() - t0,
                        "ch3.mtp.seconds_per_mtp_run": statistics.median(seconds)}}


PARTS = ["part_accumulation", "part_gradient_example", "part_mtp"]  # independent: measure.py may run them at once


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


def markdown(results):
    """results.md's section for chapter 3."""
    v, s = results["values"], results["settings"]
    acc = s["ch3.accum"]
    burst_rows = [f"| {kind}, seed {seed} | {v[f'{tag}.burst.seed{seed}.step']} | ×{v[f'{tag}.burst.seed{seed}.growth']:.3g} | "
                  f"{v[f'{tag}.burst.seed{seed}.lr_frac']:.2f} | {v[f'{tag}.burst.seed{seed}.dloss']:+.3f} | "
                  f"`{v[f'{tag}.burst.seed{seed}.key']}` | {v[f'{tag}.burst.seed{seed}.relevant_final']:.3g} | `{tag}.burst.seed{seed}.*` |"
                  for tag, kind in [("ch3.accum", "float32"), ("ch3.accum.f64", "float64")] for seed in SEEDS]
    return [
        "## Chapter 3: the objective",
        "",
        f"### Batch × {v['ch3.accum.microbatches']} against accumulation {v['ch3.accum.microbatches']}",
        "",
        f"One step on {v['ch3.accum.batch_big']} windows against {v['ch3.accum.microbatches']} microbatches of "
        f"{v['ch3.accum.batch_micro']} (the same windows), {v['ch3.accum.steps']} steps, other settings "
        f"{', '.join(f'{k}={x}' for k, x in sorted(acc.items()) if k not in ('batch_size', 'grad_accum', 'steps', 'final_eval'))}; "
        f"seeds {', '.join(map(str, SEEDS))}. Each pair run in float32 and again in float64 (same initial values, same windows). "
        f"Final validation losses on {scored_on(SMALL['val_tokens'])}, float32.",
        "",
        "| quantity | value | key |",
        "| --- | --- | --- |",
        *[row for tag, kind in [("ch3.accum", "float32"), ("ch3.accum.f64", "float64")] for row in [
            f"| {kind}: largest \\|Δ loss\\| over the first {v['ch3.accum.first_steps']} steps, all seeds | {v[tag + '.max_abs_dloss_first']:.3g} | `{tag}.max_abs_dloss_first` |",
            f"| {kind}: largest \\|Δ loss\\| over all steps and seeds | {v[tag + '.max_abs_dloss']:.3g} | `{tag}.max_abs_dloss` |",
            *[f"| … seed {seed} | {v[f'{tag}.max_abs_dloss.seed{seed}']:.3g} | `{tag}.max_abs_dloss.seed{seed}` |" for seed in SEEDS],
            f"| {kind}: median one-step growth of the weight difference (key biases excluded), steps ≥ {v['ch3.accum.first_steps']} | ×{v[tag + '.burst.median_growth']:.3g} | `{tag}.burst.median_growth` |",
            f"| {kind}: largest key-bias difference after the last step | {v[tag + '.keybias_final_max']:.3g} | `{tag}.keybias_final_max` |",
            f"| {kind}: largest \\|gradient\\| a key bias receives, every step of both runs, all seeds | {v[tag + '.keybias_grad_max']:.3g} | `{tag}.keybias_grad_max` |",
            f"| {kind}: median over steps of the largest key-bias \\|gradient\\| | {v[tag + '.keybias_grad_median']:.3g} | `{tag}.keybias_grad_median` |",
            f"| {kind}: largest key-bias move in one step, in units of that step's learning rate | {v[tag + '.keybias_step_frac_max']:.3g} | `{tag}.keybias_step_frac_max` |"]],
        f"| final val loss, batch × 4 | {v['ch3.accum.final_val_big.mean']:.4f} ± {v['ch3.accum.final_val_big.sd']:.4f} | `ch3.accum.final_val_big` |",
        f"| final val loss, accumulation 4 | {v['ch3.accum.final_val_accum.mean']:.4f} ± {v['ch3.accum.final_val_accum.sd']:.4f} | `ch3.accum.final_val_accum` |",
        f"| accumulation − batch × 4 (margin {MARGIN}) | {paired_text(v, 'ch3.accum.final_val_accum', 'ch3.accum.final_val_big', MARGIN, '+.4f')} | |",
        f"| largest \\|Δ final val loss\\| | {v['ch3.accum.max_abs_dval']:.3g} | `ch3.accum.max_abs_dval` |",
        "",
        f"Largest one-step growth of the weight difference (every tensor but the key biases) from step {v['ch3.accum.first_steps']} on; "
        "lr as a fraction of the peak; Δ loss = that step's batch loss minus the previous step's (batch × 4 run); "
        "the tensor holding most of the difference after that step; the difference after the last step:",
        "",
        "| run | step | growth | lr / peak | Δ loss | tensor | final difference | keys |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *burst_rows,
        "",
        "### Accumulating unequal microbatches",
        "",
        f"Untrained model (seed 0, float32), 4 microbatches of {s['ch3.grad']['windows_per_microbatch']} training "
        f"windows counting the last {', '.join(map(str, s['ch3.grad']['counts_per_window']))} targets of each window "
        f"({v['ch3.grad.counts']} tokens). Relative error ‖g − g_big‖ / ‖g_big‖ against one batch of all the windows:",
        "",
        "| reduction | relative error | key |",
        "| --- | --- | --- |",
        f"| mean of microbatch means | {v['ch3.grad.mean_of_means_rel_err']:.4g} | `ch3.grad.mean_of_means_rel_err` |",
        f"| divide by the total count | {v['ch3.grad.token_weighted_rel_err']:.3g} | `ch3.grad.token_weighted_rel_err` |",
        "",
        f"### Multi-token prediction (λ = {v['ch3.mtp.lambda']})",
        "",
        f"The default run (TrainConfig()) with and without the t+2 head, seeds {', '.join(map(str, s['ch3.mtp']['seeds']))}; "
        f"the main head's final loss on {scored_on(SMALL['val_tokens'])}.",
        "",
        "| run | final val loss | key |",
        "| --- | --- | --- |",
        f"| without MTP | {v['ch3.mtp.val_plain.mean']:.4f} ± {v['ch3.mtp.val_plain.sd']:.4f} | `ch3.mtp.val_plain` |",
        f"| with MTP | {v['ch3.mtp.val_mtp.mean']:.4f} ± {v['ch3.mtp.val_mtp.sd']:.4f} | `ch3.mtp.val_mtp` |",
        f"| with − without (margin {MARGIN}) | {paired_text(v, 'ch3.mtp.val_mtp', 'ch3.mtp.val_plain', MARGIN, '+.4f')} | |",
        "",
    ]
