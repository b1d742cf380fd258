# %% [markdown]
# # Chapter 14: Scaling laws
#
# The chapter's measurement, run here with the code that made it (`experiments/ch14.py`, one part): a toy
# IsoFLOP sweep of the course model's family (one layer, two heads, context 64; only the width changes) at
# four compute budgets, several widths per budget and several seeds per width; the fits (a parabola per
# budget in ln N and in ln D, power laws through the minima, Chinchilla's parametric form); then a
# prediction for a larger budget, written down before that run is trained, and the run itself. The tables
# are the ones on the results page; the charts are the chapter's IsoFLOP explorer (profiles and minima) and
# the held-out prediction against its outcome. Then change a setting, and run the same method in PyTorch on
# wider models.
#
# Losses: every final loss is on the whole validation split (pylib.evaluation), as `build.py --measure`
# scores it. At the reduced size (SMALL) it is on the split's first windows instead, the budgets are tiny and
# the tables say so; those numbers say nothing about scaling, they only show that the notebook runs.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (two seeds, four tiny budgets whose runs take a few to
# a few hundred steps, the final loss on the validation split's first 256 windows, 2 bootstrap refits): seconds

# %%
import matplotlib.pyplot as plt
import numpy as np

from experiments import ch14, common, notebook as nb
from pylib.studies import scaling

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The sweep, the fits and the held-out run
#
# `experiments/ch14.py`'s one part, `part_sweep` (a few minutes of one core at full size: every width of every
# budget with each seed, the held-out run with each seed, and 200 refits of the parametric form for its
# bootstrap). It prints the prediction to the log before the
# held-out run is trained, as the measurement does. The tables below are `ch14.markdown(results)`, the
# function that writes the chapter's section of results.md.

# %%
results = nb.run(ch14, corpus)
nb.show(ch14.markdown(results))

# %% [markdown]
# Every width's final loss, seed by seed, at the sweep's last budget (`b4`, the largest at full size; the
# reduced size's budgets run the other way), and the exponents $a$ and $b$
# fitted on each seed's sweep alone. Then the chapter's paired comparisons (`pylib.compare`, a t-interval
# on the per-seed differences, margin 0.02 nats): near a minimum the profile is flat, and neighbouring
# widths are often within the seeds' spread. The chapter also corrects for its three comparisons; these
# verdicts are the uncorrected ones.

# %%
v = results["values"]
sweep = results["settings"]["ch14.sweep"]
budgets = sweep["budgets"]
widths_b4 = sweep["widths"][str(budgets[3])]
print(f"b4 = {budgets[3]:.2g} FLOPs; final loss on {sweep['final_eval']}")
nb.show(nb.arms_table(v, [f"ch14.b4.w{w}.final_val" for w in widths_b4]))
nb.show(nb.arms_table(v, ["ch14.fit.a", "ch14.fit.b"], ".3f"))
for a, b in [("ch14.b4.w12.final_val", "ch14.b4.w8.final_val"), ("ch14.b4.w12.final_val", "ch14.b4.w16.final_val"),
             ("ch14.b1.w16.final_val", "ch14.b1.w8.final_val")]:
    nb.show(nb.verdict(v, a, b, margin=0.02))

# %% [markdown]
# ## The IsoFLOP profiles and their minima
#
# The chapter's explorer, drawn from `results["curves"]["ch14.isoflop"]`. Left: each budget's seed means
# (larger dots), its seeds (small dots), the parabola in ln N that `scaling.isoflop_optimum` fits through the
# means, and its minimum (×). Right: those minima against compute in log-log, the straight line
# $N_\text{opt} = k_n C^a$ through them, extended to the held-out budget, where the star is the predicted
# $N_\text{opt}$ and the square the width that was run. The parabolas are refitted here on the curve's
# means, which results.json rounds to five decimals; the fits in the tables used the unrounded values.

# %%
curve = results["curves"]["ch14.isoflop"]
series = sorted(curve["series"], key=lambda s: s["budget"])
colors = plt.cm.viridis(np.linspace(0, 0.85, len(series)))
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
minima = []
for s, color in zip(series, colors):
    n, d, mean = (np.asarray(s[k], float) for k in ("n", "d", "loss_mean"))
    per_seed = np.asarray(s["loss_per_seed"], float)  # (widths, seeds)
    left.scatter(np.repeat(n, per_seed.shape[1]), per_seed.ravel(), s=8, color=color, alpha=0.5)
    left.scatter(n, mean, s=30, color=color, label=f"{s['budget']:.2g} FLOPs")
    opt = scaling.isoflop_optimum(n, d, mean)
    if opt is not None:
        grid = np.linspace(np.log(n.min()) - 0.3, np.log(n.max()) + 0.3, 100)
        left.plot(np.exp(grid), np.polyval(opt["coef_n"], grid), color=color, lw=1)
        left.scatter([opt["n"]], [opt["loss"]], marker="x", s=60, color=color)
        minima.append((s["budget"], opt["n"], color))
loss_label = f"final loss, nats/token\n(on {sweep['final_eval']})"
left.set(xscale="log", xlabel="N (parameters)", ylabel=loss_label, title="IsoFLOP profiles")
left.legend(fontsize=8)
held = curve["heldout"]
c_line = np.geomspace(min(budgets), held["budget"], 50)
right.plot(c_line, v["ch14.fit.k_n"] * c_line ** v["ch14.fit.a_means"], color="grey",
           label=f"N_opt ∝ C^{v['ch14.fit.a_means']:.2f}")
right.scatter([c for c, _, _ in minima], [n for _, n, _ in minima], color=[k for _, _, k in minima], zorder=3,
              label="each budget's minimum")
right.scatter([held["budget"]], [v["ch14.predict.n_opt"]], marker="*", s=150, color="C3", label="predicted N_opt")
right.scatter([held["budget"]], [held["n"]], marker="s", s=40, color="C1", label=f"width {v['ch14.predict.width']}, run")
right.set(xscale="log", yscale="log", xlabel="compute C (FLOPs)", ylabel="N_opt (parameters)", title="Minima against compute")
right.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The prediction, and what the run measured
#
# The minima's losses against compute, the power law $L_\text{opt} = k\,C^{\gamma}$ through them extended
# to the held-out budget, and the held-out run: its seeds (dots) and their mean against the two predictions
# written before it was trained, the power law's and the parametric form's. The measured losses are on the
# same evaluation as the sweep's.

# %%
fig, ax = plt.subplots(figsize=(7, 4.5))
opt_c = [b for b in budgets if v[f"ch14.opt.{ch14.budget_tag(budgets.index(b))}.found"]]
opt_loss = [v[f"ch14.opt.{ch14.budget_tag(budgets.index(b))}.loss"] for b in opt_c]
ax.scatter(opt_c, opt_loss, color="C0", zorder=3, label="each budget's minimum (parabola)")
ax.plot(c_line, v["ch14.fit.k_loss"] * c_line ** v["ch14.fit.loss_exp"], color="C0", lw=1,
        label=f"power law, γ = {v['ch14.fit.loss_exp']:.3f}")
ax.scatter([held["budget"]] * len(held["loss_per_seed"]), held["loss_per_seed"], s=12, color="C1", label="held-out run, each seed")
ax.scatter([held["budget"]], [v["ch14.heldout.final_val.mean"]], marker="s", s=60, facecolors="none", edgecolors="C1",
           label="held-out run, mean")
ax.scatter([held["budget"]], [v["ch14.predict.loss_power_law"]], marker="*", s=120, color="C0", label="predicted (power law)")
ax.scatter([held["budget"]], [v["ch14.predict.loss_parametric"]], marker="*", s=120, color="C2",
           label="predicted (parametric form)")
ax.set(xscale="log", xlabel="compute C (FLOPs)", ylabel=loss_label, title="The held-out prediction, checked")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# The chapter also bootstraps the power law's prediction over seeds (each point's loss the mean of its
# seeds drawn with replacement, every fit redone); `build.py` computes it from results.json, and here the
# same function (`ch14.bootstrap_over_seeds`) runs on this notebook's curve (50 resamples at the reduced
# size). With few seeds to draw from, a bootstrap is somewhat too narrow.

# %%
boot = ch14.bootstrap_over_seeds(curve, resamples=common.scaled(ch14.BOOTSTRAP_RESAMPLES, 50))
print(f"{boot['ch14.boot.kept']} of {boot['ch14.boot.resamples']} resamples had two minima or more")
for name in ("a", "b", "power_law"):
    print(f"{name}: 95% {boot[f'ch14.boot.{name}.low']:.3f} to {boot[f'ch14.boot.{name}.high']:.3f}")
print(f"the held-out mean {v['ch14.heldout.final_val.mean']:.3f} lies "
      + scaling.position(v["ch14.heldout.final_val.mean"], boot["ch14.boot.power_law.low"], boot["ch14.boot.power_law.high"])
      + " the power law's interval")

# %% [markdown]
# ## Change a setting
#
# Run a width the sweep did not run at its last budget (`b4`), on the same seeds (`ch14.one_run`: the sweep's
# recipe and evaluation), and see where it falls against that budget's parabola and against width 12, the
# chapter's best width there. The verdict pairs your width with width 12 seed by seed (`pylib.compare`):
# with this many seeds, a difference near the minimum is often *unresolved*, and the notebook says so
# rather than calling a winner.

# %%
WIDTH = 20  # try 10, 14, 28 (an even width: two heads)

budget = budgets[3]
runs = {seed: ch14.one_run(corpus, WIDTH, budget, seed) for seed in common.progress(ch14.seeds(), desc=f"width {WIDTH}")}
mine = common.arm("mine.final_val", {s: r[3] for s, r in runs.items()})
both = {**v, **mine}
n_mine, steps_mine = runs[ch14.seeds()[0]][0], runs[ch14.seeds()[0]][2]
s4 = next(s for s in curve["series"] if s["budget"] == budget)
opt = scaling.isoflop_optimum(np.asarray(s4["n"], float), np.asarray(s4["d"], float), np.asarray(s4["loss_mean"], float))
print(f"width {WIDTH}: {n_mine:,} parameters, {steps_mine} steps at {budget:.2g} FLOPs; loss on {sweep['final_eval']}")
if opt is not None:
    print(f"the budget's parabola put it at {np.polyval(opt['coef_n'], np.log(n_mine)):.3f}; "
          f"measured {mine['mine.final_val.mean']:.3f} (mean over seeds)")
nb.show(nb.arms_table(both, ["mine.final_val", "ch14.b4.w12.final_val"]))
nb.show(nb.verdict(both, "mine.final_val", "ch14.b4.w12.final_val", margin=0.02))

# %% [markdown]
# ## Beyond the toy: the IsoFLOP method on wider models, in PyTorch
#
# The same method on wider members of the same family (`companions/beyond_ch14.py`, with
# `companions/beyond.py`'s trainer: pylib's initialisation, chapter 1's loop in PyTorch, the sweep's recipe
# with each run as long as its budget buys), fitted with the chapter's own code (`scaling.analyse`: the
# parabolas, the power laws through the minima, the parametric form). On a GPU (CUDA) the widths run from
# 24 to 512 at three budgets, with batches of 64 windows (a few minutes); on a CPU the grid is the chapter's
# three largest budgets with widths 6 to 48, one seed, about a minute of one thread (more on a busy
# machine); at the reduced size a tiny one. Each loss is on a fixed subset of evenly spaced validation
# windows (the count is printed), not the whole split.
#
# Say it plainly: the CPU grid is far too small to trust. One seed per point, widths the toy already
# covers, three budgets: its exponents are as uncertain as the chapter's, or more, and a profile with no
# minimum is a likely outcome. The GPU grid reaches widths the toy cannot, but its widest models are likely
# far past their budget's minimum (they show the profile's far side), its smallest widths at the largest
# budget repeat the training split several times (the table's epochs), one seed is still one seed, and the
# learning rate is the chapter's 0.01 at every width, not tuned per width. These numbers are yours; no
# chapter quotes them.

# %%
import torch

from companions import beyond_ch14

DEVICE = nb.device()
THREADS = 1  # torch's CPU threads; more on an idle many-core machine
SEEDS = None  # None: the grid's seeds (one); e.g. (0, 1) for two seeds per point at twice the time
if DEVICE == "cpu":
    torch.set_num_threads(THREADS)
grid = dict(beyond_ch14.GRIDS["small" if SMALL else DEVICE], **({"seeds": SEEDS} if SEEDS else {}))
print(f"device {DEVICE}" + (f", {torch.get_num_threads()} CPU threads" if DEVICE == "cpu" else "")
      + f"; grid {'small' if SMALL else DEVICE}: {len(grid['budgets'])} budgets, seeds {grid['seeds']}, "
      f"batch {grid['batch_size']}, loss on {grid['eval_windows']} validation windows")
wide_runs = beyond_ch14.sweep(corpus, grid, dev=DEVICE, progress=common.progress)
wide_fit = beyond_ch14.fit(wide_runs)
nb.show(beyond_ch14.table(wide_runs, wide_fit))

# %%
pts = beyond_ch14.points(wide_runs)
wide_budgets = sorted({p["budget"] for p in pts})
colors = plt.cm.plasma(np.linspace(0, 0.8, len(wide_budgets)))
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
for b, color in zip(wide_budgets, colors):
    ps = sorted((p for p in pts if p["budget"] == b), key=lambda p: p["n"])
    n = np.array([p["n"] for p in ps], float)
    left.plot(n, [p["loss"] for p in ps], "o", color=color, label=f"{b:.2g} FLOPs")
    opt = wide_fit["optima"].get(b)
    if opt is not None:
        grid_n = np.linspace(np.log(n.min()) - 0.3, np.log(n.max()) + 0.3, 100)
        left.plot(np.exp(grid_n), np.polyval(opt["coef_n"], grid_n), color=color, lw=1)
        left.scatter([opt["n"]], [opt["loss"]], marker="x", s=60, color=color)
left.set(xscale="log", xlabel="N (parameters)",
         ylabel=f"final loss, nats/token\n(on {grid['eval_windows']} evenly spaced validation windows)",
         title=f"IsoFLOP profiles in PyTorch ({DEVICE})")
left.legend(fontsize=8)
color_of = dict(zip(wide_budgets, colors))
found = [(b, o["n"], color_of[b]) for b, o in sorted(wide_fit["optima"].items()) if o is not None]
if found:
    right.scatter([b for b, _, _ in found], [n for _, n, _ in found], color=[k for _, _, k in found], zorder=3,
                  label="each budget's minimum")
if "a" in wide_fit:
    c_line = np.geomspace(min(wide_budgets), max(wide_budgets), 50)
    right.plot(c_line, wide_fit["k_n"] * c_line ** wide_fit["a"], color="grey", label=f"N_opt ∝ C^{wide_fit['a']:.2f}")
right.set(xscale="log", yscale="log", xlabel="compute C (FLOPs)", ylabel="N_opt (parameters)",
          title="Minima against compute" + ("" if "a" in wide_fit else ": fewer than two minima"))
if found:
    right.legend(fontsize=8)
plt.tight_layout()
plt.show()
