"""Chapter 8's page ops (stability): validation of what the reader typed, and thin calls into
pylib.studies.stability and pylib.train. No numerics of its own.

Ops (see pylib.web.all_ops):
  stability_nan_demo             one NaN source, unguarded next to guarded (pylib.studies.stability);
  run:stability_bad              a default-model run with a bad stretch of batches at a chosen
                                 step and a cure (none, clipping, skipping), chunked and stoppable;
                                 every step's per-layer gradient and weight norms, and after each
                                 chunk the dead MLP units on DIAG_WINDOWS validation windows;
  stability_bad_inject           "Inject now": a bad stretch from the run's next step;
  run:stability_attn             a short high-lr run, with or without QK-norm and z-loss, with
                                 attention statistics after every few steps.
Numbers that JSON cannot carry (NaN, inf) are sent as the strings "nan", "inf" and "-inf".
"""

import math

import numpy as np

from pylib import data, guards, train
from pylib.studies import stability
from pylib.web import LIMITS as WEB_LIMITS, InputError, parse_int, parse_number, parse_field, collect_fields
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

LIMITS = {
    "logit_max": 1e6,  # |logit| the NaN demos accept; float32 itself overflows near 3.4e38
    "clip_max": 1e6,
    "skip_factor_min": 1.0,  # a factor below 1 would skip ordinary steps
    "skip_factor_max": 1e6,
    "lr_max": 10.0,
}

_RUNS = {}  # the current chunked run of this module, by name


def _bounded(raw, key, label, lo, hi, lo_open=False):
    """A finite number in [lo, hi] ((lo, hi] with lo_open), or InputError."""
    value = parse_field(parse_number, key, label, raw)
    if value < lo or value > hi or (lo_open and value == lo):
        side = "greater than" if lo_open else "at least"
        raise InputError({key: f"{label} must be {side} {lo:g} and at most {hi:g}; got {value:g}."})
    return value


def shown(x):
    """A float as JSON can carry it: a number, or "nan" / "inf" / "-inf"."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _shown_all(a):
    return [shown(v) for v in np.ravel(a)]


# ---------------------------------------------------------------------------
# Where NaN comes from


def validate_nan_demo(args):
    """{which, logit} -> {which, logit} (no logit for "masked_row", which takes none), or InputError
    (op check_args too)."""
    which = args.get("which")
    if which not in ("log0", "overflow", "masked_row"):
        raise InputError({"which": "Choose one of the three demonstrations."})
    if which == "masked_row":
        return {"which": which}
    return {"which": which,
            "logit": _bounded(args.get("logit"), "logit", "The logit", -LIMITS["logit_max"], LIMITS["logit_max"])}


@checked_by(validate_nan_demo)
def nan_demo(session, args):
    """{which: "log0" | "overflow" | "masked_row", logit} -> the inputs, the naive and the guarded results."""
    v = validate_nan_demo(args)
    which = v["which"]
    if which == "masked_row":
        scores = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], dtype=np.float32)  # (3, 3)
        mask = np.array([[True, False, False], [False, False, False], [True, True, False]])
        return {"which": which, "scores": scores.tolist(), "mask": mask.tolist(),
                "naive": [_shown_all(r) for r in stability.masked_softmax(scores, mask)],
                "guarded": [_shown_all(r) for r in stability.safe_masked_softmax(scores, mask)]}
    a = v["logit"]
    if which == "log0":
        logits = [0.0, -abs(a)]  # the target (index 1) trails the other logit by |a|
        return {"which": which, "logits": logits, "target": 1,
                "naive_loss": shown(stability.naive_cross_entropy(logits, 1)),
                "guarded_loss": shown(stability.guarded_cross_entropy(logits, 1)),
                "naive_grad": _shown_all(stability.naive_cross_entropy_grad(logits, 1)),
                "guarded_grad": _shown_all(stability.guarded_cross_entropy_grad(logits, 1))}
    scores = [abs(a), 0.0, -1.0]
    return {"which": which, "scores": scores,
            "naive": _shown_all(stability.naive_softmax(scores)),
            "guarded": _shown_all(stability.shifted_softmax(scores)),
            "exp_limit": float(np.log(np.finfo(np.float32).max))}


# ---------------------------------------------------------------------------
# One bad batch, live


def validate_bad_settings(args, steps):
    """Form values {inject_step, cure, clip, skip_factor, lr, seed} -> dict, or InputError."""
    cure = args.get("cure")
    parsers = [
        ("inject_step", lambda: parse_field(parse_int, "inject_step", "The injection step", args.get("inject_step"),
                                       0, steps - 1)),
        ("lr", lambda: _bounded(args.get("lr"), "lr", "Learning rate", 0.0, LIMITS["lr_max"], lo_open=True)),
        ("seed", lambda: parse_field(parse_int, "seed", "Seed", args.get("seed"), 0, WEB_LIMITS["seed_max"])),
    ]
    if cure not in stability.CURES:
        raise InputError({"cure": "Choose a cure: none, clipping or skipping."})
    if cure == "clip":
        parsers.append(("clip", lambda: _bounded(args.get("clip"), "clip", "The clipping threshold", 0.0,
                                                 LIMITS["clip_max"], lo_open=True)))
    if cure == "skip":
        parsers.append(("skip_factor", lambda: _bounded(args.get("skip_factor"), "skip_factor", "The skip factor",
                                                        LIMITS["skip_factor_min"], LIMITS["skip_factor_max"])))
    values = collect_fields(parsers)
    values["cure"] = cure
    return values


def validate_bad_start(args):
    """The bad-batch run's form values, checked against the run's length (op check_args too)."""
    return validate_bad_settings(args or {}, stability.BAD["steps"])


@checked_by(validate_bad_start)
def bad_start(session, args):
    session._need_corpus()
    s = validate_bad_start(args)
    mcfg, tcfg = stability.bad_configs(session.vocab.size, s["cure"], s["seed"], s["lr"], s.get("clip"),
                                       s.get("skip_factor"))
    state = train.init_train_state(mcfg, tcfg)
    bad_steps = set(range(s["inject_step"], s["inject_step"] + stability.BAD["repeats"]))
    token = int(session.vocab.encode(stability.BAD["token"])[0][0])
    guards.hook_batches(state, stability.bad_batch_hook(bad_steps, token))
    guards.hook_grads(state, stability.grad_norm_hook(mcfg))
    x_diag, _ = data.eval_windows(session.val_tokens, stability.DIAG_WINDOWS, mcfg.block_size)
    _RUNS["bad"] = {"model_cfg": mcfg, "cfg": tcfg, "state": state, "bad_steps": bad_steps, "history": [],
                    "diverged_at": None, "x_diag": x_diag}
    return {"settings": s, "steps": tcfg.steps, "repeats": stability.BAD["repeats"],
            "layers": stability.layer_names(mcfg), "bad_steps": sorted(bad_steps),
            "mlp_units": 4 * mcfg.n_embd, "diag_windows": stability.DIAG_WINDOWS,
            "dead_units": _dead(run=_RUNS["bad"])}


def _finite_list(values):
    return [v if math.isfinite(v) else None for v in values]


def _dead(run):
    """The fraction of dead MLP units per layer of the run's current weights (None if not finite)."""
    with np.errstate(all="ignore"):
        return _finite_list(stability.dead_units(run["state"]["params"], run["model_cfg"], run["x_diag"]))


def bad_inject(session, args):
    """Inject now: a bad stretch from the next step the run takes."""
    run = _RUNS.get("bad")
    if run is None or run["state"]["step"] >= run["cfg"].steps or run["state"]["diverged"]:
        raise InputError({"inject": "No run is going: press Start first."})
    first = run["state"]["step"]  # ops run between chunks: this is the next step the run takes
    new = set(range(first, min(first + stability.BAD["repeats"], run["cfg"].steps)))
    run["bad_steps"].update(new)
    return {"bad_steps": sorted(new)}


def _bad_record(run, rec):
    r = {"step": rec["step"], "loss": rec.get("loss"), "lr": rec.get("lr"), "grad_norm": rec.get("grad_norm"),
         "clipped": bool(rec.get("clipped")), "skipped": bool(rec.get("skipped")),
         "bad": rec["step"] in run["bad_steps"], "diverged": bool(rec.get("diverged")),
         "layer_grad_norms": _finite_list(rec.get("layer_grad_norms", [])),
         "layer_weight_norms": _finite_list(rec.get("layer_weight_norms", []))}
    if r["diverged"] and run["diverged_at"] is None:
        run["diverged_at"] = r["step"]
    return r


def bad_chunk(session, args):
    run = _RUNS["bad"]
    state, cfg = run["state"], run["cfg"]
    out = []
    done = lambda: state["step"] >= cfg.steps or state["diverged"]
    for _ in chunk_steps(done):
        for rec in train.train_steps(state, run["model_cfg"], cfg, session.train_tokens, session.val_tokens, 1):
            with np.errstate(all="ignore"):  # the weights after this step's update (or skip)
                rec["layer_weight_norms"] = stability.layer_weight_norms(state["params"], run["model_cfg"])
            run["history"].append(rec)
            out.append(_bad_record(run, rec))
    return {"done": done(), "records": out, "step": state["step"], "steps": cfg.steps,
            "diverged_at": run["diverged_at"], "dead_units": _dead(run)}


def bad_finish(session, args):
    run = _RUNS.pop("bad")
    h = run["history"]
    n = max(len(h), 1)
    bad_applied = [r for r in h if r["step"] in run["bad_steps"]]
    ratio = stability.grad_norm_ratio(h, min(run["bad_steps"])) if run["bad_steps"] else None
    return {"steps": run["state"]["step"], "diverged_at": run["diverged_at"],
            "clipped_fraction": sum(1 for r in h if r.get("clipped")) / n,
            "skipped_fraction": sum(1 for r in h if r.get("skipped")) / n,
            "clipped_steps": sum(1 for r in h if r.get("clipped")),
            "skipped_steps": sum(1 for r in h if r.get("skipped")),
            "bad_steps_taken": len(bad_applied),
            "bad_skipped": sum(1 for r in bad_applied if r.get("skipped")),
            "grad_norm_ratio": ratio,
            "final_loss": h[-1].get("loss") if h else None,
            "layer_weight_norms": _finite_list(h[-1]["layer_weight_norms"]) if h else None,
            "dead_units": _dead(run)}


# ---------------------------------------------------------------------------
# Attention-logit growth, live


def validate_attn_start(args):
    """The attention run's form values {lr, seed, qk_norm, z_loss} -> dict, or InputError (op check_args too)."""
    args = args or {}
    s = collect_fields([
        ("lr", lambda: _bounded(args.get("lr"), "lr", "Learning rate", 0.0, LIMITS["lr_max"], lo_open=True)),
        ("seed", lambda: parse_field(parse_int, "seed", "Seed", args.get("seed"), 0, WEB_LIMITS["seed_max"])),
    ])
    s["qk_norm"], s["z_loss"] = bool(args.get("qk_norm")), bool(args.get("z_loss"))
    return s


@checked_by(validate_attn_start)
def attn_start(session, args):
    session._need_corpus()
    s = validate_attn_start(args)
    mcfg, tcfg = stability.attn_configs(session.vocab.size, s["qk_norm"],
                                        stability.ATTN["z_loss"] if s["z_loss"] else 0.0, s["seed"], s["lr"])
    x, _ = data.eval_windows(session.val_tokens, stability.ATTN["stats_windows"], mcfg.block_size)
    _RUNS["attn"] = {"model_cfg": mcfg, "cfg": tcfg, "state": train.init_train_state(mcfg, tcfg), "x": x,
                     "diverged_at": None, "last": None}
    return {"settings": s, "steps": tcfg.steps, "n_layer": mcfg.n_layer,
            "stats_interval": stability.ATTN["stats_interval"]}


def _attn_point(run):
    st = stability.attention_stats(run["state"]["params"], run["model_cfg"], run["x"])
    return {"step": run["state"]["step"], "max_logit": [shown(v) for v in st["max_logit"]],
            "entropy": [shown(v) for v in st["entropy"]], "log_z": shown(st["log_z"])}


def attn_chunk(session, args):
    run = _RUNS["attn"]
    state, cfg = run["state"], run["cfg"]
    points, losses = [], []
    done = lambda: state["step"] >= cfg.steps or state["diverged"]
    with np.errstate(all="ignore"):
        for _ in chunk_steps(done):
            if state["step"] % stability.ATTN["stats_interval"] == 0:
                points.append(_attn_point(run))
            for rec in train.train_steps(state, run["model_cfg"], cfg, session.train_tokens, session.val_tokens, 1):
                losses.append({"step": rec["step"], "loss": rec.get("loss")})
                if rec.get("diverged") and run["diverged_at"] is None:
                    run["diverged_at"] = rec["step"]
        if done() and not state["diverged"]:
            points.append(_attn_point(run))
    if points:
        run["last"] = points[-1]
    return {"done": done(), "points": points, "losses": losses, "step": state["step"], "steps": cfg.steps,
            "diverged_at": run["diverged_at"]}


def attn_finish(session, args):
    run = _RUNS.pop("attn")
    return {"steps": run["state"]["step"], "diverged_at": run["diverged_at"], "last": run["last"]}


# ---------------------------------------------------------------------------

OPS = {
    "stability_nan_demo": nan_demo,
    "stability_bad_start": bad_start,
    "stability_bad_chunk": bad_chunk,
    "stability_bad_finish": bad_finish,
    "stability_bad_inject": bad_inject,
    "stability_attn_start": attn_start,
    "stability_attn_chunk": attn_chunk,
    "stability_attn_finish": attn_finish,
}
