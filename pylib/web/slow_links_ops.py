"""Chapter 13's page ops (training over slow links): validation of what the reader typed, and thin
calls into pylib.systems.slow_links, compress, queueing and pylib.studies.target. No numerics of its own.

Ops (see pylib.web.all_ops):
  run:slow_train   one method of the four-worker toy, chunked and stoppable: every step's loss and
                   cumulative bytes, the subset's validation loss every eval_interval steps, and
                   the measured band of the same method (3 seeds) when the page passes it;
  slow_link_race   time per sync of each method from the alpha-beta model at the reader's
                   bandwidth, latency and worker count, and wall-clock to the target from the
                   measured steps and syncs to it; the same over a sweep of bandwidths. A sixth
                   row, quant_ar, prices the quantised arm's steps with a quantised ring
                   all-reduce instead of its all-gather;
  slow_queue       the M/D/1 link at load rho (simulated against Pollaczek-Khinchine) and the
                   slowest of W workers (simulated against base + spread * H_W).
"""

import math

import numpy as np

from pylib import model
from pylib.studies import target as tgt
from pylib.systems import queueing, slow_links as sl
from pylib.web import LIMITS as WEB_LIMITS, InputError, band_series, collect_fields, parse_field, parse_int, parse_number
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

LIMITS = {
    "bandwidth_mbit_max": 1e9,  # Mb/s: 1 Pb/s, far above any link
    "latency_ms_max": 1e5,
    "step_ms_max": 1e6,
    "workers_max": queueing.MAX_WORKERS,
    "service_ms_max": 1e6,
    "queue_n": 50_000,  # simulated transfers in the page
    "straggle_samples": 200_000,  # simulated step times in the page (syncs x W)
    "sweep_points": 61,
}

_RUNS = {}
# The link race's rows: (method whose measured steps and syncs it uses, priced as a quantised all-reduce?)
RACE = {m: (m, False) for m in sl.METHODS} | {"quant_ar": ("quant", True)}
RACE_NAME = "quantised gradients, priced as a quantised ring all-reduce (the same measured steps)"


def _number(args, key, label, lo, hi, lo_open=False, unit=""):
    """A finite number in [lo, hi] ((lo, hi] with lo_open), or InputError with the field's message."""
    value = parse_field(parse_number, key, label, args.get(key))
    if value < lo or value > hi or (lo_open and value == lo):
        side = "greater than" if lo_open else "at least"
        raise InputError({key: f"{label} must be {side} {lo:g}{unit} and at most {hi:g}{unit}; got {value:g}."})
    return value


# ---------------------------------------------------------------------------
# The four-worker toy, live


def validate_train(args):
    """The run's form {method, seed, steps?, eval_interval?} -> (method, seed, steps, its SlowConfig), or
    InputError for the first bad field (also op check_args's check of run:slow_train, through slow_train_start)."""
    args = args or {}
    method = args.get("method")
    if method not in sl.METHODS:
        raise InputError({"method": "Choose one of the five methods."})
    seed = parse_field(parse_int, "seed", "Seed", args.get("seed"), 0, WEB_LIMITS["seed_max"])
    steps = parse_field(parse_int, "steps", "Steps", args.get("steps", sl.SlowConfig().steps), 1, WEB_LIMITS["steps_max"])
    every = parse_field(parse_int, "eval_interval", "Evaluation interval", args.get("eval_interval", sl.SlowConfig().eval_interval),
                        1, WEB_LIMITS["steps_max"])
    try:
        cfg = sl.configured(method, seed=seed, steps=steps, eval_interval=every)
    except ValueError as e:
        raise InputError({"eval_interval": str(e)}) from None
    return method, seed, steps, cfg


@checked_by(validate_train)
def train_start(session, args):
    session._need_corpus()
    args = args or {}
    method, seed, steps, cfg = validate_train(args)
    state = sl.init_run(cfg, session.train_tokens, session.val_tokens, session.vocab.size)
    curves = args.get("curves") if isinstance(args.get("curves"), dict) else {}
    curve = curves.get(f"ch13.{method}.curve")
    target = args.get("target")
    target = float(target) if isinstance(target, (int, float)) and math.isfinite(target) else None
    _RUNS["train"] = {"state": state, "history": [], "target": target}
    return {"method": method, "name": sl.METHODS[method], "seed": seed, "steps": steps,
            "workers": cfg.workers, "params": state["n"], "bytes_per_sync": sl.sync_wire_bytes(state),
            "payload_bytes": sl.payload_bytes(state), "kind": sl.sync_kind(method),
            "syncs_per_step": sl.syncs_per_step(cfg), "target": target,
            "band": band_series(curve, steps + 1) if curve else None}


def train_chunk(session, args):
    run = _RUNS["train"]
    state = run["state"]
    cfg, out = state["cfg"], []
    done = lambda: state["step"] >= cfg.steps or state["diverged"]
    for _ in chunk_steps(done):
        recs = sl.run_steps(state, 1)
        run["history"] += recs
        out += recs
    reached = tgt.first_reaching(run["history"], run["target"]) if run["target"] is not None else None
    return {"done": done(), "records": out, "step": state["step"], "steps": cfg.steps, "bytes": state["bytes"],
            "reached": reached}


def train_finish(session, args):
    run = _RUNS.pop("train")
    h, target = run["history"], run["target"]
    vals = [r for r in h if r.get("val") is not None]
    return {"steps": run["state"]["step"], "bytes": run["state"]["bytes"], "syncs": run["state"]["syncs"],
            "diverged": run["state"]["diverged"], "final_val": vals[-1]["val"] if vals else None,
            "steps_to_target": tgt.steps_to_target(h, target) if target is not None else None,
            "bytes_to_target": tgt.cost_to_target(h, target, "bytes") if target is not None else None,
            "losses": [r["loss"] for r in h if r.get("loss") is not None],
            "vals": [[r["step"], r["val"]] for r in vals]}


# ---------------------------------------------------------------------------
# Bytes against bandwidth


def parse_link(args):
    """{bandwidth (Mb/s), latency (ms), step_ms, workers} -> validated floats and an int."""
    def bandwidth():
        raw = args.get("bandwidth")
        value = parse_field(parse_number, "bandwidth", "Bandwidth", raw)
        if value == 0:
            raise InputError({"bandwidth": "Bandwidth 0: nothing crosses the link, so no sync would ever end. "
                                           "Enter a speed above 0 Mb/s."})
        return _number(args, "bandwidth", "Bandwidth", 0.0, LIMITS["bandwidth_mbit_max"], lo_open=True, unit=" Mb/s")

    return collect_fields({
        "bandwidth": bandwidth,
        "latency": lambda: _number(args, "latency", "Latency", 0.0, LIMITS["latency_ms_max"], unit=" ms"),
        "step_ms": lambda: _number(args, "step_ms", "Compute per step", 0.0, LIMITS["step_ms_max"], unit=" ms"),
        "workers": lambda: parse_field(parse_int, "workers", "Workers", args.get("workers"), 2, LIMITS["workers_max"]),
    })


def _measured(args):
    """The page's measured {method: {"steps", "syncs"}} means to the target (None: not reached)."""
    raw = args.get("measured") if isinstance(args.get("measured"), dict) else {}
    out = {}
    for m in sl.METHODS:
        r = raw.get(m) or {}
        ok = all(isinstance(r.get(k), (int, float)) and math.isfinite(r[k]) and r[k] >= 0 for k in ("steps", "syncs"))
        out[m] = {"steps": float(r["steps"]), "syncs": float(r["syncs"])} if ok else None
    return out


def validate_link_race(args):
    """The race's form (parse_link) and the page's vocabulary size -> (settings, vocab_size), or InputError
    (also op check_args's check)."""
    args = args or {}
    s = parse_link(args)
    vocab = parse_field(parse_int, "vocab_size", "Vocabulary size", args.get("vocab_size", 65), 2, 1 << 20)
    return s, vocab


@checked_by(validate_link_race)
def link_race(session, args):
    """Time per sync and wall-clock to the target of every method, at the reader's link and over a sweep."""
    args = args or {}
    s, vocab = validate_link_race(args)
    measured = _measured(args)
    shapes = model.param_shapes(model.GPTConfig(vocab_size=vocab))
    alpha, step_s = s["latency"] / 1e3, s["step_ms"] / 1e3

    def at(mbit):
        beta = 1.0 / (mbit * 1e6 / 8)  # seconds per byte
        rows = {}
        for m in RACE:
            method, ar = RACE[m]
            cost = sl.sync_cost(sl.configured(method), shapes, s["workers"], alpha, beta, quant_all_reduce=ar)
            meas = measured[method]
            total = tgt.time_to_target(meas["steps"], meas["syncs"], step_s, cost["seconds"]) if meas else None
            rows[m] = {**cost, "time_to_target": total}
        return rows

    rows = at(s["bandwidth"])
    timed = {m: r["time_to_target"] for m, r in rows.items() if r["time_to_target"] is not None}
    winner = min(timed, key=timed.get) if timed else None
    grid = np.logspace(0, 7, LIMITS["sweep_points"])  # 1 Mb/s .. 10 Tb/s
    sweep = {m: [] for m in RACE}
    winners = []
    for mbit in grid:
        r = at(float(mbit))
        for m in RACE:
            sweep[m].append(r[m]["time_to_target"])
        t = {m: x["time_to_target"] for m, x in r.items() if x["time_to_target"] is not None}
        winners.append(min(t, key=t.get) if t else None)
    return {"settings": s, "rows": rows, "winner": winner, "names": {**sl.METHODS, "quant_ar": RACE_NAME},
            "sweep": {"mbit": grid.tolist(), "time": sweep, "winner": winners}}


# ---------------------------------------------------------------------------
# Queueing and stragglers


def validate_queue(args):
    """The form {rho, service_ms, workers, step_ms, spread_ms} -> checked values, or InputError (also op
    check_args's check)."""
    args = args or {}

    def rho():
        value = parse_field(parse_number, "rho", "Load ρ", args.get("rho"))
        if value >= 1:
            raise InputError({"rho": f"Load ρ = {value:g} ≥ 1: transfers arrive at least as fast as the link clears "
                                     "them, so the queue grows without bound (an unstable queue: there is no mean wait)."})
        if value <= 0:
            raise InputError({"rho": f"Load ρ must be above 0 (and below 1); got {value:g}."})
        return value

    return collect_fields({
        "rho": rho,
        "service_ms": lambda: _number(args, "service_ms", "Transfer time D", 0.0, LIMITS["service_ms_max"], lo_open=True, unit=" ms"),
        "workers": lambda: parse_field(parse_int, "workers", "Workers", args.get("workers"), 1, LIMITS["workers_max"]),
        "step_ms": lambda: _number(args, "step_ms", "Step time", 0.0, LIMITS["step_ms_max"], unit=" ms"),
        "spread_ms": lambda: _number(args, "spread_ms", "Spread", 0.0, LIMITS["step_ms_max"], unit=" ms"),
    })


@checked_by(validate_queue)
def queue(session, args):
    """{rho, service_ms, workers, step_ms, spread_ms} -> the M/D/1 wait and the slowest worker, simulated and exact."""
    s = validate_queue(args)
    seed = 0
    md1 = queueing.simulate_md1(s["rho"], s["service_ms"], LIMITS["queue_n"], seed)
    syncs = max(100, LIMITS["straggle_samples"] // s["workers"])
    slow = queueing.simulate_stragglers(s["workers"], s["step_ms"], s["spread_ms"], syncs, seed)
    rhos = np.linspace(0.02, 0.98, 49)
    ws = sorted({int(round(x)) for x in np.logspace(0, math.log10(LIMITS["workers_max"]), 40)})
    return {"settings": s, "md1": md1, "stragglers": slow, "queue_n": LIMITS["queue_n"], "straggle_syncs": syncs,
            "wait_curve": {"rho": rhos.tolist(), "wait": [queueing.md1_mean_wait(r, s["service_ms"]) for r in rhos]},
            "slowest_curve": {"workers": ws, "slowest": [queueing.expected_slowest(w, s["step_ms"], s["spread_ms"]) for w in ws]}}


OPS = {
    "slow_train_start": train_start,
    "slow_train_chunk": train_chunk,
    "slow_train_finish": train_finish,
    "slow_link_race": link_race,
    "slow_queue": queue,
}
