# %% [markdown]
# # Chapter 11: Data parallelism, all-reduce and ZeRO
#
# The chapter's four measured parts, run here with the code that measured them (`experiments/ch11.py`):
# gloo's all-reduce timed on this CPU over localhost with 2 and 4 processes and fitted with the α–β model;
# PyTorch's own engines (DDP, ZeroRedundancyOptimizer, FSDP2) against pylib's simulated workers;
# data-parallel training of the course model with 1, 2, 4 and 8 simulated workers; and the course model's
# MFU in CPython. Then the tables, the charts, a setting to change, and the same engines on a wider model.
#
# Losses: the final losses of the data-parallel runs are scored on the whole validation split
# (`pylib.evaluation`, the last record's `val_full`); the curves are the batch loss of each training step
# and the trainer's fixed 128-window validation subset. Every time and byte count is measured on this CPU
# over localhost, and times change from run to run (the chapter keeps them apart as timings).

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (gloo on 5 sizes, PyTorch's engines on 2 processes for
# 2 steps, 2 worker counts for 20 steps, a tiny model at the end). Most of its time is starting processes that
# import torch: 8 of them, about 2 s of CPU each, so tens of seconds on a busy 2-core machine

# %%
import matplotlib.pyplot as plt
import numpy as np

from experiments import ch11, notebook as nb

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The measurements
#
# The four parts, one after the other: gloo starts 4 processes, PyTorch's engines start 4 more (2 at the
# reduced size), and each imports torch; the data-parallel runs and the MFU are NumPy in this process. The
# tables are `ch11.markdown(results)`, the function that writes the chapter's section of results.md.

# %%
results = nb.run(ch11, corpus)
nb.show(ch11.markdown(results))

# %% [markdown]
# ## gloo's all-reduce against the α–β model
#
# The chapter's alpha-beta chart with this run's measurements: for each message size, the fastest of the
# timed all-reduces (dots) and their median (crosses), and the ring model fitted to the two smallest and
# the two largest sizes (line). With 4 processes on 2 cores the processes also wait for each other's time
# slices, which the model does not know about.

# %%
c, t = results["curves"], results["timings"]
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, p in zip(axes, (2, 4)):
    k = f"ch11.gloo.p{p}"
    ax.loglog(c[f"{k}.bytes"], c[f"{k}.measured_seconds"], "o", label="measured (fastest)")
    ax.loglog(c[f"{k}.bytes"], c[f"{k}.median_seconds"], "x", color="grey", label="measured (median)")
    ax.loglog(c[f"{k}.bytes"], c[f"{k}.predicted_seconds"], "-", label=(
        f"ring model: α = {t[f'{k}.alpha_us']:.0f} µs, {t[f'{k}.bandwidth_gb_per_s']:.2f} GB/s"))
    ax.set(xlabel="message (bytes)", title=f"{p} processes" + (" (oversubscribed)" if p == 4 else ""))
    ax.legend(fontsize=8)
axes[0].set_ylabel("all-reduce time (s)")
plt.show()

# %% [markdown]
# ## Data-parallel training: the same run, whatever the worker count
#
# The chapter's dp-train widget: the default model trained from the same start on the same batches, its
# gradient computed by W simulated workers and added with the ring. Left, each step's batch loss and, as
# dots, the loss on the fixed 128-window validation subset. Right, how far each W's batch loss is from one
# worker's: float32 rounding, because the same numbers are added in another order.

# %%
v, dp_settings = results["values"], results["settings"]["ch11.dp"]
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
base = np.asarray(c["ch11.dp.w1.loss"])
for W in dp_settings["workers"]:
    line, = ax.plot(c[f"ch11.dp.w{W}.loss"], lw=1, label=f"W = {W}")
    ax.plot(c[f"ch11.dp.w{W}.val_step"], c[f"ch11.dp.w{W}.val"], ".", color=line.get_color())
    if W > 1:
        diff = np.abs(np.asarray(c[f"ch11.dp.w{W}.loss"]) - base)
        ax2.semilogy(np.where(diff > 0, diff, np.nan), ".", ms=3, color=line.get_color(), label=f"W = {W}")
ax.set(xlabel="step", ylabel="loss (nats/token)", title=f"batch loss; dots: validation subset (seed {dp_settings['seed']})")
ax.legend()
ax2.set(xlabel="step", ylabel="|batch loss − one worker's| (nats)", title="difference from W = 1 (zeros not drawn)")
ax2.legend()
plt.tight_layout()
plt.show()
print("final loss on the whole validation split:",
      ", ".join(f"W = {W}: {v[f'ch11.dp.w{W}.final_val']:.6f}" for W in dp_settings["workers"]))

# %% [markdown]
# ## What each rank holds, and where a step's time goes
#
# The zero-stages widget's question, answered by PyTorch's engines on the course model: the bytes each rank
# keeps between steps (the largest over the ranks; `companions/ch11_ddp.py`'s `held_bytes`), beside the
# step-time split of DDP on rank 0 (medians, timings).

# %%
world = results["settings"]["ch11.torch"]["world"]
engines, parts = ("ddp", "zero1", "fsdp2"), ("params", "grads", "moments")
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
for i, part in enumerate(parts):
    ax.bar(np.arange(3) + (i - 1) * 0.27, [v[f"ch11.torch.{e}.held.{part}.max"] for e in engines], 0.27,
           label={"params": "parameters", "grads": "gradients", "moments": "AdamW moments"}[part])
ax.set_xticks(range(3), engines)
ax.set(ylabel="bytes per rank (largest rank)", title=f"the course model on {world} ranks")
ax.legend()
if "ch11.torch.compute_ms" in t:
    names = ["compute (no_sync)", "all-reduce alone", "DDP forward + backward"]
    ax2.barh(names, [t["ch11.torch.compute_ms"], t["ch11.torch.allreduce_ms"], t["ch11.torch.step_ms"]])
    ax2.set(xlabel="ms (rank 0, median)", title="DDP's step-time split")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Change a setting
#
# Train with another number of simulated workers, one that need not divide the batch of 16 windows, and
# compare it with one worker over several seeds. This is glue around the chapter's own calls (pylib's
# `data_parallel_train_state`, `train_steps`, and `experiments.common`'s `final_val` and `arm`), at the
# chapter's step count. Each worker divides by the global token count, so the claim is that nothing but
# rounding changes: the verdict pairs the seeds (`pylib.compare`) with a margin of 0.001 nats chosen before
# looking. *null* means every difference the seeds allow is inside the margin; *unresolved* means these seeds
# cannot tell.

# %%
from experiments.common import SEEDS, arm, final_val, progress, scaled
from pylib import model, train
from pylib.systems import data_parallel as dp

WORKERS = 3  # try 2, 5, 16

seeds, steps = scaled(SEEDS, (0, 1)), dp_settings["steps"]
finals = {1: {}, WORKERS: {}}
for seed in progress(seeds, desc=f"1 and {WORKERS} workers, {steps} steps", unit="seed"):
    for W in finals:
        tc = train.TrainConfig(steps=steps, seed=seed, final_eval=True)
        state = dp.data_parallel_train_state(model.GPTConfig(), tc, W)
        finals[W][seed] = final_val(train.train_steps(state, model.GPTConfig(), tc, corpus.train, corpus.val, steps))
mine = {**arm(f"w{WORKERS}.final_val", finals[WORKERS]), **arm("w1.final_val", finals[1])}
nb.show(nb.arms_table(mine, [f"w{WORKERS}.final_val", "w1.final_val"], spec=".6f"))
nb.show(nb.verdict(mine, f"w{WORKERS}.final_val", "w1.final_val", margin=0.001))
print(f"seed 0, one worker: {finals[1][0]:.6f} here, {v['ch11.dp.w1.final_val']:.6f} in the part above (the same run)")

# %% [markdown]
# ## Beyond the toy
#
# The same three engines on a wider member of the family (`companions/beyond_ch11.py`, reusing
# `companions/ch11_ddp.py` and `companions/launch.py`): pylib's initial weights for one seed, the same
# batches on every engine, spawned processes joined with a timeout. On a machine with several GPUs each
# rank takes one and the engines talk over NCCL; otherwise the processes run on this CPU over gloo, one
# thread each. On a CPU the default is a 256-wide, 4-layer model on 2 processes for
# 10 steps, about a minute on a 2-core machine; with GPUs a 512-wide, 8-layer one; at the reduced size a tiny
# one. The table sets each rank's bytes beside pylib's ZeRO calculator (chapter 10's, fp32) and, on the CPU,
# the bytes each rank wrote to its sockets in the last step beside pylib's ring closed form. The chapter's
# remark on FSDP2's traffic over gloo (its reduce-scatter writes as many bytes as an all-reduce) is worth
# rereading beside that column. These numbers are yours: the chapter quotes none of them.

# %%
import torch

from companions import beyond, beyond_ch11

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
if SMALL:
    size, world, steps, batch, repeats = beyond.Size(n_embd=32, n_layer=2, n_head=2, block_size=32), 2, 2, 8, 1
elif GPUS >= 2:
    world = min(GPUS, 4)
    size, steps, batch, repeats = beyond.Size(n_embd=512, n_layer=8, n_head=8, block_size=256), 50, 8 * world, 10
else:
    size, world, steps, batch, repeats = beyond.Size(n_embd=256, n_layer=4, n_head=4, block_size=64), 2, 10, 16, 5
backend = beyond_ch11.backend_for(world)
print(f"{world} processes over {backend} ({'one GPU each' if backend == 'nccl' else 'CPU, one thread each'}); "
      f"size {size}, {steps} steps of {batch} windows")
beyond_out = beyond_ch11.run(corpus, size, world=world, steps=steps, batch_size=batch, repeats=repeats)
beyond_summary = beyond_ch11.summary(beyond_out)
nb.show(beyond_ch11.table(beyond_out, beyond_summary))

# %% [markdown]
# Left, the batch loss of each engine (the mean over the ranks' equal shares): the engines change what each
# rank holds, not the training, so the lines should lie on top of each other. Right, each rank's bytes
# between steps against pylib's calculator (hatched).

# %%
rows = beyond_summary["engines"]
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for e, r in rows.items():
    ax.plot(range(1, len(r["losses"]) + 1), r["losses"], marker=".", label=e)
ax.set(xlabel="step", ylabel="batch loss (nats/token)", title=f"{beyond_out['params']:,} parameters, {world} ranks")
ax.legend()
for i, part in enumerate(("params", "grads", "moments")):
    x = np.arange(len(rows)) + (i - 1) * 0.27
    ax2.bar(x, [r[part][1] for r in rows.values()], 0.13, align="edge",
            label={"params": "parameters", "grads": "gradients", "moments": "AdamW moments"}[part], color=f"C{i}")
    predicted = [r["predicted"]["optimizer" if part == "moments" else part] for r in rows.values()]
    ax2.bar(x - 0.13, predicted, 0.13, align="edge", color=f"C{i}", alpha=0.4, hatch="//")
ax2.set_xticks(range(len(rows)), list(rows))
ax2.set(ylabel="bytes per rank (largest rank)", title="held between steps (hatched: pylib's calculator)")
ax2.legend(fontsize=8)
plt.tight_layout()
plt.show()
