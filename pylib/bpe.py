r"""Byte-pair encoding (Sennrich et al. 2016, after Gage 1994), learnt on token ids with NumPy.

The base symbols are characters (for the course corpus: its 64 characters and EOS, in their
CharVocab ids). Training repeats one step: count every adjacent pair of symbols in the sequence
(overlapping pairs count, as minbpe's get_stats does), take the most frequent pair, give it the
next free id, and replace its occurrences left to right without overlap ("aaa" -> "Z a").

Tie-break (documented because results depend on it): among pairs with the same count, the pair
with the smallest (left id, right id) wins. Base symbols have the smallest ids and each merge
gets the next id, so older symbols win over newer ones. This is the rule that reproduces
Wikipedia's "aaabdaaabac" example (ab is chosen over Za at the second merge).

A stop id (EOS) never takes part in a merge, so no token spans two documents.

Pre-tokenisation is optional. Without it (the default), merges may cross word boundaries: a
learnt token can be "e " or " the ". With split=True the text is first cut into pre-tokens by
PRETOKEN_PATTERN, the standard-library-re form of GPT-2's pattern (openai/gpt-2, src/encoder.py
line 53), and no pair that straddles a cut is counted or merged. GPT-2's pattern uses \p{L} and
\p{N}, which need the third-party `regex` module; here letters are [^\W\d_] and numbers \d. On
ASCII text (the course corpus's whole alphabet) the two patterns cut identically. Beyond ASCII
they differ only at the edges: [^\W\d_] also takes numeric characters that are not decimal
digits (such as "²" or "½", which \p{N} would class as numbers), and \d takes only decimal
digits. The cuts are a boolean array `starts` (True where a pre-token starts) carried beside
the ids: a merged token keeps its left half's flag.

Counting is one np.bincount over pair codes left * K + right; replacement is vectorised with
boolean masks, so one merge costs a few passes over the id array.

Legend: N sequence length, K the id space (base symbols + merges).
"""

import re
from dataclasses import dataclass

import numpy as np

# GPT-2's pre-tokenisation pattern, with \p{L} -> [^\W\d_] and \p{N} -> \d (see the module docstring)
PRETOKEN_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""
_PRETOKEN = re.compile(PRETOKEN_PATTERN)


def pretokens(text):
    """The text cut into GPT-2-style pre-tokens (their concatenation is the text)."""
    return _PRETOKEN.findall(text)


def pretoken_starts(text, stop_char=None):
    """(N,) bool for a text of N characters: True where a pre-token starts.

    stop_char (EOS's character) is always a pre-token of its own."""
    starts = np.zeros(len(text), dtype=bool)
    starts[[m.start() for m in _PRETOKEN.finditer(text)]] = True
    if stop_char is not None and len(text):
        at = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32) == ord(stop_char)
        starts |= at
        starts[1:] |= at[:-1]
    return starts

# ---------------------------------------------------------------------------
# One merge


def pair_counts(ids, K, stop_id=None, starts=None):
    """Counts of every adjacent pair as a dict-free array: (codes, counts), codes = left * K + right.

    starts (N,) bool, optional: a pair whose right half starts a pre-token is not counted."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    codes = ids[:-1] * K + ids[1:]  # (N-1,)
    ok = None
    if stop_id is not None:
        ok = (ids[:-1] != stop_id) & (ids[1:] != stop_id)
    if starts is not None:
        ok = ~starts[1:] if ok is None else ok & ~starts[1:]
    if ok is not None:
        codes = codes[ok]
    if K * K <= 1 << 22:  # a dense count is fastest while the table is small
        counts = np.bincount(codes.astype(np.intp))  # intp: Pyodide's wasm32 bincount takes int32 only
        nz = np.flatnonzero(counts)
        return nz, counts[nz]
    return np.unique(codes, return_counts=True)  # sorted codes, like the dense path


def best_pair(ids, K, stop_id=None, starts=None):
    """(left, right, count) of the most frequent pair, smallest (left, right) on ties; None if no pair."""
    codes, counts = pair_counts(ids, K, stop_id, starts)
    if counts.size == 0:
        return None
    i = int(np.argmax(counts))  # the first maximum: codes are sorted, so the smallest pair
    return int(codes[i] // K), int(codes[i] % K), int(counts[i])


def merge(ids, left, right, new_id):
    """Replace each non-overlapping occurrence of (left, right), left to right, by new_id."""
    return merge_split(ids, None, left, right, new_id)[0]


def merge_split(ids, starts, left, right, new_id):
    """merge, except where the right half starts a pre-token (starts (N,) bool, or None: no cuts).

    Returns (ids, starts) for the merged sequence (starts None if it was None)."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size < 2:
        return ids.copy(), (None if starts is None else starts.copy())
    hit = (ids[:-1] == left) & (ids[1:] == right)  # (N-1,) a pair starts here
    if starts is not None:
        hit &= ~starts[1:]
    if left == right:  # runs like "aaa" match at consecutive positions: keep every other one
        idx = np.arange(hit.size)
        run_start = np.maximum.accumulate(np.where(hit & ~np.r_[False, hit[:-1]], idx, 0))
        hit &= (idx - run_start) % 2 == 0
    pos = np.flatnonzero(hit)
    out = ids.copy()
    out[pos] = new_id
    keep = np.ones(ids.size, dtype=bool)
    keep[pos + 1] = False  # the right half of each merged pair goes
    return out[keep], (None if starts is None else starts[keep])


# ---------------------------------------------------------------------------
# Training, encoding, decoding


@dataclass(frozen=True)
class BPE:
    """A learnt tokenizer: base symbols (strings, ids 0..len-1) and merges ((left, right) -> next id)."""

    base: tuple  # strings, one per base id
    merges: tuple  # ((left, right), ...): merge i creates id len(base) + i
    stop_id: int = None  # a base id that never merges (EOS), or None
    split: bool = False  # learnt (and so applied) within GPT-2-style pre-tokens only

    @property
    def vocab_size(self):
        return len(self.base) + len(self.merges)

    def token_strings(self):
        """The string of every id: a merge's string is its two parts joined."""
        strings = list(self.base)
        for a, b in self.merges:
            strings.append(strings[a] + strings[b])
        return strings

    def starts(self, ids):
        """The pre-token starts of a sequence of base ids, or None if this tokenizer does not split."""
        if not self.split:
            return None
        text = "".join(self.base[i] for i in np.asarray(ids).tolist())
        return pretoken_starts(text, None if self.stop_id is None else self.base[self.stop_id])

    def encode_ids(self, ids, n_merges=None):
        """Base ids -> BPE ids, applying the first n_merges merges (all by default) in order."""
        ids = np.asarray(ids, dtype=np.int64)
        starts = self.starts(ids)
        for i, (a, b) in enumerate(self.merges[:n_merges]):
            ids, starts = merge_split(ids, starts, a, b, len(self.base) + i)
        return ids

    def decode(self, ids):
        """BPE ids -> the text they stand for."""
        strings = self.token_strings()
        return "".join(strings[i] for i in ids)


def train_bpe(ids, base, n_merges, stop_id=None, on_merge=None, split=False):
    """Learn up to n_merges merges on base ids (N,); returns (BPE, final ids).

    Stops early when no pair occurs twice (a merge of a single occurrence saves one token only by
    adding one to the vocabulary). on_merge(i, left, right, count, length) is called after each.
    split=True learns within pre-tokens only (PRETOKEN_PATTERN; base symbols must be characters).
    """
    ids = np.asarray(ids, dtype=np.int64)
    K = len(base) + n_merges  # every id that can exist
    starts = BPE(base=tuple(base), merges=(), stop_id=stop_id, split=split).starts(ids)
    merges = []
    for i in range(n_merges):
        found = best_pair(ids, K, stop_id, starts)
        if found is None or found[2] < 2:
            break
        a, b, count = found
        ids, starts = merge_split(ids, starts, a, b, len(base) + i)
        merges.append((a, b))
        if on_merge:
            on_merge(i, a, b, count, int(ids.size))
    return BPE(base=tuple(base), merges=tuple(merges), stop_id=stop_id, split=split), ids


def text_base(text):
    """The base alphabet of a text: its distinct characters (code points), sorted; and the text's ids."""
    chars = sorted(set(text))
    index = {ch: i for i, ch in enumerate(chars)}
    return tuple(chars), np.array([index[ch] for ch in text], dtype=np.int64)


def train_bpe_on_text(text, n_merges, on_merge=None, split=False):
    """BPE on a string, with its characters as the base symbols; returns (BPE, final ids)."""
    base, ids = text_base(text)
    return train_bpe(ids, base, n_merges, on_merge=on_merge, split=split)


def crosses_pretokens(token):
    """True if a token's string is more than one pre-token: a split tokenizer could never learn it."""
    return len(pretokens(token)) > 1
