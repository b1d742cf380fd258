"""Chapter 6's page ops: the schedule plotter's curve is pylib.schedules', reader input is refused
with a message per field, the live ladder labels divergence, and a mid-run learning-rate change
keeps the params and the optimiser state."""

import dataclasses
import json

import numpy as np
import pytest

from pylib import model, schedules, train, web
from pylib.studies import lr_sweep
from pylib.web import schedule_ops as web_schedule
from pylib.web import InputError

GOOD = {"kind": "cosine", "lr": "0.02", "warmup": "20", "steps": "400", "min_ratio": "0.1", "decay_frac": "0.2"}
BAD_VALUES = ["", "   ", "NaN", "inf", "-1", "1e400", "🙂", "<b class=injected>x</b>", None, "0x10"]


@pytest.fixture(scope="module")
def session(shared_corpus):
    corpus = shared_corpus
    s = web.Session()
    s.vocab, s.train_tokens, s.val_tokens = corpus.vocab, corpus.train, corpus.val
    return s


@pytest.mark.parametrize("kind", ["cosine", "wsd", "constant"])
def test_schedule_curve_is_pylib_schedules(kind):
    out = web_schedule.schedule_curve({**GOOD, "kind": kind})
    expected = [schedules.lr_at(kind, t, 0.02, 20, 400, 0.002, 0.2) for t in range(400)]
    assert out["lrs"] == expected
    assert out["peak_lr"] == pytest.approx(0.02) and out["peak_step"] == 20


def test_wsd_holds_the_peak_then_decays_over_the_last_fraction():
    lrs = web_schedule.schedule_curve({**GOOD, "kind": "wsd", "decay_frac": "0.25"})["lrs"]
    assert lrs[20] == lrs[299] == pytest.approx(0.02)  # stable until the last quarter
    assert lrs[300] == pytest.approx(0.02) and lrs[301] < 0.02 and lrs[-1] < lrs[350]


@pytest.mark.parametrize("field", ["lr", "warmup", "steps", "min_ratio", "decay_frac"])
@pytest.mark.parametrize("bad", BAD_VALUES)
def test_schedule_plotter_refuses_bad_input_with_a_message(field, bad):
    with pytest.raises(InputError) as e:
        web_schedule.schedule_curve({**GOOD, field: bad})
    assert field in e.value.errors and e.value.errors[field]


def test_schedule_plotter_refuses_unknown_kind_and_warmup_past_the_end():
    with pytest.raises(InputError) as e:
        web_schedule.schedule_curve({**GOOD, "kind": "<script>"})
    assert "kind" in e.value.errors
    with pytest.raises(InputError) as e:
        web_schedule.schedule_curve({**GOOD, "warmup": "500"})
    assert "warmup" in e.value.errors


def test_handle_returns_json_errors_not_exceptions():
    out = json.loads(web.handle("schedule_curve", json.dumps({**GOOD, "lr": "🙂"})))
    assert out["ok"] is False and out["kind"] == "input" and "lr" in out["errors"]


@pytest.mark.parametrize("raw", ["", "abc", "0.1, -1", "0.1,,NaN", "1e9", "1,2,3,4,5,6,7", "x" * 300, None])
def test_sweep_rates_are_validated(raw):
    with pytest.raises(InputError) as e:
        web_schedule.parse_rates(raw)
    assert "rates" in e.value.errors


def test_sweep_rates_are_sorted_and_distinct():
    assert web_schedule.parse_rates("1; 0.01, 0.01 ,0.1") == [0.01, 0.1, 1.0]


def _run_chunks(session, name, until_done=True):
    chunks = []
    while True:
        chunk = web_schedule.OPS[f"schedule_{name}_chunk"](session, {})
        chunks.append(chunk)
        if chunk["done"] or not until_done:
            return chunks


def test_live_sweep_matches_the_ladder_runs_and_labels_divergence(session, monkeypatch):
    """The page's sweep trains each rung as lr_sweep.rung_config does, to the bit, and labels the
    rung that diverges. On rungs of 40 steps rather than LADDER_STEPS (200): the page's loop and the
    ladder's config read the same constant, and 40 steps (the loop trains 4 at a time) cover the warmup,
    the final evaluation, and lr 10's divergence."""
    monkeypatch.setattr(lr_sweep, "LADDER_STEPS", 40)
    web_schedule.sweep_start(session, {"rates": "0.03, 10", "seed": "1"})
    chunks = _run_chunks(session, "sweep")
    finish = web_schedule.sweep_finish(session, {})
    rungs = finish["rungs"]
    assert finish["steps"] == 40
    assert [r["lr"] for r in rungs] == [0.03, 10.0]
    assert sum(len(c["finished"]) for c in chunks) == 2
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    _, h = train.train(mcfg, lr_sweep.rung_config(0.03, 1), session.train_tokens, session.val_tokens)
    assert rungs[0]["final_val"] == h[-1]["val"] and rungs[0]["diverged_at"] is None
    assert rungs[1]["final_val"] is None and rungs[1]["diverged_at"] is not None


def test_lr_change_keeps_params_and_optimiser_state(session):
    web_schedule.lrchange_start(session, {"lr": "0.02", "seed": "0"})
    run = web_schedule._RUNS["lrchange"]
    while run["state"]["step"] < 30:
        web_schedule.lrchange_chunk(session, {})
    k = run["state"]["step"]
    opt = run["state"]["opt"]
    m_before, v_before, t_before = opt["m"].copy(), opt["v"].copy(), opt["t"]
    change = web_schedule.lrchange_set(session, {"new_lr": "0.005"})
    assert change == {"step": k, "lr": 0.005}
    assert run["state"]["step"] == k  # nothing restarted
    assert run["state"]["opt"] is opt and opt["t"] == t_before == k  # Adam's step count goes on
    np.testing.assert_array_equal(opt["m"], m_before)
    np.testing.assert_array_equal(opt["v"], v_before)
    records = web_schedule.lrchange_chunk(session, {})["records"]
    assert records[0]["step"] == k
    assert records[0]["lr"] == pytest.approx(schedules.lr_at("cosine", k, 0.005, 20, 600, 0.0005))
    # the same run done by hand: train to k, then replace the config's lr and continue
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    cfg = dataclasses.replace(train.TrainConfig(), lr=0.02, seed=0, steps=600, eval_interval=25)
    state = train.init_train_state(mcfg, cfg)
    train.train_steps(state, mcfg, cfg, session.train_tokens, session.val_tokens, k)
    by_hand = train.train_steps(state, mcfg, dataclasses.replace(cfg, lr=0.005), session.train_tokens,
                                session.val_tokens, len(records))
    assert [r["loss"] for r in by_hand] == [r["loss"] for r in records]
    web_schedule.lrchange_finish(session, {})


def test_lr_change_refuses_bad_values_without_stopping_the_run(session):
    web_schedule.lrchange_start(session, {"lr": "0.02", "seed": "0"})
    web_schedule.lrchange_chunk(session, {})
    for bad in BAD_VALUES + ["0", "5000"]:
        with pytest.raises(InputError) as e:
            web_schedule.lrchange_set(session, {"new_lr": bad})
        assert "new_lr" in e.value.errors
    assert web_schedule._RUNS["lrchange"]["changes"] == []
    assert not web_schedule.lrchange_chunk(session, {})["done"]
    web_schedule.lrchange_finish(session, {})


def test_absurd_new_lr_ends_in_a_labelled_divergence(session):
    web_schedule.lrchange_start(session, {"lr": "0.02", "seed": "0"})
    web_schedule.lrchange_chunk(session, {})
    web_schedule.lrchange_set(session, {"new_lr": "500"})
    chunks = _run_chunks(session, "lrchange")
    result = web_schedule.lrchange_finish(session, {})
    assert result["diverged_at"] is not None and result["diverged_at"] < 600
    assert result["final_loss"] is None
    assert all(r["loss"] is None or np.isfinite(r["loss"]) for c in chunks for r in c["records"])


def test_lr_change_without_a_run_is_refused():
    web_schedule._RUNS.pop("lrchange", None)
    with pytest.raises(InputError):
        web_schedule.lrchange_set(None, {"new_lr": "0.01"})


def run_noise(session, args):
    web_schedule.noise_start(session, args)
    while not web_schedule.noise_chunk(session, {})["done"]:
        pass
    return web_schedule.noise_finish(session, {})


def ch6_noise_estimate(session, seed, checkpoint):
    """What experiments/ch6.py's run_schedules measures at `checkpoint` of the default (cosine) run
    with `seed`: the same config (its evaluation interval, final_eval), trained through the noise
    checkpoints in the same calls, then the estimate with noise_rng(seed, checkpoint) and NOISE."""
    from experiments import ch6
    from pylib.studies import noise_scale
    assert checkpoint in ch6.NOISE_CHECKPOINTS
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size)
    cfg = dataclasses.replace(train.TrainConfig(), eval_interval=ch6.SCHEDULE_EVAL_INTERVAL, final_eval=True,
                              **ch6.SCHEDULE_ARMS["cosine"], seed=seed)
    state = train.init_train_state(mcfg, cfg)
    for c in ch6.NOISE_CHECKPOINTS[:ch6.NOISE_CHECKPOINTS.index(checkpoint) + 1]:
        train.train_steps(state, mcfg, cfg, session.train_tokens, session.val_tokens, c - state["step"])
    assert state["step"] == checkpoint
    return noise_scale.estimate_noise_scale(state["params"], mcfg, session.train_tokens,
                                            rng=ch6.noise_rng(seed, checkpoint), **ch6.NOISE)


NOISE_OUT = ("g2_small", "g2_big", "g2", "trace", "b_simple")


def test_noise_scale_in_the_page_repeats_chapter_6s_measurement(session):
    """The page's run to step 100 and its estimate there are --measure's (experiments/ch6.py's
    run_schedules), seed for seed: computed here the experiment's way, in this process."""
    out = run_noise(session, {"seed": "1", "step": "100"})
    assert out["complete"] and out["step"] == 100
    expected = ch6_noise_estimate(session, 1, 100)
    # Bit for bit: the same code on the same weights and batches in one process. No tolerance would
    # help if they were not: 100 steps amplify a one-ulp difference into a different estimate.
    assert {k: out[k] for k in NOISE_OUT} == {k: expected[k] for k in NOISE_OUT}


def test_noise_scale_at_step_0_is_results_json_on_any_machine(session):
    """At step 0 (no training) the page's estimate is results.json's, to float32 rounding.

    Step 0 is the initial weights (drawn by NumPy's generator, the same on every machine) and integer
    batches drawn by noise_rng, so the estimate is 64 float32 forward and backward passes whose only
    machine dependence is the BLAS kernel's order of summation. Between results.json (measured on
    another machine) and OpenBLAS's Prescott, Nehalem, Sandybridge and Haswell kernels, seeds 0-2,
    the three fields differ by at most 7e-8 relative; rel=1e-5 leaves a wide margin, while another
    draw of batches, another seed or another initialisation moves one field by 4% or more.
    Step 100 cannot be compared across machines: training is chaotic, and one float32 ulp of one
    initial weight moves B_simple at step 100 from 25.5 to 16.9, 43.5 or 10.4; the test above
    compares it with the experiment's own computation in this process instead."""
    from builder import measure
    results = json.loads(measure.RESULTS_JSON.read_text())["values"]
    out = run_noise(session, {"seed": "1", "step": "0"})
    assert out["complete"] and out["step"] == 0
    assert {k: out[k] for k in NOISE_OUT} == {k: v for k, v in ch6_noise_estimate(session, 1, 0).items() if k in NOISE_OUT}
    for field in ("b_simple", "g2", "trace"):
        assert out[field] == pytest.approx(results[f"ch6.noise.step0.{field}.per_seed"]["1"], rel=1e-5)


@pytest.mark.parametrize("bad", BAD_VALUES)
def test_noise_scale_refuses_bad_input_field_by_field(session, bad):
    with pytest.raises(InputError) as e:
        web_schedule.noise_start(session, {"seed": bad, "step": bad})
    assert set(e.value.errors) == {"seed", "step"}
    with pytest.raises(InputError, match="between 0 and 400"):
        web_schedule.noise_start(session, {"seed": "0", "step": "401"})
