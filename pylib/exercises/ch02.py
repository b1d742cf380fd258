"""Chapter 2's exercises: BPE by hand and in code, positions in packed windows, and the document
mask as one changed condition (pylib.exercises says how checks work)."""

import numpy as np

from pylib import bpe, data, model
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_number, near

# ---------------------------------------------------------------------------
# 1. Predict: the length of a text after BPE merges

MERGE_TEXT = "aaaaaa bbbbbb"
MERGE_STEPS = 5


def tokens_after_merges():
    """How many tokens MERGE_TEXT is after train_bpe_on_text with up to MERGE_STEPS merges."""
    return len(bpe.train_bpe_on_text(MERGE_TEXT, MERGE_STEPS)[1])


def check_tokens_after_merges(value, truth):
    n = len(MERGE_TEXT)
    if near(value, n, 0.01):
        raise Wrong(f"{n} is the number of characters, before any merge: the first pair occurs more than once, "
                    "so at least one merge happens.")
    if near(value, n - MERGE_STEPS, 0.01):
        raise Wrong("That assumes each merge saves one token; a merge replaces every (non-overlapping) "
                    "occurrence of its pair, so one merge can save several.")
    if near(value, truth - 1, 0.01):
        raise Wrong("One merge too many: training stops when no pair occurs twice, even if merges remain in "
                    "the budget.")
    if value != round(value):
        raise Wrong("A number of tokens is a whole number.")


# ---------------------------------------------------------------------------
# 2. Implement: count adjacent pairs as BPE's training step does (the chapter shows only best_pair)

PAIRS_STARTER = '''import numpy as np


def pair_counts(ids, K, stop_id, starts):
    """Counts of adjacent pairs, as one step of BPE training counts them.

    ids: (N,) integer ids below K (any integer dtype; N may be 0 or 1).
    K: the size of the id space.
    stop_id: an id that never takes part in a pair (EOS), or None.
    starts: (N,) bool, True where a pre-token starts (a pair whose right half starts one
            does not count), or None: no cuts.
    Returns a (K, K) integer array: counts[a, b] = how many times a is followed by b, as BPE counts.
    """
    raise NotImplementedError
'''

PAIRS_SOLUTION = '''import numpy as np


def pair_counts(ids, K, stop_id, starts):
    ids = np.asarray(ids, dtype=np.int64)
    counts = np.zeros((K, K), dtype=np.int64)
    if ids.size < 2:
        return counts
    left, right = ids[:-1], ids[1:]  # every adjacent pair, overlapping ones included
    keep = np.ones(left.size, dtype=bool)
    if stop_id is not None:
        keep &= (left != stop_id) & (right != stop_id)  # EOS on either side: not a pair
    if starts is not None:
        keep &= ~np.asarray(starts)[1:]  # the right half starts a pre-token: the pair straddles a cut
    np.add.at(counts, (left[keep], right[keep]), 1)
    return counts
'''


def _reference_counts(ids, K, stop_id, starts):
    codes, counts = bpe.pair_counts(ids, K, stop_id, starts)
    out = np.zeros(K * K, dtype=np.int64)
    out[codes] = counts
    return out.reshape(K, K)


def _pair_cases():
    rng = np.random.default_rng(2)
    K = 7
    runs = ("plain runs", np.array([1, 1, 1, 1, 2, 3, 3, 3, 0]), K, None, None)  # "aaaa" holds "aa" 3 times
    ids = rng.integers(0, K, 40)
    ids[[5, 6, 20, 39]] = 6
    eos = ("an EOS id", ids, K, 6, None)
    starts = rng.random(40) < 0.3
    cuts = ("pre-token cuts", ids, K, None, starts)
    both = ("EOS and cuts together", ids, K, 6, starts)
    text = "the thin theme, then the end"
    base, tids = bpe.text_base(text)
    words = ("a text cut into GPT-2's pre-tokens", tids, len(base), None, bpe.pretoken_starts(text))
    big = ("uint8 ids with K = 300", np.array([250, 251, 250, 251, 251, 251, 250], dtype=np.uint8), 300, None, None)
    tiny = [("one id", np.array([3]), K, None, None), ("no ids", np.zeros(0, dtype=np.int64), K, None, None)]
    return [runs, eos, cuts, both, words, big, *tiny]


UINT8 = ("Right for int64 ids, wrong for uint8 ids with K = 300 (the corpus stores its ids as uint8): does a "
         "product like left * K overflow in your ids' dtype?")


def check_pair_counts(fn):
    for name, ids, K, stop_id, starts in _pair_cases():
        want = _reference_counts(ids, K, stop_id, starts)
        try:
            got = fn(ids.copy(), K, stop_id, None if starts is None else starts.copy())
        except OverflowError:
            if ids.dtype != np.uint8:
                raise
            got = None
        if got is None and ids.dtype == np.uint8:
            raise Wrong(UINT8)
        if not isinstance(got, np.ndarray):
            raise Wrong(f"pair_counts should return a NumPy array; yours returns a {type(got).__name__}.")
        if got.shape != (K, K):
            raise Wrong(f"On {name}, the counts should be a (K, K) = ({K}, {K}) array; yours is {got.shape}.")
        got = got.astype(np.int64)
        if np.array_equal(got, want):
            continue
        if name == "plain runs":
            off = got != want
            if np.all(np.diag(got) <= np.diag(want)) and not (off & ~np.eye(K, dtype=bool)).any():
                raise Wrong("You count a run like \"aaaa\" without overlaps: BPE counts every adjacent pair, so "
                            "\"aaa\" holds the pair \"aa\" twice (it is the replacement that does not overlap).")
            if np.array_equal(got, want.T):
                raise Wrong("Your counts are transposed: counts[a, b] is a followed by b.")
            raise Wrong("Wrong on a plain sequence with no EOS and no cuts: count every adjacent pair (left, right).")
        if name == "an EOS id":
            one_side = [_reference_counts(ids, K, None, None) - np.bincount(
                (ids[:-1][side] * K + ids[1:][side]).astype(np.intp), minlength=K * K).reshape(K, K)  # wasm32: int32
                for side in (ids[:-1] == stop_id, ids[1:] == stop_id)]
            if any(np.array_equal(got, c) for c in one_side):
                raise Wrong("You drop the pairs with EOS on one side only: EOS never takes part in a pair, "
                            "whether it is the left half or the right.")
            raise Wrong("Right without an EOS, wrong with one: a pair that contains the stop id does not count.")
        if name == "pre-token cuts":
            if np.array_equal(got, _reference_counts(ids, K, None, np.r_[False, starts[:-1]])):
                raise Wrong("You test the cut on the pair's left half: a pair straddles a cut when its RIGHT half "
                            "starts a pre-token.")
            raise Wrong("Right without cuts, wrong with them: a pair whose right half starts a pre-token does "
                        "not count.")
        if name.startswith("uint8"):
            raise Wrong(UINT8)
        raise Wrong(f"Your counts are wrong on {name}.")
    return ("Right: it matches pylib.bpe.pair_counts on runs (overlapping pairs), with an EOS, with pre-token "
            "cuts, on uint8 ids, and on sequences of one id and of none.")


# ---------------------------------------------------------------------------
# 3. Implement: each token's position inside its document, from the token ids alone

POS_STARTER = '''import numpy as np


def document_positions(x, eos_id):
    """Each token's position inside its own document, in packed windows.

    x: (B, T) integer token ids, documents packed end to end with eos_id after each;
    a window can start in the middle of a document.
    Returns (B, T) integers: 0 at a window's first token and at the first token of every
    document that starts inside the window, then 1, 2, ... An EOS belongs to the document it ends.
    """
    raise NotImplementedError
'''

POS_SOLUTION = '''import numpy as np


def document_positions(x, eos_id):
    x = np.asarray(x)
    B, T = x.shape
    t = np.arange(T)
    starts = np.zeros((B, T), dtype=bool)
    starts[:, 0] = True  # a window's first token counts from 0
    starts[:, 1:] = x[:, :-1] == eos_id  # and so does the token after each EOS
    return t - np.maximum.accumulate(np.where(starts, t, 0), axis=1)  # minus its document's first position
'''


def _reference_positions(x, eos_id):
    return model.doc_positions(data.doc_ids_from_eos(x, eos_id))


def _position_cases():
    E = 9
    one = np.array([[1, 2, 3, E, 4, 5, 6, 7]])  # one boundary inside the window
    rng = np.random.default_rng(4)
    many = rng.integers(0, E, (5, 16))
    many[0, [3, 9]] = E  # two boundaries in one window
    many[1, 0] = E  # the window starts with an EOS
    many[2, 15] = E  # the window ends with one
    many[3, [6, 7]] = E  # an empty document between two EOS
    return E, one, many  # many[4] has no EOS at all


def check_document_positions(fn):
    E, one, many = _position_cases()
    for x in (one, many):
        want = _reference_positions(x, E)
        got = np.asarray(fn(x.copy(), E))
        if got.shape != x.shape:
            raise Wrong(f"The positions should have x's shape {x.shape}; yours have {got.shape}.")
        if np.array_equal(got, want):
            continue
        eos_starts = np.cumsum(x == E, axis=1)  # the EOS opening the next document instead
        if np.array_equal(got, model.doc_positions(eos_starts)):
            raise Wrong("Your EOS starts the next document (it gets position 0): an EOS belongs to the document "
                        "it ends, so it is the token after it that starts at 0.")
        if x.shape[0] > 1 and np.array_equal(got.ravel(), _reference_positions(x.reshape(1, -1), E).ravel()):
            raise Wrong("Your positions carry over from one window to the next: each window is read on its own, "
                        "and its first token is at position 0.")
        if x is one:
            raise Wrong("Wrong on a single window with one EOS in the middle: count from 0 again after the EOS.")
        if np.array_equal(got[4], want[4]) and np.array_equal(got[1:3], want[1:3]) and not np.array_equal(got[0], want[0]):
            raise Wrong("Right for one boundary in a window, wrong for two: every EOS restarts the count, not "
                        "only the first.")
        rows = [i for i in range(x.shape[0]) if not np.array_equal(got[i], want[i])]
        raise Wrong(f"Right for a window with one EOS but wrong for windows {rows} of a (5, 16) batch (one has "
                    "two EOS, one starts with an EOS, one ends with one, one has two EOS in a row, one has none).")
    return ("Right: it matches pylib.model.doc_positions(pylib.data.doc_ids_from_eos(x, eos_id)), with two EOS "
            "in a window, an EOS first or last, two in a row, and none.")


# ---------------------------------------------------------------------------
# 4. Investigate: change one condition, the document mask, and compare the step with the unchanged one

DOCMASK_STARTER = '''import numpy as np

from pylib import data, model


def document_masked(params, cfg, x, y, eos_id):
    """Change one condition of the step: attention also stops at document boundaries.

    x, y: (B, T) packed windows and their targets; eos_id: the end-of-document token.
    Return (loss, grads) for the changed step. The unchanged step is below: causal attention
    only, positions 0..T-1 in every window. Keep the positions as they are.
    """
    return model.loss_and_grads(params, cfg, x, y)  # change this line only
'''

DOCMASK_SOLUTION = '''import numpy as np

from pylib import data, model


def document_masked(params, cfg, x, y, eos_id):
    doc_ids = data.doc_ids_from_eos(x, eos_id)  # (B, T): an EOS belongs to the document it ends
    return model.doc_loss_and_grads(params, cfg, x, y, doc_ids)
'''


def _straddling_batch():
    """Four training windows: EOS at input positions 5, 30 and T-2, and one window with no EOS."""
    cfg = model.GPTConfig()
    T = cfg.block_size
    tokens = corpus().train
    eos = corpus().vocab.eos_id
    ends = np.flatnonzero(tokens == eos)
    ends = ends[(ends > 2 * T) & (ends < len(tokens) - 2 * T)]
    gaps = np.diff(ends)
    alone = (gaps[1:] > 2 * T + 2) & (gaps[:-1] > 2 * T + 2)
    e = ends[1:-1][alone][:3]  # EOS with no other EOS within two windows before or after it
    clean = int(e[0]) + T + 1  # a window inside the next document: no EOS
    starts = np.array([e[0] - 5, e[1] - 30, e[2] - (T - 2), clean])
    idx = starts[:, None] + np.arange(T + 1)
    w = np.asarray(tokens)[idx].astype(np.int64)
    return cfg, w[:, :-1], w[:, 1:], eos


def _rel(grads, ref):
    return max(float(np.abs(grads[k] - ref[k]).max() / (np.abs(ref[k]).max() or 1.0)) for k in ref)


def _same_step(out, ref):
    loss, grads = out
    return close(loss, ref[0], 1e-9, 1e-12) and _rel(grads, ref[1]) <= 1e-9


def check_document_masked(fn):
    from pylib import optim
    cfg, x, y, eos = _straddling_batch()
    params = model.init_params(cfg, 0, np.float64)
    unchanged = model.loss_and_grads(params, cfg, x, y)
    doc_ids = data.doc_ids_from_eos(x, eos)
    want = model.doc_loss_and_grads(params, cfg, x, y, doc_ids)
    out = fn({k: v.copy() for k, v in params.items()}, cfg, x.copy(), y.copy(), eos)
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)):
        raise Wrong("document_masked should return (loss, grads), as model.loss_and_grads does.")
    out = (expect_number(out[0], "The loss"), out[1])
    if set(out[1]) != set(want[1]):
        raise Wrong("Your grads do not have the model's parameter names.")
    if _same_step(out, unchanged):
        raise Wrong("Your loss and gradients are the unchanged step's: attention is still causal only, so a token "
                    "after an EOS still reads the previous document. Change that one condition.")
    if _same_step(out, model.doc_loss_and_grads(params, cfg, x, y, doc_ids, reset_positions=True)):
        raise Wrong("You also restarted the positions at each document: that is a second condition. Change only "
                    "the attention mask and keep positions 0..T-1.")
    if _same_step(out, model.doc_loss_and_grads(params, cfg, x, y, np.cumsum(x == eos, axis=1))):
        raise Wrong("Your document ids put each EOS in the document it starts: an EOS belongs to the document it "
                    "ends, and reads that document.")
    if _same_step(out, model.loss_and_grads(params, cfg, x, y, (x != eos).astype(np.float64))):
        raise Wrong("You changed which targets are scored (a loss mask), not which tokens each position may read "
                    "(an attention mask): the document mask leaves every target scored.")
    if not _same_step(out, want):
        raise Wrong(f"Your step differs from a causal step with a block-diagonal document mask: loss off by "
                    f"{abs(out[0] - want[0]):.3g} nats, gradients by up to {_rel(out[1], want[1]):.3g} (relative).")
    # What the one condition changed: the logits, position by position, then the gradients and the update
    d = np.abs(model.doc_forward(params, cfg, x, doc_ids)[0] - model.forward(params, cfg, x)[0]).max(axis=-1)  # (B, T)
    first = [int(np.argmax(row == eos)) if (row == eos).any() else x.shape[1] for row in x]
    before = max(float(d[b, :first[b] + 1].max()) for b in range(len(x)))
    after = max(float(d[b, first[b] + 1:].max()) for b in range(len(x)) if first[b] + 1 < x.shape[1])
    grad_change = _rel(out[1], unchanged[1])
    steps = []
    for g in (unchanged[1], out[1]):
        p = {k: v.copy() for k, v in params.items()}
        optim.adamw_step(p, g, optim.adamw_init(p), 1e-2, weight_decay=0.1)
        steps.append(p)
    moved = max(float(np.abs(steps[0][k] - steps[1][k]).max()) for k in params)
    return (f"Right. Against the unchanged step: the logits up to and including each window's first EOS, and all "
            f"of the window with no EOS, agree to {before:.1e} (they read the same tokens); after an EOS they move "
            f"by up to {after:.2g}. The loss moves by {abs(out[0] - unchanged[0]):.2g} nats, the gradients by up to "
            f"{grad_change:.2g} (relative), and one AdamW step by up to {moved:.2g} in a weight.")


EXERCISES = [
    Exercise(
        id="ch2.tokens_after_merges", kind="predict", title="BPE by hand",
        task=f"""Learn BPE on the 13-character text `"{MERGE_TEXT}"` (six a's, a space, six b's), with its
characters as the base symbols and a budget of {MERGE_STEPS} merges, by the chapter's rules: overlapping pairs
count, ties go to the smallest (left id, right id), replacement is left to right without overlap, and training
stops when no pair occurs twice. How many tokens is the text at the end? The check runs
`pylib.bpe.train_bpe_on_text`.""",
        truth=tokens_after_merges, check=check_tokens_after_merges, unit="tokens", tolerance=0.05,
        solution="""The space sorts before the letters, so its id is the smallest, then "a", then "b". "aa" and
"bb" each occur 5 times (overlapping), a tie that "aa" wins: "ZZZ bbbbbb" (10 tokens). Then "bb" becomes Y:
"ZZZ YYY" (7). Now "ZZ" and "YY" each occur twice; Z is the older symbol, so "ZZ" wins: "XZ YYY" (6). Then
"YY" becomes W: "XZ WY", 5 tokens (X, Z, the space, W, Y). Every pair now occurs once, so training stops with
one merge of the budget unused.""",
        hints=("Count overlapping pairs: six a's hold the pair \"aa\" five times. Replace without overlap, left "
               "to right: \"aaaaaa\" becomes three new tokens.",
               "After each merge, count again on the new sequence. And stop as soon as no pair occurs twice."),
        mistakes=(Mistake("8", "each merge saves one token"), Mistake("4", "One merge too many"),
                  Mistake("13", "number of characters")),
    ),
    Exercise(
        id="ch2.pair_counts", kind="implement", title="Counting pairs as BPE does",
        task="""The chapter shows `best_pair`, which picks the most frequent pair from counts it does not show.
Write the counting: every adjacent pair, overlapping ones included, except pairs that contain EOS and pairs
that straddle a pre-token cut. Return the counts as a (K, K) table.""",
        starter=PAIRS_STARTER, function="pair_counts", solution=PAIRS_SOLUTION, check=check_pair_counts,
        hints=("`ids[:-1]` and `ids[1:]` are every pair's left and right halves; `np.add.at(counts, (left, right), 1)` "
               "adds one per pair, repeats included.",
               "A pair straddles a cut when its right half starts a pre-token: look at `starts[1:]`.",
               "EOS can be either half of a pair. And the corpus stores ids as uint8: convert before any arithmetic."),
        mistakes=(
            Mistake(PAIRS_SOLUTION.replace("keep &= (left != stop_id) & (right != stop_id)",
                                           "keep &= left != stop_id"), "one side only"),
            Mistake(PAIRS_SOLUTION.replace("~np.asarray(starts)[1:]", "~np.asarray(starts)[:-1]"),
                    "left half"),
            Mistake(PAIRS_SOLUTION.replace("    np.add.at(counts, (left[keep], right[keep]), 1)\n",
                                           "    prev = -1  # the last counted pair of two equal ids\n"
                                           "    for i in range(left.size):\n"
                                           "        if keep[i] and not (prev == i - 1 and left[i] == right[i] == left[prev]):\n"
                                           "            counts[left[i], right[i]] += 1\n"
                                           "            prev = i if left[i] == right[i] else -1\n"),
                    "without overlaps"),
            Mistake(PAIRS_SOLUTION.replace("ids = np.asarray(ids, dtype=np.int64)", "ids = np.asarray(ids)")
                    .replace("    np.add.at(counts, (left[keep], right[keep]), 1)\n",
                             "    codes = left[keep] * K + right[keep]\n"
                             "    counts = np.bincount(codes.astype(np.intp), minlength=K * K)[:K * K]\n"
                             "    return counts.reshape(K, K)\n"), "uint8"),
        )),
    Exercise(
        id="ch2.document_positions", kind="implement", title="Positions that restart with each document",
        task="""With the position reset, each token's position embedding is its position inside its own document.
Compute those positions straight from the token ids of packed windows, in one function: the chapter does it in
two steps, through document ids.""",
        starter=POS_STARTER, function="document_positions", solution=POS_SOLUTION, check=check_document_positions,
        hints=("A document starts at the window's first token and at the token just after each EOS.",
               "`np.maximum.accumulate` along a row carries the latest start position forward; subtract it from "
               "`np.arange(T)`."),
        mistakes=(
            Mistake(POS_SOLUTION.replace("starts[:, 1:] = x[:, :-1] == eos_id", "starts[:, :] |= x == eos_id"),
                    "EOS starts the next document"),
            Mistake(POS_SOLUTION.replace("    x = np.asarray(x)\n    B, T = x.shape\n",
                                         "    shape = np.shape(x)\n    x = np.asarray(x).reshape(1, -1)\n    B, T = x.shape\n")
                    .replace("    return t - np.maximum.accumulate(np.where(starts, t, 0), axis=1)",
                             "    return (t - np.maximum.accumulate(np.where(starts, t, 0), axis=1)).reshape(shape)"),
                    "carry over from one window"),
            Mistake(POS_SOLUTION.replace(
                "    return t - np.maximum.accumulate(np.where(starts, t, 0), axis=1)",
                "    first = np.where(starts[:, 1:].any(axis=1), starts[:, 1:].argmax(axis=1) + 1, 0)[:, None]\n"
                "    return np.where(t >= first, t - first, t)"),
                    "wrong for two"),
        )),
    Exercise(
        id="ch2.document_mask", kind="investigate", title="One condition changed: the document mask",
        task="""Take one step on four packed training windows (three of them hold an EOS, one does not), then
change one condition: attention stops at document boundaries. Edit the one line, run the check, and read what
changed against the unchanged step: the logits position by position, the loss, every gradient, and the AdamW
update.""",
        starter=DOCMASK_STARTER, function="document_masked", solution=DOCMASK_SOLUTION,
        check=check_document_masked, needs_corpus=True,
        hints=("The chapter's packed-window forward takes each token's document as `doc_ids`; "
               "`pylib.data.doc_ids_from_eos` makes them from the tokens.",
               "`model.doc_loss_and_grads` is `loss_and_grads` with that forward. Leave `reset_positions` off: "
               "it is a second condition."),
        mistakes=(
            Mistake(DOCMASK_STARTER, "unchanged step's"),
            Mistake(DOCMASK_SOLUTION.replace("doc_loss_and_grads(params, cfg, x, y, doc_ids)",
                                             "doc_loss_and_grads(params, cfg, x, y, doc_ids, reset_positions=True)"),
                    "restarted the positions"),
            Mistake(DOCMASK_SOLUTION.replace("data.doc_ids_from_eos(x, eos_id)", "np.cumsum(x == eos_id, axis=1)"),
                    "document it starts"),
            Mistake(DOCMASK_SOLUTION.replace("    return model.doc_loss_and_grads(params, cfg, x, y, doc_ids)",
                                             "    return model.loss_and_grads(params, cfg, x, y, x != eos_id)"),
                    "a loss mask"),
        )),
]
