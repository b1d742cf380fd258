# %% [markdown]
# # Chapter 7: Initialisation, normalisation and µP
#
# The chapter's experiments, run here with the code that measured them (`experiments/ch7.py`): the loss
# and the residual stream's size at initialisation across init scales, and the course model trained
# from a few of them; pre-LN against post-LN through depth, at initialisation and in short 8-layer runs
# with and without warmup over a grid of peak rates; RMSNorm against LayerNorm; and, across width, the
# coordinate check and a learning-rate sweep under standard parameterisation (SP), µP, and µP without
# its output multiplier.
#
# Losses: every final loss is scored on the whole validation split (`pylib.evaluation`); at the reduced
# size of the tests, on its first tokens, as the tables say. The training curves, the step-0 losses
# and the losses that only pick a learning rate are on the trainer's fixed subset of validation
# windows (`eval_windows` of them), and are labelled so.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (two seeds, runs of 10-20 steps, one depth rate): seconds

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

from experiments import ch7, notebook as nb
from pylib import train
from pylib.studies import init_study

DEFAULT_SUBSET = train.TrainConfig().eval_windows  # the curves' subset, unless a part's settings say otherwise

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The measurements
#
# Every part of `experiments/ch7.py`, one after the other. At full size this is the longest chapter to
# run: about six minutes on one laptop core, most of it the 8-layer runs and their whole-split
# evaluations. The tables are `ch7.markdown(results)`, the function that writes the chapter's section
# of results.md, with the paired verdicts of `pylib.compare`.

# %%
results = nb.run(ch7, corpus)
nb.show(ch7.markdown(results))

# %% [markdown]
# ## The initial weight scale
#
# Left: the loss at initialisation of the 4-layer model against the init std (mean over seeds, on a
# fixed batch of validation windows), with $\ln V$ and $2 \ln V$, where chapter 1's trainer declares a
# run diverged. Right: the residual stream's standard deviation after the embeddings and after the last
# block.

# %%
v, curves, settings = results["values"], results["curves"], results["settings"]
c = curves["ch7.init_scale"]
stds = c["init_stds"]
acts = np.array(c["act_std_mean"])  # (stds, embeddings + each block)
ln_v = math.log(corpus.vocab.size)
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
left.semilogx(stds, c["loss_mean"], marker="o")
left.axhline(ln_v, ls="--", color="grey", lw=1)
left.axhline(2 * ln_v, ls=":", color="grey", lw=1)
left.text(stds[0], ln_v, " ln V", va="bottom", color="grey")
left.text(stds[0], 2 * ln_v, " 2 ln V", va="bottom", color="grey")
left.set(xlabel="init std", ylabel="loss at initialisation (nats/token)", title=f"{ch7.INIT_DEPTH} layers, width 16")
right.loglog(stds, acts[:, 0], marker="o", label="after the embeddings")
right.loglog(stds, acts[:, -1], marker="o", label="after the last block")
right.set(xlabel="init std", ylabel="residual stream std", title="At initialisation")
right.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# The course model trained from some of those scales: the validation loss on the fixed subset every
# `eval_interval` steps, mean over seeds with a ±1 sd band (a scale whose run diverged in any seed has
# no curve).

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for s in ch7.INIT_TRAIN_STDS:
    key = f"ch7.init_train.std{s:g}"
    if key in curves:
        nb.plot_band(ax, curves[key]["steps"], curves[key]["val_mean"], curves[key]["val_sd"], f"init std {s:g}")
subset = settings["ch7.init_train"].get("eval_windows", DEFAULT_SUBSET)
ax.set(xlabel="step", ylabel=f"validation loss ({subset}-window subset, nats/token)",
       title=f"The course model, {settings['ch7.init_train']['steps']} steps")
ax.legend()
plt.show()

# %% [markdown]
# ## Pre-LN and post-LN through depth
#
# At initialisation, 8 layers: the residual stream's std after the embeddings and each block (left), and
# the gradient norm of each block's parameters (right, log scale), mean over seeds.

# %%
L = max(int(k.rsplit(".L", 1)[1]) for k in curves if k.startswith("ch7.depth_init.pre.L"))
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
for pos in ("pre", "post"):
    d = curves[f"ch7.depth_init.{pos}.L{L}"]
    left.plot(range(L + 1), d["act_std_mean"], marker="o", label=f"{pos}-LN")
    right.semilogy(range(1, L + 1), d["grad_norm_mean"], marker="o", label=f"{pos}-LN")
left.set(xlabel="position in the stream (0: embeddings, i: after block i)", ylabel="residual stream std",
         title=f"{L} layers at initialisation")
right.set(xlabel="block", ylabel="gradient L2 norm of the block's parameters (log scale)", title="Gradient per block")
left.legend()
right.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# The short 8-layer runs at the page's peak rate, with and without warmup: the validation loss on the
# fixed subset, mean over seeds with a ±1 sd band (a setting with a diverged seed has no band).

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for key, (depth, pos, warmup) in init_study.depth_train_settings().items():
    if key in curves:
        d = curves[key]
        nb.plot_band(ax, d["steps"], d["val_mean"], d["val_sd"], f"{pos}-LN, {'warmup' if warmup else 'no warmup'}")
first = settings[next(iter(init_study.depth_train_settings()))]  # the page's rate's settings
ax.set(xlabel="step", ylabel=f"validation loss ({first['eval_windows']}-window subset, nats/token)",
       title=f"{L} layers, peak lr {first['lr']:g}, batch {first['batch_size']}")
ax.legend()
plt.show()

# %% [markdown]
# ## The coordinate check
#
# The size (RMS of one coordinate) of four activations after the last step of the coordinate check,
# against width: under SP (solid) some grow with width; under µP (dashed) they should stay flat. Mean
# over seeds, on a few fixed validation windows.

# %%
sp, mup = curves["ch7.coord.sp"], curves["ch7.coord.mup"]
fig, axes = plt.subplots(1, 4, figsize=(13, 3.5))
for ax, key in zip(axes, ("embed", "residual", "attn_logits", "logits")):
    for c_, style, name in ((sp, "-", "SP"), (mup, "--", "µP")):
        ax.loglog(c_["widths"], [row[-1] for row in c_[key]], style, marker="o", label=name, base=2)
    ax.set(xlabel="width (n_embd)", title=key)
axes[0].set_ylabel(f"RMS of a coordinate after {sp['steps'][-1]} steps")
axes[0].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Learning rate against width
#
# The final loss on the fixed subset (used only to pick each width's rate) against the peak learning
# rate, one line per width, for each parameterisation; a gap is a rate at which a seed diverged.

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
for ax, param in zip(axes, ch7.WIDTH_ARMS):
    c_ = curves[f"ch7.width.{param}"]
    for w, row in zip(c_["widths"], c_["val_mean"]):
        ax.semilogx(c_["lrs"], [np.nan if m is None else m for m in row], marker="o", label=f"width {w}")
    ax.set(xlabel="peak learning rate (Adam)", title=param)
subset = settings["ch7.width"].get("eval_windows", DEFAULT_SUBSET)
axes[0].set_ylabel(f"final loss ({subset}-window validation subset)")
axes[0].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Change a setting
#
# Train the course model from another initial scale, over the same seeds and steps as the chapter's
# init-scale runs. The verdict pairs your runs' final loss (whole validation split) with the runs from
# the default 0.02, seed by seed (`pylib.compare`, a t-interval on the paired differences, against the
# chapter's margin). With this few seeds a small difference is often *unresolved*, and then the
# notebook does not call a winner; a run that diverged has no loss, and its arm no mean.

# %%
INIT_STD = 0.05  # try 0.005, 0.01 or 0.2

values, _ = ch7.run_init_scale(corpus, train_stds=(INIT_STD,))
mine = {k.replace(f"ch7.init_train.std{INIT_STD:g}", "mine"): x for k, x in values.items()
        if k.startswith(f"ch7.init_train.std{INIT_STD:g}.")}
both = {**v, **mine}
nb.show(nb.arms_table(both, ["mine.val", "ch7.init_train.std0.02.val",
                             "mine.first_val", "ch7.init_train.std0.02.first_val"]))
if both["mine.val.mean"] is not None:
    nb.show(nb.verdict(both, "mine.val", "ch7.init_train.std0.02.val", margin=ch7.MARGIN))
else:
    nb.show(f"A run from init std {INIT_STD:g} diverged: there is no paired comparison to make.")
