"""Chapter 2's page ops: windows, live BPE, the packed window's attention mask and leak test,
data mixtures and training on the reader's own text. Numerics are pylib's (bpe, data, model,
mixture, train); this module validates reader input (pylib.web's parse_int / InputError) and
speaks JSON. Chunked runs keep their state in _RUNS between the worker's chunk calls.

Each op that takes typed fields checks them in its validate_<op>(args), which the page also asks when
the reader leaves a field (op check_args, @checked_by). The checks of a window's start need the corpus's
length: they take the op's session, by default the page's (pylib.web.SESSION), and change nothing.
"""

import dataclasses

import numpy as np

from pylib import bpe, data, layers, model, train, web
from pylib.studies import dedup, mixture
from pylib.web import InputError, parse_int, parse_number
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

DATA_LIMITS = {
    "bpe_text_max": 20000,  # characters the live BPE accepts (a merge is a few passes over the text)
    "bpe_vocab_max": 1000,  # vocabulary size the live BPE may grow to
    "bpe_merges_per_chunk": 4,  # so the page shows the merges a few at a time, and Stop can land
    "excerpt_max": 20000,  # characters of corpus text one excerpt returns
    "own_text_max": 200_000,  # characters the reader may paste to train on
    "own_chars": 64,  # the pasted text's vocabulary: its 64 most frequent characters + EOS
    "own_steps_max": 2000,
    "mix_steps_max": 2000,
    "dedup_text_max": 5000,  # characters per text in the dedup widget (n_hashes x shingles uint64s)
    "dedup_hashes_max": 256,
    "dedup_k_max": 20,
    "dedup_shingles_shown": 200,  # shingles per text sent to the page (all are used in the numbers)
}

_RUNS = {}  # "bpe" | "mix" | "own" -> the state of that chunked run


LABELS = {"start": "Start position", "position": "Position", "n_chars": "Characters", "vocab_size": "Vocabulary size",
          "weight": "Weight", "split": "Split", "k": "Shingle length k", "n_hashes": "Hash functions n",
          "bands": "Bands b", "threshold": "Threshold"}


def _field_error(field, message):
    return InputError({field: message})


def _labelled(parse, raw, field, *bounds):
    """pylib.web's parser, with this module's reader-facing field label at the start of its message."""
    try:
        return parse(raw, field, *bounds)
    except InputError as e:
        msg = e.errors[field]
        if field in LABELS and msg.startswith(field):
            msg = LABELS[field] + msg[len(field):]
        raise InputError({field: msg}) from None


def _text(raw, field, limit, label="Text"):
    """A non-empty string of at most limit characters; the length check comes before any work."""
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise _field_error(field, f"{label} must be a string.")
    if len(raw) > limit:
        raise _field_error(field, f"{label} is {len(raw):,} characters long; the limit is {limit:,}. Paste less.")
    if not raw.strip():
        raise _field_error(field, f"{label} is empty: paste or pick some text first.")
    return raw


def _tokens(session, split):
    session._need_corpus()
    if split not in ("train", "val"):
        raise _field_error("split", "Split must be 'train' or 'val'.")
    return session.train_tokens if split == "train" else session.val_tokens


def _show(session, i):
    """How one token id looks on a chip: EOS as ␄."""
    return data.EOS_DISPLAY if i == session.vocab.eos_id else session.vocab.chars[i]


# ---------------------------------------------------------------------------
# Windows and teacher forcing


def validate_window(args, session=None):
    """{split, start} -> (tokens, start), or InputError."""
    T = model.GPTConfig().block_size
    tokens = _tokens(web.SESSION if session is None else session, args.get("split", "train"))
    return tokens, _labelled(parse_int, args.get("start"), "start", 0, len(tokens) - T - 1)


@checked_by(validate_window)
def window(session, args):
    """The block_size+1 tokens at start: inputs and targets side by side."""
    T = model.GPTConfig().block_size
    tokens, start = validate_window(args, session)
    x, y = data.window_at(tokens, start, T)
    return {"start": start, "max_start": len(tokens) - T - 1, "block_size": T,
            "x": [_show(session, int(i)) for i in x], "y": [_show(session, int(i)) for i in y]}


def validate_excerpt(args, session=None):
    """{split, n_chars, start} -> (tokens, n_chars, start), or InputError."""
    tokens = _tokens(web.SESSION if session is None else session, args.get("split", "train"))
    n_chars = _labelled(parse_int, args.get("n_chars"), "n_chars", 1, DATA_LIMITS["excerpt_max"])
    start = _labelled(parse_int, args.get("start"), "start", 0, max(0, len(tokens) - n_chars))
    return tokens, n_chars, start


@checked_by(validate_excerpt)
def excerpt(session, args):
    """Corpus text (decoded ids) from start, for the BPE widget."""
    tokens, n_chars, start = validate_excerpt(args, session)
    ids = tokens[start:start + n_chars]
    return {"text": "".join("\n\n" if i == session.vocab.eos_id else session.vocab.chars[i] for i in ids)}


# ---------------------------------------------------------------------------
# Live BPE


def validate_bpe_start(args):
    """{text, split, vocab_size} -> (text, split, base, ids, vocab_size), or InputError."""
    text = _text(args.get("text"), "text", DATA_LIMITS["bpe_text_max"])
    split = args.get("split", False)
    if not isinstance(split, bool):
        raise _field_error("split", "Split must be true or false.")
    base, ids = bpe.text_base(text)
    vocab_size = _labelled(parse_int, args.get("vocab_size"), "vocab_size", len(base) + 1,
                           max(len(base) + 1, DATA_LIMITS["bpe_vocab_max"]))
    return text, split, base, ids, vocab_size


@checked_by(validate_bpe_start)
def bpe_start(session, args):
    """Validate the text, target vocabulary and split flag; set up the merges.

    split (true/false): learn within GPT-2-style pre-tokens only (pylib.bpe.PRETOKEN_PATTERN)."""
    text, split, base, ids, vocab_size = validate_bpe_start(args)
    starts = bpe.pretoken_starts(text) if split else None
    _RUNS["bpe"] = {"base": base, "ids": ids, "starts": starts, "n_chars": len(text), "target": vocab_size,
                    "merges": [], "strings": list(base), "done": False}
    return {"base_size": len(base), "n_chars": len(text), "vocab_size": vocab_size, "split": split,
            "n_pretokens": None if starts is None else int(starts.sum())}


def bpe_chunk(session, args):
    """A few merges (at most one chunk's time); each with its token, count and the new chars per token."""
    run = _RUNS["bpe"]
    new = []
    K = run["target"]
    for _ in chunk_steps(lambda: run["done"] or len(new) >= DATA_LIMITS["bpe_merges_per_chunk"]):
        found = bpe.best_pair(run["ids"], K, starts=run["starts"])
        if len(run["strings"]) >= K or found is None or found[2] < 2:
            run["done"] = True
            break
        a, b, count = found
        new_id = len(run["strings"])
        run["ids"], run["starts"] = bpe.merge_split(run["ids"], run["starts"], a, b, new_id)
        run["strings"].append(run["strings"][a] + run["strings"][b])
        m = {"id": new_id, "left": run["strings"][a], "right": run["strings"][b], "token": run["strings"][new_id],
             "count": count, "tokens": int(run["ids"].size), "vocab_size": new_id + 1,
             "chars_per_token": run["n_chars"] / run["ids"].size}
        run["merges"].append(m)
        new.append(m)
    return {"done": run["done"], "merges": new, "n_merges": len(run["merges"])}


def bpe_finish(session, args):
    """The final vocabulary size, compression, and the text as tokens (first 300)."""
    run = _RUNS.pop("bpe")
    ids = run["ids"]
    stop_reason = ("reached the target vocabulary" if len(run["strings"]) >= run["target"]
                   else "no pair occurs twice any more" if run["done"] else "stopped")
    return {"vocab_size": len(run["strings"]), "base_size": len(run["base"]), "n_merges": len(run["merges"]),
            "split": run["starts"] is not None,
            "n_chars": run["n_chars"], "n_tokens": int(ids.size), "chars_per_token": run["n_chars"] / ids.size,
            "tokens": [run["strings"][int(i)] for i in ids[:300]], "stop_reason": stop_reason}


# ---------------------------------------------------------------------------
# Packing: the mask of a packed window, and the leak test


def first_boundary_window(tokens, eos_id, T, after=0):
    """A window start near the first EOS at or after `after` that puts it about mid-window."""
    ends = np.flatnonzero(np.asarray(tokens[after:]) == eos_id)
    return max(0, min(int(ends[0]) + after - T // 2, len(tokens) - T - 1)) if ends.size else 0


def validate_pack_window(args, session=None):
    """{split, start ("auto" or missing: near the first EOS)} -> (tokens, start), or InputError."""
    session = web.SESSION if session is None else session
    T = model.GPTConfig().block_size
    tokens = _tokens(session, args.get("split", "val"))
    raw = args.get("start")
    start = first_boundary_window(tokens, session.vocab.eos_id, T) if raw in (None, "auto") else \
        _labelled(parse_int, raw, "start", 0, len(tokens) - T - 1)
    return tokens, start


@checked_by(validate_pack_window)
def pack_window(session, args):
    """A packed window's tokens, document ids and the two masks (causal, causal + block-diagonal)."""
    T = model.GPTConfig().block_size
    tokens, start = validate_pack_window(args, session)
    x, _ = data.window_at(tokens, start, T)
    doc_ids = data.doc_ids_from_eos(x[None], session.vocab.eos_id)  # (1, T)
    causal = np.isfinite(layers.causal_mask(T, np.float64))  # (T, T) True where attention is allowed
    blocked = causal & np.isfinite(layers.doc_mask(doc_ids, np.float64)[0, 0])
    return {"start": start, "max_start": len(tokens) - T - 1, "chars": [_show(session, int(i)) for i in x],
            "doc_ids": doc_ids[0].tolist(), "causal": causal.astype(int).tolist(),
            "doc_mask": blocked.astype(int).tolist(), "n_docs": int(doc_ids.max()) + 1}


def validate_leak(args, session=None):
    """{split, start, position} -> (the window (1, T), position), or InputError (also for a position
    that holds an EOS)."""
    session = web.SESSION if session is None else session
    T = model.GPTConfig().block_size
    tokens = _tokens(session, args.get("split", "val"))
    start = _labelled(parse_int, args.get("start"), "start", 0, len(tokens) - T - 1)
    position = _labelled(parse_int, args.get("position"), "position", 0, T - 1)
    x, _ = data.window_at(tokens, start, T)
    x = x[None]  # (1, T)
    if x[0, position] == session.vocab.eos_id:
        raise _field_error("position", "That position holds an EOS; pick a character inside a document.")
    return x, position


@checked_by(validate_leak)
def leak_test(session, args):
    """Change the token at `position`; max |delta logit| per position, with and without the doc mask.

    The model is the default one at its seeded initialisation (seed 0, float64): the mask's effect
    does not depend on training.
    """
    x, position = validate_leak(args, session)
    eos = session.vocab.eos_id
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    params = model.init_params(cfg, 0, dtype=np.float64)
    x2 = x.copy()
    x2[0, position] = (x2[0, position] + 1) % eos  # another character, never EOS
    doc_ids = data.doc_ids_from_eos(x, eos)
    out = {}
    for name, d in [("masked", doc_ids), ("unmasked", None)]:
        a, b = ((model.doc_forward(params, cfg, v, d)[0] if d is not None else model.forward_logits(params, cfg, v))
                for v in (x, x2))
        out[name] = np.abs(a - b).max(axis=-1)[0].tolist()  # (T,)
    other = doc_ids[0] != doc_ids[0, position]
    return {"position": position, "doc_ids": doc_ids[0].tolist(), "changed_from": _show(session, int(x[0, position])),
            "changed_to": _show(session, int(x2[0, position])), **out,
            "max_other_masked": float(np.max(np.array(out["masked"])[other], initial=0.0)),
            "max_other_unmasked": float(np.max(np.array(out["unmasked"])[other], initial=0.0))}


# ---------------------------------------------------------------------------
# Mixtures


def validate_mix_start(args):
    """{weight, steps, seed} -> (weight, steps, seed), or InputError (the first bad field)."""
    w = _labelled(parse_number, args.get("weight"), "weight")
    if not 0 <= w <= 1:
        raise _field_error("weight", f"Weight must be between 0 and 1; got {w:g}.")
    steps = parse_int(args.get("steps"), "steps", 1, DATA_LIMITS["mix_steps_max"])
    seed = parse_int(args.get("seed", 0), "seed", 0, web.LIMITS["seed_max"])
    return w, steps, seed


@checked_by(validate_mix_start)
def mix_start(session, args):
    """Comedies at weight w, tragedies at 1 - w; the play spans come from the page (build-time data)."""
    session._need_corpus()
    w, steps, seed = validate_mix_start(args)
    sources = mixture.genre_sources(session.train_tokens, args.get("spans") or [])
    tc = dataclasses.replace(train.TrainConfig(), steps=steps, seed=seed)
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    state = mixture.init_mixture_run(cfg, tc, [sources[g] for g in mixture.GENRES], [w, 1 - w])
    _RUNS["mix"] = {"state": state, "cfg": cfg, "tc": tc}
    return {"weights": [w, 1 - w], "genres": list(mixture.GENRES), "steps": steps,
            "source_tokens": [int(sources[g][0].size) for g in mixture.GENRES]}


def mix_chunk(session, args):
    run = _RUNS["mix"]
    state, losses = run["state"], []
    done = lambda: state["step"] >= run["tc"].steps or state["diverged"]
    for _ in chunk_steps(done):
        losses += mixture.mixture_steps(state, run["cfg"], run["tc"], 1)
    return {"done": done(), "step": state["step"],
            "steps": run["tc"].steps, "losses": losses, "fractions": mixture.token_fractions(state)}


def mix_finish(session, args):
    run = _RUNS.pop("mix")
    state = run["state"]
    return {"steps": state["step"], "genres": list(mixture.GENRES), "fractions": mixture.token_fractions(state),
            "held_out": mixture.held_out_losses(state, run["cfg"]), "weights": state["weights"].tolist()}


# ---------------------------------------------------------------------------
# Train on your own text


def own_min_chars():
    """The shortest usable text: the last tenth is validation, and each split needs a window + 2."""
    return 10 * (model.GPTConfig().block_size + 2)


def prepare_own_text(raw):
    """Pasted text -> (vocab, train ids, val ids, report); InputError for unusable text."""
    text = _text(raw, "text", DATA_LIMITS["own_text_max"])
    text = data.normalise_text(text)
    vocab = data.build_char_vocab(text, DATA_LIMITS["own_chars"])
    ids, dropped = vocab.encode(text)
    if ids.size < own_min_chars():
        raise _field_error("text", f"Text has {ids.size:,} usable characters; at least {own_min_chars():,} are "
                                   f"needed (a {model.GPTConfig().block_size}-character window for each split, "
                                   "with the last tenth held out).")
    cut = int(ids.size * 0.9)
    eos = np.array([vocab.eos_id], dtype=np.int64)
    train_ids = np.concatenate([ids[:cut], eos]).astype(np.uint8)
    val_ids = np.concatenate([ids[cut:], eos]).astype(np.uint8)
    return vocab, train_ids, val_ids, {"vocab_size": vocab.size, "n_chars": len(text), "n_dropped": int(dropped),
                                       "train_tokens": int(train_ids.size), "val_tokens": int(val_ids.size)}


def validate_own_start(args):
    """{text, steps, seed} -> (prepare_own_text's (vocab, train, val, report), steps, seed), or
    InputError (the first bad field)."""
    prepared = prepare_own_text(args.get("text"))
    steps = parse_int(args.get("steps"), "steps", 1, DATA_LIMITS["own_steps_max"])
    seed = parse_int(args.get("seed", 0), "seed", 0, web.LIMITS["seed_max"])
    return prepared, steps, seed


@checked_by(validate_own_start)
def own_start(session, args):
    (vocab, train_ids, val_ids, report), steps, seed = validate_own_start(args)
    own = web.Session()  # a session of its own: the page's corpus stays loaded for the other widgets
    own.vocab, own.train_tokens, own.val_tokens = vocab, train_ids, val_ids
    tc = train.TrainConfig()
    info = own.start_run({"lr": tc.lr, "steps": steps, "batch_size": tc.batch_size, "seed": seed})
    _RUNS["own"] = own
    return {**report, **info, "chars": list(vocab.chars), "params": model.count_params(own.run["model_cfg"])}


def own_chunk(session, args):
    return _RUNS["own"].train_chunk()


def own_finish(session, args):
    return _RUNS.pop("own").finish_run()


# ---------------------------------------------------------------------------
# Deduplication of one pair


# Real near-duplicate speeches of the corpus (found by near_duplicate_pairs among the speeches, at a
# lower threshold than the chapter's); tests/test_web_data.py checks each is a speech of its play.
DEDUP_EXAMPLES = [
    {"name": "A message repeated word for word inside a longer speech",
     "plays": ["henry-vi-part-3", "henry-vi-part-3"],
     "texts": ["BONA:\nTell him, in hope he'll prove a widower shortly,\nI'll wear the willow garland for his sake.",
               "Post:\nThese were her words, utter'd with mad disdain:\n'Tell him, in hope he'll prove a widower "
               "shortly,\nI'll wear the willow garland for his sake.'"]},
    {"name": "A refrain that differs by one comma",
     "plays": ["macbeth", "macbeth"],
     "texts": ["ALL:\nDouble, double toil and trouble;\nFire burn, and cauldron bubble.",
               "ALL:\nDouble, double toil and trouble;\nFire burn and cauldron bubble."]},
    {"name": "A line reworked from one play to the next",
     "plays": ["henry-vi-part-2", "henry-vi-part-3"],
     "texts": ["YORK:\nHold, Warwick, seek thee out some other chase,\nFor I myself must hunt this deer to death.",
               "RICHARD:\nNay Warwick, single out some other chase;\nFor I myself will hunt this wolf to death."]},
]


def dedup_examples(session, args):
    """The example pairs the dedup widget offers (real speeches, with their plays)."""
    return {"examples": DEDUP_EXAMPLES}


def validate_dedup_pair(args):
    """{text_a, text_b, k, n_hashes, bands, threshold} -> (texts, {k, n_hashes, bands, threshold}), or
    InputError naming every bad field.

    Each text is checked for its type, its length (before any work) and for having a character
    left after normalisation; all bad fields are reported together."""
    errors, texts = {}, []
    for field, label in (("text_a", "Text A"), ("text_b", "Text B")):
        try:
            texts.append(_text(args.get(field), field, DATA_LIMITS["dedup_text_max"], label))
        except InputError as e:
            errors.update(e.errors)
    values = {}
    for field, lo, hi in (("k", 1, DATA_LIMITS["dedup_k_max"]), ("n_hashes", 1, DATA_LIMITS["dedup_hashes_max"])):
        try:
            values[field] = _labelled(parse_int, args.get(field), field, lo, hi)
        except InputError as e:
            errors.update(e.errors)
    try:
        values["bands"] = _labelled(parse_int, args.get("bands"), "bands", 1, values.get("n_hashes", DATA_LIMITS["dedup_hashes_max"]))
    except InputError as e:  # at most one band per hash function
        errors.update(e.errors)
    try:
        values["threshold"] = _labelled(parse_number, args.get("threshold"), "threshold")
        if not 0 <= values["threshold"] <= 1:
            raise _field_error("threshold", f"Threshold must be between 0 and 1; got {values['threshold']:g}.")
    except InputError as e:
        errors.update(e.errors)
    if errors:
        raise InputError(errors)
    return texts, values


@checked_by(validate_dedup_pair)
def dedup_pair(session, args):
    """Two reader texts -> pylib.studies.dedup.compare_pair, with every field validated first
    (validate_dedup_pair)."""
    texts, values = validate_dedup_pair(args)
    r = dedup.compare_pair(texts[0], texts[1], **values)
    shown = DATA_LIMITS["dedup_shingles_shown"]
    r["shingles_truncated"] = [len(s) > shown for s in r["shingles"]]
    r["shingles"] = [s[:shown] for s in r["shingles"]]
    r["shared"] = r["shared"][:shown]
    return r


OPS = {
    "data_window": window,
    "data_excerpt": excerpt,
    "data_bpe_start": bpe_start,
    "data_bpe_chunk": bpe_chunk,
    "data_bpe_finish": bpe_finish,
    "data_pack_window": pack_window,
    "data_leak": leak_test,
    "data_mix_start": mix_start,
    "data_mix_chunk": mix_chunk,
    "data_mix_finish": mix_finish,
    "data_own_start": own_start,
    "data_own_chunk": own_chunk,
    "data_own_finish": own_finish,
    "data_dedup_examples": dedup_examples,
    "data_dedup_pair": dedup_pair,
}
