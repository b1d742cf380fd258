# %% [markdown]
# # Chapter 5: Optimisers, from SGD to AdamW
#
# The chapter's three experiments, run here with the code that measured them: a learning-rate sweep
# for each of five optimisers (SGD, SGD with momentum, Adam, AdamW, Muon + AdamW), whose runs at each
# one's best rate are the comparison; weight decay over a grid of coefficients for AdamW's decoupled
# decay and for Adam + L2; and where decoupled decay leaves the weights. The tables are the ones on the
# results page; the charts are the sweep, the best rates' curves, and the decay grid. Then change a
# setting, and run the comparison on a wider model in PyTorch.
#
# Losses: every final loss is on the whole validation split (pylib.evaluation); the curves during a
# run are on a fixed subset of 32 evenly spaced validation windows (the page's live run scores the
# same subset). At the reduced size the final loss is on the split's first windows instead, and the
# tables say so.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (two seeds and one more, 20-step runs at batch 4,
# the final loss on the validation split's first 64 windows, a 30-step equilibrium run): seconds, not minutes

# %%
import matplotlib.pyplot as plt
import numpy as np

from experiments import ch5, common, notebook as nb

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The sweep, the decay grid and the equilibrium
#
# Every part of `experiments/ch5.py`, one after the other (two to three minutes at full size: about 80
# sweep runs and 30 decay runs, each scored on the whole validation split). The tables below are `ch5.markdown(results)`, the function
# that writes the chapter's section of results.md, with the paired verdicts of `pylib.compare`.

# %%
results = nb.run(ch5, corpus)
nb.show(ch5.markdown(results))

# %% [markdown]
# The chapter also quotes two numbers from chapter 3's gradient-accumulation experiment (the largest
# gradient a key bias receives, and its largest step in units of the learning rate); chapter 3's
# notebook measures them.

# %%
v = results["values"]

# %% [markdown]
# Each optimiser's runs at its best rate, seed by seed (the arms the comparisons above pair):

# %%
NAMES = list(ch5.SWEEP)
nb.show(nb.arms_table(v, [f"ch5.best.{name}.final_val" for name in NAMES]))
final_on = results["settings"]["ch5.sweep.sgd"]["final"]
print("final losses on:", final_on)

# %% [markdown]
# ## The sweep: final loss against the learning rate
#
# One line per optimiser, the mean over seeds with ±1 sd; a rate at which any seed diverged is marked
# with a cross at the top instead of a point. The rates are on different scales (an SGD step is the rate
# times the gradient, an Adam step about the rate itself), which is why each optimiser gets its own sweep.

# %%
fig, ax = plt.subplots(figsize=(8, 4.5))
top = max(m for name in NAMES for m in results["curves"][f"ch5.sweep.{name}"]["val_mean"] if m is not None)
for name in NAMES:
    sweep = results["curves"][f"ch5.sweep.{name}"]
    ok = [i for i, d in enumerate(sweep["diverged_seeds"]) if d == 0]
    x = np.array(sweep["lrs"])
    line, = ax.plot(x[ok], [sweep["val_mean"][i] for i in ok], "o-", label=v[f"ch5.label.{name}"])
    ax.errorbar(x[ok], [sweep["val_mean"][i] for i in ok], yerr=[sweep["val_sd"][i] for i in ok],
                fmt="none", color=line.get_color(), capsize=3)
    bad = [i for i, d in enumerate(sweep["diverged_seeds"]) if d > 0]
    ax.plot(x[bad], [top + 0.05] * len(bad), "x", ms=9, color=line.get_color())
    ax.plot([v[f"ch5.best.{name}.lr"]], [v[f"ch5.best.{name}.final_val.mean"]], "*", ms=14, color=line.get_color())
ax.set_xscale("log")
ax.set(xlabel="peak learning rate", ylabel="final validation loss (nats/token)",
       title=f"The sweep, {v['ch5.steps']} steps, {v['ch5.seeds']} seeds (star: best rate; x: diverged)")
ax.legend(fontsize=8)
plt.show()
print("final loss on:", final_on)

# %% [markdown]
# ## The comparison: each optimiser at its best rate
#
# The validation loss during the runs at each optimiser's best rate, mean over seeds with a ±1 sd band,
# on the fixed 32-window subset (so these are not the whole-split losses of the tables): the bands the
# chapter's live widget draws behind a run.

# %%
fig, ax = plt.subplots(figsize=(8, 4.5))
for name in NAMES:
    c = results["curves"][f"ch5.best.{name}"]
    nb.plot_band(ax, c["steps"], c["val_mean"], c["val_sd"], f"{v[f'ch5.label.{name}']}, lr {v[f'ch5.best.{name}.lr']:g}")
ax.set(xlabel="step", ylabel=f"validation loss ({c['eval_windows']}-window subset, nats/token)",
       title="Each optimiser at its best rate")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## Weight decay: the same coefficient is not the same decay
#
# At one rate fixed in advance, each method over its grid of coefficients: the final loss (left) and the
# RMS of the decayed weights at the end (right); the grey line is Adam without decay. L2's coefficient is
# divided by $\sqrt{v}$ inside Adam, AdamW's is not, so the two grids sit at different places on the
# coefficient axis.

# %%
fig, (ax_loss, ax_rms) = plt.subplots(1, 2, figsize=(10, 4))
for method, grid in ch5.DECAY_GRID.items():
    keys = [f"ch5.decay.{method}.wd{i}" for i in range(len(grid))]
    wds = [v[f"{k}.wd"] for k in keys]
    ok = [i for i, k in enumerate(keys) if v[f"{k}.final_val.mean"] is not None]
    ax_loss.errorbar([wds[i] for i in ok], [v[f"{keys[i]}.final_val.mean"] for i in ok],
                     yerr=[v[f"{keys[i]}.final_val.sd"] for i in ok], fmt="o-", capsize=3, label=method)
    ax_rms.plot([wds[i] for i in ok], [v[f"{keys[i]}.rms.mean"] for i in ok], "o-", label=method)
ax_loss.axhline(v["ch5.decay.none.final_val.mean"], color="grey", ls="--", lw=1, label="no decay (Adam)")
ax_rms.axhline(v["ch5.decay.none.rms.mean"], color="grey", ls="--", lw=1, label="no decay (Adam)")
for ax in (ax_loss, ax_rms):
    ax.set_xscale("log")
    ax.set_xlabel("weight-decay coefficient λ")
    ax.legend(fontsize=8)
ax_loss.set(ylabel="final validation loss (nats/token)", title=f"Final loss, lr {v['ch5.decay.lr']:g}")
ax_rms.set(ylabel="RMS of the decayed weights", title="Where the weights end")
plt.tight_layout()
plt.show()
print("final loss on:", final_on)

# %% [markdown]
# ## Change a setting
#
# Pick one of the chapter's optimisers and a learning rate of your own, and run it on the sweep's seeds
# with the sweep's settings (`ch5.run_config`, the same steps, batch, warmup and schedule). The verdict
# pairs your runs with that optimiser's runs at its measured best rate, seed by seed (`pylib.compare`,
# a t-interval on the paired differences). With this many seeds a difference is often *unresolved*,
# and the notebook says so rather than calling a winner. A rate at which a seed diverges has no final
# loss to compare.

# %%
OPTIMISER = "momentum"  # one of "sgd", "momentum", "adam", "adamw", "muon"
LR = 0.5  # the chapter's rates for it: results["curves"][f"ch5.sweep.{OPTIMISER}"]["lrs"]

runs = ch5.run_setting(corpus, lambda seed: ch5.run_config(OPTIMISER, LR, seed))
mine = common.arm("mine.final_val", ch5.per_seed(runs))
both = {**v, **mine}
best = f"ch5.best.{OPTIMISER}.final_val"
print(f"{v[f'ch5.label.{OPTIMISER}']} at lr {LR} against its best rate, {v[f'ch5.best.{OPTIMISER}.lr']:g}")
nb.show(nb.arms_table(both, ["mine.final_val", best]))
diverged = {seed: r["diverged_at"] for seed, r in runs.items() if r["diverged_at"] is not None}
if diverged:
    print("diverged (seed: step):", diverged, "- no paired comparison")
else:
    nb.show(nb.verdict(both, "mine.final_val", best, margin=ch5.MARGIN))

# %% [markdown]
# ## Beyond the toy: the comparison on a wider model, in PyTorch
#
# The same comparison on a wider member of the model family (`companions/beyond_ch5.py`, with
# `companions/beyond.py`'s trainer: pylib's initialisation, chapter 1's warmup, cosine and clipping):
# SGD with momentum, AdamW, and Muon on the hidden matrices with AdamW on the rest, when this PyTorch has
# `torch.optim.Muon` (recent releases do; the cell says whether this one has). Each runs at three rates
# a factor of 3 apart around its best rate on the toy, one seed each, so there is no verdict here: a
# single run's difference can be noise. On a GPU (CUDA) the model is 256 wide with 4 layers and runs
# 1,000 steps; on a CPU 64 wide with 2 layers for 200 steps (about a minute on a laptop, more on a busy
# machine); at the reduced size a 32-wide model, 10 steps, one rate each. The losses are on a fixed
# subset of 64 evenly spaced validation windows. The numbers are yours; no chapter quotes them.

# %%
from tqdm.auto import tqdm

from companions import beyond_ch5

dev = nb.device()
size = beyond_ch5.size_for(dev, small=SMALL)
steps = 10 if SMALL else (1000 if dev == "cuda" else 200)
names = ["momentum", "adamw"] + (["muon"] if beyond_ch5.has_muon() else [])
rates = {n: [v[f"ch5.best.{n}.lr"]] if SMALL else beyond_ch5.rates_around(v[f"ch5.best.{n}.lr"]) for n in names}
threads = 1 if SMALL else None  # the reduced size's tiny runs: one CPU thread (more only add overhead there)
wide = beyond_ch5.sweep(corpus, size, steps, rates, dev=dev, eval_every=5 if SMALL else None, progress=tqdm,
                        threads=threads)
print(f"device {wide['device']}; width {size.n_embd}, {size.n_layer} layers, {size.n_head} heads, context "
      f"{size.block_size}: {wide['params']:,} parameters; {steps} steps; loss on {wide['eval']}")
print("torch.optim.Muon:", "yes" if beyond_ch5.has_muon() else "not in this PyTorch (Muon left out)")
lines = ["| optimiser | " + " | ".join(f"rate {i + 1}" for i in range(max(map(len, rates.values())))) + " | best rate |",
         "| --- |" + " --- |" * (max(map(len, rates.values())) + 1)]
for n in names:
    cells = [f"{lr:g}: " + ("diverged" if r["diverged"] else f"{r['val']:.3f}") for lr, r in wide["runs"][n].items()]
    b = wide["best"].get(n)
    best_cell = "–" if b is None else f"{b['lr']:g}" + (" (edge of the rates tried)" if b["edge"] and len(rates[n]) > 1 else "")
    lines.append(f"| {beyond_ch5.NAMES[n]} | " + " | ".join(cells) + f" | {best_cell} |")
nb.show(lines)

# %%
fig, ax = plt.subplots(figsize=(8, 4.5))
for n in names:
    b = wide["best"].get(n)
    if b is None:
        continue
    run = wide["runs"][n][b["lr"]]
    ax.plot(*zip(*run["evals"]), "o-", ms=3, label=f"{beyond_ch5.NAMES[n]}, lr {b['lr']:g}")
ax.set(xlabel="step", ylabel="validation loss (64-window subset, nats/token)",
       title=f"Width {size.n_embd}, {size.n_layer} layers, on {wide['device']}: each optimiser at its best rate tried")
ax.legend(fontsize=8)
plt.show()
