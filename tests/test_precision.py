"""Number formats (pylib.systems.precision) against ml_dtypes, the reference (a test requirement only)."""

import math

import ml_dtypes
import numpy as np
import pytest

from pylib.systems import precision

REFERENCE = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16,
             "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}


def reference(x, fmt):
    with np.errstate(all="ignore"):
        return x.astype(REFERENCE[fmt]).astype(np.float32)


def assert_bits_equal(got, want):
    gb, wb = got.view(np.uint32), want.view(np.uint32)
    bad = np.flatnonzero(gb != wb)
    assert bad.size == 0, [(hex(int(x.view(np.uint32))), hex(int(gb[i])), hex(int(wb[i])))
                           for i, x in zip(bad[:5], got.view(np.float32)[bad[:5]])]


def hard_cases(fmt):
    """Every value of fmt, the midpoints between neighbours (ties) and one float32 ulp either side of
    them, both signs; plus the limits, zeros, infinities and NaNs."""
    E, M, _ = precision.FORMATS[fmt]
    n = 1 + E + M
    ref = REFERENCE[fmt]
    if n == 16:
        values = np.arange(2 ** 16, dtype=np.uint16).view(ref).astype(np.float32)
    else:
        values = np.arange(256, dtype=np.uint8).view(ref).astype(np.float32)
    v = np.unique(values[np.isfinite(values) & (values >= 0)])  # sorted non-negative values
    mids = ((v[:-1].astype(np.float64) + v[1:]) / 2).astype(np.float32)  # exact in float32 (few bits)
    top = np.float32(precision.max_value(fmt))
    spacing_top = np.float32(v[-1] - v[-2])
    with np.errstate(over="ignore"):
        beyond = np.array([top + spacing_top / 2, top + spacing_top, top * 2, 3.4e38], np.float32)
    pos = np.concatenate([v, mids, beyond])
    near = np.concatenate([np.nextafter(pos, np.float32(np.inf)), np.nextafter(pos, np.float32(0))])
    allv = np.concatenate([pos, near, [0.0, np.inf, np.nan]]).astype(np.float32)
    return np.concatenate([allv, -allv])


@pytest.mark.parametrize("fmt", precision.ROUNDED)
def test_round_to_matches_ml_dtypes_on_every_value_tie_and_limit(fmt):
    x = hard_cases(fmt)
    assert_bits_equal(precision.round_to(x, fmt), reference(x, fmt))


@pytest.mark.parametrize("fmt", precision.ROUNDED)
def test_round_to_matches_ml_dtypes_on_random_float32_bit_patterns(fmt):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2 ** 32, 2_000_000, dtype=np.uint32).view(np.float32)  # every exponent, NaNs too
    assert_bits_equal(precision.round_to(x, fmt), reference(x, fmt))


@pytest.mark.parametrize("fmt", precision.ROUNDED)
def test_round_to_matches_ml_dtypes_on_float32_subnormals_and_nan_payloads(fmt):
    bits = np.concatenate([np.arange(0, 2 ** 16, dtype=np.uint32),  # the smallest float32 subnormals
                           np.uint32(0x007FFFFF) - np.arange(2 ** 12, dtype=np.uint32),  # the largest
                           np.array([0x7F800001, 0x7FC00001, 0x7FBFFFFF, 0x7FFFFFFF], np.uint32)])
    x = np.concatenate([bits, bits | np.uint32(0x80000000)]).view(np.float32)
    assert_bits_equal(precision.round_to(x, fmt), reference(x, fmt))


def test_e4m3_has_no_inf_overflow_and_inf_give_nan():
    x = np.array([448, 464, 464.01, 1e4, np.inf, -np.inf], np.float32)
    y = precision.round_to(x, "fp8_e4m3")
    assert y[0] == 448 and y[1] == 448  # 464 is the tie between 448 and (NaN's) 480: to even
    assert np.isnan(y[2:]).all()


@pytest.mark.parametrize("fmt, max_value, min_normal, min_sub, eps", [
    ("fp32", 3.4028234663852886e38, 2.0 ** -126, 2.0 ** -149, 2.0 ** -23),
    ("bf16", 3.3895313892515355e38, 2.0 ** -126, 2.0 ** -133, 2.0 ** -7),
    ("fp16", 65504.0, 2.0 ** -14, 2.0 ** -24, 2.0 ** -10),
    ("fp8_e5m2", 57344.0, 2.0 ** -14, 2.0 ** -16, 0.25),
    ("fp8_e4m3", 448.0, 2.0 ** -6, 2.0 ** -9, 0.125),
])
def test_derived_limits_equal_the_reference_types(fmt, max_value, min_normal, min_sub, eps):
    f = precision.facts(fmt)
    assert (f["max"], f["smallest_normal"], f["smallest_subnormal"], f["spacing_at_one"]) == (
        max_value, min_normal, min_sub, eps)
    ref = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16,
           "fp8_e5m2": ml_dtypes.float8_e5m2, "fp8_e4m3": ml_dtypes.float8_e4m3fn}[fmt]
    info = ml_dtypes.finfo(ref) if fmt not in ("fp32", "fp16") else np.finfo(ref)
    assert f["max"] == float(info.max)
    assert f["smallest_normal"] == float(info.smallest_normal)
    assert f["smallest_subnormal"] == float(info.smallest_subnormal)
    assert f["spacing_at_one"] == float(info.eps)


@pytest.mark.parametrize("fmt", precision.ROUNDED)
def test_overflow_and_underflow_thresholds_match_the_reference_types(fmt):
    """Below overflow_threshold a value rounds to the largest (float16: 65,519.99 to 65,504); at and
    below underflow_threshold, half the smallest subnormal, it rounds to zero; just past each it does not."""
    f = precision.facts(fmt)
    top, low = np.float32(f["overflow_threshold"]), np.float32(f["underflow_threshold"])
    below, above = np.nextafter(top, np.float32(0)), np.nextafter(top, np.float32(np.inf))
    got = reference(np.array([below, top, above, low, np.nextafter(low, np.float32(1))], np.float32), fmt)
    assert got[0] == f["max"] and not np.isfinite(got[2])
    assert (got[1] == f["max"]) == (not f["has_inf"])  # the tie: to inf (IEEE), back to the max (E4M3)
    assert got[3] == 0 and got[4] == f["smallest_subnormal"]
    assert_bits_equal(precision.round_to(np.array([below, top, above, low], np.float32), fmt), got[:4])


@pytest.mark.parametrize("fmt", precision.ROUNDED)
def test_stochastic_rounding_is_unbiased(fmt):
    rng = np.random.default_rng(1)
    f = precision.facts(fmt)
    # A normal value between two neighbours, and a subnormal one: the mean of many roundings is x.
    for x0 in (1.0 + 0.3 * f["spacing_at_one"], 2.3 * f["smallest_subnormal"]):
        x = np.full(400_000, x0, dtype=np.float32)
        y = precision.round_stochastic(x, fmt, rng).astype(np.float64)
        lo, hi = y.min(), y.max()
        assert len(np.unique(y)) == 2 and lo < x0 < hi  # only the two neighbours
        p = (x0 - lo) / (hi - lo)
        se = (hi - lo) * math.sqrt(p * (1 - p) / x.size)
        assert abs(y.mean() - float(np.float32(x0))) < 4 * se
    # Values the format holds are never moved.
    exact = precision.round_to(np.linspace(-3, 3, 1001, dtype=np.float32), fmt)
    assert_bits_equal(precision.round_stochastic(exact, fmt, rng), exact)


def test_stochastic_rounding_keeps_updates_that_nearest_rounding_loses():
    rng = np.random.default_rng(2)
    w_near = np.ones(1000, np.float32)
    w_sr = np.ones(1000, np.float32)
    for _ in range(100):
        w_near = precision.round_to(w_near + np.float32(1e-3), "bf16")
        w_sr = precision.round_stochastic(w_sr + np.float32(1e-3), "bf16", rng)
    assert (w_near == 1.0).all()  # 1e-3 is below half of bf16's spacing at 1
    assert abs(w_sr.mean() - 1.1) < 0.01


@pytest.mark.parametrize("fmt", list(precision.FORMATS))
def test_decompose_agrees_with_round_to_and_the_reference_bits(fmt):
    for v in (0.1, -3.14159, 1.0, 65504.0, 1e-7, 300.0, 0.0, -0.0, 1e-30, 7e4):
        d = precision.decompose(v, fmt)
        if fmt != "fp32":
            want = float(precision.round_to(np.array([v], np.float32), fmt)[0])
            if abs(float(np.float32(v)) - v) == 0.0 or d["regime"] in ("zero", "underflow"):
                assert d["stored"] == want or (math.isnan(want) and math.isnan(d["stored"]))
        bits = int(d["sign"] + d["exponent"] + d["mantissa"], 2)
        assert precision.decode(bits, fmt) == d["stored"] or math.isnan(d["stored"])
        if d["above"] is not None and d["below"] is not None and math.isfinite(d["stored"]):
            assert d["below"] < d["stored"] < d["above"]


def test_decompose_regimes_and_neighbours():
    d = precision.decompose(1.0, "bf16")
    assert (d["sign"], d["exponent"], d["mantissa"]) == ("0", "01111111", "0000000")
    assert d["above"] == 1 + 2 ** -7 and d["below"] == 1 - 2 ** -8
    assert precision.decompose(1e5, "fp16")["regime"] == "overflow"
    assert precision.decompose(1e-9, "fp16")["regime"] == "underflow"
    assert precision.decompose(1e-6, "fp16")["regime"] == "subnormal"
    assert precision.decompose(1e5, "bf16")["regime"] == "normal"
    assert precision.decompose(float("inf"), "fp8_e4m3")["regime"] == "overflow"
    assert precision.decompose(0.0, "fp8_e4m3")["below"] == -2.0 ** -9


def test_round_to_rejects_unknown_formats():
    with pytest.raises(ValueError, match="unknown format"):
        precision.round_to(np.ones(2, np.float32), "fp12")


def test_repeated_add_loses_the_increment_in_bf16_and_keeps_it_in_fp32_or_stochastically():
    rng = np.random.default_rng(3)
    near = precision.repeated_add(1.0, 0.001, 1000, "bf16")
    assert near[-1, 0] == 1.0  # the seed's "add 0.001 to 1.00 a thousand times"
    fp32 = precision.repeated_add(1.0, 0.001, 1000, "fp32")
    assert abs(fp32[-1, 0] - 2.0) < 1e-3
    sr = precision.repeated_add(1.0, 0.001, 1000, "bf16", stochastic=True, rng=rng, lanes=1024)
    assert abs(sr[-1].mean() - 2.0) < 0.02  # unbiased: one lane wanders (sd ~0.1), the mean of 1024 lands within ~5 sd of 2
