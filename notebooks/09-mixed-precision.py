# %% [markdown]
# # Chapter 9: Mixed precision
#
# The chapter's experiments, run here with the code that measured them (`experiments/ch9.py`): the seven
# recipes, from float32 to FP8, each trained with the default model and run over the course's seeds (stochastic
# rounding and float32 over more seeds); the one-step comparison of each recipe with float32 on a fixed batch;
# the quantised gradients; and PyTorch's own engine (`companions/ch9_autocast.py`): one step under
# `torch.autocast`, `torch.amp.GradScaler` against pylib's loss scaler, and the course model trained in
# float16. The tables are the ones on the results page; the charts are the chapter's widgets, drawn from the
# measured curves. Then change a setting, and train a wider model in PyTorch's mixed precision.
#
# Losses: each recipe's final validation loss is scored in float32 on the whole validation split
# (pylib.evaluation); the curves are on the trainer's fixed subset of validation windows. At the reduced size
# (`SMALL = True`) both are smaller: the final loss is on the split's first windows, as the table says.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (two seeds and one more, 20 steps of batch 8, a 20-step fp16 run, a tiny Beyond run): seconds, not minutes

# %%
import matplotlib.pyplot as plt
import numpy as np

from experiments import ch9, notebook as nb
from pylib.systems import mixed_precision as mp, precision

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The recipes, the one-step check, and PyTorch's engine
#
# Every part of `experiments/ch9.py`, one after the other (a few minutes on a laptop at full size: the
# emulated recipes round every matrix input and gradient in software). The tables below are
# `ch9.markdown(results)`, the function that writes the chapter's section of results.md, with the paired
# verdicts of `pylib.compare` against float32 at the chapter's margin.

# %%
results = nb.run(ch9, corpus)
nb.show(ch9.markdown(results))

# %% [markdown]
# ## The validation loss of each recipe
#
# The chapter's "precision recipe, live" widget draws one recipe's run over the measured band. Here are all
# seven bands: the mean over seeds of the validation loss on the trainer's fixed subset of windows (not the
# table's final evaluation), with ±1 standard deviation; the table's verdicts say which differences from float32
# the seeds resolve.

# %%
v, curves, settings = results["values"], results["curves"], results["settings"]["ch9.recipes"]
n_seeds = v["ch9.recipe.fp32.final_val.n"]
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, group in zip(axes, (("fp32", "bf16_master", "bf16_pure", "bf16_pure_sr"),
                            ("fp32", "fp16_noscale", "fp16_dynamic", "fp8"))):
    for name in group:
        c = curves[f"ch9.recipe.{name}"]
        nb.plot_band(ax, c["steps"], c["val_mean"], c["val_sd"], mp.LABELS[name])
    ax.set(xlabel="step", title=f"{n_seeds} seeds, mean ± sd")
    ax.legend(fontsize=8)
axes[0].set_ylabel(f"validation loss, {settings['train']['eval_windows']}-window subset (nats/token)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## What the rounding does, step by step
#
# The mechanisms the final loss does not show. Left: the share of non-zero gradient elements that rounding
# flushed to zero at each step, mean over seeds, for the recipes that round gradients (a step with none flushed
# has no point on the log scale: bfloat16, with float32's range, may have none at all). Right: the
# share of the weights AdamW moved that rounding to bfloat16 put back where they were (updates lost), for the
# two recipes that store their weights in bfloat16.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for name in ("bf16_master", "fp16_noscale", "fp16_dynamic", "fp8"):
    c = curves[f"ch9.recipe.{name}"]
    flushed = np.asarray(c.get("flushed_mean", []), dtype=float)
    if np.any(flushed > 0):
        steps = np.arange(len(flushed))
        axes[0].plot(steps[flushed > 0], flushed[flushed > 0], ".", ms=2, label=mp.LABELS[name])
axes[0].set(yscale="log", xlabel="step", ylabel="share of gradient elements flushed to 0",
            title="gradients flushed (mean over seeds)")
axes[0].legend(fontsize=8)
for name in ("bf16_pure", "bf16_pure_sr"):
    lost = curves[f"ch9.recipe.{name}"]["lost_mean"]
    axes[1].plot(range(len(lost)), lost, lw=1, label=mp.LABELS[name])
axes[1].set(xlabel="step", ylabel="share of moved weights put back", title="updates lost (mean over seeds)")
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The lost update, and the loss scale
#
# Left, the chapter's "lost update" widget: 0.001 added a thousand times to a weight of 1, stored in float32,
# in bfloat16 rounded to nearest, and in bfloat16 rounded stochastically (the mean of 256 independent copies,
# with ±1 sd), computed here by `pylib.systems.precision.repeated_add` as the chapter's figures are. Right,
# the loss scale of the fp16 recipe with dynamic loss scaling, each seed's trajectory with its skipped steps
# (the "precision recipe" widget's third chart), and the float16 run of the course model in PyTorch's engine
# beside pylib's (`part_torch_fp16`: the same weights and batches, a higher starting scale).

# %%
near = precision.repeated_add(1.0, 0.001, 1000, "bf16")[:, 0]
fp32 = precision.repeated_add(1.0, 0.001, 1000, "fp32")[:, 0]
sr = precision.repeated_add(1.0, 0.001, 1000, "bf16", stochastic=True, rng=np.random.default_rng(0), lanes=256)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
adds = np.arange(len(near))
axes[0].plot(adds, fp32, label="float32")
axes[0].plot(adds, near, label="bfloat16, nearest")
nb.plot_band(axes[0], adds, sr.mean(axis=1), sr.std(axis=1, ddof=1), "bfloat16, stochastic (mean ± sd of 256)")
axes[0].set(xlabel="additions of 0.001", ylabel="stored weight", title="the lost update")
axes[0].legend(fontsize=8)
c = curves["ch9.recipe.fp16_dynamic"]
for key in sorted(k for k in c if k.startswith("scale_")):
    seed = key.removeprefix("scale_")
    line, = axes[1].plot(np.log2(c[key]), lw=1, label=f"pylib fp16_dynamic, seed {seed}")
    skips = c[f"skipped_{seed}"]
    axes[1].plot(skips, np.log2(np.asarray(c[key])[skips]), "x", color=line.get_color())
t = curves["ch9.torch.fp16_model"]
axes[1].plot(t["scale_log2_torch"], lw=4, alpha=0.4, color="tab:red",
             label=f"PyTorch GradScaler, course model (from 2^{v['ch9.torch.fp16_model.init_scale_log2']})")
axes[1].plot(t["scale_log2_pylib"], ":", color="black", label="pylib's scaler, the same run")
axes[1].set(xlabel="step", ylabel="log2 of the loss scale", title="loss scale (x: a skipped step)")
axes[1].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# The same float16 run's batch losses, PyTorch's engine against pylib's emulation, step by step. The two round
# in different places; the table above gives their largest loss difference, and the steps at which their scales
# or their skipped steps differ.

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.plot(t["loss_torch"], label="PyTorch: autocast(float16) + GradScaler")
ax.plot(t["loss_pylib"], "--", label="pylib: fp16_dynamic")
ax.set(xlabel="step", ylabel="batch loss (nats/token)",
       title=f"the course model in float16, seed {v['ch9.torch.fp16_model.seed']}")
ax.legend()
plt.show()

# %% [markdown]
# ## Quantised gradients
#
# The chapter's quantisation study, per seed: the relative error of the trained float32 model's gradient
# quantised to int8 and int4, with a full scale of each tensor's amax (nothing clipped) and of
# `ch9.CLIP_RMS` times its RMS (a few elements clipped). Each point is one seed; the bar is the mean.

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
labels = []
for i, (bits, how) in enumerate([(8, "amax"), (8, "rms"), (4, "amax"), (4, "rms")]):
    k = f"ch9.quant.int{bits}.{how}.rel_error"
    per = list(v[f"{k}.per_seed"].values())
    ax.bar(i, v[f"{k}.mean"], color="lightgrey")
    ax.plot([i] * len(per), per, "o", color="black", ms=4)
    labels.append(f"int{bits}, {'amax' if how == 'amax' else f'{ch9.CLIP_RMS:g} × RMS'}")
ax.set_xticks(range(len(labels)), labels)
ax.set(ylabel="‖q(g) − g‖ / ‖g‖", yscale="log", title="quantised gradients of the trained fp32 model (fixed batch)")
plt.show()

# %% [markdown]
# What each recipe costs in time here, as a timing (not reproducible: the machine's load changes it): steps
# per second of the emulated recipes, evaluations excluded. The emulation rounds in software, which costs time;
# what 16-bit hardware units would save, this CPU does not measure.

# %%
fig, ax = plt.subplots(figsize=(7, 3))
names = list(mp.RECIPES)
rates = [results["timings"][f"ch9.recipe.{n}.steps_per_second"] for n in names]
ax.barh(range(len(names)), rates)
ax.set_yticks(range(len(names)), [mp.LABELS[n] for n in names], fontsize=8)
ax.invert_yaxis()
ax.set(xlabel="steps per second (this run, this machine)")
plt.show()

# %% [markdown]
# ## Change a setting
#
# The lost update depends on how small the updates are, and the learning rate sets that. Pick a recipe and a
# peak learning rate: the notebook trains that recipe and float32 at that rate on the chapter's seeds
# (`ch9.recipe_arm`, the function that measured the table) and pairs them seed by seed (`pylib.compare`, a
# t-interval on the paired differences, at the chapter's margin). It also pairs your recipe with the chapter's
# run of the same recipe at the default rate. With this many seeds a difference is often *unresolved*, and the
# verdict says so rather than calling a winner.

# %%
RECIPE = "bf16_pure"  # any of mp.RECIPES: try "bf16_pure_sr", "fp16_noscale"
LR = 0.003  # the chapter's runs use 0.01; try 0.001 or 0.02

mine, _, _ = ch9.recipe_arm(corpus, RECIPE, more_seeds=(), lr=LR)
ref, _, _ = ch9.recipe_arm(corpus, "fp32", more_seeds=(), lr=LR)
mine = {k.replace(f"ch9.recipe.{RECIPE}.", "mine."): x for k, x in mine.items()}
ref = {k.replace("ch9.recipe.fp32.", "fp32_mine."): x for k, x in ref.items()}
both = {**v, **mine, **ref}
nb.show([f"Final validation loss ({settings.get('final_eval_small', 'whole validation split')}), "
         f"`mine` = {mp.LABELS[RECIPE]} at lr {LR}, `fp32_mine` = float32 at lr {LR}:", ""]
        + nb.arms_table(both, ["mine.final_val", "fp32_mine.final_val", f"ch9.recipe.{RECIPE}.final_val",
                               "ch9.recipe.fp32.final_val"]))
nb.show(nb.verdict(both, "mine.final_val", "fp32_mine.final_val", margin=ch9.MARGIN))
nb.show(nb.verdict(both, "mine.final_val", f"ch9.recipe.{RECIPE}.final_val", margin=ch9.MARGIN))
if "mine.lost.per_seed" in both:  # a recipe that stores its weights in bfloat16
    nb.show(["Share of moved weights put back by rounding, mean over the steps:", ""]
            + nb.arms_table(both, ["mine.lost", f"ch9.recipe.{RECIPE}.lost"], ".3f"))
    nb.show(nb.verdict(both, "mine.lost", f"ch9.recipe.{RECIPE}.lost"))

# %% [markdown]
# ## Beyond the toy
#
# The recipes on a wider member of the same family, in PyTorch's own engine (`companions/beyond_ch9.py`,
# built on `companions/beyond.py` and the chapter's companion): float32, `torch.autocast` in bfloat16 with
# float32 master weights, and on a GPU also float16 with `torch.amp.GradScaler` (the companion's
# `fp16_scaled_step`). All start from pylib's initial weights for one seed and see the same batches, so the
# batch losses differ only by the precision. Each run is first warmed up for two untimed steps. The loss is on
# a fixed subset of validation windows. On a GPU the size is a 512-wide, 8-layer model; on a CPU a 128-wide,
# 4-layer one that takes about a minute; at the reduced size a tiny one. These numbers are yours: the chapter
# quotes none of them, and one seed does not separate the precision's effect from a seed's.

# %%
import torch

from companions import beyond, beyond_ch9
from experiments.common import progress

DEVICE = nb.device()
THREADS = 1  # torch's CPU threads here (the chapter's parts left it at one); more on an idle many-core machine
RECIPES = None  # None: fp32 and bf16 (and fp16 with a GradScaler on a GPU); e.g. ("fp32", "bf16", "fp16") on a CPU
if DEVICE == "cpu":
    torch.set_num_threads(THREADS)
if SMALL:
    size, steps, batch = beyond.Size(n_embd=32, n_layer=2, n_head=2, block_size=32), 10, 8
elif DEVICE == "cuda":
    size, steps, batch = beyond.Size(n_embd=512, n_layer=8, n_head=8, block_size=256), 1000, 32
else:
    size, steps, batch = beyond.Size(n_embd=128, n_layer=4, n_head=4, block_size=64), 300, 16
print(f"device {DEVICE}" + (f", {torch.get_num_threads()} CPU threads" if DEVICE == "cpu" else "")
      + f"; size {size}, {steps} steps of batch {batch}")
beyond_out = beyond_ch9.compare(corpus, size, steps, batch_size=batch, dev=DEVICE, recipes=RECIPES,
                                eval_windows=32 if SMALL else 128, progress=progress)
nb.show(beyond_ch9.table(beyond_out))

# %% [markdown]
# Each low-precision run's batch loss minus float32's, step by step, on the same batches: the differences the
# table summarises. A difference that grows over the run is the two runs' weights drifting apart, not one
# step's rounding.

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
base = np.asarray(beyond_out["runs"]["fp32"]["losses"])
for name, r in beyond_out["runs"].items():
    if name != "fp32":
        n = min(len(base), len(r["losses"]))
        ax.plot(np.asarray(r["losses"][:n]) - base[:n], lw=1, label=f"{name} − fp32")
ax.axhline(0, color="grey", lw=0.5)
ax.set(xlabel="step", ylabel="batch loss difference (nats/token)",
       title=f"width {size.n_embd}, {beyond_out['device']}, seed {beyond_out['seed']}")
ax.legend()
plt.show()
