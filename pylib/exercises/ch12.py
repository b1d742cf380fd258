"""Chapter 12's exercises: the pipeline's bubble, read from a schedule, the tensor-parallel FFN device by device,
and the pipelined model with more microbatches (pylib.exercises says how checks work)."""

import math

import numpy as np

from pylib import data, model, optim
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_number, max_error, near
from pylib.systems import pipeline, tensor_parallel

# ---------------------------------------------------------------------------
# 1. Predict: how much of the device time 1F1B leaves idle

IDLE_STAGES, IDLE_MICROBATCHES, IDLE_RATIO = 8, 12, 3.0  # p, m, t_b / t_f


def one_f_one_b_idle():
    """The share of all device time (percent) that 1F1B at p = 8, m = 12, t_b = 3 t_f leaves idle, by the simulator."""
    sim = pipeline.simulate_pipeline("1f1b", IDLE_STAGES, IDLE_MICROBATCHES, 1, 1.0, IDLE_RATIO)
    return 100.0 * sim["bubble_fraction"]


def check_one_f_one_b_idle(value, truth):
    p, m = IDLE_STAGES, IDLE_MICROBATCHES
    work = 100.0 * (p - 1) / m
    if near(value, work, 0.02):
        raise Wrong("That is the bubble as a share of the work (bubble time over one device's compute time), "
                    "the paper's (p − 1)/m. The question asks for the share of all device time, and the step "
                    "lasts longer than the compute.")
    if near(value, truth / 100.0, 0.05):
        raise Wrong("That looks like a fraction; the answer is asked for in percent.")
    if near(value, work / 100.0, 0.02):
        raise Wrong("That looks like a fraction, and of the work (the paper's (p − 1)/m): the answer is the share "
                    "of all device time, in percent.")
    if value < 1.0:
        raise Wrong("1F1B changes the order of the passes, not the fill and the drain: it saves activation "
                    "memory, not time, so the bubble does not vanish.")


# ---------------------------------------------------------------------------
# 2. Implement: both bubble shares from a schedule's events

BUBBLE_STARTER = '''def bubble_shares(events, stages):
    """The bubble of a pipeline schedule, read from what the devices actually did.

    events: a list of (stage, kind, microbatch, chunk, start, end), one per forward ("F") or
      backward ("B") pass of one microbatch through one chunk on device `stage`; in no
      particular order, and the step need not start at time 0.
    stages: p, the number of devices (0 .. p - 1).
    Every device computes for the same total time. Returns (over_ideal, of_total):
      over_ideal: bubble time over the ideal compute time, the paper's "(p - 1)/(v m) of the work";
      of_total:   the share of all device time (p devices for the whole step) that is idle.
    """
    raise NotImplementedError
'''

BUBBLE_SOLUTION = '''def bubble_shares(events, stages):
    first = min(e[4] for e in events)
    last = max(e[5] for e in events)
    step = last - first  # the step's length, from the first start to the last end
    busy = [0.0] * stages
    for s, kind, mb, chunk, start, end in events:
        busy[s] += end - start
    ideal = sum(busy) / stages  # one device's compute time (they are all equal)
    over_ideal = (step - ideal) / ideal
    of_total = 1.0 - sum(busy) / (stages * step)
    return over_ideal, of_total
'''

BUBBLE_CASES = (  # schedule, p, m, v, t_f, t_b, shift of the clock
    ("gpipe", 4, 8, 1, 1.0, 2.0, 0.0),
    ("1f1b", 3, 5, 1, 1.0, 3.5, 0.0),
    ("interleaved", 2, 4, 2, 1.0, 2.0, 0.0),
    ("gpipe", 4, 1, 1, 1.0, 2.0, 0.0),  # one microbatch: the devices take turns
    ("1f1b", 1, 3, 1, 1.0, 2.0, 0.0),  # one stage: no bubble at all
    ("1f1b", 4, 8, 1, 0.5, 1.0, 7.25),  # a trace whose step starts at t = 7.25
)


def _shares(out, what):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise Wrong(f"bubble_shares should return a pair (over_ideal, of_total); {what} it returned "
                    f"{type(out).__name__ if not isinstance(out, (tuple, list)) else f'{len(out)} values'}.")
    return expect_number(out[0], "over_ideal"), expect_number(out[1], "of_total")


def check_bubble_shares(fn):
    for schedule, p, m, v, tf, tb, shift in BUBBLE_CASES:
        sim = pipeline.simulate_pipeline(schedule, p, m, v, tf, tb)
        events = sorted(((s, k, mb, c, a + shift, b + shift) for s, k, mb, c, a, b in sim["events"]),
                        key=lambda e: (e[0], e[4]))  # device by device, not in time order
        want = sim["bubble_over_ideal"], sim["bubble_fraction"]
        what = f"{schedule}, p = {p}, m = {m}" + (f", v = {v}" if v > 1 else "")
        got = _shares(fn(list(events), p), f"for {what}")
        if close(got, want, 1e-9, 1e-12):
            continue
        if close(got[::-1], want, 1e-9, 1e-12):
            raise Wrong(f"Your two shares are swapped ({what}): over_ideal is the larger one, bubble time over "
                        "one device's compute; of_total is idle time over all device time.")
        if shift:
            at_zero = [(s, k, mb, c, a - shift, b - shift) for s, k, mb, c, a, b in events]
            if close(_shares(fn(at_zero, p), f"for {what}"), want, 1e-9, 1e-12):
                raise Wrong(f"Right on a trace that starts at time 0, wrong on the same trace started at "
                            f"t = {shift:g}: the step lasts from its first start to its last end, not from 0.")
        ideal = m * (tf + tb)
        makespan = ideal * (1 + want[0])
        if close(got[0], (makespan - p * ideal) / (p * ideal), 1e-9, 1e-12):
            raise Wrong(f"Your over_ideal divides by the compute of all p devices together ({what}); the "
                        "ideal is the time one device computes, m (t_f + t_b).")
        if p > 1 and close(got[1], p * want[1], 1e-9, 1e-12):
            raise Wrong(f"Your of_total is p times too large ({what}): the idle time of all the devices is a "
                        "share of all device time, p times the step's length.")
        which = "over_ideal" if not close(got[0], want[0], 1e-9, 1e-12) else "of_total"
        raise Wrong(f"For {what} your {which} is {got[0 if which == 'over_ideal' else 1]:.6g}, which does not "
                    "match the schedule's events.")
    return ("Right: both shares match the simulator's on GPipe, 1F1B and the interleaved schedule, with one "
            "microbatch, one stage, and a trace that starts late. The shares depend on p and v m only, "
            "whatever the schedule and the ratio t_b / t_f.")


# ---------------------------------------------------------------------------
# 3. Implement: the tensor-parallel FFN, what each device holds before each all-reduce

TP_STARTER = '''import numpy as np


def tp_ffn(x, w1, w2, dy, devices):
    """The FFN y = relu(x W1) W2 split over `devices` devices, forward and backward.

    x: (B, C) inputs; w1: (C, F); w2: (F, C2); dy: (B, C2), the upstream gradient dL/dy.
    Device d holds the hidden units np.array_split(np.arange(F), devices)[d]: those columns of
    W1 and those rows of W2.
    Returns (partial_y, partial_dx), two lists with one array per device: what device d holds
    just before the forward all-reduce ((B, C2)) and just before the backward one ((B, C)).
    """
    raise NotImplementedError
'''

TP_SOLUTION = '''import numpy as np


def tp_ffn(x, w1, w2, dy, devices):
    partial_y, partial_dx = [], []
    for units in np.array_split(np.arange(w1.shape[1]), devices):
        a = x @ w1[:, units]  # (B, F/devices): this device's hidden units, from the whole input
        h = np.maximum(a, 0.0)
        partial_y.append(h @ w2[units])  # its rows of W2: a partial sum of y
        dh = (dy @ w2[units].T) * (a > 0)  # dy is the same on every device
        partial_dx.append(dh @ w1[:, units].T)  # a partial sum of dx
    return partial_y, partial_dx
'''


def _tp_reference(x, w1, w2, dy, devices):
    ys, dxs = [], []
    for units in np.array_split(np.arange(w1.shape[1]), devices):
        a = x @ w1[:, units]
        ys.append(np.maximum(a, 0.0) @ w2[units])
        dxs.append(((dy @ w2[units].T) * (a > 0)) @ w1[:, units].T)
    return ys, dxs


def _tp_cases():
    ex = tensor_parallel
    seed = (ex.EXAMPLE_X[None, :], ex.EXAMPLE_W1, ex.EXAMPLE_W2, ex.EXAMPLE_DY[None, :], 2,
            "the chapter's two-device FFN, x = [2, −1]")
    rng = np.random.default_rng(12)
    B, C, F = 5, 6, 12
    ordinary = (rng.normal(size=(B, C)), rng.normal(size=(C, F)), rng.normal(size=(F, C)), rng.normal(size=(B, C)),
                3, "B = 5, C = 6, F = 12 over 3 devices")
    uneven = (rng.normal(size=(3, 4)), rng.normal(size=(4, 10)), rng.normal(size=(10, 5)), rng.normal(size=(3, 5)),
              4, "F = 10 hidden units over 4 devices, 3, 3, 2 and 2")
    one = (rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(4, 3)), rng.normal(size=(2, 3)),
           1, "one device")
    return seed, ordinary, uneven, one


def check_tp_ffn(fn):
    for x, w1, w2, dy, d, what in _tp_cases():
        out = fn(x.copy(), w1.copy(), w2.copy(), dy.copy(), d)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise Wrong("tp_ffn should return a pair of lists (partial_y, partial_dx).")
        want_y, want_dx = _tp_reference(x, w1, w2, dy, d)
        if w1 is tensor_parallel.EXAMPLE_W1:  # the chapter's example: pylib's own device-by-device numbers
            devs = tensor_parallel.worked_example()["devices"]
            want_y = [np.array([dv["partial_y"]]) for dv in devs]
            want_dx = [np.array([dv["partial_dx"]]) for dv in devs]
        for got, want, name in ((out[0], want_y, "partial_y"), (out[1], want_dx, "partial_dx")):
            if not isinstance(got, (list, tuple)) or len(got) != d:
                raise Wrong(f"{name} should be a list with one array per device ({d} for {what}).")
            got = [np.asarray(g, dtype=float) for g in got]
            if any(g.shape != w.shape for g, w in zip(got, want)):
                raise Wrong(f"Each device's {name} should have shape {want[0].shape} for {what}; yours are "
                            f"{[g.shape for g in got]}.")
            if all(close(g, w, 1e-9, 1e-12) for g, w in zip(got, want)):
                continue
            total = sum(want)
            if d > 1 and all(close(g, total, 1e-9, 1e-12) for g in got):
                raise Wrong(f"Every device's {name} is the whole sum ({what}): return what each device holds "
                            "before the all-reduce, its partial sum.")
            if d > 1 and close(sum(got), total, 1e-9, 1e-12):
                raise Wrong(f"Your {name} add up to the right total but the devices' shares are not their own "
                            f"hidden units' ({what}): device d holds np.array_split(np.arange(F), devices)[d].")
            if name == "partial_dx":
                no_mask = [(dy @ w2[u].T) @ w1[:, u].T for u in np.array_split(np.arange(w1.shape[1]), d)]
                if all(close(g, w, 1e-9, 1e-12) for g, w in zip(got, no_mask)):
                    raise Wrong(f"Your partial input gradients ignore the relu ({what}): a hidden unit whose "
                                "input was negative gave 0 in the forward pass and passes no gradient back.")
            F = w1.shape[1]
            if F % d and not close(sum(got), total, 1e-9, 1e-12):
                size = F // d
                dropped = [slice(i * size, (i + 1) * size) for i in range(d)]
                if name == "partial_y":
                    short = [np.maximum(x @ w1[:, s], 0.0) @ w2[s] for s in dropped]
                    if all(close(g, w, 1e-9, 1e-12) for g, w in zip(got, short)):
                        raise Wrong(f"Your devices lose hidden units when their number does not divide F ({what}): "
                                    "every unit must be on some device.")
            raise Wrong(f"Your {name} is off by up to {max(max_error(g, w) for g, w in zip(got, want)):.3g} for "
                        f"{what}: does each device use the whole input with its own columns of W1, then its own "
                        "rows of W2?")
    return ("Right: on the chapter's example and on random, uneven and one-device splits, every device's "
            "partial sums match, and they add up to the unsplit FFN's y and dx. The forward's all-reduce "
            "comes after W2, the backward's after W1: two in all, none for the weight gradients.")


# ---------------------------------------------------------------------------
# 4. Investigate: the pipelined model with more microbatches

PIPE_STAGES, PIPE_MICROBATCHES, PIPE_WINDOWS = 4, 2, 8

MICRO_STARTER = '''from pylib.systems import pipeline


def more_microbatches(params, cfg, x, y):
    """Change one condition of the pipelined step: more microbatches (the batch x has 8 windows).

    The unchanged step is
        pipeline.pipeline_loss_and_grads(params, cfg, x, y, 4, 2, "1f1b")
    (4 stages, 2 microbatches, the 1F1B schedule). Return its (loss, grads) with more microbatches.
    """
    loss, grads, order = pipeline.pipeline_loss_and_grads(params, cfg, x, y, 4, 2, "1f1b")  # change this line only
    return loss, grads
'''

MICRO_SOLUTION = MICRO_STARTER.replace('(params, cfg, x, y, 4, 2, "1f1b")  # change this line only',
                                       '(params, cfg, x, y, 4, 8, "1f1b")')


def _rel_worst(grads, want):
    return max(float(np.abs(grads[k] - want[k]).max() / (np.abs(want[k]).max() or 1.0)) for k in want)


def check_more_microbatches(fn):
    cfg = model.GPTConfig(n_layer=4)
    params = model.init_params(cfg, 0, np.float64)
    x, y = data.eval_windows(corpus().val, PIPE_WINDOWS, cfg.block_size)
    seen = []
    real = pipeline.pipeline_loss_and_grads

    def spy(params, cfg, x, y, stages, microbatches, schedule="1f1b", chunks=1):
        seen.append((stages, microbatches, schedule, chunks, np.shape(x)[0]))
        return real(params, cfg, x, y, stages, microbatches, schedule, chunks)

    pipeline.pipeline_loss_and_grads = spy
    try:
        out = fn({k: v.copy() for k, v in params.items()}, cfg, x.copy(), y.copy())
    finally:
        pipeline.pipeline_loss_and_grads = real
    if not seen:
        raise Wrong("Your function did not call pipeline.pipeline_loss_and_grads (call it by that name, as the "
                    "starter does): change its microbatches, and nothing else.")
    stages, m, schedule, chunks, rows = seen[-1]
    if (stages, schedule, chunks) != (PIPE_STAGES, "1f1b", 1):
        raise Wrong(f"You changed the stages, the schedule or the chunks (you ran {stages} stages, {schedule!r}, "
                    f"{chunks} chunk{'s' * (chunks != 1)}): change the microbatches only, so that any difference "
                    "is theirs.")
    if m == PIPE_MICROBATCHES:
        raise Wrong(f"Your function still runs {m} microbatches: the condition to change is their number.")
    if m < PIPE_MICROBATCHES:
        raise Wrong(f"You ran {m} microbatch{'es' * (m != 1)}, fewer than the unchanged {PIPE_MICROBATCHES}: "
                    "the task is more.")
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)):
        raise Wrong("more_microbatches should return (loss, grads), the first two of what "
                    "pipeline_loss_and_grads returns.")
    loss0, grads0, _ = real(params, cfg, x, y, PIPE_STAGES, PIPE_MICROBATCHES, "1f1b")
    loss, grads = expect_number(out[0], "The loss"), out[1]
    if set(grads) != set(grads0):
        raise Wrong("Your grads do not have the model's parameter names.")
    if rows != PIPE_WINDOWS or not close(loss, loss0, 1e-12):
        raise Wrong(f"Your loss differs from the unchanged step's by {abs(loss - loss0):.3g} nats: did you "
                    "change more than the microbatches (the batch itself must stay the same 8 windows)?")
    worst = _rel_worst(grads, grads0)
    if worst > 1e-12:
        raise Wrong(f"Your gradients differ from the unchanged step's by up to {worst:.3g} of a tensor's "
                    "largest entry; in float64 they should agree to rounding.")
    steps = []
    for g in (grads0, grads):
        p = {k: v.copy() for k, v in params.items()}
        optim.adamw_step(p, g, optim.adamw_init(p), 1e-2, weight_decay=0.1)
        steps.append(p)
    moved = max(float(np.abs(steps[0][k] - steps[1][k]).max()) for k in params)
    before = pipeline.simulate_pipeline("1f1b", PIPE_STAGES, PIPE_MICROBATCHES)
    after = pipeline.simulate_pipeline("1f1b", PIPE_STAGES, m)
    return (f"Right: with {m} microbatches the loss and every gradient agree with the unchanged step's to "
            f"rounding (worst {worst:.1e} of a tensor's largest entry), and so does the AdamW update "
            f"(largest difference {moved:.1e}). What changed is the time: the simulator's bubble goes from "
            f"{before['bubble_over_ideal']:.0%} to {after['bubble_over_ideal']:.0%} of the work, and from "
            f"{before['bubble_fraction']:.0%} to {after['bubble_fraction']:.0%} of all device time. Stage 1 "
            f"holds at most {after['peak_in_flight'][0]} microbatches' activations at once, each "
            f"{PIPE_MICROBATCHES}/{m} the size of the unchanged step's.")


EXERCISES = [
    Exercise(
        id="ch12.one_f_one_b_idle", kind="predict", title="How much of the step is idle",
        task=f"""A pipeline of p = {IDLE_STAGES} stages runs m = {IDLE_MICROBATCHES} microbatches on the 1F1B
schedule, with each backward pass {IDLE_RATIO:g} times as long as a forward. What share of all the
device time (p devices for the whole step) is idle, in percent? Commit a number; the check runs the
simulator.""",
        truth=one_f_one_b_idle, check=check_one_f_one_b_idle, unit="%", tolerance=0.02,
        solution=f"""The step lasts $(m + p - 1)(t_f + t_b)$ and each device computes for $m(t_f + t_b)$ of it, so
the idle share of all device time is $(p - 1)/(m + p - 1)$ = {IDLE_STAGES - 1}/{IDLE_MICROBATCHES + IDLE_STAGES - 1}
≈ {(IDLE_STAGES - 1) / (IDLE_MICROBATCHES + IDLE_STAGES - 1):.1%}. 1F1B's order does not
change it (it saves memory, not time), and neither does the ratio $t_b/t_f$, which stretches the
compute and the bubble alike. The other way to state the same bubble, over the ideal compute time,
is $(p-1)/m$ = {IDLE_STAGES - 1}/{IDLE_MICROBATCHES} ≈ {(IDLE_STAGES - 1) / IDLE_MICROBATCHES:.1%} "of the work".""",
        hints=("The fill takes p − 1 forward slots and the drain p − 1 backward slots, whatever the order in "
               "between.",
               "How long does the whole step last, in units of t_f + t_b? How long does each device compute?"),
        mistakes=(Mistake("58.33", "share of the work"), Mistake("0.368", "in percent"),
                  Mistake("0", "saves activation memory, not time")),
    ),
    Exercise(
        id="ch12.bubble_shares", kind="implement", title="The bubble, read from a schedule",
        task="""The chapter's simulator computes the bubble from p, m and the pass times. Compute it instead from
what the devices did: given every event of a step, return both shares, the bubble over the ideal
compute time and the idle share of all device time.""",
        starter=BUBBLE_STARTER, function="bubble_shares", solution=BUBBLE_SOLUTION, check=check_bubble_shares,
        hints=("The step lasts from the first event's start to the last event's end; a trace need not start at 0.",
               "Add up each device's busy time from its events. The ideal is one device's compute time.",
               "All device time is p times the step's length; the idle part is that minus every device's busy time."),
        mistakes=(
            Mistake(BUBBLE_SOLUTION.replace("return over_ideal, of_total", "return of_total, over_ideal"),
                    "shares are swapped"),
            Mistake(BUBBLE_SOLUTION.replace("step = last - first", "step = last"), "started at t ="),
            Mistake(BUBBLE_SOLUTION.replace("ideal = sum(busy) / stages", "ideal = sum(busy)"),
                    "compute of all p devices together"),
            Mistake(BUBBLE_SOLUTION.replace("of_total = 1.0 - sum(busy) / (stages * step)",
                                            "of_total = stages - sum(busy) / step"),
                    "p times too large"),
        )),
    Exercise(
        id="ch12.tp_ffn", kind="implement", title="The tensor-parallel FFN, device by device",
        task="""The chapter follows $[2, -1]$ through a two-device FFN by hand. Write it for any number of devices
and a batch of inputs: W1 split by column, W2 by row. Return what each device holds just before each
of the two all-reduces, its partial output and its partial input gradient, so the check can see the
split itself, not only the sums.""",
        starter=TP_STARTER, function="tp_ffn", solution=TP_SOLUTION, check=check_tp_ffn,
        hints=("Device d's hidden units are a block of columns of W1 and the same block of rows of W2; "
               "`np.array_split(np.arange(F), devices)` gives the blocks, uneven ones included.",
               "The relu acts on each hidden unit alone, so a device can apply it to its own units without "
               "talking to anyone.",
               "Backward: dh is dy times your rows of W2 (transposed), masked where the unit's input was "
               "negative; the partial dx is dh times your columns of W1 (transposed)."),
        mistakes=(
            Mistake(TP_SOLUTION.replace("* (a > 0)", ""), "ignore the relu"),
            Mistake(TP_SOLUTION.replace(
                "    for units in np.array_split(np.arange(w1.shape[1]), devices):",
                "    size = w1.shape[1] // devices\n    for d in range(devices):\n"
                "        units = np.arange(d * size, (d + 1) * size)"), "lose hidden units"),
            Mistake(TP_SOLUTION.replace("    return partial_y, partial_dx",
                                        "    return [sum(partial_y)] * devices, [sum(partial_dx)] * devices"),
                    "is the whole sum"),
            Mistake(TP_SOLUTION.replace("for units in np.array_split(np.arange(w1.shape[1]), devices):",
                                        "for units in (np.arange(w1.shape[1])[d::devices] for d in range(devices)):"),
                    "not their own hidden units"),
        )),
    Exercise(
        id="ch12.more_microbatches", kind="investigate", title="One condition changed: more microbatches",
        task="""Run the 4-layer model's pipelined step on 8 validation windows, 4 stages, 1F1B, and change one
condition: the number of microbatches, from 2 to more. The check compares your step with the
unchanged one, the loss, every gradient and the AdamW update, and shows what the change bought.""",
        starter=MICRO_STARTER, function="more_microbatches", solution=MICRO_SOLUTION,
        check=check_more_microbatches, needs_corpus=True,
        hints=("The fifth argument of pipeline_loss_and_grads is the number of microbatches; the batch of 8 must "
               "split evenly into them.",
               "Each microbatch's loss is divided by the token count of the whole batch: what should that do to "
               "the summed gradients?"),
        mistakes=(
            Mistake(MICRO_STARTER, "still runs 2 microbatches"),
            Mistake(MICRO_STARTER.replace('(params, cfg, x, y, 4, 2, "1f1b")', '(params, cfg, x, y, 2, 4, "1f1b")'),
                    "changed the stages, the schedule or the chunks"),
            Mistake(MICRO_STARTER.replace('(params, cfg, x, y, 4, 2, "1f1b")', '(params, cfg, x[:4], y[:4], 4, 4, "1f1b")'),
                    "batch itself must stay the same"),
            Mistake(MICRO_STARTER.replace('(params, cfg, x, y, 4, 2, "1f1b")', '(params, cfg, x, y, 4, 3, "1f1b")'),
                    "must split evenly"),
        )),
]
