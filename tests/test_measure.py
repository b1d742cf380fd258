"""measure.py: the measurements are deterministic, independent of how they are scheduled, and
results.json matches the current defaults."""

import concurrent.futures
import dataclasses
import json

import pytest

import measure
from experiments import ch1, common
from pylib import data, train


@pytest.fixture(scope="module")
def corpus():
    return data.build_corpus()


def test_measure_is_deterministic(corpus):
    short = dataclasses.replace(train.TrainConfig(), steps=30, eval_interval=10)
    first, second = (ch1.run_default(corpus, seeds=(0, 1), train_cfg=short, spread_seeds=(0, 1)) for _ in range(2))
    first.pop("timings"), second.pop("timings")
    assert first == second


def _without_timings(results):
    return json.dumps({k: v for k, v in results.items() if k != "timings"}, sort_keys=True)


def test_results_do_not_depend_on_the_number_of_workers(monkeypatch):
    """Chapter 4's three parts on one worker, then on two (a local process pool): the same JSON.
    The highway run is shortened to keep the test quick (the forked workers inherit the patch)."""
    from experiments import ch4
    monkeypatch.setattr(ch4, "HIGHWAY_STEPS", 10)
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
