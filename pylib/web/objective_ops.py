"""Chapter 3's page ops (the objective): validation of what the reader typed, and thin calls into
pylib.studies.objective, pylib.loss and pylib.train. No numerics of its own.

Ops (see pylib.web.all_ops): objective_perplexity, objective_denominators, objective_logit_grad, objective_accum_grads,
and two chunked runs, run:objective_pretrain (a short default run whose model the p - y widget can
use) and run:objective_accum (batch x 4 against accumulation 4, step by step). Each op that takes
typed fields checks them in its validate_<op>(args), which the page also asks when the reader leaves
a field (op check_args, @checked_by).
"""

import dataclasses
import math

import numpy as np

from pylib import data, model, train
from pylib.studies import objective
from pylib.web import LIMITS as WEB_LIMITS, InputError, parse_int, parse_number, parse_field
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

LIMITS = {
    "rows_max": 50,  # sequences in the denominator table
    "count_max": 10**9,  # counted tokens per sequence
    "loss_max": 1e12,  # summed loss per sequence (nats)
    "windows": 64,  # validation windows the p - y widget can pick from (pylib.data.eval_windows)
    "top_k_max": 20,
    "pretrain_steps": 200,  # the "trained" model of the p - y widget: the default run, this many steps
    "accum": 4,  # microbatches in the accumulation comparison
    "accum_batch": 8,  # windows per microbatch: batch x 4 is one step on 32 windows
    "accum_steps": 100,
    "accum_eval_interval": 50,
    "micro_counts": 4,  # microbatches in the gradient comparison
    "tau_min": 0.05,  # temperatures of the perplexity widget's unigram model
    "tau_max": 100.0,
}


def _model_cfg(session):
    return dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)


# ---------------------------------------------------------------------------
# The denominator table


def validate_sequences(rows):
    """[{count, loss}] as typed -> (counts, loss_sums), or InputError naming each bad cell."""
    if not isinstance(rows, list):
        raise InputError({"rows": "The table must be a list of rows."})
    if not rows:
        raise InputError({"rows": "Add at least one sequence."})
    if len(rows) > LIMITS["rows_max"]:
        raise InputError({"rows": f"At most {LIMITS['rows_max']} sequences; got {len(rows):,}."})
    counts, losses, errors = [], [], {}
    for i, row in enumerate(rows):
        row = row if isinstance(row, dict) else {}
        try:
            counts.append(parse_field(parse_int, f"count.{i}", f"Sequence {i + 1}'s token count",
                                 row.get("count"), 0, LIMITS["count_max"]))
        except InputError as e:
            errors.update(e.errors)
        try:
            value = parse_field(parse_number, f"loss.{i}", f"Sequence {i + 1}'s summed loss", row.get("loss"))
            if not 0 <= value <= LIMITS["loss_max"]:
                raise InputError({f"loss.{i}": f"Sequence {i + 1}'s summed loss must be between 0 and "
                                               f"{LIMITS['loss_max']:g} nats; got {value:g}."})
            losses.append(value)
        except InputError as e:
            errors.update(e.errors)
    if errors:
        raise InputError(errors)
    for i, (n, s) in enumerate(zip(counts, losses)):
        if n == 0 and s > 0:
            errors[f"loss.{i}"] = f"Sequence {i + 1} has no counted tokens, so its summed loss must be 0."
    if errors:
        raise InputError(errors)
    if sum(counts) == 0:
        raise InputError({"rows": "At least one token must be counted: with none, every mean is 0/0."})
    return counts, losses


def validate_denominators(args):
    """{rows: [{count, loss}]} -> (counts, loss_sums), or InputError (validate_sequences)."""
    return validate_sequences(args.get("rows"))


def denominators(args):
    counts, losses = validate_denominators(args)
    return {**objective.compare_denominators(counts, losses), "counts": counts, "loss_sums": losses}


# ---------------------------------------------------------------------------
# p - y at one position of a real window

_TRAINED = {}  # "params": the model of the last finished objective_pretrain run in this page
_RUNS = {}  # the current chunked run of this module


def validate_perplexity(args):
    """{tau} -> tau, or InputError."""
    tau = parse_field(parse_number, "tau", "Temperature", args.get("tau"))
    if not LIMITS["tau_min"] <= tau <= LIMITS["tau_max"]:
        raise InputError({"tau": f"Temperature must be between {LIMITS['tau_min']:g} and {LIMITS['tau_max']:g}; got {tau:g}."})
    return tau


@checked_by(validate_perplexity)
def perplexity(session, args):
    """{tau} -> the tempered unigram model's distribution, entropy and validation perplexity
    (pylib.studies.objective.tempered_unigram), its tokens sorted from most to least likely."""
    session._need_corpus()
    tau = validate_perplexity(args)
    r = objective.tempered_unigram(session.train_tokens, session.val_tokens, session.vocab.size, tau)
    order = np.argsort(-r["probs"], kind="stable")
    show = lambda i: data.EOS_DISPLAY if i == session.vocab.eos_id else session.vocab.chars[i]
    return {"tau": tau, "tokens": [show(int(i)) for i in order], "probs": r["probs"][order].tolist(),
            "entropy": r["entropy"], "own_ppl": r["own_ppl"], "val_loss": r["val_loss"], "val_ppl": r["val_ppl"],
            "vocab_size": session.vocab.size}


def validate_logit_grad(args):
    """{model, window, position, k} -> (which model, {window, position, k}), or InputError naming every
    bad field ("trained" only once this page has trained its model)."""
    block_size = model.GPTConfig().block_size  # the page's model differs only in its vocabulary
    errors = {}
    which = args.get("model")
    if which not in ("untrained", "trained"):
        errors["model"] = "Choose the untrained or the trained model."
    elif which == "trained" and "params" not in _TRAINED:
        errors["model"] = "There is no trained model in this page yet: choose “trained” and press Show to train it, or choose the untrained one."
    parsed = {}
    for key, label, lo, hi in [("window", "Window", 0, LIMITS["windows"] - 1),
                               ("position", "Position", 0, block_size - 1),
                               ("k", "Top k", 1, LIMITS["top_k_max"])]:
        try:
            parsed[key] = parse_field(parse_int, key, label, args.get(key), lo, hi)
        except InputError as e:
            errors.update(e.errors)
    if errors:
        raise InputError(errors)
    return which, parsed


@checked_by(validate_logit_grad)
def logit_grad(session, args):
    """{model: "untrained" | "trained", window, position, k} -> the top-k rows of p, y and p - y."""
    session._need_corpus()
    cfg = _model_cfg(session)
    which, parsed = validate_logit_grad(args)
    params = _TRAINED["params"] if which == "trained" else model.init_params(cfg, 0)
    x, y = data.eval_windows(session.val_tokens, LIMITS["windows"], cfg.block_size)
    w, t = parsed["window"], parsed["position"]
    logits = model.forward_logits(params, cfg, x[w:w + 1, :t + 1])[0, t]  # (V,): causal, so t+1 tokens suffice
    target = int(y[w, t])
    p, onehot, grad = objective.logit_gradient(logits, target)
    show = lambda i: data.EOS_DISPLAY if i == session.vocab.eos_id else session.vocab.chars[i]
    rows = [{"id": i, "char": show(i), "p": float(p[i]), "y": float(onehot[i]), "grad": float(grad[i]),
             "target": i == target} for i in objective.top_k_rows(p, onehot, grad, parsed["k"])]
    return {
        "context": [show(int(i)) for i in x[w, :t + 1]],
        "target": {"id": target, "char": show(target)},
        "loss": -math.log(max(float(p[target]), 1e-300)),
        "rows": rows,
        "grad_sum": float(grad.sum()),
        "model": which,
        "trained_steps": _TRAINED.get("steps"),
    }


def pretrain_start(session, args):
    session._need_corpus()
    cfg = dataclasses.replace(train.TrainConfig(), steps=LIMITS["pretrain_steps"])
    mcfg = _model_cfg(session)
    _RUNS["pretrain"] = {"cfg": cfg, "model_cfg": mcfg, "state": train.init_train_state(mcfg, cfg)}
    return {"steps": cfg.steps}


def pretrain_chunk(session, args):
    run = _RUNS["pretrain"]
    state, cfg = run["state"], run["cfg"]
    last = None
    done = lambda: state["step"] >= cfg.steps
    for _ in chunk_steps(done):
        rec = train.train_steps(state, run["model_cfg"], cfg, session.train_tokens, session.val_tokens, 1)
        last = rec[-1] if rec else last
    return {"done": done(), "step": state["step"], "steps": cfg.steps,
            "loss": None if last is None else last.get("loss")}


def pretrain_finish(session, args):
    run = _RUNS.pop("pretrain")
    _TRAINED.update(params=run["state"]["params"], steps=run["state"]["step"])
    return {"steps": run["state"]["step"]}


# ---------------------------------------------------------------------------
# Gradient accumulation


def validate_accum_grads(args):
    """{counts: [4 counts as typed]} -> the counts, or InputError naming each bad one."""
    block_size = model.GPTConfig().block_size  # the page's model differs only in its vocabulary
    raw = args.get("counts")
    if not isinstance(raw, list) or len(raw) != LIMITS["micro_counts"]:
        raise InputError({"counts": f"Give {LIMITS['micro_counts']} counts, one per microbatch."})
    counts, errors = [], {}
    for i, value in enumerate(raw):
        try:
            counts.append(parse_field(parse_int, f"count.{i}", f"Microbatch {i + 1}'s counted positions",
                                 value, 0, block_size))
        except InputError as e:
            errors.update(e.errors)
    if errors:
        raise InputError(errors)
    if sum(counts) == 0:
        raise InputError({"counts": "At least one microbatch must count a position."})
    return counts


@checked_by(validate_accum_grads)
def accum_grads(session, args):
    """{counts: [counted targets per window, per microbatch]} -> both reductions' relative errors."""
    session._need_corpus()
    cfg = _model_cfg(session)
    counts = validate_accum_grads(args)
    B = LIMITS["accum_batch"]
    x, y = data.get_batch(session.train_tokens, B * len(counts), cfg.block_size, np.random.default_rng(0))
    params = model.init_params(cfg, 0)
    return {**objective.accumulation_errors(params, cfg, x, y, counts), "windows_per_microbatch": B}


def accum_settings(seed):
    """The two runs of the comparison: (batch x accum, accumulation of accum microbatches)."""
    base = dataclasses.replace(train.TrainConfig(), batch_size=LIMITS["accum_batch"], steps=LIMITS["accum_steps"],
                               eval_interval=LIMITS["accum_eval_interval"], seed=seed)
    return objective.accumulation_pair(base, LIMITS["accum"])


def validate_accum_start(args):
    """{seed} -> the seed, or InputError."""
    return parse_field(parse_int, "seed", "Seed", (args or {}).get("seed"), 0, WEB_LIMITS["seed_max"])


@checked_by(validate_accum_start)
def accum_start(session, args):
    session._need_corpus()
    seed = validate_accum_start(args)
    mcfg = _model_cfg(session)
    big, acc = accum_settings(seed)
    _RUNS["accum"] = {"model_cfg": mcfg, "cfgs": (big, acc), "states": [train.init_train_state(mcfg, c) for c in (big, acc)],
                      "max_diff": 0.0, "records": 0}
    return {"steps": big.steps, "seed": seed, "batch_big": big.batch_size, "batch_micro": acc.batch_size,
            "accum": acc.grad_accum}


def accum_chunk(session, args):
    run = _RUNS["accum"]
    (big, acc), (sb, sa) = run["cfgs"], run["states"]
    out = []
    done = lambda: sb["step"] >= big.steps or sb["diverged"] or sa["diverged"]
    for _ in chunk_steps(done):
        rb = train.train_steps(sb, run["model_cfg"], big, session.train_tokens, session.val_tokens, 1)[-1]
        ra = train.train_steps(sa, run["model_cfg"], acc, session.train_tokens, session.val_tokens, 1)[-1]
        diff = abs(rb["loss"] - ra["loss"]) if rb["loss"] is not None and ra["loss"] is not None else None
        if diff is not None:
            run["max_diff"] = max(run["max_diff"], diff)
        out.append({"step": rb["step"], "loss_big": rb["loss"], "loss_accum": ra["loss"], "diff": diff})
    return {"done": done(), "records": out, "step": sb["step"], "steps": big.steps, "max_diff": run["max_diff"]}


def accum_finish(session, args):
    run = _RUNS.pop("accum")
    return {"steps": run["states"][0]["step"], "max_abs_dloss": run["max_diff"]}


# ---------------------------------------------------------------------------

OPS = {
    "objective_perplexity": perplexity,
    "objective_worked_examples": lambda s, a: {k: [{"count": n, "loss": x} for n, x in rows]
                                               for k, rows in objective.WORKED_EXAMPLES.items()},
    "objective_denominators": checked_by(validate_denominators)(lambda s, a: denominators(a)),
    "objective_logit_grad": logit_grad,
    "objective_pretrain_start": pretrain_start,
    "objective_pretrain_chunk": pretrain_chunk,
    "objective_pretrain_finish": pretrain_finish,
    "objective_accum_grads": accum_grads,
    "objective_accum_start": accum_start,
    "objective_accum_chunk": accum_chunk,
    "objective_accum_finish": accum_finish,
}
