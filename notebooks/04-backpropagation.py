# %% [markdown]
# # Chapter 4: Backpropagation through a transformer
#
# The chapter's four measurements, run here with the code that made them (`experiments/ch4.py`): the
# gradient check of every element of every parameter (float64, centred differences) at the initial
# weights and again at perturbed ones, the same check with a LayerNorm backward that ignores its gain,
# the bytes the forward's caches keep for the backward, and the gradient norm of each block of the
# 4-layer `decoder-4x64` preset at initialisation and after a short run, over the course's seeds.
#
# No validation loss appears in this chapter. The gradient checks run on a fixed batch of 2 training
# windows, and the highway's gradient norms on a fixed batch of 16 training windows
# (`pylib.data.eval_windows`, no randomness); the short training run's own evaluations are not used.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (8 elements per tensor, two seeds, 10 steps): seconds

# %%
import matplotlib.pyplot as plt
import numpy as np

from experiments import ch4, notebook as nb

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The measurements
#
# Every part of `experiments/ch4.py`, one after the other (under a minute on a laptop at full size;
# the two full gradient checks are most of it). The tables are `ch4.markdown(results)`, the function
# that writes the chapter's section of results.md, with the paired verdicts of `pylib.compare`.

# %%
results = nb.run(ch4, corpus)
nb.show(ch4.markdown(results))

# %% [markdown]
# ## The gradient check, tensor by tensor
#
# For each tensor, the largest disagreement between the backward's gradient and the centred
# difference, relative to the tensor's largest gradient: at the initial weights and at the perturbed
# ones (LayerNorm gains away from 1, biases away from 0). The dashed lines are the largest error of
# the LayerNorm backward that ignores its gain. The chapter's point: at the initial weights every gain
# is 1, so ignoring it changes nothing and the check is blind to the bug; compare each dashed line with
# the bars of its colour.

# %%
v = results["values"]
names = [k[len("ch4.gradcheck."):-len(".max")] for k in v
         if k.startswith("ch4.gradcheck.") and k.endswith(".max") and k.count(".") > 2
         and not k.startswith(("ch4.gradcheck.perturbed.", "ch4.gradcheck.bug_ignore_gain."))]
y = np.arange(len(names))
fig, ax = plt.subplots(figsize=(7, 0.3 * len(names) + 1.5))
ax.barh(y - 0.2, [v[f"ch4.gradcheck.{n}.max"] for n in names], height=0.4, label="initial weights")
ax.barh(y + 0.2, [v[f"ch4.gradcheck.perturbed.{n}.max"] for n in names], height=0.4, label="perturbed weights")
for which, color in (("init", "C0"), ("perturbed", "C1")):
    ax.axvline(v[f"ch4.gradcheck.bug_ignore_gain.{which}.max"], ls="--", color=color, lw=1,
               label=f"gain-ignoring backward, {which} weights")
ax.set_yticks(y, names, fontsize=8)
ax.invert_yaxis()
ax.set_xscale("log")
ax.set(xlabel="largest |analytic − numerical| / largest |gradient| of the tensor (log scale)",
       title=f"Gradient check, {v['ch4.gradcheck.elements']:,} elements, float64")
ax.legend(fontsize=8, loc="lower right")
plt.show()

# %% [markdown]
# ## What the backward keeps
#
# The bytes each cached array holds at the training batch (B windows of T tokens, float32), counted
# from the forward's caches (`pylib.systems.memory.measure_activations`), beside the chapter's formula
# for the same shapes (`pylib.systems.memory.activation_bytes`, computed here, not measured).

# %%
formula = ch4.derived(corpus)
rows = v["ch4.act.rows"]
fig, ax = plt.subplots(figsize=(7, 0.28 * len(rows) + 1.5))
ax.barh(np.arange(len(rows)), [v[f"ch4.act.{r}"] / 1024 for r in rows])
ax.set_yticks(np.arange(len(rows)), rows, fontsize=8)
ax.invert_yaxis()
ax.set(xlabel="KiB kept for the backward",
       title=f"Activation memory, B = {v['ch4.act.B']}, T = {v['ch4.act.T']}: counted total "
             f"{v['ch4.act.total'] / 1024:,.0f} KiB, formula {formula['ch4.formula.total'] / 1024:,.0f} KiB")
plt.show()

# %% [markdown]
# ## The residual highway
#
# The gradient norm of each group of parameters of `decoder-4x64` on the fixed batch, at initialisation
# and after the short run: mean over seeds, with error bars of ±1 standard deviation.

# %%
groups = ["embeddings"] + [f"h.{i}" for i in range(v["ch4.highway.n_layer"])] + ["ln_f"]
x = np.arange(len(groups))
fig, ax = plt.subplots(figsize=(7, 4))
for dx, when, label in ((-0.2, "init", "at initialisation"),
                        (0.2, "trained", f"after {v['ch4.highway.steps']} steps")):
    ax.bar(x + dx, [v[f"ch4.highway.{when}.{g}.mean"] for g in groups], width=0.4, label=label,
           yerr=[v[f"ch4.highway.{when}.{g}.sd"] for g in groups], capsize=3)
ax.set_xticks(x, groups)
ax.set(xlabel="parameter group (h.0 is the first block)", ylabel="gradient L2 norm (fixed 16-window batch)",
       title=f"decoder-4x64, {v['ch4.highway.init.h.0.n']} seeds")
ax.legend()
plt.show()

# %% [markdown]
# ## Change a setting
#
# Rerun the highway measurement with another peak learning rate for the short run, on the same seeds
# and the same fixed batch. The verdicts pair your runs with the chapter's (`ch4.HIGHWAY_LR`) seed by seed
# (`pylib.compare`, a t-interval on the paired differences): the first block's gradient norm after
# training, and the ratio of the first block's gradient to the last's. With this few seeds a
# difference is often *unresolved*, and then the notebook does not call a winner.

# %%
LR = 0.003  # try 0.001, 0.03 or 0.1

mine = {k.replace("ch4.highway.", "mine."): x for k, x in ch4.run_highway(corpus, lr=LR)[0].items()}
both = {**v, **mine}
nb.show(nb.arms_table(both, ["mine.trained.h.0", "ch4.highway.trained.h.0",
                             "mine.trained.first_over_last", "ch4.highway.trained.first_over_last"]))
nb.show(nb.verdict(both, "mine.trained.h.0", "ch4.highway.trained.h.0"))
nb.show(nb.verdict(both, "mine.trained.first_over_last", "ch4.highway.trained.first_over_last"))
