"""Chapter 5's page ops (optimisers): validation of what the reader typed, and thin calls into
pylib.studies.quadratic, pylib.studies.adam_trace and pylib.train. No numerics of its own.

Ops (see pylib.web.all_ops): optim_valley (the narrow valley's contours and trajectories),
optim_adam_steps (Adam's first steps with and without bias correction), optim_decay_paths (weight
decay decoupled or inside Adam, step by step, pylib.studies.adam_trace.decay_paths), and the chunked run
run:optim_train (one optimiser on the real model, the comparison's setting, pylib.studies.optim_state).
Each op checks its typed fields in its validate_<op>(args) (the run's in train_settings), which the
page also asks when the reader leaves a field (op check_args, @checked_by).
"""

import dataclasses

from pylib import model, train
from pylib.studies import adam_trace, optim_state, quadratic
from pylib.web import LIMITS as WEB_LIMITS, InputError, band_series, parse_int, parse_number, parse_field, collect_fields
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

LIMITS = {
    "valley_lr_max": 10.0,
    "kappa_max": 10000.0,
    "valley_steps_max": 1000,
    "grads_max": 40,  # gradients in the Adam table
    "grad_abs_max": 1e6,
    "decay_steps_max": 2000,
    "decay_lr_max": 1.0,
    "decay_wd_max": 10.0,
    "train_lr_max": WEB_LIMITS["lr_max"],
}


def _in_range(raw, key, label, lo, hi, lo_open=False, hi_open=False):
    """A float from a form value in [lo, hi] (or open at either end), or InputError naming the field."""
    value = parse_field(parse_number, key, label, raw)
    ok = (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
    if not ok:
        left, right = "(" if lo_open else "[", ")" if hi_open else "]"
        raise InputError({key: f"{label} must be in {left}{lo:g}, {hi:g}{right}; got {value:g}."})
    return value


# ---------------------------------------------------------------------------
# The valley


def validate_valley(args):
    """{lr, kappa, momentum, steps} as typed -> the checked values, or InputError naming every bad field."""
    return collect_fields({
        "lr": lambda: _in_range(args.get("lr"), "lr", "Learning rate", 0.0, LIMITS["valley_lr_max"], lo_open=True),
        "kappa": lambda: _in_range(args.get("kappa"), "kappa", "Condition number", 1.0, LIMITS["kappa_max"]),
        "momentum": lambda: _in_range(args.get("momentum"), "momentum", "Momentum", 0.0, 1.0, hi_open=True),
        "steps": lambda: parse_field(parse_int, "steps", "Steps", args.get("steps"), 1, LIMITS["valley_steps_max"]),
    })


@checked_by(validate_valley)
def valley(session, args):
    """{lr, kappa, momentum, steps} as typed -> pylib.studies.quadratic.valley."""
    v = validate_valley(args)
    return {**quadratic.valley(v["kappa"], v["lr"], v["steps"], v["momentum"]), "settings": v}


# ---------------------------------------------------------------------------
# Weight decay: decoupled (AdamW) or inside Adam's gradient (L2)


def validate_decay_paths(args):
    """{grad_a, grad_b, lr, wd, steps} as typed -> the checked values, or InputError naming every bad field."""
    return collect_fields({
        "grad_a": lambda: _in_range(args.get("grad_a"), "grad_a", "Gradient size of weight A", 0.0,
                                    LIMITS["grad_abs_max"], lo_open=True),
        "grad_b": lambda: _in_range(args.get("grad_b"), "grad_b", "Gradient size of weight B", 0.0,
                                    LIMITS["grad_abs_max"], lo_open=True),
        "lr": lambda: _in_range(args.get("lr"), "lr", "Learning rate", 0.0, LIMITS["decay_lr_max"], lo_open=True),
        "wd": lambda: _in_range(args.get("wd"), "wd", "Weight decay λ", 0.0, LIMITS["decay_wd_max"]),
        "steps": lambda: parse_field(parse_int, "steps", "Steps", args.get("steps"), 1, LIMITS["decay_steps_max"]),
    })


@checked_by(validate_decay_paths)
def decay_paths(session, args):
    """{grad_a, grad_b, lr, wd, steps} as typed -> pylib.studies.adam_trace.decay_paths for two weights."""
    v = validate_decay_paths(args)
    paths = adam_trace.decay_paths((v["grad_a"], v["grad_b"]), lr=v["lr"], weight_decay=v["wd"], steps=v["steps"])
    return {**paths, "settings": v}


# ---------------------------------------------------------------------------
# Adam's first steps


def parse_grads(raw):
    """A comma- or space-separated list of gradients as typed -> list of floats, or InputError."""
    if raw is None or not isinstance(raw, str) or not raw.strip():
        raise InputError({"grads": "Gradients is empty: type a few numbers separated by commas."})
    parts = [p for p in raw.replace(",", " ").split() if p]
    if len(parts) > LIMITS["grads_max"]:
        raise InputError({"grads": f"At most {LIMITS['grads_max']} gradients; got {len(parts):,}."})
    out = []
    for i, part in enumerate(parts):
        value = parse_field(parse_number, "grads", f"Gradient {i + 1}", part)
        if abs(value) > LIMITS["grad_abs_max"]:
            raise InputError({"grads": f"Gradient {i + 1} must be at most {LIMITS['grad_abs_max']:g} in size; got {value:g}."})
        out.append(value)
    return out


def validate_adam_steps(args):
    """{grads (text), beta1, beta2} -> the checked values, or InputError naming every bad field."""
    return collect_fields({
        "grads": lambda: parse_grads(args.get("grads")),
        "beta1": lambda: _in_range(args.get("beta1"), "beta1", "β1", 0.0, 1.0, hi_open=True),
        "beta2": lambda: _in_range(args.get("beta2"), "beta2", "β2", 0.0, 1.0, hi_open=True),
    })


@checked_by(validate_adam_steps)
def adam_steps(session, args):
    """{grads (text), beta1, beta2} -> pylib.studies.adam_trace.first_steps rows (lr = 1: steps in units of lr)."""
    v = validate_adam_steps(args)
    rows = adam_trace.first_steps(v["grads"], lr=1.0, beta1=v["beta1"], beta2=v["beta2"])
    return {"rows": rows, "settings": v}


# ---------------------------------------------------------------------------
# One optimiser on the real model (chunked)

_RUNS = {}


def train_settings(args):
    """{optimizer, lr, seed} as typed -> the comparison's TrainConfig for them."""
    name = args.get("optimizer")
    if name not in optim_state.COMPARISON:
        raise InputError({"optimizer": f"Unknown optimiser {str(name)[:24]!r}; pick one from the list."})
    v = collect_fields({
        "lr": lambda: _in_range(args.get("lr"), "lr", "Learning rate", 0.0, LIMITS["train_lr_max"], lo_open=True),
        "seed": lambda: parse_field(parse_int, "seed", "Seed", args.get("seed"), 0, WEB_LIMITS["seed_max"]),
    })
    return name, optim_state.comparison_config(name, v["lr"], v["seed"])


@checked_by(train_settings)
def train_start(session, args):
    session._need_corpus()
    name, cfg = train_settings(args)
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    _RUNS["train"] = {"name": name, "model_cfg": mcfg, "cfg": cfg, "state": train.init_train_state(mcfg, cfg),
                      "diverged_at": None, "last_val": None, "last_val_step": None}
    curve = args.get("curve")
    return {"optimizer": name, "lr": cfg.lr, "seed": cfg.seed, "steps": cfg.steps,
            "band": band_series(curve, cfg.steps) if curve else None}


def train_chunk(session, args):
    run = _RUNS["train"]
    state, cfg = run["state"], run["cfg"]
    out = []
    done = lambda: state["step"] >= cfg.steps or state["diverged"]
    for _ in chunk_steps(done):
        for r in train.train_steps(state, run["model_cfg"], cfg, session.train_tokens, session.val_tokens, 1):
            rec = {"step": r["step"], "loss": r.get("loss"), "val": r.get("val"), "train_eval": r.get("train_eval")}
            if r.get("diverged"):
                rec["diverged"] = True
                run["diverged_at"] = r["step"]
            if r.get("val") is not None:
                run["last_val"], run["last_val_step"] = r["val"], r["step"]
            out.append(rec)
    return {"records": out, "step": state["step"], "steps": cfg.steps, "done": done(), "diverged_at": run["diverged_at"]}


def train_finish(session, args):
    run = _RUNS.pop("train")
    return {"optimizer": run["name"], "lr": run["cfg"].lr, "seed": run["cfg"].seed,
            "steps": run["state"]["step"], "diverged": run["diverged_at"] is not None,
            "diverged_at": run["diverged_at"],
            "last_val": run["last_val"] if run["diverged_at"] is None else None,
            "last_val_step": run["last_val_step"] if run["diverged_at"] is None else None}


OPS = {
    "optim_valley": valley,
    "optim_adam_steps": adam_steps,
    "optim_decay_paths": decay_paths,
    "optim_train_start": train_start,
    "optim_train_chunk": train_chunk,
    "optim_train_finish": train_finish,
}
