"""Chapter 9's page ops (pylib.web.precision_ops): what the widgets call, with reader input validated."""

import numpy as np
import pytest

from pylib.systems import precision
from pylib.web import InputError, precision_ops as ops

NASTY = ["", "  ", "NaN", "1e309", "-inf", "🙂", "<b>x</b>", None, True]


def test_round_value_gives_every_format_as_decompose_does():
    r = ops.round_value(None, {"value": "0.1"})
    assert [f["format"] for f in r["formats"]] == list(precision.FORMATS)
    for f in r["formats"]:
        d = precision.decompose(0.1, f["format"])
        assert f["stored"] == d["stored"] and f["mantissa"] == d["mantissa"]
        assert f["max"] == precision.max_value(f["format"])


def test_round_value_sends_overflow_as_strings_json_can_carry():
    r = ops.round_value(None, {"value": "1e5"})
    by = {f["format"]: f for f in r["formats"]}
    assert by["fp16"]["stored"] == "inf" and by["fp8_e4m3"]["stored"] == "nan" and by["fp16"]["abs_error"] is None


@pytest.mark.parametrize("raw", NASTY + ["1e301"])
def test_round_value_refuses_bad_values(raw):
    with pytest.raises(InputError) as e:
        ops.round_value(None, {"value": raw})
    assert "value" in e.value.errors


def test_lost_update_loses_every_bf16_update_of_a_thousandth():
    r = ops.lost_update(None, {"start": "1", "increment": "0.001", "steps": "1000", "format": "bf16", "seed": "0"})
    assert r["final"]["nearest"] == 1.0 and r["spacing_at_start"] == 2 ** -7
    assert abs(r["final"]["stochastic_mean"] - 2.0) < 0.1 and len(r["steps"]) <= 502


@pytest.mark.parametrize("field,raw", [("steps", "0"), ("steps", "5001"), ("steps", "2.5"), ("increment", "2e6"),
                                       ("start", "🙂"), ("format", "fp12"), ("seed", "-1")])
def test_lost_update_refuses_bad_input(field, raw):
    args = {"start": "1", "increment": "0.001", "steps": "10", "format": "bf16", "seed": "0", field: raw}
    with pytest.raises(InputError) as e:
        ops.lost_update(None, args)
    assert field in e.value.errors


def test_bench_reports_every_recipe():
    r = ops.bench(None, {"steps": 3, "repeats": 1})
    assert set(r) == set(ops.mp.RECIPES) and all(v > 0 for v in r.values())
