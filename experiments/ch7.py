"""Chapter 7's measurements: initialisation, normalisation and µP.

Every final loss is on the whole validation split (pylib.evaluation), stored as an arm with every
seed (experiments.common.arm) so that the chapter can pair them (pylib.compare). Curves, the
step-0 losses and the losses used only to pick a learning rate are on the trainer's fixed subset
of validation windows and are labelled so.

1. Init scale: the loss at initialisation and the residual stream's std after each block, for a
   sweep of init stds, on a 4-layer model of the course's width (three seeds, no training); and a
   short training run of the course model at a few of those scales.
2. Depth: the family n_layer = 1..8 at the course's width (n_layer 1 is the course model), pre-LN
   and post-LN: per-layer activation std and block gradient norm at initialisation (three seeds),
   also with the position embedding at std 1 so that the stream enters block 1 at size ~1; then
   short runs at 8 layers, pre/post, with and without warmup, at three peak rates (three seeds);
   each setting's rate is picked on the subset, and its final loss there is scored on the whole
   split; the page's band is the runs at the page's rate.
3. RMSNorm against LayerNorm on the course model, the default run (three seeds).
4. Width: the coordinate check (Yang et al. 2022, Tensor Programs V) at widths 16..128 under SP
   and µP; and a learning-rate sweep at widths 16, 32, 64 under SP, µP (with mup's weight-decay
   rule) and µP without its output multiplier (short runs, three seeds). The rate is picked on the
   default 128-window subset; the whole split scores the picked runs at widths 16 and 64 and the
   width-64 runs at width 16's rate.

The budget (CPython, one core): whole-split evaluation costs ~0.8 s for the course model, ~6 s at
8 layers and ~3 s at width 64 (~9 s at width 128, which is why the sweep stops at 64). Depth:
36 runs x ~1.8 s + up to 15 evaluations x 6 s; width: ~45 s of runs + ~40-55 s of evaluations;
the rest ~45 s. About 280 s, in five parts that measure.py runs on both cores.
"""

import dataclasses
import time

import numpy as np

from experiments.common import (SEEDS, arm, final_val, is_small, progress, rounded, run_parts, scaled, scored_on,
                                 val_tokens)

INIT_STDS = (0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)  # the sweep at initialisation
INIT_DEPTH = 4  # layers of the model the init sweep looks at (the course's width)
INIT_TRAIN_STDS = (0.002, 0.02, 0.1, 0.5)  # the course model trained from these scales
INIT_TRAIN = {"steps": 200, "eval_interval": 50}  # the default subset (128 windows) for the curves
PROBE_WINDOWS = 16  # fixed validation windows for the statistics at init
MARGIN = 0.02  # nats: the margin of a null result in every paired comparison, fixed before measuring

DEPTH_MORE_SEEDS = (3, 4, 5, 6, 7)  # post-LN, with and without warmup, at the picked rate: the verdict sat at the edge
DEPTH_MORE_SEEDS_POSITIONS = ("post",)
WIDTH_LRS = (1e-3, 10 ** -2.5, 1e-2, 10 ** -1.5, 1e-1)  # Adam, a factor sqrt(10) apart
WIDTH_SWEEP = (16, 32, 64)  # widths of the learning-rate sweep (the coordinate check goes to 128)
WIDTH_FULL = (16, 64)  # widths whose picked runs are scored on the whole validation split
# sp, muP, and muP without its 1/width output multiplier (the readout as in SP): the ablation that
# shows what limits muP's wide models in these short runs.
WIDTH_ARMS = ("sp", "mup", "mup_noout")
WIDTH_TRAIN = {"steps": 100, "batch_size": 8, "warmup_steps": 10, "eval_interval": 100}
# The notebook's reduced size (experiments.common.small_size): two seeds (and no extra ones for post-LN),
# every depth and width the chapter names, short runs, the depth runs at the page's rate only and the
# width sweep at two rates; the subset losses on eval_windows windows, the whole-split losses on the first
# val_tokens tokens of the validation split.
SMALL = {"seeds": (0, 1), "more_seeds": (), "eval_windows": 16,
         "init_train": {"steps": 20, "eval_interval": 10, "eval_windows": 16}, "depth_steps": 10,
         "norm_steps": 20, "width_lrs": (1e-2, 10 ** -1.5), "width_steps": 12, "val_tokens": 8_192}


def seeds():
    """SEEDS, or SMALL's at the reduced size."""
    return scaled(SEEDS, SMALL["seeds"])


def val_split(corpus):
    """The validation stream: the whole split, or its start at the reduced size."""
    return val_tokens(corpus.val, SMALL["val_tokens"])


def width_lrs():
    """WIDTH_LRS, or SMALL's at the reduced size."""
    return scaled(WIDTH_LRS, SMALL["width_lrs"])


def width_train():
    """WIDTH_TRAIN, or at the reduced size SMALL's steps and subset."""
    return scaled(WIDTH_TRAIN, {**WIDTH_TRAIN, "steps": SMALL["width_steps"], "eval_windows": SMALL["eval_windows"]})


def base_cfg(corpus):
    from pylib import model
    return dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)


def probe(corpus):
    from pylib import data
    return data.eval_windows(corpus.val, PROBE_WINDOWS, base_cfg(corpus).block_size)


def derived(corpus):
    from pylib.studies import init_study
    from pylib.web import init_ops as web_init
    out = {
        "ch7.init_depth": INIT_DEPTH,
        "ch7.depth_max": init_study.DEPTH_MAX,
        "ch7.depth_train_steps": init_study.DEPTH_TRAIN["steps"],
        "ch7.depth_train_batch": init_study.DEPTH_TRAIN["batch_size"],
        "ch7.depth_train_lr": init_study.DEPTH_TRAIN["lr"],
        "ch7.depth_train_windows": init_study.DEPTH_TRAIN["eval_windows"],
        "ch7.depth_train_eval_interval": init_study.DEPTH_TRAIN["eval_interval"],
        "ch7.depth_lrs": ", ".join(f"{x:g}" for x in init_study.DEPTH_LRS),
        "ch7.depth_lr_count": len(init_study.DEPTH_LRS),
        "ch7.depth_warmup": init_study.DEPTH_WARMUP,
        "ch7.embed_unit_std": init_study.EMBED_UNIT_STD,
        "ch7.coord_steps": init_study.COORD_STEPS,
        "ch7.coord_lr": init_study.COORD_LR,
        "ch7.coord_base_width": init_study.COORD_BASE_WIDTH,
        "ch7.coord_widths": ", ".join(map(str, init_study.COORD_WIDTHS)),
        "ch7.width_sweep": ", ".join(map(str, WIDTH_SWEEP)),
        "ch7.width_steps": WIDTH_TRAIN["steps"],
        "ch7.width_batch": WIDTH_TRAIN["batch_size"],
        "ch7.width_lrs": ", ".join(f"{x:.3g}" for x in WIDTH_LRS),
        "ch7.init_train_steps": INIT_TRAIN["steps"],
        "ch7.init_std_max": web_init.LIMITS["init_std_max"],
        "ch7.coord_lr_max": web_init.LIMITS["coord_lr_max"],
        "ch7.margin": MARGIN,
    }
    from pylib import model
    for w in init_study.COORD_WIDTHS:
        out[f"ch7.params_width{w}"] = model.count_params(init_study.width_config(base_cfg(corpus), w))
    out["ch7.params_depth8"] = model.count_params(dataclasses.replace(base_cfg(corpus), n_layer=8))
    return out


def subset_final(history):
    """The last record's subset validation loss (the trainer's eval_windows), or None if diverged."""
    last = history[-1]
    return None if last.get("diverged") else last.get("val")


def val_curve(histories):
    """Mean and sd over seeds of the subset validation loss at every eval step, for the page's band."""
    evals = [[r for r in h if r.get("val") is not None] for h in histories]
    per = np.array([[r["val"] for r in e] for e in evals])  # (seeds, evals)
    return {"steps": [r["step"] for r in evals[0]], "val_mean": rounded(per.mean(axis=0)),
            "val_sd": rounded(per.std(axis=0, ddof=1))}


def full_split(params, mcfg, corpus):
    """The whole-split loss of trained params, or None if not finite (pylib.evaluation)."""
    import math
    from pylib import evaluation
    v = evaluation.full_loss(params, mcfg, val_split(corpus))
    return v if math.isfinite(v) else None


# ---------------------------------------------------------------------------


def run_init_scale(corpus, train_stds=INIT_TRAIN_STDS):
    """The sweep at initialisation over INIT_STDS, and the course model trained from each of train_stds."""
    from pylib import train
    from pylib.studies import init_study
    x, y = probe(corpus)
    cfg = dataclasses.replace(base_cfg(corpus), n_layer=INIT_DEPTH)
    values, curves = {}, {}
    per_seed = [init_study.init_scale_sweep(cfg, INIT_STDS, seed, x, y) for seed in seeds()]
    losses = np.array([[r["loss"] for r in rs] for rs in per_seed])  # (seeds, stds)
    acts = np.array([[r["act_std"] for r in rs] for rs in per_seed])  # (seeds, stds, L + 1)
    curves["ch7.init_scale"] = {"init_stds": list(INIT_STDS), "loss_mean": rounded(losses.mean(axis=0)),
                                "act_std_mean": [rounded(a) for a in acts.mean(axis=0)]}
    for i, s in enumerate(INIT_STDS):
        values.update(arm(f"ch7.init_scale.std{s:g}.loss", dict(zip(seeds(), losses[:, i].tolist()))))
        values.update(arm(f"ch7.init_scale.std{s:g}.act_last", dict(zip(seeds(), acts[:, i, -1].tolist()))))
        values[f"ch7.init_scale.std{s:g}.act_first"] = float(acts[:, i, 0].mean())
        values[f"ch7.init_scale.std{s:g}.act_growth"] = float((acts[:, i, -1] / acts[:, i, 0]).mean())
    # the course model trained from a few scales
    init_train = scaled(INIT_TRAIN, SMALL["init_train"])
    for s in progress(train_stds, desc=f"init std, {init_train['steps']} steps", unit="std"):
        mcfg = dataclasses.replace(base_cfg(corpus), init_std=s)
        finals, hist = {}, []
        for seed in seeds():
            tcfg = dataclasses.replace(train.TrainConfig(), **init_train, seed=seed, final_eval=True)
            _, h = train.train(mcfg, tcfg, corpus.train, val_split(corpus))
            finals[seed] = final_val(h)
            hist.append(h)
        key = f"ch7.init_train.std{s:g}"
        values.update(arm(key + ".val", finals))  # whole validation split
        values[key + ".diverged"] = sum(v is None for v in finals.values())
        values.update(arm(key + ".first_val", {seed: h[0]["val"] for seed, h in zip(seeds(), hist)}))  # subset, step 0
        if all(v is not None for v in finals.values()):
            curves[key] = val_curve(hist)
    return values, curves


def run_depth_init(corpus):
    from pylib.studies import init_study
    x, y = probe(corpus)
    depths = list(range(1, init_study.DEPTH_MAX + 1))
    values, curves = {}, {}
    for variant, wpe_std in (("", None), (".unit", init_study.EMBED_UNIT_STD)):
        per_seed = [init_study.depth_stats(base_cfg(corpus), depths, ("pre", "post"), seed, x, y, wpe_std)
                    for seed in seeds()]
        for pos in ("pre", "post"):
            if not variant:
                for i, L in enumerate(depths):
                    act = np.array([ps[pos][i]["act_std"] for ps in per_seed])  # (seeds, L + 1)
                    grad = np.array([ps[pos][i]["grad_norm"] for ps in per_seed])  # (seeds, L)
                    curves[f"ch7.depth_init.{pos}.L{L}"] = {"act_std_mean": rounded(act.mean(axis=0)),
                                                           "grad_norm_mean": rounded(grad.mean(axis=0))}
            L = depths[-1]
            act = np.array([ps[pos][-1]["act_std"] for ps in per_seed])
            grad = np.array([ps[pos][-1]["grad_norm"] for ps in per_seed])
            k = f"ch7.depth_init{variant}.{pos}.L{L}"
            values[k + ".act_embed"] = float(act[:, 0].mean())
            values[k + ".act_last"] = float(act[:, -1].mean())
            values[k + ".inv_act_last"] = float((1.0 / act[:, -1]).mean())
            values[k + ".grad_first"] = float(grad[:, 0].mean())
            values[k + ".grad_second"] = float(grad[:, 1].mean())
            values[k + ".grad_middle"] = float(grad[:, L // 2 - 1].mean())
            values[k + ".grad_last"] = float(grad[:, -1].mean())
            values[k + ".grad_last_over_middle"] = float((grad[:, -1] / grad[:, L // 2 - 1]).mean())
            values[k + ".loss"] = float(np.mean([ps[pos][-1]["loss"] for ps in per_seed]))
    return values, curves


def depth_train_config(corpus, L, position, warmup, seed, lr):
    """init_study.depth_train_config, its steps cut to SMALL's at the reduced size."""
    from pylib.studies import init_study
    mcfg, tcfg = init_study.depth_train_config(base_cfg(corpus), L, position, warmup, seed, lr)
    return mcfg, dataclasses.replace(tcfg, steps=scaled(tcfg.steps, SMALL["depth_steps"]),
                                     eval_windows=scaled(tcfg.eval_windows, SMALL["eval_windows"]))


def run_depth_train(corpus, position):
    """One placement: every (warmup, rate) on the grid, three seeds; each warmup setting's rate is
    picked on the subset; the whole split scores the picked runs (and, with warmup, the page's rate)."""
    from pylib import train
    from pylib.studies import init_study
    values, curves, settings = {}, {}, {}
    page_lr = init_study.DEPTH_TRAIN["lr"]
    lrs = scaled(init_study.DEPTH_LRS, (page_lr,))  # the reduced size: the page's rate only
    for L in init_study.DEPTH_TRAIN_DEPTHS:
        for warmup in progress((False, True), desc=f"depth {L}, {position}-LN", unit="warmup setting"):
            key = init_study.depth_train_key(L, position, warmup)
            runs = {}  # lr -> [(seed, params, history)]
            for lr in lrs:
                runs[lr] = []
                for seed in seeds():
                    mcfg, tcfg = depth_train_config(corpus, L, position, warmup, seed, lr)
                    params, h = train.train(mcfg, tcfg, corpus.train, val_split(corpus))
                    runs[lr].append((seed, params, h))
                hist = [h for _, _, h in runs[lr]]
                k = f"{key}.lr{lr:g}"
                values.update(arm(k + ".sub", {seed: subset_final(h) for seed, _, h in runs[lr]}))  # subset
                values[k + ".diverged"] = sum(bool(h[-1].get("diverged")) for h in hist)
                values[k + ".clipped_frac"] = float(np.mean([np.mean([bool(r.get("clipped")) for r in h]) for h in hist]))
                if lr == page_lr:
                    settings[key] = {k2: x for k2, x in dataclasses.asdict(tcfg).items() if k2 != "seed"}
                    if not values[k + ".diverged"]:
                        curves[key] = val_curve(hist)  # the page's band: the subset curve of its setting
            means = {lr: values[f"{key}.lr{lr:g}.sub.mean"] for lr in lrs}
            ok = [lr for lr in lrs if means[lr] is not None]
            best = min(ok, key=lambda lr: means[lr]) if ok else None
            values[key + ".best_lr"] = best
            scored = {}
            for lr in ({best} | ({page_lr} if warmup else set())) - {None}:
                mcfg = dataclasses.replace(base_cfg(corpus), n_layer=L, norm_position=position)
                scored[lr] = {seed: (None if h[-1].get("diverged") else full_split(p, mcfg, corpus))
                              for seed, p, h in runs[lr]}
                values.update(arm(f"{key}.lr{lr:g}.val", scored[lr]))  # whole validation split
            if best is not None:
                values.update(arm(key + ".best.val", scored[best]))
                values[key + ".best.clipped_frac"] = values[f"{key}.lr{best:g}.clipped_frac"]
                if position in DEPTH_MORE_SEEDS_POSITIONS:  # more seeds at the picked rate, for warmup's verdict
                    mcfg = dataclasses.replace(base_cfg(corpus), n_layer=L, norm_position=position)
                    more = {}
                    for seed in scaled(DEPTH_MORE_SEEDS, SMALL["more_seeds"]):
                        mc, tc = depth_train_config(corpus, L, position, warmup, seed, best)
                        p, h = train.train(mc, tc, corpus.train, val_split(corpus))
                        more[seed] = None if h[-1].get("diverged") else full_split(p, mcfg, corpus)
                    values.update(arm(key + ".best.more_seeds.val", {**scored[best], **more}))
    return values, curves, settings


def run_rmsnorm(corpus):
    from pylib import model, train
    values, seconds = {}, {}
    default = train.TrainConfig()  # at the reduced size: SMALL's steps, a smaller subset at the first and last step
    base = dataclasses.replace(default, steps=scaled(default.steps, SMALL["norm_steps"]),
                               eval_interval=scaled(default.eval_interval, SMALL["norm_steps"]),
                               eval_windows=scaled(default.eval_windows, SMALL["eval_windows"]))
    for norm in progress(("layernorm", "rmsnorm"), desc=f"norms, {base.steps} steps", unit="norm"):
        mcfg = dataclasses.replace(base_cfg(corpus), norm=norm)
        finals = {}
        t0 = time.perf_counter()
        for seed in seeds():
            _, h = train.train(mcfg, dataclasses.replace(base, seed=seed, final_eval=True),
                               corpus.train, val_split(corpus))
            finals[seed] = final_val(h)
        seconds[norm] = (time.perf_counter() - t0) / len(seeds())
        values.update(arm(f"ch7.norm.{norm}.val", finals))  # whole validation split
        values[f"ch7.norm.{norm}.params"] = model.count_params(mcfg)
    return values, {f"ch7.norm.{k}.seconds_per_run": v for k, v in seconds.items()}


def run_coord(corpus):
    from pylib.studies import init_study
    x = probe(corpus)[0][: init_study.COORD_PROBE_WINDOWS]
    values, curves = {}, {}
    for param in ("sp", "mup"):
        per = {w: [] for w in init_study.COORD_WIDTHS}
        for w in init_study.COORD_WIDTHS:
            for seed in seeds():
                mcfg, tcfg = init_study.coord_train_config(base_cfg(corpus), w, param == "mup", seed)
                r = init_study.coord_check(mcfg, tcfg, corpus.train, x, init_study.COORD_STEPS)
                assert r["diverged_at"] is None, f"coordinate check diverged: {param} width {w} seed {seed}"
                per[w].append(r)
        curve = {"widths": list(init_study.COORD_WIDTHS), "steps": list(range(init_study.COORD_STEPS + 1))}
        for k in init_study.COORD_KEYS:
            # [width][t]: the three-seed mean of the coordinate size after t steps
            curve[k] = [rounded(np.mean([r[k] for r in per[w]], axis=0)) for w in init_study.COORD_WIDTHS]
        curves[f"ch7.coord.{param}"] = curve
        lo, hi = init_study.COORD_WIDTHS[0], init_study.COORD_WIDTHS[-1]
        for k in init_study.COORD_KEYS:
            end = {w: float(np.mean([r[k][-1] for r in per[w]])) for w in init_study.COORD_WIDTHS}
            values[f"ch7.coord.{param}.{k}.w{lo}"] = end[lo]
            values[f"ch7.coord.{param}.{k}.w{hi}"] = end[hi]
            values[f"ch7.coord.{param}.{k}.ratio"] = end[hi] / end[lo]
    return values, curves


def width_model(corpus, param, w):
    from pylib.studies import init_study
    mcfg = init_study.width_config(base_cfg(corpus), w, 0 if param == "sp" else init_study.COORD_BASE_WIDTH)
    return dataclasses.replace(mcfg, mup_output_mult=param != "mup_noout")


def width_train_config(param, lr, seed):
    """The sweep's run: µP's arms use mup's weight-decay rule (lr * wd kept, as MuAdamW's default)."""
    from pylib import train
    return dataclasses.replace(train.TrainConfig(), **width_train(), lr=lr, seed=seed,
                               mup_constant_decay=param != "sp")


def run_width_sweep(corpus):
    from pylib import train
    from pylib.studies import init_study
    values, curves = {}, {}
    base_w = init_study.COORD_BASE_WIDTH
    shared = {}  # width 16 is µP's base width: there every arm is the same model (tested), run once
    lrs = width_lrs()
    for param in progress(WIDTH_ARMS, desc=f"width sweep, {width_train()['steps']} steps", unit="parameterisation"):
        curve = {"widths": list(WIDTH_SWEEP), "lrs": list(lrs), "val_mean": [], "diverged": [],
                 "evaluation": "subset"}
        per_width = {}
        for w in WIDTH_SWEEP:
            mcfg = width_model(corpus, param, w)
            if w == base_w and shared:
                runs = shared["runs"]
            else:
                runs = [[(seed,) + train.train(mcfg, width_train_config(param, lr, seed), corpus.train, val_split(corpus))
                         for seed in seeds()] for lr in lrs]  # [lr][seed] = (seed, params, history)
                if w == base_w:
                    shared["runs"] = runs
            subset = [[subset_final(h) for _, _, h in r] for r in runs]
            summary = init_study.lr_sweep_summary(list(lrs), subset)
            curve["val_mean"].append([None if m is None else round(m, 5) for m in summary["mean"]])
            curve["diverged"].append(summary["diverged"])
            key = f"ch7.width.{param}.w{w}"
            values[key + ".best_lr"] = summary["best_lr"]
            values[key + ".diverged_runs"] = sum(summary["diverged"])
            finite = sorted(m for m in summary["mean"] if m is not None)  # how flat the curve is at its minimum:
            values[key + ".runner_up_gap"] = finite[1] - finite[0] if len(finite) > 1 else None  # next-best minus best
            per_width[w] = (mcfg, runs, summary)
        base_index = per_width[base_w][2]["best_index"]  # the narrowest model's best lr
        values[f"ch7.width.{param}.base_lr"] = lrs[base_index]
        bests = [values[f"ch7.width.{param}.w{w}.best_lr"] for w in WIDTH_SWEEP]
        values[f"ch7.width.{param}.best_lr_spread"] = max(bests) / min(bests)  # 1 = the best lr transferred
        for w in WIDTH_FULL:
            mcfg, runs, summary = per_width[w]
            scored = {}
            for name, i in (("best_val", summary["best_index"]), ("at_base_lr", base_index)):
                if i not in scored:
                    scored[i] = {seed: (None if h[-1].get("diverged") else full_split(p, mcfg, corpus))
                                 for seed, p, h in runs[i]}
                values.update(arm(f"ch7.width.{param}.w{w}.{name}", scored[i]))  # whole validation split
        curves[f"ch7.width.{param}"] = curve
    return values, curves


# ---------------------------------------------------------------------------
# The parts: independent, so measure.py can run them at once


PARTS = ["part_depth_pre", "part_depth_post", "part_width", "part_init", "part_small"]


def _timed(name, fn, corpus):
    t0 = time.perf_counter()
    out = fn(corpus)
    return out, {f"ch7.{name}.seconds": time.perf_counter() - t0}


def part_depth_pre(corpus):
    (v, c, s), t = _timed("depth_train_pre", lambda cp: run_depth_train(cp, "pre"), corpus)
    return {"values": v, "curves": c, "settings": s, "timings": t}


def part_depth_post(corpus):
    (v, c, s), t = _timed("depth_train_post", lambda cp: run_depth_train(cp, "post"), corpus)
    return {"values": v, "curves": c, "settings": s, "timings": t}


def part_width(corpus):
    from pylib.studies import init_study
    (v, c), t = _timed("width", run_width_sweep, corpus)
    settings = {"ch7.width": {**width_train(), "lrs": list(width_lrs()), "widths": list(WIDTH_SWEEP),
                              "whole_split_widths": list(WIDTH_FULL), "mup_base_width": init_study.COORD_BASE_WIDTH,
                              "mup_constant_decay": "µP arms only"}}
    return {"values": v, "curves": c, "settings": settings, "timings": t}


def part_init(corpus):
    (v, c), t = _timed("init_scale", run_init_scale, corpus)
    return {"values": {**v, "ch7.seeds": len(seeds())}, "curves": c,
            "settings": {"ch7.init_train": dict(scaled(INIT_TRAIN, SMALL["init_train"]))}, "timings": t}


def part_small(corpus):
    from pylib.studies import init_study
    values, curves, timings = {}, {}, {}
    for name, fn in [("depth_init", run_depth_init), ("coord", run_coord)]:
        (v, c), t = _timed(name, fn, corpus)
        values.update(v), curves.update(c), timings.update(t)
    (v, t2), t = _timed("norm", run_rmsnorm, corpus)
    values.update(v), timings.update(t), timings.update(t2)
    settings = {"ch7.coord": {"lr": init_study.COORD_LR, "steps": init_study.COORD_STEPS,
                              "batch_size": init_study.COORD_BATCH, "schedule": "constant"}}
    return {"values": values, "curves": curves, "settings": settings, "timings": timings}


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


def _pm(v, key, fmt=".4f"):
    sd_fmt = fmt.lstrip("+")
    m = v.get(key + ".mean")
    return f"{m:{fmt}} ± {v[key + '.sd']:{sd_fmt}}" if m is not None else "diverged"


def markdown(results):
    """results.md's section for chapter 7."""
    from experiments.common import paired_text
    from pylib import train
    from pylib.studies import init_study
    v, settings = results["values"], results["settings"]
    L = init_study.DEPTH_MAX
    seeds_run = sorted(map(int, v["ch7.norm.layernorm.val.per_seed"]))
    small = is_small()  # the reduced size: the whole-split losses are on the split's first SMALL["val_tokens"] tokens
    final_on = scored_on(SMALL["val_tokens"])
    whole = f"first {SMALL['val_tokens']:,} validation tokens" if small else "whole split"
    default_run = f"the default run cut to {SMALL['norm_steps']} steps" if small else "the default run"
    subset_default = train.TrainConfig().eval_windows  # the curves' subset, unless a part's settings say otherwise
    subset_init = settings["ch7.init_train"].get("eval_windows", subset_default)
    lines = ["## Chapter 7: initialisation, normalisation and µP", "",
             f"Seeds {', '.join(map(str, seeds_run))}; mean ± sample sd over seeds. Final losses: {final_on}. "
             f"Comparisons: paired by seed, 95% t-interval, margin ±{MARGIN} nats.", "",
             f"### Init scale ({INIT_DEPTH} layers, width 16, at initialisation)", "",
             "| init std | loss at init | residual std after embeddings | after last block | key |",
             "| --- | --- | --- | --- | --- |"]
    for s in INIT_STDS:
        k = f"ch7.init_scale.std{s:g}"
        lines.append(f"| {s:g} | {_pm(v, k + '.loss')} | {v[k + '.act_first']:.4g} | {_pm(v, k + '.act_last', '.4g')} | `{k}` |")
    lines += ["", f"The course model trained {settings['ch7.init_train']['steps']} steps from each scale (default settings otherwise); "
              f"step-0 loss on the {subset_init}-window subset, final loss on the {whole}:", "",
              "| init std | step-0 loss (subset) | final val loss | against 0.02 | key |", "| --- | --- | --- | --- | --- |"]
    for s in INIT_TRAIN_STDS:
        k = f"ch7.init_train.std{s:g}"
        cmp = "" if s == 0.02 else paired_text(v, k + ".val", "ch7.init_train.std0.02.val", MARGIN)
        lines.append(f"| {s:g} | {_pm(v, k + '.first_val')} | {_pm(v, k + '.val')} | {cmp} | `{k}.val` |")
    for variant, title in (("", "the default init"), (".unit", f"position embedding at std {init_study.EMBED_UNIT_STD:g}")):
        lines += ["", f"### Depth at initialisation (width 16, {L} layers, {title})", "",
                  "| placement | residual std: embeddings | last block | grad norm: block 1 | block 2 | middle block | last block | key |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for pos in ("pre", "post"):
            k = f"ch7.depth_init{variant}.{pos}.L{L}"
            lines.append(f"| {pos}-LN | {v[k + '.act_embed']:.4g} | {v[k + '.act_last']:.4g} | {v[k + '.grad_first']:.4g} | "
                         f"{v[k + '.grad_second']:.4g} | {v[k + '.grad_middle']:.4g} | {v[k + '.grad_last']:.4g} | `{k}` |")
    keys = list(init_study.depth_train_settings())
    depth_train = {k: settings[keys[0]][k] for k in init_study.DEPTH_TRAIN}  # init_study.DEPTH_TRAIN, as run
    depth_lrs = tuple(lr for lr in init_study.DEPTH_LRS if f"{keys[0]}.lr{lr:g}.sub.n" in v)
    more = f"{keys[0].rsplit('.', 2)[0]}.post.warmup.best.more_seeds.val.per_seed"
    lines += ["", f"### Depth: training ({depth_train} at peak rates {depth_lrs}, warmup "
              f"{init_study.DEPTH_WARMUP} or 0)", "",
              f"Final loss on the {depth_train['eval_windows']}-window subset (used only to pick each "
              "setting's rate):", "",
              "| setting | " + " | ".join(f"lr {lr:g}" for lr in depth_lrs) + " | picked | clipped steps at each lr |",
              "| --- |" + " --- |" * (len(depth_lrs) + 2)]
    for key in keys:
        cells = " | ".join(_pm(v, f"{key}.lr{lr:g}.sub") for lr in depth_lrs)
        clipped = ", ".join(f"{v[f'{key}.lr{lr:g}.clipped_frac']:.3f}" for lr in depth_lrs)
        lines.append(f"| {key.split('depth_train.')[1]} | {cells} | {v[key + '.best_lr']} | {clipped} |")
    lines += ["", f"At each setting's picked rate, on the {whole}:", "", "| setting | final val loss | key |",
              "| --- | --- | --- |"]
    for key in keys:
        lines.append(f"| {key.split('depth_train.')[1]} | {_pm(v, key + '.best.val')} | `{key}.best.val` |")
    d = f"ch7.depth_train.L{L}"
    lines += ["", f"Paired comparisons ({whole}, each setting at its picked rate):", "",
              f"- pre-LN, warmup − no warmup: {paired_text(v, d + '.pre.warmup.best.val', d + '.pre.nowarmup.best.val', MARGIN)}",
              f"- post-LN, warmup − no warmup: {paired_text(v, d + '.post.warmup.best.val', d + '.post.nowarmup.best.val', MARGIN)}",
              f"- post-LN, warmup − no warmup, seeds 0-{max(map(int, v[more]))}: "
              f"{paired_text(v, d + '.post.warmup.best.more_seeds.val', d + '.post.nowarmup.best.more_seeds.val', MARGIN)}",
              f"- with warmup, post-LN − pre-LN: {paired_text(v, d + '.post.warmup.best.val', d + '.pre.warmup.best.val', MARGIN)}",
              f"- without warmup, post-LN − pre-LN: {paired_text(v, d + '.post.nowarmup.best.val', d + '.pre.nowarmup.best.val', MARGIN)}",
              f"- post-LN with warmup at the page's rate {init_study.DEPTH_TRAIN['lr']:g} ({whole}): "
              f"{_pm(v, d + '.post.warmup.lr' + format(init_study.DEPTH_TRAIN['lr'], 'g') + '.val')}"]
    lines += ["", f"### RMSNorm against LayerNorm ({default_run}; {whole})", "",
              "| norm | params | final val loss | key |", "| --- | --- | --- | --- |"]
    for norm in ("layernorm", "rmsnorm"):
        lines.append(f"| {norm} | {v[f'ch7.norm.{norm}.params']} | {_pm(v, f'ch7.norm.{norm}.val')} | `ch7.norm.{norm}.val` |")
    lines += ["", f"RMSNorm − LayerNorm: {paired_text(v, 'ch7.norm.rmsnorm.val', 'ch7.norm.layernorm.val', MARGIN)}", "",
              f"### Coordinate check (Adam, lr {init_study.COORD_LR}, constant, {init_study.COORD_STEPS} steps, batch {init_study.COORD_BATCH})", "",
              "RMS of one coordinate after the last step; ratio = width 128 / width 16.", "",
              "| parameterisation | quantity | width 16 | width 128 | ratio |", "| --- | --- | --- | --- | --- |"]
    for param in ("sp", "mup"):
        for k in init_study.COORD_KEYS:
            b = f"ch7.coord.{param}.{k}"
            lines.append(f"| {param} | {k} | {v[b + '.w16']:.4g} | {v[b + '.w128']:.4g} | {v[b + '.ratio']:.3g} |")
    width = settings["ch7.width"]
    lines += ["", f"### Learning rate against width ({ {k: width[k] for k in WIDTH_TRAIN} }; "
              f"lrs {', '.join(f'{x:.3g}' for x in width['lrs'])}; "
              "µP arms with mup's weight-decay rule)", "",
              f"Final loss on the {width.get('eval_windows', subset_default)}-window subset, mean over seeds "
              "(– : a seed diverged); used only to pick the rate.", ""]
    curves = results["curves"]
    for param in WIDTH_ARMS:
        c = curves[f"ch7.width.{param}"]
        lines += [f"**{param}**", "", "| width | " + " | ".join(f"lr {x:.3g}" for x in c["lrs"]) + " | best lr |",
                  "| --- |" + " --- |" * (len(c["lrs"]) + 1)]
        for w, row in zip(c["widths"], c["val_mean"]):
            cells = " | ".join("–" if m is None else f"{m:.4f}" for m in row)
            lines.append(f"| {w} | {cells} | {v[f'ch7.width.{param}.w{w}.best_lr']:.3g} |")
        lines += ["", f"{whole[0].upper() + whole[1:]}, at the picked rate and at width 16's rate ({v[f'ch7.width.{param}.base_lr']:.3g}):", "",
                  "| width | at its picked rate | at width 16's rate | key |", "| --- | --- | --- | --- |"]
        for w in WIDTH_FULL:
            k = f"ch7.width.{param}.w{w}"
            lines.append(f"| {w} | {_pm(v, k + '.best_val')} | {_pm(v, k + '.at_base_lr')} | `{k}` |")
        hi, lo = WIDTH_FULL[-1], WIDTH_FULL[0]
        lines += ["", f"- width {hi} at width 16's rate − at its own: "
                      f"{paired_text(v, f'ch7.width.{param}.w{hi}.at_base_lr', f'ch7.width.{param}.w{hi}.best_val', MARGIN)}",
                  f"- width {hi} − width {lo}, each at its picked rate: "
                  f"{paired_text(v, f'ch7.width.{param}.w{hi}.best_val', f'ch7.width.{param}.w{lo}.best_val', MARGIN)}", ""]
    return lines
