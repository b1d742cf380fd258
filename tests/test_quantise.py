"""Uniform integer quantisation (pylib.systems.quantise): the grid, the bound, clipping, stochastic rounding."""

import numpy as np
import pytest

from pylib.systems import quantise


@pytest.mark.parametrize("bits, qmax", [(8, 127), (4, 7), (2, 1), (16, 32767)])
def test_symmetric_grid_has_two_to_bits_minus_one_minus_one_levels_each_side(bits, qmax):
    assert quantise.q_max(bits) == qmax
    x = np.linspace(-3, 3, 10001).astype(np.float32)
    q, step, _ = quantise.quantise_codes(x, bits, 2.0)
    assert q.min() == -qmax and q.max() == qmax
    assert step == pytest.approx(2.0 / qmax, rel=1e-15)


@pytest.mark.parametrize("bits", [8, 4])
def test_error_inside_full_scale_is_at_most_half_a_step(bits):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.5, 1.5, 100_000).astype(np.float32)
    xq, frac = quantise.quantise_uniform(x, bits, 1.5)
    step = quantise.step_size(bits, 1.5)
    assert frac == 0.0
    err = np.abs(xq.astype(np.float64) - x)
    assert err.max() <= step / 2 * (1 + 1e-6)
    # Uniformly spread values: the RMS error is step / sqrt(12) (within sampling error).
    assert np.sqrt(np.mean(err ** 2)) == pytest.approx(step / np.sqrt(12), rel=0.02)


def test_values_beyond_full_scale_are_clipped_to_it_and_counted():
    x = np.array([-5.0, -1.0, -0.3, 0.0, 0.3, 1.0, 1.0001, 7.0], dtype=np.float32)
    xq, frac = quantise.quantise_uniform(x, 8, 1.0)
    assert frac == 3 / 8  # -5, 1.0001 and 7 lie beyond; +-1.0 exactly is inside
    assert xq[0] == -1.0 and xq[-1] == 1.0 and xq[6] == 1.0
    assert xq[1] == -1.0 and xq[5] == 1.0 and xq[3] == 0.0


def test_quantisation_error_reports_clipping_error_beyond_the_bound():
    x = np.array([0.1, 0.2, 10.0], dtype=np.float32)
    e = quantise.quantisation_error(x, 8, 1.0)
    assert e["max_error"] == pytest.approx(9.0, rel=1e-6)  # the clipped element
    assert e["rms_error_in_range"] <= e["bound_in_range"]
    assert e["clipped_fraction"] == pytest.approx(1 / 3)


def test_amax_full_scale_clips_nothing():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(1000).astype(np.float32)
    fs = quantise.amax_full_scale(x)
    _, frac = quantise.quantise_uniform(x, 4, fs)
    assert frac == 0.0 and fs == np.abs(x).max()


def test_ties_round_to_even_codes():
    step = quantise.step_size(8, 127.0)  # step 1: codes are the rounded values themselves
    q, _, _ = quantise.quantise_codes(np.array([0.5, 1.5, 2.5, -0.5, -1.5], np.float32), 8, 127.0)
    assert step == 1.0 and q.tolist() == [0, 2, 2, 0, -2]


def test_stochastic_rounding_is_unbiased_inside_the_full_scale():
    rng = np.random.default_rng(2)
    x = np.full(200_000, 0.3, dtype=np.float32)
    fs = 7.0  # int4: step 1, so 0.3 rounds to 0 (nearest) but to 1 with probability 0.3 (stochastic)
    xq_n, _ = quantise.quantise_uniform(x, 4, fs)
    xq_s, _ = quantise.quantise_uniform(x, 4, fs, rng=rng)
    assert xq_n.mean() == 0.0
    se = np.sqrt(0.3 * 0.7 / x.size)
    assert abs(xq_s.mean() - 0.3) < 4 * se
    assert set(np.unique(xq_s).tolist()) == {0.0, 1.0}


def test_bytes_per_element():
    assert quantise.bytes_per_element(8) == 1.0
    assert quantise.bytes_per_element(4) == 0.5
    assert quantise.bytes_per_element(8, n_elements=1000) == 1.004


@pytest.mark.parametrize("bits, fs", [(1, 1.0), (17, 1.0), (8.0, 1.0), (True, 1.0), (8, 0.0), (8, -1.0),
                                      (8, float("nan")), (8, float("inf"))])
def test_bad_arguments_raise_clear_errors(bits, fs):
    with pytest.raises(ValueError):
        quantise.quantise_uniform(np.ones(3, np.float32), bits, fs)


def test_non_finite_input_raises_and_all_zero_has_no_amax():
    with pytest.raises(ValueError, match="inf or NaN"):
        quantise.quantise_uniform(np.array([1.0, np.inf], np.float32), 8, 1.0)
    with pytest.raises(ValueError, match="amax"):
        quantise.amax_full_scale(np.zeros(4, np.float32))
