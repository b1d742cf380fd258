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


# ---------------------------------------------------------------------------
# Families: the p-values behind the verdicts, and Holm's correction


def _random_comparisons(seed, count):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(2, 8))
        b = rng.normal(2.5, 0.1, n)
        a = b + rng.normal(rng.normal(0, 0.03), rng.uniform(0.001, 0.05), n)
        yield list(a), list(b), float(rng.choice([0.0, 0.02, 0.05]))


def test_p_values_match_scipys_paired_t_test_tost_and_sign_test():
    stats = pytest.importorskip("scipy.stats")
    for a, b, margin in _random_comparisons(1, 200):
        c = compare.paired_comparison(a, b, margin)
        d = np.subtract(a, b)
        assert c.p_direction() == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-7, abs=1e-12)
        if margin:
            tost = max(stats.ttest_1samp(d, -margin, alternative="greater").pvalue,
                       stats.ttest_1samp(d, margin, alternative="less").pvalue)
            assert c.p_null() == pytest.approx(min(1.0, 2 * tost), rel=1e-7, abs=1e-12)
        signs = d[d != 0]
        assert c.sign_test_p() == pytest.approx(
            stats.binomtest(int((signs > 0).sum()), len(signs)).pvalue, rel=1e-12)


def test_the_claims_p_value_is_below_alpha_exactly_when_the_interval_makes_the_claim():
    for a, b, margin in _random_comparisons(2, 2000):
        c = compare.paired_comparison(a, b, margin)
        resolved = {"lower": c.p_direction(), "higher": c.p_direction(), "null": c.p_null()}
        for verdict, p in resolved.items():
            if c.verdict == verdict:
                assert p < compare.ALPHA + 1e-9
        if c.verdict == "unresolved":
            assert c.p_claim() > compare.ALPHA - 1e-9


def _holm_by_its_definition(p, alpha):
    """Holm (1979): reject the hypotheses of the i smallest p as long as each p_(j) <= alpha / (m - j + 1)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    rejected = set()
    for rank, i in enumerate(order):
        if p[i] > alpha / (len(p) - rank):
            break
        rejected.add(i)
    return rejected


def test_holm_rejects_what_its_step_down_definition_rejects():
    rng = np.random.default_rng(3)
    for _ in range(500):
        p = list(rng.uniform(0, 0.1, int(rng.integers(1, 12))) ** rng.uniform(0.5, 3))
        adjusted = compare.holm(p)
        assert {i for i, q in enumerate(adjusted) if q <= 0.05} == _holm_by_its_definition(p, 0.05)
        assert all(x <= q <= min(1.0, len(p) * x) + 1e-15 for x, q in zip(p, adjusted))  # between nominal and Bonferroni


def test_holm_worked_example_and_refusals():
    assert compare.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert compare.holm([]) == []
    with pytest.raises(ValueError):
        compare.holm([0.5, 1.5])


def test_a_nominal_verdict_that_does_not_survive_its_family_becomes_unresolved():
    """Chapter 9's case: one t = 5.06 on df = 2 (p ~ 0.037) among six comparisons loses its direction."""
    mean, sd = 0.05, 0.05 * math.sqrt(3) / 5.06
    lone = compare.paired_comparison([mean - sd, mean, mean + sd], [0.0, 0.0, 0.0])
    assert lone.verdict == "higher" and 0.03 < lone.p_direction() < 0.04
    flat = [compare.paired_comparison([0.1, -0.2, 0.15], [0.0, 0.0, 0.0]) for _ in range(5)]
    verdicts, ps = compare.adjusted_verdicts([lone] + flat)
    assert verdicts == ["unresolved"] * 6 and ps[0] == pytest.approx(6 * lone.p_direction())
    assert compare.adjusted_verdicts([lone])[0] == ["higher"]  # alone, it holds
    strong = compare.paired_comparison([1.0, 1.1, 0.9], [0.0, 0.0, 0.0])  # t ~ 17: p ~ 0.003, survives 6
    assert compare.adjusted_verdicts([strong] + flat)[0][0] == "higher"


def test_three_seeds_cannot_resolve_a_direction_by_signs_alone():
    c = compare.paired_comparison([1.0, 1.1, 0.9], [0.0, 0.0, 0.0])
    assert c.verdict == "higher" and c.sign_test_p() == 0.25
