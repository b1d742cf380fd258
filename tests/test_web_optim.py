"""Chapter 5's page ops (pylib.web.optim_ops): bad input is refused with a message per field, and the
ops return what pylib computes."""

import json

import pytest

from pylib import web
from pylib.studies import optim_state, quadratic
from pylib.web import optim_ops as web_optim


def call(op, **args):
    return json.loads(web.handle(op, json.dumps(args)))


@pytest.mark.parametrize("field,bad", [("lr", ""), ("lr", "NaN"), ("lr", "-1"), ("lr", "1e400"), ("lr", "🙂"),
                                       ("kappa", "0.5"), ("kappa", "<b>x</b>"), ("momentum", "1"),
                                       ("steps", "2.5"), ("steps", "100000")])
def test_valley_refuses_bad_input_by_field(field, bad):
    args = {"lr": "1", "kappa": "50", "momentum": "0.9", "steps": "100", field: bad}
    out = call("optim_valley", **args)
    assert out["ok"] is False and out["kind"] == "input" and set(out["errors"]) == {field}


def test_valley_op_is_pylib_quadratic():
    out = call("optim_valley", lr="1.5", kappa="20", momentum="0.5", steps="40")
    assert out["ok"]
    expected = quadratic.valley(20.0, 1.5, 40, 0.5)
    assert out["value"]["sgd"]["xs"] == expected["sgd"]["xs"]
    assert out["value"]["momentum"]["ys"] == expected["momentum"]["ys"]


def test_valley_labels_divergence_instead_of_returning_huge_points():
    out = call("optim_valley", lr="5", kappa="50", momentum="0", steps="200")["value"]
    assert out["sgd"]["diverged_at"] is not None
    assert max(abs(x) for x in out["sgd"]["xs"]) < 1e3


@pytest.mark.parametrize("grads", ["", "1, two", "1,,NaN", "1e9", ",".join(["1"] * 41), "<img src=x>"])
def test_adam_steps_refuses_bad_gradients(grads):
    out = call("optim_adam_steps", grads=grads, beta1="0.9", beta2="0.999")
    assert out["ok"] is False and "grads" in out["errors"]


def test_adam_steps_refuses_bad_betas():
    out = call("optim_adam_steps", grads="1", beta1="1", beta2="-0.1")
    assert out["ok"] is False and set(out["errors"]) == {"beta1", "beta2"}


def test_train_settings_are_the_measured_comparison():
    name, cfg = web_optim.train_settings({"optimizer": "muon", "lr": "0.1", "seed": "2"})
    assert cfg == optim_state.comparison_config("muon", 0.1, 2)
    with pytest.raises(web.InputError):
        web_optim.train_settings({"optimizer": "<script>", "lr": "0.1", "seed": "0"})
    with pytest.raises(web.InputError) as e:
        web_optim.train_settings({"optimizer": "adamw", "lr": "0", "seed": "-1"})
    assert set(e.value.errors) == {"lr", "seed"}


def test_measured_band_uses_the_live_runs_evaluation():
    # The band under the live run must be scored as the live curve is: the trainer's fixed subset
    # (record["val"]) of the same setting, never the whole-split final loss (val_full).
    from experiments import ch5
    live = optim_state.comparison_config("adamw", 0.01, 1)
    assert ch5.EVAL_WINDOWS == live.eval_windows and ch5.EVAL_INTERVAL == live.eval_interval
    assert ch5.decay_config("adamw", live.weight_decay, 1) == live  # the decay study's AdamW arm is the page's
    history = [{"step": 0, "loss": 4.0, "val": 4.1, "train_eval": 4.0},
               {"step": 1, "loss": 3.0, "val": 3.2, "train_eval": 3.1, "val_full": 3.5}]
    runs = {s: {"history": [dict(r, val=r["val"] + s / 10) for r in history]} for s in (0, 1, 2)}
    band = ch5.band_curve(runs)
    assert band["val_mean"] == [pytest.approx(4.2), pytest.approx(3.3)]  # the subset's values, not 3.5 + ...
    assert band["eval_windows"] == live.eval_windows
