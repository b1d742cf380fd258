"""Chapter 11's experiments: data parallelism, all-reduce and ZeRO.

1. A real engine beside the model (part_gloo): torch.distributed's all-reduce with the gloo
   backend, over localhost on this CPU. Four processes are started once; two of them time
   all-reduces in a two-process group (the other two wait, idle, in a barrier), then all four time
   the same sizes (4 processes on 2 cores: oversubscribed, and marked so). For each of SIZES
   (float32 elements) the fastest (and the median) of REPEATS timed all-reduces, each after a
   barrier, on rank 0: the fastest is the least disturbed by the other jobs on this shared machine.
   alpha and beta of the ring model are fitted to the two smallest and the two largest sizes
   (pylib.systems.collectives.fit_alpha_beta) and the sizes in between are predicted. Then each
   process all-reduces its worker's real gradient of the course model (pylib, float32, one share
   of a batch) and the sum is compared with pylib's ring all-reduce of the same gradients: the
   difference must lie within the float32 rounding bound of summing p terms in any order,
   2 (p-1) u sum|g_i| elementwise (u = 2^-24). Every number is "measured on this CPU over
   localhost". Without torch the part says so and measures nothing.
2. PyTorch's own engines (part_torch): companions/ch11_ddp.py on TORCH_WORLD gloo processes:
   DDP's gradient against pylib's data_parallel_loss_and_grads (and gloo's sum against the ring,
   through a comm hook), the weights after TORCH_STEPS AdamW steps under DDP (default buckets and
   4 KiB ones), ZeroRedundancyOptimizer and FSDP2 against each other and against pylib's zero_step,
   the bytes each rank holds (parameters, gradients, optimiser state) beside pylib's ZeRO table,
   the bytes DDP hands to all-reduce and the bytes each rank writes per step (/proc/self/io), and
   the step-time split (compute under no_sync, the all-reduce alone, the step) as timings.
3. Data-parallel training (part_dp): the default model and TrainConfig with DP_STEPS steps, seed 0,
   its gradient from W = 1, 2, 4, 8 simulated workers (pylib.systems.data_parallel); the curves,
   the largest difference between any W's losses and W = 1's, the bytes one worker sends per
   step, and the final loss on the whole validation split for each W.
4. MFU (part_mfu): this CPU's float32 matmul peak with one BLAS thread (best of MATMUL_REPEATS
   multiplications of MATMUL_SIZES square matrices) and the default training step's time (median
   of MFU_STEPS steps: forward, backward, AdamW), giving the course model's MFU in CPython.

Timings are not deterministic: every number that is a time, or derived from one (the gloo fit and
its errors, the matmul peak, the step time and the MFU), goes in the "timings" section, which the
determinism check leaves out and the chapter quotes as a timing; the curves of measured and
predicted times have "seconds" in their keys.

Budget (OPENBLAS_NUM_THREADS=1, idle machine): gloo: starting 4 processes that import torch ~5 s,
  timing ~10 sizes x 2 groups ~4 s, the gradient check ~1 s: ~10 s; the data-parallel runs: 4 x
  DP_STEPS = 200 steps at ~2-3x a plain step (~3 ms; the loop's own backward is computed and thrown
  away) ~6 s, plus 4 whole-split evaluations ~4 s: ~10 s; MFU ~3 s. About 25 s in all (< 60 s).
  Measured today under heavy contention (load average ~11 on the 2 cores): gloo 69 s, dp 63 s,
  mfu 0.3 s, 132 s of task time, consistent with ~25 s idle at the 4-5x slowdown seen there.
  torch: 4 processes importing torch and FSDP ~6 s, 4 engines x 10 steps and 3 x 20 timed calls
  ~3 s: ~10 s idle (an estimate); measured under load (load average 10-18): 80-170 s, ~12 s of CPU time.
"""

import os
import socket
import time

import numpy as np

from experiments.common import final_val, needs_torch, progress, run_parts, scaled

SIZES = [4 ** k for k in range(2, 12)]  # float32 elements: 16 ... 4,194,304 (64 B ... 16 MiB)
REPEATS = 25
REPEATS_LARGE = 8  # sizes above SMALL_MAX elements take milliseconds each: fewer repeats
SMALL_MAX = 1 << 18
FIT_SMALL, FIT_LARGE = 2, 2  # alpha and beta come from the 2 smallest and the 2 largest sizes
DP_WORKERS = (1, 2, 4, 8)
DP_STEPS = 200
GRAD_BATCH = 16  # the gradient check's batch, split over the processes
TORCH_WORLD = 4  # PyTorch's engines: processes (on 2 cores: oversubscribed)
TORCH_STEPS = 10  # AdamW steps under each engine, from the same start on the same batches
TORCH_REPEATS = 20  # timed repeats of the step-time split (compute, all-reduce, step)
MATMUL_SIZES = (256, 512)
MATMUL_REPEATS = 5
MFU_STEPS = 30
ZERO_DP = 64  # data-parallel workers for the 7B memory example (the ZeRO paper's Figure 1 uses N_d = 64)
LABEL = "measured on this CPU over localhost"
# The notebook's reduced size (experiments.common.small_size): the same parts in seconds, every key still
# produced. gloo keeps its 4 processes (the p = 4 keys) on 5 sizes up to 256 KiB (2 fitted at each end, one
# predicted); PyTorch's engines run on 2 processes for 2 steps; 2 simulated workers train 20 steps. What is
# left is mostly starting processes that import torch: ~2 s of CPU each, 6 of them here.
SMALL = {"sizes": [4 ** k for k in (2, 4, 6, 7, 8)], "repeats": 3, "torch_world": 2, "torch_steps": 2,
         "torch_repeats": 2, "dp_workers": (1, 2), "dp_steps": 20, "matmul_repeats": 2, "mfu_steps": 5}


# ---------------------------------------------------------------------------
# gloo


def _gloo_worker(rank, world, port, grads, queue, pair_done, sizes=SIZES, repeats=(REPEATS, REPEATS_LARGE)):
    """One process: time all-reduces (2-process subgroup, then all), then all-reduce its gradient."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    pair = dist.new_group([0, 1])

    def timings(group, members):
        out = {}
        for n in sizes:
            x = torch.ones(n)
            for _ in range(2):
                dist.all_reduce(x, group=group)  # warm-up: connections and buffers
            times = []
            for _ in range(repeats[0] if n <= SMALL_MAX else repeats[1]):
                dist.barrier(group=group)
                t0 = time.perf_counter()
                dist.all_reduce(x, group=group)
                times.append(time.perf_counter() - t0)
            out[n] = (float(np.min(times)), float(np.median(times)))
        return out

    result = {"rank": rank}
    if rank < 2:
        result["p2"] = timings(pair, 2)
        pair_done.set()
    else:
        pair_done.wait()  # asleep, not polling in a collective, while the pair is timed
    dist.barrier()
    result["p4"] = timings(None, 4)
    sums = {}
    for p, group in ((2, pair), (4, None)):
        if rank < p:
            t = torch.from_numpy(grads[p][rank].copy())
            dist.all_reduce(t, group=group)
            sums[p] = t.numpy().copy()
        dist.barrier()
    result["sums"] = sums
    dist.destroy_process_group()
    queue.put(result)


def _worker_grads(p, corpus):
    """p workers' flat float32 gradients of the summed loss on their shares of one batch."""
    from pylib import data, model
    from pylib.systems import data_parallel as dp
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    x, y = data.get_batch(corpus.train, GRAD_BATCH, cfg.block_size, np.random.default_rng([11, 0]))
    return [g for _, _, g in dp.worker_sums(params, cfg, x, y, p)]


def gloo_sum_check(gloo_sum, vectors):
    """Compare gloo's sum with pylib's ring: {bit_identical, max_abs_diff, within_bound, max_ratio}."""
    from pylib.systems import collectives as col
    ring = col.ring_all_reduce(vectors)[0][0]
    p = len(vectors)
    bound = 2 * (p - 1) * 2.0 ** -24 * np.sum(np.abs(np.stack(vectors).astype(np.float64)), axis=0)
    diff = np.abs(gloo_sum.astype(np.float64) - ring.astype(np.float64))
    ratio = np.max(np.where(bound > 0, diff / np.maximum(bound, 1e-300), np.where(diff > 0, np.inf, 0.0)))
    return {"bit_identical": bool(np.array_equal(gloo_sum, ring)), "max_abs_diff": float(diff.max()),
            "within_bound": bool(np.all(diff <= bound)), "max_ratio": float(ratio),
            "differing": int(np.count_nonzero(diff))}


def run_gloo(corpus, sizes=SIZES, repeats=(REPEATS, REPEATS_LARGE)):
    """Start 4 gloo processes over localhost; their timings and the summed gradients. The processes
    come from companions.launch's forkserver, which has imported torch once (a spawned process
    imports it again: about 1.5 s of CPU each)."""
    from companions import launch
    ctx = launch.context()
    grads = {p: _worker_grads(p, corpus) for p in (2, 4)}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    queue, pair_done = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_gloo_worker, args=(r, 4, port, grads, queue, pair_done, sizes, repeats))
             for r in range(4)]
    for proc in procs:
        proc.start()
    try:
        results = sorted((queue.get(timeout=240) for _ in procs), key=lambda r: r["rank"])
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return results, grads


@needs_torch("ch11.gloo")
def part_gloo(corpus):
    import torch
    from pylib.systems import collectives as col
    t0 = time.perf_counter()
    sizes = scaled(SIZES, SMALL["sizes"])
    repeats = scaled(REPEATS, SMALL["repeats"])
    results, grads = run_gloo(corpus, sizes, (repeats, scaled(REPEATS_LARGE, SMALL["repeats"])))
    values, curves, timed = {"ch11.gloo.status": LABEL}, {}, {}
    for p in (2, 4):
        key = f"ch11.gloo.p{p}"
        measured = results[0][f"p{p}"]
        nbytes = np.array([4 * n for n in sizes], dtype=np.float64)
        seconds = np.array([measured[n][0] for n in sizes])  # the fastest of the repeats: the least disturbed
        medians = np.array([measured[n][1] for n in sizes])
        fit_idx = list(range(FIT_SMALL)) + list(range(len(sizes) - FIT_LARGE, len(sizes)))
        alpha, beta = col.fit_alpha_beta(nbytes[fit_idx], seconds[fit_idx], p)
        predicted = np.array([col.ring_all_reduce_time(b, p, alpha, beta) for b in nbytes])
        middle = slice(FIT_SMALL, len(sizes) - FIT_LARGE)
        rel = np.abs(predicted[middle] - seconds[middle]) / seconds[middle]
        timed.update({  # timings and what is fitted to them: not reproducible, so not among the values
            f"{key}.alpha_us": alpha * 1e6,
            f"{key}.beta_s_per_gb": beta * 1e9,
            f"{key}.bandwidth_gb_per_s": 1.0 / (beta * 1e9) if beta > 0 else float("inf"),
            f"{key}.middle_median_rel_error": float(np.median(rel)),
            f"{key}.middle_max_rel_error": float(np.max(rel)),
            f"{key}.smallest_us": float(seconds[0] * 1e6),
            f"{key}.largest_ms": float(seconds[-1] * 1e3),
        })
        curves[f"{key}.bytes"] = nbytes.tolist()
        curves[f"{key}.measured_seconds"] = seconds.tolist()
        curves[f"{key}.predicted_seconds"] = predicted.tolist()
        curves[f"{key}.median_seconds"] = medians.tolist()
        check = gloo_sum_check(results[0]["sums"][p], grads[p])
        for name, v in check.items():
            if name != "max_abs_diff":
                values[f"{key}.grad.{name}"] = ("yes" if v else "no") if isinstance(v, bool) else v
        values[f"{key}.grad.max_abs_diff"] = check["max_abs_diff"]
        values[f"{key}.grad.elements"] = int(grads[p][0].size)
    values["ch11.gloo.oversubscribed_p4"] = f"4 processes on {os.cpu_count()} cores"
    values["ch11.gloo.torch_version"] = torch.__version__
    curves["ch11.gloo.sizes_elements"] = list(sizes)
    return {"values": values, "curves": curves, "settings": {"ch11.gloo": {
                "sizes": sizes, "repeats": repeats, "fit_small": FIT_SMALL, "fit_large": FIT_LARGE,
                "cores": os.cpu_count(), "label": LABEL}},
            "timings": {**timed, "ch11.gloo.seconds": time.perf_counter() - t0}}


# ---------------------------------------------------------------------------
# PyTorch's own engines: DDP, ZeroRedundancyOptimizer and FSDP2 beside pylib's workers


def torch_batches(corpus, cfg, steps=TORCH_STEPS):
    """steps (TORCH_STEPS) batches of GRAD_BATCH windows from the training split (seeded), split over the ranks."""
    from pylib import data
    rng = np.random.default_rng([11, 1])
    return [data.get_batch(corpus.train, GRAD_BATCH, cfg.block_size, rng) for _ in range(steps)]


def _yes(flag):
    return "yes" if flag else "no"


@needs_torch("ch11.torch")
def part_torch(corpus):
    """companions/ch11_ddp.py on TORCH_WORLD processes against pylib's data_parallel and zero_step."""
    t0 = time.perf_counter()
    import torch
    from companions import ch11_ddp
    from pylib import model, train
    cfg, tc = model.GPTConfig(), train.TrainConfig()
    world, steps = scaled(TORCH_WORLD, SMALL["torch_world"]), scaled(TORCH_STEPS, SMALL["torch_steps"])
    repeats = scaled(TORCH_REPEATS, SMALL["torch_repeats"])
    params = model.init_params(cfg, 0)
    batches = torch_batches(corpus, cfg, steps)
    hyper = dict(lr=tc.lr, beta1=tc.beta1, beta2=tc.beta2, eps=tc.eps, weight_decay=tc.weight_decay)  # lr constant
    ranks = ch11_ddp.run(params, cfg, batches, hyper, world, repeats=repeats)
    ref = ch11_ddp.pylib_reference(params, cfg, batches, hyper, world)
    cmp = ch11_ddp.compare(ranks, ref, world)
    k = "ch11.torch"
    v = {f"{k}.status": LABEL, f"{k}.torch_version": torch.__version__,
         f"{k}.oversubscribed": f"{world} processes on {os.cpu_count()} cores",
         f"{k}.grad.sum_within_bound": _yes(cmp["grad.sum_max_ratio"] <= 1.0),
         f"{k}.grad.sum_max_ratio": cmp["grad.sum_max_ratio"],
         f"{k}.grad.sum_bit_identical": _yes(cmp["grad.sum_bit_identical"]),
         f"{k}.grad.max_rel_u": cmp["grad.max_rel_u"],
         f"{k}.pylib_stages_bit_identical": _yes(cmp["pylib.stages_bit_identical"]),
         f"{k}.warnings": len(ranks[0]["warnings"])}
    for e in ch11_ddp.ENGINES:
        v[f"{k}.{e}.ranks_bit_identical"] = _yes(cmp[f"{e}.ranks_bit_identical"])
        v[f"{k}.{e}.vs_ddp_bit_identical"] = _yes(cmp[f"{e}.vs_ddp_bit_identical"])
        v[f"{k}.{e}.vs_ddp_max_abs"] = cmp[f"{e}.vs_ddp_max_abs"]
        v[f"{k}.{e}.vs_pylib_max_abs"] = cmp[f"{e}.vs_pylib_max_abs"]
        wire = [w[-1] for w in cmp[f"{e}.wire_bytes"]]  # the last step: DDP's first steps also (re)build buckets
        v[f"{k}.{e}.wire_bytes_max"], v[f"{k}.{e}.wire_bytes_min"] = max(wire), min(wire)
    v[f"{k}.vs_pylib_max_abs"] = max(cmp[f"{e}.vs_pylib_max_abs"] for e in ch11_ddp.ENGINES)
    v[f"{k}.vs_pylib_in_lr"] = v[f"{k}.vs_pylib_max_abs"] / tc.lr
    for e in ("ddp", "zero1", "fsdp2"):
        for part in ("params", "grads", "optimizer", "moments", "updated_elements"):
            per_rank = cmp[f"{e}.held.{part}"]
            v[f"{k}.{e}.held.{part}.max"], v[f"{k}.{e}.held.{part}.min"] = max(per_rank), min(per_rank)
    v[f"{k}.fsdp2.held.params_padded"] = max(cmp["fsdp2.held.params_padded"])
    even_share = model.count_params(cfg) / world
    v[f"{k}.zero1.partition_max_over_even"] = v[f"{k}.zero1.held.updated_elements.max"] / even_share
    for e in ("ddp", "ddp_small_buckets"):
        v[f"{k}.{e}.buckets"] = len(cmp[f"{e}.bucket_bytes"])
        v[f"{k}.{e}.bucket_bytes"] = sum(cmp[f"{e}.bucket_bytes"])
    v[f"{k}.small_bucket_cap_bytes"] = int(round(ch11_ddp.SMALL_BUCKET_MB * 2 ** 20))
    v[f"{k}.ddp_small_buckets.largest_bucket_bytes"] = max(cmp["ddp_small_buckets.bucket_bytes"])
    for name in ("all_reduce", "reduce_scatter", "all_gather"):
        v[f"{k}.collective.{name}.wire_bytes"] = max(cmp[f"collective.{name}.wire_bytes"])
    v[f"{k}.ddp.header_bytes"] = v[f"{k}.ddp.wire_bytes_max"] - int(round(4 * ref["stages"][0]["sent_per_step"]))
    timed = {f"{k}.seconds": time.perf_counter() - t0}
    if repeats:  # rank 0's medians; the other ranks wait in the same barriers
        s = ranks[0]["seconds"]
        timed.update({f"{k}.compute_ms": 1e3 * s["compute"], f"{k}.allreduce_ms": 1e3 * s["allreduce"],
                      f"{k}.step_ms": 1e3 * s["step"], f"{k}.exposed_ms": 1e3 * (s["step"] - s["compute"]),
                      f"{k}.allreduce_share": s["allreduce"] / (s["compute"] + s["allreduce"])})
    return {"values": v, "curves": {f"{k}.ddp.wire_bytes_rank0": cmp["ddp.wire_bytes"][0]},
            "settings": {k: {"world": world, "steps": steps, "batch": GRAD_BATCH, "seed": 0,
                             "repeats": repeats, "small_bucket_mb": ch11_ddp.SMALL_BUCKET_MB,
                             "warnings": ranks[0]["warnings"], "label": LABEL}},
            "timings": timed}


# ---------------------------------------------------------------------------
# Data-parallel training


def part_dp(corpus):
    from pylib import model, train
    from pylib.systems import data_parallel as dp
    t0 = time.perf_counter()
    cfg = model.GPTConfig()
    steps, workers = scaled(DP_STEPS, SMALL["dp_steps"]), scaled(DP_WORKERS, SMALL["dp_workers"])
    tc = train.TrainConfig(steps=steps, final_eval=True)
    values, curves, losses = {}, {}, {}
    for W in progress(workers, desc=f"data-parallel runs, {steps} steps", unit="run"):
        state = dp.data_parallel_train_state(cfg, tc, W)
        history = train.train_steps(state, cfg, tc, corpus.train, corpus.val, steps)
        losses[W] = np.array([r["loss"] for r in history])
        curves[f"ch11.dp.w{W}.loss"] = [float(v) for v in losses[W]]
        curves[f"ch11.dp.w{W}.val_step"] = [r["step"] for r in history if "val" in r]
        curves[f"ch11.dp.w{W}.val"] = [float(r["val"]) for r in history if "val" in r]
        values[f"ch11.dp.w{W}.final_val"] = final_val(history)
        values[f"ch11.dp.w{W}.allreduce_bytes"] = int(history[-1]["allreduce_bytes"])
        if W > 1:
            values[f"ch11.dp.w{W}.max_loss_diff"] = float(np.max(np.abs(losses[W] - losses[1])))
            values[f"ch11.dp.w{W}.final_val_diff"] = abs(values[f"ch11.dp.w{W}.final_val"] - values["ch11.dp.w1.final_val"])
    values["ch11.dp.max_loss_diff"] = max(values[f"ch11.dp.w{W}.max_loss_diff"] for W in workers if W > 1)
    values["ch11.dp.max_final_val_diff"] = max(values[f"ch11.dp.w{W}.final_val_diff"] for W in workers if W > 1)
    return {"values": values, "curves": curves,
            "settings": {"ch11.dp": {"workers": list(workers), "steps": steps, "seed": 0}},
            "timings": {"ch11.dp.seconds": time.perf_counter() - t0}}


# ---------------------------------------------------------------------------
# MFU


def part_mfu(corpus):
    from pylib import model, train
    from pylib.systems import overlap
    t0 = time.perf_counter()
    cfg, tc = model.GPTConfig(), train.TrainConfig()
    peak, n = overlap.measure_matmul_peak(MATMUL_SIZES, scaled(MATMUL_REPEATS, SMALL["matmul_repeats"]))
    step = overlap.measure_step_seconds(cfg, corpus.train, tc.batch_size, scaled(MFU_STEPS, SMALL["mfu_steps"]))
    flops = overlap.model_flops_per_step(cfg, tc.batch_size, cfg.block_size)
    return {"values": {"ch11.mfu.blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "unset")},
            "timings": {  # all derived from timings: not reproducible
                "ch11.mfu.peak_gflops": peak / 1e9,
                "ch11.mfu.peak_matmul_size": n,
                "ch11.mfu.step_ms": step * 1e3,
                "ch11.mfu.model_gflops": flops / step / 1e9,
                "ch11.mfu.cpython_percent": 100 * overlap.mfu(flops, step, peak),
                "ch11.mfu.seconds": time.perf_counter() - t0}}


PARTS = ["part_gloo", "part_torch", "part_dp", "part_mfu"]


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


# ---------------------------------------------------------------------------
# Build-time values


def derived(corpus):
    """Closed forms and exact checks for the chapter (cheap: no training, no timing)."""
    from pylib import model, train
    from pylib.systems import collectives as col
    from pylib.systems import data_parallel as dp
    from pylib.systems import overlap
    cfg, tc = model.GPTConfig(), train.TrainConfig()
    N = model.count_params(cfg)
    out = {"ch11.params": N, "ch11.grad_bytes": 4 * N, "ch11.dp_steps": DP_STEPS,
           "ch11.gloo_repeats": REPEATS, "ch11.gloo_repeats_large": REPEATS_LARGE,
           "ch11.gloo_small_max_bytes": 4 * SMALL_MAX, "ch11.gloo_smallest_bytes": 4 * SIZES[0],
           "ch11.gloo_largest_mib": 4 * SIZES[-1] / 2 ** 20, "ch11.gloo_sizes": len(SIZES),
           "ch11.mfu_steps": MFU_STEPS, "ch11.batch": tc.batch_size, "ch11.block": cfg.block_size}
    for p in (2, 4, 8):
        out[f"ch11.ring_wire_bytes_p{p}"] = int(col.traffic("ring_all_reduce", N, p)["wire_bytes"])
        out[f"ch11.naive_wire_bytes_p{p}"] = int(col.traffic("naive_all_reduce", N, p)["wire_bytes"])
        out[f"ch11.allgather_wire_bytes_p{p}"] = int(col.traffic("all_gather", N // p, p)["wire_bytes"])
        for stage in (0, 1, 2, 3):
            out[f"ch11.zero{stage}_sent_bytes_p{p}"] = int(round(4 * dp.zero_traffic_per_step(N, p, stage)))
    # Memory per worker per ZeRO stage, from chapter 10's calculator (pylib.systems.memory).
    from pylib.systems import memory
    course = memory.shape_from_config(cfg)
    for stage in (0, 1, 2, 3):
        m = memory.training_memory(course, precision="fp32", zero_stage=stage, dp=4)
        out[f"ch11.zero{stage}_state_bytes_course_dp4"] = int(m["weights"] + m["gradients"] + m["optimizer"])
        big = memory.training_memory(memory.LLAMA_7B, precision="mixed", zero_stage=stage, dp=ZERO_DP)
        out[f"ch11.zero{stage}_state_gb_7b"] = (big["weights"] + big["gradients"] + big["optimizer"]) / 1e9  # optimizer: master + moments
    out["ch11.zero_dp"] = ZERO_DP
    # pylib's ZeRO table for the PyTorch comparison: bytes one of TORCH_WORLD workers keeps, by kind
    params32 = model.init_params(cfg, 0)
    for stage in (0, 1, 2, 3):
        held = dp.held_elements(dp.zero_init(params32, TORCH_WORLD, stage), 0)
        for part in ("params", "grads", "optimizer"):
            out[f"ch11.zero{stage}_{part}_bytes_p{TORCH_WORLD}"] = 4 * held[part]
    out["ch11.torch_world"], out["ch11.torch_steps"] = TORCH_WORLD, TORCH_STEPS
    out["ch11.torch_repeats"], out["ch11.lr"] = TORCH_REPEATS, tc.lr
    out["ch11.wte_rows"] = cfg.vocab_size  # FSDP2 pads dim 0 to a multiple of the world size
    out["ch11.wte_shard_rows_p4"] = -(-cfg.vocab_size // 4)
    out["ch11.even_share_elements_p4"] = N // 4 if N % 4 == 0 else N / 4
    out["ch11.llama7b_params_b"] = memory.param_count(memory.LLAMA_7B) / 1e9
    flops = overlap.model_flops_per_step(cfg, tc.batch_size, cfg.block_size)
    out["ch11.model_flops_per_step"] = flops
    out["ch11.model_flops_per_token"] = flops / (tc.batch_size * cfg.block_size)
    out["ch11.flops_6n"] = 6 * N
    # 6N against the matmul count: the tied head's V x C is inside N, so the logits are already in
    # 6N; what differs is the parameters that never multiply (positions, biases, norm gains) and
    # attention's 4 T C a layer forward, 12 L T C forward and backward, which no parameter carries
    shapes = model.param_shapes(cfg)
    multiplying = sum(int(np.prod(s)) for k, s in shapes.items() if len(s) == 2 and k != "wpe")
    out["ch11.params_never_multiply"] = N - multiplying
    out["ch11.flops_never_multiply"] = 6 * (N - multiplying)
    out["ch11.attention_flops_per_token"] = 12 * cfg.n_layer * cfg.block_size * cfg.n_embd
    # ZeRO-3's peak: the state kept between steps plus one gathered unit (a block) in 16 bits and
    # its unsharded 16-bit gradient before the reduce-scatter; a prefetched next unit adds one more
    block = memory.param_count_parts(memory.LLAMA_7B)["per_layer"]
    out["ch11.zero3_unit_gb_7b"] = 2 * block / 1e9
    out["ch11.zero3_peak_gb_7b"] = out["ch11.zero3_state_gb_7b"] + 2 * (2 * block) / 1e9
    out["ch11.zero3_peak_prefetch_gb_7b"] = out["ch11.zero3_peak_gb_7b"] + 2 * block / 1e9
    out["ch11.hfu_over_mfu_selective"] = (overlap.hardware_flops_per_step(cfg, tc.batch_size, cfg.block_size, "selective")
                                          / flops)
    out["ch11.hfu_over_mfu_selective_forward"] = overlap.hardware_flops_per_step(
        cfg, tc.batch_size, cfg.block_size, "selective", selective_rule="forward") / flops
    out["ch11.hfu_over_mfu_full"] = overlap.hardware_flops_per_step(cfg, tc.batch_size, cfg.block_size, "full") / flops
    # The exact check, at build time: 8 workers with very unequal valid tokens, float64.
    params = model.init_params(cfg, 0, dtype=np.float64)
    rng = np.random.default_rng(5)
    x = rng.integers(0, cfg.vocab_size, (8, cfg.block_size))
    y = rng.integers(0, cfg.vocab_size, (8, cfg.block_size))
    mask = np.zeros((8, cfg.block_size))
    counts = [cfg.block_size, 1, 2, 4, 8, 16, 32, 3]
    for r, n in enumerate(counts):
        mask[r, cfg.block_size - n:] = 1
    info = {}
    loss, grads = dp.data_parallel_loss_and_grads(params, cfg, x, y, 8, mask=mask, info=info)
    ref_loss, ref = model.loss_and_grads(params, cfg, x, y, mask)
    flat, flat_ref = dp.flatten(grads), dp.flatten(ref)
    out["ch11.dp_check_rel_error"] = float(np.linalg.norm(flat - flat_ref) / np.linalg.norm(flat_ref))
    out["ch11.dp_check_loss_rel_error"] = float(abs(loss - ref_loss) / abs(ref_loss))
    out["ch11.dp_check_counts"] = ", ".join(str(c) for c in info["counts"])
    mloss, mgrads = dp.mean_of_worker_means(params, cfg, x, y, 8, mask=mask)
    out["ch11.mean_of_means_rel_error"] = float(np.linalg.norm(dp.flatten(mgrads) - flat_ref) / np.linalg.norm(flat_ref))
    out["ch11.mean_of_means_loss"] = mloss
    out["ch11.dp_check_loss"] = ref_loss
    # No masks, but W does not divide B: 3 workers get 3, 3 and 2 of 8 windows, so the counts differ
    # and the mean of means weighs the smaller share's tokens more
    _, ref_nomask = model.loss_and_grads(params, cfg, x, y)
    _, m3 = dp.mean_of_worker_means(params, cfg, x, y, 3)
    flat_nomask = dp.flatten(ref_nomask)
    out["ch11.mean_of_means_w3_rel_error"] = float(np.linalg.norm(dp.flatten(m3) - flat_nomask) / np.linalg.norm(flat_nomask))
    _, m4 = dp.mean_of_worker_means(params, cfg, x, y, 4)
    out["ch11.mean_of_means_w4_rel_error"] = float(np.linalg.norm(dp.flatten(m4) - flat_nomask) / np.linalg.norm(flat_nomask))
    # Two levels against one flat ring: the 7B model's 16-bit gradient over 8 nodes of 8 GPUs, with the
    # planner's H100 links (NVLink per direction inside a node, 400 Gb/s between nodes)
    from pylib.systems import planner
    grad = 2 * memory.param_count(memory.LLAMA_7B)
    c = planner.llama3_cluster(64)
    ia, ib, ea, eb = c.intra_alpha, 1 / c.intra_bytes_per_s, c.inter_alpha, 1 / c.inter_bytes_per_s
    out["ch11.two_level.grad_gb"] = grad / 1e9
    out["ch11.two_level.flat_s"] = col.ring_all_reduce_time(grad, 64, ea, eb)
    out["ch11.two_level.s"] = col.two_level_all_reduce_time(grad, 8, 8, ia, ib, ea, eb)
    out["ch11.two_level.inter_gb_per_gpu"] = 2 * 7 / 8 * grad / 8 / 1e9
    out["ch11.two_level.flat_gb_per_gpu"] = 2 * 63 / 64 * grad / 1e9
    out["ch11.two_level.nvlink_gbs"] = c.intra_bytes_per_s / 1e9
    out["ch11.two_level.inter_gbs"] = c.inter_bytes_per_s / 1e9
    return out


def markdown(results):
    """results.md's section for chapter 11."""
    v, c, t = results["values"], results.get("curves", {}), results.get("timings", {})
    settings = results.get("settings", {})  # the sizes run (the notebook's reduced size has fewer)
    torch_steps = settings.get("ch11.torch", {}).get("steps", TORCH_STEPS)
    dp_steps = settings.get("ch11.dp", {}).get("steps", DP_STEPS)
    dp_workers = settings.get("ch11.dp", {}).get("workers", DP_WORKERS)
    lines = ["## Chapter 11: data parallelism, all-reduce and ZeRO", ""]
    lines.append(f"gloo: {v.get('ch11.gloo.status', 'not run')}")
    for p in (2, 4):
        key = f"ch11.gloo.p{p}"
        if f"{key}.alpha_us" not in t:
            continue
        note = " (oversubscribed: " + v.get("ch11.gloo.oversubscribed_p4", "") + ")" if p == 4 else ""
        lines += ["", f"### gloo all-reduce, {p} processes{note}, {LABEL}", "",
                  f"alpha = {t[f'{key}.alpha_us']:.1f} us, beta = {t[f'{key}.beta_s_per_gb']:.3f} s/GB; "
                  f"middle sizes: median relative error {t[f'{key}.middle_median_rel_error']:.2f}, "
                  f"max {t[f'{key}.middle_max_rel_error']:.2f} (timings: not reproducible); gradient sum within the float32 bound: "
                  f"{v[f'{key}.grad.within_bound']} (bit-identical: {v[f'{key}.grad.bit_identical']}, "
                  f"max |diff| {v[f'{key}.grad.max_abs_diff']:.3g})", "",
                  "| bytes | measured s | predicted s |", "| ---: | ---: | ---: |"]
        for b, m, pr in zip(c[f"{key}.bytes"], c[f"{key}.measured_seconds"], c[f"{key}.predicted_seconds"]):
            lines.append(f"| {int(b):,} | {m:.3g} | {pr:.3g} |")
    if "ch11.torch.ddp.vs_pylib_max_abs" in v:
        k = "ch11.torch"
        lines += ["", f"### PyTorch's engines ({v[f'{k}.oversubscribed']}), "
                  f"{torch_steps} AdamW steps, {LABEL}", "",
                  f"DDP's gradient against pylib's data_parallel_loss_and_grads: {v[f'{k}.grad.max_rel_u']:.1f} u "
                  f"(per tensor, of its largest entry); gloo's sum within the float32 bound: {v[f'{k}.grad.sum_within_bound']} "
                  f"({v[f'{k}.grad.sum_max_ratio']:.2f} of it; bit-identical to the ring: {v[f'{k}.grad.sum_bit_identical']})", "",
                  "| engine | weights: max abs diff from DDP | bit-identical to DDP | from pylib | bytes written per rank per step |",
                  "| --- | ---: | --- | ---: | ---: |"]
        for e in ("ddp", "ddp_small_buckets", "zero1", "fsdp2"):
            lo, hi = v[f"{k}.{e}.wire_bytes_min"], v[f"{k}.{e}.wire_bytes_max"]
            lines.append(f"| {e} | {v[f'{k}.{e}.vs_ddp_max_abs']:.3g} | {v[f'{k}.{e}.vs_ddp_bit_identical']} | "
                         f"{v[f'{k}.{e}.vs_pylib_max_abs']:.3g} | {lo:,}" + (f" to {hi:,}" if hi != lo else "") + " |")
        lines += ["", "| engine | parameters (bytes per rank) | gradients | optimiser state | AdamW moments |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for e in ("ddp", "zero1", "fsdp2"):
            cells = []
            for part in ("params", "grads", "optimizer", "moments"):
                lo, hi = v[f"{k}.{e}.held.{part}.min"], v[f"{k}.{e}.held.{part}.max"]
                cells.append(f"{lo:,}" + (f" to {hi:,}" if hi != lo else ""))
            lines.append(f"| {e} | " + " | ".join(cells) + " |")
        if f"{k}.compute_ms" in t:
            lines += ["", f"Step-time split (rank 0, medians; timings: not reproducible): compute {t[f'{k}.compute_ms']:.1f} ms, "
                      f"all-reduce {t[f'{k}.allreduce_ms']:.1f} ms, DDP forward and backward {t[f'{k}.step_ms']:.1f} ms"]
    if "ch11.dp.w1.final_val" in v:
        lines += ["", f"### Data-parallel training, {dp_steps} steps, seed 0", "",
                  "| workers | final loss (whole validation split) | all-reduce bytes per worker per step | largest training-loss difference from W = 1 |",
                  "| ---: | ---: | ---: | ---: |"]
        for W in dp_workers:
            d = v.get(f"ch11.dp.w{W}.max_loss_diff", 0.0)
            lines.append(f"| {W} | {v[f'ch11.dp.w{W}.final_val']:.5f} | {v[f'ch11.dp.w{W}.allreduce_bytes']:,} | {d:.3g} |")
    if "ch11.mfu.peak_gflops" in t:
        lines += ["", "### MFU in CPython (timings: not reproducible)", "",
                  f"float32 matmul peak {t['ch11.mfu.peak_gflops']:.2f} GFLOP/s (one BLAS thread); default step "
                  f"{t['ch11.mfu.step_ms']:.2f} ms, {t['ch11.mfu.model_gflops']:.3f} GFLOP/s of model FLOPs: "
                  f"MFU {t['ch11.mfu.cpython_percent']:.2f}%"]
    return lines + [""]
