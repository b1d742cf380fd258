# %% [markdown]
# # Chapter 12: Model parallelism
#
# The chapter's measured parts, run here with the code that measured them (`experiments/ch12.py`): the
# 4-layer variant of the course model cut into pipeline stages (GPipe, 1F1B, interleaved) and split by
# tensor parallelism, in float64 and float32, against the unsplit model; ring and all-gather attention
# against full attention; and the same cuts in PyTorch's own engines (`torch.distributed.pipelining`,
# DTensor) on gloo processes. Then the chapter's Gantt chart from pylib's simulator, a setting to change,
# and the schedules timed on a deeper model.
#
# Nothing in this chapter trains, so there are no seeds and no validation curves. Every loss and gradient
# here is the loss on 8 evenly spaced windows of the validation split (`pylib.data.eval_windows`), and the
# measure is how far a split model's gradients are from the unsplit model's, relative to each tensor's
# largest entry.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (PyTorch's engines only on the cases the chapter quotes
# by name, a tiny model at the end). The NumPy parts take a second either way; most of the time is starting
# 8 processes that import torch (the chapter's 2 and 4, and 2 at the end), about 2 s of CPU each

# %%
import matplotlib.pyplot as plt
import numpy as np

from experiments import ch12, notebook as nb
from pylib.systems import pipeline

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The measurements
#
# Both parts: the NumPy splits (`part_split`), then PyTorch's engines (`part_torch`: one launch of 2 gloo
# processes, one of 4). The table is `ch12.markdown(results)`, the chapter's section of results.md.

# %%
results = nb.run(ch12, corpus)
v = results["values"]
nb.show(ch12.markdown(results))

# %% [markdown]
# ## The chapter's Gantt chart
#
# pylib's simulator (`pylib.systems.pipeline.simulate_pipeline`) on the chapter's example: 4 stages,
# 8 micro-batches, a backward pass taking twice a forward, communication free. Each bar is one forward (F,
# light) or backward (B, dark) of one micro-batch on one device; the interleaved schedule runs 2 chunks per
# device, each half as long (a prime marks the second chunk). These are derived, not measured: the same every
# time.


# %%
def gantt(ax, sim):
    colours = plt.cm.tab10(np.arange(10))
    for s, kind, mb, chunk, start, end in sim["events"]:
        colour = colours[mb % 10] * (0.55 if kind == "B" else 1.0)
        ax.broken_barh([(start, end - start)], (s - 0.4, 0.8), facecolors=np.clip(colour, 0, 1), edgecolor="white", lw=0.5)
        ax.text((start + end) / 2, s, f"{kind}{mb}" + "'" * chunk, ha="center", va="center", fontsize=6, color="white")
    ax.set_yticks(range(sim["stages"]), [f"device {s}" for s in range(sim["stages"])])
    ax.invert_yaxis()
    ax.set_title(f"{sim['schedule']}, p = {sim['stages']}, m = {sim['microbatches']}, v = {sim['chunks']}: "
                 f"bubble {sim['bubble_over_ideal']:.0%} of the work", fontsize=10)


fig, axes = plt.subplots(3, 1, figsize=(11, 7), sharex=True)
for ax, (schedule, chunks) in zip(axes, (("gpipe", 1), ("1f1b", 1), ("interleaved", 2))):
    gantt(ax, pipeline.simulate_pipeline(schedule, 4, 8, chunks))
axes[-1].set_xlabel("time (units of one micro-batch's forward through one whole stage)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Splitting changes where the work happens, not the answer
#
# The largest gradient difference from the unsplit model for each split, in float64 and float32 (the
# table above, as bars), beside float32's and float64's unit roundoff. In float32, adding up the
# micro-batches' gradients is itself a change in the order of summation.

# %%
labels = [f"{s}, {p} stages" + (f", v = {vv}" if vv > 1 else "") for s, p, m, vv in ch12.SCHEDULE_CASES]
labels.append("tensor parallel, 2")
keys = [f"ch12.pipeline.{s}_{p}" for s, p, m, vv in ch12.SCHEDULE_CASES]
f64 = [v[k + ".f64"] for k in keys] + [v["ch12.tp.rel_diff.f64"]]
f32 = [v[k + ".f32"] for k in keys] + [v["ch12.tp.rel_diff.f32"]]
fig, ax = plt.subplots(figsize=(9, 3.8))
x = np.arange(len(labels))
ax.bar(x - 0.2, np.maximum(f64, 1e-18), 0.4, label="float64")
ax.bar(x + 0.2, np.maximum(f32, 1e-18), 0.4, label="float32")
ax.axhline(2.0 ** -24, ls="--", color="C1", lw=1)
ax.text(0.01, 2.0 ** -24, "float32's u", color="C1", ha="left", va="bottom", fontsize=8, transform=ax.get_yaxis_transform())
ax.axhline(2.0 ** -53, ls="--", color="C0", lw=1)
ax.text(0.01, 2.0 ** -53, "float64's u", color="C0", ha="left", va="bottom", fontsize=8, transform=ax.get_yaxis_transform())
ax.set_yscale("log")
ax.set_xticks(x, labels, rotation=20, ha="right", fontsize=8)
ax.set(ylabel="largest |Δ gradient| / tensor's largest entry", title=f"against the unsplit model, {v['ch12.windows']} windows")
ax.legend(loc="center right")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## PyTorch's engines, case by case
#
# Each pipeline case `part_torch` ran: the gradients' largest difference from pylib's unsplit float32
# model (in units of float32's rounding, 2⁻²⁴), whether every process executed pylib's `device_order`
# action by action, and how many actions of torch's own published plan (`pipeline_order`) differ from what
# it executed. At the reduced size only the cases the chapter quotes by name run.

# %%
u = v["ch12.torch.u32"]
cases = sorted({k.rsplit(".", 1)[0] for k in v if k.startswith("ch12.torch.pipeline.") and k.endswith(".rel_diff")})
lines = ["| case | processes | gradients vs unsplit (u) | order as pylib's | plan ≠ executed | forwards before the first backward (torch / pylib) |",
         "| --- | ---: | ---: | --- | ---: | --- |"]
for k in cases:
    name = k.removeprefix("ch12.torch.pipeline.")
    warm = f"{v[k + '.warmup_torch']} / {v[k + '.warmup_pylib']}" if k + ".warmup_torch" in v else "–"
    lines.append(f"| {name} | {name.split('_')[1]} | {v[k + '.rel_diff'] / u:.1f} | {v[k + '.order_matches']} | "
                 f"{v[k + '.plan_differs']} | {warm} |")
lines += ["", f"DTensor on 2 processes: seed 000's FFN as the chapter's example: {v['ch12.torch.tp.ffn.matches']}; "
          f"every block's MLP split: {v['ch12.torch.tp.mlp.rel_diff'] / u:.1f} u from the unsplit model; MLP and "
          f"attention split by heads: {v['ch12.torch.tp.attn.rel_diff'] / u:.1f} u; ColwiseParallel straight on the "
          f"packed q, k, v rows: loss off by {v['ch12.torch.tp.attn.packed.loss_rel_diff']:.1e} (relative)."]
nb.show(lines)

# %% [markdown]
# ## Change a setting
#
# Pick a schedule, a number of stages, of micro-batches and of chunks per device, and run the same check
# the chapter runs: pylib's `pipeline_loss_and_grads` on the chapter's 4-layer model and windows (the
# module's own `_batch` and `_rel`), in float64 and float32, and the simulator's bubble and chart for the
# same layout. Nothing here depends on a seed, so there is no paired verdict: the claim is an identity,
# and the check is that the difference stays at the rounding of the precision. (The stages times the
# chunks must not exceed the model's 4 layers; the interleaved schedule needs the micro-batches to be a
# multiple of the stages.)

# %%
import dataclasses

from pylib import model

SCHEDULE, STAGES, MICROBATCHES, CHUNKS = "1f1b", 4, 4, 1  # try ("gpipe", 2, 2, 1), ("interleaved", 2, 4, 2)

cfg = dataclasses.replace(model.GPTConfig(), n_layer=4)
x, y = ch12._batch(corpus, cfg)
mine = {}
for dtype, tag in ((np.float64, "float64"), (np.float32, "float32")):
    params = model.init_params(cfg, 0, dtype)
    _, grads = model.loss_and_grads(params, cfg, x, y)
    _, pgrads, _ = pipeline.pipeline_loss_and_grads(params, cfg, x, y, STAGES, MICROBATCHES, SCHEDULE, CHUNKS)
    mine[tag] = ch12._rel(pgrads, grads)
sim = pipeline.simulate_pipeline(SCHEDULE, STAGES, MICROBATCHES, CHUNKS)
nb.show([f"| {SCHEDULE}, p = {STAGES}, m = {MICROBATCHES}, v = {CHUNKS} | largest gradient difference | in units of u |",
         "| --- | ---: | ---: |",
         f"| float64 | {mine['float64']:.2e} | {mine['float64'] / 2.0 ** -53:.1f} |",
         f"| float32 | {mine['float32']:.2e} | {mine['float32'] / 2.0 ** -24:.1f} |", "",
         f"Simulated bubble: {sim['bubble_over_ideal']:.0%} of the work; the most micro-batches' activations a device "
         f"holds at once: {max(sim['peak_in_flight'])}."])
fig, ax = plt.subplots(figsize=(11, 0.6 * STAGES + 1))
gantt(ax, sim)
ax.set_xlabel("time (units of one micro-batch's forward through one whole stage)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Beyond the toy
#
# The schedules on a deeper member of the family (`companions/beyond_ch12.py`, reusing
# `companions/ch12_pipeline.py` and `ch12_tensor_parallel.py`): pylib's initial weights, cut into 2 stages on
# 2 gloo processes (spawned, and joined with a timeout), each step timed between two barriers, against the
# unsplit model's step on one process and against pylib's simulator, which predicts the unsplit time divided
# by the stages, times (1 + the bubble). 1F1B runs at several micro-batch counts, GPipe and the interleaved
# schedule at one; each case is also checked for its order and its gradients, and DTensor splits the same
# model by heads. Both companions build their stages and meshes on the CPU, so this runs on CPU processes
# even where a GPU is present. The default is an 8-layer, 128-wide model, about a minute on a 2-core machine;
# at the reduced size a tiny one. What the simulator leaves out (smaller matrices per micro-batch, sending
# activations, Python's cost per action, two processes sharing this machine with whatever else runs) is what
# the measured time adds. These numbers are yours: the chapter quotes none of them.

# %%
from companions import beyond, beyond_ch12

if SMALL:
    size, batch, repeats = beyond.Size(n_embd=32, n_layer=4, n_head=2, block_size=32), 8, 1
    torch_cases = [("gpipe", 4, 1), ("1f1b", 4, 1)]
else:
    size, batch, repeats = beyond.Size(n_embd=128, n_layer=8, n_head=4, block_size=64), 16, 3
    torch_cases = beyond_ch12.default_cases(batch)
print(f"device cpu (the companions' stages and meshes are on the CPU), 2 processes; size {size}, {batch} windows a step, "
      f"cases {torch_cases}")
beyond_out = beyond_ch12.run(corpus, size, batch_size=batch, cases=torch_cases, repeats=repeats)
nb.show(beyond_ch12.table(beyond_out))

# %% [markdown]
# The step time against the number of micro-batches: measured (dots) against pylib's prediction (line), with
# the perfect split and the unsplit model for scale.

# %%
rows = beyond_out["rows"]
fig, ax = plt.subplots(figsize=(7, 4))
for i, schedule in enumerate(dict.fromkeys(r["schedule"] for r in rows)):
    same = [r for r in rows if r["schedule"] == schedule]
    ms = [r["microbatches"] for r in same]
    ax.plot(ms, [1e3 * r["measured_s"] for r in same], "o", color=f"C{i}", label=f"{schedule}, measured")
    ax.plot(ms, [1e3 * r["predicted_s"] for r in same], "-" if len(ms) > 1 else "_", ms=14, color=f"C{i}", alpha=0.6,
            label=f"{schedule}, pylib's prediction")
for level, label, style in ((beyond_out["unsplit_s"], "unsplit, 1 process", ":"), (beyond_out["ideal_s"], "perfect split", "--")):
    ax.axhline(1e3 * level, ls=style, color="grey")
    ax.text(0.99, 1e3 * level, label, ha="right", va="bottom", fontsize=8, color="grey", transform=ax.get_yaxis_transform())
ax.set_xscale("log", base=2)
all_ms = sorted({r["microbatches"] for r in rows})
ax.set_xticks(all_ms, [str(m) for m in all_ms])
ax.minorticks_off()
ax.set(xlabel="micro-batches m", ylabel="step time (ms, median)", ylim=(0, None),
       title=f"{beyond_out['params']:,} parameters on {beyond_out['world']} CPU processes")
ax.legend(fontsize=8)
plt.show()
