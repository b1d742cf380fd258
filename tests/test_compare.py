"""pylib.compare: the t quantiles, the paired interval, and verdicts that follow from the interval."""

import math

import numpy as np
import pytest

from pylib import compare


@pytest.mark.parametrize("p", [0.6, 0.9, 0.975, 0.995])
def test_t_quantile_matches_the_closed_forms_for_one_and_two_degrees_of_freedom(p):
    assert compare.t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)
    assert compare.t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 30, 200])
def test_t_quantile_matches_scipy(df):
    stats = pytest.importorskip("scipy.stats")
    for p in (0.025, 0.5, 0.8, 0.975, 0.999):
        assert compare.t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-8, abs=1e-10)


def test_t_quantile_rejects_impossible_arguments():
    for p, df in [(0.0, 3), (1.0, 3), (0.5, 0)]:
        with pytest.raises(ValueError):
            compare.t_quantile(p, df)


def test_paired_interval_is_the_t_interval_of_the_differences():
    a = {0: 2.50, 1: 2.61, 2: 2.47}
    b = {0: 2.55, 1: 2.62, 2: 2.52}
    c = compare.paired_comparison(a, b)
    d = np.array([a[s] - b[s] for s in (0, 1, 2)])
    half = compare.t_quantile(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert (c.n, c.mean, c.sd) == (3, pytest.approx(d.mean()), pytest.approx(d.std(ddof=1)))
    assert (c.low, c.high) == (pytest.approx(d.mean() - half), pytest.approx(d.mean() + half))


def test_pairing_cancels_a_shared_seed_effect():
    """Seed spread of 0.3 shared by both arms, a steady 0.01 difference: resolved, though the arms overlap."""
    seed_effect = [0.0, 0.3, -0.3]
    a = {s: 2.5 + e - 0.01 + 0.001 * s for s, e in enumerate(seed_effect)}
    b = {s: 2.5 + e for s, e in enumerate(seed_effect)}
    assert compare.paired_comparison(a, b).verdict == "lower"
    assert compare.paired_comparison(b, a).verdict == "higher"


@pytest.mark.parametrize("low, high, margin, verdict", [
    (-0.3, -0.1, 0.0, "lower"), (0.1, 0.3, 0.0, "higher"), (-0.01, 0.01, 0.02, "null"),
    (-0.01, 0.03, 0.02, "unresolved"), (-0.01, 0.01, 0.0, "unresolved"), (-0.02, 0.02, 0.02, "null")])
def test_verdict_follows_from_the_interval(low, high, margin, verdict):
    assert compare.verdict_from_interval(low, high, margin) == verdict


def test_every_verdict_agrees_with_its_interval_over_random_arms():
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(2000):
        n = int(rng.integers(2, 7))
        b = rng.normal(2.5, 0.1, n)
        a = b + rng.normal(rng.normal(0, 0.03), rng.uniform(0.001, 0.05), n)
        margin = float(rng.choice([0.0, 0.02, 0.05]))
        c = compare.paired_comparison(list(a), list(b), margin)
        seen.add(c.verdict)
        assert c.low <= c.mean <= c.high
        if c.verdict == "lower":
            assert c.high < 0
        elif c.verdict == "higher":
            assert c.low > 0
        elif c.verdict == "null":
            assert c.low <= 0 <= c.high and -margin <= c.low and c.high <= margin and margin > 0
        else:
            assert c.low <= 0 <= c.high and (margin == 0 or c.low < -margin or c.high > margin)
    assert seen == set(compare.VERDICTS)


def test_paired_comparison_refuses_what_cannot_be_paired():
    with pytest.raises(ValueError, match="different seeds"):
        compare.paired_comparison({0: 1.0, 1: 2.0}, {0: 1.0, 2: 2.0})
    with pytest.raises(ValueError, match="at least two"):
        compare.paired_comparison([1.0], [2.0])
    with pytest.raises(ValueError, match="diverge"):
        compare.paired_comparison([1.0, None], [2.0, 3.0])
    with pytest.raises(ValueError, match="diverge"):
        compare.paired_comparison([1.0, float("nan")], [2.0, 3.0])
