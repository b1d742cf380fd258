# %% [markdown]
# # Chapter 1: The training loop
#
# The chapter's two experiments, run here with the code that measured them: the default run (AdamW at
# lr 0.01, 400 steps) over the course's seeds, and the old default (lr 0.02) against it over five seeds.
# The tables are the ones on the results page; the chart is the chapter's loss curve with its band.
# Then change a setting and see the new table and verdict.
#
# Losses: the final validation loss is scored on the whole validation split (pylib.evaluation); the
# curves are on the trainer's fixed 128-window subsets of each split.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (two seeds, 30 steps): seconds, not minutes

# %%
import matplotlib.pyplot as plt

from experiments import ch1, notebook as nb

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The default run, and the old default's spread
#
# Both parts of `experiments/ch1.py`, one after the other (about a minute on a laptop at full size).
# The tables below are `ch1.markdown(results)`, the same function that writes the chapter's section of
# results.md, with the paired verdicts of `pylib.compare`.

# %%
results = nb.run(ch1, corpus)
nb.show(ch1.markdown(results))

# %% [markdown]
# ## The loss curves
#
# The mean over seeds, with a band of ±1 standard deviation, on the fixed subsets; the dashed lines are
# the unigram loss (letter frequencies alone) and ln V (a uniform guess).

# %%
curves = results["curves"]["ch1.default"]
v = results["values"]
fig, ax = plt.subplots(figsize=(7, 4))
nb.plot_band(ax, curves["steps"], curves["train_mean"], curves["train_sd"], "training (128-window subset)")
nb.plot_band(ax, curves["steps"], curves["val_mean"], curves["val_sd"], "validation (128-window subset)")
ax.axhline(v["ch1.unigram_loss"], ls="--", lw=1, color="grey")
ax.text(curves["steps"][-1], v["ch1.unigram_loss"], " unigram", va="bottom", ha="right", color="grey")
ax.axhline(v["ch1.ln_vocab"], ls=":", lw=1, color="grey")
ax.set(xlabel="step", ylabel="loss (nats/token)", title=f"Chapter 1's default run, {v['ch1.default.seeds']} seeds")
ax.legend()
plt.show()

# %% [markdown]
# ## Change a setting
#
# Pick another peak learning rate and run it on the same seeds as the spread study. The verdict pairs
# your runs with lr 0.01 seed by seed (`pylib.compare`, a t-interval on the paired differences): with
# this many seeds, a small difference is often *unresolved*, and the notebook says so rather than
# calling a winner.

# %%
LR = 0.005  # try 0.003, 0.02, 0.05

mine = ch1.run_old_default(corpus, lr=LR)["values"]
mine = {k.replace("ch1.spread.lr0_02", "mine"): x for k, x in mine.items()}
both = {**results["values"], **mine}
nb.show(nb.arms_table(both, ["mine.final_val", "ch1.spread.lr0_01.final_val"]))
nb.show(nb.verdict(both, "mine.final_val", "ch1.spread.lr0_01.final_val", margin=0.02))

# %% [markdown]
# ## Beyond the toy: wider models, in PyTorch
#
# The same run on wider members of the course's model family (`companions/beyond_ch1.py`, with
# `companions/beyond.py`'s trainer: pylib's initialisation and chapter 1's loop in PyTorch, the same
# steps, batch and learning rate for every width). Only the width changes (one layer, two heads, context
# 64, as in the course model), unless you raise `N_LAYER`. On a GPU (CUDA) the widths run from 16 to 512,
# 2,000 steps of 64 windows each; on a CPU from 16 to 128, 1,000 steps of 16 windows (about a minute of
# one thread on a laptop, more on a busy machine); at the reduced size two tiny runs. Each final loss is on
# the same fixed set of evenly spaced validation windows (the count is printed), not the whole split, so
# it is not on the same footing as the tables above. The learning rate is the course's 0.01 at every
# width, not tuned per width (chapter 7 shows how the best rate moves with width). Then the widest model
# writes a sample with chapter 1's sampler. One seed: these numbers are yours, and no chapter quotes them.

# %%
import torch

from companions import beyond_ch1
from experiments.common import progress

DEVICE = nb.device()
THREADS = 1  # torch's CPU threads; more on an idle many-core machine
N_LAYER = 1  # the course model's depth; try 2 or 4 (on a GPU)
if DEVICE == "cpu":
    torch.set_num_threads(THREADS)
size = beyond_ch1.SIZES["small" if SMALL else DEVICE]
print(f"device {DEVICE}" + (f", {torch.get_num_threads()} CPU threads" if DEVICE == "cpu" else "")
      + f"; widths {size['widths']}, {N_LAYER} layer(s), {size['steps']} steps of {size['batch_size']} windows, "
      f"final loss on {size['eval_windows']} validation windows")
wide = beyond_ch1.family_runs(corpus, **size, n_layer=N_LAYER, dev=DEVICE, progress=progress)
nb.show(beyond_ch1.table(wide))

# %% [markdown]
# Left: each width's final loss against its parameter count. Right: the same loss during each run, at
# the trainer's evaluation steps, on the same windows.

# %%
done = [r for r in wide if r["val"] is not None]
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
left.plot([r["params"] for r in done], [r["val"] for r in done], "o-")
for r in done:
    left.annotate(f"width {r['size'].n_embd}", (r["params"], r["val"]), textcoords="offset points", xytext=(4, 4), fontsize=8)
left.set(xscale="log", xlabel="parameters", ylabel=f"final loss, nats/token\n(on {wide[0]['eval']})",
         title="Final loss against model size")
for r in wide:
    steps_, losses = zip(*r["evals"]) if r["evals"] else ((), ())
    right.plot(steps_, losses, "o-", ms=3, label=f"width {r['size'].n_embd}")
right.set(xlabel="step", ylabel="loss, nats/token (the same windows)", title="During each run")
right.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %%
print(f"width {wide[-1]['size'].n_embd}, {wide[-1]['params']:,} parameters, temperature {beyond_ch1.TEMPERATURE}:\n")
print(beyond_ch1.sample(wide[-1], corpus))
