"""Chapter 7's measurements: initialisation, normalisation and µP.

1. Init scale: the loss at initialisation and the residual stream's std after each block, for a
   sweep of init stds, on a 4-layer model of the course's width (three seeds, no training); and a
   short training run of the course model at a few of those scales.
2. Depth: the family n_layer = 1..8 at the course's width (n_layer 1 is the course model), pre-LN
   and post-LN: per-layer activation std and block gradient norm at initialisation (three seeds);
   then short runs at 8 layers, pre/post, with and without warmup (three seeds; the page's band).
3. RMSNorm against LayerNorm on the course model, the default run (three seeds).
4. Width: the coordinate check (Yang et al. 2022, Tensor Programs V) at widths 16..128 under SP
   and µP; and a learning-rate sweep at each width under SP, µP, and µP without its output
   multiplier (short runs, three seeds).

The budget (CPython, one core of the course machine, quiet; one step timed with a small script):
default model B=16 ~5 ms; 8 layers B=8 ~15 ms; widths 16/32/64/128 (1 layer, 2 heads) B=8 about
1.7/2.7/6.8/9.9 ms. So: depth training 12 runs x 150 steps x 15 ms = 27 s; width sweep
3 arms x 5 lrs x 3 seeds x 100 steps x 21 ms (all four widths) = 95 s; init-scale
training 4 x 3 x 200 x 5 ms = 12 s; RMSNorm 2 x 3 x 400 x 5 ms = 12 s; the coordinate check
2 x 3 x 4 widths x 5 steps (plus its forward passes) ~ 3 s; statistics at init ~ 2 s. About 150 s.
"""

import dataclasses
import time

import numpy as np

from experiments.common import SEEDS, mean_sd, rounded

INIT_STDS = (0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)  # the sweep at initialisation
INIT_DEPTH = 4  # layers of the model the init sweep looks at (the course's width)
INIT_TRAIN_STDS = (0.002, 0.02, 0.1, 0.5)  # the course model trained from these scales
INIT_TRAIN = {"steps": 200, "eval_interval": 50, "eval_windows": 32}
PROBE_WINDOWS = 16  # fixed validation windows for the statistics at init

WIDTH_LRS = (1e-3, 10 ** -2.5, 1e-2, 10 ** -1.5, 1e-1)  # Adam, a factor sqrt(10) apart
# sp, muP, and muP without its 1/width output multiplier (the readout as in SP): the ablation that
# shows what limits muP's wide models in these short runs.
WIDTH_ARMS = ("sp", "mup", "mup_noout")
WIDTH_TRAIN = {"steps": 100, "batch_size": 8, "warmup_steps": 10, "eval_interval": 100, "eval_windows": 16}


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
        "ch7.depth_warmup": init_study.DEPTH_WARMUP,
        "ch7.coord_steps": init_study.COORD_STEPS,
        "ch7.coord_lr": init_study.COORD_LR,
        "ch7.coord_base_width": init_study.COORD_BASE_WIDTH,
        "ch7.coord_widths": ", ".join(map(str, init_study.COORD_WIDTHS)),
        "ch7.width_steps": WIDTH_TRAIN["steps"],
        "ch7.width_batch": WIDTH_TRAIN["batch_size"],
        "ch7.width_lrs": ", ".join(f"{x:.3g}" for x in WIDTH_LRS),
        "ch7.init_train_steps": INIT_TRAIN["steps"],
        "ch7.init_std_max": web_init.LIMITS["init_std_max"],
        "ch7.coord_lr_max": web_init.LIMITS["coord_lr_max"],
    }
    from pylib import model
    for w in init_study.COORD_WIDTHS:
        out[f"ch7.params_width{w}"] = model.count_params(init_study.width_config(base_cfg(corpus), w))
    out["ch7.params_depth8"] = model.count_params(dataclasses.replace(base_cfg(corpus), n_layer=8))
    return out


def final_val(history):
    """(final validation loss, or None, and the step it diverged at, or None)."""
    div = next((r["step"] for r in history if r.get("diverged")), None)
    return (None if div is not None else history[-1]["val"]), div


def val_curve(histories):
    """Three-seed mean and sd of the validation loss at every eval step, for the page's band."""
    evals = [[r for r in h if r.get("val") is not None] for h in histories]
    per = np.array([[r["val"] for r in e] for e in evals])  # (seeds, evals)
    return {"steps": [r["step"] for r in evals[0]], "val_mean": rounded(per.mean(axis=0)),
            "val_sd": rounded(per.std(axis=0, ddof=1))}


# ---------------------------------------------------------------------------


def run_init_scale(corpus):
    from pylib import train
    from pylib.studies import init_study
    x, y = probe(corpus)
    cfg = dataclasses.replace(base_cfg(corpus), n_layer=INIT_DEPTH)
    values, curves = {}, {}
    per_seed = [init_study.init_scale_sweep(cfg, INIT_STDS, seed, x, y) for seed in SEEDS]
    losses = np.array([[r["loss"] for r in rs] for rs in per_seed])  # (seeds, stds)
    acts = np.array([[r["act_std"] for r in rs] for rs in per_seed])  # (seeds, stds, L + 1)
    curves["ch7.init_scale"] = {"init_stds": list(INIT_STDS), "loss_mean": rounded(losses.mean(axis=0)),
                                "act_std_mean": [rounded(a) for a in acts.mean(axis=0)]}
    for i, s in enumerate(INIT_STDS):
        values[f"ch7.init_scale.std{s:g}.loss.mean"], values[f"ch7.init_scale.std{s:g}.loss.sd"] = mean_sd(losses[:, i].tolist())
        values[f"ch7.init_scale.std{s:g}.act_last.mean"], values[f"ch7.init_scale.std{s:g}.act_last.sd"] = mean_sd(acts[:, i, -1].tolist())
        values[f"ch7.init_scale.std{s:g}.act_first"] = float(acts[:, i, 0].mean())
        values[f"ch7.init_scale.std{s:g}.act_growth"] = float((acts[:, i, -1] / acts[:, i, 0]).mean())
    # the course model trained from a few scales
    for s in INIT_TRAIN_STDS:
        mcfg = dataclasses.replace(base_cfg(corpus), init_std=s)
        finals, divs, hist = [], [], []
        for seed in SEEDS:
            tcfg = dataclasses.replace(train.TrainConfig(), **INIT_TRAIN, seed=seed)
            _, h = train.train(mcfg, tcfg, corpus.train, corpus.val)
            v, d = final_val(h)
            finals.append(v), divs.append(d), hist.append(h)
        key = f"ch7.init_train.std{s:g}"
        values[key + ".diverged"] = sum(d is not None for d in divs)
        if all(v is not None for v in finals):
            values[key + ".val.mean"], values[key + ".val.sd"] = mean_sd(finals)
            values[key + ".first_val.mean"], values[key + ".first_val.sd"] = mean_sd([h[0]["val"] for h in hist])
            curves[key] = val_curve(hist)
        else:
            values[key + ".diverged_at"] = min(d for d in divs if d is not None)
    return values, curves


def run_depth_init(corpus):
    from pylib.studies import init_study
    x, y = probe(corpus)
    depths = list(range(1, init_study.DEPTH_MAX + 1))
    per_seed = [init_study.depth_stats(base_cfg(corpus), depths, ("pre", "post"), seed, x, y) for seed in SEEDS]
    values, curves = {}, {}
    for pos in ("pre", "post"):
        for i, L in enumerate(depths):
            act = np.array([ps[pos][i]["act_std"] for ps in per_seed])  # (seeds, L + 1)
            grad = np.array([ps[pos][i]["grad_norm"] for ps in per_seed])  # (seeds, L)
            curves[f"ch7.depth_init.{pos}.L{L}"] = {"act_std_mean": rounded(act.mean(axis=0)),
                                                   "grad_norm_mean": rounded(grad.mean(axis=0))}
        L = depths[-1]
        act = np.array([ps[pos][-1]["act_std"] for ps in per_seed])
        grad = np.array([ps[pos][-1]["grad_norm"] for ps in per_seed])
        values[f"ch7.depth_init.{pos}.L{L}.act_embed"] = float(act[:, 0].mean())
        values[f"ch7.depth_init.{pos}.L{L}.act_last"] = float(act[:, -1].mean())
        values[f"ch7.depth_init.{pos}.L{L}.grad_first"] = float(grad[:, 0].mean())
        values[f"ch7.depth_init.{pos}.L{L}.grad_second"] = float(grad[:, 1].mean())
        values[f"ch7.depth_init.{pos}.L{L}.grad_last"] = float(grad[:, -1].mean())
        values[f"ch7.depth_init.{pos}.L{L}.loss"] = float(np.mean([ps[pos][-1]["loss"] for ps in per_seed]))
    return values, curves


def run_depth_train(corpus):
    from pylib import train
    from pylib.studies import init_study
    values, curves, settings = {}, {}, {}
    for key, (L, pos, warmup) in init_study.depth_train_settings().items():
        finals, divs, hist = [], [], []
        for seed in SEEDS:
            mcfg, tcfg = init_study.depth_train_config(base_cfg(corpus), L, pos, warmup, seed)
            _, h = train.train(mcfg, tcfg, corpus.train, corpus.val)
            v, d = final_val(h)
            finals.append(v), divs.append(d), hist.append(h)
            settings[key] = {k: x for k, x in dataclasses.asdict(tcfg).items() if k != "seed"}
        values[key + ".diverged"] = sum(d is not None for d in divs)
        values[key + ".clipped_frac"] = float(np.mean([np.mean([bool(r.get("clipped")) for r in h]) for h in hist]))
        if all(v is not None for v in finals):
            values[key + ".val.mean"], values[key + ".val.sd"] = mean_sd(finals)
            curves[key] = val_curve(hist)
        else:
            values[key + ".diverged_at"] = min(d for d in divs if d is not None)
    return values, curves, settings


def run_rmsnorm(corpus):
    from pylib import model, train
    values, seconds = {}, {}
    finals = {}
    for norm in ("layernorm", "rmsnorm"):
        mcfg = dataclasses.replace(base_cfg(corpus), norm=norm)
        finals[norm] = []
        t0 = time.perf_counter()
        for seed in SEEDS:
            _, h = train.train(mcfg, dataclasses.replace(train.TrainConfig(), seed=seed), corpus.train, corpus.val)
            finals[norm].append(h[-1]["val"])
        seconds[norm] = (time.perf_counter() - t0) / len(SEEDS)
        values[f"ch7.norm.{norm}.val.mean"], values[f"ch7.norm.{norm}.val.sd"] = mean_sd(finals[norm])
        values[f"ch7.norm.{norm}.params"] = model.count_params(mcfg)
    diff = [r - l for r, l in zip(finals["rmsnorm"], finals["layernorm"])]
    values["ch7.norm.delta.mean"], values["ch7.norm.delta.sd"] = mean_sd(diff)
    return values, {f"ch7.norm.{k}.seconds_per_run": v for k, v in seconds.items()}


def run_coord(corpus):
    from pylib.studies import init_study
    x = probe(corpus)[0][: init_study.COORD_PROBE_WINDOWS]
    values, curves = {}, {}
    for param in ("sp", "mup"):
        per = {w: [] for w in init_study.COORD_WIDTHS}
        for w in init_study.COORD_WIDTHS:
            for seed in SEEDS:
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


def run_width_sweep(corpus):
    from pylib import train
    from pylib.studies import init_study
    values, curves = {}, {}
    for param in WIDTH_ARMS:
        curve = {"widths": list(init_study.COORD_WIDTHS), "lrs": list(WIDTH_LRS), "val_mean": [], "diverged": []}
        per_width = {}
        for w in init_study.COORD_WIDTHS:
            mcfg = init_study.width_config(base_cfg(corpus), w, 0 if param == "sp" else init_study.COORD_BASE_WIDTH)
            mcfg = dataclasses.replace(mcfg, mup_output_mult=param != "mup_noout")
            finals = []
            for lr in WIDTH_LRS:
                runs = []
                for seed in SEEDS:
                    tcfg = dataclasses.replace(train.TrainConfig(), **WIDTH_TRAIN, lr=lr, seed=seed)
                    runs.append(final_val(train.train(mcfg, tcfg, corpus.train, corpus.val)[1])[0])
                finals.append(runs)
            summary = init_study.lr_sweep_summary(list(WIDTH_LRS), finals)
            curve["val_mean"].append([None if m is None else round(m, 5) for m in summary["mean"]])
            curve["diverged"].append(summary["diverged"])
            key = f"ch7.width.{param}.w{w}"
            values[key + ".best_lr"] = summary["best_lr"]
            best = summary["best_index"]
            values[key + ".best_val.mean"], values[key + ".best_val.sd"] = mean_sd(finals[best])
            values[key + ".diverged_runs"] = sum(summary["diverged"])
            per_width[w] = (finals, summary)
        base_index = per_width[init_study.COORD_WIDTHS[0]][1]["best_index"]  # the narrowest model's best lr
        values[f"ch7.width.{param}.base_lr"] = WIDTH_LRS[base_index]
        for w, (finals, summary) in per_width.items():
            # what transferring the narrowest model's best lr costs at this width
            key = f"ch7.width.{param}.w{w}"
            if summary["mean"][base_index] is not None:
                values[key + ".at_base_lr.mean"], values[key + ".at_base_lr.sd"] = mean_sd(finals[base_index])
                values[key + ".transfer_gap"] = summary["mean"][base_index] - summary["mean"][summary["best_index"]]
        curves[f"ch7.width.{param}"] = curve
        bests = [values[f"ch7.width.{param}.w{w}.best_lr"] for w in init_study.COORD_WIDTHS]
        values[f"ch7.width.{param}.best_lr_spread"] = max(bests) / min(bests)  # 1 = the best lr transferred
    return values, curves


# ---------------------------------------------------------------------------


def run(corpus):
    values, curves, settings, timings = {}, {}, {}, {}
    for name, fn in [("init_scale", run_init_scale), ("depth_init", run_depth_init), ("coord", run_coord),
                     ("width", run_width_sweep)]:
        t0 = time.perf_counter()
        v, c = fn(corpus)
        values.update(v), curves.update(c)
        timings[f"ch7.{name}.seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    v, c, s = run_depth_train(corpus)
    values.update(v), curves.update(c), settings.update(s)
    timings["ch7.depth_train.seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    v, t = run_rmsnorm(corpus)
    values.update(v), timings.update(t)
    timings["ch7.norm.seconds"] = time.perf_counter() - t0
    from pylib.studies import init_study
    settings["ch7.width"] = {**WIDTH_TRAIN, "lrs": list(WIDTH_LRS), "widths": list(init_study.COORD_WIDTHS),
                             "mup_base_width": init_study.COORD_BASE_WIDTH}
    settings["ch7.coord"] = {"lr": init_study.COORD_LR, "steps": init_study.COORD_STEPS,
                             "batch_size": init_study.COORD_BATCH, "schedule": "constant"}
    settings["ch7.init_train"] = dict(INIT_TRAIN)
    values["ch7.seeds"] = len(SEEDS)
    return {"values": values, "curves": curves, "settings": settings, "timings": timings}


def _pm(v, key, fmt=".4f"):
    sd_fmt = fmt.lstrip("+")
    return f"{v[key + '.mean']:{fmt}} ± {v[key + '.sd']:{sd_fmt}}" if key + ".mean" in v else "diverged"


def markdown(results):
    """results.md's section for chapter 7."""
    from pylib.studies import init_study
    v = results["values"]
    lines = ["## Chapter 7: initialisation, normalisation and µP", "",
             f"Seeds {', '.join(map(str, SEEDS))}; mean ± sample sd over seeds.", "",
             f"### Init scale ({INIT_DEPTH} layers, width 16, at initialisation)", "",
             "| init std | loss at init | residual std after embeddings | after last block | key |",
             "| --- | --- | --- | --- | --- |"]
    for s in INIT_STDS:
        k = f"ch7.init_scale.std{s:g}"
        lines.append(f"| {s:g} | {_pm(v, k + '.loss')} | {v[k + '.act_first']:.4g} | {_pm(v, k + '.act_last', '.4g')} | `{k}` |")
    lines += ["", f"The course model trained {INIT_TRAIN['steps']} steps from each scale (default settings otherwise):", "",
              "| init std | final val loss | diverged runs | key |", "| --- | --- | --- | --- |"]
    for s in INIT_TRAIN_STDS:
        k = f"ch7.init_train.std{s:g}"
        lines.append(f"| {s:g} | {_pm(v, k + '.val')} | {v[k + '.diverged']} | `{k}` |")
    lines += ["", "### Depth at initialisation (width 16, 8 layers)", "",
              "| placement | residual std: embeddings | last block | grad norm: block 0 | block 1 | last block | key |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for pos in ("pre", "post"):
        k = f"ch7.depth_init.{pos}.L{init_study.DEPTH_MAX}"
        lines.append(f"| {pos}-LN | {v[k + '.act_embed']:.4g} | {v[k + '.act_last']:.4g} | {v[k + '.grad_first']:.4g} | "
                     f"{v[k + '.grad_second']:.4g} | {v[k + '.grad_last']:.4g} | `{k}` |")
    lines += ["", f"### Depth: training ({init_study.DEPTH_TRAIN}, warmup {init_study.DEPTH_WARMUP} or 0)", "",
              "| setting | final val loss | diverged runs | clipped steps (fraction) | key |", "| --- | --- | --- | --- | --- |"]
    for key in init_study.depth_train_settings():
        lines.append(f"| {key.split('depth_train.')[1]} | {_pm(v, key + '.val')} | {v[key + '.diverged']} | "
                     f"{v[key + '.clipped_frac']:.3f} | `{key}` |")
    lines += ["", "### RMSNorm against LayerNorm (the default run)", "",
              "| norm | params | final val loss | key |", "| --- | --- | --- | --- |"]
    for norm in ("layernorm", "rmsnorm"):
        lines.append(f"| {norm} | {v[f'ch7.norm.{norm}.params']} | {_pm(v, f'ch7.norm.{norm}.val')} | `ch7.norm.{norm}` |")
    lines += [f"| paired difference (RMSNorm − LayerNorm) | | {_pm(v, 'ch7.norm.delta', '+.4f')} | `ch7.norm.delta` |", "",
              f"### Coordinate check (Adam, lr {init_study.COORD_LR}, constant, {init_study.COORD_STEPS} steps, batch {init_study.COORD_BATCH})", "",
              "RMS of one coordinate after the last step; ratio = width 128 / width 16.", "",
              "| parameterisation | quantity | width 16 | width 128 | ratio |", "| --- | --- | --- | --- | --- |"]
    for param in ("sp", "mup"):
        for k in init_study.COORD_KEYS:
            b = f"ch7.coord.{param}.{k}"
            lines.append(f"| {param} | {k} | {v[b + '.w16']:.4g} | {v[b + '.w128']:.4g} | {v[b + '.ratio']:.3g} |")
    lines += ["", f"### Learning rate against width ({WIDTH_TRAIN}; lrs {', '.join(f'{x:.3g}' for x in WIDTH_LRS)})", "",
              "Final validation loss, mean over seeds (– : a seed diverged).", ""]
    curves = results["curves"]
    for param in WIDTH_ARMS:
        c = curves[f"ch7.width.{param}"]
        lines += [f"**{param}**", "", "| width | " + " | ".join(f"lr {x:.3g}" for x in c["lrs"]) + " | best lr |",
                  "| --- |" + " --- |" * (len(c["lrs"]) + 1)]
        for w, row in zip(c["widths"], c["val_mean"]):
            cells = " | ".join("–" if m is None else f"{m:.4f}" for m in row)
            lines.append(f"| {w} | {cells} | {v[f'ch7.width.{param}.w{w}.best_lr']:.3g} |")
        lines += ["", f"Spread of the best lr across widths (max/min): {v[f'ch7.width.{param}.best_lr_spread']:.3g} "
                      f"(`ch7.width.{param}.best_lr_spread`)", "",
                  f"Transferring width 16's best lr ({v[f'ch7.width.{param}.base_lr']:.3g}): final val loss there, and its "
                  "excess over the width's best:", "", "| width | loss at width 16's best lr | excess | key |",
                  "| --- | --- | --- | --- |"]
        for w in c["widths"]:
            k = f"ch7.width.{param}.w{w}"
            if k + ".transfer_gap" in v:
                lines.append(f"| {w} | {_pm(v, k + '.at_base_lr')} | {v[k + '.transfer_gap']:.4f} | `{k}.transfer_gap` |")
        lines.append("")
    return lines
