"""Op check_args (pylib/web/check_ops.py): a field is checked when the reader leaves it by the op's own
Python, without running the op. Its verdict must be the op's: the same messages for the same input,
nothing for good input, no state changed, and "not checked" for an op with no check of its own."""

import json

import pytest

from pylib import train, web
from pylib.web import check_ops, scaling_ops

BAD = ["", "   ", "NaN", "inf", "-1", "1e400", "🙂", "<b>x</b>", None, "0x10", "1.5", "1e9"]


def call(op, args):
    """op's answer through the page's entry point, pylib.web.handle, as the worker calls it."""
    return json.loads(web.handle(op, json.dumps(args)))


def check(op, args):
    """check_args's answer for op and args (shared by test_web_checks_A, _B and _C)."""
    out = call("check_args", {"op": op, "args": args})
    assert out["ok"], out
    return out["value"]


def train_settings(**overrides):
    d = train.TrainConfig()
    return {"lr": str(d.lr), "steps": str(d.steps), "batch_size": str(d.batch_size), "seed": str(d.seed), **overrides}


def test_good_train_settings_pass_and_python_spellings_are_accepted_as_the_run_accepts_them():
    assert check("train_start", {"settings": train_settings()}) == {"checked": True, "errors": {}}
    # float() takes these; a JavaScript copy of the check might not
    assert check("train_start", {"settings": train_settings(steps="1_000", lr=" 3e-3 ")}) == {"checked": True, "errors": {}}


@pytest.mark.parametrize("field", ["lr", "steps", "batch_size", "seed"])
@pytest.mark.parametrize("raw", BAD)
def test_a_bad_train_field_gets_exactly_the_message_the_run_gives(field, raw):
    args = train_settings(**{field: raw})
    try:
        web.validate_train_settings(args)
        expected = {}
    except web.InputError as e:
        expected = e.errors
    got = check("train_start", {"settings": args})
    assert got == {"checked": True, "errors": expected}
    if raw in ("", "NaN", "🙂", None, "-1"):
        assert set(got["errors"]) == {field}


def test_every_bad_field_is_reported_at_once():
    got = check("train_start", {"settings": train_settings(lr="abc", steps="0")})
    assert set(got["errors"]) == {"lr", "steps"}


def test_checking_a_run_starts_nothing():
    before = web.SESSION.run
    check("train_start", {"settings": train_settings()})
    check("train_start", {"settings": train_settings(lr="x")})
    assert web.SESSION.run is before


CALC = {"compute": "1e24", "mfu_percent": "40", "tokens": "1e12"}


@pytest.mark.parametrize("field", list(CALC))
@pytest.mark.parametrize("raw", BAD + ["0", "101", "1e31"])
def test_the_calculators_check_and_the_calculator_refuse_the_same_way(field, raw):
    args = {**CALC, field: raw}
    run = json.loads(web.handle("scaling_calculator", json.dumps(args)))
    got = check("scaling_calculator", args)
    assert got["checked"] is True
    if run["ok"]:
        assert got["errors"] == {}
    else:
        assert run["kind"] == "input" and got["errors"] == run["errors"]


def test_the_calculator_is_checked_by_the_function_it_runs():
    assert scaling_ops.calculator.check is scaling_ops.validate_calculator
    assert check("scaling_calculator", CALC) == {"checked": True, "errors": {}}


@pytest.mark.parametrize("op", ["parallel_mfu", "no_such_op", "", None, 7, "check_args"])
def test_an_op_without_a_check_of_its_own_is_not_checked(op):
    assert check(op, {}) == {"checked": False, "errors": {}}


@pytest.mark.parametrize("args", [None, [], "x", 3])
def test_args_that_are_not_an_object_are_checked_as_empty(args):
    got = check("scaling_calculator", args)
    assert got["checked"] is True and set(got["errors"]) == set(CALC)


def test_checked_by_marks_the_function_and_returns_it():
    def validate(args):
        raise web.InputError({"x": "no"})

    @check_ops.checked_by(validate)
    def op(session, args):
        return 1

    assert op.check is validate and op(None, {}) == 1
