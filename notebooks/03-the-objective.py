# %% [markdown]
# # Chapter 3: The objective
#
# The chapter's experiments, run here with the code that measured them (`experiments/ch3.py`): one step
# on a big batch against the same windows accumulated over microbatches (the page widget's settings, in
# float32 and again in float64), the gradient error of the two ways of accumulating unequal
# microbatches, and the default run with and without a multi-token-prediction head. The perplexity
# table also quotes chapter 1's default run: that is the MTP comparison's run without the head (the same
# settings and seeds; results.json's two keys agree seed for seed), so its perplexity is read from it.
#
# Losses: the final validation losses (the accumulation pair's, the MTP comparison's and so chapter 1's
# perplexity) are scored on the whole validation split (`pylib.evaluation`); at the reduced size of the
# tests, on its first tokens, as the tables say. The accumulation curves are each step's training
# batch loss, not a validation loss. The gradient comparison uses no loss split at all: one fixed batch
# of training windows on the untrained model.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (12-step accumulation pairs, two seeds of 30 steps): seconds

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

from experiments import ch3, notebook as nb
from experiments.common import arm

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The measurements
#
# Every part of `experiments/ch3.py` (under a minute on a laptop at full size), and chapter 1's
# perplexity, e^L per seed, from the run without the head. The tables are `ch3.markdown(results)`, the
# function that writes the chapter's section of results.md, with the paired verdicts of `pylib.compare`.

# %%
results = nb.run(ch3, corpus)
plain = results["values"]["ch3.mtp.val_plain.per_seed"]  # chapter 1's default run, seed by seed
results["values"].update(arm("ch1.default.val_ppl", {s: None if x is None else math.exp(x) for s, x in plain.items()}))
nb.show(ch3.markdown(results))

# %% [markdown]
# ## Batch × 4 against accumulation 4
#
# The page's live widget, measured: seed 0's batch loss at every step for the two runs (top), and the
# absolute difference between them (bottom, log scale). They add the same numbers in a different order,
# so they start a rounding error apart; whether and when the difference grows is the chapter's question.

# %%
v, c = results["values"], results["curves"]["ch3.accum"]
fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
top.plot(c["steps"], c["loss_big"],
         label=f"batch × {v['ch3.accum.microbatches']} ({v['ch3.accum.batch_big']} windows)")
top.plot(c["steps"], c["loss_accum"], ls="--",
         label=f"accumulation {v['ch3.accum.microbatches']} × {v['ch3.accum.batch_micro']} windows")
top.set(ylabel="training batch loss (nats/token)", title="Seed 0, float32")
top.legend()
diff = np.abs(np.array(c["loss_big"]) - np.array(c["loss_accum"]))
bottom.semilogy(c["steps"], np.where(diff > 0, diff, np.nan), marker=".", lw=1)
bottom.axvline(v["ch3.accum.first_steps"], ls=":", color="grey")
bottom.text(v["ch3.accum.first_steps"], bottom.get_ylim()[1], " first steps end", va="top", color="grey")
bottom.set(xlabel="step", ylabel="|Δ batch loss| (nats, log scale)")
plt.show()

# %% [markdown]
# The largest loss difference per seed over the whole run, in float32 and in float64, with the largest
# over the first steps of all seeds as dashed lines. In the chapter's full-length runs some seeds burst
# apart late in the warmup, in both precisions, from starting differences many orders of magnitude
# apart; the short runs of the reduced size end before that stretch.

# %%
acc_seeds = sorted(int(k.rsplit("seed", 1)[1]) for k in v if k.startswith("ch3.accum.max_abs_dloss.seed"))
x = np.arange(len(acc_seeds))
fig, ax = plt.subplots(figsize=(7, 4))
for dx, tag, label, color in ((-0.2, "ch3.accum", "float32", "C0"), (0.2, "ch3.accum.f64", "float64", "C1")):
    heights = [v[f"{tag}.max_abs_dloss.seed{s}"] for s in acc_seeds]
    ax.bar(x + dx, heights, width=0.4, label=f"{label}, whole run", color=color)
    for xi, h in zip(x + dx, heights):
        if h == 0:  # no difference at all: nothing to draw on a log scale
            ax.annotate("0", (xi, 0), xycoords=("data", "axes fraction"), ha="center", va="bottom", color=color)
    ax.axhline(v[f"{tag}.max_abs_dloss_first"], ls="--", color=color, lw=1,
               label=f"{label}, first {v['ch3.accum.first_steps']} steps (all seeds)")
ax.set_xticks(x, [f"seed {s}" for s in acc_seeds])
ax.set_yscale("log")
ax.set(ylabel="largest |Δ batch loss| (nats, log scale)", title=f"{v['ch3.accum.steps']} steps per run")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## Accumulating unequal microbatches, and the perplexity reference points
#
# Left: the relative error of the accumulated gradient against the one-big-batch gradient, for the mean
# of microbatch means and for dividing by the total count (float32 rounding). Right: the chapter's three
# perplexities: a uniform guess over the vocabulary, the unigram model (letter frequencies, computed
# here by `ch3.derived`), and chapter 1's default run on the validation split (mean ± sd over seeds).

# %%
derived = ch3.derived(corpus)
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
left.bar(["mean of means", "total count"],
         [v["ch3.grad.mean_of_means_rel_err"], v["ch3.grad.token_weighted_rel_err"]], color=["C3", "C2"])
left.set_yscale("log")
left.set(ylabel="‖g − g_big‖ / ‖g_big‖ (log scale)",
         title=f"counted tokens per microbatch: {v['ch3.grad.counts']}")
ppl = [corpus.vocab.size, derived["ch3.unigram_ppl"], v["ch1.default.val_ppl.mean"]]
labels = ["uniform (V)", "unigram", "chapter 1's run"]
right.bar([f"{name}\n{p:.1f}" for name, p in zip(labels, ppl)], ppl, yerr=[0, 0, v["ch1.default.val_ppl.sd"]],
          capsize=4)
right.set(ylabel="perplexity e^L on the validation split", title="Perplexity: reference points")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Multi-token prediction, seed by seed
#
# The main head's final validation loss of each seed without and with the t+2 head: a line joins the
# two runs of one seed, which share their initial trunk and their batches.

# %%
plain, mtp = v["ch3.mtp.val_plain.per_seed"], v["ch3.mtp.val_mtp.per_seed"]
fig, ax = plt.subplots(figsize=(5, 4))
for s in plain:
    ax.plot([0, 1], [plain[s], mtp[s]], marker="o", label=f"seed {s}")
ax.set_xticks([0, 1], ["without MTP", f"with MTP, λ = {v['ch3.mtp.lambda']}"])
ax.set_xlim(-0.3, 1.3)
ax.set(ylabel="final validation loss, main head (nats/token)", title="Paired by seed")
ax.legend()
plt.show()
nb.show(nb.verdict(v, "ch3.mtp.val_mtp", "ch3.mtp.val_plain", margin=ch3.MARGIN))

# %% [markdown]
# ## Change a setting
#
# Pick another weight λ for the t+2 head and run the comparison again, on the same seeds and the same
# batches. The verdicts pair your λ's runs with the chapter's λ (`ch3.MTP_WEIGHT`) and with the runs
# without the head, seed by seed (`pylib.compare`, a t-interval on the paired differences, against the
# chapter's margin). With this few seeds a small difference is usually *unresolved*: the notebook
# then says so rather than calling a winner.

# %%
LAMBDA = 1.0  # try 0.1, 0.5 or 2.0

mine = {k.replace("ch3.mtp.", "mine."): x for k, x in ch3.part_mtp(corpus, lam=LAMBDA)["values"].items()}
both = {**v, **mine}
nb.show(nb.arms_table(both, ["mine.val_mtp", "ch3.mtp.val_mtp", "ch3.mtp.val_plain"]))
nb.show(nb.verdict(both, "mine.val_mtp", "ch3.mtp.val_mtp", margin=ch3.MARGIN))
nb.show(nb.verdict(both, "mine.val_mtp", "ch3.mtp.val_plain", margin=ch3.MARGIN))
