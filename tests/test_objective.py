"""The objective (pylib.studies.objective): p - y at the logits, the two reductions of a loss and the
chapter's worked examples, gradient accumulation with unequal microbatches, and clipping after it."""

import math

import numpy as np
import pytest

from pylib import data, model, train
from pylib.studies import objective
from pylib.web import objective_ops as web_obj
from pylib.web import InputError

CFG = model.GPTConfig()


def test_logit_gradient_is_p_minus_y():
    rng = np.random.default_rng(0)
    z = rng.standard_normal(CFG.vocab_size) * 3
    p, y, g = objective.logit_gradient(z, 7)
    softmax = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    assert np.allclose(p, softmax) and y[7] == 1 and y.sum() == 1
    assert np.allclose(g, softmax - y) and abs(g.sum()) < 1e-12  # the gradient sums to zero


def test_top_k_rows_always_include_the_target():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    y = np.array([0.0, 0.0, 0.0, 1.0])
    assert objective.top_k_rows(p, y, p - y, 2) == [0, 1, 3]
    assert objective.top_k_rows(p, y, p - y, 4) == [0, 1, 2, 3]


def test_worked_examples_token_mean_against_mean_of_means():
    a = objective.compare_denominators(*zip(*objective.WORKED_EXAMPLES["a"]))
    assert a["token_weighted"] == pytest.approx(1.25) and a["mean_of_means"] == pytest.approx(1.5)
    b = objective.compare_denominators(*zip(*objective.WORKED_EXAMPLES["b"]))
    assert b["token_weighted"] == pytest.approx(1.6) and b["mean_of_means"] == pytest.approx(2.5)


def test_reductions_agree_when_every_sequence_has_the_same_count():
    r = objective.compare_denominators([5, 5, 5], [1.0, 7.0, 2.5])
    assert r["token_weighted"] == pytest.approx(r["mean_of_means"])


def test_token_weights_sum_to_one_under_both_reductions():
    counts = [2, 6, 0, 9]
    w = objective.token_weights(counts)
    for key in ("token_weighted", "mean_of_means"):
        assert sum(n * wi[key] for n, wi in zip(counts, w)) == pytest.approx(1.0)


def test_denominator_input_is_validated():
    ok = web_obj.validate_sequences([{"count": "2", "loss": "4"}, {"count": "6", "loss": "6"}])
    assert ok == ([2, 6], [4.0, 6.0])
    bad = [
        [{"count": "-1", "loss": "1"}],
        [{"count": "2.5", "loss": "1"}],
        [{"count": "1", "loss": "-3"}],
        [{"count": "1", "loss": "nan"}],
        [{"count": "1", "loss": "inf"}],
        [{"count": "", "loss": "1"}],
        [{"count": "<b>1</b>", "loss": "1"}],
        [{"count": "\U0001F600", "loss": "1"}],
        [{"count": "0", "loss": "0"}, {"count": "0", "loss": "0"}],  # no counted token
        [{"count": "0", "loss": "5"}],  # a loss with no token to carry it
        [],
        "not a list",
        [{"count": "1", "loss": "1"}] * (web_obj.LIMITS["rows_max"] + 1),
        [{"count": "1e30", "loss": "1"}],
    ]
    for rows in bad:
        with pytest.raises(InputError):
            web_obj.validate_sequences(rows)


def test_accumulation_draws_the_same_windows_as_one_big_batch():
    tokens = np.arange(100_003) % 251
    for seed in (0, 1, 2):
        big_cfg, acc_cfg = objective.accumulation_pair(train.TrainConfig(batch_size=8, seed=seed), 4)
        rng_a, rng_b = np.random.default_rng([seed, 1]), np.random.default_rng([seed, 1])
        for _ in range(5):  # five steps
            xa, _ = data.get_batch(tokens, big_cfg.batch_size, 64, rng_a)
            xb = np.concatenate([data.get_batch(tokens, acc_cfg.batch_size, 64, rng_b)[0]
                                 for _ in range(acc_cfg.grad_accum)])
            assert np.array_equal(xa, xb)


def test_mean_of_means_is_wrong_and_total_count_exact_for_unequal_microbatches():
    params = model.init_params(CFG, 0, dtype=np.float64)
    rng = np.random.default_rng(1)
    x = rng.integers(0, CFG.vocab_size, (8, CFG.block_size))
    y = rng.integers(0, CFG.vocab_size, (8, CFG.block_size))
    r = objective.accumulation_errors(params, CFG, x, y, [64, 8, 32, 4])
    assert r["tokens"] == [128, 16, 64, 8]
    assert r["token_weighted"] < 1e-12  # exact up to float64 rounding
    assert r["mean_of_means"] > 0.05  # a visibly different gradient
    equal = objective.accumulation_errors(params, CFG, x, y, [16, 16, 16, 16])
    assert equal["mean_of_means"] < 1e-12  # equal counts: the two reductions coincide


def test_grad_accumulation_of_four_matches_a_batch_four_times_larger():
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, CFG.vocab_size, 20_000).astype(np.uint8)
    big, acc = objective.accumulation_pair(train.TrainConfig(batch_size=4, steps=15, eval_interval=5,
                                                             eval_windows=4), 4)
    _, hb = train.train(CFG, big, tokens, tokens)
    _, ha = train.train(CFG, acc, tokens, tokens)
    d = max(abs(a["loss"] - b["loss"]) for a, b in zip(ha, hb))
    assert d < 1e-4  # float32 rounding only (a different window would move the loss by ~1e-2)
    assert all(math.isfinite(r["loss"]) for r in ha)


def test_results_json_was_measured_with_the_current_chapter3_settings():
    import dataclasses
    import json

    from builder import measure
    from experiments import ch3
    results = json.loads(measure.RESULTS_JSON.read_text())
    _, acc = web_obj.accum_settings(0)
    expected = {k: v for k, v in dataclasses.asdict(acc).items() if k != "seed"}
    assert results["settings"]["ch3.accum"] == expected, "settings changed: run `python build.py --measure`"
    assert results["values"]["ch3.mtp.lambda"] == ch3.MTP_WEIGHT
    assert results["settings"]["ch3.grad"]["counts_per_window"] == ch3.GRAD_EXAMPLE_COUNTS


def test_clipping_acts_once_on_the_accumulated_gradient(monkeypatch):
    """pylib.train clips the step's summed gradient once, after the last microbatch, not each share."""
    from pylib import optim
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, CFG.vocab_size, 20_000).astype(np.uint8)
    tc = train.TrainConfig(batch_size=2, grad_accum=4, steps=3, grad_clip=0.05, eval_interval=100, eval_windows=2)
    calls = []
    real_clip = optim.clip_grad_norm
    monkeypatch.setattr(optim, "clip_grad_norm", lambda g, m: calls.append(optim.global_grad_norm(g)) or real_clip(g, m))
    state = train.init_train_state(CFG, tc)
    record = train.train_steps(state, CFG, tc, tokens, tokens, 1)[0]
    assert len(calls) == 1 and record.get("clipped")  # one clip for four microbatches, and it acted

    # The same step by hand: sum the four shares, clip the sum once, update.
    monkeypatch.setattr(optim, "clip_grad_norm", real_clip)
    ref = train.init_train_state(CFG, tc)
    _, grads, _ = train.accumulated_loss_and_grads(ref["params"], CFG, tc, tokens, ref["batch_rng"])
    assert calls[0] == optim.global_grad_norm(grads)  # it saw the summed gradient
    real_clip(grads, tc.grad_clip)
    ref["update"](ref, tc, {}, grads, record["lr"])
    assert all(np.array_equal(state["params"][k], ref["params"][k]) for k in ref["params"])

    # Clipping each microbatch's share instead is a different step (the check can tell them apart).
    alt = train.init_train_state(CFG, tc)
    shares = []
    for _ in range(tc.grad_accum):
        x, y = data.get_batch(tokens, tc.batch_size, CFG.block_size, alt["batch_rng"])
        g = model.loss_and_grads(alt["params"], CFG, x, y, denom=tc.grad_accum * tc.batch_size * CFG.block_size)[1]
        real_clip(g, tc.grad_clip)
        shares.append(g)
    summed = {k: sum(g[k] for g in shares) for k in shares[0]}
    alt["update"](alt, tc, {}, summed, record["lr"])
    assert not all(np.allclose(state["params"][k], alt["params"][k], rtol=0, atol=1e-7) for k in alt["params"])


def test_tempered_unigram_at_temperature_one_is_the_unigram_line_and_its_limits_are_right():
    from pylib import data
    rng = np.random.default_rng(0)
    freq = [0.5, 0.2, 0.1, 0.1, 0.05, 0.03, 0.02]
    train_tokens, val_tokens = rng.choice(7, 5000, p=freq), rng.choice(7, 800, p=freq)
    one = objective.tempered_unigram(train_tokens, val_tokens, 7, 1.0)
    assert one["val_loss"] == pytest.approx(data.unigram_loss(train_tokens, val_tokens, 7), rel=1e-12)
    assert one["probs"].sum() == pytest.approx(1.0, abs=1e-15)
    flat = objective.tempered_unigram(train_tokens, val_tokens, 7, 1e6)
    assert flat["own_ppl"] == pytest.approx(7, rel=1e-5) and flat["val_ppl"] == pytest.approx(7, rel=1e-5)
    sharp = objective.tempered_unigram(train_tokens, val_tokens, 7, 0.05)
    assert sharp["own_ppl"] < 1.5 < one["val_ppl"] < sharp["val_ppl"]
    with pytest.raises(ValueError):
        objective.tempered_unigram(train_tokens, val_tokens, 7, 0.0)


def test_key_bias_probe_reads_the_key_third_and_adams_step_on_it():
    """The key bias's true gradient is zero, so the probe sees rounding noise far below eps and steps
    far below the rate; the query third beside it (what a wrong slice would read) gets a real gradient
    and nearly full-size steps. The step fraction is what the update did, not a formula."""
    rng = np.random.default_rng(4)
    tokens = rng.integers(0, CFG.vocab_size, 20_000).astype(np.uint8)
    tc = train.TrainConfig(batch_size=4, steps=3, warmup_steps=1, eval_interval=100, eval_windows=2)
    state = train.init_train_state(CFG, tc)
    records = objective.key_bias_probe(state, CFG)
    C, name = CFG.n_embd, "h.0.attn.c_attn.bias"
    before = state["params"][name].copy()
    history = train.train_steps(state, CFG, tc, tokens, tokens, 1)
    assert len(records) == 1
    assert 0 < records[0]["grad"] < tc.eps and records[0]["step_frac"] < 0.5
    moved = np.abs(state["params"][name] - before) / history[0]["lr"]
    assert records[0]["step_frac"] == pytest.approx(float(moved[C:2 * C].max()), rel=1e-6)
    assert moved[:C].max() > 0.9  # the query bias: a real gradient, a full-size first step
