"""Chapter 14's page ops (scaling laws): validation of what the reader typed, and thin calls into
pylib.studies.scaling, pylib.systems.flops and pylib.systems.memory. No numerics of their own.

Ops (see pylib.web.all_ops):
  scaling_isoflop     the measured IsoFLOP sweep (from results.json, passed in by the page): every
                      budget's points, fitted parabola and minimum (Hoffmann et al. 2022, figure 3,
                      left), the power laws through the minima with their line (figure 3, centre),
                      and the toy's predicted optimum at a budget the reader types;
  scaling_calculator  from a compute budget: N_opt and D_opt under the cited fits and the 20-tokens
                      rule; and a LLaMA-7B run's FLOPs, accelerator-days at a stated utilisation and
                      memory per device (chapter 10's calculator);
  scaling_chinchilla  Chinchilla's parametric form fitted to Besiroglu et al.'s 245 runs (shipped with
                      pylib) with the loss and the exclusions the reader chose: the constants, and the
                      compute-optimal N, D and tokens per parameter at a budget (pylib.studies.chinchilla_fit).
"""

import math

import numpy as np

from pylib.studies import chinchilla_fit, scaling
from pylib.systems import flops, memory
from pylib.web import InputError, collect_fields, parse_field, parse_int, parse_number
from pylib.web.check_ops import checked_by

LIMITS = {
    "compute_max": 1e30,  # FLOPs; about 10^4 times the largest training runs cited in the chapter
    "tokens_max": 1e16,
    "mfu_percent_max": 100.0,
    "curve_points": 60,  # points on a drawn parabola
    "fit_starts": 20,  # the page's Chinchilla fit runs L-BFGS from the grid's 20 best starts (the module says why)
}
LOSS_CHOICES = {"huber": "Huber (δ = 10⁻³) on log L", "squares": "least squares on L",
                "likelihood": "the Huber likelihood with a fitted scale (Besiroglu et al.'s table)"}
A100_PEAK = 312e12  # dense 16-bit FLOP/s (Narayanan et al. 2021, section 5; the chapter cites it)
DEFAULT_MFU_PERCENT = 40.0  # an assumption the page states, not a measurement
LLAMA_7B_TOKENS = 1.0e12  # Touvron et al. 2023, Table 2: the 6.7B model's tokens
LLAMA_7B_GPU_HOURS = 82432  # Touvron et al. 2023, Table 15: LLaMA-7B's A100-80GB GPU-hours
CHINCHILLA_PARAMS, CHINCHILLA_TOKENS = 70e9, 1.4e12  # Hoffmann et al. 2022, section 4 (chapter 2 cites it)
LLAMA3_TOKENS, LLAMA3_8B_PARAMS = 15e12, 8e9  # Llama Team 2024, section 1: "about 15T" tokens; the 8B


def _in_range(raw, key, label, lo, hi, lo_open=True):
    """A finite number in (lo, hi] (or [lo, hi]) or InputError with a sentence for the reader."""
    value = parse_field(parse_number, key, label, raw)
    if value > hi or value < lo or (lo_open and value == lo):
        side = "greater than" if lo_open else "at least"
        raise InputError({key: f"{label} must be {side} {lo:g} and at most {hi:g}; got {value:g}."})
    return value


def _series(raw):
    """The page's measured sweep: a list of {budget, n, d, loss_mean} with equal-length lists."""
    if not isinstance(raw, list) or not raw:
        raise InputError({"series": "No measured sweep: run build.py --measure for chapter 14."})
    out = []
    for s in raw:
        try:
            n, d, loss = (np.asarray(s[k], dtype=float) for k in ("n", "d", "loss_mean"))
            budget = float(s["budget"])
        except (KeyError, TypeError, ValueError):
            raise InputError({"series": "The measured sweep is malformed."}) from None
        if not (n.size == d.size == loss.size >= 3) or not np.all(np.isfinite(loss)):
            raise InputError({"series": "Each budget needs at least three finished runs."})
        out.append({"budget": budget, "n": n, "d": d, "loss": loss})
    return out


def _profile(s, opt):
    """One budget's points, and (with a minimum) its fitted parabola in ln N and its optimum."""
    out = {"budget": s["budget"], "n": s["n"].tolist(), "loss": s["loss"].tolist(), "curve": None, "optimum": None}
    if opt is not None:
        c2, c1, c0 = opt["coef_n"]
        x = np.linspace(np.log(s["n"]).min(), np.log(s["n"]).max(), LIMITS["curve_points"])
        out["curve"] = {"n": np.exp(x).tolist(), "loss": (c2 * x * x + c1 * x + c0).tolist()}
        out["optimum"] = {"n": opt["n"], "d": opt["d"], "loss": opt["loss"], "inside": opt["inside"]}
    return out


def _isoflop_choice(args):
    """The measured sweep and the chosen budget's index, or InputError."""
    series = _series(args.get("series"))
    index = args.get("budget_index")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(series):
        raise InputError({"budget_index": "Choose one of the measured budgets."})
    return series, index


def _custom_budget(raw):
    """The reader's budget for the prediction, FLOPs, or InputError."""
    return _in_range(raw, "custom_budget", "The budget", 0.0, LIMITS["compute_max"])


def validate_isoflop(args):
    """{series, budget_index, custom_budget?} -> (series, index, budget or None), or InputError: op check_args's
    check, made of the op's own two checks. The op asks for the budget only once the sweep has given its power
    laws (two budgets with a minimum, as the measured sweep has); the check asks for it whenever it is given."""
    series, index = _isoflop_choice(args)
    custom = args.get("custom_budget")
    return series, index, None if custom is None else _custom_budget(custom)


@checked_by(validate_isoflop)
def isoflop(session, args):
    """{series, budget_index, custom_budget?} -> every budget's profile (points, parabola, optimum), the
    chosen one's at the top level, the toy's power laws with their line over the measured budgets, and
    the prediction at the reader's budget with the line's extension out to it when it lies outside."""
    series, index = _isoflop_choice(args)
    optima = [scaling.isoflop_optimum(s["n"], s["d"], s["loss"]) for s in series]
    family = [_profile(s, opt) for s, opt in zip(series, optima)]
    found = [(s["budget"], opt) for s, opt in zip(series, optima) if opt is not None]
    out = {**family[index], "index": index, "family": family, "laws": None, "prediction": None}
    if len({c for c, _ in found}) >= 2:
        budgets = [c for c, _ in found]
        a, k_n = scaling.fit_power_law(budgets, [opt["n"] for _, opt in found])
        b, k_d = scaling.fit_power_law(budgets, [opt["d"] for _, opt in found])
        lo, hi = min(budgets), max(budgets)
        # a power law is a straight line in log-log: its two ends draw it
        out["laws"] = {"a": a, "k_n": k_n, "b": b, "k_d": k_d, "budgets": budgets,
                       "optima_n": [opt["n"] for _, opt in found],
                       "line": {"c": [lo, hi], "n": [k_n * lo ** a, k_n * hi ** a]}}
        custom = args.get("custom_budget")  # None: no prediction asked for; the page always asks, so empty is refused
        if custom is not None:
            c = _custom_budget(custom)
            n_opt, d_opt = k_n * c ** a, k_d * c ** b
            edge = min(max(c, lo), hi)  # the measured budget nearest c
            out["prediction"] = {"budget": c, "n": n_opt, "d": d_opt, "extrapolated": not lo <= c <= hi,
                                 "decades_out": abs(math.log10(c / edge)),
                                 "extension": None if lo <= c <= hi else {"c": [edge, c], "n": [k_n * edge ** a, n_opt]}}
    return out


def validate_calculator(args):
    """The calculator's form values {compute, mfu_percent, tokens} -> checked numbers, or InputError
    (also what the page asks when the reader leaves a field: op check_args)."""
    return collect_fields({
        "compute": lambda r: _in_range(r, "compute", "The compute budget (FLOPs)", 0.0, LIMITS["compute_max"]),
        "mfu_percent": lambda r: _in_range(r, "mfu_percent", "The utilisation (%)", 0.0, LIMITS["mfu_percent_max"]),
        "tokens": lambda r: _in_range(r, "tokens", "The 7B run's tokens", 1.0, LIMITS["tokens_max"], lo_open=False),
    }, args)


@checked_by(validate_calculator)
def calculator(session, args):
    """{compute, mfu_percent, tokens} -> N_opt, D_opt under each cited fit; a LLaMA-7B run's cost."""
    v = validate_calculator(args)
    c = v["compute"]
    fits = {}
    for name, fit in scaling.CITED_FITS.items():
        n, d = scaling.chinchilla_optimum(fit, c)
        fits[name] = {"n": n, "d": d, "tokens_per_param": d / n, "loss": scaling.chinchilla_loss(fit, n, d)}
    n, d = scaling.rule_of_thumb_optimum(c)
    fits["rule"] = {"n": n, "d": d, "tokens_per_param": d / n, "loss": None}
    shape = memory.LLAMA_7B
    n_total = memory.param_count(shape)
    per_token = flops.shape_flops_per_token(shape)
    total = per_token * v["tokens"]
    mem = memory.training_memory(shape, micro_batch=1)
    return {
        "compute": c, "fits": fits,
        "llama": {"params": n_total, "matmul_params": flops.shape_matmul_params(shape), "tokens": v["tokens"],
                  "flops_per_token": per_token, "flops": total, "six_nd": flops.six_nd(n_total, v["tokens"]),
                  "gpu_days": flops.gpu_days(total, A100_PEAK, v["mfu_percent"] / 100.0),
                  "peak": A100_PEAK, "mfu_percent": v["mfu_percent"], "tokens_per_param": v["tokens"] / n_total,
                  "memory_bytes": mem["total"], "model_state_bytes": mem["model_states"],
                  "activation_bytes": mem["activations"]},
    }


def validate_chinchilla(args):
    """{loss, drop_highest, min_tokens_per_param, compute} -> (loss choice, checked values, the runs kept), or
    InputError, also when the choices leave fewer than five runs (also op check_args's check)."""
    n, d, loss = chinchilla_fit.load_points()
    choice = args.get("loss")
    if choice not in LOSS_CHOICES:
        raise InputError({"loss": "Choose the loss: " + ", or ".join(LOSS_CHOICES.values()) + "."})
    v = collect_fields({
        "drop_highest": lambda r: parse_field(parse_int, "drop_highest", "The number of highest losses left out", r,
                                              0, n.size),
        "min_tokens_per_param": lambda r: _in_range(r, "min_tokens_per_param", "The fewest tokens per parameter kept",
                                                    0.0, 1e6, lo_open=False),
        "compute": lambda r: _in_range(r, "compute", "The compute budget (FLOPs)", 0.0, LIMITS["compute_max"]),
    }, args)
    keep = np.ones(n.size, bool)
    keep[chinchilla_fit.highest_losses(loss, v["drop_highest"])] = False
    culprit = "drop_highest" if keep.sum() < 5 else "min_tokens_per_param"  # the field that empties the selection
    keep &= d / n >= v["min_tokens_per_param"]
    if keep.sum() < 5:
        raise InputError({culprit: f"These choices leave {int(keep.sum())} of the {n.size} runs; the fit has "
                                   "five constants and needs at least five runs."})
    return choice, v, keep


@checked_by(validate_chinchilla)
def chinchilla(session, args):
    """{loss, drop_highest, min_tokens_per_param, compute} -> the fit to the runs left, and its optimum."""
    n, d, loss = chinchilla_fit.load_points()
    choice, v, keep = validate_chinchilla(args)
    if choice == "likelihood":  # one BFGS run from Hoffmann et al.'s constants, as Besiroglu et al. did
        f = chinchilla_fit.fit_likelihood(n[keep], d[keep], loss[keep])
    else:
        f = chinchilla_fit.fit(n[keep], d[keep], loss[keep], loss=choice, keep=LIMITS["fit_starts"])
    n_opt, d_opt = chinchilla_fit.optimum(f, v["compute"])
    return {"loss": choice, "points": int(keep.sum()), "total": int(n.size), "excluded": np.flatnonzero(~keep).tolist(),
            "constants": {k: f[k] for k in ("E", "A", "B", "alpha", "beta")}, "objective": f["objective"],
            "starts_run": f["starts_run"], "compute": v["compute"],
            "optimum": {"n": n_opt, "d": d_opt, "tokens_per_param": d_opt / n_opt, "a": f["beta"] / (f["alpha"] + f["beta"])}}


OPS = {
    "scaling_isoflop": isoflop,
    "scaling_calculator": calculator,
    "scaling_chinchilla": chinchilla,
}
