"""Chapter 13's experiments: training over slow links, a four-worker toy.

Four simulated workers (pylib.systems.slow_links) train the course's default model for STEPS
synced steps, each worker on B / 4 = 4 windows of its own, so a synced step uses the tokens of
one default step. Five methods (slow_links.METHODS): dense data parallelism (the baseline), top-k
with error feedback, int4-quantised gradients with error feedback, DeMo, and DiLoCo (H inner
steps). Three seeds each (experiments.common.SEEDS): a seed fixes the initial weights and every
worker's batches, so the methods are paired by seed.

The comparison is by steps to a target loss fixed in advance (TARGET, on the trainer's 128-window
validation subset, evaluated every EVAL_INTERVAL steps) and by the bytes each worker sent by then
(pylib.studies.target), not by the final loss. A run that never reaches the target stores None
for that seed; its arm has no mean, and the chapter reports it as not reached.

TARGET was fixed before the three-seed runs, but after one trial run of each method (seed 0, 300
steps) had been seen: a loss the dense baseline passed about a third of the way through, so the
methods have room to be slower. The trial's DiLoCo run had not reached it by step 300, so the
target was chosen knowing that DiLoCo would likely miss it; that choice leaves DiLoCo out of every
steps-to-target comparison and out of the link race (commit c1eee19 introduced TARGET with this
note; the chapter says so).

Every step records the norm of the global weights' change (slow_links.run_steps, update_norm); its
mean over all STEPS steps, per seed, tests the chapter's mechanism for top-k ("each step moves the
weights by less than dense does") over the whole run, and the first and last quarters show whether
it holds throughout.

Budget (OPENBLAS_NUM_THREADS=1, idle): a synced step is four gradient computations on 4 windows
each, about one default step (~3 ms) plus the compressor: dense ~3 ms, DiLoCo ~3 ms, DeMo ~5 ms
(16 tensors' chunk DCTs per worker), quant ~6 ms and top-k ~8 ms (per-tensor quantising and a
partition of the whole vector, per worker). 41 evaluations of the 128-window subset per run
(~8 ms each) add ~0.3 s. So one 400-step run is ~1.5-3.5 s, and 5 methods x 3 seeds ~ 35 s,
inside chapter 13's 120 s. Measured: `--measure --only ch13 --workers 1` took 141 s wall (ch13.total_seconds)
under today's contention but 44.6 s of user CPU, which is about its idle time.
The M/D/1 and straggler simulations are cheap (~10 ms) and are computed at build time (derived).
"""

import time

import numpy as np

from experiments.common import SEEDS, arm, paired_text, progress, rounded, run_parts, scaled
from pylib.studies import target as tgt
from pylib.systems import compress, queueing, slow_links as sl

STEPS = 400  # synced steps: the default run's length
EVAL_INTERVAL = 10  # a multiple of DiLoCo's H, so its global weights are evaluated after each sync
TARGET = 2.75  # nats, on the 128-window validation subset; fixed before the three-seed runs (see above)
METHODS = tuple(sl.METHODS)
# The notebook's reduced size (experiments.common.small_size): two seeds, 20 synced steps (a multiple of
# EVAL_INTERVAL, so that DiLoCo's last sync is evaluated), the validation subset at 32 windows. No method reaches
# TARGET in 20 steps: the steps-to-target arms then hold None for every seed, as for a method that never reaches it.
SMALL = {"seeds": (0, 1), "steps": 20, "config": {"eval_windows": 32}}

# The link table: (name, bandwidth in bytes/s, latency in s, source). Only cited figures; the
# example WAN row is an input for the arithmetic, not a measurement of any network.
GBIT = 1e9 / 8
LINKS = {
    "nvlink": 900e9,  # bytes/s per GPU: "18x 4th Gen NVLink, 900GB/s" (MLCommons system description, cited in the chapter)
    "infiniband": 400 * GBIT,  # one 400 Gb/s NIC of the same system
    "wan_example": 0.1 * GBIT,  # 100 Mb/s: an example speed for a link shared between sites (not a cited figure)
}
EXAMPLE_LATENCY = 0.05  # s per message for the WAN example (an input, not a measurement)
EXAMPLE_STEP_MS = 3.0  # ms of compute per synced step for the link widget's start (an input: about a default CPU step here)


def config(method, seed, **changes):
    """The chapter's SlowConfig for method and seed (STEPS steps, or SMALL's at the reduced size), with changes."""
    fields = {"steps": scaled(STEPS, SMALL["steps"]), "eval_interval": EVAL_INTERVAL, **scaled({}, SMALL["config"])}
    return sl.configured(method, seed=seed, **{**fields, **changes})


def method_runs(corpus, method, seeds=None, **changes):
    """Every seed of one method (SEEDS, or seeds; SMALL's at the reduced size): per-seed steps and bytes to TARGET,
    the curve's mean and sd. changes: SlowConfig fields changed from the chapter's settings."""
    seeds = seeds or scaled(SEEDS, SMALL["seeds"])
    n_steps = config(method, seeds[0], **changes).steps
    histories, seconds = {}, {}
    for seed in progress(seeds, desc=method, unit="seed"):
        t0 = time.perf_counter()
        histories[seed] = sl.run(config(method, seed, **changes), corpus.train, corpus.val, corpus.vocab.size)
        seconds[seed] = time.perf_counter() - t0
    state = sl.init_run(config(method, seeds[0], **changes), corpus.train, corpus.val, corpus.vocab.size)
    base = f"ch13.{method}"
    values = {
        f"{base}.bytes_per_sync": int(sl.sync_wire_bytes(state)),
        f"{base}.payload_bytes": int(sl.payload_bytes(state)),
        f"{base}.syncs_per_step": sl.syncs_per_step(state["cfg"]),
        f"{base}.diverged_runs": sum(1 for h in histories.values() if any(r.get("diverged") for r in h)),
    }
    steps = {s: tgt.steps_to_target(h, TARGET) for s, h in histories.items()}
    values.update(arm(f"{base}.steps_to_target", steps))
    values.update(arm(f"{base}.bytes_to_target", {s: tgt.cost_to_target(h, TARGET, "bytes") for s, h in histories.items()}))
    values.update(arm(f"{base}.syncs_to_target", {s: tgt.cost_to_target(h, TARGET, "syncs") for s, h in histories.items()}))
    values[f"{base}.reached_runs"] = sum(1 for v in steps.values() if v is not None)
    norms = {s: np.array([r["update_norm"] if r.get("update_norm") is not None else np.nan
                          for r in h if "update_norm" in r]) for s, h in histories.items()}  # (steps,) per seed
    quarter = n_steps // 4
    for name, part in (("mean_update_norm", slice(None)), ("update_norm_first_quarter", slice(0, quarter)),
                       ("update_norm_last_quarter", slice(n_steps - quarter, n_steps))):
        values.update(arm(f"{base}.{name}", {s: float(np.mean(u[part])) if len(u) == n_steps and np.all(np.isfinite(u)) else None
                                             for s, u in norms.items()}))
    evals = {s: [r for r in h if r.get("val") is not None] for s, h in histories.items()}
    n_points = min(len(e) for e in evals.values())
    vals = np.array([[r["val"] for r in evals[s][:n_points]] for s in seeds])  # (seeds, points)
    values.update(arm(f"{base}.final_val_subset", {s: evals[s][-1]["val"] if evals[s][-1]["step"] == n_steps else None
                                                   for s in seeds}))
    values.update(arm(f"{base}.best_val_subset", {s: float(vals[i].min()) for i, s in enumerate(seeds)}))
    curve = {"steps": [r["step"] for r in evals[seeds[0]][:n_points]],
             "val_mean": rounded(vals.mean(axis=0)), "val_sd": rounded(vals.std(axis=0, ddof=1)),
             "bytes": [int(r["bytes"]) for r in evals[seeds[0]][:n_points]]}  # the same for every seed
    timings = {f"{base}.run_seconds": sum(seconds.values()) / len(seeds)}
    return {"values": values, "curves": {f"{base}.curve": curve}, "timings": timings}


def _part(method):
    def part(corpus):
        t0 = time.perf_counter()
        out = method_runs(corpus, method)
        out["timings"][f"ch13.part_{method}.seconds"] = time.perf_counter() - t0
        if method == METHODS[0]:
            cfg = config(method, 0)
            out["settings"] = {"ch13": {"steps": cfg.steps, "eval_interval": EVAL_INTERVAL, "target": TARGET,
                                        "workers": sl.SlowConfig().workers, "batch_size": sl.SlowConfig().batch_size,
                                        "seeds": list(scaled(SEEDS, SMALL["seeds"])),
                                        "eval": f"the trainer's {cfg.eval_windows}-window validation subset"}}
        return out
    part.__name__ = f"part_{method}"
    return part


part_dense, part_topk, part_quant, part_demo, part_diloco = (_part(m) for m in METHODS)
PARTS = ["part_topk", "part_quant", "part_demo", "part_dense", "part_diloco"]  # longest first


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


# ---------------------------------------------------------------------------
# Derived at build time: settings, byte counts from the closed forms, the queue and the stragglers


QUEUE = {"rho": (0.5, 0.8, 0.9), "service": 1.0, "n": 200_000, "seed": 0}
STRAGGLERS = {"workers": (1, 4, 16, 64), "base": 1.0, "spread": 0.2, "syncs": 20_000, "seed": 0}
LOCAL_STRAGGLERS = {"workers": 64, "h": (10, 100), "syncs": 20_000, "seed": 0}  # DiLoCo's syncs: H local steps each
# NVLink's 900 GB/s is "bi-directional per GPU" (NVIDIA's Hopper architecture page, cited in the
# chapter): 450 GB/s each way, to compare with a network card's 400 Gb/s each way.
NVLINK_DIRECTIONS = 2


def derived(corpus):
    """Settings and closed-form numbers the chapter and its widgets quote."""
    cfg = sl.SlowConfig()
    from pylib import model
    n = model.count_params(model.GPTConfig(vocab_size=corpus.vocab.size))
    k = max(1, round(n * cfg.topk_fraction))
    out = {
        "ch13.steps": STEPS, "ch13.eval_interval": EVAL_INTERVAL, "ch13.target": TARGET,
        "ch13.workers": cfg.workers, "ch13.batch_size": cfg.batch_size,
        "ch13.worker_batch": cfg.batch_size // cfg.workers, "ch13.lr": cfg.lr,
        "ch13.topk_k": k, "ch13.topk_fraction_inv": round(1 / cfg.topk_fraction),
        "ch13.quant_bits": cfg.quant_bits, "ch13.demo_lr": cfg.demo_lr, "ch13.demo_decay": cfg.demo_decay,
        "ch13.demo_topk": cfg.demo_topk, "ch13.demo_chunk": cfg.demo_chunk, "ch13.diloco_h": cfg.diloco_h,
        "ch13.outer_lr": cfg.outer_lr, "ch13.outer_momentum": cfg.outer_momentum,
        "ch13.n_params": n, "ch13.dense_bytes": compress.dense_bytes(n),
        "ch13.ring_bytes": int(compress.sync_wire_bytes("all_reduce", n, cfg.workers)),
        "ch13.topk_payload": compress.topk_bytes(k),
        "ch13.topk_gather_bytes": int(compress.sync_wire_bytes("all_gather", n, cfg.workers, compress.topk_bytes(k))),
        "ch13.topk_full_bytes": compress.topk_bytes(n),
        "ch13.index_bytes": compress.INDEX_BYTES, "ch13.value_bytes": compress.VALUE_BYTES,
        "ch13.entry_bytes": compress.INDEX_BYTES + compress.VALUE_BYTES,
        "ch13.diloco_syncs": STEPS // cfg.diloco_h,
        "ch13.example_wan_mbit": LINKS["wan_example"] * 8 / 1e6, "ch13.example_latency_ms": EXAMPLE_LATENCY * 1e3,
        "ch13.example_step_ms": EXAMPLE_STEP_MS,
        "ch13.infiniband_gbyte": LINKS["infiniband"] / 1e9, "ch13.nvlink_gbyte": LINKS["nvlink"] / 1e9,
        "ch13.nvlink_per_direction_gbyte": LINKS["nvlink"] / NVLINK_DIRECTIONS / 1e9,
        "ch13.nvlink_over_infiniband": LINKS["nvlink"] / NVLINK_DIRECTIONS / LINKS["infiniband"],
        "ch13.nvlink_total_over_infiniband": LINKS["nvlink"] / LINKS["infiniband"],
    }
    shapes = model.param_shapes(model.GPTConfig(vocab_size=corpus.vocab.size))
    quant = sl.configured("quant")
    out["ch13.quant_gather_bytes"] = int(sl.sync_cost(quant, shapes, cfg.workers)["wire_bytes"])
    out["ch13.quant_allreduce_bytes"] = int(sl.sync_cost(quant, shapes, cfg.workers, quant_all_reduce=True)["wire_bytes"])
    out["ch13.quant_allreduce_fraction"] = out["ch13.quant_allreduce_bytes"] / out["ch13.ring_bytes"]
    # Where the compressed all-gather stops paying: the smallest W at which (W-1) * payload exceeds the ring.
    w = 2
    while compress.sync_wire_bytes("all_gather", n, w, compress.topk_bytes(k)) <= compress.sync_wire_bytes("all_reduce", n, w):
        w += 1
    out["ch13.topk_crossover_workers"] = w
    for rho in QUEUE["rho"]:
        sim = queueing.simulate_md1(rho, QUEUE["service"], QUEUE["n"], QUEUE["seed"])
        key = f"ch13.md1_{int(round(rho * 100))}"
        out.update({f"{key}.exact": sim["exact"], f"{key}.sim": sim["mean"], f"{key}.low": sim["low"], f"{key}.high": sim["high"]})
    for wk in STRAGGLERS["workers"]:
        sim = queueing.simulate_stragglers(wk, STRAGGLERS["base"], STRAGGLERS["spread"], STRAGGLERS["syncs"], STRAGGLERS["seed"])
        key = f"ch13.straggle_{wk}"
        out.update({f"{key}.exact": sim["exact"], f"{key}.sim": sim["mean"], f"{key}.low": sim["low"], f"{key}.high": sim["high"]})
    ls = LOCAL_STRAGGLERS
    for h in ls["h"]:
        sim = queueing.simulate_local_stragglers(ls["workers"], h, STRAGGLERS["base"], STRAGGLERS["spread"], ls["syncs"], ls["seed"])
        key = f"ch13.local_straggle_{h}"
        out.update({f"{key}.{k}": sim[k] for k in ("mean", "low", "high", "exact", "naive")})
        # the slowest worker's wait at a sync beyond the average worker's H steps: grows like sqrt(H)
        out[f"{key}.excess_per_sync"] = (sim["exact"] - STRAGGLERS["base"] - STRAGGLERS["spread"]) * h
    out.update({"ch13.local_straggle_workers": ls["workers"], "ch13.local_straggle_h": ls["h"][0],
                "ch13.local_straggle_h_large": ls["h"][1]})
    out.update({"ch13.queue_n": QUEUE["n"], "ch13.straggle_base": STRAGGLERS["base"],
                "ch13.straggle_spread": STRAGGLERS["spread"], "ch13.straggle_syncs": STRAGGLERS["syncs"]})
    return out


# ---------------------------------------------------------------------------
# results.md


def markdown(results):
    """results.md's section for chapter 13."""
    v = results["values"]
    # the steps, seeds and subset the runs used (the notebook's reduced size has fewer)
    settings = results.get("settings", {}).get("ch13", {"steps": STEPS, "seeds": list(SEEDS),
                                                         "eval": "the trainer's 128-window validation subset"})
    seeds = settings["seeds"]

    def cell(key, fmt=",.0f"):
        per = v.get(key + ".per_seed")
        if per is None:
            return "–"
        parts = ["not reached" if x is None else format(x, fmt) for _, x in sorted(per.items(), key=lambda kv: int(kv[0]))]
        mean = v.get(key + ".mean")
        return ("; ".join(parts)) + (f" (mean {mean:{fmt}})" if mean is not None else "")

    lines = ["## Chapter 13: training over slow links (a four-worker toy)", "",
             f"Four simulated workers, the default model, {settings['steps']} synced steps of 4 × 4 windows; loss on the "
             f"{settings['eval'].removeprefix('the ')} every {EVAL_INTERVAL} steps; target {TARGET} nats, fixed in "
             f"advance. Per seed {', '.join(map(str, seeds))}; bytes are each worker's wire bytes.", "",
             "| method | bytes per sync | syncs per step | steps to target | bytes to target | reached | val at end (subset) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for m in METHODS:
        b = f"ch13.{m}"
        if f"{b}.bytes_per_sync" not in v:
            continue
        lines.append(f"| {m} | {v[b + '.bytes_per_sync']:,} | {v[b + '.syncs_per_step']:g} | {cell(b + '.steps_to_target')} | "
                     f"{cell(b + '.bytes_to_target')} | {v[b + '.reached_runs']}/{len(seeds)} | {cell(b + '.final_val_subset', '.3f')} |")
    lines += ["", "Mean norm of the global weights' step, ||Δθ||, over all steps (and the first and last quarters):", "",
              "| method | whole run | first quarter | last quarter |", "| --- | --- | --- | --- |"]
    for m in METHODS:
        b = f"ch13.{m}"
        if f"{b}.mean_update_norm.per_seed" in v:
            lines.append(f"| {m} | {cell(b + '.mean_update_norm', '.5f')} | {cell(b + '.update_norm_first_quarter', '.5f')} | "
                         f"{cell(b + '.update_norm_last_quarter', '.5f')} |")
    lines += ["", "Paired by seed against dense (a − b, 95% t-interval), where every seed of both reached the target:", ""]
    for m in METHODS[1:]:
        for q, fmt in (("steps_to_target", "+.1f"), ("bytes_to_target", "+,.0f")):
            a, b = f"ch13.{m}.{q}", f"ch13.dense.{q}"
            if v.get(a + ".mean") is not None and v.get(b + ".mean") is not None:
                lines.append(f"- {m} − dense, {q}: {paired_text(v, a, b, 0.0, fmt)}")
            elif a + ".per_seed" in v:
                lines.append(f"- {m} − dense, {q}: not comparable (a seed did not reach the target)")
        a, b = f"ch13.{m}.mean_update_norm", "ch13.dense.mean_update_norm"
        if v.get(a + ".mean") is not None and v.get(b + ".mean") is not None:
            lines.append(f"- {m} − dense, mean update norm: {paired_text(v, a, b, 0.0, '+.5f')}")
    return lines + [""]
