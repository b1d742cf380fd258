# %% [markdown]
# # Chapter 8: Stability: spikes and cures
#
# The chapter's experiments, run here with the code that measured them: attention logits that grow at
# a high learning rate, with and without QK-norm and z-loss; one bad batch (every input and target a
# space) for one step or three, with no cure, with gradient clipping, or with outlier skipping, each run
# against its clean twin; and a learning rate far too large. The tables are the ones on the results
# page; the charts are the chapter's: the attention statistics during the run and the loss around the
# bad batch. Then change a setting.
#
# Losses: the final validation losses are on the whole validation split (pylib.evaluation); the
# attention statistics and log Z are on 8 fixed validation windows, the dead MLP units on 32; the spike
# heights and recoveries are on the training batches' own losses, compared step by step with the clean
# twin. At the reduced size the final losses are on the split's first windows instead, and the tables
# say so.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (two seeds and one more, 20-step attention runs at batch
# 4, 40-step bad-batch runs at batch 4 with the bad batch at step 20, the final loss on the validation
# split's first 64 windows): seconds, not minutes

# %%
import matplotlib.pyplot as plt

from experiments import ch8, common, notebook as nb

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## Every experiment of the chapter
#
# The six parts of `experiments/ch8.py`, one after the other (a minute or two at full size).
# The tables below are `ch8.markdown(results)`, the function that writes the chapter's section of
# results.md, with the paired verdicts of `pylib.compare`.

# %%
results = nb.run(ch8, corpus)
nb.show(ch8.markdown(results))
v, curves, settings = results["values"], results["curves"], results["settings"]

# %% [markdown]
# Seed by seed, the arms behind the attention comparisons (layer 0's largest attention logit at the end,
# and the final loss):

# %%
nb.show(nb.arms_table(v, [f"ch8.attn.{name}.max_logit_0" for name in ch8.ATTN_SETTINGS], spec=".1f"))
nb.show(nb.arms_table(v, [f"ch8.attn.{name}.final_val" for name in ch8.SCORED]))
print("final losses on:", settings["ch8.attn"]["final_eval"])

# %% [markdown]
# ## Attention logits that grow
#
# For each setting, mean ± sd over seeds, every few steps on the same fixed validation windows: the
# largest attention logit of each layer (log scale), the mean attention entropy of each layer (nats; a
# head that attends to one position has entropy 0), and the output's mean signed log Z (what z-loss
# pushes towards 0).

# %%
attn = settings["ch8.attn"]
fig, axes = plt.subplots(2, 3, figsize=(15, 8))
for name in ch8.ATTN_SETTINGS:
    c = curves[f"ch8.attn.{name}"]
    for layer in (0, 1):
        line = nb.plot_band(axes[0, layer], c["steps"], c[f"max_logit_{layer}_mean"], c[f"max_logit_{layer}_sd"], name)
        nb.plot_band(axes[1, layer], c["steps"], c[f"entropy_{layer}_mean"], c[f"entropy_{layer}_sd"], name,
                     color=line.get_color())
    axes[0, 2].plot(c["steps"], c["log_z_signed_mean"], label=name, color=line.get_color())
    axes[1, 2].plot(c["steps"], c["log_z_mean"], label=name, color=line.get_color())
for layer in (0, 1):
    axes[0, layer].set(yscale="log", xlabel="step", ylabel="largest |attention logit|", title=f"Layer {layer}")
    axes[1, layer].set(xlabel="step", ylabel="mean attention entropy (nats)", title=f"Layer {layer}")
axes[0, 2].set(xlabel="step", ylabel="mean log Z (signed)", title="The output's log Z")
axes[1, 2].set(xlabel="step", ylabel="mean |log Z|", title="The output's |log Z|")
for ax in axes.flat:
    ax.legend(fontsize=7)
fig.suptitle(f"{attn['model']}, lr {attn['lr']} constant after {attn['warmup_steps']} warmup steps, batch "
             f"{attn['batch_size']}; statistics on {attn['stats_windows']} fixed validation windows")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## One bad batch
#
# For each cure, the loss of each training batch, mean ± sd over seeds: the clean runs, one bad batch,
# and a bad stretch of three (the bad batches' own losses are left out; the dotted line marks the first
# one). The clean and bad runs see the same clean batches, so the gap between the lines is the bad
# batch's doing.

# %%
bad = settings["ch8.bad"]
fig, axes = plt.subplots(1, 3, figsize=(15, 4), sharey=True)
for ax, cure in zip(axes, bad["cures"]):
    c = curves[f"ch8.bad.{cure}"]
    for kind, label in (("clean", "clean"), ("bad1", "1 bad batch"), ("bad3", f"{bad['repeats']} bad batches")):
        mean = [float("nan") if m is None else m for m in c[f"{kind}_mean"]]
        sd = [float("nan") if s is None else s for s in c[f"{kind}_sd"]]
        nb.plot_band(ax, c["steps"], mean, sd, label)
    ax.axvline(bad["inject_step"], ls=":", color="grey")
    ax.set(xlabel="step", title=f"cure: {cure}")
    ax.legend(fontsize=8)
axes[0].set_ylabel("training batch loss (nats/token)")
fig.suptitle(f"Default model, batch {bad['batch_size']}, {bad['steps']} steps, bad batch at step {bad['inject_step']}")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Change a setting
#
# Run the attention setting with a z-loss coefficient (and QK-norm on or off) of your own, on the same
# seeds and settings (`ch8.attention_run`). The verdicts pair your runs with the measured setting
# without either (the baseline), seed by seed (`pylib.compare`, a t-interval on the paired differences),
# on layer 0's largest attention logit at the end and on the final loss. With this many seeds a
# difference is often *unresolved*, and the notebook says so rather than calling a winner.

# %%
Z_LOSS = 1e-3  # the chapter's is ch8.ATTN["z_loss"] (PaLM's 1e-4); try 1e-2
QK_NORM = False

runs = {seed: ch8.attention_run(corpus, QK_NORM, Z_LOSS, seed) for seed in ch8.seeds_now()}
mine = {**common.arm("mine.max_logit_0", {s: rows[-1]["max_logit"][0] for s, (rows, _, _) in runs.items()}),
        **common.arm("mine.final_val", {s: common.final_val(history) for s, (_, history, _) in runs.items()})}
both = {**v, **mine}
print(f"z-loss {Z_LOSS}, QK-norm {'on' if QK_NORM else 'off'}, against the baseline (neither)")
nb.show(nb.arms_table(both, ["mine.max_logit_0", "ch8.attn.baseline.max_logit_0"], spec=".1f"))
nb.show(nb.arms_table(both, ["mine.final_val", "ch8.attn.baseline.final_val"]))
nb.show(nb.verdict(both, "mine.max_logit_0", "ch8.attn.baseline.max_logit_0"))
if mine["mine.final_val.mean"] is None or v["ch8.attn.baseline.final_val.mean"] is None:
    print("a run diverged: no paired comparison of the final loss")
else:
    nb.show(nb.verdict(both, "mine.final_val", "ch8.attn.baseline.final_val", margin=ch8.MARGIN))
