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
