"""Goodput under failures: the simulation against the exact expectation, Young's interval where
delta << M, and where Daly's refinement matters."""

import math

import numpy as np
import pytest

from pylib.systems import goodput


def test_daly_interval_reproduces_the_values_in_dalys_figures():
    # Daly 2006, Figs. 3-5 (R = 10 min, delta = 5 min): "The new model predicts tau_opt = 117 min"
    # for M = 24 h, 57 min for M = 6 h, 9.1 min for M = 15 min.
    assert round(goodput.daly_interval(5.0, 24 * 60)) == 117
    assert round(goodput.daly_interval(5.0, 6 * 60)) == 57
    assert round(goodput.daly_interval(5.0, 15.0), 1) == 9.1
    assert goodput.daly_interval(5.0, 2.0) is None  # the series is for delta < 2M


def test_exact_optimum_solves_the_stationarity_condition_and_ignores_R():
    for delta, M in [(1.0, 1000.0), (5.0, 15.0), (0.1, 3.0)]:
        tau = goodput.optimal_interval(delta, M)
        best = goodput.expected_goodput(tau, delta, M, 10.0)
        for f in (0.9, 0.99, 1.01, 1.1):
            assert goodput.expected_goodput(f * tau, delta, M, 10.0) < best
            assert goodput.expected_goodput(f * tau, delta, M, 0.5) < goodput.expected_goodput(tau, delta, M, 0.5)


def test_simulation_matches_the_expected_goodput():
    rng = np.random.default_rng(0)
    for tau, delta, M, R in [(44.7, 1.0, 1000.0, 10.0), (9.0, 5.0, 15.0, 10.0), (2.0, 0.5, 1.0, 0.2)]:
        n = 100_000
        sim = goodput.simulate_job(tau, delta, M, R, n, rng)
        exp = goodput.expected_goodput(tau, delta, M, R)
        # wall time is a sum of n iid segment times; its relative sd shrinks as 1/sqrt(n)
        seg = [goodput.simulate_job(tau, delta, M, R, 1, rng)["wall"] for _ in range(2000)]
        rel_sd = np.std(seg) / np.mean(seg) / math.sqrt(n)
        assert abs(sim["goodput"] / exp - 1) < 4 * rel_sd, (tau, delta, M, R)
    no_failures = goodput.simulate_job(10.0, 1.0, 1e12, 5.0, 100, rng)
    assert no_failures["failures"] == 0 and no_failures["goodput"] == pytest.approx(10 / 11)


def test_simulated_optimum_lies_near_young_when_delta_is_small():
    delta, M, R = 1.0, 1000.0, 10.0
    young = goodput.young_interval(delta, M)
    grid = [2 ** (k / 2) for k in range(-4, 5)]  # factors of sqrt(2): 1/4 .. 4
    sweep = goodput.goodput_sweep([young * f for f in grid], delta, M, R, work=5000 * M, seed=0)
    best = int(np.argmax(sweep["simulated"]))
    assert grid[best] in (2 ** -0.5, 1.0, 2 ** 0.5)
    assert abs(goodput.optimal_interval(delta, M) / young - 1) < 0.02  # first order is enough here
    # far from it the loss is resolvable: a quarter or four times the interval wastes more
    assert sweep["simulated"][grid.index(1.0)] > sweep["simulated"][0] + 0.02
    assert sweep["simulated"][grid.index(1.0)] > sweep["simulated"][-1] + 0.02


def test_daly_matters_when_delta_is_not_small():
    delta, M, R = 5.0, 15.0, 10.0  # Daly's Fig. 5 setting
    young, daly, opt = goodput.young_interval(delta, M), goodput.daly_interval(delta, M), goodput.optimal_interval(delta, M)
    assert abs(daly / opt - 1) < 0.01 and young / opt > 1.25  # Young's interval is a third too long here
    n = 200_000
    at_young = goodput.simulate_job(young, delta, M, R, n, np.random.default_rng(1))["goodput"]
    at_daly = goodput.simulate_job(daly, delta, M, R, n, np.random.default_rng(2))["goodput"]
    assert at_daly > at_young * 1.015  # a resolvable gain (each is within ~0.3% of its expectation)
    assert goodput.expected_goodput(daly, delta, M, R) > goodput.expected_goodput(young, delta, M, R)


def test_refuses_a_segment_that_almost_never_finishes():
    with pytest.raises(ValueError, match="almost every segment"):
        goodput.simulate_job(100.0, 1.0, 1.0, 0.1, 10, np.random.default_rng(0))


def test_goodput_op_takes_a_free_restart_and_refuses_a_negative_one():
    from pylib.web import InputError
    from pylib.web.job_ops import goodput_op
    v = goodput_op(None, {"delta": "1", "M": "100", "R": "0", "tau": "14"})
    assert v["chosen"]["expected"] == goodput.expected_goodput(14.0, 1.0, 100.0, 0.0) == 14.0 / (100.0 * math.expm1(0.15))
    assert abs(v["chosen"]["simulated"] / v["chosen"]["expected"] - 1) < 0.05
    with pytest.raises(InputError) as e:
        goodput_op(None, {"delta": "1", "M": "100", "R": "-1", "tau": "14"})
    assert set(e.value.errors) == {"R"} and "at least 0" in e.value.errors["R"]
