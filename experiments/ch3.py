"""Chapter 3's experiments: the objective.

1. Batch x 4 against accumulation 4 (pylib.studies.objective.accumulation_pair, the settings of the page's
   widget, pylib.web.objective_ops.accum_settings): the largest |loss difference| over all steps, per
   seed, and the final validation losses of both.
2. Accumulation with unequal microbatches: relative error of the mean of means and of the
   token-weighted accumulation against the one-big-batch gradient, on the page widget's example.
3. Multi-token prediction: the default run with and without the t+2 head (lambda = MTP_WEIGHT);
   the main head's final validation loss, and the paired difference per seed.

derived(): the worked examples of the loss denominator, the unigram perplexity, the head's size.
"""

import dataclasses
import math
import statistics
import time

import numpy as np

from experiments.common import SEEDS, mean_sd, rounded

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
    out["ch3.grad_example_counts"] = ", ".join(map(str, GRAD_EXAMPLE_COUNTS))
    return out


FIRST_STEPS = 10  # "the first steps": before the two runs' rounding differences can compound


def accumulation_pair_losses(corpus, seed, dtype):
    """Per-step losses of batch x 4 and accumulation 4 (the page widget's settings), in dtype."""
    from pylib import model, train
    from pylib.studies import objective
    from pylib.web.objective_ops import accum_settings
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    histories = []
    for tc in accum_settings(seed):
        state = objective.init_train_state(cfg, tc, dtype)
        histories.append(train.train_steps(state, cfg, tc, corpus.train, corpus.val, tc.steps))
    return histories


def run_accumulation(corpus):
    from pylib.web.objective_ops import accum_settings
    values, curves = {}, {}
    for dtype, tag in [(np.float32, "ch3.accum"), (np.float64, "ch3.accum.f64")]:
        overall, first, finals = [], [], {"big": [], "accum": []}
        for seed in SEEDS:
            hb, ha = accumulation_pair_losses(corpus, seed, dtype)
            d = [abs(a["loss"] - b["loss"]) for a, b in zip(ha, hb)]
            overall.append(max(d))
            first.append(max(d[:FIRST_STEPS]))
            values[f"{tag}.max_abs_dloss.seed{seed}"] = max(d)
            finals["big"].append(hb[-1]["val"])
            finals["accum"].append(ha[-1]["val"])
            if dtype == np.float32 and seed == SEEDS[0]:
                curves = {"steps": [r["step"] for r in hb], "loss_big": rounded([r["loss"] for r in hb], 7),
                          "loss_accum": rounded([r["loss"] for r in ha], 7)}
        values[f"{tag}.max_abs_dloss"] = max(overall)
        values[f"{tag}.max_abs_dloss_first"] = max(first)
        values[f"{tag}.max_abs_dval"] = max(abs(a - b) for a, b in zip(finals["big"], finals["accum"]))
        if dtype == np.float32:
            values["ch3.accum.final_val_big.mean"], values["ch3.accum.final_val_big.sd"] = mean_sd(finals["big"])
            values["ch3.accum.final_val_accum.mean"], values["ch3.accum.final_val_accum.sd"] = mean_sd(finals["accum"])
    big, acc = accum_settings(0)
    values["ch3.accum.first_steps"] = FIRST_STEPS
    values["ch3.accum.steps"] = big.steps
    values["ch3.accum.batch_big"] = big.batch_size
    values["ch3.accum.batch_micro"] = acc.batch_size
    values["ch3.accum.microbatches"] = acc.grad_accum
    settings = {k: v for k, v in dataclasses.asdict(acc).items() if k != "seed"}
    return values, {"ch3.accum": curves}, {"ch3.accum": settings}


def run_gradient_example(corpus):
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
    return values, {"ch3.grad": {"counts_per_window": GRAD_EXAMPLE_COUNTS, "windows_per_microbatch": B,
                                 "model": "untrained, seed 0, float32", "batch_rng": "default_rng(0)"}}


def run_mtp(corpus):
    from pylib import model, train
    from pylib.studies import mtp
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    plain, with_head, seconds = [], [], []
    for seed in SEEDS:
        tc = dataclasses.replace(train.TrainConfig(), seed=seed)
        _, h0 = train.train(cfg, tc, corpus.train, corpus.val)
        t0 = time.perf_counter()
        _, h1 = mtp.train(cfg, tc, MTP_WEIGHT, corpus.train, corpus.val, corpus.vocab.eos_id)
        seconds.append(time.perf_counter() - t0)
        plain.append(h0[-1]["val"])
        with_head.append(h1[-1]["val"])
    values = {}
    values["ch3.mtp.val_plain.mean"], values["ch3.mtp.val_plain.sd"] = mean_sd(plain)
    values["ch3.mtp.val_mtp.mean"], values["ch3.mtp.val_mtp.sd"] = mean_sd(with_head)
    values["ch3.mtp.delta.mean"], values["ch3.mtp.delta.sd"] = mean_sd([b - a for a, b in zip(plain, with_head)])
    values["ch3.mtp.lambda"] = MTP_WEIGHT
    settings = {k: v for k, v in dataclasses.asdict(train.TrainConfig()).items() if k != "seed"}
    return values, {"ch3.mtp": {**settings, "lambda": MTP_WEIGHT}}, statistics.median(seconds)


def run(corpus):
    values, curves, settings, timings = {}, {}, {}, {}
    t0 = time.perf_counter()
    v, c, s = run_accumulation(corpus)
    values.update(v), curves.update(c), settings.update(s)
    timings["ch3.accum.seconds"] = time.perf_counter() - t0
    v, s = run_gradient_example(corpus)
    values.update(v), settings.update(s)
    t0 = time.perf_counter()
    v, s, per_run = run_mtp(corpus)
    values.update(v), settings.update(s)
    timings["ch3.mtp.seconds"] = time.perf_counter() - t0
    timings["ch3.mtp.seconds_per_mtp_run"] = per_run
    return {"values": values, "curves": curves, "settings": settings, "timings": timings}


def markdown(results):
    """results.md's section for chapter 3."""
    v, s = results["values"], results["settings"]
    acc = s["ch3.accum"]
    return [
        "## Chapter 3: the objective",
        "",
        f"### Batch × {v['ch3.accum.microbatches']} against accumulation {v['ch3.accum.microbatches']}",
        "",
        f"One step on {v['ch3.accum.batch_big']} windows against {v['ch3.accum.microbatches']} microbatches of "
        f"{v['ch3.accum.batch_micro']} (the same windows), {v['ch3.accum.steps']} steps, other settings "
        f"{', '.join(f'{k}={x}' for k, x in sorted(acc.items()) if k not in ('batch_size', 'grad_accum', 'steps'))}; "
        f"seeds {', '.join(map(str, SEEDS))}. Each pair run in float32 and again in float64 (same initial values, same windows).",
        "",
        "| quantity | value | key |",
        "| --- | --- | --- |",
        *[row for tag, kind in [("ch3.accum", "float32"), ("ch3.accum.f64", "float64")] for row in [
            f"| {kind}: largest \\|Δ loss\\| over the first {v['ch3.accum.first_steps']} steps, all seeds | {v[tag + '.max_abs_dloss_first']:.3g} | `{tag}.max_abs_dloss_first` |",
            f"| {kind}: largest \\|Δ loss\\| over all steps and seeds | {v[tag + '.max_abs_dloss']:.3g} | `{tag}.max_abs_dloss` |",
            *[f"| … seed {seed} | {v[f'{tag}.max_abs_dloss.seed{seed}']:.3g} | `{tag}.max_abs_dloss.seed{seed}` |" for seed in SEEDS],
            f"| {kind}: largest \\|Δ final val loss\\| | {v[tag + '.max_abs_dval']:.3g} | `{tag}.max_abs_dval` |"]],
        f"| final val loss, batch × 4 | {v['ch3.accum.final_val_big.mean']:.4f} ± {v['ch3.accum.final_val_big.sd']:.4f} | `ch3.accum.final_val_big` |",
        f"| final val loss, accumulation 4 | {v['ch3.accum.final_val_accum.mean']:.4f} ± {v['ch3.accum.final_val_accum.sd']:.4f} | `ch3.accum.final_val_accum` |",
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
        "The default run (TrainConfig()) with and without the t+2 head; the main head's final validation loss.",
        "",
        "| run | final val loss | key |",
        "| --- | --- | --- |",
        f"| without MTP | {v['ch3.mtp.val_plain.mean']:.4f} ± {v['ch3.mtp.val_plain.sd']:.4f} | `ch3.mtp.val_plain` |",
        f"| with MTP | {v['ch3.mtp.val_mtp.mean']:.4f} ± {v['ch3.mtp.val_mtp.sd']:.4f} | `ch3.mtp.val_mtp` |",
        f"| paired difference (with − without) | {v['ch3.mtp.delta.mean']:+.4f} ± {v['ch3.mtp.delta.sd']:.4f} | `ch3.mtp.delta` |",
        "",
    ]
