"""Chapter 6's page ops (learning rate, schedules, batch size): validation of what the reader typed,
and thin calls into pylib.schedules, pylib.studies.lr_sweep and pylib.train. No numerics of their own.

Ops (see pylib.web.all_ops):
  schedule_curve            the learning rate of a schedule at every step, for the plotter;
  run:schedule_sweep        a reduced learning-rate ladder, one rung after another (chunked, stoppable);
  run:schedule_lrchange     a training run whose peak learning rate the reader can change mid-run,
  schedule_lrchange_set     ... with this op, called between chunks: the params and the optimiser
                            state are kept, only the TrainConfig's lr is replaced;
  run:schedule_noise        the default run to a step, then chapter 6's noise-scale estimate there
                            (pylib.studies.noise_scale), the same batches as --measure's for that seed.
"""

import dataclasses
import math

import numpy as np

from pylib import data, model, schedules, train
from pylib.studies import lr_sweep, noise_scale
from pylib.web import LIMITS as WEB_LIMITS, InputError, parse_int, parse_number, parse_field, collect_fields
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

LIMITS = {
    "plot_steps_max": 20000,  # total steps the plotter accepts
    "warmup_max": 20000,
    "sweep_default_rates": "0.001, 0.01, 0.1, 1, 10",
    "sweep_max_rates": 6,
    "sweep_text_max": 200,  # characters in the rates field
    "lrchange_steps": 600,  # the live run with a mid-run change: longer than the default, to see the change
    "lrchange_changes_max": 20,
}

SCHEDULE_NAMES = {"cosine": "cosine", "wsd": "WSD (warmup-stable-decay)", "constant": "constant"}


def _lr(raw, key="lr", label="Learning rate"):
    value = parse_field(parse_number, key, label, raw)
    if not 0 < value <= WEB_LIMITS["lr_max"]:
        raise InputError({key: f"{label} must be greater than 0 and at most {WEB_LIMITS['lr_max']:g}; got {value:g}."})
    return value


def _fraction(raw, key, label):
    value = parse_field(parse_number, key, label, raw)
    if not 0 <= value <= 1:
        raise InputError({key: f"{label} must be between 0 and 1; got {value:g}."})
    return value


# ---------------------------------------------------------------------------
# The schedule plotter


def validate_schedule(args):
    """Form values {kind, lr, warmup, steps, min_ratio, decay_frac} -> checked values, or InputError
    (also what the page asks when the reader leaves a field: op check_args)."""
    args = args or {}
    kind = args.get("kind")
    parsers = {
        "lr": _lr,
        "warmup": lambda v: parse_field(parse_int, "warmup", "Warmup steps", v, 0, LIMITS["warmup_max"]),
        "steps": lambda v: parse_field(parse_int, "steps", "Total steps", v, 1, LIMITS["plot_steps_max"]),
        "min_ratio": lambda v: _fraction(v, "min_ratio", "Minimum lr ratio"),
        "decay_frac": lambda v: _fraction(v, "decay_frac", "WSD decay fraction"),
    }
    errors = {}
    if kind not in SCHEDULE_NAMES:
        errors["kind"] = f"Schedule must be one of: {', '.join(SCHEDULE_NAMES)}."
    try:
        values = collect_fields(parsers, args)
    except InputError as e:
        errors.update(e.errors)
        values = {}
    if not errors and values["warmup"] > values["steps"]:
        errors["warmup"] = f"Warmup steps ({values['warmup']:,}) cannot exceed the total steps ({values['steps']:,})."
    if errors:
        raise InputError(errors)
    return {"kind": kind, **values}


def schedule_curve(args):
    """The learning rate at every step 0..steps-1 of the chosen schedule (pylib.schedules.lr_at)."""
    s = validate_schedule(args)
    min_lr = s["lr"] * s["min_ratio"]
    lrs = [schedules.lr_at(s["kind"], t, s["lr"], s["warmup"], s["steps"], min_lr, s["decay_frac"])
           for t in range(s["steps"])]
    return {**s, "name": SCHEDULE_NAMES[s["kind"]], "lrs": lrs, "final_lr": lrs[-1], "peak_lr": max(lrs),
            "peak_step": lrs.index(max(lrs))}


@checked_by(validate_schedule)
def curve_op(session, args):
    """Op schedule_curve."""
    return schedule_curve(args)


# ---------------------------------------------------------------------------
# The live reduced ladder

_RUNS = {}


def parse_rates(raw):
    """'0.001, 0.01, 1' -> [0.001, 0.01, 1.0] (sorted, distinct), or InputError."""
    key, label = "rates", "Learning rates"
    if raw is None or not isinstance(raw, str) or not raw.strip():
        raise InputError({key: f"{label}: enter one or more numbers separated by commas."})
    if len(raw) > LIMITS["sweep_text_max"]:
        raise InputError({key: f"{label}: at most {LIMITS['sweep_text_max']} characters; got {len(raw):,}."})
    parts = [p.strip() for p in raw.replace(";", ",").split(",") if p.strip()]
    if not parts:
        raise InputError({key: f"{label}: enter one or more numbers separated by commas."})
    rates = sorted({_lr(p, key, "Each learning rate") for p in parts})
    if len(rates) > LIMITS["sweep_max_rates"]:
        raise InputError({key: f"{label}: at most {LIMITS['sweep_max_rates']} different rates; got {len(rates)}."})
    return rates


def validate_sweep_start(args):
    """The ladder's form values {rates, seed} -> {rates, seed}, or InputError (op check_args too)."""
    return collect_fields({"rates": parse_rates,
                           "seed": lambda v: parse_field(parse_int, "seed", "Seed", v, 0, WEB_LIMITS["seed_max"])},
                          args or {})


@checked_by(validate_sweep_start)
def sweep_start(session, args):
    session._need_corpus()
    values = validate_sweep_start(args)
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    _RUNS["sweep"] = {"model_cfg": mcfg, "rates": values["rates"], "seed": values["seed"], "index": 0,
                      "state": None, "rungs": []}
    return {"rates": values["rates"], "seed": values["seed"], "steps": lr_sweep.LADDER_STEPS,
            "limit": train.divergence_threshold(mcfg.vocab_size)}


def sweep_chunk(session, args):
    """About LIMITS chunk_seconds of steps of the current rung; a finished rung is appended to "rungs"."""
    run = _RUNS["sweep"]
    finished = []
    done = lambda: run["index"] >= len(run["rates"])
    for _ in chunk_steps(done):
        lr = run["rates"][run["index"]]
        cfg = lr_sweep.rung_config(lr, run["seed"])
        if run["state"] is None:
            run["state"], run["history"] = train.init_train_state(run["model_cfg"], cfg), []
        state = run["state"]
        run["history"] += train.train_steps(state, run["model_cfg"], cfg, session.train_tokens, session.val_tokens, 4)
        if state["diverged"] or state["step"] >= cfg.steps:
            rung = {"lr": lr, **lr_sweep.rung_outcome(run["history"])}
            run["rungs"].append(rung)
            finished.append(rung)
            run["index"] += 1
            run["state"] = None
    current = run["state"]
    last = run["history"][-1] if run.get("history") else None
    return {"done": done(), "finished": finished, "index": run["index"],
            "n_rates": len(run["rates"]), "step": current["step"] if current else None,
            "loss": last.get("loss") if (current and last) else None}


def sweep_finish(session, args):
    run = _RUNS.pop("sweep")
    return {"rungs": run["rungs"], "seed": run["seed"], "rates": run["rates"], "steps": lr_sweep.LADDER_STEPS}


# ---------------------------------------------------------------------------
# A live run whose learning rate changes mid-run


def validate_lrchange_start(args):
    """The run's form values {lr, seed} -> {lr, seed}, or InputError (op check_args too)."""
    return collect_fields({"lr": _lr, "seed": lambda v: parse_field(parse_int, "seed", "Seed", v, 0, WEB_LIMITS["seed_max"])},
                          args or {})


@checked_by(validate_lrchange_start)
def lrchange_start(session, args):
    session._need_corpus()
    values = validate_lrchange_start(args)
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    cfg = dataclasses.replace(train.TrainConfig(), lr=values["lr"], seed=values["seed"],
                              steps=LIMITS["lrchange_steps"], eval_interval=25)
    _RUNS["lrchange"] = {"model_cfg": mcfg, "cfg": cfg, "state": train.init_train_state(mcfg, cfg),
                         "changes": [], "last": None, "diverged_at": None}
    return {"steps": cfg.steps, "lr": cfg.lr, "seed": cfg.seed, "schedule": cfg.schedule,
            "warmup_steps": cfg.warmup_steps, "limit": train.divergence_threshold(mcfg.vocab_size)}


def validate_lrchange_set(args):
    """The change's form value {new_lr} -> the new peak lr, or InputError (op check_args too: whether a
    run is going is the op's to say, when Apply is pressed)."""
    return _lr((args or {}).get("new_lr"), "new_lr", "New learning rate")


@checked_by(validate_lrchange_set)
def lrchange_set(session, args):
    """A new peak lr for the running run, from the next step on; params and optimiser state are kept."""
    run = _RUNS.get("lrchange")
    if run is None or run["state"]["diverged"] or run["state"]["step"] >= run["cfg"].steps:
        raise InputError({"new_lr": "No run is going: press Start first."})
    new_lr = validate_lrchange_set(args)
    if len(run["changes"]) >= LIMITS["lrchange_changes_max"]:
        raise InputError({"new_lr": f"At most {LIMITS['lrchange_changes_max']} changes per run."})
    run["cfg"] = dataclasses.replace(run["cfg"], lr=new_lr)  # TrainConfig is frozen: a new value, same state
    change = {"step": run["state"]["step"], "lr": new_lr}
    run["changes"].append(change)
    return change


def lrchange_chunk(session, args):
    run = _RUNS["lrchange"]
    state, out = run["state"], []
    done = lambda: state["step"] >= run["cfg"].steps or state["diverged"]
    for _ in chunk_steps(done):
        for rec in train.train_steps(state, run["model_cfg"], run["cfg"], session.train_tokens, session.val_tokens, 1):
            rec = {k: rec.get(k) for k in ("step", "loss", "lr", "val", "diverged")}
            if rec["diverged"] and run["diverged_at"] is None:
                run["diverged_at"] = rec["step"]
            out.append(rec)
    run["last"] = out[-1] if out else run["last"]
    return {"done": done(), "records": out, "step": state["step"],
            "steps": run["cfg"].steps, "lr": run["cfg"].lr, "changes": list(run["changes"]),
            "diverged_at": run["diverged_at"]}


def lrchange_finish(session, args):
    run = _RUNS.pop("lrchange")
    last = run["last"] or {}
    finite = lambda x: x if x is not None and math.isfinite(x) else None
    return {"steps": run["state"]["step"], "changes": run["changes"], "diverged_at": run["diverged_at"],
            "final_loss": None if run["diverged_at"] is not None else finite(last.get("loss")),
            "final_val": None if run["diverged_at"] is not None else finite(last.get("val")), "lr": run["cfg"].lr}


# ---------------------------------------------------------------------------
# The gradient noise scale at a step of the default run


def validate_noise_start(args):
    """The form values {seed, step} -> {seed, step} (step at most the default run's length), or InputError
    (op check_args too)."""
    steps = train.TrainConfig().steps
    return collect_fields({
        "seed": lambda: parse_field(parse_int, "seed", "Seed", args.get("seed"), 0, WEB_LIMITS["seed_max"]),
        "step": lambda: parse_field(parse_int, "step", "Step", args.get("step"), 0, steps),
    })


@checked_by(validate_noise_start)
def noise_start(session, args):
    """{seed, step} -> the default run, to be trained to `step` (at most its length)."""
    session._need_corpus()
    steps = train.TrainConfig().steps
    v = validate_noise_start(args)
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    cfg = dataclasses.replace(train.TrainConfig(), seed=v["seed"], eval_interval=10**9)  # no evaluation: not needed
    _RUNS["noise"] = {"model_cfg": mcfg, "cfg": cfg, "state": train.init_train_state(mcfg, cfg), "target": v["step"],
                      "seed": v["seed"], "small": [], "big": [], "rng": None, "result": None}
    return {**v, "steps": steps, **noise_scale.NOISE}


def noise_chunk(session, args):
    """Train towards the step, then draw the estimate's batches, a chunk's worth at a time."""
    run = _RUNS["noise"]
    state, mcfg = run["state"], run["model_cfg"]
    n, b_small, b_big = (noise_scale.NOISE[k] for k in ("n_batches", "b_small", "b_big"))
    for _ in chunk_steps(lambda: len(run["big"]) >= n):  # the small batches are drawn first
        if state["step"] < run["target"] and not state["diverged"]:
            train.train_steps(state, mcfg, run["cfg"], session.train_tokens, session.val_tokens, 1)
            continue
        if run["rng"] is None:
            run["rng"] = noise_scale.noise_rng(run["seed"], run["target"])
        sizes = ("small", b_small) if len(run["small"]) < n else ("big", b_big)
        x, y = data.get_batch(session.train_tokens, sizes[1], mcfg.block_size, run["rng"])
        run[sizes[0]].append(noise_scale.grad_sq_norm(state["params"], mcfg, x, y))
    done = len(run["big"]) == n or bool(state["diverged"])
    return {"done": done, "step": state["step"], "target": run["target"],
            "batches": len(run["small"]) + len(run["big"]), "batches_total": 2 * n}


def noise_finish(session, args):
    run = _RUNS.pop("noise")
    n, b_small, b_big = (noise_scale.NOISE[k] for k in ("n_batches", "b_small", "b_big"))
    out = {"seed": run["seed"], "step": run["state"]["step"], "target": run["target"], **noise_scale.NOISE,
           "complete": len(run["big"]) == n}
    if out["complete"]:
        g2_small, g2_big = float(np.mean(run["small"])), float(np.mean(run["big"]))
        g2, trace = noise_scale.unbiased_estimates(g2_small, g2_big, b_small, b_big)
        out.update(g2_small=g2_small, g2_big=g2_big, g2=g2, trace=trace, b_simple=noise_scale.simple_noise_scale(g2, trace))
    return out


# ---------------------------------------------------------------------------

OPS = {
    "schedule_curve": curve_op,
    "schedule_sweep_start": sweep_start,
    "schedule_sweep_chunk": sweep_chunk,
    "schedule_sweep_finish": sweep_finish,
    "schedule_lrchange_start": lrchange_start,
    "schedule_lrchange_chunk": lrchange_chunk,
    "schedule_lrchange_set": lrchange_set,
    "schedule_lrchange_finish": lrchange_finish,
    "schedule_noise_start": noise_start,
    "schedule_noise_chunk": noise_chunk,
    "schedule_noise_finish": noise_finish,
}
