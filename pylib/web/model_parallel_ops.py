"""Chapter 12's page ops (model parallelism): validation of what the reader typed, and thin calls
into pylib.systems.pipeline, .tensor_parallel and .planner. No numerics of their own.

Ops (see pylib.web.all_ops):
  pipeline_schedule   simulate the reader's schedule (1F1B / interleaved / ZB-H1) and GPipe beside it;
  tp_example          seed 000's two-device FFN, every intermediate per device;
  tp_check            the course model with its blocks split over 2 devices against the unsplit model;
  planner_runs        the published runs (names and layouts) and the predicted-against-reported table;
  planner_plan        one layout of one run's model and cluster: memory, bubble, communication, step time.
"""

import dataclasses
import functools
import time

import numpy as np

from pylib import model
from pylib.systems import pipeline, planner, tensor_parallel
from pylib.web import InputError, collect_fields, parse_field, parse_int, parse_number
from pylib.web.check_ops import checked_by

LIMITS = {
    "stages_max": 16,
    "microbatches_max": 64,
    "chunks_max": 8,
    "ratio_min": 0.25,
    "ratio_max": 8.0,
    "layout_max": 1_000_000,  # any one of dp, tp, pp, cp, GPUs, batch
}
SCHEDULE_NAMES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "interleaved 1F1B", "zb-h1": "ZB-H1 (zero bubble)"}


def _int(key, label, lo, hi):
    return lambda raw: parse_field(parse_int, key, label, raw, lo, hi)


# ---------------------------------------------------------------------------
# The pipeline Gantt chart


def validate_pipeline(args):
    """Form values {schedule, stages, microbatches, chunks, ratio} -> checked values, or InputError."""
    args = args or {}
    schedule = args.get("schedule")
    if schedule not in pipeline.SCHEDULES:
        raise InputError({"schedule": f"Schedule must be one of {', '.join(SCHEDULE_NAMES.values())}."})

    def ratio(raw):
        value = parse_field(parse_number, "ratio", "Backward/forward ratio", raw)
        if not LIMITS["ratio_min"] <= value <= LIMITS["ratio_max"]:
            raise InputError({"ratio": f"Backward/forward ratio must be between {LIMITS['ratio_min']:g} and "
                                       f"{LIMITS['ratio_max']:g}; got {value:g}."})
        return value

    v = collect_fields({
        "stages": _int("stages", "Stages", 1, LIMITS["stages_max"]),
        "microbatches": _int("microbatches", "Microbatches", 1, LIMITS["microbatches_max"]),
        "chunks": _int("chunks", "Virtual chunks", 1, LIMITS["chunks_max"]),
        "ratio": ratio,
    }, args)
    if schedule != "interleaved" and v["chunks"] != 1:
        raise InputError({"chunks": f"{SCHEDULE_NAMES[schedule]} runs one chunk per stage: set chunks to 1, "
                                    f"or choose the interleaved schedule."})
    if schedule == "interleaved" and v["microbatches"] % v["stages"]:
        raise InputError({"microbatches": f"The interleaved schedule needs the microbatches ({v['microbatches']}) "
                                          f"to be a multiple of the stages ({v['stages']})."})
    v["schedule"] = schedule
    return v


REFERENCE = "gpipe"  # the schedule drawn under the reader's, on the same p, m and ratio, one chunk


def schedule_view(schedule, stages, microbatches, chunks, ratio):
    """One schedule's events as parallel lists (for drawing), its bubble beside the formula, and memory."""
    t0 = time.perf_counter()
    r = pipeline.simulate_pipeline(schedule, stages, microbatches, chunks, 1.0, ratio)
    seconds = time.perf_counter() - t0
    if schedule == "zb-h1":  # the backward split half and half: B = W = ratio / 2
        f = pipeline.zb_h1_bubble(stages, microbatches, 1.0, r["t_b_input"], r["t_b_weight"])
        labels = ("formula (p−1)(t_f+t_B−t_W) ÷ step", "formula (p−1)(t_f+t_B−t_W) ÷ work")
        note = None if f else "holds for m ≥ p"
        f = f or {"over_ideal": None, "of_total": None}
    else:
        f = pipeline.bubble_formula(stages, microbatches, chunks)
        labels, note = ("formula (p−1)/(vm+p−1)", "formula (p−1)/(vm)"), None
    ev = r["events"]
    return {
        "schedule": schedule, "stages": stages, "microbatches": microbatches, "chunks": chunks, "ratio": ratio,
        "name": SCHEDULE_NAMES[schedule],
        "stage": [e[0] for e in ev], "kind": [e[1] for e in ev], "mb": [e[2] for e in ev],
        "chunk": [e[3] for e in ev], "start": [e[4] for e in ev], "end": [e[5] for e in ev],
        "makespan": r["makespan"], "ideal": r["ideal"],
        "bubble_fraction": r["bubble_fraction"], "bubble_over_ideal": r["bubble_over_ideal"],
        "formula_over_ideal": f["over_ideal"], "formula_of_total": f["of_total"],
        "formula_label_of_total": labels[0], "formula_label_over_ideal": labels[1], "formula_note": note,
        "t_b_input": r["t_b_input"], "t_b_weight": r["t_b_weight"],
        "peak_in_flight": r["peak_in_flight"], "peak_activations": r["peak_activations"],
        "python_seconds": seconds,
    }


def pipeline_schedule(args):
    """The reader's schedule and, under "reference", GPipe on the same stages, microbatches and ratio
    (one chunk): both from one call, so the two charts always show the same settings."""
    v = validate_pipeline(args)
    out = schedule_view(v["schedule"], v["stages"], v["microbatches"], v["chunks"], v["ratio"])
    out["reference"] = schedule_view(REFERENCE, v["stages"], v["microbatches"], 1, v["ratio"])
    return out


# ---------------------------------------------------------------------------
# Tensor parallelism


def tp_check(args):
    """The course model (a 2-layer variant, float64) split over 2 devices against the unsplit model."""
    cfg = model.GPTConfig(n_layer=2)
    params = model.init_params(cfg, 0, np.float64)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, cfg.vocab_size, (2, 4, cfg.block_size))
    loss, grads = model.loss_and_grads(params, cfg, x, y)
    tloss, tgrads, log = tensor_parallel.tp_loss_and_grads(params, cfg, x, y, 2)
    rel = max(float(np.abs(tgrads[k] - grads[k]).max() / np.abs(grads[k]).max()) for k in grads)
    return {"loss": loss, "tp_loss": tloss, "max_rel_grad_diff": rel, "all_reduces": len(log),
            "per_block": len(log) // cfg.n_layer, "bytes_each": log[0]["bytes"], "n_layer": cfg.n_layer,
            "batch": int(x.shape[0]), "seq": int(x.shape[1]), "width": cfg.n_embd, "log": [e["where"] for e in log]}


# ---------------------------------------------------------------------------
# The planner


@functools.cache
def _efficiency():
    """{hardware: fitted efficiency}, fitted once per page."""
    return {r["hardware"]: r["efficiency"] for r in planner.compare_published()}


def _runs():
    return {r["name"]: r for r in planner.published_runs()}


def planner_runs(args):
    """The published runs with their layouts, and the predicted-against-reported table."""
    rows = planner.compare_published()
    runs = _runs()
    out = []
    for r in rows:
        run = runs[r["name"]]
        lay = run["layout"]
        out.append({k: r[k] for k in ("name", "source", "hardware", "reported_tflops", "predicted_tflops", "error",
                                      "calibration", "efficiency", "bubble_over_ideal", "memory_gb")}
                   | {"gpus": run["cluster"].gpus, "dp": lay.dp, "tp": lay.tp, "pp": lay.pp, "cp": lay.cp,
                      "global_batch": lay.global_batch, "micro_batch": lay.micro_batch, "chunks": lay.chunks,
                      "recompute": lay.recompute, "sequence_parallel": lay.sequence_parallel})
    return {"runs": out}


def validate_plan(args):
    """Form values -> (run, Layout, gpus), or InputError naming every bad field."""
    args = args or {}
    runs = _runs()
    name = args.get("run")
    if name not in runs:
        raise InputError({"run": "Choose one of the published runs."})
    hi = LIMITS["layout_max"]
    auto_dp = str(args.get("dp", "")).strip().lower() == "auto"
    v = collect_fields({
        "gpus": _int("gpus", "GPUs", 1, hi), "dp": (lambda raw: 0) if auto_dp else _int("dp", "DP", 1, hi),
        "tp": _int("tp", "TP", 1, hi),
        "pp": _int("pp", "PP", 1, hi), "cp": _int("cp", "CP", 1, hi),
        "global_batch": _int("global_batch", "Global batch", 1, hi),
        "micro_batch": _int("micro_batch", "Micro-batch", 1, hi),
        "chunks": _int("chunks", "Chunks", 1, 64),
    }, args)
    if auto_dp:  # DP fills the GPUs that TP x PP x CP leave
        group = v["tp"] * v["pp"] * v["cp"]
        if v["gpus"] % group:
            raise InputError({"dp": f"TP x PP x CP = {group:,} does not divide the {v['gpus']:,} GPUs, "
                                    f"so no whole DP fills them."})
        v["dp"] = v["gpus"] // group
    recompute = args.get("recompute")
    if recompute not in ("none", "selective", "full"):
        raise InputError({"recompute": "Recomputation must be none, selective or full."})
    run = runs[name]
    layout = planner.Layout(dp=v["dp"], tp=v["tp"], pp=v["pp"], cp=v["cp"], global_batch=v["global_batch"],
                            micro_batch=v["micro_batch"], chunks=v["chunks"], recompute=recompute,
                            sequence_parallel=bool(args.get("sequence_parallel")), zero_stage=run["layout"].zero_stage,
                            schedule=run["layout"].schedule)
    return run, layout, v["gpus"]


FIELD_OF = [("does not match", "gpus"), ("heads", "tp"), ("stages is more", "pp"), ("chunks", "chunks"),
            ("global batch", "global_batch"), ("multiple of PP", "global_batch"), ("sequence length", "cp")]


def validate_planner_plan(args):
    """Form values -> (run, Layout, cluster): validate_plan's fields, then the layout's problems on the run's
    model and cluster (each under the field it names), or InputError (also op check_args's check)."""
    run, layout, gpus = validate_plan(args)
    cluster = dataclasses.replace(run["cluster"], gpus=gpus)
    problems = planner.layout_problems(run["shape"], cluster, layout)
    if problems:
        errors = {}
        for p in problems:
            field = next((f for words, f in FIELD_OF if words in p), "dp")
            errors[field] = (errors[field] + " " if field in errors else "") + p[0].upper() + p[1:] + "."
        raise InputError(errors)
    return run, layout, cluster


def planner_plan(args):
    """One layout of one published run's model and cluster -> memory, bubble, communication, step time, MFU."""
    run, layout, cluster = validate_planner_plan(args)
    efficiency = _efficiency()[run["hardware"]]
    t0 = time.perf_counter()
    p = planner.plan(run["shape"], cluster, layout, efficiency, run["kv_heads"], run["grad_bytes"])
    seconds = time.perf_counter() - t0
    mem = p["memory"]
    return {"run": run["name"], "efficiency": efficiency, "metric": run["metric"],
            "memory_gb": {k: mem[k] / 1e9 for k in ("weights", "gradients", "optimizer", "activations", "total")},
            "gpu_memory_gb": cluster.memory_bytes / 1e9, "fits": p["fits"],
            "microbatches": p["microbatches"], "bubble_over_ideal": p["bubble_over_ideal"],
            "bubble_of_total": p["bubble_of_total"], "time": p["time"], "comm_gb": {k: b / 1e9 for k, b in p["comm_bytes"].items()},
            "step_seconds": p["step_seconds"], "mfu": p["mfu"], "hfu": p["hfu"],
            "model_tflops_per_gpu": p["model_tflops_per_gpu"], "hardware_tflops_per_gpu": p["hardware_tflops_per_gpu"],
            "dp": layout.dp, "python_seconds": seconds}


OPS = {
    # the reader's fields are checked on leaving them by the functions these ops call (op check_args)
    "pipeline_schedule": checked_by(validate_pipeline)(lambda s, a: pipeline_schedule(a)),
    "tp_example": lambda s, a: tensor_parallel.worked_example(),
    "tp_check": lambda s, a: tp_check(a),
    "planner_runs": lambda s, a: planner_runs(a),
    "planner_plan": checked_by(validate_planner_plan)(lambda s, a: planner_plan(a)),
}
