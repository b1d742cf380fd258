# %% [markdown]
# # Chapter 15: Running a job
#
# The chapter's measured parts, run here with the code that measured them (`experiments/ch15.py`): resuming
# the default run from a checkpoint with and without AdamW's state; replaying chapter 8's bad stretch from a
# checkpoint on the same and on other batches; the goodput simulation against Young's and Daly's
# intervals; the health checks (overfitting one batch, the entropy floor of a Markov chain); and PyTorch's
# distributed checkpoint (DCP) saving an FSDP2-sharded run on one number of processes and loading it on
# another. Then the tables with each seed's values and the paired verdicts, the chapter's charts, and a
# checkpoint interval of your own.
#
# Losses: the resumes' final losses are scored on the whole validation split (`pylib.evaluation`, the last
# record's `val_full`); the resume and replay curves are batch losses (each step's training batch, the
# same batches in both arms); the steps to the target are read from the trainer's fixed 128-window
# validation subset; the Markov chain's losses are on its own held-out split (the final one whole, the curve
# on the trainer's 128-window subset of it).

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (runs of 40 steps saved at step 20, so the target is
# out of reach; 2 seeds for the replay and the health checks, 3 for the resume; DCP on 2 then 1 process).
# Its largest costs are the resume's six whole-split evaluations and 3 processes that import torch (~2 s of CPU each)

# %%
import matplotlib.pyplot as plt
import matplotlib.ticker as mticker

from experiments import ch15, notebook as nb

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The measurements
#
# Every part, one after the other (at full size a few minutes on a laptop, most of it the resume's runs and
# the two launches of PyTorch's processes). The tables are `ch15.markdown(results)`, the chapter's section
# of results.md, with the paired verdicts of `pylib.compare`.

# %%
results = nb.run(ch15, corpus)
v, settings = results["values"], results["settings"]
nb.show(ch15.markdown(results))

# %% [markdown]
# ## Each seed, and the verdicts
#
# The arms the chapter compares, seed by seed. The verdicts pair the seeds (`pylib.compare`, a t-interval
# on the per-seed differences): *higher* or *lower* when the interval excludes zero, *null* when it lies
# inside the margin chosen before measuring, *unresolved* when these seeds cannot tell. The chapter also
# corrects its family of comparisons for their number (Holm), which can turn a nominal verdict into
# *unresolved*; the verdicts here are the nominal ones.

# %%
nb.show(nb.arms_table(v, ["ch15.resume.no_opt.first_update", "ch15.resume.proper.first_update"]))
nb.show(nb.verdict(v, "ch15.resume.no_opt.first_update", "ch15.resume.proper.first_update"))
nb.show(nb.arms_table(v, ["ch15.resume.no_opt.excess_max", "ch15.resume.proper.excess_max",
                          "ch15.resume.early.no_opt.excess_max", "ch15.resume.early.proper.excess_max"]))
nb.show(nb.verdict(v, "ch15.resume.no_opt.excess_max", "ch15.resume.proper.excess_max"))
nb.show(nb.verdict(v, "ch15.resume.early.no_opt.excess_max", "ch15.resume.early.proper.excess_max"))
nb.show(nb.arms_table(v, ["ch15.resume.no_opt.final_val", "ch15.resume.proper.final_val"]))
nb.show(nb.verdict(v, "ch15.resume.no_opt.final_val", "ch15.resume.proper.final_val", margin=ch15.MARGIN))
nb.show(nb.arms_table(v, ["ch15.replay.same.spike", "ch15.replay.other.spike"]))
nb.show(nb.verdict(v, "ch15.replay.same.spike", "ch15.replay.other.spike"))

# %% [markdown]
# ## Resuming with and without the optimiser state
#
# The checkpoint widget's curve: the batch loss around the resume, the mean over the seeds with a band of
# ±1 sd, for the proper resume (AdamW's state loaded) and the resume from the weights alone (m = v = 0,
# t = 0). Before the resume the two are the same run. Both arms read the same batches, so their difference
# is the missing state, not the data.

# %%
r = settings["resume"]
fig, ax = plt.subplots(figsize=(8, 4))
for name, label in (("proper", "proper resume"), ("no_opt", "weights only (no optimiser state)")):
    cv = results["curves"][f"ch15.resume.{name}"]
    nb.plot_band(ax, cv["steps"], cv["loss_mean"], cv["loss_sd"], label)
ax.axvline(r["at_step"], color="grey", ls="--", lw=1)
ax.text(r["at_step"], ax.get_ylim()[1], " checkpoint", va="top", fontsize=8, color="grey")
ax.set(xlabel="step", ylabel="batch loss (nats/token)",
       title=f"saved at step {r['at_step']} of {r['steps']}, seeds {', '.join(map(str, r['seeds']))}")
ax.legend()
plt.show()

# %% [markdown]
# ## Replaying chapter 8's bad stretch
#
# The replay widget's question. From a checkpoint taken before the stretch of repeated-character batches
# (shaded), one replay reads the same batches and one reads other batches; each line is one seed's batch
# loss. The same batches give the original run again, spike and all; other batches give no spike.

# %%
rp = settings["replay"]
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, name in zip(axes, ("same", "other")):
    cv = results["curves"][f"ch15.replay.{name}"]
    for key in (k for k in cv if k.startswith("loss_")):
        ax.plot(cv["steps"], cv[key], lw=1, label=f"seed {key.removeprefix('loss_')}")
    ax.axvspan(rp["inject_step"] - 0.5, rp["inject_step"] + rp["repeats"] - 0.5, color="red", alpha=0.15, lw=0,
               label="bad stretch")
    ax.set(xlabel="step", title=f"replayed on {'the same' if name == 'same' else 'other'} batches")
axes[0].set_ylabel("batch loss (nats/token)")
axes[1].legend(*axes[0].get_legend_handles_labels(), fontsize=7, ncol=2, loc="lower left")
plt.show()

# %% [markdown]
# ## Goodput against the checkpoint interval
#
# The goodput widget: the simulated share of useful time (dots, `pylib.systems.goodput`, one simulated job
# per interval) and the exact expectation (line), on the chapter's grid of intervals a factor √2 apart,
# with Young's interval, Daly's and the exact optimum marked. Left: a checkpoint cost far below the mean
# time between failures; right: Daly's setting, where it is not.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for ax, name in zip(axes, ("small", "daly")):
    g, cv = ch15.GOODPUT[name], results["curves"][f"ch15.goodput.{name}"]
    ax.plot(cv["tau"], cv["expected"], "-", color="C0", label="expected")
    ax.plot(cv["tau"], cv["simulated"], "o", color="C1", label="simulated")
    for key, style, colour in (("young", "--", "C2"), ("daly", ":", "C3"), ("optimum", "-.", "black")):
        ax.axvline(v[f"ch15.goodput.{name}.{key}"], ls=style, color=colour, lw=1, label=key)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(mticker.NullFormatter())
    ax.set(xlabel="checkpoint interval τ (minutes)", ylabel="goodput (share of time useful)",
           title=f"δ = {g['delta']}, M = {g['M']}, R = {g['R']} min")
    ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The entropy floor
#
# The health check with a known answer: the default model trained on a Markov chain whose entropy rate is
# known. The curve is the loss on the trainer's 128-window subset of the chain's held-out split (mean over
# the seeds); the dashed line is the floor no model can beat in expectation.

# %%
mk, h = results["curves"]["ch15.health.markov"], settings["health"]
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(mk["steps"], mk["val_mean"], marker=".", label="held-out loss (128-window subset, mean over seeds)")
ax.axhline(mk["entropy"], ls="--", color="grey", label=f"entropy rate {mk['entropy']:.3f} nats/token")
ax.set(xlabel="step", ylabel="loss (nats/token)", title=f"a Markov chain, {h['markov_tokens']:,} training tokens")
ax.legend(loc="upper right")
plt.show()

# %% [markdown]
# ## Change a setting
#
# Checkpoint at a multiple of Young's interval in Daly's setting (δ = 5 min, M = 15 min, R = 10 min: a
# machine that fails every quarter hour), and compare the simulated goodput with Young's interval over
# several simulation seeds, each a job of the chapter's length. This calls `pylib.systems.goodput`'s
# `goodput_sweep` with the chapter's settings (`ch15.GOODPUT`); each interval of a seed gets its own stream of
# failures, so the pairing by seed removes little. The margin, 0.005 of goodput, is fixed here before
# running. With few seeds a small difference is *unresolved*: the expected goodputs in the last column
# say which way the exact model leans.

# %%
from experiments.common import arm, progress, scaled
from pylib.systems import goodput

FACTOR = 1.5  # the interval as a multiple of Young's; try 0.5, 0.7 or 2.0

g = ch15.GOODPUT["daly"]
young = goodput.young_interval(g["delta"], g["M"])
seeds = scaled(tuple(range(8)), (0, 1, 2))
sims = {"mine": {}, "young": {}}
for seed in progress(seeds, desc=f"{FACTOR} × Young's interval", unit="seed"):
    sweep = goodput.goodput_sweep([young * FACTOR, young], g["delta"], g["M"], g["R"], g["work_in_M"] * g["M"], seed=seed)
    sims["mine"][seed], sims["young"][seed] = sweep["simulated"]
mine = {**arm("mine.goodput", sims["mine"]), **arm("young.goodput", sims["young"])}
nb.show(nb.arms_table(mine, ["mine.goodput", "young.goodput"]))
nb.show(nb.verdict(mine, "mine.goodput", "young.goodput", margin=0.005))
print(f"expected goodput: {goodput.expected_goodput(young * FACTOR, g['delta'], g['M'], g['R']):.4f} at τ = "
      f"{young * FACTOR:.2f} min, {goodput.expected_goodput(young, g['delta'], g['M'], g['R']):.4f} at Young's {young:.2f} min")
