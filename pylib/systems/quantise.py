"""Uniform integer quantisation: a few integer levels between -full_scale and +full_scale.

A tensor is sent or stored as signed integer codes q in [-q_max, q_max], q_max = 2**(bits-1) - 1
(127 for int8, 7 for int4), and one float32 scale per tensor. Decoding gives q * step with
step = full_scale / q_max. Inside the full scale the error is at most step / 2 (round to nearest,
ties to even); values beyond it are clipped to +-full_scale, and their error is |x| - full_scale,
which has no bound. The choice of full scale trades the two: the tensor's amax clips nothing but
makes the step coarse when one element is an outlier; a smaller full scale gives a finer step to
the many and clips the few. The grid is symmetric (no -128 for int8), so zero is exact and +x and
-x quantise to opposite codes.

Bytes per element: bits / 8 (int4 packs two codes to a byte), plus 4 bytes per tensor for the scale
(`bytes_per_element`). Chapter 9 measures the error; chapter 13 quantises gradients with it and
feeds the error back.

Legend: x any float array; q the integer codes (same shape), step the spacing of the grid.
"""

import numpy as np

SCALE_BYTES = 4  # the per-tensor full scale, sent as one float32


def _check(bits, full_scale):
    if not isinstance(bits, (int, np.integer)) or isinstance(bits, bool) or not 2 <= bits <= 16:
        raise ValueError(f"bits must be an integer from 2 to 16, got {bits!r}")
    fs = float(full_scale)
    if not np.isfinite(fs) or fs <= 0.0:
        raise ValueError(f"the full scale must be a positive finite number, got {full_scale!r}")
    return int(bits), fs


def q_max(bits):
    """The largest code of a symmetric signed grid: 2**(bits-1) - 1 (127 for int8, 7 for int4)."""
    return 2 ** (int(bits) - 1) - 1


def step_size(bits, full_scale):
    """The spacing of the grid: full_scale / q_max."""
    bits, fs = _check(bits, full_scale)
    return fs / q_max(bits)


def bytes_per_element(bits, n_elements=None):
    """Bytes a quantised element costs: bits / 8, plus the float32 scale spread over n_elements if given."""
    b = int(bits) / 8.0
    return b if n_elements is None else b + SCALE_BYTES / int(n_elements)


def amax_full_scale(x):
    """The full scale that clips nothing: max |x| (ValueError when it is 0 or not finite)."""
    m = float(np.max(np.abs(x))) if np.size(x) else 0.0
    if not np.isfinite(m) or m <= 0.0:
        raise ValueError(f"amax is {m}: no full scale can be taken from an all-zero or non-finite tensor")
    return m


def quantise_codes(x, bits, full_scale, rng=None):
    """Integer codes of x on the grid: (q int8/int16 array, step, clipped fraction).

    Round to nearest (ties to even), or stochastically when an rng is given (unbiased inside the
    full scale: rounds up with probability equal to the remainder). Non-finite inputs raise.
    """
    bits, fs = _check(bits, full_scale)
    x = np.asarray(x, dtype=np.float32)
    if not np.all(np.isfinite(x)):
        raise ValueError("cannot quantise a tensor holding inf or NaN")
    qm = q_max(bits)
    step = fs / qm
    u = x.astype(np.float64) / step  # in units of the step; float64 so the division adds no error
    if rng is None:
        r = np.rint(u)
    else:
        lo = np.floor(u)
        r = lo + (rng.random(u.shape) < (u - lo))
    clipped = np.abs(x) > fs
    q = np.clip(r, -qm, qm).astype(np.int8 if bits <= 8 else np.int16)
    frac = float(clipped.mean()) if x.size else 0.0
    return q, step, frac


def dequantise(q, step):
    """float32 values of the codes: q * step."""
    return (q.astype(np.float64) * step).astype(np.float32)


def quantise_uniform(x, bits, full_scale, rng=None):
    """Round x to `bits`-bit uniform levels between +-full_scale: (dequantised float32 array, clipped fraction)."""
    q, step, frac = quantise_codes(x, bits, full_scale, rng)
    return dequantise(q, step), frac


def quantisation_error(x, bits, full_scale):
    """How far the quantised x lands from x, against the full scale.

    Returns {"rms_error", "max_error", "rms_error_in_range", "clipped_fraction", "step",
    "rms_error_over_full_scale", "bound_in_range"}: the in-range error is bounded by step / 2 and
    its RMS is about step / sqrt(12) for values spread over many steps; clipped values add
    |x| - full_scale each.
    """
    x = np.asarray(x, dtype=np.float32)
    xq, frac = quantise_uniform(x, bits, full_scale)
    step = step_size(bits, full_scale)
    err = (xq.astype(np.float64) - x)
    inside = np.abs(x) <= float(full_scale)
    rms = float(np.sqrt(np.mean(err ** 2))) if x.size else 0.0
    rms_in = float(np.sqrt(np.mean(err[inside] ** 2))) if inside.any() else 0.0
    return {"rms_error": rms, "max_error": float(np.max(np.abs(err))) if x.size else 0.0,
            "rms_error_in_range": rms_in, "clipped_fraction": frac, "step": step,
            "rms_error_over_full_scale": rms / float(full_scale), "bound_in_range": step / 2}
