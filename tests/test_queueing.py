"""The shared link as an M/D/1 queue, and the slowest of W workers: simulations against the exact values."""

import math

import numpy as np
import pytest

from pylib.systems import queueing as q


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.8])
def test_simulated_md1_wait_matches_pollaczek_khinchine(rho):
    sim = q.simulate_md1(rho, 2.0, n=200_000, seed=7)
    exact = rho * 2.0 / (2 * (1 - rho))
    assert sim["exact"] == pytest.approx(exact)
    assert sim["low"] <= exact <= sim["high"]
    assert sim["high"] - sim["low"] < 0.2 * exact  # an interval narrow enough to say something


def test_lindley_vectorised_equals_the_loop():
    rho, d, n = 0.7, 1.0, 2000
    sim = q.simulate_md1(rho, d, n=n, seed=3, warmup=0.0)
    gaps = np.random.default_rng(3).exponential(d / rho, size=n)
    w, waits = 0.0, [0.0]
    for a in gaps[:-1]:
        w = max(0.0, w + d - a)
        waits.append(w)
    np.testing.assert_allclose(sim["waits"], waits[:200], atol=1e-9)


def test_the_wait_grows_without_bound_near_full_load():
    waits = [q.md1_mean_wait(r, 1.0) for r in (0.5, 0.9, 0.99, 0.999)]
    assert waits == sorted(waits) and waits[-1] > 400


@pytest.mark.parametrize("rho", [1.0, 1.5, 0.0, -0.2, float("nan"), float("inf")])
def test_bad_load_is_refused_and_full_load_called_unstable(rho):
    with pytest.raises(ValueError) as e:
        q.simulate_md1(rho, 1.0)
    if math.isfinite(rho) and rho >= 1:
        assert "unstable" in str(e.value)


@pytest.mark.parametrize("w", [1, 4, 64, 1024])
def test_simulated_slowest_worker_matches_the_harmonic_number(w):
    sim = q.simulate_stragglers(w, 1.0, 0.25, syncs=max(100, 200_000 // w), seed=5)
    exact = 1.0 + 0.25 * sum(1 / i for i in range(1, w + 1))
    assert sim["exact"] == pytest.approx(exact)
    assert sim["low"] <= exact <= sim["high"]


def test_expected_slowest_grows_like_log_w():
    e = [q.expected_slowest(w, 0.0, 1.0) for w in (1, 10, 100, 1000)]
    assert e[0] == 1.0 and e == sorted(e)
    assert e[-1] - math.log(1000) == pytest.approx(0.5772, abs=1e-3)  # H_W - ln W -> Euler's gamma


def test_no_spread_means_no_stragglers():
    sim = q.simulate_stragglers(16, 0.5, 0.0, syncs=1000)
    assert sim["mean"] == sim["exact"] == 0.5


@pytest.mark.parametrize("w", [0, 1e9, -1, 2.5, float("nan")])
def test_bad_worker_counts_are_refused(w):
    with pytest.raises(ValueError):
        q.simulate_stragglers(w, 1.0, 0.1)


def test_negative_times_are_refused():
    with pytest.raises(ValueError):
        q.expected_slowest(4, 1.0, -0.1)
    with pytest.raises(ValueError):
        q.simulate_md1(0.5, -1.0)


def test_local_steps_at_h_1_are_the_harmonic_number():
    for w in (1, 4, 64):
        assert q.expected_slowest_local(w, 1, 1.0, 0.2) == pytest.approx(q.expected_slowest(w, 1.0, 0.2), rel=1e-9)
        assert q.once_per_h_naive(w, 1, 1.0, 0.2) == pytest.approx(q.expected_slowest(w, 1.0, 0.2))


def test_simulated_local_stragglers_match_the_integral_and_exceed_once_per_h():
    # W = 64 workers, H = 10 local steps of 1 + Exponential(0.2) between syncs.
    sim = q.simulate_local_stragglers(64, 10, 1.0, 0.2, syncs=20_000, seed=3)
    assert sim["low"] <= sim["exact"] <= sim["high"]
    assert sim["naive"] == pytest.approx(1.0 + 0.2 + 0.2 * (q.harmonic(64) - 1) / 10)
    assert sim["low"] > sim["naive"] + 0.05  # paying the slowest "once per H" understates it


def test_the_slowest_workers_excess_at_a_sync_grows_like_sqrt_h():
    # Excess over the average worker's H steps: H (E[per step] - base - spread). Once per H would keep it
    # at spread (H_W - 1) whatever H is; it grows like sqrt(H) instead (the sum's sd is spread sqrt(H)).
    excess = {h: h * (q.expected_slowest_local(64, h, 0.0, 1.0) - 1.0) for h in (1, 100, 400)}
    assert excess[1] == pytest.approx(q.harmonic(64) - 1)
    assert 1.8 < excess[400] / excess[100] < 2.05  # sqrt(4) = 2, approached from below


@pytest.mark.parametrize("h", [0, 1001, 2.5, float("nan"), True])
def test_bad_local_step_counts_are_refused(h):
    with pytest.raises(ValueError):
        q.simulate_local_stragglers(4, h, 1.0, 0.1)
