"""Chapter 1's experiments: the default run, and why the default learning rate is 0.01.

part_default: TrainConfig(final_eval=True) (lr 0.01, 400 steps) once per seed. Over SEEDS it gives
the chapter's figures, each an arm (key.per_seed, .mean, .sd, .n): the final validation loss on
the whole validation split (pylib.evaluation), its perplexity, the final training loss on an
equal-sized fixed sample of the training split, the gap between them, the subset-minus-whole-split
offset of the last record, where the subset curve reaches and leaves the unigram loss, and the
previous-token share of attention at the end. Its curves (subset, mean and sd per eval step) are
what the chapter-1 widget draws as its band. Over SPREAD_SEEDS it gives the lr 0.01 arm that the
old default is paired with.

part_old_default: the old default (lr 0.02, otherwise the same) over SPREAD_SEEDS: the final
validation loss on the whole split and the previous-token share at the end, per seed.
"""

import dataclasses
import math
import statistics
import time

import numpy as np

from experiments.common import SEEDS, arm, final_val, rounded, progress, run_parts, scaled

PARTS = ["part_default", "part_old_default"]

PLATEAU_MARGIN = 0.1  # nats: "at the unigram loss" means within this of it (on the subset curve)
SPREAD_SEEDS = (0, 1, 2, 3, 4)  # the old default against the new, paired by seed
OLD_LR = 0.02  # the default learning rate before this chapter's spread study
PREV_FROM = 8  # the previous-token share averages rows t >= 8 (early rows attend to few tokens anyway)
SMALL = {"seeds": (0, 1), "steps": 30}  # the notebook's reduced size (experiments.common.small_size)


def base_config(train_cfg=None, **changes):
    """train_cfg (default TrainConfig(), its steps cut to SMALL's at the reduced size) with final_eval
    and the changes."""
    from pylib import train
    cfg = train_cfg or dataclasses.replace(train.TrainConfig(), steps=scaled(train.TrainConfig().steps, SMALL["steps"]))
    return dataclasses.replace(cfg, final_eval=True, **changes)


def first_step(history, key, predicate):
    """The first eval step whose record[key] satisfies predicate, or None."""
    return next((r["step"] for r in history if r.get(key) is not None and predicate(r[key])), None)


def train_sample_windows(corpus, block_size):
    """The training side of the gap: as many evenly spaced training windows as the whole
    validation split has non-overlapping windows (pylib.data.eval_windows), fixed for every run."""
    from pylib import data, evaluation
    n_val = evaluation.full_windows(corpus.val, block_size)[0].shape[0]
    return data.eval_windows(corpus.train, n_val, block_size)


def windows_loss(params, cfg, x, y, chunk=256):
    """Mean cross-entropy over the windows x, y, in chunks (as pylib.evaluation does)."""
    from pylib import loss as xent, model
    total = 0.0
    for i in range(0, len(x), chunk):
        logits = model.forward_logits(params, cfg, x[i:i + chunk])
        total += float(xent.cross_entropy_forward(logits, y[i:i + chunk], None, 1.0)[0])
    return total / y.size


def previous_token_share(params, cfg, x):
    """The attention share on the previous token, for the head that puts the most there.

    Attention probabilities of block 0 on the windows x; for each head, the mean over windows and
    rows t >= PREV_FROM of the weight on position t - 1; the largest over heads."""
    from pylib import model
    cache = model.forward(params, cfg, x)[1]
    att = cache[3][0][1][2][3]  # block 0's attention cache -> probabilities (B, H, T, T)
    t = np.arange(PREV_FROM, att.shape[-1])
    return float(att[:, :, t, t - 1].mean(axis=(0, 2)).max())


def uniform_previous_share(block_size):
    """The previous-token share if every row attended uniformly to its t + 1 visible tokens."""
    return float(np.mean([1.0 / (t + 1) for t in range(PREV_FROM, block_size)]))


def bigram_loss(train_tokens, x, y, vocab_size):
    """Cross-entropy of the targets y given only the token before each, x, under the training
    text's character-pair counts (add-one, like pylib.data.unigram_loss): the best a model can do
    from the previous character alone, up to smoothing."""
    tr = np.asarray(train_tokens, dtype=np.int64)
    counts = np.bincount(tr[:-1] * vocab_size + tr[1:], minlength=vocab_size * vocab_size)
    counts = counts.reshape(vocab_size, vocab_size).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum(axis=1, keepdims=True))
    return float(-logp[np.asarray(x), np.asarray(y)].mean())


def derived(corpus):
    """Build-time numbers: the bigram loss on the whole validation split and on the curves'
    subset, the previous-token share of uniform attention, the residual projections' initial std,
    and the widget's band rule (pylib.web.LIMITS)."""
    from pylib import data, evaluation, model, train, web
    cfg = model.GPTConfig()
    T, V = cfg.block_size, corpus.vocab.size
    full = evaluation.full_windows(corpus.val, T)
    subset = data.eval_windows(corpus.val, train.TrainConfig().eval_windows, T)
    return {"ch1.bigram_loss": bigram_loss(corpus.train, *full, V),
            "ch1.bigram_loss_subset": bigram_loss(corpus.train, *subset, V),
            "ch1.prev_share_uniform": uniform_previous_share(T),
            "ch1.prev_from": PREV_FROM,
            "ch1.init_std": cfg.init_std,
            "ch1.c_proj_init_std": cfg.init_std / math.sqrt(2 * cfg.n_layer),  # as model.init_params
            "ch1.band_k": web.LIMITS["band_k"], "ch1.band_floor": web.LIMITS["band_floor"],
            "ch1.old_lr": OLD_LR, "ch1.spread_seeds": len(SPREAD_SEEDS)}


def _runs(corpus, train_cfg, seeds, sample_seeds=()):
    """train_cfg once per seed: {seed: (params, history, seconds)} and samples for sample_seeds."""
    from pylib import model, sample, train
    model_cfg = model.GPTConfig()
    out, samples = {}, {}
    for seed in progress(seeds, desc=f"lr {train_cfg.lr}, {train_cfg.steps} steps", unit="seed"):
        cfg = dataclasses.replace(train_cfg, seed=seed)
        t0 = time.perf_counter()
        params, history = train.train(model_cfg, cfg, corpus.train, corpus.val)
        out[seed] = (params, history, time.perf_counter() - t0)
        if seed in sample_seeds:
            prompt, _ = corpus.vocab.encode("ROMEO:\n")
            ids = sample.generate(params, model_cfg, list(prompt), 200, temperature=0.8, seed=seed)
            samples[seed] = corpus.vocab.decode(ids)
    return out, samples


def below_bigram(prefix, corpus, model_cfg, finals):
    """{prefix}.below_bigram_seeds: the seeds whose final validation loss (whole split) ended below
    the bigram loss on the whole split, as text ("none" if none), and their number."""
    from pylib import evaluation
    line = bigram_loss(corpus.train, *evaluation.full_windows(corpus.val, model_cfg.block_size), corpus.vocab.size)
    below = sorted(s for s, x in finals.items() if x < line)
    return {f"{prefix}.below_bigram_seeds": ", ".join(map(str, below)) or "none",
            f"{prefix}.below_bigram_n": len(below)}


def run_default(corpus, seeds=None, train_cfg=None, spread_seeds=None):
    """The default run (TrainConfig(final_eval=True)) once per seed in seeds | spread_seeds (default
    SEEDS and SPREAD_SEEDS, or SMALL's seeds at the reduced size)."""
    from pylib import data, model
    seeds = seeds or scaled(SEEDS, SMALL["seeds"])
    spread_seeds = spread_seeds or scaled(SPREAD_SEEDS, SMALL["seeds"])
    model_cfg = model.GPTConfig()
    base = base_config(train_cfg)
    unigram = data.unigram_loss(corpus.train, corpus.val, corpus.vocab.size)
    all_seeds = tuple(sorted(set(seeds) | set(spread_seeds)))
    runs, samples = _runs(corpus, base, all_seeds, sample_seeds=seeds[:1])
    x_train, y_train = train_sample_windows(corpus, model_cfg.block_size)
    x_sub, _ = data.eval_windows(corpus.val, base.eval_windows, model_cfg.block_size)
    values = {"ch1.unigram_loss": unigram, "ch1.ln_vocab": math.log(corpus.vocab.size),
              "ch1.default.seeds": len(seeds), "ch1.default.eval_windows": base.eval_windows,
              "ch1.default.train_windows": int(len(x_train)),
              "ch1.default.sample": samples[seeds[0]]}
    per = {name: {} for name in ["final_val", "val_ppl", "final_train", "gap", "final_val_subset", "subset_offset",
                                 "plateau_reached", "plateau_left", "prev_share"]}
    for seed in seeds:
        params, history, _ = runs[seed]
        evals = [r for r in history if r.get("val") is not None]
        last, full = history[-1], final_val(history)
        trn = windows_loss(params, model_cfg, x_train, y_train)
        per["final_val"][seed], per["val_ppl"][seed] = full, math.exp(full)
        per["final_train"][seed], per["gap"][seed] = trn, full - trn
        per["final_val_subset"][seed] = last["val"]
        per["subset_offset"][seed] = last["val"] - full
        per["plateau_reached"][seed] = first_step(evals, "val", lambda v: v < unigram + PLATEAU_MARGIN)
        per["plateau_left"][seed] = first_step(evals, "val", lambda v: v < unigram - PLATEAU_MARGIN)
        per["prev_share"][seed] = previous_token_share(params, model_cfg, x_sub)
    for name, per_seed in per.items():
        values.update(arm(f"ch1.default.{name}", per_seed))
    values.update(arm("ch1.spread.lr0_01.final_val", {s: final_val(runs[s][1]) for s in spread_seeds}))
    shares = {s: previous_token_share(runs[s][0], model_cfg, x_sub) for s in spread_seeds}
    values.update(arm("ch1.spread.lr0_01.prev_share", shares))
    values["ch1.spread.lr0_01.prev_share_min"] = min(shares.values())
    values["ch1.spread.lr0_01.prev_share_max"] = max(shares.values())
    values.update(below_bigram("ch1.spread.lr0_01", corpus, model_cfg, {s: final_val(runs[s][1]) for s in spread_seeds}))
    evals = [[r for r in runs[s][1] if r.get("val") is not None] for s in seeds]
    curves = {"steps": [r["step"] for r in evals[0]]}
    for key, name in [("train_eval", "train"), ("val", "val")]:
        per_step = np.array([[r[key] for r in e] for e in evals])  # (seeds, evals), on the subset
        curves[f"{name}_mean"] = rounded(per_step.mean(axis=0))
        curves[f"{name}_sd"] = rounded(per_step.std(axis=0, ddof=1))
    losses = np.array([[r["loss"] for r in runs[s][1]] for s in seeds])  # (seeds, steps)
    curves["loss_mean"] = rounded(losses.mean(axis=0))
    settings = {k: v for k, v in dataclasses.asdict(base).items() if k != "seed"}
    seconds = [runs[s][2] for s in all_seeds]
    return {"values": values, "curves": {"ch1.default": curves}, "settings": {"ch1.default": settings},
            "timings": {"ch1.default.seconds_per_run": statistics.median(seconds)}}


def part_default(corpus):
    return run_default(corpus)


def run_old_default(corpus, seeds=None, train_cfg=None, lr=OLD_LR):
    """The old default, lr OLD_LR (or lr) and otherwise TrainConfig(final_eval=True), once per seed
    (default SPREAD_SEEDS, or SMALL's seeds at the reduced size)."""
    from pylib import data, model
    seeds = seeds or scaled(SPREAD_SEEDS, SMALL["seeds"])
    model_cfg = model.GPTConfig()
    base = base_config(train_cfg, lr=lr)
    runs, _ = _runs(corpus, base, seeds)
    x_sub, _ = data.eval_windows(corpus.val, base.eval_windows, model_cfg.block_size)
    values = {}
    values.update(arm("ch1.spread.lr0_02.final_val", {s: final_val(runs[s][1]) for s in seeds}))
    shares = {s: previous_token_share(runs[s][0], model_cfg, x_sub) for s in seeds}
    values.update(arm("ch1.spread.lr0_02.prev_share", shares))
    top = max(shares, key=shares.get)  # the seed whose head put the most on the previous token
    others = [x for s, x in shares.items() if s != top]
    values.update({"ch1.spread.lr0_02.prev_share_top_seed": top, "ch1.spread.lr0_02.prev_share_top": shares[top],
                   "ch1.spread.lr0_02.prev_share_others_n": len(others),
                   "ch1.spread.lr0_02.prev_share_others_min": min(others),
                   "ch1.spread.lr0_02.prev_share_others_max": max(others)})
    values.update(below_bigram("ch1.spread.lr0_02", corpus, model_cfg, {s: final_val(runs[s][1]) for s in seeds}))
    settings = {k: v for k, v in dataclasses.asdict(base).items() if k != "seed"}
    return {"values": values, "curves": {}, "settings": {"ch1.spread.lr0_02": settings},
            "timings": {"ch1.spread.lr0_02.seconds_per_run": statistics.median(r[2] for r in runs.values())}}


def part_old_default(corpus):
    return run_old_default(corpus)


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


def markdown(results):
    """results.md's section for chapter 1."""
    from experiments.common import EVAL_FULL, paired_text
    v = results["values"]
    settings = results["settings"]["ch1.default"]
    seeds = sorted(map(int, v["ch1.default.final_val.per_seed"]))
    spread_seeds = sorted(map(int, v["ch1.spread.lr0_02.final_val.per_seed"]))
    lines = [
        "## Chapter 1: the default run, and the old default's spread",
        "",
        f"Settings: {', '.join(f'{k}={x}' for k, x in sorted(settings.items()))}; "
        f"seeds {', '.join(map(str, seeds))}. Mean ± sample sd over seeds (per-seed values in results.json).",
        f"Final validation losses are on {EVAL_FULL}. The training side of the gap is "
        f"{v['ch1.default.train_windows']:,} evenly spaced windows of the training split "
        f"(pylib.data.eval_windows), as many as the validation split has. Plateau steps are read from the "
        f"curve on the fixed {settings['eval_windows']}-window validation subset.",
        "",
        "| quantity | value | key |",
        "| --- | --- | --- |",
    ]
    rows = [("final validation loss (whole split)", "ch1.default.final_val"),
            ("validation perplexity (whole split)", "ch1.default.val_ppl"),
            ("final train loss (equal-sized fixed sample of the training split)", "ch1.default.final_train"),
            ("gap (val − train)", "ch1.default.gap"),
            ("final validation loss on the curves' subset (last record's val)", "ch1.default.final_val_subset"),
            ("the subset minus the whole split, per seed", "ch1.default.subset_offset"),
            ("eval step where the subset val first comes within 0.1 of the unigram loss", "ch1.default.plateau_reached"),
            ("eval step where the subset val first drops 0.1 below the unigram loss", "ch1.default.plateau_left"),
            ("previous-token share of attention at the end (top head)", "ch1.default.prev_share")]
    for label, key in rows:
        if v.get(f"{key}.mean") is not None:
            lines.append(f"| {label} | {v[key + '.mean']:.4f} ± {v[key + '.sd']:.4f} | `{key}` |")
        elif f"{key}.per_seed" in v:
            lines.append(f"| {label} | per seed {v[key + '.per_seed']} | `{key}` |")
    lines += [f"| unigram (letter-frequency) loss | {v['ch1.unigram_loss']:.4f} | `ch1.unigram_loss` |",
              f"| ln V | {v['ch1.ln_vocab']:.4f} | `ch1.ln_vocab` |",
              "",
              f"Old default (lr {results['settings']['ch1.spread.lr0_02']['lr']}) against the new (lr {settings['lr']}), "
              f"both {settings['steps']} steps, seeds {', '.join(map(str, spread_seeds))}, whole validation split:",
              "",
              "| arm | per seed | mean ± sd |",
              "| --- | --- | --- |"]
    for key in ["ch1.spread.lr0_02.final_val", "ch1.spread.lr0_01.final_val",
                "ch1.spread.lr0_02.prev_share", "ch1.spread.lr0_01.prev_share"]:
        per_seed = " ".join(f"{x:.3f}" for _, x in sorted(v[f"{key}.per_seed"].items(), key=lambda kv: int(kv[0])))
        lines.append(f"| `{key}` | {per_seed} | {v[key + '.mean']:.3f} ± {v[key + '.sd']:.3f} |")
    top = v["ch1.spread.lr0_02.prev_share_top_seed"]
    lines += ["",
              f"- previous-token share at lr 0.02: seed {top} (the largest) "
              f"{v['ch1.spread.lr0_02.prev_share_top']:.3f} (`ch1.spread.lr0_02.prev_share_top`); the other "
              f"{v['ch1.spread.lr0_02.prev_share_others_n']} seeds {v['ch1.spread.lr0_02.prev_share_others_min']:.3f}"
              f" to {v['ch1.spread.lr0_02.prev_share_others_max']:.3f} (`ch1.spread.lr0_02.prev_share_others_min`, "
              f"`_max`); at lr 0.01 {v['ch1.spread.lr0_01.prev_share_min']:.3f} to "
              f"{v['ch1.spread.lr0_01.prev_share_max']:.3f} (`ch1.spread.lr0_01.prev_share_min`, `_max`)",
              f"- seeds whose final validation loss ended below the bigram loss: lr 0.02: "
              f"{v['ch1.spread.lr0_02.below_bigram_seeds']}; lr 0.01: {v['ch1.spread.lr0_01.below_bigram_seeds']}",
              "- lr 0.02 minus lr 0.01, final validation loss (margin 0.02): "
              + paired_text(v, "ch1.spread.lr0_02.final_val", "ch1.spread.lr0_01.final_val", 0.02),
              "- validation minus training, default run: "
              + paired_text(v, "ch1.default.final_val", "ch1.default.final_train", 0.02),
              "",
              f"Sample (seed {seeds[0]}, temperature 0.8, prompt `ROMEO:`):",
              "",
              "```",
              v["ch1.default.sample"].rstrip(),
              "```",
              ""]
    return lines
