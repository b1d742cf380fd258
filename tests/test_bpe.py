"""Byte-pair encoding: Wikipedia's worked example, round trips, the stop id, and merge details."""

import numpy as np

from pylib import bpe


def test_bpe_reproduces_wikipedia_aaabdaaabac():
    # https://en.wikipedia.org/wiki/Byte_pair_encoding: aaabdaaabac -> ZabdZabac (Z=aa)
    # -> ZYdZYac (Y=ab) -> XdXac (X=ZY). At the second merge ab and Za both occur twice; the
    # tie-break (smallest (left id, right id), base symbols first) picks ab, as Wikipedia does.
    tok, ids = bpe.train_bpe_on_text("aaabdaaabac", 3)
    a, b, c, d = (tok.base.index(ch) for ch in "abcd")
    Z, Y, X = 4, 5, 6
    assert tok.base == ("a", "b", "c", "d")
    assert tok.merges == ((a, a), (a, b), (Z, Y))
    assert ids.tolist() == [X, d, X, a, c]
    assert [tok.token_strings()[i] for i in (Z, Y, X)] == ["aa", "ab", "aaab"]
    # and step by step, through the intermediate sequences
    _, base_ids = bpe.text_base("aaabdaaabac")
    assert tok.encode_ids(base_ids, 1).tolist() == [Z, a, b, d, Z, a, b, a, c]
    assert tok.encode_ids(base_ids, 2).tolist() == [Z, Y, d, Z, Y, a, c]


def test_training_stops_when_no_pair_repeats():
    tok, ids = bpe.train_bpe_on_text("aaabdaaabac", 50)
    assert len(tok.merges) == 3  # XdXac: every pair now occurs once


def test_merge_is_left_to_right_without_overlap():
    assert bpe.merge(np.array([0, 0, 0, 0, 0, 1]), 0, 0, 9).tolist() == [9, 9, 0, 1]
    assert bpe.merge(np.array([0, 0, 0, 1, 0, 0]), 0, 0, 9).tolist() == [9, 0, 1, 9]
    assert bpe.merge(np.array([0, 1, 0, 1]), 0, 1, 9).tolist() == [9, 9]


def test_encode_decode_round_trip_with_emoji_and_markup():
    text = "<b>to be</b> or not to be 🎭 — that is the question; to be 🎭🎭!" * 3
    tok, ids = bpe.train_bpe_on_text(text, 30)
    assert tok.decode(ids) == text
    _, base_ids = bpe.text_base(text)
    np.testing.assert_array_equal(tok.encode_ids(base_ids), ids)
    assert ids.size < len(text)


def test_stop_id_never_merges():
    # 0 1 2 | 0 1 2 | ... with 2 as the stop id: "0 1" merges, nothing touches 2
    ids = np.array([0, 1, 2] * 10)
    tok, out = bpe.train_bpe(ids, ("a", "b", "|"), 5, stop_id=2)
    assert tok.merges == ((0, 1),)
    assert out.tolist() == [3, 2] * 10


def test_counts_overlapping_pairs_like_minbpe():
    # "aaaa" holds the pair (a, a) three times when counted with overlap
    codes, counts = bpe.pair_counts(np.array([0, 0, 0, 0]), 2)
    assert codes.tolist() == [0] and counts.tolist() == [3]


def test_pretokens_follow_gpt2s_pattern_on_ascii():
    # GPT-2's pattern (openai/gpt-2 src/encoder.py line 53): contractions, a space joined to the
    # word, number or punctuation run after it, and trailing whitespace left before the next word.
    text = "I'll say: the cat's  hat, 1999 ok!!  \n\nNAME:\n"
    assert bpe.pretokens(text) == ["I", "'ll", " say", ":", " the", " cat", "'s", " ", " hat", ",", " 1999",
                                   " ok", "!!", "  \n", "\n", "NAME", ":", "\n"]
    assert "".join(bpe.pretokens(text)) == text


def test_split_bpe_never_merges_across_pretokens_and_unsplit_bpe_does():
    text = "the cat sat on the mat; the cat ate the rat. " * 20
    split, split_ids = bpe.train_bpe_on_text(text, 40, split=True)
    plain, _ = bpe.train_bpe_on_text(text, 40)
    learnt = lambda tok: tok.token_strings()[len(tok.base):]  # noqa: E731
    assert learnt(split) and not any(bpe.crosses_pretokens(s) for s in learnt(split))
    assert any(bpe.crosses_pretokens(s) for s in learnt(plain))  # e.g. "the cat" with its spaces
    # every token of the split encoding lies inside one pre-token, and encoding repeats training
    assert "".join(split.token_strings()[i] for i in split_ids) == text
    _, base_ids = bpe.text_base(text)
    np.testing.assert_array_equal(split.encode_ids(base_ids), split_ids)
    bounds = np.cumsum([len(p) for p in bpe.pretokens(text)])
    ends = np.cumsum([len(split.token_strings()[i]) for i in split_ids])
    assert set(bounds) <= set(ends)  # no token spans a pre-token boundary


def test_split_keeps_a_run_apart_at_a_cut():
    # "aa aa": with the cut before " a", (a, a) merges inside each pre-token only
    ids = np.array([0, 0, 0, 0])
    starts = np.array([True, False, True, False])
    out, st = bpe.merge_split(ids, starts, 0, 0, 9)
    assert out.tolist() == [9, 9] and st.tolist() == [True, True]
    starts = np.array([True, False, False, True])
    out, st = bpe.merge_split(np.array([0, 0, 0, 0]), starts, 0, 0, 9)
    assert out.tolist() == [9, 0, 0] and st.tolist() == [True, False, True]


def test_split_treats_the_stop_symbol_as_its_own_pretoken():
    starts = bpe.pretoken_starts("ab\u2404cd", stop_char="\u2404")
    assert starts.tolist() == [True, False, True, True, False]
