"""Chapter 7's page ops (initialisation, normalisation and µP): validation of what the reader typed,
and thin calls into pylib.studies.init_study and pylib.train. No numerics of its own.

Ops (see pylib.web.all_ops):
  init_scale          {init_std, depth} -> loss at init, activation std per layer (instant)
  init_depth_norms    {depth} -> per-layer activation std and gradient norm at init, pre- and post-LN
  run:init_depth      a short training run of a chosen depth, norm placement, with or without
                      warmup (chunked, stoppable), with the measured band where one exists
  run:init_coord      the coordinate check, SP and µP, one width per chunk (chunked, stoppable)

The settings of the runs are pylib.studies.init_study's (`depth_train_config`, `coord_train_config`), the
same the measurements use, so a live run can be compared with the measured band.

Each op checks its typed fields in a function of its args (validate_init_scale, validate_depth_norms,
parse_depth_run, validate_coord_start), which the page also asks when the reader leaves a field (op
check_args, @checked_by).
"""

import dataclasses
import math


from pylib import data, model, train
from pylib.studies import init_study
from pylib.web import LIMITS as WEB_LIMITS, InputError, band_series, collect_fields, parse_field, parse_int, parse_number
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

LIMITS = {
    "init_std_max": 10.0,  # above this float32 overflows in the deeper models: refused with a message
    "depth_max": init_study.DEPTH_MAX,
    "probe_windows": 8,  # validation windows of the fixed batch the statistics are taken on
    "coord_lr_max": 10.0,
}


def _base_cfg(session):
    return dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)


def _probe(session, cfg):
    return data.eval_windows(session.val_tokens, LIMITS["probe_windows"], cfg.block_size)


def parse_init_std(raw):
    """The reader's init std: a number in (0, init_std_max]."""
    value = parse_field(parse_number, "init_std", "Init std", raw)
    if not 0 < value <= LIMITS["init_std_max"]:
        why = "0 gives every weight the same value (zero), so nothing can be learnt" if value == 0 else \
            "a standard deviation cannot be negative" if value < 0 else f"the limit is {LIMITS['init_std_max']:g}"
        raise InputError({"init_std": f"Init std must be greater than 0 and at most {LIMITS['init_std_max']:g} ({why}); got {value:g}."})
    return value


def parse_depth(raw):
    return parse_field(parse_int, "depth", "Depth (layers)", raw, 1, LIMITS["depth_max"])


# ---------------------------------------------------------------------------
# Instant views


def validate_init_scale(args):
    """{init_std, depth} -> {init_std, depth}, or InputError naming every bad field."""
    return collect_fields({"init_std": parse_init_std, "depth": parse_depth}, args)


@checked_by(validate_init_scale)
def init_scale(session, args):
    """{init_std, depth} -> init_study.init_stats at that scale and depth (seed 0, pre-LN)."""
    session._need_corpus()
    parsed = validate_init_scale(args)
    cfg = dataclasses.replace(_base_cfg(session), n_layer=parsed["depth"], init_std=parsed["init_std"])
    x, y = _probe(session, cfg)
    stats = init_study.init_stats(cfg, 0, x, y)
    return {**stats, **parsed, "ln_vocab": math.log(cfg.vocab_size),
            "divergence_limit": train.divergence_threshold(cfg.vocab_size)}


def validate_depth_norms(args):
    """{depth} -> depth, or InputError."""
    return parse_depth(args.get("depth"))


@checked_by(validate_depth_norms)
def depth_norms(session, args):
    """{depth} -> {"pre": init_stats, "post": init_stats} at that depth (seed 0)."""
    session._need_corpus()
    depth = validate_depth_norms(args)
    cfg = _base_cfg(session)
    x, y = _probe(session, cfg)
    out = init_study.depth_stats(cfg, [depth], ("pre", "post"), 0, x, y)
    return {"depth": depth, "pre": out["pre"][0], "post": out["post"][0]}


# ---------------------------------------------------------------------------
# A short training run through depth

_RUNS = {}  # the current chunked run of this module, by name


def parse_depth_run(args):
    """{depth, position, warmup, seed} -> (depth, position, warmup, seed), or InputError."""
    errors, out = {}, {}
    try:
        out["depth"] = parse_depth(args.get("depth"))
    except InputError as e:
        errors.update(e.errors)
    if args.get("position") not in ("pre", "post"):
        errors["position"] = "Choose pre-LN or post-LN."
    if not isinstance(args.get("warmup"), bool):
        errors["warmup"] = "Choose with or without warmup."
    try:
        out["seed"] = parse_field(parse_int, "seed", "Seed", args.get("seed"), 0, WEB_LIMITS["seed_max"])
    except InputError as e:
        errors.update(e.errors)
    if errors:
        raise InputError(errors)
    return out["depth"], args["position"], args["warmup"], out["seed"]


@checked_by(parse_depth_run)
def depth_start(session, args):
    session._need_corpus()
    depth, position, warmup, seed = parse_depth_run(args)
    mcfg, tcfg = init_study.depth_train_config(_base_cfg(session), depth, position, warmup, seed)
    key = init_study.depth_train_key(depth, position, warmup)
    curves = args.get("curves") if isinstance(args.get("curves"), dict) else {}
    curve = curves.get(key) if key in init_study.depth_train_settings() else None
    _RUNS["depth"] = {"model_cfg": mcfg, "train_cfg": tcfg, "state": train.init_train_state(mcfg, tcfg),
                      "ema": 0.0, "ema_weight": 0.0, "diverged_at": None, "last_val": None, "last_loss": None,
                      "losses": []}
    return {"steps": tcfg.steps, "depth": depth, "position": position, "warmup": warmup, "seed": seed,
            "warmup_steps": tcfg.warmup_steps, "lr": tcfg.lr, "batch_size": tcfg.batch_size,
            "params": model.count_params(mcfg), "band": band_series(curve, tcfg.steps) if curve else None,
            "band_key": key if curve else None}


def depth_chunk(session, args):
    run = _RUNS["depth"]
    state, tcfg = run["state"], run["train_cfg"]
    out = []
    s = WEB_LIMITS["smoothing"]
    done = lambda: state["step"] >= tcfg.steps or state["diverged"]
    for _ in chunk_steps(done):
        for rec in train.train_steps(state, run["model_cfg"], tcfg, session.train_tokens, session.val_tokens, 1):
            r = {"step": rec["step"], "loss": rec.get("loss"), "val": rec.get("val")}
            if rec.get("diverged"):
                r["diverged"] = True
                run["diverged_at"] = rec["step"]
            elif r["loss"] is not None:
                run["ema"] = s * run["ema"] + (1 - s) * r["loss"]
                run["ema_weight"] = s * run["ema_weight"] + (1 - s)
                r["loss_smooth"] = run["ema"] / run["ema_weight"]
                run["last_loss"] = r["loss"]
                run["losses"].append(r["loss"])
            if r["val"] is not None:
                run["last_val"] = r["val"]
            out.append(r)
    return {"done": done(), "records": out, "step": state["step"], "steps": tcfg.steps, "diverged_at": run["diverged_at"]}


def depth_finish(session, args):
    run = _RUNS.pop("depth")
    return {"steps": run["state"]["step"], "final_val_loss": run["last_val"], "final_train_loss": run["last_loss"],
            "diverged": run["diverged_at"] is not None, "diverged_at": run["diverged_at"],
            "losses": run["losses"],  # every applied step's batch loss, for comparison with CPython
            "divergence_limit": train.divergence_threshold(run["model_cfg"].vocab_size)}


# ---------------------------------------------------------------------------
# The coordinate check, live


def validate_coord_start(args):
    """{lr, seed} -> (lr, seed), or InputError naming every bad field."""
    errors = {}
    lr = None
    try:
        lr = parse_field(parse_number, "lr", "Learning rate", args.get("lr"))
        if not 0 < lr <= LIMITS["coord_lr_max"]:
            raise InputError({"lr": f"Learning rate must be greater than 0 and at most {LIMITS['coord_lr_max']:g}; got {lr:g}."})
    except InputError as e:
        errors.update(e.errors)
    try:
        seed = parse_field(parse_int, "seed", "Seed", args.get("seed"), 0, WEB_LIMITS["seed_max"])
    except InputError as e:
        errors.update(e.errors)
    if errors:
        raise InputError(errors)
    return lr, seed


@checked_by(validate_coord_start)
def coord_start(session, args):
    session._need_corpus()
    lr, seed = validate_coord_start(args)
    base = _base_cfg(session)
    jobs = [(p, w) for p in ("sp", "mup") for w in init_study.COORD_WIDTHS]
    _RUNS["coord"] = {"base": base, "lr": lr, "seed": seed, "jobs": jobs, "done": [],
                      "x": _probe(session, base)[0][: init_study.COORD_PROBE_WINDOWS]}
    return {"lr": lr, "seed": seed, "widths": list(init_study.COORD_WIDTHS), "steps": init_study.COORD_STEPS,
            "jobs": len(jobs), "base_width": init_study.COORD_BASE_WIDTH, "keys": list(init_study.COORD_KEYS)}


def coord_chunk(session, args):
    """One (parameterisation, width) per chunk: its coordinate sizes after 0..COORD_STEPS steps."""
    run = _RUNS["coord"]
    param, width = run["jobs"][len(run["done"])]
    mcfg, tcfg = init_study.coord_train_config(run["base"], width, param == "mup", run["seed"], run["lr"])
    sizes = init_study.coord_check(mcfg, tcfg, session.train_tokens, run["x"], init_study.COORD_STEPS)
    item = {"param": param, "width": width, **sizes}
    run["done"].append(item)
    return {"done": len(run["done"]) == len(run["jobs"]), "item": item, "n_done": len(run["done"]),
            "jobs": len(run["jobs"])}


def coord_finish(session, args):
    run = _RUNS.pop("coord")
    return {"lr": run["lr"], "seed": run["seed"], "items": run["done"], "complete": len(run["done"]) == len(run["jobs"])}


# ---------------------------------------------------------------------------

OPS = {
    "init_scale": init_scale,
    "init_depth_norms": depth_norms,
    "init_depth_start": depth_start,
    "init_depth_chunk": depth_chunk,
    "init_depth_finish": depth_finish,
    "init_coord_start": coord_start,
    "init_coord_chunk": coord_chunk,
    "init_coord_finish": coord_finish,
}
