# %% [markdown]
# # Chapter 6: Learning rate, schedules and batch size
#
# The chapter's experiments, run here with the code that measured them: the learning-rate ladder (nine
# rates two per decade, three seeds), the schedules and warmup (cosine, WSD, constant, without warmup,
# at a rate near the top of the ladder), the gradient noise scale at three checkpoints of the default
# run, the steps to a target loss against the batch size with its critical-batch fit, and the scaling
# rules for the rate when the batch grows. The tables are the ones on the results page; the charts are
# the chapter's. Then change a setting, and run the ladder at larger widths in PyTorch.
#
# Losses: every final loss is on the whole validation split (pylib.evaluation). The curves during a run,
# the ladder's chart and the steps to the target are on the trainer's fixed subset of validation windows
# (the page's live sweep scores the same subset). At the reduced size the final losses are on the
# split's first windows instead, and the tables say so.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (two seeds, 30-step rungs at batch 4, the schedules at
# batch 1, higher batch-study targets, 16-step scaling runs, the final loss on the validation split's first
# 64 windows): seconds, not minutes

# %%
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import ScalarFormatter

from experiments import ch6, common, notebook as nb

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## Every experiment of the chapter
#
# The three parts of `experiments/ch6.py`, one after the other (about three minutes at full size). The
# tables below are `ch6.markdown(results)`, the function that writes the chapter's section of results.md,
# with the paired verdicts of `pylib.compare`.

# %%
results = nb.run(ch6, corpus)
nb.show(ch6.markdown(results))
v, curves, settings = results["values"], results["curves"], results["settings"]
print("final losses on:", ch6.final_eval_text(results))

# %% [markdown]
# The ladder's rungs seed by seed (final loss, the arms its comparisons pair):

# %%
nb.show(nb.arms_table(v, [f"ch6.ladder.r{i}.final_val" for i in range(v["ch6.ladder.n_rates"])]))

# %% [markdown]
# ## The ladder
#
# Left: the final loss of each rung on the trainer's fixed subset (the chart the page draws; mean ± sd
# over seeds), with the good band shaded (within the band tolerance of the best rung, no divergence); a
# rung where a seed diverged is marked with a cross at the top, and listed below with the steps it
# diverged at. Right: each rung's
# validation loss during its run, on the same subset, mean over seeds (a rung with a diverged seed ends
# where that seed diverged).

# %%
lad, vc = curves["ch6.ladder"], curves["ch6.ladder.val_curves"]
fig, (ax, ax_c) = plt.subplots(1, 2, figsize=(12, 4.5))
ok = [i for i, m in enumerate(lad["final_mean"]) if m is not None]
lrs = np.array(lad["lrs"])
ax.errorbar(lrs[ok], [lad["final_mean"][i] for i in ok], yerr=[lad["final_sd"][i] for i in ok], fmt="o-", capsize=3,
            label=f"final loss ({lad['eval_windows']}-window subset)")
ax.axvspan(*lad["good_band"], color="green", alpha=0.12, label="good band (subset)")
top = max(lad["final_mean"][i] for i in ok)
bad = [i for i, n in enumerate(lad["diverged"]) if n]
ax.plot(lrs[bad], [top] * len(bad), "x", ms=10, color="red", label="a seed diverged")
ax.set_xscale("log")
ax.set(xlabel="peak learning rate", ylabel="final validation loss (subset, nats/token)",
       title=f"The ladder, {v['ch6.ladder.steps']} steps, {v['ch6.ladder.n_seeds']} seeds")
ax.legend(fontsize=8)
for lr, mean in zip(vc["lrs"], vc["mean"]):
    ax_c.plot(vc["steps"][:len(mean)], mean, label=f"lr {lr:g}")
ax_c.set(xlabel="step", ylabel=f"validation loss ({vc['eval_windows']}-window subset, nats/token)",
         title="Each rung during its run")
ax_c.legend(fontsize=7, ncol=2)
plt.tight_layout()
plt.show()
for i in bad:
    steps_at = ", ".join(str(d) for d in lad["diverged_at"][i] if d is not None)
    print(f"lr {lrs[i]:g}: {lad['diverged'][i]} of {len(lad['diverged_at'][i])} seeds diverged, at step {steps_at}")

# %% [markdown]
# ## Schedules and warmup
#
# Each arm's rate (left) and its validation loss during the run on the fixed subset (right, mean ± sd
# over seeds), for every arm whose seeds all trained; the table above says where the others diverged.

# %%
fig, (ax_lr, ax_v) = plt.subplots(1, 2, figsize=(12, 4.5))
for name in ch6.SCHEDULE_ARMS:
    c = curves.get(f"ch6.sched.{name}")
    if c is None or len(c["steps"]) < 2:  # a seed diverged before the first evaluation after step 0
        continue
    line, = ax_lr.plot(range(len(c["lr"])), c["lr"], label=name)
    nb.plot_band(ax_v, c["steps"], c["val_mean"], c["val_sd"], name, color=line.get_color())
ax_lr.set_yscale("log")
ax_lr.set(xlabel="step", ylabel="learning rate", title="The schedules")
ax_v.set(xlabel="step", ylabel=f"validation loss ({v['ch6.sched.eval_windows']}-window subset, nats/token)",
         title="Validation loss during the run")
ax_lr.legend(fontsize=8)
ax_v.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The gradient noise scale
#
# B_simple = tr(Σ) / |G|², estimated from batches of two sizes at three checkpoints of the default cosine
# run, mean ± sd over seeds (log scale): the batch size beyond which a bigger batch mostly averages away
# noise that was no longer the problem. It grows as the loss falls.

# %%
checkpoints = settings["ch6.schedules"]["noise_checkpoints"]
fig, ax = plt.subplots(figsize=(6, 4))
ax.errorbar(checkpoints, [v[f"ch6.noise.step{c}.b_simple.mean"] for c in checkpoints],
            yerr=[v[f"ch6.noise.step{c}.b_simple.sd"] for c in checkpoints], fmt="o-", capsize=3)
ax.set_yscale("log")
ax.set(xlabel="step of the default run", ylabel="B_simple (windows)",
       title=f"Noise scale, B = {v['ch6.noise.b_small']} and {v['ch6.noise.b_big']}, {v['ch6.noise.n_batches']} batches each")
plt.show()

# %% [markdown]
# ## Steps to a target loss against the batch size
#
# For each target on the fixed subset: the steps each batch size took to reach it (mean ± sd over seeds),
# and the fit S = S_min + E_min / B, whose ratio E_min / S_min is the critical batch B_crit. Below
# B_crit, doubling the batch nearly halves the steps; above it, the steps stop falling.

# %%
bc = curves["ch6.batch"]
B = np.array(bc["batch_sizes"], dtype=float)
grid = np.geomspace(B[0], B[-1], 100)
fig, ax = plt.subplots(figsize=(7, 4.5))
for j, target in enumerate(bc["targets"]):
    t = bc[f"t{j}"]
    ok = [i for i, m in enumerate(t["steps_mean"]) if m is not None]
    line = ax.errorbar(B[ok], [t["steps_mean"][i] for i in ok], yerr=[t["steps_sd"][i] for i in ok], fmt="o", capsize=3,
                       label=f"target {target} (B_crit {t['fit']['b_crit']:.1f})")
    ax.plot(grid, t["fit"]["s_min"] + t["fit"]["e_min"] / grid, "--", lw=1, color=line[0].get_color())
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.yaxis.set_major_formatter(ScalarFormatter())
ax.yaxis.set_minor_formatter(ScalarFormatter())
ax.set(xlabel="batch size B (windows)", ylabel=f"steps to the target ({bc['evaluation']})",
       title=f"Steps to a target loss, lr {v['ch6.batch.lr']} constant after warmup")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## The scaling rules
#
# Left: B × k windows for steps / k (the same tokens), with the rate multiplied by k (linear), by √k, or
# left as it is, mean ± sd over seeds of the final loss. Right: at the two largest k, the final loss
# against the rate's multiple of the base rate (the rate sweep).

# %%
sc = curves["ch6.scaling"]
base = settings["ch6.scaling"]["base"]
fig, (ax, ax_s) = plt.subplots(1, 2, figsize=(12, 4.5))
for rule in ch6.SCALING_RULES:
    ok = [i for i, m in enumerate(sc[f"{rule}_mean"]) if m is not None]
    ax.errorbar([sc["ks"][i] for i in ok], [sc[f"{rule}_mean"][i] for i in ok],
                yerr=[sc[f"{rule}_sd"][i] for i in ok], fmt="o-", capsize=3, label=rule)
ax.set_xscale("log", base=2)
ax.set(xlabel="k (batch × k, steps / k)", ylabel="final validation loss (nats/token)",
       title=f"Base B = {base['batch_size']}, lr {base['lr']}, {base['steps']} steps")
ax.legend(fontsize=8)
for k in ch6.SCALING_SWEEP_KS:
    s = sc["sweep"][f"k{k}"]
    ok = [i for i, m in enumerate(s["mean"]) if m is not None]
    ax_s.plot([s["factors"][i] for i in ok], [s["mean"][i] for i in ok], "o-", label=f"k = {k}")
    ax_s.axvline(k, ls=":", lw=1, color=ax_s.lines[-1].get_color())
ax_s.set_xscale("log", base=2)
ax_s.set(xlabel="rate ÷ base rate (dotted: the linear rule's k)", ylabel="final validation loss (nats/token)",
         title="The rate sweep at the largest k")
ax_s.legend(fontsize=8)
plt.tight_layout()
plt.show()
print("final losses on:", ch6.final_eval_text(results))

# %% [markdown]
# ## Change a setting
#
# Pick one of the scaling study's k and a multiple of the base rate of your own, and run it on the same
# seeds with the study's settings (`ch6.sweep_arm`: B × k windows, steps / k, the rate base × your
# multiple). The verdict pairs your runs with the linear rule at the same k (rate base × k), seed by seed
# (`pylib.compare`, a t-interval on the paired differences). With this many seeds a difference is often
# *unresolved*, and the notebook says so rather than calling a winner.

# %%
K = 8  # one of ch6.SCALING_KS: 1, 2, 4, 8, 16
FACTOR = 12  # the rate as a multiple of the base rate; the linear rule's is K

finals = ch6.sweep_arm(corpus, K, FACTOR)
mine = common.arm("mine.final_val", finals)
both = {**v, **mine}
linear = f"ch6.scaling.linear.k{K}.final_val"
print(f"k = {K}: rate {base['lr'] * FACTOR:g} (base × {FACTOR}) against the linear rule's {base['lr'] * K:g} (base × {K})")
nb.show(nb.arms_table(both, ["mine.final_val", linear]))
if None in finals.values() or v[f"{linear}.mean"] is None:
    print("a run diverged: no paired comparison")
else:
    nb.show(nb.verdict(both, "mine.final_val", linear, margin=ch6.LOSS_MARGIN))

# %% [markdown]
# ## Beyond the toy: the ladder at larger widths, in PyTorch
#
# The same ladder on wider members of the model family (`companions/beyond_ch6.py`, with
# `companions/beyond.py`'s trainer: pylib's initialisation, chapter 1's AdamW, warmup, cosine and
# clipping), everything but the width as the course model has it (1 layer, 2 heads, context 64, batch
# 16), one seed per rung, so no verdict here: neighbouring rungs can swap on another seed. Where does
# the best rate land as the model widens? On a GPU (CUDA): widths 16 to 512, rates 0.0003 to 1, 500
# steps; on a CPU: widths 16, 64 and 128, rates 0.001 to 0.3, the chapter's 200 steps (about a minute on
# a laptop, more on a busy machine); at the reduced size widths 16 and 32, two rates, 10 steps. The
# losses are on a fixed subset of 64 evenly spaced validation windows. The numbers are yours; no
# chapter quotes them.

# %%
from tqdm.auto import tqdm

from companions import beyond_ch6

dev = nb.device()
widths, rates, steps = beyond_ch6.plan(dev, small=SMALL)
threads = 1 if SMALL else None  # the reduced size's tiny runs: one CPU thread (more only add overhead there)
wide = beyond_ch6.ladders(corpus, widths, rates, steps, dev=dev, progress=tqdm, threads=threads)
print(f"device {wide['device']}; {steps} steps per rung; loss on {wide['eval']}")
lines = ["| width | parameters | " + " | ".join(f"lr {lr:g}" for lr in rates) + " | best rate |",
         "| --- | --- |" + " --- |" * (len(rates) + 1)]
for w in widths:
    cells = ["diverged" if r["diverged"] else f"{r['val']:.3f}" for r in wide["runs"][w].values()]
    best = wide["best"][w]
    lines.append(f"| {w} | {wide['params'][w]:,} | " + " | ".join(cells) + f" | {'–' if best is None else f'{best:g}'} |")
nb.show(lines)
print(f"the toy's measured ladder (pylib, {v['ch6.ladder.n_seeds']} seeds): best rate {v['ch6.ladder.best_lr']:g}")

# %%
fig, ax = plt.subplots(figsize=(7, 4.5))
for w in widths:
    ok = [lr for lr, r in wide["runs"][w].items() if not r["diverged"]]
    line, = ax.plot(ok, [wide["runs"][w][lr]["val"] for lr in ok], "o-", label=f"width {w}")
    if wide["best"][w] is not None:
        ax.plot([wide["best"][w]], [wide["runs"][w][wide["best"][w]]["val"]], "*", ms=14, color=line.get_color())
ax.set_xscale("log")
ax.set(xlabel="peak learning rate", ylabel="final validation loss (64-window subset, nats/token)",
       title=f"The ladder by width, {steps} steps, on {wide['device']} (star: best rung)")
ax.legend(fontsize=8)
plt.show()
