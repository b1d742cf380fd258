"""Supervised fine-tuning (pylib.studies.sft): the prompt/response set from the plays' structure,
the two loss masks, and fine-tuning that lowers the response loss."""

import dataclasses

import numpy as np
import pytest

from pylib import data, loss as xent, model
from pylib.studies import sft

TEXT = ("HAMLET:\nTo be, or not to be, that is the question:\nWhether 'tis nobler\n\n"
        "OPHELIA:\nGood my lord,\nHow does your honour for this many a day?\n")
VOCAB = data.build_char_vocab(TEXT + "ABCDEFGHIJKLMNOPQRSTUVWXYZ?W", n_chars=64)
CFG = dataclasses.replace(model.GPTConfig(), vocab_size=VOCAB.size)
PAIRS = (("HAMLET", "To be, or not to be"), ("OPHELIA", "Good my lord,"))


def test_speeches_reads_speaker_and_lines_from_the_corpus_form():
    text = TEXT + "\u2404\n\nHORATIO:\nHail to your lordship!\nLine: with a colon:\n"
    assert sft.speeches(text) == [
        ("HAMLET", "To be, or not to be, that is the question:"), ("HAMLET", "Whether 'tis nobler"),
        ("OPHELIA", "Good my lord,"), ("OPHELIA", "How does your honour for this many a day?"),
        ("HORATIO", "Hail to your lordship!"), ("HORATIO", "Line: with a colon:")]


def test_encode_pairs_masks_the_prompt_the_response_and_the_padding():
    x, y, pm, rm = sft.encode_pairs(PAIRS, VOCAB, CFG.block_size)
    for i, (speaker, line) in enumerate(PAIRS):
        prompt = sft.prompt_text(line)
        assert VOCAB.decode(y[i][rm[i] == 1].tolist()).startswith(speaker)  # the name, then EOS
        assert y[i][rm[i] == 1][-1] == VOCAB.eos_id and rm[i].sum() == len(speaker) + 1
        assert VOCAB.decode(y[i][pm[i] == 1].tolist()) == prompt[1:]  # every prompt target
        n = len(prompt) + len(speaker)  # inputs: prompt + name; the last target is EOS
        assert (pm[i][n:] == 0).all() and (rm[i][n:] == 0).all()  # padding is in neither mask
        assert VOCAB.decode(x[i, :n].tolist()) == prompt + speaker
    whole = sft.loss_mask("whole", pm, rm)
    np.testing.assert_array_equal(whole, pm + rm)
    np.testing.assert_array_equal(sft.loss_mask("response", pm, rm), rm)
    with pytest.raises(ValueError, match="arm"):
        sft.loss_mask("prompt", pm, rm)


def test_split_prompt_mask_separates_the_verse_from_the_fixed_question():
    x, y, pm, rm = sft.encode_pairs(PAIRS, VOCAB, CFG.block_size)
    q = len(sft.SFT_SET["question"])
    verse, template = sft.split_prompt_mask(pm, q)
    np.testing.assert_array_equal(verse + template, pm)
    for i, (speaker, line) in enumerate(PAIRS):
        assert VOCAB.decode(y[i][template[i] == 1].tolist()) == sft.SFT_SET["question"]
        assert VOCAB.decode(y[i][verse[i] == 1].tolist()) == line[1:]  # the line's targets, its first character excepted
    assert not (template * rm).any() and not (verse * rm).any()


def test_answer_shapes_counts_stops_capitals_and_exact_names():
    answers = [{"text": "HAMLET", "ended": True}, {"text": "HAMLE", "ended": True},
               {"text": "OPHELIA", "ended": False}, {"text": "and the", "ended": True}]
    assert sft.answer_shapes(answers, ("HAMLET", "OPHELIA")) == {"stops": 0.75, "capitals": 0.75, "candidate": 0.25}


def test_response_only_loss_ignores_the_prompt_targets():
    params = model.init_params(CFG, 0, dtype=np.float64)
    x, y, pm, rm = sft.encode_pairs(PAIRS, VOCAB, CFG.block_size)
    loss, grads = model.loss_and_grads(params, CFG, x, y, rm)
    y2 = y.copy()
    y2[pm == 1] = (y2[pm == 1] + 7) % VOCAB.size  # other prompt targets, same inputs
    loss2, grads2 = model.loss_and_grads(params, CFG, x, y2, rm)
    assert loss2 == loss
    for k in grads:
        np.testing.assert_array_equal(grads2[k], grads[k])
    loss3, _ = model.loss_and_grads(params, CFG, x, y2, sft.loss_mask("whole", pm, rm))  # the whole arm sees them
    assert loss3 != model.loss_and_grads(params, CFG, x, y, sft.loss_mask("whole", pm, rm))[0]


def test_fine_tuning_lowers_the_response_loss_and_learns_the_answer():
    params = model.init_params(CFG, 1)
    x, y, pm, rm = sft.encode_pairs(PAIRS, VOCAB, CFG.block_size)
    before = sft.masked_mean_loss(params, CFG, x, y, rm)
    state = sft.init_finetune(params, 0)
    settings = dict(sft.SFT, steps=150, batch_size=4, lr=1e-2)
    records = sft.sft_steps(state, CFG, x, y, rm, settings["steps"], settings)
    assert len(records) == 150 and state["step"] == 150
    after = sft.masked_mean_loss(state["params"], CFG, x, y, rm)
    assert after < 0.3 * before
    np.testing.assert_array_equal(params["wte"], model.init_params(CFG, 1)["wte"])  # the input is not touched
    logps = sft.candidate_logps(state["params"], CFG, PAIRS, ("HAMLET", "OPHELIA"), VOCAB)  # (2, 2)
    assert logps[0, 0] > logps[0, 1] and logps[1, 1] > logps[1, 0]
    assert sft.speaker_accuracy(state["params"], CFG, PAIRS, ("HAMLET", "OPHELIA"), VOCAB) == 1.0
    assert sft.answer(state["params"], CFG, PAIRS[0][1], VOCAB) == {"text": "HAMLET", "ended": True}
    sampled = sft.sample_answers(state["params"], CFG, [line for _, line in PAIRS], VOCAB, np.random.default_rng(0))
    assert sampled == [{"text": "HAMLET", "ended": True}, {"text": "OPHELIA", "ended": True}]
    scores = sft.evaluate(state["params"], CFG, sft.SFTSet(("HAMLET", "OPHELIA"), PAIRS, PAIRS), VOCAB)
    assert scores["response_loss"] == pytest.approx(after, rel=1e-6) and scores["accuracy"] == 1.0


def test_masked_mean_loss_is_the_mean_over_counted_targets():
    params = model.init_params(CFG, 2, dtype=np.float64)
    x, y, pm, rm = sft.encode_pairs(PAIRS, VOCAB, CFG.block_size)
    logits = model.forward_logits(params, CFG, x)
    expected = xent.cross_entropy_forward(logits, y, rm)[0]
    assert abs(sft.masked_mean_loss(params, CFG, x, y, rm, chunk=1) - expected) < 1e-12


def test_build_sft_set_splits_fixed_pairs_that_fit_with_every_answer(shared_corpus):
    corpus = shared_corpus
    s = sft.build_sft_set(corpus.val, corpus.vocab, CFG.block_size)
    assert len(s.speakers) == sft.SFT_SET["speakers"] and len(s.test) == sft.SFT_SET["test_pairs"]
    assert not set(s.train) & set(s.test) and len(set(s.train)) == len(s.train)
    longest = max(len(n) for n in s.speakers)
    for speaker, line in s.train + s.test:
        assert speaker in s.speakers and len(sft.prompt_text(line)) + longest + 1 <= CFG.block_size + 1
    assert sft.build_sft_set(corpus.val, corpus.vocab, CFG.block_size) == s  # fixed
    with pytest.raises(ValueError, match="pairs fit"):
        sft.build_sft_set(corpus.val[:5000], corpus.vocab, CFG.block_size)


# ---------------------------------------------------------------------------
# The page's ops (pylib.web.posttrain_ops), in CPython


@pytest.fixture(scope="module")
def web_session(tmp_path_factory, shared_corpus):
    """A fresh pylib.web Session over the course corpus, written as build.py writes _site/data/."""
    import json
    from pylib import web
    from pylib.web import posttrain_ops
    corpus = shared_corpus
    folder = tmp_path_factory.mktemp("data")
    (folder / "train.bin").write_bytes(corpus.train.tobytes())
    (folder / "val.bin").write_bytes(corpus.val.tobytes())
    (folder / "vocab.json").write_text(json.dumps(corpus.vocab.to_json()))
    session = web.SESSION  # the one the JSON ops use
    session.load_corpus(folder)
    for key in posttrain_ops._STATE:
        posttrain_ops._STATE[key] = None
    return session


def call(op, args):
    import json
    from pylib import web
    return json.loads(web.handle(op, json.dumps(args)))


def run(session, name, args):
    """What the worker does for run:<name>: start, chunks until done, finish."""
    from pylib.web import posttrain_ops as ops
    info = ops.OPS[f"{name}_start"](session, args)
    chunks = []
    while True:
        chunks.append(ops.OPS[f"{name}_chunk"](session, {}))
        if chunks[-1]["done"]:
            break
    return info, chunks, ops.OPS[f"{name}_finish"](session, {})


def test_page_sft_needs_a_pretrained_model_then_fine_tunes_it(web_session):
    from pylib.web import posttrain_ops as ops
    out = call("posttrain_sft_start", {"arm": "response", "steps": "10", "seed": "0"})
    assert not out["ok"] and "Pretrain the model first" in out["errors"]["pretrained"]
    info, chunks, result = run(web_session, "posttrain_pretrain", {"steps": "30", "seed": "0"})
    assert result["complete"] and result["steps"] == 30 and len(result["answers"]) == ops.PAGE["shown"]
    losses = [r["loss"] for c in chunks for r in c["losses"]]
    mcfg, tcfg = sft.pretrain_configs(web_session.vocab.size, 0, 30)
    from pylib import train
    _, history = train.train(mcfg, tcfg, web_session.train_tokens, web_session.val_tokens)
    assert losses == [r["loss"] for r in history]  # the page's run is chapter 1's run, step for step
    info, chunks, result = run(web_session, "posttrain_sft", {"arm": "response", "steps": "40", "seed": "0"})
    assert result["steps"] == 40 and result["arm"] == "response"
    assert result["speakers"] == sft.SFT_SET["speakers"]  # the candidates: chance accuracy is 1 in this many
    assert result["after"]["scores"]["response_loss"] < result["before"]["scores"]["response_loss"]
    answer = call("posttrain_ask", {"line": "  My <b>lord</b>,\n\U0001F600 I come from Rome  ", "seed": "1"})
    assert answer["ok"] and answer["value"]["line"] == "My blordb, I come from Rome"  # <, >, / and the emoji dropped
    assert answer["value"]["dropped"] == 6 and "tuned" in answer["value"] and answer["value"]["tuned_kind"] == "sft"


@pytest.mark.parametrize("args,field,fragment", [
    ({"line": ""}, "line", "empty"),
    ({"line": "   \n "}, "line", "empty"),
    ({"line": "a" * 100000}, "line", "at most"),
    ({"line": "\U0001F600\U0001F600"}, "line", "vocabulary"),
    ({"line": "12345"}, "line", "vocabulary"),
    ({"line": "Good", "seed": "-1"}, "seed", "between"),
    ({"line": "Good", "seed": "1e309"}, "seed", "finite"),
])
def test_page_ask_refuses_bad_input_with_a_message(web_session, args, field, fragment):
    from pylib.web import posttrain_ops as ops
    if ops._STATE["pretrained"] is None:
        run(web_session, "posttrain_pretrain", {"steps": "5", "seed": "0"})
    out = call("posttrain_ask", {"seed": "0", **args})
    assert not out["ok"] and fragment in out["errors"][field]


@pytest.mark.parametrize("args,field", [({"arm": "prompt", "steps": "5", "seed": "0"}, "arm"),
                                        ({"arm": "whole", "steps": "0", "seed": "0"}, "steps"),
                                        ({"arm": "whole", "steps": "NaN", "seed": "0"}, "steps"),
                                        ({"arm": "whole", "steps": "99999999999999999999", "seed": "0"}, "steps")])
def test_page_sft_refuses_bad_settings(web_session, args, field):
    out = call("posttrain_sft_start", args)
    assert not out["ok"] and field in out["errors"]
