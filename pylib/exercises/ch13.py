"""Chapter 13's exercises: top-k's bytes on an all-gather, top-k with error feedback as it goes on the wire,
the slowest of eight workers, and the top-k arm with every entry kept (pylib.exercises says how checks work)."""

import dataclasses

import numpy as np

from pylib import model
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, kept, max_error, near, progress
from pylib.systems import compress, queueing, slow_links

# ---------------------------------------------------------------------------
# 1. Predict: the bytes each worker sends in one top-k sync, at W = 8

GATHER_WORKERS = 8


def _n_and_k():
    """The course model's parameter count and the toy's k (one entry in 32, at least 1)."""
    n = model.count_params(model.GPTConfig())
    return n, max(1, round(n * slow_links.SlowConfig().topk_fraction))


def topk_gather_bytes():
    """Each worker's wire bytes in one sync of the toy's top-k payload over W = 8 workers (pylib's count)."""
    n, k = _n_and_k()
    return compress.sync_wire_bytes("all_gather", n, GATHER_WORKERS, compress.topk_bytes(k))


def check_topk_gather_bytes(value, truth):
    n, k = _n_and_k()
    w, payload = GATHER_WORKERS, compress.topk_bytes(k)
    if near(value, payload, 0.01):
        raise Wrong("That is one worker's payload. In an all-gather every payload has to reach every other "
                    "worker, so on a ring each worker also forwards the payloads that pass through it.")
    if near(value, w * payload, 0.01):
        raise Wrong("That counts W payloads: a worker never sends a payload back to where it started, so on the "
                    "ring it sends one fewer.")
    if near(value, compress.sync_wire_bytes("all_reduce", n, w), 0.01):
        raise Wrong("That is the dense ring all-reduce's count for the whole float32 gradient, not top-k's.")
    if near(value, 2 * (w - 1) / w * payload, 0.01):
        raise Wrong("That is a ring all-reduce's 2(W − 1)/W applied to the payload, but top-k payloads cannot be "
                    "added on the way: each worker keeps different positions.")
    if near(value, (w - 1) * k * compress.VALUE_BYTES, 0.01) or near(value, (w - 1) * k * compress.INDEX_BYTES, 0.01):
        raise Wrong("Each kept entry sends its position as well as its value: the receiver has to know where "
                    "it goes.")


# ---------------------------------------------------------------------------
# 2. Implement: top-k with error feedback, as the payload goes on the wire

FEEDBACK_STARTER = '''import numpy as np


def topk_feedback(grad, residual, k):
    """One worker's step of top-k with error feedback, returning the payload it sends.

    grad: (n,) float32, this step's gradient; residual: (n,) float32, what earlier steps held back.
    Returns (positions, values, new_residual):
      positions: (k,) integers, where the k entries of largest magnitude are (any order);
      values: (k,) float32, the entries at those positions;
      new_residual: (n,) float32, everything that was not sent, kept for the next step.
    """
    raise NotImplementedError
'''

FEEDBACK_SOLUTION = '''import numpy as np


def topk_feedback(grad, residual, k):
    v = grad + residual  # this step's gradient and everything held back so far
    positions = np.argpartition(-np.abs(v), k - 1)[:k]  # the k largest magnitudes
    values = v[positions]
    new_residual = v.copy()
    new_residual[positions] = 0.0  # what is sent leaves the residual
    return positions, values, new_residual
'''


def _feedback_cases():
    rng = np.random.default_rng(13)
    n = 40
    f32 = lambda a: np.asarray(a, dtype=np.float32)  # noqa: E731
    ordinary = (f32(rng.normal(size=n)), f32(rng.normal(0, 0.3, n)), 6, "a random gradient and residual, k = 6")
    negative = f32(rng.normal(0, 0.1, n))
    negative[[3, 17, 29]] = [-5.0, -4.0, -3.0]
    negatives = (negative, np.zeros(n, np.float32), 4, "a gradient whose largest entries are negative, k = 4")
    held = f32(rng.normal(0, 0.1, n))
    big_residual = np.zeros(n, np.float32)
    big_residual[[5, 11]] = [2.0, -2.5]  # held back earlier, now the largest
    residual_case = (held, big_residual, 3, "a residual that holds two large entries, k = 3")
    every = (f32(rng.normal(size=n)), f32(rng.normal(0, 0.3, n)), n, f"k = n = {n}")
    one = (f32(rng.normal(size=n)), f32(rng.normal(0, 0.3, n)), 1, "k = 1")
    tie = np.zeros(n, np.float32)
    tie[[2, 9, 20, 33]] = [1.0, -1.0, 1.0, 0.5]
    ties = (tie, np.zeros(n, np.float32), 2, "three entries of magnitude 1 tied for two places, k = 2")
    return ordinary, negatives, residual_case, every, one, ties


def _check_one(fn, grad, residual, k, what):
    v = grad + residual
    out = fn(grad.copy(), residual.copy(), k)
    if not (isinstance(out, (tuple, list)) and len(out) == 3):
        raise Wrong("topk_feedback should return three things: (positions, values, new_residual).")
    pos, values, new = (np.asarray(a) for a in out)
    if pos.shape != (k,) or values.shape != (k,):
        raise Wrong(f"positions and values should each hold k = {k} entries ({what}); yours have shapes "
                    f"{pos.shape} and {values.shape}.")
    if not np.issubdtype(pos.dtype, np.integer):
        raise Wrong(f"positions should be integers (indices into the gradient); yours are {pos.dtype}.")
    if new.shape != v.shape:
        raise Wrong(f"new_residual should have the gradient's shape {v.shape}; yours has {new.shape}.")
    if np.any(pos < 0) or np.any(pos >= v.size) or len(set(pos.tolist())) != k:
        raise Wrong(f"Your positions are not {k} different indices into the gradient ({what}).")
    chosen = np.zeros(v.size, bool)
    chosen[pos] = True
    if k < v.size and np.abs(v[chosen]).min() < np.abs(v[~chosen]).max():
        if k < v.size and np.abs(grad[chosen]).min() >= np.abs(grad[~chosen]).max() and np.any(residual):
            raise Wrong(f"You choose by this step's gradient alone ({what}): the residual must be added first, "
                        "so that an entry held back earlier can win a place.")
        by_value = np.argsort(-v, kind="stable")[:k]
        if set(by_value.tolist()) == set(pos.tolist()):
            raise Wrong(f"You keep the k largest values, not the k largest magnitudes ({what}): a large "
                        "negative entry must be sent too.")
        raise Wrong(f"Your positions are not those of the {k} largest magnitudes of gradient + residual ({what}).")
    if not close(values, v[pos], 1e-6, 1e-7):
        if close(values, grad[pos], 1e-6, 1e-7) and np.any(residual[pos]):
            raise Wrong(f"Your values are the gradient's alone ({what}): what is sent at a position is the "
                        "gradient plus what the residual held there.")
        raise Wrong(f"Your values are not the entries at your positions ({what}).")
    want = v.copy()
    want[pos] = 0.0
    if not close(new, want, 1e-6, 1e-7):
        if close(new, v, 1e-6, 1e-7):
            raise Wrong(f"Your new residual still holds what was sent ({what}): sent entries must leave it, or "
                        "they are sent again and again.")
        forgot = grad.copy()
        forgot[pos] = 0.0
        if close(new, forgot, 1e-6, 1e-7):
            raise Wrong(f"Your new residual drops what the old one held at the positions not sent ({what}): "
                        "keep gradient + residual, minus what was sent.")
        raise Wrong(f"Your new residual is off by up to {max_error(new, want):.3g} ({what}): it should be "
                    "gradient + residual with the sent positions set to 0.")
    if len(np.unique(np.abs(v))) == v.size:  # no ties: pylib's error_feedback_step picks the same entries
        sent, residual_after = compress.error_feedback_step(grad, residual, compress.topk_compressor(k))
        mine = np.zeros(v.size, np.float32)
        mine[pos] = values
        if not (close(mine, sent, 1e-6, 1e-7) and close(new, residual_after, 1e-6, 1e-7)):
            raise Wrong(f"Your payload or residual differs from pylib.systems.compress's top-k with error "
                        f"feedback ({what}).")


def check_topk_feedback(fn):
    for case in _feedback_cases():
        _check_one(fn, *case)
    # many steps: what was sent plus what is held equals what came in
    rng = np.random.default_rng(130)
    n, k, steps = 64, 4, 40
    residual, sent, came = np.zeros(n, np.float32), np.zeros(n, np.float64), np.zeros(n, np.float64)
    for _ in range(steps):
        grad = rng.normal(size=n).astype(np.float32)
        pos, values, residual = fn(grad.copy(), residual.copy(), k)
        residual = np.asarray(residual, dtype=np.float32)
        np.add.at(sent, np.asarray(pos), np.asarray(values, dtype=np.float64))
        came += grad
    drift = max_error(sent + residual, came)
    if drift > 1e-4 * max(1.0, float(np.abs(came).max())):
        raise Wrong(f"Over {steps} steps, what you sent plus your residual differs from the gradients' sum by "
                    f"{drift:.3g}: error feedback should lose nothing.")
    return (f"Right: on random, negative, tied, k = 1 and k = n cases your payload is the k largest magnitudes "
            f"of gradient + residual, and over {steps} steps what you sent plus what you hold equals what came in "
            f"(to {drift:.1e}, float32 rounding).")


# ---------------------------------------------------------------------------
# 3. Predict: the slowest of eight workers

STRAGGLE_WORKERS, STRAGGLE_BASE, STRAGGLE_SPREAD = 8, 1.0, 0.2  # the chapter's base and s (experiments/ch13.py)


def slowest_of_eight():
    """The expected time of a synchronous step with 8 workers, each base + Exponential(mean s)."""
    return queueing.expected_slowest(STRAGGLE_WORKERS, STRAGGLE_BASE, STRAGGLE_SPREAD)


def check_slowest_of_eight(value, truth):
    w, base, s = STRAGGLE_WORKERS, STRAGGLE_BASE, STRAGGLE_SPREAD
    if near(value, base + s, 0.01):
        raise Wrong("That is the average worker's time. The step waits for the slowest of them.")
    if near(value, base + s * np.log(w), 0.01):
        raise Wrong("That is base + s ln W: ln W is how the slowest grows for large W, but the exact "
                    "expectation uses the harmonic number, which is larger.")
    if near(value, base + w * s, 0.01):
        raise Wrong("That adds every worker's mean delay: the workers run at the same time, so the step waits "
                    "for the largest delay, not their sum.")
    if near(value, truth - base, 0.01):
        raise Wrong("That is the slowest worker's delay alone: every worker also takes the base time.")


# ---------------------------------------------------------------------------
# 4. Investigate: the top-k arm with every entry kept

EVERY_STEPS = 20

EVERY_STARTER = '''import dataclasses


def every_entry(cfg):
    """Change one condition of the four-worker top-k run: keep every entry (k = n).

    cfg is the unchanged run's pylib.systems.slow_links.SlowConfig: method "topk", k = round(n *
    cfg.topk_fraction) with topk_fraction = 1/32. Return the changed config; the check runs it
    next to the dense arm of the same seed.
    """
    return dataclasses.replace(cfg, topk_fraction=cfg.topk_fraction)  # change this line only
'''

EVERY_SOLUTION = EVERY_STARTER.replace("topk_fraction=cfg.topk_fraction)  # change this line only",
                                       "topk_fraction=1.0)")


def _run(cfg):
    """A run of cfg: (records, the mean gradient AdamW received at every step, final state)."""
    c = corpus()
    seen = []
    real = slow_links._adamw

    def spy(state, params, opt, groups, grads, lr):
        seen.append({name: g.copy() for name, g in grads.items()})  # before clipping: what arrived
        return real(state, params, opt, groups, grads, lr)

    slow_links._adamw = spy
    try:
        state = slow_links.init_run(cfg, c.train, c.val, c.vocab.size)
        records = slow_links.run_steps(state, cfg.steps)
    finally:
        slow_links._adamw = real
    return records, seen, state


def _kept_run(cfg):
    """A run that is the same for every answer (dense's): its records, gradients and final weights."""
    records, seen, state = _run(cfg)
    return records, seen, state["params"]


def check_every_entry(fn):
    base = slow_links.configured("topk", steps=EVERY_STEPS)
    out = fn(base)
    if not isinstance(out, slow_links.SlowConfig):
        raise Wrong(f"every_entry should return a SlowConfig (the changed cfg); yours returned a "
                    f"{type(out).__name__}.")
    changed = [f.name for f in dataclasses.fields(base) if getattr(out, f.name) != getattr(base, f.name)]
    others = [name for name in changed if name != "topk_fraction"]
    if others:
        raise Wrong(f"You changed {', '.join(others)}: change one condition, the share of entries top-k keeps, "
                    "and leave the rest, so that any difference is that one's.")
    if not changed:
        raise Wrong(f"Your config is the unchanged one: top-k still keeps one entry in "
                    f"{round(1 / base.topk_fraction)}.")
    fraction = out.topk_fraction
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float, np.integer, np.floating)) \
            or not np.isfinite(fraction):
        raise Wrong(f"topk_fraction should be a finite number; yours is {fraction!r}.")
    n = model.count_params(slow_links.model_config(corpus().vocab.size))
    k = max(1, round(n * fraction))
    if k > n:
        raise Wrong(f"Your topk_fraction asks for k = {k} entries of a gradient of n = {n}: every entry is k = n.")
    dense = dataclasses.replace(base, method="dense")
    progress(f"running dense for {EVERY_STEPS} steps")
    rec_d, grads_d, weights_d = kept("ch13.every_entry.dense", lambda: _kept_run(dense))
    progress(f"running your top-k (k = {k}) for {EVERY_STEPS} steps")
    rec_t, grads_t, state_t = _run(out)
    losses_d = [r.get("loss") for r in rec_d[1:]]
    losses_t = [r.get("loss") for r in rec_t[1:]]
    if k < n:
        parted = next((i + 1 for i, (a, b) in enumerate(zip(losses_d, losses_t)) if a != b), None)
        where = f"at step {parted}" if parted else "in its updates"
        raise Wrong(f"Your run keeps k = {k} of n = {n} entries and parts from dense {where}: while any entry is "
                    "left out, the residual holds it back. Keep every entry.")
    loss_diff = max(abs(a - b) for a, b in zip(losses_d, losses_t))
    grad_diff = max(max_error(gt[name], gd[name]) for gd, gt in zip(grads_d, grads_t) for name in gd)
    weight_diff = max(max_error(state_t["params"][name], weights_d[name]) for name in weights_d)
    if loss_diff or grad_diff or weight_diff:  # the chapter's claim: exactly as dense
        raise Wrong(f"With k = n the run should train exactly as dense, but the losses differ by {loss_diff:.3g}, "
                    f"the gradients by {grad_diff:.3g} and the weights by {weight_diff:.3g}.")
    progress(f"running the unchanged top-k for {EVERY_STEPS} steps")
    rec_u = kept("ch13.every_entry.unchanged", lambda: _run(base)[0])
    apart = abs(rec_u[-1]["loss"] - rec_d[-1]["loss"])
    return (f"Right: with k = n = {n}, all {EVERY_STEPS} steps' losses, the mean gradient AdamW received at "
            f"every step and the weights after every step are identical to dense's, bit for bit: the residual "
            f"stays 0 and error feedback has nothing to delay. The unchanged top-k run (k = "
            f"{max(1, round(n * base.topk_fraction))}) is {apart:.3f} nats away from dense by step "
            f"{EVERY_STEPS}. But each worker sent {rec_t[-1]['bytes'] / rec_d[-1]['bytes']:.0f} times dense's bytes: "
            f"every entry as a (position, value) pair, all-gathered.")


EXERCISES = [
    Exercise(
        id="ch13.topk_gather_bytes", kind="predict", title="Top-k's bytes on eight workers",
        task=f"""The toy's top-k keeps one entry in {round(1 / slow_links.SlowConfig().topk_fraction)} of the course
model's gradient, with the chapter's bytes per entry. With W = {GATHER_WORKERS} workers instead of
{slow_links.SlowConfig().workers}, how many bytes does each worker send in one top-k sync? Commit a
number; the check counts them with pylib.""",
        truth=topk_gather_bytes, check=check_topk_gather_bytes, unit="bytes", tolerance=0.01,
        solution=f"""A payload is $k$ (position, value) pairs at {compress.INDEX_BYTES + compress.VALUE_BYTES} bytes
each. Top-k vectors keep different positions on each worker, so they are all-gathered, and on a ring
each worker sends $W - 1$ payloads: its own and the ones it forwards. That is
$(W - 1) \\cdot {compress.INDEX_BYTES + compress.VALUE_BYTES}k$, growing with $W$, while the dense ring's
$2(W-1)/W \\cdot 4n$ barely does.""",
        hints=("Why can't a hop add top-k vectors as they pass, as the ring all-reduce does?",
               "In a ring all-gather, how many payloads does each worker put on its link?"),
        mistakes=(Mistake(str(compress.topk_bytes(_n_and_k()[1])), "one worker's payload"),
                  Mistake(str(compress.sync_wire_bytes("all_reduce", _n_and_k()[0], GATHER_WORKERS)),
                          "dense ring all-reduce's count"),
                  Mistake(str(2 * (GATHER_WORKERS - 1) / GATHER_WORKERS * compress.topk_bytes(_n_and_k()[1])),
                          "cannot be added on the way"),
                  Mistake(str((GATHER_WORKERS - 1) * _n_and_k()[1] * compress.VALUE_BYTES),
                          "position as well as its value")),
    ),
    Exercise(
        id="ch13.topk_with_feedback", kind="implement", title="Top-k with error feedback, on the wire",
        task="""The chapter's `error_feedback_step` returns the dense vector that was sent. Write one worker's step
of top-k with error feedback that returns what actually crosses the link, the positions and values
of the k entries, together with the new residual.""",
        starter=FEEDBACK_STARTER, function="topk_feedback", solution=FEEDBACK_SOLUTION, check=check_topk_feedback,
        hints=("Add the residual to the gradient first; everything else works on that sum.",
               "`np.argpartition(-np.abs(v), k - 1)[:k]` gives the positions of the k largest magnitudes.",
               "The new residual is the sum with the sent positions set to 0."),
        mistakes=(
            Mistake(FEEDBACK_SOLUTION.replace("np.argpartition(-np.abs(v), k - 1)", "np.argpartition(-v, k - 1)"),
                    "largest values, not the k largest magnitudes"),
            Mistake(FEEDBACK_SOLUTION.replace("v = grad + residual", "v = grad.copy()"),
                    "residual must be added first"),
            Mistake(FEEDBACK_SOLUTION.replace("    new_residual[positions] = 0.0  # what is sent leaves the residual\n", ""),
                    "still holds what was sent"),
            Mistake(FEEDBACK_SOLUTION.replace("new_residual = v.copy()", "new_residual = grad.copy()"),
                    "drops what the old one held"),
        )),
    Exercise(
        id="ch13.slowest_of_eight", kind="predict", title="The slowest of eight",
        task=f"""Each of W = {STRAGGLE_WORKERS} workers takes a base time of {STRAGGLE_BASE:g} plus an exponential delay
of mean s = {STRAGGLE_SPREAD:g} for its step, independently, and a synchronous step ends when the
last of them ends. What is the expected length of the step? Commit a number; the check computes it
with pylib.""",
        truth=slowest_of_eight, check=check_slowest_of_eight, tolerance=0.01,
        solution=f"""The expected maximum of $W$ independent exponentials of mean $s$ is $s H_W$, with
$H_W = 1 + \\tfrac12 + \\dots + \\tfrac1W$. So the step takes base + $s H_{{{STRAGGLE_WORKERS}}}$ =
{STRAGGLE_BASE:g} + {STRAGGLE_SPREAD:g} × {queueing.harmonic(STRAGGLE_WORKERS):.3f} ≈
{slowest_of_eight():.3f}, while the average worker takes {STRAGGLE_BASE + STRAGGLE_SPREAD:g}.""",
        hints=("The step waits for the largest of the W delays, not the average one.",
               "The largest of W exponentials of mean s has expectation s (1 + 1/2 + … + 1/W)."),
        mistakes=(Mistake(repr(STRAGGLE_BASE + STRAGGLE_SPREAD), "average worker's time"),
                  Mistake(repr(STRAGGLE_BASE + STRAGGLE_SPREAD * float(np.log(STRAGGLE_WORKERS))), "harmonic number"),
                  Mistake(repr(STRAGGLE_BASE + STRAGGLE_WORKERS * STRAGGLE_SPREAD), "not their sum"),
                  Mistake(repr(STRAGGLE_SPREAD * queueing.harmonic(STRAGGLE_WORKERS)), "also takes the base time")),
    ),
    Exercise(
        id="ch13.topk_every_entry", kind="investigate", title="One condition changed: top-k keeps every entry",
        task=f"""Take the four-worker top-k run with error feedback and change one condition: keep every entry,
k = n. The check runs {EVERY_STEPS} steps of your run next to the dense arm of the same seed and
compares the losses, the mean gradient AdamW receives at every step and the weights after every
step, and counts the bytes each worker sent.""",
        starter=EVERY_STARTER, function="every_entry", solution=EVERY_SOLUTION, check=check_every_entry,
        needs_corpus=True,
        hints=("k is round(n × topk_fraction): what fraction makes it n?",
               "With k = n, what does the residual hold after a step?"),
        mistakes=(
            Mistake(EVERY_STARTER, "unchanged one"),
            Mistake(EVERY_SOLUTION.replace("topk_fraction=1.0)", 'topk_fraction=1.0, method="dense")'),
                    "You changed method"),
            Mistake(EVERY_SOLUTION.replace("topk_fraction=1.0)", "topk_fraction=0.5)"), "parts from dense"),
            Mistake(EVERY_SOLUTION.replace("topk_fraction=1.0)", "topk_fraction=2.0)"), "every entry is k = n"),
        )),
]
