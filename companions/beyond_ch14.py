"""Beyond the toy, chapter 14: the chapter's IsoFLOP method on wider members of its family, in PyTorch.

The family is the chapter's (pylib.studies.scaling.width_config: one layer, two heads, context 64; only
the width changes), trained by companions.beyond (pylib's initialisation, chapter 1's loop in PyTorch)
with the sweep's recipe: peak learning rate 1e-2, cosine to each run's own last step, scaling.warmup_for's
warmup, and as many steps as the budget buys the width (scaling.steps_for_budget: FLOPs counted by
pylib.systems.flops, attention included). The fits are the chapter's own code: scaling.analyse (a
parabola in ln N and one in ln D per budget, power laws through the minima, the parametric form).

The loss of a run is the mean cross-entropy on eval_windows fixed, evenly spaced windows of the
validation split (companions.beyond.evaluate): a subset, not the whole split the chapter scores on.

GRIDS holds three sizes. "cuda": widths 24 to 512 at three budgets, with batches of 64 windows instead
of the chapter's 16 so that a GPU has work to do (~28,000 steps, a few minutes on one GPU). "cpu": the
chapter's three largest budgets and widths 6 to 48 at its batch of 16 (~7,400 steps, about a minute of
one CPU thread): the chapter's own range in PyTorch's engine, one seed, too small a grid to trust.
"small": the notebooks' tests, seconds. The corpus's training split is about 4.2 million tokens, so the
smallest widths at the largest GPU budget see it several times: every run reports its epochs. Widths far
beyond a budget's minimum (512 at the largest GPU budget) only show the profile's far side: a budget at
which width 512 is optimal is far beyond what a notebook spends.

    from companions import beyond_ch14
    runs = beyond_ch14.sweep(corpus, beyond_ch14.GRIDS["cpu"])
    fit = beyond_ch14.fit(runs)   # scaling.analyse on the seed means
    beyond_ch14.table(runs, fit)
"""

import numpy as np

from companions import beyond
from pylib.studies import scaling

GRIDS = {
    "cuda": {"budgets": {6e11: (24, 32, 48, 64, 96), 2.4e12: (32, 48, 64, 96, 128, 192),
                         9.6e12: (64, 96, 128, 192, 256, 384, 512)},
             "seeds": (0,), "batch_size": 64, "eval_windows": 1024},
    "cpu": {"budgets": {6e9: (6, 8, 12, 16, 24), 1.2e10: (8, 12, 16, 24, 32), 2.4e10: (8, 12, 16, 24, 32, 48)},
            "seeds": (0,), "batch_size": scaling.BATCH, "eval_windows": 256},
    "small": {"budgets": {5e8: (8, 16, 32), 1e9: (8, 16, 32)}, "seeds": (0,), "batch_size": scaling.BATCH,
              "eval_windows": 32},
}
LR = 1e-2  # the chapter's peak learning rate at every width: not tuned per size, as in the chapter


def size_of(width):
    """The family's member of this width, as companions.beyond's Size."""
    return beyond.Size(n_embd=int(width), n_layer=1, n_head=scaling.N_HEAD, block_size=64)


def one_run(corpus, width, budget, seed=0, batch_size=scaling.BATCH, dev=None, eval_windows=256, lr=LR):
    """One run of the width at the budget: {"budget", "width", "seed", "n", "d", "steps", "epochs", "loss",
    "seconds", "device"} (loss None if the run diverged)."""
    from pylib import model, train
    cfg = scaling.width_config(width, corpus.vocab.size)
    steps = scaling.steps_for_budget(cfg, budget, batch_size)
    run = beyond.train(corpus, size_of(width), steps=steps, batch_size=batch_size, lr=lr, seed=seed, dev=dev,
                       eval_every=steps, eval_windows=eval_windows,
                       train_cfg=train.TrainConfig(warmup_steps=scaling.warmup_for(steps)))
    d = scaling.tokens(cfg, steps, batch_size)
    return {"budget": budget, "width": width, "seed": seed, "n": model.count_params(cfg), "d": d, "steps": steps,
            "epochs": d / corpus.train.size, "loss": run["val"], "seconds": run["seconds"], "device": run["device"],
            "eval": run["eval"]}


def sweep(corpus, grid, dev=None, progress=None):
    """Every (budget, width, seed) of the grid, in order: a list of one_run's results."""
    jobs = [(b, w, s) for b, widths in grid["budgets"].items() for w in widths for s in grid["seeds"]]
    loop = progress(jobs, desc=f"IsoFLOP sweep, {beyond.device(dev)}", unit="run") if progress else jobs
    return [one_run(corpus, w, b, s, grid["batch_size"], dev, grid["eval_windows"]) for b, w, s in loop]


def points(runs):
    """The fits' input, as experiments.ch14.points gives it: each (budget, width)'s mean loss over its
    seeds, leaving out a point with a diverged seed."""
    by = {}
    for r in runs:
        by.setdefault((r["budget"], r["width"]), []).append(r)
    return [{"budget": b, "width": w, "n": rs[0]["n"], "d": rs[0]["d"],
             "loss": float(np.mean([r["loss"] for r in rs]))}
            for (b, w), rs in by.items() if all(r["loss"] is not None for r in rs)]


def fit(runs):
    """scaling.analyse on the seed means, over the budgets with at least three widths left: {"optima"
    (budget: scaling.isoflop_optimum's result, or None without a minimum), "a", "k_n", "b", "k_d",
    "loss_exp", "k_loss" (when two budgets or more have a minimum), "chinchilla"}; {"optima": {}} when
    fewer than five points are left (the parametric fit needs five)."""
    pts = points(runs)
    counts = {}
    for p in pts:
        counts[p["budget"]] = counts.get(p["budget"], 0) + 1
    pts = [p for p in pts if counts[p["budget"]] >= 3]
    return scaling.analyse(pts) if len(pts) >= 5 else {"optima": {}}


def table(runs, fitted):
    """Markdown lines: every run, each budget's minimum, and the exponents when there are two minima."""
    lines = [f"Device {runs[0]['device']}; loss on {runs[0]['eval']} (a subset, not the whole split).", "",
             "| budget (FLOPs) | width | N (params) | D (tokens) | steps | epochs | seed | loss | seconds |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        loss = "diverged" if r["loss"] is None else f"{r['loss']:.3f}"
        lines.append(f"| {r['budget']:.2g} | {r['width']} | {r['n']:,} | {r['d']:,} | {r['steps']:,} | "
                     f"{r['epochs']:.2f} | {r['seed']} | {loss} | {r['seconds']:.1f} |")
    lines += ["", "| budget | N_opt (parabola in ln N) | D_opt (parabola in ln D) | D/N | loss at the minimum | "
                  "inside the widths run |", "| --- | --- | --- | --- | --- | --- |"]
    for b, o in sorted(fitted["optima"].items()):
        lines.append(f"| {b:.2g} | no minimum | | | | |" if o is None else
                     f"| {b:.2g} | {o['n']:,.0f} | {o['d']:,.0f} | {o['d'] / o['n']:.0f} | {o['loss']:.3f} | {o['inside']} |")
    lines.append("")
    if "a" in fitted:
        lines.append(f"N_opt ∝ C^{fitted['a']:.2f}, D_opt ∝ C^{fitted['b']:.2f} (a + b = {fitted['a'] + fitted['b']:.2f}); "
                     f"the minima's loss ∝ C^{fitted['loss_exp']:.3f}.")
    else:
        lines.append("Fewer than two budgets have a minimum: no exponent.")
    if "chinchilla" in fitted:
        c = fitted["chinchilla"]
        lines.append(f"Parametric form (least squares): E = {c['E']:.3f}, α = {c['alpha']:.2f}, β = {c['beta']:.2f}, "
                     f"rms residual {c['rmse']:.4f} nats.")
    return lines
