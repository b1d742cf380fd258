"""The trainer: reproducible, chunkable, learns, stops on divergence; sampling and export."""

import dataclasses
import json
import math

import numpy as np
import pytest

from pylib import export, model, sample, train

CFG = model.GPTConfig()
SHORT = train.TrainConfig(steps=40, warmup_steps=5, eval_interval=10, eval_windows=8)


@pytest.fixture(scope="module")
def tokens(shared_corpus):
    """The course corpus (Shakespeare's plays, V = 65), train and validation token streams."""
    corpus = shared_corpus
    assert corpus.vocab.size == CFG.vocab_size
    return corpus.train, corpus.val


def losses(history):
    return [r["loss"] for r in history]


# ---------------------------------------------------------------------------


def test_same_seed_gives_identical_history(tokens):
    _, h1 = train.train(CFG, SHORT, *tokens)
    _, h2 = train.train(CFG, SHORT, *tokens)
    strip = lambda h: [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in h]  # noqa: E731
    assert strip(h1) == strip(h2)  # bit-identical floats
    _, h3 = train.train(CFG, dataclasses.replace(SHORT, seed=1), *tokens)
    assert losses(h3) != losses(h1)


def test_records_are_json_ready_and_eval_where_documented(tokens):
    _, history = train.train(CFG, SHORT, *tokens)
    assert [r["step"] for r in history] == list(range(SHORT.steps))
    json.dumps(history, allow_nan=False)
    for r in history:
        assert {"step", "loss", "lr", "grad_norm", "tokens_per_s"} <= r.keys()
        assert all(type(v) in (int, float) for v in r.values())
    evals = [r["step"] for r in history if "val" in r]
    assert evals == [0, 10, 20, 30, 39]
    assert abs(history[0]["val"] - math.log(CFG.vocab_size)) < 0.05


def test_loss_falls_on_a_short_run(tokens):
    cfg = dataclasses.replace(SHORT, steps=120, eval_interval=60, eval_windows=32)
    _, history = train.train(CFG, cfg, *tokens)
    assert history[0]["val"] > 4.1
    assert history[-1]["val"] < 3.2  # below the letter-frequency loss (~3.3)
    assert np.mean(losses(history)[-20:]) < np.mean(losses(history)[:20]) - 0.8


def test_grad_accumulation_runs_and_counts_all_tokens(tokens):
    cfg = dataclasses.replace(SHORT, steps=3, grad_accum=3)
    _, history = train.train(CFG, cfg, *tokens)
    assert len(history) == 3 and all(math.isfinite(r["loss"]) for r in history)


def test_huge_learning_rate_is_reported_diverged(tokens):
    cfg = dataclasses.replace(SHORT, lr=100.0, steps=200)
    state = train.init_train_state(CFG, cfg)
    history = train.train_steps(state, CFG, cfg, *tokens, 200)
    assert history[-1].get("diverged") is True and state["diverged"]
    assert len(history) < 200  # it stopped
    assert not any(r.get("diverged") for r in history[:-1])
    json.dumps(history, allow_nan=False)  # no NaN or inf anywhere: None instead
    assert train.train_steps(state, CFG, cfg, *tokens, 10) == []  # a diverged run stays stopped


def test_sgd_run_learns(tokens):
    cfg = dataclasses.replace(SHORT, optimizer="sgd", lr=0.5, steps=60, eval_interval=59)
    _, history = train.train(CFG, cfg, *tokens)
    assert history[-1]["val"] < history[0]["val"] - 0.3


def test_chunked_train_steps_equals_one_shot_train(tokens):
    params, history = train.train(CFG, SHORT, *tokens)
    state, chunked, seen = train.init_train_state(CFG, SHORT), [], []
    for n in [1, 7, 3, 13, 100]:
        chunked += train.train_steps(state, CFG, SHORT, *tokens, n, on_step=seen.append)
    assert seen == chunked
    assert losses(chunked) == losses(history)
    assert [r.get("val") for r in chunked] == [r.get("val") for r in history]
    for k in params:
        np.testing.assert_array_equal(state["params"][k], params[k])
    assert train.train_steps(state, CFG, SHORT, *tokens, 5) == []  # never past train_cfg.steps


def test_sampling_is_deterministic_per_seed_and_respects_vocab(tokens):
    params, _ = train.train(CFG, SHORT, *tokens)
    a = sample.generate(params, CFG, [3, 4], 100, temperature=1.0, seed=5)
    b = sample.generate(params, CFG, [3, 4], 100, temperature=1.0, seed=5)
    c = sample.generate(params, CFG, [3, 4], 100, temperature=1.0, seed=6)
    assert a == b and a != c
    assert a[:2] == [3, 4] and len(a) == 102  # prompt, then 100 new tokens (context cropped to 64)
    assert all(isinstance(i, int) and 0 <= i < CFG.vocab_size for i in a)
    stopped = sample.generate(params, CFG, [3], 500, seed=5, stop_at=a[5])
    assert stopped[-1] == a[5] and len(stopped) <= 501
    with pytest.raises(ValueError):
        sample.generate(params, CFG, [3], 5, temperature=0.0)


def test_low_temperature_sampling_is_greedy():
    params = model.init_params(CFG, 0)
    ids = sample.generate(params, CFG, [1, 2, 3], 5, temperature=1e-6, seed=0)
    for i in range(3, len(ids)):
        logits = model.forward_logits(params, CFG, np.array([ids[:i]]))[0, -1]
        assert ids[i] == int(np.argmax(logits))


def test_export_round_trips_through_npz_bytes():
    params = model.init_params(CFG, 3)
    sd = export.to_nanogpt_state_dict(params, CFG)
    assert sd["transformer.h.0.attn.c_attn.weight"].shape == (48, 16)
    assert sd["transformer.h.0.mlp.c_proj.weight"].shape == (16, 64)
    np.testing.assert_array_equal(sd["lm_head.weight"], sd["transformer.wte.weight"])
    back = export.from_nanogpt_state_dict(export.npz_bytes_to_state_dict(export.state_dict_to_npz_bytes(sd)), CFG)
    assert back.keys() == params.keys()
    for k in params:
        np.testing.assert_array_equal(back[k], params[k])


def test_full_evaluation_scores_every_non_overlapping_window_once():
    from pylib import evaluation
    cfg = model.GPTConfig()
    tokens = np.random.default_rng(3).integers(0, cfg.vocab_size, 10 * cfg.block_size + 5).astype(np.uint8)
    x, y = evaluation.full_windows(tokens, cfg.block_size)
    assert x.shape == y.shape == (10, cfg.block_size)
    assert (x.reshape(-1) == tokens[:10 * cfg.block_size]).all()
    assert (y.reshape(-1) == tokens[1:10 * cfg.block_size + 1]).all()
    params = model.init_params(cfg, 0)
    by_chunks = evaluation.full_loss(params, cfg, tokens, chunk_windows=3)  # 3 + 3 + 3 + 1 windows
    at_once = float(model.evaluate_loss(params, cfg, x, y))
    assert by_chunks == pytest.approx(at_once, rel=1e-6)


def test_final_eval_adds_the_full_validation_loss_to_the_last_record_only():
    from pylib import evaluation
    cfg = model.GPTConfig()
    rng = np.random.default_rng(4)
    train_tokens, val_tokens = (rng.integers(0, cfg.vocab_size, n).astype(np.uint8) for n in (5000, 2000))
    tc = train.TrainConfig(steps=5, eval_interval=2, final_eval=True)
    params, history = train.train(cfg, tc, train_tokens, val_tokens)
    assert [r["step"] for r in history if "val_full" in r] == [4]
    assert history[-1]["val_full"] == pytest.approx(evaluation.full_loss(params, cfg, val_tokens))
    _, plain = train.train(cfg, train.TrainConfig(steps=5, eval_interval=2), train_tokens, val_tokens)
    assert not any("val_full" in r for r in plain)
