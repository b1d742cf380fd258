"""Comparing two measured arms, paired by seed, without saying more than the seeds show.

Two settings run with the same seeds share their initial weights and their batches, so the
per-seed differences d_s = a_s - b_s cancel much of the seed-to-seed spread that each arm has
on its own. From the n differences this module computes the mean difference, its sample sd, and
the 95% Student-t interval mean ± t_{0.975, n-1} · sd / sqrt(n), and then a verdict that follows
from the interval and nothing else:

  "lower"       the whole interval is below 0: a is lower than b;
  "higher"      the whole interval is above 0: a is higher than b;
  "null"        the interval contains 0 and lies inside ±margin: no difference as large as the
                margin (a null result, which needs a margin chosen before looking);
  "unresolved"  the interval contains 0 but reaches past ±margin: these seeds cannot tell.

Many comparisons in one chapter make some nominal verdicts chance: at 95%, one in twenty
differences that are really zero still shows a direction. So comparisons come in families (a
chapter, or a named group such as one chapter's recipes against fp32), and each verdict has a
Holm-adjusted twin (Holm 1979, "A simple sequentially rejective multiple test procedure"): the
family's p-values, each for the claim its nominal verdict makes, are sorted, the i-th smallest of
m is multiplied by m - i + 1 (and kept at least as large as the one before), and a claim survives
only if its adjusted p is below 0.05. That controls the chance of any false claim in the family
at 5%, with no assumption about how the comparisons depend on each other. The p-value of a
direction is the paired t-test's (two-sided: the interval excludes 0 exactly when p < 0.05); the
p-value of a null is that of the two one-sided tests against ±margin, doubled, so that the
interval lies inside ±margin exactly when p < 0.05.

The t-interval assumes the per-seed differences are roughly normal. Where outcomes are bimodal
(chapter 1: the previous-token head forms in a run or it does not), that is strained, and three
seeds cannot check it. The exact sign test needs no such assumption, and with n seeds its
smallest two-sided p is 2 / 2^n: 0.25 with three, so no direction can be resolved by three seeds
without assuming normality; sign_test_p says so beside each verdict.

Student's t quantile is computed here (no SciPy in the page): the t CDF through the regularised
incomplete beta function (Numerical Recipes, 3rd ed., section 6.4, continued fraction 6.4.5),
inverted by bisection. So is the chi-square quantile, for the interval on a sample sd (how rough
the spread of three seeds is).
"""

import math
from dataclasses import dataclass

CONFIDENCE = 0.95
ALPHA = 1.0 - CONFIDENCE  # the family-wise error rate Holm's correction keeps
VERDICTS = ("lower", "higher", "null", "unresolved")

# ---------------------------------------------------------------------------
# Student's t distribution


def _betacf(a, b, x):
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def incomplete_beta(a, b, x):
    """The regularised incomplete beta function I_x(a, b), for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """P(T <= t) for Student's t with df degrees of freedom."""
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def invert_cdf(cdf, p, hi=1.0):
    """The x >= 0 with cdf(x) = p (0 < p < 1) for an increasing cdf on [0, inf), by bisection to
    about 1e-12 relative."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    lo = 0.0
    while cdf(hi) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if cdf(mid) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def t_quantile(p, df):
    """The t with P(T <= t) = p (0 < p < 1) for Student's t with df degrees of freedom."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    return invert_cdf(lambda t: t_cdf(t, df), p)


# ---------------------------------------------------------------------------
# The chi-square distribution: how rough a sample sd from a few seeds is


def chi2_cdf(x, df):
    """P(X <= x) for a chi-square variable with df degrees of freedom: the regularised lower
    incomplete gamma P(df/2, x/2), by its power series (Numerical Recipes, 3rd ed., eq. 6.2.5)."""
    if x <= 0:
        return 0.0
    a, z = df / 2.0, x / 2.0
    term = total = 1.0 / a
    k = 0
    while abs(term) > 1e-17 * abs(total):
        k += 1
        term *= z / (a + k)
        total += term
        if k > 10_000:
            raise ArithmeticError("chi2_cdf: the series did not converge")
    return min(1.0, total * math.exp(-z + a * math.log(z) - math.lgamma(a)))


def chi2_quantile(p, df):
    """The x with chi2_cdf(x, df) = p (0 < p < 1)."""
    return invert_cdf(lambda x: chi2_cdf(x, df), p, hi=max(1.0, float(df)))


def sd_interval_factors(n, confidence=0.95):
    """(low, high): the 95% interval for a normal population's sd is (low * s, high * s), s being the
    sample sd of n values: (n - 1) s^2 / sigma^2 is chi-square with n - 1 degrees of freedom."""
    if n < 2:
        raise ValueError("a sample sd needs at least two values")
    df, tail = n - 1, (1.0 - confidence) / 2.0
    return math.sqrt(df / chi2_quantile(1.0 - tail, df)), math.sqrt(df / chi2_quantile(tail, df))


# ---------------------------------------------------------------------------
# The paired comparison


@dataclass(frozen=True)
class Comparison:
    """a - b over n paired seeds: mean, sample sd, the 95% t-interval and the verdict."""

    n: int
    mean: float
    sd: float
    low: float
    high: float
    margin: float
    verdict: str  # one of VERDICTS
    diffs: tuple = ()  # the per-seed differences a - b, in seed order

    def p_direction(self):
        """The paired t-test's two-sided p for a - b != 0 (below ALPHA exactly when the interval
        excludes 0)."""
        se = self.sd / math.sqrt(self.n)
        if se == 0.0:
            return 1.0 if self.mean == 0.0 else 0.0
        return 2.0 * (1.0 - t_cdf(abs(self.mean) / se, self.n - 1))

    def p_null(self):
        """The two one-sided tests' p for |a - b| < margin, doubled so that it is below ALPHA exactly
        when the 95% interval lies inside ±margin; 1 with no margin (no null can be claimed)."""
        if self.margin <= 0.0:
            return 1.0
        se = self.sd / math.sqrt(self.n)
        if se == 0.0:
            return 0.0 if abs(self.mean) <= self.margin else 1.0
        df = self.n - 1
        one_sided = max(1.0 - t_cdf((self.mean + self.margin) / se, df),
                        1.0 - t_cdf((self.margin - self.mean) / se, df))
        return min(1.0, 2.0 * one_sided)

    def p_claim(self):
        """The p-value of the claim the nominal verdict makes: a direction's, a null's, or for an
        unresolved verdict (no claim) the smaller of the two."""
        if self.verdict in ("lower", "higher"):
            return self.p_direction()
        if self.verdict == "null":
            return self.p_null()
        return min(self.p_direction(), self.p_null())

    def sign_test_p(self):
        """The exact two-sided sign test's p on the per-seed differences (zeros dropped): how far the
        signs alone go, with no assumption about the differences' distribution."""
        signs = [d for d in self.diffs if d != 0.0]
        n = len(signs)
        if n == 0:
            return 1.0
        k = min(sum(d > 0 for d in signs), sum(d < 0 for d in signs))
        return min(1.0, 2.0 * math.fsum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n)

    def words(self, unit="nats"):
        """The verdict as a phrase about a relative to b, e.g. 'lower' or 'unresolved with 3 seeds'."""
        return {
            "lower": "lower",
            "higher": "higher",
            "null": f"no difference as large as {self.margin:g}{' ' + unit if unit else ''} (a null result, {self.n} seeds)",
            "unresolved": f"no difference resolved with {self.n} seeds",
        }[self.verdict]


def verdict_from_interval(low, high, margin):
    """The verdict that the interval [low, high] for a - b supports (see the module docstring)."""
    if high < 0:
        return "lower"
    if low > 0:
        return "higher"
    if margin > 0 and -margin <= low and high <= margin:
        return "null"
    return "unresolved"


def paired_comparison(a, b, margin=0.0, confidence=CONFIDENCE):
    """Compare arm a with arm b, paired by seed: dicts {seed: value} (or equal-length lists in seed order).

    Returns a Comparison of a - b. Both arms must hold the same seeds, at least two, all finite.
    margin (>= 0, in the values' unit) is the smallest difference that would matter: an interval
    inside ±margin is a null result; 0 means no null result can be claimed."""
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)):
            raise ValueError("pair dicts with dicts, or lists with lists")
        if set(a) != set(b):
            raise ValueError(f"the arms were run with different seeds: {sorted(a)} and {sorted(b)}")
        seeds = sorted(a, key=str)
        a, b = [a[s] for s in seeds], [b[s] for s in seeds]
    if len(a) != len(b):
        raise ValueError(f"the arms have {len(a)} and {len(b)} seeds")
    if len(a) < 2:
        raise ValueError("a paired comparison needs at least two seeds")
    diffs = []
    for x, y in zip(a, b):
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError("a seed has no finite value (did the run diverge?)")
        diffs.append(float(x) - float(y))
    if not margin >= 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    n = len(diffs)
    mean = math.fsum(diffs) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    return Comparison(n=n, mean=mean, sd=sd, low=low, high=high, margin=float(margin),
                      verdict=verdict_from_interval(low, high, margin), diffs=tuple(diffs))


# ---------------------------------------------------------------------------
# Families: Holm's correction


def holm(p_values):
    """Holm's step-down adjusted p-values, in the input's order: sorted ascending, the i-th smallest
    (i from 1) of m becomes max over j <= i of min(1, (m - j + 1) p_(j)). A claim whose adjusted p
    is below ALPHA is rejected at family-wise level ALPHA."""
    p = [float(x) for x in p_values]
    if any(not 0.0 <= x <= 1.0 for x in p):
        raise ValueError(f"p-values must lie in [0, 1], got {p}")
    m = len(p)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda i: p[i])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def adjusted_verdicts(comparisons, alpha=ALPHA):
    """Each comparison's verdict after Holm's correction over the family: its nominal verdict if the
    claim survives (adjusted p below alpha), otherwise "unresolved". Returns (verdicts, adjusted ps)."""
    ps = holm([c.p_claim() for c in comparisons])
    verdicts = [c.verdict if c.verdict != "unresolved" and p < alpha else "unresolved"
                for c, p in zip(comparisons, ps)]
    return verdicts, ps
