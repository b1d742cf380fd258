# %% [markdown]
# # Chapter 10: Training memory
#
# The chapter's measurements, run here with the code that made them (`experiments/ch10.py`): the bytes of
# activations one forward and backward holds in each recomputation mode (none, selective, full) for three
# models, counted from pylib's own caches; the time each mode's step takes; and PyTorch's
# `torch.utils.checkpoint` on the same models and weights (`companions/ch10_checkpoint.py`), its gradients
# and the bytes autograd keeps, against pylib's count. The tables are the ones on the results page; the charts
# are the chapter's activation timeline and memory calculator, drawn with pylib's functions. Then count a
# shape of your own, and measure a larger model in PyTorch.
#
# Nothing here trains or evaluates a model: there are no losses, and no seeds to average. The counts are
# exact (they agree with pylib's formula to the byte, or they do not), and the gradients are compared element
# by element. Only the step times vary from run to run.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (the same shapes, 2 timed steps instead of 25, a tiny Beyond model): seconds

# %%
import matplotlib.pyplot as plt
import numpy as np

from experiments import ch10, notebook as nb
from pylib import model
from pylib.systems import checkpointing, memory

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## Bytes held, step times, and PyTorch's engine
#
# Every part of `experiments/ch10.py`, one after the other (well under a minute at full size). The tables
# below are `ch10.markdown(results)`, the function that writes the chapter's section of results.md. The
# formulas the chapter sets beside the counts are derived at build time by `ch10.derived`, which the next
# cell calls too.

# %%
results = nb.run(ch10, corpus)
nb.show(ch10.markdown(results))
formula = ch10.derived(corpus)

# %% [markdown]
# ## The activation timeline
#
# The chapter's widget: `pylib.systems.checkpointing.timeline` runs one step of the course model at its
# training batch, operation by operation, and counts the bytes held after each (every buffer once,
# parameters left out), in each mode. The ring marks the peak; the label names the tensor whose allocation
# set it. Forward operations come first, then the backward pass, with recomputation inside it.

# %%
cfg, x, y = ch10.shape_batch(corpus, "course")
params = model.init_params(cfg, 0)
colours = {"forward": "tab:blue", "backward": "grey", "recompute": "tab:orange"}
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
for ax, mode in zip(axes, ch10.MODES):
    tl = checkpointing.timeline(params, cfg, x, y, mode)
    held = [e["held"] / 1024 for e in tl["events"]]
    ax.bar(range(len(held)), held, color=[colours[e["phase"]] for e in tl["events"]])
    i = tl["peak_index"]
    ax.plot(i, held[i], "o", ms=14, mfc="none", mec="red", mew=2)
    ax.annotate(tl["set_by"][0], (i, held[i]), textcoords="offset points", xytext=(0, 10), ha="center", fontsize=7)
    ax.set(xlabel="operation", title=f"{mode}: peak {tl['peak']:,} B")
axes[0].set_ylabel("KiB held (activations)")
handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
axes[-1].legend(handles, list(colours), fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Each model's count against the formula
#
# The bytes held at the end of the forward pass and at the step's peak, measured (pylib's cache accounting,
# `results`) beside the peak `memory.recompute_bytes` predicts (`ch10.derived`); the chapter's claim is that
# they agree to the byte, and the last column says whether they do here.

# %%
rows = ["| model | mode | held after forward (B) | peak (B) | formula's peak (B) | equal |", "| --- | --- | --- | --- | --- | --- |"]
v = results["values"]
fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
for ax, name in zip(axes, ch10.SHAPES):
    stored = [v[f"ch10.ckpt.{name}.{m}.stored"] / 1024 for m in ch10.MODES]
    peak = [v[f"ch10.ckpt.{name}.{m}.peak"] / 1024 for m in ch10.MODES]
    pos = np.arange(len(ch10.MODES))
    ax.bar(pos - 0.2, stored, 0.4, label="held after forward")
    ax.bar(pos + 0.2, peak, 0.4, label="peak")
    ax.plot(pos + 0.2, [formula[f"ch10.formula.{name}.{m}.peak"] / 1024 for m in ch10.MODES], "k_", ms=20,
            label="formula's peak")
    ax.set_xticks(pos, ch10.MODES)
    k = f"ch10.ckpt.{name}"
    ax.set(title=f"{name}: L={v[k + '.L']}, C={v[k + '.C']}, B×T={v[k + '.B']}×{v[k + '.T']}", ylabel="KiB")
    for m in ch10.MODES:
        f = formula[f"ch10.formula.{name}.{m}.peak"]
        rows.append(f"| {name} | {m} | {v[f'{k}.{m}.stored']:,} | {v[f'{k}.{m}.peak']:,} | {f:,} | "
                    f"{'yes' if f == v[f'{k}.{m}.peak'] else 'no'} |")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()
nb.show(rows)

# %% [markdown]
# ## The price in time
#
# The fastest of the interleaved steps in each mode (a timing: it changes with the machine's load, and at the
# reduced size there are only two repeats), and PyTorch's kept bytes as a share of pylib's count per mode
# (`ch10.torch.*.ratio`: PyTorch keeps GELU's input instead of its tanh, and copies q, k and v, so it is not 1).

# %%
t = results["timings"]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
pos = np.arange(len(ch10.SHAPES))
for j, mode in enumerate(ch10.MODES):
    axes[0].bar(pos + (j - 1) * 0.27, [t[f"ch10.time.{n}.{mode}.ms"] for n in ch10.SHAPES], 0.27, label=mode)
    if f"ch10.torch.course.{mode}.ratio" in v:
        axes[1].bar(pos + (j - 1) * 0.27, [v[f"ch10.torch.{n}.{mode}.ratio"] for n in ch10.SHAPES], 0.27, label=mode)
axes[0].set_xticks(pos, list(ch10.SHAPES))
axes[0].set(ylabel="fastest step (ms)", title=f"one forward and backward, fastest of {v['ch10.time.repeats']}")
axes[1].set_xticks(pos, list(ch10.SHAPES))
axes[1].axhline(1, color="grey", lw=0.5)
axes[1].set(ylabel="PyTorch's kept bytes / pylib's", title="torch.utils.checkpoint against pylib (float32)")
axes[0].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The memory calculator: LLaMA 7B
#
# The chapter's calculator at its defaults, drawn over the sequence length: the activations LLaMA 7B's
# forward pass stores for one sequence (`memory.training_memory`, Korthikanti et al.'s count, 16-bit), with
# and without recomputation, with standard attention (the s² probabilities stored) and with memory-efficient
# attention (never stored), against the model states (weights, gradients and AdamW's state in mixed
# precision). Formulas, not measurements.

# %%
lengths = [512, 1024, 2048, 4096, 8192]
gib = 2 ** 30
states = memory.training_memory(memory.LLAMA_7B, 1, 2048)["model_states"] / gib
fig, ax = plt.subplots(figsize=(7, 4))
for mode, colour in zip(ch10.MODES, ("tab:blue", "tab:orange", "tab:green")):
    for fa, style in ((False, "-"), (True, "--")):
        act = [memory.training_memory(memory.LLAMA_7B, 1, s, recompute=mode, memory_efficient_attention=fa)["activations"] / gib
               for s in lengths]
        ax.plot(lengths, act, style, color=colour, marker="o" if not fa else "x",
                label=f"{mode}, {'memory-efficient' if fa else 'standard'} attention")
ax.axhline(states, color="black", lw=1)
ax.text(lengths[-1], states, "model states ", va="bottom", ha="right")
ax.set(xscale="log", yscale="log", xlabel="sequence length (tokens, batch 1)", ylabel="GiB (activations stored)",
       title="LLaMA 7B, mixed precision (formulas)")
ax.minorticks_off()
ax.set_xticks(lengths, [str(s) for s in lengths])
ax.legend(fontsize=7, loc="lower right")
plt.show()

# %% [markdown]
# ## Change a setting
#
# Count a model of your own: a shape (pylib.model.GPTConfig's overrides, a batch B and a window length T),
# run through the chapter's own parts (`ch10.part_memory` and `ch10.part_time` with `shapes=`), in the same
# three modes, with the formula beside it. There are no seeds here and no paired verdict: the count either
# equals the formula to the byte or it does not, and every gradient either equals plain backpropagation's
# bit for bit or it does not (the "unequal grad elements" column). Try more layers (recomputation pays off),
# a longer T (the probabilities' T² term grows), or a single head.

# %%
MY_SHAPE = {"mine": (dict(n_layer=3, n_head=4, n_embd=32, block_size=128), 4, 128)}  # (overrides, B, T)

mine = nb.merged(ch10.part_memory(corpus, shapes=MY_SHAPE), ch10.part_time(corpus, shapes=MY_SHAPE))
nb.show(ch10.markdown(mine, shapes=MY_SHAPE))
overrides, B, T = MY_SHAPE["mine"]
my_cfg = ch10.shape_batch(corpus, "mine", MY_SHAPE)[0]
rows = ["| mode | peak counted (B) | formula's peak (B) | equal | the course model's peak (B) |", "| --- | --- | --- | --- | --- |"]
for m in ch10.MODES:
    counted, predicted = mine["values"][f"ch10.ckpt.mine.{m}.peak"], memory.recompute_bytes(my_cfg, B, T, m)["peak"]
    rows.append(f"| {m} | {counted:,} | {predicted:,} | {'yes' if counted == predicted else 'no'} | "
                f"{v[f'ch10.ckpt.course.{m}.peak']:,} |")
nb.show(rows)

# %% [markdown]
# ## Beyond the toy
#
# The same measurement on a larger member of the family, in PyTorch (`companions/beyond_ch10.py`, built on
# the chapter's companion): per mode, the bytes autograd keeps for the backward (saved-tensor hooks), the
# companion's prediction of them, pylib's count for the same shape (`memory.recompute_bytes`, held after the
# forward and the step's peak) with the bytes left once the companion's term-by-term differences are taken
# off, what the machine itself reports, and the step's time. On a GPU the measurement is the CUDA allocator's
# (`torch.cuda.memory_allocated` after the forward, `torch.cuda.max_memory_allocated` over the step, whose peak
# also holds the gradients, which pylib's does not count) on a 512-wide, 8-layer model with 512-token windows;
# on a CPU it is PyTorch's memory profiler, on a 256-wide, 8-layer model with 256-token windows (about a minute
# here); at the reduced size a tiny model. Float32 throughout; your numbers, not the chapter's.

# %%
import torch

from companions import beyond, beyond_ch10
from experiments.common import progress

DEVICE = nb.device()
THREADS = 1  # torch's CPU threads here; more on an idle many-core machine
if DEVICE == "cpu":
    torch.set_num_threads(THREADS)
if SMALL:
    size, batch, repeats = beyond.Size(n_embd=32, n_layer=2, n_head=4, block_size=32), 2, 1
elif DEVICE == "cuda":
    size, batch, repeats = beyond.Size(n_embd=512, n_layer=8, n_head=8, block_size=512), 8, 5
else:
    size, batch, repeats = beyond.Size(n_embd=256, n_layer=8, n_head=8, block_size=256), 8, 3
print(f"device {DEVICE}" + (f", {torch.get_num_threads()} CPU threads" if DEVICE == "cpu" else "")
      + f"; size {size}, batch {batch}, fastest of {repeats} steps")
big = beyond_ch10.measure(corpus, size, batch_size=batch, dev=DEVICE, repeats=repeats, progress=progress)
nb.show(beyond_ch10.table(big))

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
pos = np.arange(len(big["modes"]))
unit = 2 ** 20
ax.bar(pos - 0.3, [r["saved"] / unit for r in big["modes"].values()], 0.2, label="PyTorch keeps (hooks)")
ax.bar(pos - 0.1, [r["measured_stored"] / unit for r in big["modes"].values()], 0.2,
       label="held after forward (CUDA allocator)" if big["device"] == "cuda" else "held after forward (CPU profiler)")
ax.bar(pos + 0.1, [r["pylib_stored"] / unit for r in big["modes"].values()], 0.2, label="pylib's count, held after forward")
ax.bar(pos + 0.3, [r["pylib_peak"] / unit for r in big["modes"].values()], 0.2, label="pylib's count, peak")
if big["device"] == "cuda":
    ax.plot(pos, [r["measured_peak"] / unit for r in big["modes"].values()], "k_", ms=40, label="CUDA peak over the step")
ax.set_xticks(pos, list(big["modes"]))
ax.set(ylabel="MiB", title=f"width {size.n_embd}, {size.n_layer} layers, B×T = {batch}×{size.block_size}, {big['device']}")
ax.legend(fontsize=7)
plt.show()
