"""Chapter 4's worker ops: nudge one weight and compare slopes, and a streamed check of every tensor.

The model is the course's default config at its seed-0 initialisation, in float64, on a fixed real
batch of the training text (pylib.studies.gradcheck.fixed_batch): the same numbers in every page and in
CPython. The full check can also run at perturbed weights (pylib.studies.gradcheck.perturbed_params:
LayerNorm gains away from 1, biases away from 0), where a backward that mishandles a gain or a
bias shows; the nudge widget always uses the initial weights. Reader input is validated here (pylib.web's parsers), never in JavaScript.
"""

import math
import time


from pylib import model, web
from pylib.studies import backprop_order, gradcheck
from pylib.web import InputError, parse_int, parse_number
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

BATCH = (2, 64)  # B, T of the fixed batch: every position row of wpe gets a gradient
SEED = 0
H_MAX = 1.0  # a larger step measures the loss far from the weight, not its slope

WEIGHTS = {"init": "the initial weights", "perturbed": "perturbed weights (LayerNorm gains and biases drawn away from 1 and 0)"}

_state = {}  # per weights ("init", "perturbed"): the float64 model, batch and grads, built once per page; "check": the running check


def _field(field, label, parse):
    """Run parse(label); re-key its InputError by the form field's name."""
    try:
        return parse(label)
    except InputError as e:
        raise InputError({field: next(iter(e.errors.values()))}) from None


def _setup(session, weights="init"):
    """The float64 model at `weights`, the fixed batch and its gradients, for the session's vocabulary."""
    session._need_corpus()
    if weights not in _state:
        cfg = model.GPTConfig(vocab_size=session.vocab.size)
        params = gradcheck.weights_at(cfg, SEED, weights)
        x, y = gradcheck.fixed_batch(session.train_tokens, *BATCH)
        loss, grads = model.loss_and_grads(params, cfg, x, y)
        _state[weights] = dict(cfg=cfg, params=params, x=x, y=y, grads=grads, loss=float(loss))
    return _state[weights]


def validate_weights(raw):
    """{weights: "init" | "perturbed"} (missing: "init") -> the key, or InputError."""
    weights = (raw or {}).get("weights", "init")
    if weights not in WEIGHTS:
        shown = str(weights) if len(str(weights)) <= 40 else str(weights)[:40] + "…"
        raise InputError({"weights": f"Weights must be the initial or the perturbed ones; got {shown!r}."})
    return weights


def param_list(session):
    """[{name, shape, size}] of the page's model, and the batch it is checked on."""
    s = _setup(session)
    return {"params": [{"name": n, "shape": list(p.shape), "size": int(p.size)} for n, p in s["params"].items()],
            "B": BATCH[0], "T": BATCH[1], "seed": SEED, "loss": s["loss"], "h_default": gradcheck.H_DEFAULT,
            "h_max": H_MAX, "subset": gradcheck.SUBSET}


def _page_params():
    """{name: shape} of the page's model (the page's vocabulary; no weights made, nothing loaded beyond it)."""
    web.SESSION._need_vocab()
    return model.param_shapes(model.GPTConfig(vocab_size=web.SESSION.vocab.size))


def validate_nudge(raw, params=None):
    """Form values {name, index, h} -> (name, flat index, h), or InputError naming each bad field.
    params: {name: array or shape}; by default the page's model's shapes (what the page asks when the
    reader leaves a field: op check_args)."""
    params = _page_params() if params is None else params
    errors, out = {}, {}
    name = raw.get("name")
    name = name.strip() if isinstance(name, str) else name
    if not name:
        errors["name"] = "Parameter is empty: pick one from the list."
    elif name not in params:
        shown = str(name) if len(str(name)) <= 40 else str(name)[:40] + "…"
        errors["name"] = f"There is no parameter called {shown!r}: pick one from the list."
    else:
        out["name"] = name
        p = params[name]
        size = p.size if hasattr(p, "size") else math.prod(p)
        try:
            out["index"] = _field("index", "Index", lambda label: parse_int(raw.get("index"), label, 0, size - 1))
        except InputError as e:
            errors.update(e.errors)
    try:
        h = _field("h", "Step size h", lambda label: parse_number(raw.get("h"), label))
        if not 0 < h <= H_MAX:
            errors["h"] = f"Step size h must be greater than 0 and at most {H_MAX:g}; got {h:g}."
        out["h"] = h
    except InputError as e:
        errors.update(e.errors)
    if errors:
        raise InputError(errors)
    return out["name"], out["index"], out["h"]


@checked_by(validate_nudge)
def nudge(session, raw):
    """Nudge one weight by ±h: both slopes, their relative error, and the error at every h of the sweep."""
    s = _setup(session)
    name, index, h = validate_nudge(raw, s["params"])
    r = gradcheck.nudge(s["params"], s["cfg"], s["x"], s["y"], name, index, h, grads=s["grads"])
    sweep = gradcheck.error_vs_h(s["params"], s["cfg"], s["x"], s["y"], name, index, grads=s["grads"])
    # A log axis cannot show 0 (an exact match, which happens when the weight has no effect).
    r["sweep"] = {"h": list(gradcheck.H_SWEEP), "rel_error": [e if e > 0 else None for e in sweep]}
    r.update(name=name, flat_index=index, h=h, abs_error=abs(r["analytic"] - r["numeric"]))
    return r


# ---------------------------------------------------------------------------
# The full check, one tensor at a time (worker: "run:backprop_check")


@checked_by(validate_weights)
def check_start(session, raw):
    """A fresh check of every tensor at {weights}: SUBSET random elements of large tensors, all of small ones."""
    weights = validate_weights(raw)
    s = _setup(session, weights)
    _state["check"] = {"names": list(s["params"]), "next": 0, "rows": [], "seconds": 0.0, "weights": weights}
    return {"tensors": len(s["params"]), "subset": gradcheck.SUBSET, "h": gradcheck.H_DEFAULT,
            "B": BATCH[0], "T": BATCH[1], "weights": weights}


def check_chunk(session, raw):
    """Check tensors for about LIMITS['chunk_seconds'] (at least one); returns the new rows."""
    c = _state.get("check")
    if c is None:
        raise RuntimeError("no check running: start one first")
    s = _state[c["weights"]]
    new, t0 = [], time.perf_counter()
    done = lambda: c["next"] >= len(c["names"])
    for _ in chunk_steps(done):
        i = c["next"]
        row = gradcheck.check_tensor(s["params"], s["cfg"], s["x"], s["y"], c["names"][i], s["grads"],
                                     subset=gradcheck.SUBSET, seed=SEED + i)
        c["next"] += 1
        c["rows"].append(row)
        new.append(row)
    c["seconds"] += time.perf_counter() - t0
    return {"rows": new, "done": done(), "checked": c["next"], "tensors": len(c["names"])}


def check_finish(session, raw):
    """The summary: the largest error over the tensors checked, and whether every tensor was."""
    c = _state.get("check")
    if c is None:
        raise RuntimeError("no check running: start one first")
    rows = c["rows"]
    worst = max(rows, key=lambda r: r["max"]) if rows else None
    return {"tensors_checked": len(rows), "tensors": len(c["names"]), "complete": len(rows) == len(c["names"]),
            "elements_checked": sum(r["checked"] for r in rows), "seconds": c["seconds"],
            "max": worst["max"] if worst else None, "worst_tensor": worst["name"] if worst else None,
            "weights": c["weights"]}


@checked_by(validate_weights)
def order(session, raw):
    """{weights} -> the order the backward pass finishes each gradient (pylib.studies.backprop_order),
    on the fixed batch at the initial or perturbed weights."""
    s = _setup(session, validate_weights(raw))
    return {**backprop_order.backward_order(s["params"], s["cfg"], s["x"], s["y"]),
            "n_layer": s["cfg"].n_layer, "B": BATCH[0], "T": BATCH[1]}


OPS = {
    "backprop_order": order,
    "backprop_params": lambda s, a: param_list(s),
    "backprop_nudge": nudge,
    "backprop_check_start": check_start,
    "backprop_check_chunk": lambda s, a: check_chunk(s, a),
    "backprop_check_finish": lambda s, a: check_finish(s, a),
}
