"""measure.py: the measurements are deterministic, and results.json matches the current defaults."""

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
    first, second = (ch1.run_default(corpus, seeds=(0, 1), train_cfg=short) for _ in range(2))
    first.pop("timings"), second.pop("timings")
    assert first == second


def test_results_json_was_measured_with_the_current_defaults():
    results = json.loads(measure.RESULTS_JSON.read_text())
    defaults = {k: v for k, v in dataclasses.asdict(train.TrainConfig()).items() if k != "seed"}
    assert results["settings"]["ch1.default"] == defaults, "defaults changed: run `python build.py --measure`"
    assert results["meta"]["seeds"] == list(common.SEEDS)
