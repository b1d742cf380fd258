"""Chapter 3's exercises: what the loss is divided by, perplexity, the per-sequence gradient, and
gradient accumulation as one changed condition (pylib.exercises says how checks work)."""

import math

import numpy as np

from pylib import data, model
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_array, expect_number, near
from pylib.loss import cross_entropy_backward, cross_entropy_forward

# ---------------------------------------------------------------------------
# 1. Predict: the loss of a padded batch

# Per-position losses of two sequences padded to length 4; None marks a padded position. The forward
# computes the padded positions too: their losses are PAD_LOSS, and the mask leaves them out.
PADDED = ((2.0, 3.0, None, None), (1.0, 0.5, 0.5, 1.0))
PAD_LOSS = 6.0


def _padded_batch():
    """Logits (2, 4, 2), targets and mask whose per-position cross-entropies are PADDED's (PAD_LOSS at pads)."""
    losses = np.array([[PAD_LOSS if v is None else v for v in row] for row in PADDED])
    mask = np.array([[v is not None for v in row] for row in PADDED], dtype=np.float64)
    p = np.exp(-losses)  # the target's probability, so that -log p is the loss
    logits = np.stack([np.log(p), np.log1p(-p)], axis=-1)  # two tokens; the target is token 0
    return logits, np.zeros(losses.shape, dtype=np.int64), mask, losses


def padded_loss():
    logits, targets, mask, _ = _padded_batch()
    return cross_entropy_forward(logits, targets, mask)[0]


def check_padded_loss(value, truth):
    _, _, mask, losses = _padded_batch()
    counted = losses * mask
    if near(value, np.mean([row[m > 0].mean() for row, m in zip(losses, mask)]), 0.01):
        raise Wrong("You average per sequence, not per token: that is the mean of sequence means, in which each "
                    "token of the short sequence weighs more.")
    if near(value, losses.mean(), 0.01):
        raise Wrong("You scored the padded positions: the mask leaves them out of the sum.")
    if near(value, counted.sum() / mask.size, 0.01):
        raise Wrong("Your sum leaves the padding out but your denominator counts the padded positions: the default "
                    "denominator is the number of counted tokens.")
    if near(value, counted.sum(), 0.01):
        raise Wrong("That is the sum of the counted losses; the loss divides it by a denominator.")


# ---------------------------------------------------------------------------
# 2. Predict: perplexity is a geometric mean

PPL_POSITIONS = 10  # half certain, half uniform


def _half_certain():
    V = model.GPTConfig().vocab_size
    n = PPL_POSITIONS
    logits = np.zeros((n, V))
    targets = np.arange(n) % V
    certain = np.arange(n) < n // 2
    logits[certain, targets[certain]] = 1000.0  # probability 1 to the target, to float64's precision
    return logits, targets, V


def perplexity():
    logits, targets, _ = _half_certain()
    return math.exp(cross_entropy_forward(logits, targets)[0])


def check_perplexity(value, truth):
    V = model.GPTConfig().vocab_size
    if near(value, (1 + V) / 2, 0.02):
        raise Wrong("That is the arithmetic mean of 1/p over the positions; perplexity is e to the mean of "
                    "-log p, a geometric mean.")
    if near(value, V, 0.02):
        raise Wrong(f"{V} is the perplexity of the uniform positions alone; the certain ones count too.")
    if near(value, math.log(truth), 0.02):
        raise Wrong("That is the loss in nats; perplexity is e to the loss.")
    if near(value, 2 ** math.log(truth), 0.02):
        raise Wrong("That is 2 to the loss in nats; perplexity is e to the loss (or 2 to the loss in bits).")


# ---------------------------------------------------------------------------
# 3. Implement: the gradient at the logits of the mean of sequence means

SEQ_STARTER = '''import numpy as np


def sequence_mean_grad(logits, targets, mask):
    """The gradient at the logits of the MEAN OF SEQUENCE MEANS.

    logits: (B, T, V) floats; targets: (B, T) integers; mask: (B, T) of 0/1.
    The loss is: for each sequence with at least one counted token, the mean of -log p(target) over
    its counted positions; then the plain mean of those sequence means (sequences with no counted
    token are left out). Returns dL/dlogits, (B, T, V).
    """
    raise NotImplementedError
'''

SEQ_SOLUTION = '''import numpy as np


def sequence_mean_grad(logits, targets, mask):
    B, T, V = logits.shape
    z = logits - logits.max(axis=-1, keepdims=True)  # shift: exp never overflows
    g = np.exp(z)
    g /= g.sum(axis=-1, keepdims=True)  # softmax p
    g[np.arange(B)[:, None], np.arange(T), targets] -= 1.0  # p - y at every position
    n = mask.sum(axis=1)  # (B,) counted tokens per sequence
    S = np.count_nonzero(n)  # sequences that count at all
    w = np.zeros(mask.shape)
    np.divide(mask, n[:, None] * S, out=w, where=n[:, None] > 0)  # each counted token's weight: 1 / (n_b S)
    return g * w[..., None]
'''


def _seq_reference(logits, targets, mask, sequences=None):
    """dlogits of the mean of sequence means, through pylib.loss with per-token weights 1 / (n_b S)."""
    n = mask.sum(axis=1)
    S = np.count_nonzero(n) if sequences is None else sequences
    w = np.where(n[:, None] > 0, mask / np.maximum(n[:, None], 1) / S, 0.0)
    return cross_entropy_backward(cross_entropy_forward(logits, targets, w, denom=1.0)[1])


def _seq_cases():
    rng = np.random.default_rng(5)
    B, T, V = 4, 6, 11
    logits = rng.normal(0, 2, (B, T, V))
    targets = rng.integers(0, V, (B, T))
    mask = np.zeros((B, T))
    mask[0, 4:] = 1  # 2 counted
    mask[1, :] = 1  # 6 counted
    mask[2, :] = 0  # none: all prompt or padding
    mask[3, [0, 2, 5]] = 1  # 3, not contiguous
    big = logits.copy()
    big[1, 3, 7] = 1000.0
    return (logits, targets, mask), (big, targets, mask), (logits[1:2], targets[1:2], mask[1:2])


def check_sequence_mean_grad(fn):
    ordinary, extreme, single = _seq_cases()
    logits, targets, mask = ordinary
    want = _seq_reference(*ordinary)
    got = fn(logits.copy(), targets.copy(), mask.copy())
    if isinstance(got, np.ndarray) and got.shape == want.shape and not np.all(np.isfinite(got)):
        raise Wrong("On ordinary logits (values around ±2, one sequence with no counted token) your gradient is "
                    "not finite: does a sequence with no counted token divide by zero?")
    got = expect_array(got, want.shape, "The gradient")
    if not close(got, want, 1e-9, 1e-12):
        counted = mask[..., None] > 0
        if close(got, cross_entropy_backward(cross_entropy_forward(logits, targets, mask)[1]), 1e-9, 1e-12):
            raise Wrong("You average per token, not per sequence: every counted token weighs the same in your "
                        "gradient, but in the mean of sequence means a token of a short sequence weighs more.")
        if close(got, _seq_reference(logits, targets, mask, sequences=len(mask)), 1e-9, 1e-12):
            raise Wrong("You divide by all B sequences, including one with no counted token: such a sequence is "
                        "left out of the mean, so the mean is over the sequences that count.")
        if close(np.where(counted, got, 0.0), want, 1e-9, 1e-12):
            raise Wrong("The gradient is right except for the masked positions: a position with mask 0 is not in "
                        "the loss, so its gradient is 0.")
        if close(got, -want, 1e-9, 1e-12):
            raise Wrong("Your gradient has the wrong sign: at the logits it is p - y, not y - p.")
        raise Wrong(f"On random logits (B = 4, T = 6, V = 11) your gradient is off by up to "
                    f"{float(np.abs(got - want).max()):.3g}.")
    got1 = expect_array(fn(*(a.copy() for a in single)), single[0].shape, "The gradient")
    if not close(got1, _seq_reference(*single), 1e-9, 1e-12):
        raise Wrong("Right for four sequences but not for one (B = 1): check your axes.")
    got_big = fn(*(a.copy() for a in extreme))
    if isinstance(got_big, np.ndarray) and not np.all(np.isfinite(got_big)):
        raise Wrong("Your softmax overflows at logit 1000: exp(1000) is inf in float64. Subtract each row's "
                    "maximum first; softmax does not change when every logit moves by the same amount.")
    got_big = expect_array(got_big, extreme[0].shape, "The gradient")
    if not close(got_big, _seq_reference(*extreme), 1e-9, 1e-12):
        raise Wrong("Finite, but wrong when one logit is 1000: does your shift by the maximum cover every row?")
    return ("Right: it matches pylib.loss's backward with each counted token weighted 1 / (n_b S), with a "
            "sequence of no counted token, non-contiguous masks, one sequence, and a logit of 1000.")


# ---------------------------------------------------------------------------
# 4. Investigate: change one condition, four accumulated microbatches instead of one batch

ACCUM_K = 4
ACCUM_COUNTS = (64, 3, 40, 10)  # counted targets per window in each microbatch: unequal on purpose

ACCUM_STARTER = '''import numpy as np

from pylib import model


def accumulated(params, cfg, x, y, mask):
    """Change one condition of the step: 4 microbatches, accumulated, instead of one batch.

    x, y, mask: (8, T); microbatch k is rows 2k and 2k + 1. The masks count different numbers of
    targets in different microbatches. Return (loss, grads) of the accumulated step, which should be
    the same objective as the unchanged step below: one call on the whole batch.
    """
    return model.loss_and_grads(params, cfg, x, y, mask)  # replace with 4 calls, one per microbatch
'''

ACCUM_SOLUTION = '''import numpy as np

from pylib import model


def accumulated(params, cfg, x, y, mask):
    K = 4
    rows = len(x) // K
    total = int(np.count_nonzero(mask))  # counted targets over the WHOLE batch: every microbatch's denom
    loss, grads = 0.0, None
    for k in range(K):
        s = slice(k * rows, (k + 1) * rows)
        micro_loss, g = model.loss_and_grads(params, cfg, x[s], y[s], mask[s], denom=total)
        loss += micro_loss
        grads = g if grads is None else {name: grads[name] + g[name] for name in grads}
    return loss, grads
'''


def _accum_batch():
    from pylib.studies import objective
    cfg = model.GPTConfig()
    T = cfg.block_size
    counts = [min(n, T) for n in ACCUM_COUNTS]
    rows = 2
    x, y = data.get_batch(corpus().train, ACCUM_K * rows, T, np.random.default_rng(7))
    mask = objective.prompt_masks(counts, rows, T).reshape(ACCUM_K * rows, T).astype(np.float64)
    return cfg, x, y, mask


def _rel(grads, ref):
    return max(float(np.abs(grads[k] - ref[k]).max() / (np.abs(ref[k]).max() or 1.0)) for k in ref)


def check_accumulated(fn):
    from pylib import optim
    from pylib.studies import objective
    cfg, x, y, mask = _accum_batch()
    params = model.init_params(cfg, 0, np.float64)
    big_loss, big = model.loss_and_grads(params, cfg, x, y, mask)
    out = fn({k: v.copy() for k, v in params.items()}, cfg, x.copy(), y.copy(), mask.copy())
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)):
        raise Wrong("accumulated should return (loss, grads), as model.loss_and_grads does.")
    loss, grads = expect_number(out[0], "The loss"), out[1]
    if set(grads) != set(big):
        raise Wrong("Your grads do not have the model's parameter names.")
    rows = len(x) // ACCUM_K
    micro = [(x[k * rows:(k + 1) * rows], y[k * rows:(k + 1) * rows], mask[k * rows:(k + 1) * rows])
             for k in range(ACCUM_K)]
    mom = objective.accumulated_grads(params, cfg, micro, "mean_of_means")
    mom_err = _rel(grads, mom)
    grad_err = _rel(grads, big)
    if grad_err > 1e-9:
        if mom_err <= 1e-9:
            raise Wrong("Each of your microbatches divides by its own count of counted targets, and the sum by 4: "
                        "that is a mean of microbatch means, which weighs a target of a sparse microbatch more. "
                        "Use one denominator for all four.")
        every = {k: v * np.count_nonzero(mask) / mask.size for k, v in big.items()}
        if _rel(grads, every) <= 1e-9:
            raise Wrong("Your denominator counts the masked positions too (every slot of the batch): the masked "
                        "targets are not in the loss, so they are not in its denominator either.")
        if _rel(grads, {k: v / ACCUM_K for k, v in big.items()}) <= 1e-9:
            raise Wrong(f"Your gradients are {ACCUM_K} times too small: with the total count as every "
                        "microbatch's denominator, the microbatches' gradients are added, not averaged.")
        raise Wrong(f"Your gradients differ from the one-batch step's by up to {grad_err:.3g} (relative): "
                    "accumulation with the right denominator computes the same gradient, up to rounding.")
    if not close(loss, big_loss, 1e-9):
        raise Wrong(f"Your gradients are right but your loss is off by {abs(loss - big_loss):.3g} nats: add the "
                    "microbatches' losses, each already divided by the total count.")
    steps = []
    for g in (big, grads):
        p = {k: v.copy() for k, v in params.items()}
        optim.adamw_step(p, g, optim.adamw_init(p), 1e-2, weight_decay=0.1)
        steps.append(p)
    moved = max(float(np.abs(steps[0][k] - steps[1][k]).max()) for k in params)
    wrong_err = objective.relative_error(mom, big)
    return (f"Right: against one call on the whole batch, the loss differs by {abs(loss - big_loss):.1e} nats, "
            f"every gradient by at most {grad_err:.1e} (relative) and one AdamW step by {moved:.1e}: float64 "
            f"rounding, from adding the same numbers in another order. On this batch the mean of microbatch "
            f"means would have been off by {wrong_err:.2f} (relative error of the whole gradient).")


def _accumulated_split(fn):
    """Refuse an answer that does not make 4 calls of 2 windows (it did not change the condition)."""
    calls = []
    real = model.loss_and_grads

    def spy(params, cfg, x, *args, **kwargs):
        calls.append(np.shape(x)[0])
        return real(params, cfg, x, *args, **kwargs)

    def wrapped(params, cfg, x, y, mask):
        calls.clear()
        model.loss_and_grads = spy
        try:
            out = fn(params, cfg, x, y, mask)
        finally:
            model.loss_and_grads = real
        rows = len(x) // ACCUM_K
        if calls != [rows] * ACCUM_K:
            said = (f"it called model.loss_and_grads on {', '.join(map(str, calls))} window(s)" if calls
                    else "it did not call model.loss_and_grads")
            raise Wrong(f"Your function did not accumulate {ACCUM_K} microbatches of {rows} windows ({said}): "
                        "change the step into one call per microbatch, and nothing else.")
        return out

    return check_accumulated(wrapped)


EXERCISES = [
    Exercise(
        id="ch3.padded_loss", kind="predict", title="The loss of a padded batch",
        task=f"""Two sequences are padded to length 4. The forward pass computes every position, padding
included; these are the per-position losses in nats (P marks a padded position, whose loss the forward also
computes: {PAD_LOSS:g} nats each):

| sequence | position 0 | position 1 | position 2 | position 3 |
| --- | --- | --- | --- | --- |
| A | {PADDED[0][0]:g} | {PADDED[0][1]:g} | P | P |
| B | {PADDED[1][0]:g} | {PADDED[1][1]:g} | {PADDED[1][2]:g} | {PADDED[1][3]:g} |

With mask 0 at the padded positions and the default denominator, what loss does
`pylib.loss.cross_entropy_forward` return? Commit a number; the check runs it.""",
        truth=padded_loss, check=check_padded_loss, unit="nats", tolerance=0.01,
        solution="""The mask leaves the padded positions out of the sum, and the default denominator is the
number of counted tokens over the whole batch: (2 + 3 + 1 + 0.5 + 0.5 + 1) / 6 = 8 / 6 ≈ 1.333 nats, the
token-weighted mean. The mean of the two sequence means, (2.5 + 0.75) / 2 = 1.625, is a different objective.""",
        hints=("Which positions does the mask leave out of the sum, and what does the default denominator count?",
               "The default is the token-weighted mean: every counted token weighs the same, whichever sequence it "
               "is in."),
        mistakes=(Mistake("1.625", "per sequence, not per token"), Mistake("2.5", "scored the padded positions"),
                  Mistake("1.0", "denominator counts the padded positions"), Mistake("8", "sum of the counted")),
    ),
    Exercise(
        id="ch3.perplexity", kind="predict", title="Perplexity of a half-certain model",
        task="""A model is certain of the right token at half of the positions (probability 1) and knows
nothing at the other half: uniform over all V = 65 tokens. What is its perplexity over those positions? Commit a
number; the check computes e to pylib.loss's mean cross-entropy.""",
        truth=perplexity, check=check_perplexity, unit="", tolerance=0.02,
        solution="""The loss is the mean of −log p: 0 at the certain positions and ln 65 at the uniform ones, so
L = ln 65 / 2 and the perplexity is e^L = √65 ≈ 8.06. It is the geometric mean of 1/p (1 and 65), far below
their arithmetic mean, 33: a perplexity is set by the mean of the logs, and the certain half pulls it down a
lot.""",
        hints=("Perplexity is e^L, and L is the mean over positions of −log p(target), in nats.",
               "−log 1 = 0 and −log(1/65) = ln 65. Average those, then exponentiate."),
        mistakes=(Mistake("33", "arithmetic mean"), Mistake("65", "uniform positions alone"),
                  Mistake("2.087", "loss in nats"), Mistake("4.25", "2 to the loss")),
    ),
    Exercise(
        id="ch3.sequence_mean_grad", kind="implement", title="The gradient of the mean of sequence means",
        task="""The chapter compares two reductions of the same per-token losses and shows the loss of each.
Write the gradient at the logits of the other one, the mean of sequence means, for a masked batch: what each
counted token's p − y is multiplied by when short sequences weigh more. It must stay finite when a logit is 1000,
and a sequence with no counted token must not break it.""",
        starter=SEQ_STARTER, function="sequence_mean_grad", solution=SEQ_SOLUTION, check=check_sequence_mean_grad,
        hints=("At one position the gradient of −log p(target) with respect to the logits is p − y.",
               "A counted token of sequence b enters the loss with weight 1 / (n_b · S): n_b counted tokens in its "
               "sequence, S sequences that count at all. A masked position has weight 0.",
               "Subtract each row's maximum before exp, and keep a sequence with n_b = 0 out of S and out of any "
               "division."),
        mistakes=(
            Mistake(SEQ_SOLUTION.replace("n[:, None] * S, out=w", "mask.sum(), out=w"), "per token, not per sequence"),
            Mistake(SEQ_SOLUTION.replace("S = np.count_nonzero(n)", "S = B"), "including one with no counted token"),
            Mistake(SEQ_SOLUTION.replace("    return g * w[..., None]",
                                         "    S_w = np.where(n[:, None] > 0, 1.0 / np.maximum(n[:, None], 1) / S, 0.0)\n"
                                         "    return g * np.where(mask > 0, w, S_w)[..., None]"),
                    "except for the masked positions"),
            Mistake(SEQ_SOLUTION.replace("z = logits - logits.max(axis=-1, keepdims=True)", "z = logits"),
                    "overflows at logit 1000"),
        )),
    Exercise(
        id="ch3.accumulate", kind="investigate", title="One condition changed: accumulation",
        task="""Take one step's loss and gradients on a fixed batch of 8 windows whose loss masks count different
numbers of targets, then change one condition: split the batch into 4 microbatches of 2 windows and accumulate.
Write the loop, run the check, and read what changed against the one-batch step: the loss, every gradient, and
the AdamW update.""",
        starter=ACCUM_STARTER, function="accumulated", solution=ACCUM_SOLUTION, check=_accumulated_split,
        needs_corpus=True,
        hints=("`model.loss_and_grads(params, cfg, x, y, mask, denom=...)` divides the microbatch's summed loss by "
               "`denom` instead of its own count.",
               "The one-batch loss divides by the number of counted targets in the whole batch. Give every "
               "microbatch that same denominator, then add the losses and the gradients."),
        mistakes=(
            Mistake(ACCUM_STARTER, "did not accumulate"),
            Mistake(ACCUM_SOLUTION.replace("mask[s], denom=total)", "mask[s])")
                    .replace("        loss += micro_loss\n", "        loss += micro_loss / K\n        g = {name: v / K for name, v in g.items()}\n"),
                    "mean of microbatch means"),
            Mistake(ACCUM_SOLUTION.replace("total = int(np.count_nonzero(mask))", "total = mask.size"),
                    "counts the masked positions"),
            Mistake(ACCUM_SOLUTION.replace("    return loss, grads",
                                           "    return loss, {name: v / K for name, v in grads.items()}"),
                    "times too small"),
        )),
]
