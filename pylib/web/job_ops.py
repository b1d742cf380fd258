"""Chapter 15's page ops (running a job): validation and thin calls into pylib.checkpoint,
pylib.studies.resume, pylib.studies.monitoring and pylib.systems.goodput. No numerics of their own.

Ops (see pylib.web.all_ops):
  run:job_ckpt / run:job_dash  a default-model run, chunked and stoppable, one per widget
                               ("checkpoint" and "dashboard"); {"continue": true} continues the
                               widget's current run (a stopped one, or one loaded from a file),
                               optionally without its optimiser state; every step's dashboard row
                               (pylib.studies.monitoring.dashboard_record);
  job_ckpt_save                the checkpoint widget's run as checkpoint bytes (base64) with its log;
  job_ckpt_load                a checkpoint file (base64) -> the run to continue; a bad file raises
                               InputError and the widget's current run is kept as it was;
  job_export                   a widget's logged run as JSONL or CSV text;
  run:job_replay               chapter 8's bad stretch: the original run (saving a checkpoint
                               before the stretch), then replays on the same or on other batches;
  job_goodput                  the goodput simulation against the checkpoint interval.
"""

import base64
import binascii
import dataclasses
import math
import time

import numpy as np

from pylib import checkpoint, guards, model, train
from pylib.studies import monitoring, resume, stability, target as to_target
from pylib.systems import goodput
from pylib.web import LIMITS as WEB_LIMITS, InputError, collect_fields, parse_field, parse_int, parse_number
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

LIMITS = {
    "steps_max": 2000,
    "batch_size_max": 256,  # a loaded checkpoint's run must also be one the page can continue
    "grad_accum_max": 16,
    "eval_windows_max": 512,
    "lr_max": 10.0,
    "upload_bytes": checkpoint.MAX_BYTES,  # checked by the page before reading the file, and here again
    "goodput_max": 1e6,  # delta, M, R and tau: at most this, in any one unit of time
    "goodput_failures": 400,  # failures simulated per interval (about)
    "goodput_segments": (200, 40_000),  # segments simulated per interval, at least / at most
}
SLOTS = {"ckpt": "checkpoint", "dash": "dashboard"}
_RUNS = {}  # by slot: the widget's current run; "replay": the replay widget's run and checkpoint


def _positive(raw, key, label, hi, zero_ok=False):
    value = parse_field(parse_number, key, label, raw)
    if zero_ok and not 0 <= value <= hi:
        raise InputError({key: f"{label} must be at least 0 and at most {hi:g}; got {value:g}."})
    if not zero_ok and not 0 < value <= hi:
        raise InputError({key: f"{label} must be greater than 0 and at most {hi:g}; got {value:g}."})
    return value


def _model_cfg(session):
    return dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)


# ---------------------------------------------------------------------------
# The run of the checkpoint and dashboard widgets


def _new_run_settings(args):
    return collect_fields([
        ("steps", lambda: parse_field(parse_int, "steps", "Steps", args.get("steps"), 1, LIMITS["steps_max"])),
        ("lr", lambda: _positive(args.get("lr"), "lr", "Learning rate", LIMITS["lr_max"])),
        ("seed", lambda: parse_field(parse_int, "seed", "Seed", args.get("seed"), 0, WEB_LIMITS["seed_max"])),
    ])


def _new_run(session, s):
    mcfg = _model_cfg(session)
    tcfg = dataclasses.replace(train.TrainConfig(), steps=s["steps"], lr=s["lr"], seed=s["seed"])
    return {"model_cfg": mcfg, "cfg": tcfg, "state": train.init_train_state(mcfg, tcfg), "log": [],
            "counts": {"steps": 0, "clipped": 0}, "seconds": 0.0}


def _target(args):
    raw = args.get("target")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    return _positive(raw, "target", "The target loss", 100.0)


def validate_run_start(args):
    """The checkpoint and dashboard runs' form values -> {target, continue, settings}: the target loss
    (None if empty), and for a new run (not {"continue": true}) its {steps, lr, seed}; or InputError.
    Whether there is a run to continue is the op's to say, when Continue is pressed (op check_args too)."""
    args = args or {}
    target = _target(args)
    resumed = bool(args.get("continue"))
    return {"target": target, "continue": resumed, "settings": None if resumed else _new_run_settings(args)}


def _run_start(slot):
    @checked_by(validate_run_start)
    def start(session, args):
        session._need_corpus()
        v = validate_run_start(args)
        args = args or {}
        target = v["target"]
        run = _RUNS.get(slot)
        resumed = v["continue"]
        if resumed:
            if run is None or run["state"]["step"] >= run["cfg"].steps or run["state"]["diverged"]:
                raise InputError({"run": "There is no unfinished run to continue: press Start, or load a checkpoint."})
            if args.get("drop_optimizer"):
                resume.drop_optimizer_state(run["state"], run["model_cfg"], run["cfg"])
                run["dropped_at"] = run["state"]["step"]
        else:
            run = _new_run(session, v["settings"])
            _RUNS[slot] = run
        run["target"] = target
        return {"step": run["state"]["step"], "steps": run["cfg"].steps, "continued": resumed,
                "settings": {"steps": run["cfg"].steps, "lr": run["cfg"].lr, "seed": run["cfg"].seed},
                "layers": stability.layer_names(run["model_cfg"]), "log": run["log"] if resumed else [],
                "dropped_at": run.get("dropped_at"), "tokens_per_step": run["cfg"].batch_size * run["model_cfg"].block_size}
    return start


def _run_chunk(slot):
    def chunk(session, args):
        run = _RUNS[slot]
        state, cfg, mcfg = run["state"], run["cfg"], run["model_cfg"]
        out = []
        done = lambda: state["step"] >= cfg.steps or state["diverged"]
        for _ in chunk_steps(done):
            t_step = time.perf_counter()
            for rec in train.train_steps(state, mcfg, cfg, session.train_tokens, session.val_tokens, 1):
                row = monitoring.dashboard_record(rec, state["params"], mcfg, run["counts"], cfg.steps)
                run["seconds"] += time.perf_counter() - t_step
                row["seconds"] = run["seconds"]  # cumulative training time: each step's own, evals included
                run["log"].append(row)
                out.append(row)
        reply = {"done": done(), "records": out, "step": state["step"], "steps": cfg.steps,
                 "diverged": bool(state["diverged"])}
        if run.get("target") is not None:  # the course's comparison: steps and time to a loss fixed in advance
            reply["target_step"] = to_target.steps_to_target(run["log"], run["target"], steps=cfg.steps)
            reply["target_seconds"] = to_target.cost_to_target(run["log"], run["target"], "seconds")
        return reply
    return chunk


def _run_finish(slot):
    def finish(session, args):
        run = _RUNS[slot]
        log = run["log"]
        first = next((r for r in log if r["step"] == 0), None)
        return {"step": run["state"]["step"], "steps": run["cfg"].steps, "diverged": bool(run["state"]["diverged"]),
                "initial": monitoring.initial_loss_check(first["loss"], run["model_cfg"].vocab_size) if first else None,
                "clipped_fraction": run["counts"]["clipped"] / max(run["counts"]["steps"], 1),
                "ln_v": math.log(run["model_cfg"].vocab_size)}
    return finish


def ckpt_save(session, args):
    """The checkpoint widget's run as a checkpoint file (base64), log included."""
    run = _RUNS.get("ckpt")
    if run is None:
        raise InputError({"save": "There is no run to save: press Start first."})
    data = checkpoint.checkpoint_bytes(run["state"], run["model_cfg"], run["cfg"], log=run["log"])
    return {"data": base64.b64encode(data).decode("ascii"), "bytes": len(data), "step": run["state"]["step"],
            "name": f"checkpoint-seed{run['cfg'].seed}-step{run['state']['step']}.npz"}


_LOG_NUMBERS = ("loss", "grad_norm", "lr", "clipped_fraction", "tokens_per_s", "val", "train_eval", "seconds")
_LOG_FLAGS = ("clipped", "diverged")


def _checked_log(log, step, n_groups):
    """The stored dashboard rows before the saved step, each field of the type the dashboard draws;
    CheckpointError naming the first bad row otherwise."""
    def bad(i, what):
        return checkpoint.CheckpointError(f"The checkpoint's log is invalid: record {i} {what}. It was not loaded.")

    def number(v):
        return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))

    kept = []
    for i, r in enumerate(log):
        s = r.get("step")
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise bad(i, "has no whole-number step")
        if s >= step:
            continue  # logged after the save: the continued run logs it again
        unknown = set(r) - {"step", "val_step", "weight_norms", *_LOG_NUMBERS, *_LOG_FLAGS}
        if unknown:
            raise bad(i, f"has a field the dashboard does not know ({sorted(unknown)[0][:40]!r})")
        for key in _LOG_NUMBERS:
            if not number(r.get(key)):
                raise bad(i, f"has {key} = {str(r.get(key))[:40]!r}, not a finite number")
        if r.get("seconds") is not None and r["seconds"] < 0:
            raise bad(i, "has a negative time")
        if "val_step" in r and r["val_step"] not in (s, s + 1):
            raise bad(i, f"has val_step = {str(r['val_step'])[:40]!r}, not its step or the next")
        for key in _LOG_FLAGS:
            if not isinstance(r.get(key, False), bool):
                raise bad(i, f"has {key} = {str(r.get(key))[:40]!r}, not true or false")
        norms = r.get("weight_norms", [])
        if not isinstance(norms, list) or len(norms) > n_groups or not all(number(v) for v in norms):
            raise bad(i, f"has weight norms that are not at most {n_groups} finite numbers")
        kept.append(r)
    return kept


def ckpt_load(session, args):
    """A checkpoint file (base64) becomes the widget's run; a bad file leaves the current run as it was."""
    session._need_corpus()
    size = args.get("size")
    if isinstance(size, (int, float)) and size > LIMITS["upload_bytes"]:
        raise InputError({"file": f"The file is {int(size):,} bytes; a checkpoint is at most "
                                  f"{LIMITS['upload_bytes']:,}. It was not read."})
    raw = args.get("data")
    if not isinstance(raw, str) or not raw:
        raise InputError({"file": "No file was given."})
    if len(raw) > 4 * (LIMITS["upload_bytes"] // 3 + 1):
        raise InputError({"file": f"The file is larger than {LIMITS['upload_bytes']:,} bytes. It was not read."})
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise InputError({"file": "The file could not be decoded."}) from None
    try:
        state, mcfg, tcfg, log = checkpoint.load_checkpoint(data, _model_cfg(session))
        log = _checked_log(log or [], state["step"], len(stability.layer_names(mcfg)))
    except checkpoint.CheckpointError as e:
        raise InputError({"file": str(e)}) from None
    for key, label in (("steps", "steps"), ("batch_size", "windows per batch"), ("grad_accum", "micro-batches per step"),
                       ("eval_windows", "evaluation windows")):
        if getattr(tcfg, key) > LIMITS[f"{key}_max"]:
            raise InputError({"file": f"The checkpoint's run has {getattr(tcfg, key):,} {label} ({key}); this widget "
                                      f"runs at most {LIMITS[f'{key}_max']:,}. It was not loaded."})
    counts = {"steps": len(log), "clipped": sum(1 for r in log if r.get("clipped"))}
    _RUNS["ckpt"] = {"model_cfg": mcfg, "cfg": tcfg, "state": state, "log": log, "counts": counts,
                     "seconds": float(log[-1].get("seconds") or 0.0) if log else 0.0}
    return {"step": state["step"], "steps": tcfg.steps, "log": log, "bytes": len(data),
            "settings": {"steps": tcfg.steps, "lr": tcfg.lr, "seed": tcfg.seed},
            "layers": stability.layer_names(mcfg), "opt_t": int(state["opt"]["t"])}


def export(session, args):
    """A widget's logged run as JSONL or CSV text."""
    slot = args.get("slot")
    fmt = args.get("format")
    if slot not in SLOTS or fmt not in ("jsonl", "csv"):
        raise InputError({"format": "Choose JSONL or CSV."})
    run = _RUNS.get(slot)
    if run is None or not run["log"]:
        raise InputError({"format": "Nothing is logged yet: run some steps first."})
    if fmt == "jsonl":
        text = monitoring.to_jsonl(run["log"])
    else:
        text = monitoring.to_csv(run["log"], [stability.group_key(g) for g in stability.layer_names(run["model_cfg"])])
    return {"text": text, "name": f"run-seed{run['cfg'].seed}.{fmt}", "rows": len(run["log"])}


# ---------------------------------------------------------------------------
# The replay


def validate_replay_start(args):
    """{mode, seed} -> {mode, seed} (the seed only for the original run; a replay takes the original's),
    or InputError (op check_args too)."""
    args = args or {}
    mode = args.get("mode")
    if mode not in ("original", "same", "other"):
        raise InputError({"mode": "Choose the original run, a replay on the same batches, or one on other batches."})
    if mode == "original":
        return {"mode": mode, "seed": parse_field(parse_int, "seed", "Seed", args.get("seed"), 0, WEB_LIMITS["seed_max"])}
    return {"mode": mode}


@checked_by(validate_replay_start)
def replay_start(session, args):
    session._need_corpus()
    v = validate_replay_start(args)
    mode = v["mode"]
    BAD = stability.BAD
    token = int(session.vocab.encode(BAD["token"])[0][0])
    first = BAD["inject_step"]
    bad_steps = set(range(first, first + BAD["repeats"]))
    ckpt_step = first - resume.REPLAY["before"]
    end = first + BAD["repeats"] + resume.REPLAY["after"]
    if mode == "original":
        seed = v["seed"]
        mcfg, tcfg = stability.bad_configs(session.vocab.size, "none", seed)
        state = train.init_train_state(mcfg, tcfg)
        guards.hook_batches(state, stability.bad_batch_hook(bad_steps, token))
        _RUNS["replay"] = {"model_cfg": mcfg, "cfg": tcfg, "state": state, "seed": seed, "ckpt": None,
                           "mode": mode, "log": [], "end": end, "bad_steps": bad_steps}
    else:
        prev = _RUNS.get("replay")
        if prev is None or prev.get("ckpt") is None:
            raise InputError({"mode": f"Run the original first: its checkpoint at step {ckpt_step} is what a replay starts from."})
        state, tcfg = resume.restart(prev["ckpt"], prev["model_cfg"])
        if mode == "same":
            guards.hook_batches(state, stability.bad_batch_hook(bad_steps, token))
        else:
            state["batch_rng"] = np.random.default_rng([tcfg.seed, 1, resume.OTHER_STREAM])
        _RUNS["replay"] = {**prev, "state": state, "mode": mode, "log": []}
    run = _RUNS["replay"]
    return {"mode": mode, "step": run["state"]["step"], "end": end, "ckpt_step": ckpt_step,
            "bad_steps": sorted(bad_steps), "seed": run["seed"]}


def replay_chunk(session, args):
    run = _RUNS["replay"]
    state, cfg, mcfg = run["state"], run["cfg"], run["model_cfg"]
    ckpt_step = stability.BAD["inject_step"] - resume.REPLAY["before"]
    out = []
    done = lambda: state["step"] >= run["end"] or state["diverged"]
    for _ in chunk_steps(done):
        if run["mode"] == "original" and state["step"] == ckpt_step and run["ckpt"] is None:
            run["ckpt"] = checkpoint.checkpoint_bytes(state, mcfg, cfg)
        for rec in train.train_steps(state, mcfg, cfg, session.train_tokens, session.val_tokens, 1):
            r = {"step": rec["step"], "loss": rec.get("loss"), "grad_norm": rec.get("grad_norm"),
                 "bad": run["mode"] != "other" and rec["step"] in run["bad_steps"]}
            run["log"].append(rec)
            out.append(r)
    return {"done": done(), "records": out, "step": state["step"], "end": run["end"]}


def replay_finish(session, args):
    run = _RUNS["replay"]
    complete = run["state"]["step"] >= run["end"]
    if run["mode"] == "original" and not complete:
        run["ckpt"] = None  # a stopped original leaves nothing to replay from
    return {"mode": run["mode"], "complete": complete,
            "spike": resume.replay_spike(run["log"], run["bad_steps"]) if complete else None,
            "has_checkpoint": run.get("ckpt") is not None}


# ---------------------------------------------------------------------------
# Goodput


def validate_goodput(args):
    """{delta, M, R, tau} -> checked values (an interval and a restart cost a job can finish with), or
    InputError (op check_args too)."""
    hi = LIMITS["goodput_max"]
    v = collect_fields([
        ("delta", lambda: _positive(args.get("delta"), "delta", "The checkpoint cost δ", hi)),
        ("M", lambda: _positive(args.get("M"), "M", "The mean time between failures M", hi)),
        ("R", lambda: _positive(args.get("R"), "R", "The restart cost R", hi, zero_ok=True)),  # a free restart is allowed
        ("tau", lambda: _positive(args.get("tau"), "tau", "The interval τ", hi)),
    ])
    d, M, R, tau = v["delta"], v["M"], v["R"], v["tau"]
    cap = goodput.LIMITS["max_segment_over_M"]
    if (tau + d) / M > cap:
        raise InputError({"tau": f"τ + δ is {(tau + d) / M:.3g} times M; above {cap:g} times M nearly every segment "
                                 "fails and the job never finishes. Shorten τ or δ, or raise M."})
    if R / M > cap:
        raise InputError({"R": f"The restart cost R is {R / M:.3g} times M; above {cap:g} times M restarts almost never finish."})
    return v


@checked_by(validate_goodput)
def goodput_op(session, args):
    """{delta, M, R, tau} -> simulated and expected goodput against the interval, and the optima."""
    v = validate_goodput(args)
    d, M, R, tau = v["delta"], v["M"], v["R"], v["tau"]
    cap = goodput.LIMITS["max_segment_over_M"]
    young, daly, opt = goodput.young_interval(d, M), goodput.daly_interval(d, M), goodput.optimal_interval(d, M)
    grid = sorted({opt * 2 ** (k / 4) for k in range(-12, 13)} | {tau})
    grid = [t for t in grid if (t + d) / M <= cap]
    lo, hi_seg = LIMITS["goodput_segments"]
    sim, expected = [], []
    for i, t in enumerate(grid):
        n = int(min(max(round(LIMITS["goodput_failures"] * M / max(t, 1e-300)), lo), hi_seg))
        sim.append(goodput.simulate_job(t, d, M, R, n, np.random.default_rng([0, i]))["goodput"])
        expected.append(goodput.expected_goodput(t, d, M, R))
    at = grid.index(tau)
    return {"tau": grid, "simulated": sim, "expected": expected, "young": young, "daly": daly, "optimum": opt,
            "chosen": {"tau": tau, "simulated": sim[at], "expected": expected[at]},
            "expected_at": {"young": goodput.expected_goodput(young, d, M, R),
                            "daly": None if daly is None or daly <= 0 else goodput.expected_goodput(daly, d, M, R),
                            "optimum": goodput.expected_goodput(opt, d, M, R)}}


OPS = {
    **{f"job_{slot}_start": _run_start(slot) for slot in SLOTS},
    **{f"job_{slot}_chunk": _run_chunk(slot) for slot in SLOTS},
    **{f"job_{slot}_finish": _run_finish(slot) for slot in SLOTS},
    "job_ckpt_save": ckpt_save,
    "job_ckpt_load": ckpt_load,
    "job_export": export,
    "job_replay_start": replay_start,
    "job_replay_chunk": replay_chunk,
    "job_replay_finish": replay_finish,
    "job_goodput": goodput_op,
}
