# %% [markdown]
# # Chapter 13: Training over slow links
#
# The chapter's experiment, run here with the code that measured it (`experiments/ch13.py`): four simulated
# workers (`pylib.systems.slow_links`) train the course's default model with each of five ways of syncing
# (dense data parallelism, top-k with error feedback, int4-quantised gradients with error feedback, DeMo and
# DiLoCo), over the course's seeds. Methods are compared by the steps to a target loss fixed in advance and the
# bytes each worker had sent by then, paired by seed. The tables are the ones on the results page; the charts
# are the chapter's widgets (the runs against their bands, the link race, the queue), drawn from the measured
# curves and from pylib. Then change a setting of one method.
#
# Losses: every loss here, the target included, is on the trainer's fixed subset of validation windows,
# evaluated every few synced steps (not the whole validation split). At the reduced size (`SMALL = True`) the
# runs are far too short to reach the target, and the subset is smaller.

# %% tags=["parameters"]
SMALL = False  # True: the reduced size the tests run (two seeds, 20 synced steps, a 32-window subset): seconds, not a minute

# %%
import matplotlib.pyplot as plt
import numpy as np

from experiments import ch13, notebook as nb
from pylib.web import slow_links_ops

corpus = nb.start(small=SMALL)

# %% [markdown]
# ## The five methods
#
# Every part of `experiments/ch13.py`, one method at a time (about a minute on a laptop at full size). The
# tables below are `ch13.markdown(results)`, the function that writes the chapter's section of results.md,
# with the paired comparisons against dense (`pylib.compare`). A method that misses the target with any seed
# has no mean steps to it, and is not compared by steps: "not reached" is not replaced by the run's length.

# %%
results = nb.run(ch13, corpus)
nb.show(ch13.markdown(results))

# %% [markdown]
# ## The runs against steps and against bytes
#
# The chapter's "slow-train" widget draws one method's run over the band its measured seeds make. Here are all
# five: the mean over seeds of the validation loss on the fixed subset, ±1 standard deviation, against synced
# steps (left) and against the bytes each worker had sent (right, log scale). The dashed line is the target.
# On the right, how many bytes each method had spent for a given loss.

# %%
v, curves, settings = results["values"], results["curves"], results["settings"]["ch13"]
fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
for m in ch13.METHODS:
    c = curves[f"ch13.{m}.curve"]
    line = nb.plot_band(axes[0], c["steps"], c["val_mean"], c["val_sd"], m)
    sent = np.asarray(c["bytes"], dtype=float)
    some = sent > 0  # before the first sync nothing has been sent: no point on a log axis
    nb.plot_band(axes[1], sent[some], np.asarray(c["val_mean"])[some], np.asarray(c["val_sd"])[some], m,
                 color=line.get_color())
for ax in axes:
    ax.axhline(ch13.TARGET, ls="--", color="grey", lw=1)
axes[0].set(xlabel="synced step", ylabel="validation loss on the subset (nats/token)",
            title=f"{len(settings['seeds'])} seeds, mean ± sd, {settings['eval'].removeprefix('the ')}")
axes[1].set(xscale="log", xlabel="bytes sent per worker (cumulative)", title="the same runs against bytes")
axes[0].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Steps and bytes to the target, seed by seed
#
# Each point is one seed's steps to the target against the bytes each worker had sent by then (the table's
# columns); a method whose seed never reached the target has no point for it, and its count of reached runs is
# in the legend.

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for m in ch13.METHODS:
    steps = v[f"ch13.{m}.steps_to_target.per_seed"]
    sent = v[f"ch13.{m}.bytes_to_target.per_seed"]
    pts = [(steps[s], sent[s]) for s in steps if steps[s] is not None]
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", label=f"{m} ({v[f'ch13.{m}.reached_runs']} of {len(steps)} reached)")
ax.set(yscale="log", xlabel=f"synced steps to {ch13.TARGET} nats", ylabel="bytes per worker by then",
       title="to the target, per seed")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## The link race
#
# The chapter's "link-race" widget, through its own function (`pylib.web.slow_links_ops.link_race`): wall-clock
# to the target for each method as the link's bandwidth changes, at the chapter's example latency and compute per
# step (inputs, not a measured network), with compute and communication added one after the other (no overlap,
# which penalises dense most, as the chapter says). Steps and syncs to the target are the measured means above;
# a method that did not reach the target with every seed has no line.

# %%
measured = {m: ({"steps": v[f"ch13.{m}.steps_to_target.mean"], "syncs": v[f"ch13.{m}.syncs_to_target.mean"]}
                if v[f"ch13.{m}.steps_to_target.mean"] is not None else None) for m in ch13.METHODS}
race = slow_links_ops.link_race(None, {"bandwidth": ch13.LINKS["wan_example"] * 8 / 1e6,
                                       "latency": ch13.EXAMPLE_LATENCY * 1e3, "step_ms": ch13.EXAMPLE_STEP_MS,
                                       "workers": settings["workers"], "vocab_size": corpus.vocab.size,
                                       "measured": measured})
if any(t is not None for times in race["sweep"]["time"].values() for t in times):
    fig, ax = plt.subplots(figsize=(8, 4))
    for m, times in race["sweep"]["time"].items():
        if any(t is not None for t in times):
            ax.plot(race["sweep"]["mbit"], [np.nan if t is None else t for t in times], label=race["names"][m])
    ax.axvline(ch13.LINKS["wan_example"] * 8 / 1e6, ls=":", color="grey")
    ax.set(xscale="log", yscale="log", xlabel="bandwidth (Mb/s)", ylabel="seconds to the target",
           title=f"latency {ch13.EXAMPLE_LATENCY * 1e3:g} ms, {ch13.EXAMPLE_STEP_MS:g} ms compute per step; "
                 f"dotted: the example link, where {race['winner']} wins")
    ax.legend(fontsize=7)
    plt.show()
else:
    print("No method reached the target with every seed in these runs, so no method has a time to it.")

# %% [markdown]
# ## Queueing and stragglers
#
# The chapter's "queue" widget, from `ch13.derived` (simulated at build time, not measured): the mean wait of
# an M/D/1 link at three loads, simulated with a 95% interval beside the Pollaczek–Khinchine formula, and the
# expected time of a synchronous step, set by the slowest of W workers, against W (each worker's step a fixed
# base time plus an exponential delay with mean `spread`).

# %%
d = ch13.derived(corpus)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
rhos = ch13.QUEUE["rho"]
for i, rho in enumerate(rhos):
    k = f"ch13.md1_{int(round(rho * 100))}"
    axes[0].errorbar(i, d[f"{k}.sim"], yerr=[[d[f"{k}.sim"] - d[f"{k}.low"]], [d[f"{k}.high"] - d[f"{k}.sim"]]], fmt="o",
                     color="tab:blue", label="simulated" if i == 0 else None)
    axes[0].plot(i, d[f"{k}.exact"], "k_", ms=20, label="formula" if i == 0 else None)
axes[0].set_xticks(range(len(rhos)), [f"ρ = {r:g}" for r in rhos])
axes[0].set(ylabel="mean wait (units of the transfer time D)", title="M/D/1: the wait before a transfer")
axes[0].legend()
workers = ch13.STRAGGLERS["workers"]
axes[1].plot(workers, [d[f"ch13.straggle_{w}.exact"] for w in workers], "k-", label="formula")
axes[1].errorbar(workers, [d[f"ch13.straggle_{w}.sim"] for w in workers],
                 yerr=[[d[f"ch13.straggle_{w}.sim"] - d[f"ch13.straggle_{w}.low"] for w in workers],
                       [d[f"ch13.straggle_{w}.high"] - d[f"ch13.straggle_{w}.sim"] for w in workers]], fmt="o", label="simulated")
axes[1].set(xscale="log", xlabel="workers W", ylabel="synced step time (base step = 1)",
            title=f"the slowest of W workers (spread {ch13.STRAGGLERS['spread']:g})")
axes[1].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Change a setting
#
# Top-k sends one entry in `1 / topk_fraction` of the gradient. Pick another fraction (or another method and
# any other `SlowConfig` field, such as DiLoCo's `diloco_h`): the notebook runs that method on the chapter's
# seeds (`ch13.method_runs`, the function that measured the table) and pairs it seed by seed with the chapter's
# run of the same method and with dense (`pylib.compare`, a t-interval on the paired differences). Steps and
# bytes to the target are compared only where every seed of both reached it; the final subset loss and the mean
# update norm always are. With this many seeds a difference is often *unresolved*, and the verdict says so.

# %%
METHOD = "topk"
CHANGES = {"topk_fraction": 1 / 8}  # the chapter's is 1/32; for DiLoCo try {"diloco_h": 5}

mine = ch13.method_runs(corpus, METHOD, **CHANGES)["values"]
mine = {k.replace(f"ch13.{METHOD}.", "mine."): x for k, x in mine.items()}
both = {**v, **mine}
print(f"mine: {METHOD} with {CHANGES}; {mine['mine.bytes_per_sync']:,} bytes per sync "
      f"(the chapter's {METHOD}: {v[f'ch13.{METHOD}.bytes_per_sync']:,}, dense: {v['ch13.dense.bytes_per_sync']:,})")
for q, fmt in (("steps_to_target", ".0f"), ("bytes_to_target", ",.0f"), ("final_val_subset", ".4f"),
               ("mean_update_norm", ".5f")):
    keys = ["mine." + q, f"ch13.{METHOD}.{q}", f"ch13.dense.{q}"]
    table = nb.arms_table(both, keys, fmt)
    if q.endswith("_to_target"):  # a seed without a value here did not reach the target (arms_table says "diverged")
        table = [line.replace("diverged", "not reached") for line in table]
    nb.show([f"**{q}**", ""] + table)
    for other in keys[1:] if METHOD != "dense" else keys[1:2]:
        if both["mine." + q + ".mean"] is not None and both[other + ".mean"] is not None:
            nb.show(nb.verdict(both, "mine." + q, other))
        else:
            nb.show(f"`mine.{q}` against `{other}`: not comparable (a seed did not reach the target)")
