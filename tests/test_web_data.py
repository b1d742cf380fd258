"""Chapter 2's page ops on CPython: reader input is validated with clear messages, and the ops work."""

import json

import numpy as np
import pytest

from pylib import data, web
from pylib.web import data_ops as web_data
from pylib.web import InputError


@pytest.fixture(scope="module")
def session():
    s = web.Session()
    corpus = data.build_corpus()
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


def test_mixture_weight_is_validated(session):
    spans = data.play_spans(data.read_plays(), session.vocab)
    for raw in ["", "-0.1", "1.5", "NaN", "🎭"]:
        with pytest.raises(InputError):
            web_data.mix_start(session, {"weight": raw, "steps": "5", "spans": spans})
    web_data.mix_start(session, {"weight": "1", "steps": "5", "spans": spans})
    while not web_data.mix_chunk(session, {})["done"]:
        pass
    result = web_data.mix_finish(session, {})
    assert result["fractions"] == [1.0, 0.0] and np.isfinite(result["held_out"]).all()


def test_mixture_held_out_loss_is_the_whole_held_out_play(session):
    # The page's held-out readouts use the same evaluation as the measured table: every window of the play.
    from pylib import evaluation
    from pylib.studies import mixture

    spans = data.play_spans(data.read_plays(), session.vocab)
    web_data.mix_start(session, {"weight": "0.5", "steps": "2", "seed": "0", "spans": spans})
    while not web_data.mix_chunk(session, {})["done"]:
        pass
    state, cfg = web_data._RUNS["mix"]["state"], web_data._RUNS["mix"]["cfg"]
    sources = mixture.genre_sources(session.train_tokens, spans)
    expected = [evaluation.full_loss(state["params"], cfg, sources[g][1]) for g in mixture.GENRES]
    assert web_data.mix_finish(session, {})["held_out"] == expected
