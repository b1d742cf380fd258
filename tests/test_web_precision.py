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


# ---------------------------------------------------------------------------
# The rounding calculator against ml_dtypes (the reference for the narrow formats; NumPy for fp32):
# bit patterns, stored values, neighbours, the rounding interval, and the value a bit pattern decodes to


import math  # noqa: E402

import ml_dtypes  # noqa: E402

DTYPES = {"fp32": np.float32, "bf16": ml_dtypes.bfloat16, "fp16": np.float16,
          "fp8_e5m2": ml_dtypes.float8_e5m2, "fp8_e4m3": ml_dtypes.float8_e4m3fn}
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32}


def _width(fmt):
    E, M, _ = precision.FORMATS[fmt]
    return 1 + E + M


def _calculator_values(fmt):
    """float32 values (so that ml_dtypes' rounding from float32 is the one rounding of the value): the
    issue's and the limits' cases, both zeros, float32's smallest subnormal and largest value, 300
    log-uniform magnitudes of both signs from 1e-45 to 3e38 and 200 inside fmt's range (a quarter of
    its smallest subnormal to twice its largest value)."""
    rng = np.random.default_rng(26)
    lo, hi = math.log10(precision.smallest_subnormal(fmt) / 4), math.log10(min(2 * precision.max_value(fmt), 3e38))
    mags = np.concatenate([10 ** rng.uniform(-45, 38.5, 300), 10 ** rng.uniform(lo, hi, 200)])
    signs = rng.choice([-1.0, 1.0], 500)
    named = [0.1, -3.14159, 1.0, 65504, 65519, 65520, 70000, 1e-7, 3e-8, 448, 464, 480, 240, 57344, 61440,
             1e-45, 0.0, -0.0, 3.4028234663852886e38, -3.4028234663852886e38, 1e-30, 6.1e-5, -6.1e-5, 2 ** -24]
    return np.array(named + list(mags * signs), dtype=np.float64).astype(np.float32)


def _ref(x32, fmt):
    with np.errstate(all="ignore"):
        return np.array([x32], np.float32).astype(DTYPES[fmt])


def _ref_bits(ref, fmt):
    return format(int(ref.view(UINT[_width(fmt)])[0]), f"0{_width(fmt)}b")


@pytest.mark.parametrize("fmt", list(precision.FORMATS))
def test_round_value_matches_ml_dtypes_bits_stored_values_and_neighbours(fmt):
    dt = DTYPES[fmt]
    top = np.array([ml_dtypes.finfo(dt).max], dt)
    checked = 0
    for x in _calculator_values(fmt):
        r = ops.round_value(None, {"value": repr(float(x))})
        row = {f["format"]: f for f in r["formats"]}[fmt]
        ref = _ref(x, fmt)
        want = float(ref[0])
        bits = row["sign"] + row["exponent"] + row["mantissa"]
        case = f"{float(x)!r} in {fmt}"
        if math.isnan(want):
            assert row["stored"] == "nan" and row["regime"] == "overflow", case
            assert set(bits[1:]) == {"1"} or (bits[1:1 + len(row["exponent"])] == "1" * len(row["exponent"])), case
            continue
        if math.isinf(want):
            assert row["stored"] == ("inf" if want > 0 else "-inf") and bits == _ref_bits(ref, fmt), case
            continue
        assert row["stored"] == want and math.copysign(1, row["stored"]) == math.copysign(1, want), case
        assert bits == _ref_bits(ref, fmt), case
        up, down = np.nextafter(ref, top), np.nextafter(ref, -top)
        assert row["above"] == (None if ref[0] == top[0] else float(up[0])), case
        assert row["below"] == (None if ref[0] == -top[0] else float(down[0])), case
        checked += 1
    assert checked > 250  # not a test of overflows only


def _rounds_to(mid, fmt):
    """mid (a float64) rounded once to fmt: to float32 directly, else through float32 where it is exact."""
    if fmt == "fp32":
        return float(np.float64(mid).astype(np.float32))
    assert float(np.float32(mid)) == mid
    return float(_ref(np.float32(mid), fmt)[0])


@pytest.mark.parametrize("fmt", list(precision.FORMATS))
def test_round_value_line_is_the_interval_ml_dtypes_rounds_to_the_stored_value(fmt):
    """The number line's neighbours are the stored value's, its gaps are the powers of two between them,
    and its ends are where rounding changes: a value just inside rounds to the stored value, and the end
    itself does exactly when the line says ties go to the stored value."""
    for x in _calculator_values(fmt)[::5]:
        r = ops.round_value(None, {"value": repr(float(x))})
        row = {f["format"]: f for f in r["formats"]}[fmt]
        line = row["line"]
        case = f"{float(x)!r} in {fmt}"
        if not isinstance(row["stored"], float):
            assert line is None, case
            continue
        s = row["stored"]
        assert (line["stored"], line["below"], line["above"], line["x"]) == (s, row["below"], row["above"], float(x)), case
        assert line["round_lo"] <= float(x) <= line["round_hi"], case
        for gap, log2 in ((line["gap_below"], line["gap_below_log2"]), (line["gap_above"], line["gap_above_log2"])):
            assert gap is None or gap == 2.0 ** log2, case
        inward = np.float64 if fmt == "fp32" else np.float32  # a step far finer than fmt's spacing
        for end, toward in ((line["round_lo"], s), (line["round_hi"], s)):
            inside = float(np.nextafter(inward(end), inward(toward)))
            assert _rounds_to(inside, fmt) == s, (case, end)
            assert (_rounds_to(end, fmt) == s) == line["ties_to_stored"], (case, end)


@pytest.mark.parametrize("fmt", list(precision.FORMATS))
def test_flipping_bits_gives_the_value_ml_dtypes_decodes(fmt):
    """Every bit pattern of the 8-bit formats, and 1,500 random ones of the wider formats plus their
    zeros, infinities, NaNs, subnormals and largest values: the op's value is the pattern's value in
    ml_dtypes (NumPy for fp16 and fp32), its regime says what it is, and the format's own row shows the
    same bits (NaN: the format's NaN)."""
    n = _width(fmt)
    if n == 8:
        codes = list(range(256))
    else:
        rng = np.random.default_rng(9)
        E, M, _ = precision.FORMATS[fmt]
        special = [0, 1, (1 << M) - 1, 1 << M, ((1 << E) - 1) << M, (((1 << E) - 1) << M) | 1,
                   (((1 << E) - 1) << M) - 1, 1 << (n - 1)]
        codes = special + [c | (1 << (n - 1)) for c in special] + [int(c) for c in rng.integers(0, 1 << n, 1500)]
    smallest_normal = float(ml_dtypes.finfo(DTYPES[fmt]).smallest_normal)
    for code in codes:
        bits = format(code, f"0{n}b")
        want = float(np.array([code], UINT[n]).view(DTYPES[fmt])[0])
        r = ops.round_value(None, {"format": fmt, "bits": bits})
        fb, row = r["from_bits"], {f["format"]: f for f in r["formats"]}[fmt]
        assert fb["format"] == fmt and fb["bits"] == bits
        got = r["value"]
        if math.isnan(want):
            assert got == "nan" and fb["regime"] == "nan", bits
            continue
        if math.isinf(want):
            assert got == ("inf" if want > 0 else "-inf") and fb["regime"] == "inf", bits
        else:
            assert got == want and math.copysign(1, got) == math.copysign(1, want), bits
            regime = "zero" if want == 0 else "subnormal" if abs(want) < smallest_normal else "normal"
            assert fb["regime"] == regime, bits
        assert row["sign"] + row["exponent"] + row["mantissa"] == bits


@pytest.mark.parametrize("fmt,bits", [("fp12", "0"), ("bf16", "0101"), ("bf16", "01010101010101012"),
                                      ("fp8_e4m3", None), ("fp8_e4m3", 7), ("fp8_e4m3", "<b>x</b>")])
def test_round_value_refuses_bad_bits(fmt, bits):
    with pytest.raises(InputError) as e:
        ops.round_value(None, {"format": fmt, "bits": bits if bits is not None else 1.5})
    assert "bits" in e.value.errors
