"""pylib.web, the page facade, in CPython: reader input is refused with a clear message, the
tokenizer reports drops, and a chunked run gives the same records as pylib.train in one call."""

import dataclasses
import json

import pytest

from pylib import data, model, train, web
from pylib.web.inputs import DEFAULT_TEMPERATURE

TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east.\n" * 40


@pytest.fixture
def session(tmp_path):
    """A Session over a tiny corpus written the way build.py writes _site/data/."""
    vocab = data.build_char_vocab(TEXT, n_chars=64)
    ids, _ = data.pack_documents([TEXT] * 3, vocab)
    (tmp_path / "train.bin").write_bytes(ids.tobytes())
    (tmp_path / "val.bin").write_bytes(ids[::-1].copy().tobytes())
    (tmp_path / "vocab.json").write_text(json.dumps(vocab.to_json()))
    s = web.Session()
    s.load_corpus(tmp_path)
    return s


def settings(**overrides):
    d = train.TrainConfig()
    base = {"lr": str(d.lr), "steps": str(d.steps), "batch_size": str(d.batch_size), "seed": str(d.seed)}
    return {**base, **overrides}


# ---------------------------------------------------------------------------
# Validation


@pytest.mark.parametrize(
    "field, raw, fragment",
    [
        ("lr", "", "is empty"),
        ("lr", "   ", "is empty"),
        ("lr", None, "is empty"),
        ("lr", "abc", "must be a number"),
        ("lr", "NaN", "finite"),
        ("lr", "inf", "finite"),
        ("lr", "-0.01", "greater than 0"),
        ("lr", "0", "greater than 0"),
        ("lr", "1e6", "at most"),
        ("steps", "1e12", "between"),
        ("steps", "0", "between"),
        ("steps", "2.5", "whole number"),
        ("batch_size", "0", "between"),
        ("batch_size", "1e9", "between"),
        ("seed", "-1", "between"),
        ("seed", "<img src=x onerror=alert(1)>", "must be a number"),
        ("temperature", "0", "greater than 0"),
    ],
)
def test_bad_train_settings_raise_a_message_naming_the_field(field, raw, fragment):
    with pytest.raises(web.InputError) as e:
        web.validate_train_settings(settings(**{field: raw}))
    assert list(e.value.errors) == [field]
    assert fragment in e.value.errors[field]
    assert e.value.errors[field].startswith(web.FIELD_NAMES[field])


def test_every_bad_field_is_reported_at_once():
    with pytest.raises(web.InputError) as e:
        web.validate_train_settings(settings(lr="x", steps="-3", batch_size=""))
    assert set(e.value.errors) == {"lr", "steps", "batch_size"}


def test_long_input_is_shortened_in_the_message():
    with pytest.raises(web.InputError) as e:
        web.validate_train_settings(settings(lr="x" * 10_000))
    assert len(e.value.errors["lr"]) < 120


def test_default_settings_give_the_default_train_config():
    cfg, temperature = web.validate_train_settings(settings())
    assert cfg == train.TrainConfig() and temperature == 1.0


def test_numbers_in_scientific_notation_and_with_spaces_are_accepted():
    cfg, _ = web.validate_train_settings(settings(lr=" 3e-3 ", steps="1e2", batch_size="8.0"))
    assert (cfg.lr, cfg.steps, cfg.batch_size) == (3e-3, 100, 8)


def test_text_longer_than_the_limit_is_refused():
    web.validate_text("a" * web.LIMITS["text_max"])
    with pytest.raises(web.InputError, match="limit"):
        web.validate_text("a" * (web.LIMITS["text_max"] + 1))


# ---------------------------------------------------------------------------
# Band


CURVE = {"steps": [0, 10, 20], "val_mean": [4.0, 3.0, 2.5], "val_sd": [0.001, 0.02, 0.05]}


def test_band_verdict_uses_k_sd_with_a_floor():
    k, floor = web.LIMITS["band_k"], web.LIMITS["band_floor"]
    assert web.band_verdict(20, 2.5 + k * 0.05 * 0.99, CURVE)["inside"]
    assert not web.band_verdict(20, 2.5 + k * 0.05 * 1.01, CURVE)["inside"]
    assert web.band_verdict(0, 4.0 + floor * 0.99, CURVE)["inside"]  # k * sd = 0.003 < floor
    assert not web.band_verdict(0, 4.0 + floor * 1.01, CURVE)["inside"]


def test_band_verdict_interpolates_and_is_none_outside_the_measured_steps():
    v = web.band_verdict(15, 2.75, CURVE)
    assert v["mean"] == pytest.approx(2.75) and v["inside"]
    assert web.band_verdict(21, 2.5, CURVE) is None
    assert web.band_verdict(5, 3.5, None) is None


def test_band_series_matches_band_verdict():
    b = web.band_series(CURVE, 25)
    assert len(b["mean"]) == 25 and b["mean"][21] is None
    v = web.band_verdict(15, 2.75, CURVE)
    assert b["hi_k"][15] == pytest.approx(v["mean"] + v["half"])


def test_chapter1_band_shades_exactly_what_flags():
    """shade="flag": the drawn edges are band_verdict's limits at every step, so a value just
    inside an edge is not flagged and one just outside is."""
    b = web.band_series(CURVE, 21, "flag")
    assert set(b) == {"mean", "lo", "hi"}
    for step in range(21):
        v = web.band_verdict(step, b["mean"][step], CURVE)
        assert b["lo"][step] == v["mean"] - v["half"] and b["hi"][step] == v["mean"] + v["half"]
        for edge, inward in [(b["lo"][step], +1), (b["hi"][step], -1)]:
            assert web.band_verdict(step, edge + inward * 1e-9, CURVE)["inside"]
            assert not web.band_verdict(step, edge - inward * 1e-9, CURVE)["inside"]
    with pytest.raises(ValueError):
        web.band_series(CURVE, 21, "both")


# ---------------------------------------------------------------------------
# Session


def test_tokenize_reports_dropped_characters_including_emoji(session):
    r = session.tokenize("ROMEO \U0001F600<b>")
    ids, dropped = session.vocab.encode("ROMEO \U0001F600<b>")
    assert r["ids"] == ids.tolist() and r["n_dropped"] == dropped
    assert {"char": "\U0001F600", "codepoint": "U+1F600"} in r["dropped"]


def test_tokenize_applies_the_corpus_rule_before_encoding(session):
    r = session.tokenize("café—naïve")
    ids, dropped = session.vocab.encode("cafe--naive")
    assert r["ids"] == ids.tolist() and r["n_dropped"] == dropped
    assert "\u00e9" not in [d["char"] for d in r["dropped"]]


def test_tokenize_truncates_the_ids_it_returns_but_counts_all(session):
    text = "a" * (web.LIMITS["ids_shown"] + 10)
    r = session.tokenize(text)
    assert r["truncated"] and len(r["ids"]) == web.LIMITS["ids_shown"] and r["n_tokens"] == len(text)


def test_vocab_table_names_the_invisible_symbols(session):
    rows = session.vocab_table()
    names = {r["char"]: r["name"] for r in rows}
    assert names["\n"] == "newline" and names[" "] == "space"
    assert rows[-1]["id"] == session.vocab.eos_id and "EOS" in rows[-1]["name"]


def test_chunked_run_matches_one_call_of_pylib_train(session):
    s = settings(steps="7", batch_size="4", seed="5")
    session.start_run(s)
    records = []
    while True:
        chunk = session.train_chunk(seconds=0.0)  # one step per chunk
        records += chunk["records"]
        if chunk["done"]:
            break
    cfg = dataclasses.replace(train.TrainConfig(), steps=7, batch_size=4, seed=5)
    model_cfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    _, history = train.train(model_cfg, cfg, session.train_tokens, session.val_tokens)
    assert [r["loss"] for r in records] == [r["loss"] for r in history]
    assert records[-1]["val"] == history[-1]["val"]
    result = session.finish_run()
    assert result["final_train_loss"] == history[-1]["loss"] and not result["diverged"]
    assert isinstance(result["sample"], str)
    npz = session.export_npz()
    assert npz[:2] == b"PK"  # a zip archive


def test_a_huge_learning_rate_ends_the_run_as_diverged_without_nan(session):
    session.start_run(settings(lr="1000", steps="50", batch_size="4"))
    chunk = session.train_chunk(seconds=5.0)
    assert chunk["done"] and chunk["diverged_at"] is not None
    text = json.dumps(chunk, allow_nan=False)  # raises on NaN or infinity
    assert "NaN" not in text
    result = session.finish_run()
    assert result["diverged"] and result["sample"] is None


def test_band_is_compared_only_for_default_settings(session):
    info = session.start_run(settings(seed="1"), curve=CURVE)
    assert not info["is_default"] and not info["band_applies"] and info["band"] is not None
    info = session.start_run(settings(), curve=CURVE)
    assert info["is_default"] and info["band_applies"]
    assert info["band"] == web.band_series(CURVE, train.TrainConfig().steps, "flag")  # the band the page draws


def test_handle_returns_input_errors_as_json(session):
    web.SESSION = session
    try:
        out = json.loads(web.handle("train_start", json.dumps({"settings": settings(lr="abc")})))
        assert out == {"ok": False, "kind": "input", "message": out["message"], "errors": {"lr": out["errors"]["lr"]}}
        ok = json.loads(web.handle("tokenize", json.dumps({"text": "ab"})))
        assert ok["ok"] and ok["value"]["n_tokens"] == 2
    finally:
        web.SESSION = web.Session()


# ---------------------------------------------------------------------------
# Live samples: the run's text as it trains


def run_with_live_samples(session, s):
    """A run with live samples, one step per chunk: (records, samples, finish result)."""
    session.start_run(s, live_samples=True)
    records, samples = [], []
    while True:
        chunk = session.train_chunk(seconds=0.0)
        records += chunk["records"]
        samples += chunk["samples"]
        if chunk["done"]:
            break
    return records, samples, session.finish_run()


def test_live_sample_steps_are_evenly_spaced_evaluations_ending_at_the_last_step():
    d = train.TrainConfig()
    assert web.session.live_sample_steps(d) == [80, 160, 240, 320, 400]  # the default run: 400 steps, evals every 10
    for steps in (1, 2, 11, 23, 399, 401, 5000):
        cfg = dataclasses.replace(d, steps=steps)
        at = web.session.live_sample_steps(cfg)
        assert at[-1] == steps and at == sorted(set(at)) and len(at) <= web.LIMITS["live_samples"]
        # every mid-run one is at an evaluation before its step's update (a multiple of the interval, not the last step)
        assert all(s % d.eval_interval == 0 and 0 < s < steps - 1 for s in at[:-1]), (steps, at)
    assert web.session.live_sample_steps(dataclasses.replace(d, steps=5000)) == [1000, 2000, 3000, 4000, 5000]


def test_live_samples_are_sample_text_on_the_weights_their_loss_was_scored_on(session):
    """Each live sample is pylib.web.session.sample_text on the weights after `step` updates, at the run's
    temperature and seed, with the validation loss of those weights; the last is the finished run's
    sample; sampling does not change the run (the records are those of a run without samples)."""
    s = settings(steps="23", batch_size="4", seed="3")
    records, samples, result = run_with_live_samples(session, s)
    cfg = dataclasses.replace(train.TrainConfig(), steps=23, batch_size=4, seed=3)
    assert [x["step"] for x in samples] == web.session.live_sample_steps(cfg) == [10, 20, 23]
    val = {r["step"]: r["val"] for r in records if r.get("val") is not None}
    assert [x["val"] for x in samples] == [val[10], val[20], val[22]]  # the last evaluation follows step 22's update
    assert result["sample"] == samples[-1]["text"]
    assert result["sample_seconds"] > 0

    # the same run without samples, stopped at each sample's step: the same records, the same text
    other = web.Session()
    other.vocab, other.train_tokens, other.val_tokens = session.vocab, session.train_tokens, session.val_tokens
    other.start_run(s)
    assert other.run["sample_at"] == []
    plain, texts = [], []
    for x in samples:
        while other.run["state"]["step"] < x["step"]:
            chunk = other.train_chunk(seconds=0.0)
            assert chunk["samples"] == []
            plain += chunk["records"]
        texts.append(web.session.sample_text(session.vocab, other.run["state"]["params"], other.run["model_cfg"],
                                             DEFAULT_TEMPERATURE, 3))
    assert [x["text"] for x in samples] == texts
    assert [r["loss"] for r in plain] == [r["loss"] for r in records]
    assert other.finish_run()["sample"] == result["sample"]
    assert len(set(texts)) > 1  # the text changes as it trains


def test_a_stopped_run_keeps_its_live_samples_and_samples_where_it_stopped(session):
    session.start_run(settings(steps="40", batch_size="4", seed="1"), live_samples=True)
    samples = []
    while session.run["state"]["step"] < 25:
        samples += session.train_chunk(seconds=0.0)["samples"]
    result = session.finish_run()  # what the worker calls after a Stop
    assert [x["step"] for x in samples] == [10, 20]
    params, mc = session.run["state"]["params"], session.run["model_cfg"]
    assert result["steps"] == 25 and result["sample"] == web.session.sample_text(session.vocab, params, mc, DEFAULT_TEMPERATURE, 1)


def test_a_live_sample_reaches_the_page_as_its_own_characters(tmp_path):
    """Markup the model writes is text: a model trained on '<b>bold</b>' writes '<b>' in its live samples,
    and the chunk's JSON carries those characters unchanged (the page sets them with textContent)."""
    text = "<b>bold</b> & <i>it</i>\n" * 200
    vocab = data.build_char_vocab(text)
    ids, _ = data.pack_documents([text] * 3, vocab)
    for name in ("train.bin", "val.bin"):
        (tmp_path / name).write_bytes(ids.tobytes())
    (tmp_path / "vocab.json").write_text(json.dumps(vocab.to_json()))
    web.SESSION = web.Session()
    try:
        web.SESSION.load_corpus(tmp_path)
        start = json.loads(web.handle("train_start", json.dumps({"settings": settings(steps="60", batch_size="8"), "live_samples": True})))
        assert start["ok"] and start["value"]["sample_steps"] == [10, 20, 40, 50, 60]
        samples = []
        while True:
            out = json.loads(web.handle("train_chunk", "{}"))
            samples += out["value"]["samples"]
            if out["value"]["done"]:
                break
        assert any("<b>" in x["text"] for x in samples), [x["text"] for x in samples]
        assert samples[-1]["text"] == json.loads(web.handle("train_finish", "{}"))["value"]["sample"]
    finally:
        web.SESSION = web.Session()
