"""Chapter 2's page ops on CPython: reader input is validated with clear messages, and the ops work."""

import json

import numpy as np
import pytest

from pylib import data, web
from pylib.web import data_ops as web_data
from pylib.web import InputError


@pytest.fixture(scope="module")
def session(shared_corpus):
    s = web.Session()
    corpus = shared_corpus
    s.vocab, s.train_tokens, s.val_tokens = corpus.vocab, corpus.train, corpus.val
    return s


def test_window_targets_are_inputs_shifted_by_one(session):
    w = web_data.window(session, {"start": "100"})
    assert len(w["x"]) == len(w["y"]) == 64 and w["x"][1:] == w["y"][:-1]


@pytest.mark.parametrize("raw", ["", "abc", "-1", "1e12", "NaN", "🎭", "<b>1</b>", "2.5"])
def test_window_rejects_bad_starts(session, raw):
    with pytest.raises(InputError):
        web_data.window(session, {"start": raw})


@pytest.mark.parametrize("text", [None, "", "   ", "x" * 20001, 42])
def test_bpe_rejects_unusable_text(session, text):
    with pytest.raises(InputError):
        web_data.bpe_start(session, {"text": text, "vocab_size": "100"})


def test_bpe_op_runs_the_wikipedia_example(session):
    web_data.bpe_start(session, {"text": "aaabdaaabac", "vocab_size": "100"})
    merges = []
    while not (chunk := web_data.bpe_chunk(session, {}))["done"] or chunk["merges"]:
        merges += chunk["merges"]
    assert [m["token"] for m in merges] == ["aa", "ab", "aaab"]
    result = web_data.bpe_finish(session, {})
    assert result["tokens"] == ["aaab", "d", "aaab", "a", "c"]
    assert result["stop_reason"] == "no pair occurs twice any more"


def test_bpe_op_with_split_matches_pylib_and_refuses_a_non_boolean(session):
    from pylib import bpe

    text = "the cat sat on the mat; the cat ate the rat. " * 20
    web_data.bpe_start(session, {"text": text, "vocab_size": "60", "split": True})
    merges = []
    while not (chunk := web_data.bpe_chunk(session, {}))["done"] or chunk["merges"]:
        merges += chunk["merges"]
    result = web_data.bpe_finish(session, {})
    tok, ids = bpe.train_bpe_on_text(text, 60 - len(set(text)), split=True)
    assert result["split"] and [m["token"] for m in merges] == tok.token_strings()[len(tok.base):]
    assert result["n_tokens"] == ids.size and not any(bpe.crosses_pretokens(m["token"]) for m in merges)
    for raw in ["yes", 1, "<b>true</b>"]:
        with pytest.raises(InputError, match="Split"):
            web_data.bpe_start(session, {"text": text, "vocab_size": "60", "split": raw})


def test_bpe_op_keeps_emoji_and_markup_as_text(session):
    text = "<script>alert('🎭')</script> 🎭🎭 " * 40
    web_data.bpe_start(session, {"text": text, "vocab_size": "60"})
    while not web_data.bpe_chunk(session, {})["done"]:
        pass
    result = web_data.bpe_finish(session, {})
    assert "".join(result["tokens"]) == text[: len("".join(result["tokens"]))]
    json.dumps(result)  # JSON-safe, emoji included


def test_leak_op_masked_logits_of_other_documents_do_not_move(session):
    w = web_data.pack_window(session, {"start": "auto"})
    assert w["n_docs"] >= 2
    pos = w["doc_ids"].index(0)  # a character of the first document
    if w["chars"][pos] == data.EOS_DISPLAY:
        pos += 1
    r = web_data.leak_test(session, {"start": w["start"], "position": pos})
    assert r["max_other_masked"] == 0.0 and r["max_other_unmasked"] > 0.0


def test_own_text_limits(session):
    with pytest.raises(InputError, match="at least 660"):
        web_data.own_start(session, {"text": "too short", "steps": "5"})
    with pytest.raises(InputError, match="limit is 200,000"):
        web_data.own_start(session, {"text": "x" * 10_000_000, "steps": "5"})
    with pytest.raises(InputError):
        web_data.own_start(session, {"text": "", "steps": "5"})


def test_own_text_trains_and_samples_with_emoji(session):
    text = "🎭 To be, or not to be: <b>that</b> is the question. 😀\n" * 20
    info = web_data.own_start(session, {"text": text, "steps": "3", "seed": "1"})
    assert info["vocab_size"] == len(set(data.normalise_text(text))) + 1  # fewer than 64 kinds: all kept
    while not web_data.own_chunk(session, {})["done"]:
        pass
    result = web_data.own_finish(session, {})
    assert result["steps"] == 3 and isinstance(result["sample"], str)


@pytest.fixture(scope="module")
def spans(session):
    """Each play's span in the packed streams, as the page gets them (build-time data)."""
    return data.play_spans(data.read_plays(), session.vocab)


def test_mixture_weight_is_validated(session, spans):
    for raw in ["", "-0.1", "1.5", "NaN", "🎭"]:
        with pytest.raises(InputError):
            web_data.mix_start(session, {"weight": raw, "steps": "5", "spans": spans})
    web_data.mix_start(session, {"weight": "1", "steps": "5", "spans": spans})
    while not web_data.mix_chunk(session, {})["done"]:
        pass
    result = web_data.mix_finish(session, {})
    assert result["fractions"] == [1.0, 0.0] and np.isfinite(result["held_out"]).all()


def test_mixture_held_out_loss_is_the_whole_held_out_play(session, spans):
    # The page's held-out readouts use the same evaluation as the measured table: every window of the play.
    from pylib import evaluation
    from pylib.studies import mixture

    web_data.mix_start(session, {"weight": "0.5", "steps": "2", "seed": "0", "spans": spans})
    while not web_data.mix_chunk(session, {})["done"]:
        pass
    state, cfg = web_data._RUNS["mix"]["state"], web_data._RUNS["mix"]["cfg"]
    sources = mixture.genre_sources(session.train_tokens, spans)
    expected = [evaluation.full_loss(state["params"], cfg, sources[g][1]) for g in mixture.GENRES]
    assert web_data.mix_finish(session, {})["held_out"] == expected


DEDUP_OK = {"text_a": "To be, or not to be", "text_b": "To be or not to be!", "k": "5", "n_hashes": "64",
            "bands": "16", "threshold": "0.5"}


def test_dedup_op_returns_compare_pair_with_shingles_capped_for_the_page(session):
    from pylib.studies import dedup
    r = web_data.dedup_pair(session, DEDUP_OK)
    full = dedup.compare_pair(DEDUP_OK["text_a"], DEDUP_OK["text_b"], k=5, n_hashes=64, bands=16, threshold=0.5)
    assert {k: v for k, v in r.items() if k != "shingles_truncated"} == full
    json.dumps(r)  # the worker sends it as JSON
    long = "".join(chr(0x4e00 + i) for i in range(1000))
    r = web_data.dedup_pair(session, {**DEDUP_OK, "text_a": long, "text_b": long[::-1]})
    shown = web_data.DATA_LIMITS["dedup_shingles_shown"]
    assert r["shingles_truncated"] == [True, True] and len(r["shingles"][0]) == shown and r["n_shingles"] == [996, 996]


@pytest.mark.parametrize("field,raw", [
    ("text_a", ""), ("text_a", "  \n "), ("text_b", None), ("text_b", 42), ("text_a", "x" * 5001),
    ("k", "0"), ("k", "21"), ("k", "2.5"), ("k", "🎭"), ("n_hashes", "1e309"), ("n_hashes", "NaN"),
    ("n_hashes", "257"), ("n_hashes", "-1"), ("bands", "65"), ("bands", "<b>1</b>"),
    ("threshold", "1.5"), ("threshold", "-0.1"), ("threshold", ""),
])
def test_dedup_op_refuses_bad_fields_by_name(session, field, raw):
    with pytest.raises(InputError) as e:
        web_data.dedup_pair(session, {**DEDUP_OK, field: raw})
    assert list(e.value.errors) == [field]


def test_dedup_op_reports_every_bad_field_at_once(session):
    with pytest.raises(InputError) as e:
        web_data.dedup_pair(session, {"text_a": "", "text_b": "", "k": "x", "n_hashes": "x", "bands": "x", "threshold": "x"})
    assert set(e.value.errors) == {"text_a", "text_b", "k", "n_hashes", "bands", "threshold"}


def test_dedup_examples_are_speeches_of_their_plays():
    from experiments.ch2 import scenes_by_play, speeches
    by_play = {}
    for scene, slug, _ in scenes_by_play():
        by_play.setdefault(slug, set()).update(speeches(scene))
    for example in web_data.DEDUP_EXAMPLES:
        for text, play in zip(example["texts"], example["plays"]):
            assert text in by_play[play], (play, text)


def test_dedup_examples_behave_as_the_chapter_says(session):
    # Chapter 2: at the chapter's settings the first two examples are kept and the reworked line
    # shares no band; with twice the bands it becomes a candidate and is dropped on its estimate.
    from experiments.ch2 import NEAR_DUP
    base = {"k": NEAR_DUP["k"], "n_hashes": NEAR_DUP["n_hashes"], "threshold": NEAR_DUP["threshold"]}
    verdict = lambda ex, bands: web_data.dedup_pair(session, {**base, "bands": bands, "text_a": ex["texts"][0],
                                                              "text_b": ex["texts"][1]})["verdict"]
    first, refrain, reworked = web_data.DEDUP_EXAMPLES
    assert verdict(first, NEAR_DUP["bands"]) == verdict(refrain, NEAR_DUP["bands"]) == "near duplicate"
    assert verdict(reworked, NEAR_DUP["bands"]) == "not a candidate"
    assert verdict(reworked, 2 * NEAR_DUP["bands"]) == "candidate, but its estimate is below the threshold"
