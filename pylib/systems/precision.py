"""Floating-point formats narrower than float32, emulated in float32 with bit tricks.

A format is a sign bit, E exponent bits and M mantissa bits. A normal number is
(-1)^s * 1.m * 2^(e - bias), bias = 2^(E-1) - 1; exponent field 0 holds the subnormals
(-1)^s * 0.m * 2^(1 - bias) and zero. IEEE-style formats (fp32, bf16, fp16, E5M2) keep the
all-ones exponent for inf and NaN. OCP/NVIDIA's E4M3 (ml_dtypes' float8_e4m3fn, "fn": finite,
NaN) has no inf: the all-ones exponent holds normal numbers too, and only S.1111.111 is NaN, which
buys one more binade (max 448 instead of 240). Every limit below is derived from (E, M, kind),
never typed.

`round_to(x, fmt)` rounds a float32 array to the nearest value of fmt (ties to even) and returns
it as float32: x.astype(ml_dtypes.<fmt>).astype(np.float32) bit for bit, which tests/test_precision.py
checks (fp16 against NumPy's float16). Overflow gives inf (IEEE kinds) or NaN (E4M3: ml_dtypes
has no saturation); NaN stays NaN (ml_dtypes' canonical quiet NaN; NumPy's float16 keeps the
payload's top bits). `round_stochastic(x, fmt, rng)` rounds up with
probability equal to the distance to the lower neighbour over the spacing, so its mean is x.

How the rounding works on the uint32 view (no loop over elements): inside the normal range,
adding half a unit of the target's last place (minus one, plus the kept LSB, for ties to even)
and clearing the dropped bits rounds the mantissa; a carry moves into the exponent as it should.
Below the smallest normal the spacing is fixed at the smallest subnormal q, and float32
addition does the rounding: (|x| + C) - C with C = q * 2^23 rounds |x| to a multiple of q.

Legend: E exponent bits, M mantissa bits, q the smallest subnormal, ulp the spacing.
"""

import math

import numpy as np

# ---------------------------------------------------------------------------
# The formats: (exponent bits, mantissa bits, kind)

FORMATS = {
    "fp32": (8, 23, "ieee"),
    "bf16": (8, 7, "ieee"),
    "fp16": (5, 10, "ieee"),
    "fp8_e5m2": (5, 2, "ieee"),
    "fp8_e4m3": (4, 3, "fn"),  # finite: no inf, one NaN pattern per sign
}
ROUNDED = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2")  # the formats round_to accepts
NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16",
         "fp8_e5m2": "FP8 E5M2", "fp8_e4m3": "FP8 E4M3"}


def _layout(fmt):
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    return FORMATS[fmt]


def bias(fmt):
    """The exponent bias 2^(E-1) - 1."""
    E, _, _ = _layout(fmt)
    return 2 ** (E - 1) - 1


def max_exponent(fmt):
    """The largest unbiased exponent of a finite number (the all-ones field is inf/NaN for IEEE kinds)."""
    E, _, kind = _layout(fmt)
    top = 2 ** E - 1  # the all-ones exponent field
    return (top if kind == "fn" else top - 1) - bias(fmt)


def max_value(fmt):
    """The largest finite value: 1.11..1 x 2^emax (IEEE), 1.11..0 x 2^emax for E4M3 (1.11..1 is NaN)."""
    _, M, kind = _layout(fmt)
    top_mantissa = 2 ** M - 1 - (1 if kind == "fn" else 0)  # as an integer of M bits
    return (1.0 + top_mantissa / 2 ** M) * 2.0 ** max_exponent(fmt)


def smallest_normal(fmt):
    """2^(1 - bias)."""
    return 2.0 ** (1 - bias(fmt))


def smallest_subnormal(fmt):
    """2^(1 - bias - M): the spacing of the subnormals."""
    _, M, _ = _layout(fmt)
    return 2.0 ** (1 - bias(fmt) - M)


def overflow_threshold(fmt):
    """Where rounding to nearest leaves the finite range: the largest value plus half its spacing.
    Below it a value rounds to the largest value; at it, the tie goes to the even neighbour: past
    the range for IEEE kinds (whose largest mantissa is odd), back to the largest for E4M3."""
    _, M, _ = _layout(fmt)
    return max_value(fmt) + 2.0 ** (max_exponent(fmt) - M) / 2


def underflow_threshold(fmt):
    """Half the smallest subnormal: a magnitude up to it rounds to zero (the tie goes to even, 0)."""
    return smallest_subnormal(fmt) / 2


def spacing_at_one(fmt):
    """2^-M: the gap from 1 to the next number up (machine epsilon)."""
    return 2.0 ** -_layout(fmt)[1]


def significant_digits(fmt):
    """(M + 1) log10 2: the decimal digits the significand holds."""
    return (_layout(fmt)[1] + 1) * math.log10(2.0)


def facts(fmt):
    """Every derived limit of fmt, as a dict of Python numbers (for the chapter and the widgets)."""
    E, M, kind = _layout(fmt)
    return {"format": fmt, "name": NAMES[fmt], "bits": 1 + E + M, "exponent_bits": E, "mantissa_bits": M,
            "bias": bias(fmt), "has_inf": kind == "ieee", "max": max_value(fmt),
            "smallest_normal": smallest_normal(fmt), "smallest_subnormal": smallest_subnormal(fmt),
            "spacing_at_one": spacing_at_one(fmt), "significant_digits": significant_digits(fmt),
            "overflow_threshold": overflow_threshold(fmt), "underflow_threshold": underflow_threshold(fmt),
            "lost_increment_at_one": spacing_at_one(fmt) / 2}


# ---------------------------------------------------------------------------
# Rounding float32 arrays

_SIGN = np.uint32(0x80000000)
_ABS = np.uint32(0x7FFFFFFF)
_INF32 = np.uint32(0x7F800000)
_QNAN32 = np.uint32(0x7FC00000)


def _f32_bits(value):
    return int(np.array(value, dtype=np.float32).view(np.uint32))


def _constants(fmt):
    """Per-format uint32 constants of the rounding, cached."""
    if fmt not in _CONST:
        E, M, kind = _layout(fmt)
        shift = 23 - M
        q = smallest_subnormal(fmt)
        _CONST[fmt] = {
            "shift": shift,
            "half_minus_one": np.uint32((1 << (shift - 1)) - 1),
            "keep": np.uint32((0xFFFFFFFF << shift) & 0xFFFFFFFF),
            "drop": np.uint32((1 << shift) - 1),
            "min_normal_bits": np.uint32(_f32_bits(smallest_normal(fmt))),
            "max_bits": np.uint32(_f32_bits(max_value(fmt))),
            "overflow_bits": _INF32 if kind == "ieee" else _QNAN32,
            "magic": np.float32(q * 2.0 ** 23),  # (|x| + magic) - magic rounds |x| to a multiple of q
            "q": np.float32(q),
            # float32's own subnormals have bf16's subnormal spacing times 2^-16, so the bit trick
            # rounds them right; the narrower formats' subnormals need the float32 addition.
            "subnormal_path": 1 - bias(fmt) > -126,
        }
    return _CONST[fmt]


_CONST = {}


def _as_f32(x):
    x = np.asarray(x)
    if x.dtype != np.float32:
        x = x.astype(np.float32)
    return np.ascontiguousarray(x)


def round_to(x, fmt):
    """x (float32 array) rounded to the nearest value of fmt, ties to even, returned as float32."""
    if fmt == "fp32":
        return _as_f32(x).copy()
    _layout(fmt)
    x = _as_f32(x)
    c = _constants(fmt)
    bits = x.view(np.uint32)
    a = bits & _ABS  # |x| as bits
    r = a >> np.uint32(c["shift"])
    r &= np.uint32(1)  # the kept LSB: ties go to even
    r += a
    r += c["half_minus_one"]
    r &= c["keep"]
    if c["subnormal_path"]:  # below the smallest normal: fixed spacing q, rounded by float32 addition
        with np.errstate(over="ignore", invalid="ignore"):
            sub = a.view(np.float32) + c["magic"]
            sub -= c["magic"]
        r = np.where(a < c["min_normal_bits"], sub.view(np.uint32), r)
    over = r > c["max_bits"]  # includes inf in; NaN in is handled next
    if over.any():
        r[over] = c["overflow_bits"]
    nan = a > _INF32
    if nan.any():
        r[nan] = _nan_bits(a[nan], fmt)
    r |= bits & _SIGN
    return r.view(np.float32)


def _nan_bits(a, fmt):
    """What a NaN becomes: the canonical quiet NaN (ml_dtypes), or NumPy float16's truncated payload."""
    if fmt != "fp16":
        return _QNAN32
    r = a & _constants(fmt)["keep"]  # NumPy keeps the payload's top 10 bits, and sets the lowest if none is left
    r[(r & np.uint32(0x007FFFFF)) == 0] |= np.uint32(1 << 13)
    return r


def round_stochastic(x, fmt, rng):
    """x rounded to fmt stochastically: down or up to a neighbour, up with probability (x - down) / ulp.

    Unbiased: E[result] = x wherever x lies between two finite values of fmt. Beyond the largest
    value the result overflows as round_to does.
    """
    if fmt == "fp32":
        return _as_f32(x).copy()
    E, M, kind = _layout(fmt)
    x = _as_f32(x)
    c = _constants(fmt)
    bits = x.view(np.uint32)
    a = bits & _ABS
    sign = bits & _SIGN
    noise = rng.integers(0, 1 << c["shift"], size=a.shape, dtype=np.uint32)
    r = (a + noise) & c["keep"]  # truncation after uniform noise on the dropped bits
    small = a < c["min_normal_bits"]
    if c["subnormal_path"] and small.any():
        q = float(c["q"])
        ax = a[small].view(np.float32).astype(np.float64) / q  # in units of q, exact
        lo = np.floor(ax)
        up = rng.random(ax.shape) < (ax - lo)
        r[small] = ((lo + up) * q).astype(np.float32).view(np.uint32)
    r[r > c["max_bits"]] = c["overflow_bits"]
    nan = a > _INF32
    if nan.any():
        r[nan] = _nan_bits(a[nan], fmt)
    r |= sign
    return r.view(np.float32)


def flushed_to_zero(x, rounded):
    """Boolean mask of elements that were non-zero in x and are zero after rounding (underflow)."""
    return (rounded == 0) & (x != 0)


# ---------------------------------------------------------------------------
# One value, for the rounding calculator: bits, neighbours, error (Python floats, float64 exact)


def _round_scalar(v, fmt):
    """A Python float rounded to fmt (ties to even), computed exactly in float64; inf/NaN as fmt gives them."""
    E, M, kind = _layout(fmt)
    if math.isnan(v):
        return math.nan
    if math.isinf(v):
        return v if kind == "ieee" else math.nan
    if v == 0.0:
        return v
    e = max(math.frexp(abs(v))[1] - 1, 1 - bias(fmt))  # the binade, floored at the subnormals'
    ulp = 2.0 ** (e - M)
    r = round(abs(v) / ulp) * ulp  # Python's round is ties-to-even; the division is exact
    if r > max_value(fmt):
        r = math.inf if kind == "ieee" else math.nan
    return math.copysign(r, v)


def encode(value, fmt):
    """The bit pattern (an int of 1 + E + M bits) of a value that fmt holds exactly."""
    E, M, kind = _layout(fmt)
    s = 1 if math.copysign(1.0, value) < 0 else 0
    if math.isnan(value):
        return (s << (E + M)) | ((2 ** E - 1) << M) | (2 ** M - 1 if kind == "fn" else 1 << (M - 1))
    a = abs(value)
    if math.isinf(a):
        return (s << (E + M)) | ((2 ** E - 1) << M)
    if a < smallest_normal(fmt):
        return (s << (E + M)) | int(round(a / smallest_subnormal(fmt)))
    m, e = math.frexp(a)  # a = m 2^e, 0.5 <= m < 1
    exp_field = e - 1 + bias(fmt)
    man = int(round((m * 2 - 1) * 2 ** M))
    return (s << (E + M)) | (exp_field << M) | man


def decode(code, fmt):
    """The value of a bit pattern of fmt."""
    E, M, kind = _layout(fmt)
    s = -1.0 if code >> (E + M) & 1 else 1.0
    ef = (code >> M) & (2 ** E - 1)
    man = code & (2 ** M - 1)
    if ef == 2 ** E - 1 and (kind == "ieee" or man == 2 ** M - 1):
        return s * math.inf if kind == "ieee" and man == 0 else math.nan
    if ef == 0:
        return s * man * smallest_subnormal(fmt)
    return s * (1 + man / 2 ** M) * 2.0 ** (ef - bias(fmt))


def decompose(value, fmt):
    """What fmt makes of one number: its bits, the stored value, the error, the neighbours, the regime.

    Returns {"format", "sign", "exponent", "mantissa" (bit strings), "stored", "abs_error",
    "rel_error", "below", "above" (the representable neighbours of the stored value; None past the
    ends), "regime" ("normal", "subnormal", "zero", "underflow", "overflow", "nan", "inf")}.
    """
    E, M, kind = _layout(fmt)
    v = float(value)
    stored = _round_scalar(v, fmt)
    if math.isnan(v):
        regime = "nan"
    elif math.isinf(v):
        regime = "inf" if kind == "ieee" else "overflow"
    elif math.isnan(stored) or math.isinf(stored):
        regime = "overflow"
    elif stored == 0.0:
        regime = "zero" if v == 0.0 else "underflow"
    elif abs(stored) < smallest_normal(fmt):
        regime = "subnormal"
    else:
        regime = "normal"
    code = encode(stored, fmt)
    bits = format(code, f"0{1 + E + M}b")
    below = above = None
    if math.isfinite(stored):
        mag = code & ((1 << (E + M)) - 1)
        neg = stored < 0 or (stored == 0 and math.copysign(1.0, stored) < 0)
        up, down = (mag - 1, mag + 1) if neg else (mag + 1, mag - 1)
        sign_bit = code & (1 << (E + M))

        def val(m):
            if m < 0:  # stepping below zero crosses to the other sign
                return decode((sign_bit ^ (1 << (E + M))) | 1, fmt)
            x = decode(sign_bit | m, fmt)
            return None if (math.isnan(x) or math.isinf(x)) else x

        above, below = val(up), val(down)
    err = None if not (math.isfinite(v) and math.isfinite(stored)) else stored - v
    return {"format": fmt, "sign": bits[0], "exponent": bits[1:1 + E], "mantissa": bits[1 + E:],
            "stored": stored, "abs_error": None if err is None else abs(err),
            "rel_error": None if err is None or v == 0 else abs(err) / abs(v),
            "below": below, "above": above, "regime": regime}


def rounding_interval(value, fmt):
    """Where value sits on fmt's number line: the stored value it rounds to, the neighbours below and
    above that (None past the largest value), the gaps (ulp) to them with their exponents (a gap is
    a power of two), and the interval of values that round to the stored value: halfway to each
    neighbour (past the largest value, the overflow threshold), the halfway points included when the
    stored value's last bit is 0 (ties to even). None when the stored value is inf or NaN."""
    d = decompose(value, fmt)
    s, lo, hi = d["stored"], d["below"], d["above"]
    if not math.isfinite(s):
        return None
    top = overflow_threshold(fmt)
    gap_lo = None if lo is None else s - lo  # exact: few significant bits each
    gap_hi = None if hi is None else hi - s
    log2 = lambda g: None if g is None else math.frexp(g)[1] - 1  # noqa: E731  (g is a power of two)
    return {"format": fmt, "x": float(value), "stored": s, "below": lo, "above": hi,
            "gap_below": gap_lo, "gap_above": gap_hi, "gap_below_log2": log2(gap_lo), "gap_above_log2": log2(gap_hi),
            "round_lo": -top if lo is None else (lo + s) / 2, "round_hi": top if hi is None else (s + hi) / 2,
            "ties_to_stored": d["mantissa"].endswith("0")}


# ---------------------------------------------------------------------------
# The lost update: a weight stored in fmt, incremented n times


def repeated_add(start, increment, n, fmt, stochastic=False, rng=None, lanes=1):
    """Add increment to a weight stored in fmt, n times, rounding after each addition.

    Returns (n + 1, lanes) float32 values: the weight after 0..n additions, in `lanes` independent
    copies (stochastic rounding draws different noise for each; nearest rounding gives the same
    value in every lane). The addition itself is float32, as an optimiser kernel computes it.
    """
    w = round_to(np.full(lanes, start, dtype=np.float32), fmt)
    inc = np.float32(increment)
    out = np.empty((n + 1, lanes), dtype=np.float32)
    out[0] = w
    for i in range(1, n + 1):
        w = w + inc
        w = round_stochastic(w, fmt, rng) if stochastic else round_to(w, fmt)
        out[i] = w
    return out
