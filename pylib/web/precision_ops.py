"""Chapter 9's page ops (mixed precision): validation of what the reader typed, and thin calls into
pylib.systems.precision and pylib.systems.mixed_precision. No numerics of its own.

Ops (see pylib.web.all_ops):
  precision_round        one value in every format: bits, stored value, error, neighbours, regime,
                         and each format's limits (derived from its bit layout);
  precision_lost_update  a weight stored in a format, incremented n times: fp32 master weights
                         against the format with nearest rounding and with stochastic rounding;
  run:precision_train    the default model trained in one recipe, chunked and stoppable: per step
                         the loss, the flushed and lost shares, the loss scale and skipped steps;
  precision_quantise     a gradient of the course model quantised to a few bits at a chosen full
                         scale: histogram, grid, error and clipped share, and the trade-off curve;
  precision_bench        bench/bench_precision.py's in-page timing of every recipe.
"""

import math
import time

import numpy as np

from pylib import data, model, train
from pylib.systems import mixed_precision as mp, precision
from pylib.web import LIMITS as WEB_LIMITS, InputError, collect_fields, parse_field, parse_int, parse_number
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

LIMITS = {
    "value_max": 1e300,  # |value| the calculator accepts (any float64 below; beyond, a typed 1e309 is inf)
    "lost_steps_max": 5000,  # additions in the lost-update demo
    "lost_lanes": 64,  # stochastic copies whose mean is shown
    "increment_max": 1e6,
    "start_max": 1e6,
}
LOST_FORMATS = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2")

_RUNS = {}


def _finite(x):
    """A float as JSON carries it: a number, or None (the page says nan/inf from the regime)."""
    x = float(x)
    return x if math.isfinite(x) else None


def _shown(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


# ---------------------------------------------------------------------------
# The rounding calculator


def validate_round(args):
    """{value} or {format, bits} -> {"value": v} or {"format": fmt, "bits": bits}, checked, or InputError
    (op check_args too)."""
    args = args or {}
    if args.get("bits") is not None:
        fmt, bits = _bits_arg(args.get("format"), args.get("bits"))
        return {"format": fmt, "bits": bits}
    v = collect_fields([("value", lambda: parse_field(parse_number, "value", "The value", args.get("value")))])["value"]
    if abs(v) > LIMITS["value_max"]:
        raise InputError({"value": f"The value must be at most {LIMITS['value_max']:g} in size; got {v:g}."})
    return {"value": v}


@checked_by(validate_round)
def round_value(session, args):
    """{value} or {format, bits} -> {value, from_bits, formats: [{format, name, sign, exponent, mantissa,
    stored, abs_error, rel_error, below, above, regime, line, max, smallest_normal, smallest_subnormal,
    spacing_at_one}]}. With bits (a string of 0s and 1s, one per bit of format, sign first: the reader
    flipped one), the value is the number those bits encode in that format (decoded here: it may be a
    subnormal, zero, inf or NaN), and every format rounds it; from_bits says what the bits were.
    line: where the value sits on that format's number line (precision.rounding_interval)."""
    checked = validate_round(args)
    from_bits = None
    if "bits" in checked:
        fmt, bits = checked["format"], checked["bits"]
        v = precision.decode(int(bits, 2), fmt)
        from_bits = {"format": fmt, "name": precision.NAMES[fmt], "bits": bits, "value": _shown(v),
                     "regime": precision.decompose(v, fmt)["regime"]}
    else:
        v = checked["value"]
    rows = []
    for fmt in precision.FORMATS:
        d = precision.decompose(v, fmt)
        f = precision.facts(fmt)
        rows.append({**{k: d[k] for k in ("format", "sign", "exponent", "mantissa", "regime")},
                     "name": f["name"], "stored": _shown(d["stored"]), "abs_error": d["abs_error"],
                     "rel_error": d["rel_error"], "below": d["below"], "above": d["above"],
                     "line": precision.rounding_interval(v, fmt),
                     **{k: f[k] for k in ("max", "smallest_normal", "smallest_subnormal", "spacing_at_one",
                                          "exponent_bits", "mantissa_bits")}})
    return {"value": _shown(v), "from_bits": from_bits, "formats": rows}


def _bits_arg(fmt, bits):
    """A format's name and a bit string of its width (sign, exponent, mantissa), checked."""
    if fmt not in precision.FORMATS:
        raise InputError({"bits": f"Unknown format {str(fmt)[:20]!r}: one of {', '.join(precision.FORMATS)}."})
    E, M, _ = precision.FORMATS[fmt]
    if not isinstance(bits, str) or len(bits) != 1 + E + M or set(bits) - {"0", "1"}:
        raise InputError({"bits": f"The bits of {precision.NAMES[fmt]} are {1 + E + M} characters, each 0 or 1."})
    return fmt, bits


# ---------------------------------------------------------------------------
# The lost update


def validate_lost_update(args):
    """{start, increment, steps, format, seed} -> checked values (format among them), or InputError
    (op check_args too)."""
    args = args or {}
    fmt = args.get("format")
    s = collect_fields([
        ("start", lambda: _bounded(args.get("start"), "start", "The starting weight", -LIMITS["start_max"], LIMITS["start_max"])),
        ("increment", lambda: _bounded(args.get("increment"), "increment", "The increment",
                                       -LIMITS["increment_max"], LIMITS["increment_max"])),
        ("steps", lambda: parse_field(parse_int, "steps", "The number of additions", args.get("steps"), 1,
                                      LIMITS["lost_steps_max"])),
        ("seed", lambda: parse_field(parse_int, "seed", "Seed", args.get("seed", 0), 0, WEB_LIMITS["seed_max"])),
    ])
    if fmt not in LOST_FORMATS:
        raise InputError({"format": "Choose a format: bf16, fp16, FP8 E4M3 or FP8 E5M2."})
    return {**s, "format": fmt}


@checked_by(validate_lost_update)
def lost_update(session, args):
    """{start, increment, steps, format, seed} -> the weight over the steps: exact (float64), fp32,
    the format with nearest rounding, and with stochastic rounding (one copy and the mean of lanes)."""
    v = validate_lost_update(args)
    fmt = v["format"]
    s = {k: v[k] for k in ("start", "increment", "steps", "seed")}
    n = s["steps"]
    rng = np.random.default_rng(s["seed"])
    with np.errstate(all="ignore"):
        fp32 = precision.repeated_add(s["start"], s["increment"], n, "fp32")[:, 0]
        near = precision.repeated_add(s["start"], s["increment"], n, fmt)[:, 0]
        sr = precision.repeated_add(s["start"], s["increment"], n, fmt, stochastic=True, rng=rng,
                                    lanes=LIMITS["lost_lanes"])
    exact = s["start"] + s["increment"] * np.arange(n + 1)
    d = precision.decompose(float(near[0]), fmt)
    stride = max(1, (n + 1) // 500)  # at most ~500 points drawn
    idx = list(range(0, n + 1, stride)) + ([n] if n % stride else [])
    pick = lambda a: [_finite(a[i]) for i in idx]  # noqa: E731
    return {"settings": {**s, "format": fmt}, "steps": idx, "exact": pick(exact), "fp32": pick(fp32),
            "nearest": pick(near), "stochastic_one": pick(sr[:, 0]), "stochastic_mean": pick(sr.mean(axis=1)),
            "lanes": LIMITS["lost_lanes"], "start_stored": _shown(near[0]),
            "spacing_at_start": None if d["above"] is None else d["above"] - float(near[0]),
            "final": {"exact": _finite(exact[-1]), "fp32": _finite(fp32[-1]), "nearest": _finite(near[-1]),
                      "stochastic_one": _finite(sr[-1, 0]), "stochastic_mean": _finite(sr[-1].mean())},
            "overflow": bool(not np.isfinite(near).all() or not np.isfinite(sr).all())}


def _bounded(raw, key, label, lo, hi):
    value = parse_field(parse_number, key, label, raw)
    if not lo <= value <= hi:
        raise InputError({key: f"{label} must be between {lo:g} and {hi:g}; got {value:g}."})
    return value


# ---------------------------------------------------------------------------
# A recipe, live


def validate_train_start(args):
    """The recipe run's form values {recipe, seed} -> {recipe, seed}, or InputError (op check_args too)."""
    args = args or {}
    name = args.get("recipe")
    if name not in mp.RECIPES:
        raise InputError({"recipe": "Choose a recipe from the list."})
    s = collect_fields([("seed", lambda: parse_field(parse_int, "seed", "Seed", args.get("seed"), 0,
                                                         WEB_LIMITS["seed_max"]))])
    return {"recipe": name, **s}


@checked_by(validate_train_start)
def train_start(session, args):
    session._need_corpus()
    v = validate_train_start(args)
    name, s = v["recipe"], {"seed": v["seed"]}
    cfg = model.GPTConfig(vocab_size=session.vocab.size)
    tcfg = train.TrainConfig(seed=s["seed"])
    state = mp.init_state(cfg, tcfg, name)
    _RUNS["train"] = {"cfg": cfg, "tcfg": tcfg, "state": state, "history": [], "diverged_at": None,
                      "seconds": 0.0}
    return {"settings": {"recipe": name, "seed": s["seed"], "label": mp.LABELS[name]}, "steps": tcfg.steps,
            "eval_interval": tcfg.eval_interval}


def _record(r):
    out = {k: r.get(k) for k in ("step", "loss", "val", "flushed", "lost", "scale")}
    out["skipped"] = bool(r.get("skipped"))
    out["diverged"] = bool(r.get("diverged"))
    return out


def train_chunk(session, args):
    run = _RUNS["train"]
    state, cfg, tcfg = run["state"], run["cfg"], run["tcfg"]
    out = []
    done = lambda: state["step"] >= tcfg.steps or state["diverged"]
    for _ in chunk_steps(done):
        t1 = time.perf_counter()
        recs = mp.recipe_steps(state, cfg, tcfg, session.train_tokens, session.val_tokens, 1)
        run["seconds"] += time.perf_counter() - t1
        for r in recs:
            run["history"].append(r)
            if r.get("diverged") and run["diverged_at"] is None:
                run["diverged_at"] = r["step"]
            out.append(_record(r))
    return {"done": done(), "records": out, "step": state["step"], "steps": tcfg.steps,
            "diverged_at": run["diverged_at"]}


def train_finish(session, args):
    run = _RUNS.pop("train")
    h = run["history"]
    vals = [r["val"] for r in h if r.get("val") is not None]
    flushed = [r["flushed"] for r in h if "flushed" in r]
    lost = [r["lost"] for r in h if "lost" in r]
    return {"steps": run["state"]["step"], "diverged_at": run["diverged_at"],
            "final_loss": h[-1].get("loss") if h else None, "final_val": vals[-1] if vals else None,
            "skipped_steps": sum(1 for r in h if r.get("skipped")),
            "final_scale": h[-1].get("scale") if h else None,
            "flushed_mean": float(np.mean(flushed)) if flushed else None,
            "lost_mean": float(np.mean(lost)) if lost else None,
            "steps_per_second": (len(h) / run["seconds"]) if run["seconds"] > 0 else None,
            "first": [_record(r) for r in h[:5]]}  # for the in-page against CPython check


# ---------------------------------------------------------------------------
# Quantisation of a real gradient


QUANT_TENSORS = ("h.0.mlp.c_fc.weight", "h.0.attn.c_attn.weight", "wte")
QUANT_RATIOS = np.geomspace(0.02, 1.5, 60)  # full scale / amax, for the trade-off curve


def _gradient(session, name):
    """The course model's gradient of one tensor at initialisation (seed 0), on the first 16 evenly
    spaced validation windows: a real gradient, with its outliers."""
    key = ("grad", name)
    if key not in _RUNS:
        cfg = model.GPTConfig(vocab_size=session.vocab.size)
        x, y = data.eval_windows(session.val_tokens, train.TrainConfig().batch_size, cfg.block_size)
        _, grads = model.loss_and_grads(model.init_params(cfg, 0), cfg, x, y)
        _RUNS[key] = grads[name]
    return _RUNS[key]


def validate_quantise(args):
    """{tensor, bits, ratio} -> checked values, or InputError (op check_args too)."""
    args = args or {}
    name = args.get("tensor")
    if name not in QUANT_TENSORS:
        raise InputError({"tensor": "Choose one of the listed tensors."})
    s = collect_fields([
        ("bits", lambda: parse_field(parse_int, "bits", "Bits", args.get("bits"), 2, 8)),
        ("ratio", lambda: _bounded(args.get("ratio"), "ratio", "The full scale (x amax)", 1e-3, 10.0)),
    ])
    return {"tensor": name, **s}


@checked_by(validate_quantise)
def quantise_demo(session, args):
    """{tensor, bits, ratio} -> the gradient's histogram, the grid, the error and the clipped share at
    full scale = ratio x amax, and the error over a sweep of full scales (the trade-off)."""
    from pylib.systems import quantise
    session._need_corpus()
    v = validate_quantise(args)
    name, s = v["tensor"], {"bits": v["bits"], "ratio": v["ratio"]}
    g = _gradient(session, name)
    amax = quantise.amax_full_scale(g)
    fs = s["ratio"] * amax
    err = quantise.quantisation_error(g, s["bits"], fs)
    gq, _ = quantise.quantise_uniform(g, s["bits"], fs)
    inside = np.abs(g) <= fs
    norm = float(np.linalg.norm(g.astype(np.float64)))
    sweep = [quantise.quantisation_error(g, s["bits"], r * amax) for r in QUANT_RATIOS]
    edges = np.linspace(-1.02 * amax, 1.02 * amax, 103)
    counts, _ = np.histogram(g, bins=edges)
    counts_q, _ = np.histogram(gq, bins=edges)
    return {"settings": {**s, "tensor": name}, "amax": amax, "full_scale": fs, "q_max": quantise.q_max(s["bits"]),
            "step": err["step"], "rel_error": err["rms_error"] * math.sqrt(g.size) / norm,
            "clipped": err["clipped_fraction"],
            "max_error_in_range": float(np.max(np.abs(gq - g)[inside], initial=0.0)),
            "bound_in_range": err["bound_in_range"], "elements": int(g.size),
            "bytes": quantise.bytes_per_element(s["bits"], g.size) * g.size, "bytes_fp32": 4 * int(g.size),
            "hist_centres": ((edges[:-1] + edges[1:]) / 2).tolist(), "hist_counts": counts.tolist(),
            "hist_counts_quantised": counts_q.tolist(),
            "sweep_ratio": QUANT_RATIOS.tolist(),
            "sweep_rel_error": [e["rms_error"] * math.sqrt(g.size) / norm for e in sweep],
            "sweep_clipped": [e["clipped_fraction"] for e in sweep]}


# ---------------------------------------------------------------------------
# The benchmark (bench/bench_precision.py): steps per second of each recipe, in the page


def bench(session, args):
    """{steps, repeats} -> {recipe: median steps per second} of recipe_steps on the default model
    (no evaluation), on a synthetic token stream so that no corpus is needed."""
    args = args or {}
    steps = int(args.get("steps", 30))
    repeats = int(args.get("repeats", 3))
    names = args.get("recipes") or list(mp.RECIPES)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 65, 50_000)
    cfg = model.GPTConfig()
    tcfg = train.TrainConfig(steps=steps + 1, eval_interval=10 ** 6)
    out = {}
    for name in names:
        rates = []
        for _ in range(repeats):
            state = mp.init_state(cfg, tcfg, name)
            mp.recipe_steps(state, cfg, tcfg, tokens, tokens, 1)  # step 0 carries the first evaluation
            t0 = time.perf_counter()
            mp.recipe_steps(state, cfg, tcfg, tokens, tokens, steps - 1)
            rates.append((steps - 1) / (time.perf_counter() - t0))
        out[name] = float(np.median(rates))
    return out


# ---------------------------------------------------------------------------

OPS = {
    "precision_bench": bench,
    "precision_quantise": quantise_demo,
    "precision_round": round_value,
    "precision_lost_update": lost_update,
    "precision_train_start": train_start,
    "precision_train_chunk": train_chunk,
    "precision_train_finish": train_finish,
}
