"""Chapter 1's exercises: the loop's pieces, by hand (pylib.exercises says how checks work)."""

import math

import numpy as np

from pylib import data, model, train
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_number, near
from pylib.loss import cross_entropy_forward

# ---------------------------------------------------------------------------
# 1. Implement: the cross-entropy forward (the chapter shows only its backward)

XENT_STARTER = '''import numpy as np


def cross_entropy(logits, targets):
    """Mean next-token cross-entropy in nats.

    logits: (N, V) floats, one row of scores per position.
    targets: (N,) integers, the token that came next at each position.
    Returns one float: the mean over the N positions of -log softmax(logits)[target].
    """
    raise NotImplementedError
'''

XENT_SOLUTION = '''import numpy as np


def cross_entropy(logits, targets):
    z = logits - logits.max(axis=1, keepdims=True)  # shift: exp never overflows
    log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-log_probs[np.arange(len(targets)), targets].mean())
'''


def _xent_cases():
    rng = np.random.default_rng(1)
    ordinary = (rng.normal(0, 2, (12, 65)), rng.integers(0, 65, 12))
    one = (rng.normal(0, 1, (1, 5)), np.array([3]))
    extreme = ordinary[0].copy()
    extreme[0, 7] = 1000.0  # a confident logit: exp(1000) overflows float64
    return ordinary, one, (extreme, ordinary[1])


def check_cross_entropy(fn):
    (logits, t), (logits1, t1), (big, tb) = _xent_cases()
    want = cross_entropy_forward(logits, t)[0]
    got = expect_number(fn(logits.copy(), t.copy()), "cross_entropy's result")
    if not math.isfinite(got):
        raise Wrong("On ordinary logits (values around ±2) your loss is not finite.")
    if not close(got, want, 1e-9):
        if close(got, want * len(t), 1e-9):
            raise Wrong("You sum over the positions: the loss is the mean over them, so yours is N times too large.")
        if close(got, want / math.log(2), 1e-9):
            raise Wrong("Your loss is in bits (log base 2): the course measures it in nats, with the natural log.")
        if close(got, -want, 1e-9):
            raise Wrong("Your loss is negative: it is minus the log-probability of the target.")
        probs = np.exp(logits - logits.max(1, keepdims=True))
        probs /= probs.sum(1, keepdims=True)
        if close(got, -np.log(probs[np.arange(len(t)), np.argmax(logits, 1)]).mean(), 1e-9):
            raise Wrong("You score the most likely token at each position, not the target that came next.")
        raise Wrong(f"On random logits (N = 12, V = 65) your loss is off by {abs(got - want):.3g} nats.")
    got1 = expect_number(fn(logits1.copy(), t1.copy()), "cross_entropy's result")
    if not close(got1, cross_entropy_forward(logits1, t1)[0], 1e-9):
        raise Wrong("Right for 12 positions but not for a single position (N = 1): check your indexing and axes.")
    got_big = expect_number(fn(big.copy(), tb.copy()), "cross_entropy's result")
    if not math.isfinite(got_big):
        raise Wrong("Your softmax overflows at logit 1000: exp(1000) is inf in float64. Subtract each row's "
                    "maximum first; softmax does not change when every logit moves by the same amount.")
    if not close(got_big, cross_entropy_forward(big, tb)[0], 1e-9):
        raise Wrong("Finite, but wrong when one logit is 1000: does your shift by the maximum reach the target's "
                    "logit too?")
    return "Right: it matches pylib.loss.cross_entropy_forward on random logits, on one position, and at logit 1000."


# ---------------------------------------------------------------------------
# 2. Predict: the loss of the untrained model


def loss_at_step_0():
    """The default run's first training loss: initial weights (seed 0) on its first batch."""
    cfg, tc = model.GPTConfig(), train.TrainConfig()
    params = model.init_params(cfg, tc.seed)
    x, y = data.get_batch(corpus().train, tc.batch_size, cfg.block_size, np.random.default_rng([tc.seed, 1]))
    return model.loss_and_grads(params, cfg, x, y)[0]


def check_loss_at_step_0(value, truth):
    V = model.GPTConfig().vocab_size
    if near(value, V, 0.05):
        raise Wrong(f"{V} is the vocabulary's size; the loss is minus the log of a probability, so think about the "
                    "probability an untrained model gives each token.")
    if near(value, math.log2(V), 0.03):
        raise Wrong("That is the answer in bits (log base 2); the course's losses are in nats.")
    if near(value, 1 / V, 0.05):
        raise Wrong("That is a probability; the loss is minus its log.")
    if value <= 0.5:
        raise Wrong("A loss near zero means the model is nearly certain of every next token: an untrained one is not.")


# ---------------------------------------------------------------------------
# 3. Investigate: change one condition, the batch, and compare the step with the unchanged one

DOUBLED_STARTER = '''import numpy as np

from pylib import model


def doubled_batch(params, cfg, x, y):
    """Change one condition of the step: the batch, given twice (2B windows: x's rows, then x's rows again).

    Return (loss, grads) for that batch, from pylib.model.loss_and_grads.
    The unchanged step is model.loss_and_grads(params, cfg, x, y).
    """
    x2, y2 = x, y  # change this line only
    return model.loss_and_grads(params, cfg, x2, y2)
'''

DOUBLED_SOLUTION = '''import numpy as np

from pylib import model


def doubled_batch(params, cfg, x, y):
    x2, y2 = np.concatenate([x, x]), np.concatenate([y, y])  # along the batch axis
    return model.loss_and_grads(params, cfg, x2, y2)
'''


def check_doubled_batch(fn):
    from pylib import optim
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0, np.float64)
    x, y = data.get_batch(corpus().train, 4, cfg.block_size, np.random.default_rng(3))
    loss0, grads0 = model.loss_and_grads(params, cfg, x, y)
    out = fn({k: v.copy() for k, v in params.items()}, cfg, x.copy(), y.copy())
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)):
        raise Wrong("doubled_batch should return (loss, grads), as model.loss_and_grads does.")
    loss, grads = expect_number(out[0], "The loss"), out[1]
    if set(grads) != set(grads0):
        raise Wrong("Your grads do not have the model's parameter names.")
    if close(loss, 2 * loss0, 1e-9):
        raise Wrong("Your loss is twice the unchanged one: you added the two copies' losses, but the loss is a "
                    "mean over all the batch's tokens.")
    if not close(loss, loss0, 1e-12):
        raise Wrong(f"Your loss differs from the unchanged step's by {abs(loss - loss0):.3g} nats: did you change "
                    "more than the batch (the targets must stay paired with their inputs)?")
    worst = max(float(np.abs(grads[k] - grads0[k]).max() / (np.abs(grads0[k]).max() or 1.0)) for k in grads0)
    if worst > 1e-12:
        raise Wrong(f"The gradients differ from the unchanged step's by up to {worst:.3g} (relative): a mean over "
                    "tokens does not see a batch given twice, so they should agree to rounding.")
    # and the update: one AdamW step from each gradient
    steps = []
    for g in (grads0, grads):
        p = {k: v.copy() for k, v in params.items()}
        optim.adamw_step(p, g, optim.adamw_init(p), 1e-2, weight_decay=0.1)
        steps.append(p)
    moved = max(float(np.abs(steps[0][k] - steps[1][k]).max()) for k in params)
    return (f"Right: the loss and every gradient agree with the unchanged step to within rounding (worst "
            f"relative difference {worst:.1e}), and so does the AdamW update (largest difference {moved:.1e}). "
            "The loss is a mean over tokens: giving the same windows twice changes nothing but the cost.")


def _doubled_not_doubled(fn):
    """Refuse an answer that leaves the batch as it was (the check could not tell it from the right one)."""
    seen = {}
    real = model.loss_and_grads

    def spy(params, cfg, x, y, *args, **kwargs):
        seen["rows"] = np.shape(x)[0]
        return real(params, cfg, x, y, *args, **kwargs)

    def wrapped(params, cfg, x, y):
        model.loss_and_grads = spy
        try:
            out = fn(params, cfg, x, y)
        finally:
            model.loss_and_grads = real
        if seen.get("rows") != 2 * np.shape(x)[0]:
            rows = seen.get("rows")
            raise Wrong("Your function did not give model.loss_and_grads a batch of 2B windows"
                        + (f" (it gave {rows})" if rows is not None else " (it did not call it)")
                        + ": change the batch, and nothing else.")
        return out

    return check_doubled_batch(wrapped)


# ---------------------------------------------------------------------------
# 4. Implement: inputs and targets from start positions

PAIRS_STARTER = '''import numpy as np


def windows(tokens, starts, T):
    """Inputs x and targets y for windows starting at the given positions of the token stream.

    tokens: 1-D integer array; starts: (B,) start positions; T: the context length.
    Returns (x, y), each (B, T): y at position t is the token that follows x's token t.
    """
    raise NotImplementedError
'''

PAIRS_SOLUTION = '''import numpy as np


def windows(tokens, starts, T):
    idx = np.asarray(starts)[:, None] + np.arange(T + 1)  # (B, T+1): one more token than the context
    w = np.asarray(tokens)[idx]
    return w[:, :-1], w[:, 1:]
'''


def check_windows(fn):
    tokens = np.arange(100, 160)  # distinct values, so any misalignment shows
    starts = np.array([0, 7, 59 - 9])
    T = 9
    idx = starts[:, None] + np.arange(T + 1)
    want_x, want_y = tokens[idx][:, :-1], tokens[idx][:, 1:]
    out = fn(tokens.copy(), starts.copy(), T)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Wrong("windows should return a pair (x, y).")
    x, y = (np.asarray(a) for a in out)
    if x.shape != (3, T) or y.shape != (3, T):
        raise Wrong(f"x and y should each be (B, T) = (3, {T}); yours are {x.shape} and {y.shape}.")
    if np.array_equal(x, want_x) and np.array_equal(y, want_x):
        raise Wrong("Your targets are the inputs themselves: y must be shifted one token ahead of x.")
    if np.array_equal(x, want_x) and np.array_equal(y[:, :-1], want_x[:, 1:]) and not np.array_equal(y, want_y):
        raise Wrong("Your targets are right except the last position: the window needs T + 1 tokens, and y's last "
                    "target is the token after x's last.")
    if np.array_equal(y, want_x) or np.array_equal(x, want_y):
        raise Wrong("x and y are swapped or shifted the wrong way: the target follows the input.")
    if not np.array_equal(x, want_x):
        raise Wrong("Your inputs x are not the T tokens starting at each start position.")
    if not np.array_equal(y, want_y):
        raise Wrong("Your inputs are right but the targets are not the tokens one position later.")
    return "Right: every target is the token after its input, including the last one, for windows up to the stream's end."


EXERCISES = [
    Exercise(
        id="ch1.cross_entropy", kind="implement", title="The loss, forward",
        task="""The chapter shows cross-entropy's backward. Write its forward: the mean over positions of
minus the log-probability that softmax gives the target. It must stay finite when a logit is 1000.""",
        starter=XENT_STARTER, function="cross_entropy", solution=XENT_SOLUTION, check=check_cross_entropy,
        hints=("log softmax(z)[t] = z[t] − log Σ exp(z_v). Compute it for every row at once, then pick each "
               "row's target with fancy indexing: `a[np.arange(N), targets]`.",
               "exp(1000) is inf. Softmax is unchanged when every logit in a row moves by the same amount, so "
               "subtract the row's maximum first.",
               "The loss is a mean, not a sum: divide by N, the number of positions."),
        mistakes=(
            Mistake(XENT_SOLUTION.replace("z = logits - logits.max(axis=1, keepdims=True)", "z = logits"),
                    "overflows at logit 1000"),
            Mistake(XENT_SOLUTION.replace(".mean()", ".sum()"), "sum over the positions"),
            Mistake(XENT_SOLUTION.replace("return float(", "return float(1 / np.log(2) * "), "bits"),
        )),
    Exercise(
        id="ch1.loss_at_step_0", kind="predict", title="The loss before training",
        task="""Before any update, the model's weights are small random numbers. What loss, in nats, does the
default run record at step 0, on its first batch? Commit a number; the check runs the step.""",
        truth=loss_at_step_0, check=check_loss_at_step_0, unit="nats", tolerance=0.02, needs_corpus=True,
        solution="""Small weights give logits near zero, so softmax is nearly uniform over the V = 65 tokens, and the
loss of each is about −log(1/65) = ln 65 ≈ 4.17 nats. The run's step 0 is a little above it: the
random weights are not exactly uniform, and any departure from uniform costs on average.""",
        hints=("With small weights, every logit is near 0. What probability does softmax give each of the V tokens?",
               "The loss is −log p(target), with the natural log; V is 65 here."),
        mistakes=(Mistake("65", "vocabulary's size"), Mistake("6.02", "bits"), Mistake("0.0154", "probability"),
                  Mistake("0", "nearly certain")),
    ),
    Exercise(
        id="ch1.doubled_batch", kind="investigate", title="One condition changed: the batch given twice",
        task="""Take one step's loss and gradients on a fixed batch, then change one condition: give the same B
windows twice, as one batch of 2B. Edit the one line, run the check, and read what changed against the
unchanged step: the loss, every gradient, and the AdamW update.""",
        starter=DOUBLED_STARTER, function="doubled_batch", solution=DOUBLED_SOLUTION, check=_doubled_not_doubled,
        needs_corpus=True,
        hints=("`np.concatenate([x, x])` joins along the first axis, the batch's.",
               "The targets must be doubled the same way, so each input keeps its own targets."),
        mistakes=(
            Mistake(DOUBLED_STARTER, "did not give model.loss_and_grads a batch of 2B"),
            Mistake(DOUBLED_SOLUTION.replace("np.concatenate([y, y])", "np.concatenate([y, y[::-1]])"),
                    "targets must stay paired"),
            Mistake(DOUBLED_SOLUTION.replace("    return model.loss_and_grads(params, cfg, x2, y2)",
                                             "    loss, grads = model.loss_and_grads(params, cfg, x2, y2)\n"
                                             "    return 2 * loss, grads"),
                    "twice the unchanged one"),
        )),
    Exercise(
        id="ch1.windows", kind="implement", title="Inputs and targets",
        task="""Write the heart of `get_batch` for given start positions: each window's inputs `x` and its
targets `y`, the same tokens shifted by one.""",
        starter=PAIRS_STARTER, function="windows", solution=PAIRS_SOLUTION, check=check_windows,
        hints=("`starts[:, None] + np.arange(n)` is a (B, n) table of positions, one row per window.",
               "T predictions need T + 1 tokens: the last target is the token after the last input."),
        mistakes=(
            Mistake(PAIRS_SOLUTION.replace("return w[:, :-1], w[:, 1:]", "return w[:, :-1], w[:, :-1]"),
                    "targets are the inputs themselves"),
            Mistake(PAIRS_SOLUTION.replace("np.arange(T + 1)", "np.arange(T)").replace(
                "return w[:, :-1], w[:, 1:]", "y = w.copy(); y[:, :-1] = w[:, 1:]\n    return w, y"),
                    "right except the last position"),
            Mistake(PAIRS_SOLUTION.replace("return w[:, :-1], w[:, 1:]", "return w[:, 1:], w[:, :-1]"),
                    "swapped"),
        )),
]
