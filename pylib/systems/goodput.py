"""Goodput under failures: how often to checkpoint a job that fails at random.

A job needs `work` hours of useful compute. It runs in segments: tau hours of compute, then a
checkpoint that takes delta hours to write. Failures arrive as a Poisson process with mean time
between failures M (exponential gaps; memoryless), and may strike at any moment: during compute,
during a checkpoint write, or during a restart. A failure loses everything since the last finished
checkpoint; the job then pays a restart of R hours (reload the checkpoint, rebuild the job) and
tries the segment again. Goodput is the share of wall-clock time spent on useful compute:
work / wall time. (The Llama 3 report calls the same ratio "effective training time".)

Two closed forms, checked against the simulation in tests/test_goodput.py. Neither paper could be
read when this was written: both formulas are as LLNL's Scalable Checkpoint/Restart library
implements them (scripts/common/scr_ckpt_interval.py), and Daly's is checked against the optima his
figure captions state (tests/test_goodput.py), not against his text.
  - Young (1974): the interval that minimises the time lost is about sqrt(2 delta M), a first-order
    approximation for delta << M. Its derivation in one line: per unit of work the overhead is
    delta/tau (checkpoints) + tau/(2M) (on average half a segment is lost per failure), smallest at
    tau = sqrt(2 delta M).
  - Daly (2006): a higher-order estimate, a perturbation solution of what his abstract calls "a more
    complete cost function" (whether that function is the exact expression below could not be checked),
    sqrt(2 delta M) * (1 + (1/3) sqrt(delta/(2M)) + (1/9) (delta/(2M))) - delta, for delta < 2M.
    It matters once delta is not small against M: there Young's interval is too long.

The exact expected time of one segment under this model (derived here, not quoted):
  a segment of length s = tau + delta completes after M (e^{s/M} - 1) hours of attempts, each
  failed attempt needs one failure-free restart of R hours, which takes M (e^{R/M} - 1) hours on
  average, and the number of failed attempts has mean e^{s/M} - 1; so
    E[segment] = M e^{R/M} (e^{(tau + delta)/M} - 1),   goodput = tau / E[segment].
The optimum of this goodput does not depend on R (R only multiplies it by a constant).

Units: any one unit of time for tau, delta, M and R (the chapter uses hours or minutes).
"""

import math

import numpy as np

LIMITS = {"max_segment_over_M": 12.0}  # (tau + delta)/M above this: e^12 ~ 160,000 attempts per segment

# ---------------------------------------------------------------------------
# Closed forms


def young_interval(delta, M):
    """Young's first-order optimum checkpoint interval, sqrt(2 delta M)."""
    return math.sqrt(2.0 * delta * M)


def daly_interval(delta, M):
    """Daly's higher-order estimate of the optimum interval (delta < 2M), or None outside that range."""
    if not delta < 2.0 * M:
        return None
    xi = delta / (2.0 * M)
    return math.sqrt(2.0 * delta * M) * (1.0 + math.sqrt(xi) / 3.0 + xi / 9.0) - delta


def expected_segment_time(tau, delta, M, R):
    """Expected wall time to finish one segment (tau of compute + delta of checkpoint) under failures."""
    return M * math.exp(R / M) * math.expm1((tau + delta) / M)


def expected_goodput(tau, delta, M, R):
    """Expected share of wall time spent on useful compute, tau / E[segment]."""
    return tau / expected_segment_time(tau, delta, M, R)


def optimal_interval(delta, M, tol=1e-12):
    """The tau that maximises expected_goodput (for any R): the root of
    (tau/M) e^{x} = e^{x} - 1, x = (tau + delta)/M, found by bisection."""
    def g(tau):  # d/dtau of log goodput, times a positive factor: > 0 below the optimum
        x = (tau + delta) / M
        return math.expm1(x) - (tau / M) * math.exp(x)
    lo, hi = 0.0, M
    while g(hi) > 0:
        hi *= 2.0
    while hi - lo > tol * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if g(mid) > 0 else (lo, mid)
    return 0.5 * (lo + hi)


# ---------------------------------------------------------------------------
# Simulation


def simulate_job(tau, delta, M, R, n_segments, rng):
    """Simulate a job of n_segments segments; returns {"wall", "work", "goodput", "failures"}.

    Every segment is tried until tau + delta hours pass without a failure; after each failure a
    restart of R hours must also pass without one. The segments are simulated side by side (the
    exponential gaps are memoryless, so each attempt draws a fresh gap)."""
    s = tau + delta
    if s / M > LIMITS["max_segment_over_M"]:
        raise ValueError(f"(tau + delta)/M = {s / M:.3g} is above {LIMITS['max_segment_over_M']:g}: "
                         "almost every segment would fail")
    wall = np.zeros(n_segments)  # (n,) hours spent on each segment
    failures = 0
    active = np.arange(n_segments)
    while active.size:
        gap = rng.exponential(M, size=active.size)  # time to the next failure, per active segment
        done = gap >= s
        wall[active[done]] += s
        failed = active[~done]
        wall[failed] += gap[~done]
        failures += failed.size
        restarting = failed
        while restarting.size:  # each failed segment needs one failure-free restart
            r_gap = rng.exponential(M, size=restarting.size)
            ok = r_gap >= R
            wall[restarting[ok]] += R
            wall[restarting[~ok]] += r_gap[~ok]
            failures += int((~ok).sum())
            restarting = restarting[~ok]
        active = failed
    total = float(wall.sum())
    work = tau * n_segments
    return {"wall": total, "work": work, "goodput": work / total, "failures": failures}


def goodput_sweep(taus, delta, M, R, work, seed=0):
    """Simulated and expected goodput at each interval in taus, for a job of `work` hours.

    Each interval gets round(work / tau) segments (at least 1) and its own stream
    np.random.default_rng([seed, i]). Returns {"tau", "simulated", "expected", "failures"}."""
    out = {"tau": [], "simulated": [], "expected": [], "failures": []}
    for i, tau in enumerate(taus):
        n = max(1, int(round(work / tau)))
        sim = simulate_job(tau, delta, M, R, n, np.random.default_rng([seed, i]))
        out["tau"].append(float(tau))
        out["simulated"].append(sim["goodput"])
        out["expected"].append(expected_goodput(tau, delta, M, R))
        out["failures"].append(sim["failures"])
    return out
