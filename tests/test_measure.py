"""builder/measure.py: the measurements are deterministic, independent of how they are scheduled, and
results.json matches the current defaults."""

import concurrent.futures
import dataclasses
import json

import pytest

from builder import measure
from experiments import ch1, common
from pylib import train


@pytest.fixture(scope="module")
def corpus(shared_corpus):
    return shared_corpus


def test_measure_is_deterministic(corpus):
    # Shortened for speed, every step of run_default kept: 30 training steps, and the first 40,000
    # tokens of the validation split (624 windows: the whole-split evaluation still takes several
    # chunks, one of them partial), since the final evaluation and the training-side windows scale with it.
    short = dataclasses.replace(train.TrainConfig(), steps=30, eval_interval=10)
    small = dataclasses.replace(corpus, val=corpus.val[:40_000])
    first, second = (ch1.run_default(small, seeds=(0, 1), train_cfg=short, spread_seeds=(0, 1)) for _ in range(2))
    first.pop("timings"), second.pop("timings")
    assert first == second


def _without_timings(results):
    return json.dumps({k: v for k, v in results.items() if k != "timings"}, sort_keys=True)


def test_results_do_not_depend_on_the_number_of_workers(monkeypatch, corpus):
    """Chapter 4's four parts on one worker, then on two (a local process pool): the same JSON.
    Shrunk to keep the test quick, every part still run (the forked workers inherit the patches;
    without them both runs are only slower): the highway run is shortened, the gradient checks nudge
    at most 16 elements per tensor, and the workers take this process's corpus instead of building
    their own."""
    from experiments import ch4
    from pylib.studies import gradcheck
    monkeypatch.setattr(ch4, "HIGHWAY_STEPS", 2)
    every = gradcheck.checked_indices
    monkeypatch.setattr(gradcheck, "checked_indices", lambda size, subset, seed: every(size, min(subset or 16, 16), seed))
    monkeypatch.setattr(measure, "_corpus", lambda: corpus)
    assert len(measure.chapter_tasks(["ch4"])) > 1, "ch4 must have several parts for this test to mean anything"
    one = measure.run_experiments(["ch4"], workers=1)
    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        two = measure.run_experiments(["ch4"], executor=pool)
    assert _without_timings(one) == _without_timings(two)
    assert one["values"], "no values measured"


def test_results_json_was_measured_with_the_current_defaults():
    results = json.loads(measure.RESULTS_JSON.read_text())
    ignored = {"seed", "final_eval"}  # final_eval only adds val_full to the last record
    defaults = {k: v for k, v in dataclasses.asdict(train.TrainConfig()).items() if k not in ignored}
    measured = {k: v for k, v in results["settings"]["ch1.default"].items() if k not in ignored}
    assert measured == defaults, "defaults changed: run `python build.py --measure`"
    assert results["meta"]["seeds"] == list(common.SEEDS)


def test_previous_token_share_of_uniform_attention_is_the_uniform_share():
    """With zero query and key weights every score is 0, so each row attends uniformly to its
    t + 1 visible tokens: chapter 1's diagnostic must then give exactly the uniform share."""
    import numpy as np

    from pylib import model
    cfg = model.GPTConfig()
    params = model.init_params(cfg, seed=0, dtype=np.float64)
    C = cfg.n_embd
    params["h.0.attn.c_attn.weight"][:2 * C] = 0.0  # q and k rows; v keeps its weights
    params["h.0.attn.c_attn.bias"][:2 * C] = 0.0
    x = np.random.default_rng(0).integers(0, cfg.vocab_size, size=(4, cfg.block_size))
    share = ch1.previous_token_share(params, cfg, x)
    assert abs(share - ch1.uniform_previous_share(cfg.block_size)) < 1e-12
    assert abs(ch1.uniform_previous_share(cfg.block_size) - np.mean(1.0 / np.arange(ch1.PREV_FROM + 1, 65))) < 1e-15


def test_bigram_loss_is_low_when_each_token_fixes_the_next_and_unigram_when_it_does_not():
    import math

    import numpy as np
    cycle = np.tile(np.arange(4), 2500)  # 0 1 2 3 0 1 ...: the previous token fixes the next
    x, y = cycle[:-1], cycle[1:]
    # each of the 4 rows has ~2,500 counts on its one successor, plus add-one on all 4 successors
    assert abs(ch1.bigram_loss(cycle, x, y, 4) + math.log(2501 / 2504)) < 1e-4
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 4, size=200_000)  # independent tokens: the previous one tells nothing
    assert abs(ch1.bigram_loss(noise, noise[:-1], noise[1:], 4) - math.log(4)) < 0.01


def test_an_only_run_replaces_just_its_chapters_keys(tmp_path, monkeypatch):
    """merge_chapters keeps every other chapter's keys and replaces the named chapter's, task timings included."""
    monkeypatch.setattr(measure, "RESULTS_JSON", tmp_path / "results.json")
    monkeypatch.setattr(measure, "RESULTS_MD", tmp_path / "results.md")
    monkeypatch.setattr(measure, "experiment_modules", lambda: [])
    meta = {"command": "python build.py --measure", "date": "2026-12-03", "versions": {}, "machine": "x", "seeds": [0, 1, 2]}
    on_disk = {"meta": meta, "values": {"ch4.a": 1, "ch5.a": 2, "ch5.old": 3}, "curves": {},
               "settings": {}, "timings": {"ch4.total_seconds": 1.0, "measure.task.ch5.part_x": 9.0,
                                           "measure.task.ch4.part_y": 4.0, "measure.full_run.wall_seconds": 600.0}}
    measure.RESULTS_JSON.write_text(json.dumps(on_disk))
    fresh = {"values": {"ch5.a": 20, "ch4.a": 999}, "curves": {}, "settings": {},
             "timings": {"ch5.total_seconds": 2.0, "measure.task.ch5.part_z": 5.0}}
    merged = measure.merge_chapters(fresh, ["ch5"])
    assert merged["values"] == {"ch4.a": 1, "ch5.a": 20}
    assert merged["timings"]["measure.task.ch4.part_y"] == 4.0 and "measure.task.ch5.part_x" not in merged["timings"]
    assert merged["timings"]["measure.task.ch5.part_z"] == 5.0 and merged["meta"] == on_disk["meta"]
    assert json.loads(measure.RESULTS_JSON.read_text())["values"] == merged["values"]
    # the last full run's wall time stays; the task time is summed over the chapters as they now stand
    assert merged["timings"]["measure.full_run.wall_seconds"] == 600.0
    assert merged["timings"]["measure.task_seconds"] == 3.0


def test_every_arm_keeps_every_seed():
    """results.json: a value stored as key.mean and key.sd (an arm over seeds) also has key.per_seed,
    so that any two arms can be paired later; its mean is the mean of those seeds."""
    values = json.loads(measure.RESULTS_JSON.read_text())["values"]
    arms = {k[:-len(".mean")] for k in values if k.endswith(".mean") and k[:-len(".mean")] + ".sd" in values}
    missing = sorted(k for k in arms if k + ".per_seed" not in values)
    assert not missing, f"{len(missing)} arms without per-seed values, e.g. {missing[:5]}"
    for key in arms:
        per_seed = [v for v in values[key + ".per_seed"].values() if v is not None]
        if values[key + ".mean"] is not None:
            assert values[key + ".mean"] == pytest.approx(sum(per_seed) / len(per_seed), rel=1e-9, abs=1e-12), key


def test_the_committed_results_record_a_full_runs_wall_time_beside_its_task_time():
    timings = json.loads(measure.RESULTS_JSON.read_text())["timings"]
    wall, tasks = timings["measure.full_run.wall_seconds"], timings["measure.full_run.task_seconds"]
    assert 0 < wall <= tasks * 1.05 + 60 and timings["measure.full_run.workers"] >= 1
    assert wall <= 15 * 60, f"a full --measure took {wall:.0f} s of wall time: over the 15-minute budget"
