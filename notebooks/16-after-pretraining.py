# %% [markdown]
# # Chapter 16: After pretraining: SFT, RLHF and DPO
#
# The chapter's measurement, run here with the code that made it (`experiments/ch16.py`, one task): for
# each seed the course model is pretrained once with chapter 1's default run, and every method starts from
# that model. SFT on speaker questions built from the validation plays, with the loss on the response only
# and on the whole sequence; then a toy preference task (the continuation with more of one letter is
# preferred): a Bradley–Terry reward model, RL with and without a KL penalty, DPO and IPO. The tables are the
# ones on the results page; the charts are the SFT table's losses and answers, what each preference method
# moved, and DPO's and IPO's margins during the run (what the chapter's widget draws live). Then pretrain
# for longer and fine-tune again.
#
# No number here is a loss on the corpus's validation split. The SFT losses are mean cross-entropies per
# token on the held-out pairs' response, verse or template tokens, and the speaker accuracy ranks the
# candidate names by log-probability on those pairs. The preference measurements are on one sampled
# response per held-out prompt (the target letter's frequency, the reward model's score, the KL from the
# reference estimated from the samples, in nats per response), and the log-probabilities and margins on the
# training pairs.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (two seeds, 30-step pretraining, 20 SFT steps, 40 held-out
# pairs, 32 preference prompts, 4 RL steps, batches of 4 pairs for 80 DPO and IPO steps): seconds, not a minute

# %%
import matplotlib.pyplot as plt
import numpy as np

from experiments import ch16, common, notebook as nb

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## Pretraining, SFT and the preference methods
#
# `experiments/ch16.py`'s `run`, the one task (about a minute of one core at full size). The tables below
# are `ch16.markdown(results)`, the function that writes the chapter's section of results.md, with the
# paired verdicts of `pylib.compare` (uncorrected; the chapter corrects each family of comparisons).

# %%
results = nb.run(ch16, corpus, parts=["run"])
nb.show(ch16.markdown(results))

# %% [markdown]
# The arms seed by seed: what the paired verdicts above pair. First the SFT models on the held-out pairs,
# then each preference policy on the held-out prompts' samples.

# %%
v = results["values"]
for metric in ("response_loss", "verse_loss", "template_loss", "accuracy"):
    nb.show(nb.arms_table(v, [f"ch16.sft.{name}.{metric}" for name in ch16.SFT_ARMS]))
for metric, spec in (("frequency", ".3f"), ("kl", ".2f")):
    nb.show(nb.arms_table(v, [f"ch16.pref.{name}.{metric}" for name in ch16.PREF_METHODS], spec))

# %% [markdown]
# ## SFT: what the losses and the answers say
#
# Left: each model's mean loss per token on the held-out pairs, for the response (the speaker's name and the
# end token), the verse (the line) and the template (the fixed question), mean ± sd over seeds. Right: the
# answers each model samples after the question (temperature 1): the share that stop, that are in capitals,
# and that are exactly a candidate name.

# %%
def mean_sd(key):
    return v[f"{key}.mean"], v[f"{key}.sd"]


labels = {"pretrained": "pretrained", "response": "SFT, response only", "whole": "SFT, whole sequence"}
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
for panel, metrics, ylabel in [(left, ("response_loss", "verse_loss", "template_loss"),
                                "mean loss, nats/token (held-out pairs)"),
                               (right, ("stops", "capitals", "candidate"), "share of the sampled answers")]:
    x = np.arange(len(metrics))
    for i, name in enumerate(ch16.SFT_ARMS):
        mean, sd = zip(*(mean_sd(f"ch16.sft.{name}.{m}") for m in metrics))
        panel.bar(x + (i - 1) * 0.27, mean, 0.27, yerr=sd, capsize=3, label=labels[name])
    panel.set_xticks(x, [m.replace("_loss", "").replace("candidate", "a candidate name") for m in metrics])
    panel.set(ylabel=ylabel)
left.set_title("Loss on the held-out pairs' tokens")
right.set_title("Answers sampled after the question")
left.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Preferences: what each method moved, and DPO's margin
#
# Left: each policy's target-letter frequency against its KL from the reference (nats per response), on one
# sample per held-out prompt, mean ± sd over seeds. Right: on the training pairs, during DPO's and IPO's
# runs, the chosen responses' mean log-ratio $\log \pi - \log \pi_\text{ref}$ (dashed) and the mean margin
# $h$ (solid), with a band of ±1 sd over seeds; the dotted line is IPO's target margin $1/(2\tau)$.

# %%
settings = results["settings"]["ch16"]
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
for name in ch16.PREF_METHODS:
    (kl, kl_sd), (freq, freq_sd) = mean_sd(f"ch16.pref.{name}.kl"), mean_sd(f"ch16.pref.{name}.frequency")
    left.errorbar(kl, freq, xerr=kl_sd, yerr=freq_sd, fmt="o", capsize=3, label=name)
left.set(xlabel="KL from the reference, nats per response (k1, held-out prompts)",
         ylabel=f"frequency of '{settings['pref']['target']}' in the samples", title="What each method moved")
left.legend(fontsize=8)
steps = list(ch16.CHECKPOINTS)
for name, color in (("dpo", "C3"), ("ipo", "C4")):
    for q, style in (("margin", "-"), ("chosen", "--")):
        mean, sd = zip(*(mean_sd(f"ch16.pref.{name}.step{s}.{q}") for s in steps))
        line = nb.plot_band(right, steps, mean, sd, f"{name.upper()} {'margin h' if q == 'margin' else 'chosen log-ratio'}",
                            color=color)
        line.set_linestyle(style)
        line.set_marker("o")
right.axhline(1 / (2 * settings["ipo"]["tau"]), ls=":", color="C4", lw=1, label="IPO's target 1/(2τ)")
right.axhline(0, color="grey", lw=0.5)
right.set(xlabel="step", ylabel="nats per response (training pairs)", title="During the run")
right.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Change a setting
#
# Pretrain for longer (or shorter) than the chapter, then fine-tune both SFT arms exactly as the chapter
# does (`ch16.sft_seed`, on the same speaker questions, `ch16.sft_set_for`), on the same seeds. The pretraining
# is chapter 1's run with another number of steps (`pylib.studies.sft.pretrain_configs`). The verdicts pair
# your response-only arm with the chapter's, seed by seed (`pylib.compare`, the chapter's margins): does a
# better pretrained model forget less verse, or name more speakers? With few seeds a difference is often
# *unresolved*, and the notebook says so rather than calling a winner.

# %%
PRETRAIN_STEPS = 800  # the chapter pretrains for 400 (30 at the reduced size); try 200 or 1200

from pylib import train
from pylib.studies import sft

steps = common.scaled(PRETRAIN_STEPS, 2 * ch16.SMALL["pretrain_steps"])
sft_set = ch16.sft_set_for(corpus)
mine = {}
for seed in common.progress(ch16.seeds(), desc=f"pretraining {steps} steps, then SFT", unit="seed"):
    mcfg, tcfg = sft.pretrain_configs(corpus.vocab.size, seed, steps=steps)
    params, _ = train.train(mcfg, tcfg, corpus.train, corpus.val)
    mine[seed] = ch16.sft_seed(corpus, mcfg, params, seed, sft_set)
metrics = ("response_loss", "verse_loss", "accuracy")
both = dict(v)
for name in ch16.SFT_ARMS:
    for metric in metrics:
        both.update(common.arm(f"mine.{name}.{metric}", {s: r[name][metric] for s, r in mine.items()}))
print(f"pretraining: {steps} steps (the chapter's: {settings.get('pretrain_steps', sft.pretrain_configs(corpus.vocab.size, 0)[1].steps)}); "
      f"losses per token on the {len(sft_set.test)} held-out pairs")
for metric in metrics:
    nb.show(nb.arms_table(both, [f"{arm}.{name}.{metric}" for name in ch16.SFT_ARMS for arm in ("mine", "ch16.sft")]))
for metric, margin in (("response_loss", ch16.LOSS_MARGIN), ("verse_loss", ch16.LOSS_MARGIN), ("accuracy", ch16.ACC_MARGIN)):
    nb.show(nb.verdict(both, f"mine.response.{metric}", f"ch16.sft.response.{metric}", margin=margin))
