"""Chapter 11's page ops (data parallelism): validation of what the reader typed, and thin calls into
pylib.systems.collectives, data_parallel and overlap. No numerics of their own.

Ops (see pylib.web.all_ops):
  parallel_ring        the ring all-reduce of p workers' real gradients of the course model, every
                       step: which chunk moves where and how many workers' values it carries, how
                       many each worker's chunks hold, each worker's running sums (the first element
                       of every chunk), bytes so far; payload and wire bytes; the naive all-reduce's;
                       the all-gather's bytes per worker for p = 2..8;
  parallel_alpha_beta  the alpha-beta times of ring, tree and naive all-reduce and ring all-gather
                       against message size, for p workers, alpha and a link bandwidth;
  run:parallel_dp      the default model trained side by side with several worker counts (chunked,
                       stoppable): losses and all-reduce bytes per step;
  parallel_zero        a few training steps under ZeRO stage 0-3: what each worker keeps, what it
                       sends, whether the weights are bit-identical to stage 0;
  parallel_overlap     the backward/bucketed all-reduce timeline: exposed communication, step time, MFU.
"""

import time

import numpy as np

from pylib import data, model, train
from pylib.systems import collectives as col
from pylib.systems import data_parallel as dp
from pylib.systems import overlap
from pylib.web import InputError, collect_fields, parse_field, parse_int, parse_number
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

LIMITS = {
    "ring_workers_min": 2,
    "ring_workers_max": 8,
    "dp_workers_max": 8,
    "dp_steps_max": 400,
    "dp_runs_max": 4,
    "zero_workers_max": 8,
    "zero_steps_max": 10,
    "overlap_workers_max": 4096,
    "bucket_kb_max": 1e7,
    "bandwidth_max": 1e4,  # GB/s
    "alpha_us_max": 1e5,
    "flops_max": 1e18,
    "gradient_batch": 16,
}

_RUNS = {}


def _cfg(session):
    return model.GPTConfig(vocab_size=session.vocab.size) if session.vocab is not None else model.GPTConfig()


def _workers(raw, key, lo, hi):
    return parse_field(parse_int, key, "Workers", raw, lo, hi)


def _positive(raw, key, label, hi):
    value = parse_field(parse_number, key, label, raw)
    if not 0 < value <= hi:
        raise InputError({key: f"{label} must be greater than 0 and at most {hi:g}; got {value:g}."})
    return value


# ---------------------------------------------------------------------------
# The ring, stepped


def worker_gradients(session, p, seed=0):
    """p workers' flat float32 gradients of the summed loss, each on its share of one batch."""
    session._need_corpus()
    cfg = _cfg(session)
    params = model.init_params(cfg, seed)
    x, y = data.get_batch(session.train_tokens, LIMITS["gradient_batch"], cfg.block_size, np.random.default_rng([seed, 7]))
    return [g for _, _, g in dp.worker_sums(params, cfg, x, y, p)]


def validate_ring(args):
    """The ring's form {workers} -> {"workers": p}, or InputError (also op check_args's check)."""
    return {"workers": _workers(args.get("workers"), "workers", LIMITS["ring_workers_min"], LIMITS["ring_workers_max"])}


@checked_by(validate_ring)
def ring(session, args):
    """{workers} -> every step of the ring all-reduce on the model's real gradients, and the byte counts."""
    session._need_corpus()
    p = validate_ring(args)["workers"]
    t0 = time.perf_counter()
    vectors = worker_gradients(session, p)
    n = vectors[0].size
    bounds = col.chunk_bounds(n, p)
    exact = np.sum(np.stack(vectors).astype(np.float64), axis=0)
    steps = []
    initial_have = [[1] * p for _ in range(p)]  # before the first step each worker holds its own gradient only
    before = initial_have
    for s in col.ring_all_reduce_steps(vectors):
        # carried: how many workers' values each message's chunk held as it left its sender
        steps.append({"phase": s["phase"], "step": s["step"], "messages": [list(m) for m in s["messages"]],
                      "carried": [before[src][c] for src, _, c, _ in s["messages"]],
                      "have": s["have"], "sent": s["sent"],
                      "firsts": [[float(b[a]) for a, _ in bounds] for b in s["buffers"]]})
        before = s["have"]
    results, sent = col.ring_all_reduce(vectors)
    naive = col.naive_all_reduce(vectors)[1]
    identical = all(r.tobytes() == results[0].tobytes() for r in results)
    itemsize = vectors[0].itemsize
    gather = [{"p": q, "sent": col.all_gather([np.zeros(n // q, np.float32) for _ in range(q)])[1][0] * itemsize,
               "sent_whole": col.all_gather([np.zeros(n, np.float32) for _ in range(q)])[1][0] * itemsize}
              for q in range(2, 9)]
    return {"workers": p, "elements": n, "itemsize": itemsize, "bounds": bounds, "steps": steps, "initial_have": initial_have,
            "initial": [[float(v[a]) for a, _ in bounds] for v in vectors],
            "exact_firsts": [float(exact[a]) for a, _ in bounds],
            "identical": identical,
            "max_abs_error": float(np.max(np.abs(results[0].astype(np.float64) - exact))),
            "payload_bytes": n * itemsize, "wire_bytes": [s * itemsize for s in sent],
            "naive_wire_bytes": naive[0] * itemsize, "closed_form_wire": col.traffic("ring_all_reduce", n, p, itemsize)["wire_bytes"],
            "all_gather": gather,
            "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------
# The alpha-beta model


def validate_alpha_beta(args):
    """The form {workers, alpha_us, bandwidth_gbs} -> checked values, or InputError (also op check_args's check)."""
    return collect_fields({
        "workers": lambda: _workers(args.get("workers"), "workers", 2, LIMITS["overlap_workers_max"]),
        "alpha_us": lambda: _positive(args.get("alpha_us"), "alpha_us", "Latency alpha (µs)", LIMITS["alpha_us_max"]),
        "bandwidth_gbs": lambda: _positive(args.get("bandwidth_gbs"), "bandwidth_gbs", "Bandwidth (GB/s)", LIMITS["bandwidth_max"]),
    })


@checked_by(validate_alpha_beta)
def alpha_beta(session, args):
    """{workers, alpha_us, bandwidth_gbs} -> times of each collective for message sizes 1 B ... 1 GB."""
    v = validate_alpha_beta(args)
    p, alpha, beta = v["workers"], v["alpha_us"] * 1e-6, 1.0 / (v["bandwidth_gbs"] * 1e9)
    sizes = [float(10 ** (k / 4)) for k in range(0, 37)]  # 1 B ... 1 GB
    out = {name: [f(n, p, alpha, beta) for n in sizes] for name, f in col.ALL_REDUCE_TIMES.items()}
    out["all_gather"] = [col.ring_all_gather_time(n, p, alpha, beta) for n in sizes]
    crossover = next((n for n, ring_t, tree_t in zip(sizes, out["ring"], out["tree"]) if ring_t < tree_t), None)
    return {"workers": p, "alpha": alpha, "beta": beta, "sizes": sizes, "times": out,
            "ring_beats_tree_from": crossover}


# ---------------------------------------------------------------------------
# Data-parallel training, side by side


def parse_worker_list(raw):
    """"1 2 4 8" (spaces or commas) -> [1, 2, 4, 8], or InputError."""
    text = "" if raw is None else str(raw)
    parts = [t for t in text.replace(",", " ").split() if t]
    if not parts:
        raise InputError({"workers": "Workers is empty: enter one to four worker counts, e.g. 1 2 4 8."})
    if len(parts) > LIMITS["dp_runs_max"]:
        raise InputError({"workers": f"Enter at most {LIMITS['dp_runs_max']} worker counts."})
    out = []
    for t in parts:
        w = parse_field(parse_int, "workers", "Each worker count", t, 1, LIMITS["dp_workers_max"])
        if w not in out:
            out.append(w)
    return out


def validate_dp(args):
    """The side-by-side run's form {workers, steps} -> checked values, or InputError (also op check_args's
    check of run:parallel_dp, through parallel_dp_start)."""
    return collect_fields({
        "workers": lambda: parse_worker_list(args.get("workers")),
        "steps": lambda: parse_field(parse_int, "steps", "Steps", args.get("steps"), 1, LIMITS["dp_steps_max"]),
    })


@checked_by(validate_dp)
def dp_start(session, args):
    session._need_corpus()
    v = validate_dp(args)
    cfg = _cfg(session)
    tc = train.TrainConfig(steps=v["steps"])
    runs = [{"workers": w, "state": dp.data_parallel_train_state(cfg, tc, w), "losses": []} for w in v["workers"]]
    _RUNS["dp"] = {"cfg": cfg, "tc": tc, "runs": runs}
    return {"workers": v["workers"], "steps": tc.steps, "batch": tc.batch_size, "params": model.count_params(cfg)}


def dp_chunk(session, args):
    run = _RUNS["dp"]
    cfg, tc, runs = run["cfg"], run["tc"], run["runs"]
    out = []
    done = lambda: runs[0]["state"]["step"] >= tc.steps
    for _ in chunk_steps(done):
        for r in runs:
            for rec in train.train_steps(r["state"], cfg, tc, session.train_tokens, session.val_tokens, 1):
                r["losses"].append(rec["loss"])
                out.append({"workers": r["workers"], "step": rec["step"], "loss": rec["loss"], "val": rec.get("val"),
                            "bytes": rec.get("allreduce_bytes", 0)})
    return {"done": done(), "records": out, "step": runs[0]["state"]["step"], "steps": tc.steps}


def dp_finish(session, args):
    run = _RUNS.pop("dp")
    runs = run["runs"]
    base = np.array(runs[0]["losses"])
    diffs = {str(r["workers"]): float(np.max(np.abs(np.array(r["losses"]) - base))) if len(r["losses"]) == len(base) and len(base) else None
             for r in runs}
    return {"steps": runs[0]["state"]["step"], "losses": {str(r["workers"]): r["losses"] for r in runs},
            "max_diff_from_first": diffs, "first": runs[0]["workers"]}


# ---------------------------------------------------------------------------
# ZeRO


def validate_zero(args):
    """The form {workers, stage, steps} -> checked values, or InputError (also op check_args's check)."""
    return collect_fields({
        "workers": lambda: _workers(args.get("workers"), "workers", 1, LIMITS["zero_workers_max"]),
        "stage": lambda: parse_field(parse_int, "stage", "ZeRO stage", args.get("stage"), 0, 3),
        "steps": lambda: parse_field(parse_int, "steps", "Steps", args.get("steps"), 1, LIMITS["zero_steps_max"]),
    })


@checked_by(validate_zero)
def zero(session, args):
    """{workers, stage, steps} -> held elements and bytes per worker; bit-identical to stage 0 or not."""
    session._need_corpus()
    v = validate_zero(args)
    W, stage, steps = v["workers"], v["stage"], v["steps"]
    cfg, tc = _cfg(session), train.TrainConfig()
    params = model.init_params(cfg, 0)
    rng = np.random.default_rng([0, 3])
    batches = [data.get_batch(session.train_tokens, tc.batch_size, cfg.block_size, rng) for _ in range(steps)]
    hyper = dict(beta1=tc.beta1, beta2=tc.beta2, eps=tc.eps, weight_decay=tc.weight_decay)
    ref, st = dp.zero_init(params, W, 0), dp.zero_init(params, W, stage)
    losses = []
    for x, y in batches:
        dp.zero_step(ref, cfg, x, y, tc.lr, **hyper)
        losses.append(dp.zero_step(st, cfg, x, y, tc.lr, **hyper))
    got = [dp.flatten(dp.zero_params(st, i)) for i in range(W)]
    want = dp.flatten(dp.zero_params(ref, 0))
    N = model.count_params(cfg)
    itemsize = got[0].itemsize
    from pylib.systems import memory  # chapter 10's calculator: the same bytes, from the formula
    calc = memory.training_memory(memory.shape_from_config(cfg), precision="fp32", zero_stage=stage, dp=W)
    return {"calculator": {k: calc[k] for k in ("weights", "gradients", "optimizer")},"workers": W, "stage": stage, "steps": steps, "params": N, "itemsize": itemsize,
            "held": [dp.held_elements(st, i) for i in range(W)],
            "sent_bytes_per_step": [s * itemsize / steps for s in st["sent"]],
            "ddp_sent_bytes_per_step": [s * itemsize / steps for s in ref["sent"]],
            "closed_form_bytes": dp.zero_traffic_per_step(N, W, stage) * itemsize,
            "bit_identical": all(g.tobytes() == want.tobytes() for g in got), "losses": losses}


# ---------------------------------------------------------------------------
# Overlap and MFU


def validate_overlap(args):
    """The form {bucket_kb, bandwidth_gbs, alpha_us, workers, gflops, peak_gflops, layers, width} -> checked
    values, or InputError (also op check_args's check)."""
    v = collect_fields({
        "bucket_kb": lambda: _positive(args.get("bucket_kb"), "bucket_kb", "Bucket size (KB)", LIMITS["bucket_kb_max"]),
        "bandwidth_gbs": lambda: _positive(args.get("bandwidth_gbs"), "bandwidth_gbs", "Link bandwidth (GB/s)", LIMITS["bandwidth_max"]),
        "alpha_us": lambda: _positive(args.get("alpha_us"), "alpha_us", "Latency alpha (µs)", LIMITS["alpha_us_max"]),
        "workers": lambda: _workers(args.get("workers"), "workers", 2, LIMITS["overlap_workers_max"]),
        "gflops": lambda: _positive(args.get("gflops"), "gflops", "Compute speed (GFLOP/s)", LIMITS["flops_max"] / 1e9),
        "peak_gflops": lambda: _positive(args.get("peak_gflops"), "peak_gflops", "Peak (GFLOP/s)", LIMITS["flops_max"] / 1e9),
        "layers": lambda: parse_field(parse_int, "layers", "Layers", args.get("layers"), 1, 48),
        "width": lambda: parse_field(parse_int, "width", "Width", args.get("width"), 8, 1024),
    })
    if v["width"] % 2:
        raise InputError({"width": "Width must be even (2 heads)."})
    return v


@checked_by(validate_overlap)
def overlap_view(session, args):
    """{bucket_kb, bandwidth_gbs, alpha_us, workers, gflops, peak_gflops, layers, width} -> timeline, exposed, MFU."""
    v = validate_overlap(args)
    cfg = model.GPTConfig(n_layer=v["layers"], n_embd=v["width"], n_head=2,
                          vocab_size=session.vocab.size if session.vocab is not None else 65)
    tc = train.TrainConfig()
    B, T = tc.batch_size, cfg.block_size
    flops_per_second = v["gflops"] * 1e9
    layer_bytes, seconds = overlap.layer_costs(cfg, B, T, flops_per_second)
    forward = sum(seconds) / 2
    t = overlap.overlap_timeline(layer_bytes, seconds, v["bucket_kb"] * 1e3, v["workers"], v["alpha_us"] * 1e-6,
                                 1.0 / (v["bandwidth_gbs"] * 1e9), forward_seconds=forward)
    flops = overlap.model_flops_per_step(cfg, B, T)
    return {"compute": t["compute"], "comm": t["comm"], "forward": forward, "backward_end": t["backward_end"],
            "exposed": t["exposed"], "step": t["step"], "no_overlap": t["no_overlap"], "comm_total": t["comm_total"],
            "mfu": overlap.mfu(flops, t["step"], v["peak_gflops"] * 1e9),
            "mfu_no_comm": overlap.mfu(flops, t["backward_end"], v["peak_gflops"] * 1e9),
            "model_flops": flops, "params": model.count_params(cfg), "grad_bytes": sum(layer_bytes),
            "buckets": len(t["comm"])}


def mfu_here(session, args):
    """{} -> this page's float32 matmul peak, the default step's time and the course model's MFU here.
    The peak is the best of two measurements, one before the step's and one after, so that a machine
    busier while one was taken than while the other was is less likely to drag the peak below the
    step's rate; above_peak says that it happened all the same (MFU over 1: the two timings disagree)."""
    session._need_corpus()
    cfg, tc = _cfg(session), train.TrainConfig()
    before = overlap.measure_matmul_peak((128, 256), 3)
    step = overlap.measure_step_seconds(cfg, session.train_tokens, tc.batch_size, 8, warmup=2)
    peak, n = max(before, overlap.measure_matmul_peak((128, 256), 3))
    flops = overlap.model_flops_per_step(cfg, tc.batch_size, cfg.block_size)
    mfu = overlap.mfu(flops, step, peak)
    return {"peak_gflops": peak / 1e9, "matmul_size": n, "step_ms": step * 1e3, "model_flops": flops,
            "model_gflops": flops / step / 1e9, "mfu": mfu, "above_peak": mfu > 1}


OPS = {
    "parallel_mfu": mfu_here,
    "parallel_ring": ring,
    "parallel_alpha_beta": alpha_beta,
    "parallel_dp_start": dp_start,
    "parallel_dp_chunk": dp_chunk,
    "parallel_dp_finish": dp_finish,
    "parallel_zero": zero,
    "parallel_overlap": overlap_view,
}
