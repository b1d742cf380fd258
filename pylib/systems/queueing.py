"""Waiting on a shared link and on the slowest worker: an M/D/1 queue and stragglers, simulated.

A shared link: transfers arrive at random (a Poisson stream, rate lambda) and each occupies
the link for the same time D (its bytes over the bandwidth). That is the M/D/1 queue. Its load
is rho = lambda D; for rho < 1 the mean wait before a transfer starts is, by the
Pollaczek-Khinchine formula with a deterministic service time (variance 0),

    W_q = rho D / (2 (1 - rho)),

which grows without bound as rho -> 1; at rho >= 1 work arrives faster than the link clears it
and the queue never settles (`check_load` says so). The simulation follows each transfer's wait
by Lindley's recursion W_{n+1} = max(0, W_n + D - A_{n+1}) (A the gap between arrivals), and
reports its mean with a 95% interval from batch means (waits next to each other are correlated,
so single waits are not independent samples).

Stragglers: a synchronous step ends when the slowest of W workers ends. With step times
base + Exponential(spread) (a shifted exponential), the expected slowest is exactly
base + spread * H_W, H_W = 1 + 1/2 + ... + 1/W, the harmonic number: it keeps growing with W,
like spread * ln W.

Local steps (DiLoCo): with H steps between syncs, each worker's time to a sync is the sum of its
H step times, base H + Erlang(H, spread), and the sync waits for the slowest sum. The average
worker's excess, spread H, is paid by everyone; the slowest's excess over it grows like
spread sqrt(H) (the sums' spread), not like a constant, so syncing once per H steps does not
divide the straggler cost by H: per step it falls like 1 / sqrt(H). `expected_slowest_local`
integrates E[max] = int_0^inf (1 - F(x)^W) dx with F the Erlang CDF; `simulate_local_stragglers`
draws it, and `once_per_h_naive` is what "the slowest is paid once per H" would give.

Legend: rho load, D service time (s), W workers, n simulated transfers or syncs.
"""

import math

import numpy as np

from pylib.compare import t_quantile

MAX_WORKERS = 1024  # the straggler simulation draws n x W step times
MAX_SAMPLES = 2_000_000


def check_load(rho):
    """rho as a float in (0, 1), or ValueError: at rho >= 1 the queue is unstable."""
    rho = float(rho)
    if not math.isfinite(rho) or rho <= 0:
        raise ValueError(f"the load rho must be a finite number above 0 (and below 1), got {rho!r}")
    if rho >= 1:
        raise ValueError(f"load rho = {rho:g} >= 1: transfers arrive faster than the link clears them, "
                         "so the queue grows without bound (an unstable queue: no mean wait exists)")
    return rho


def check_positive(x, name):
    x = float(x)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {x!r}")
    return x


def md1_mean_wait(rho, service):
    """Pollaczek-Khinchine for M/D/1: the mean wait in queue, rho D / (2 (1 - rho))."""
    rho, d = check_load(rho), check_positive(service, "the service time D")
    return rho * d / (2.0 * (1.0 - rho))


def batch_means_interval(x, batches=20, confidence=0.95):
    """(mean, low, high): the mean of x with a t-interval over `batches` consecutive batch means."""
    x = np.asarray(x, dtype=np.float64)
    means = np.array([b.mean() for b in np.array_split(x, batches)])  # (batches,)
    m, sd = float(means.mean()), float(means.std(ddof=1))
    half = t_quantile(0.5 + confidence / 2.0, batches - 1) * sd / math.sqrt(batches)
    return m, m - half, m + half


def simulate_md1(rho, service, n=200_000, seed=0, warmup=0.1):
    """Simulated M/D/1 waits: {"mean", "low", "high", "waits" (the first 200), "exact"}.

    Arrivals Poisson at rate rho / D; the first warmup fraction of transfers is dropped (the queue
    starts empty). Lindley's recursion, vectorised: W_n = S_n - min(0, min_{k<=n} S_k), S the
    running sum of D - A."""
    rho, d = check_load(rho), check_positive(service, "the service time D")
    n = int(n)
    if not 1000 <= n <= MAX_SAMPLES:
        raise ValueError(f"n must be from 1,000 to {MAX_SAMPLES:,}, got {n}")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(d / rho, size=n)  # (n,) time from one arrival to the next
    steps = d - gaps  # (n,) W_{k+1} - W_k when the queue does not empty
    s = np.concatenate([[0.0], np.cumsum(steps[:-1])])  # (n,) S_0 = 0: the first transfer waits 0
    waits = s - np.minimum(np.minimum.accumulate(s), 0.0)
    kept = waits[int(warmup * n):]
    mean, low, high = batch_means_interval(kept)
    return {"mean": mean, "low": low, "high": high, "waits": waits[:200].tolist(), "exact": md1_mean_wait(rho, d)}


# ---------------------------------------------------------------------------
# Stragglers


def _whole(x, what, limit):
    """x as an int from 1 to limit, or ValueError naming what it counts."""
    if isinstance(x, bool):
        raise ValueError(f"{what} must be a whole number, got {x!r}")
    f = float(x)
    if not math.isfinite(f) or f != int(f) or not 1 <= f <= limit:
        raise ValueError(f"{what} must be a whole number from 1 to {limit}, got {x!r}")
    return int(f)


def check_workers(w):
    """W as an int from 1 to MAX_WORKERS, or ValueError."""
    return _whole(w, "the number of workers", MAX_WORKERS)


def _check_times(base, spread):
    base, spread = float(base), float(spread)
    if not (math.isfinite(base) and base >= 0 and math.isfinite(spread) and spread >= 0):
        raise ValueError("the base step time and the spread must be finite and >= 0")
    return base, spread


def _check_syncs(syncs, w):
    syncs = int(syncs)
    if not 100 <= syncs or syncs * w > MAX_SAMPLES:
        raise ValueError(f"syncs x workers must be at most {MAX_SAMPLES:,} (and syncs >= 100)")
    return syncs


def _mean_interval(x):
    """{"mean", "low", "high"}: the sample mean of x and its 95% t-interval."""
    m, sd = float(x.mean()), float(x.std(ddof=1))
    half = t_quantile(0.975, x.size - 1) * sd / math.sqrt(x.size)
    return {"mean": m, "low": m - half, "high": m + half}


def harmonic(w):
    """H_W = 1 + 1/2 + ... + 1/W."""
    return math.fsum(1.0 / i for i in range(1, int(w) + 1))


def expected_slowest(workers, base, spread):
    """E[max of W step times base + Exponential(spread)] = base + spread * H_W, exactly."""
    w = check_workers(workers)
    base, spread = _check_times(base, spread)
    return base + spread * harmonic(w)


def simulate_stragglers(workers, base, spread, syncs=20_000, seed=0):
    """Simulated syncs: {"mean", "low", "high" (95% t-interval of the slowest worker's time),
    "mean_step" (an average worker's), "exact"}."""
    exact = expected_slowest(workers, base, spread)
    w = check_workers(workers)
    syncs = _check_syncs(syncs, w)
    rng = np.random.default_rng(seed)
    times = base + rng.exponential(spread, size=(syncs, w)) if spread > 0 else np.full((syncs, w), base)  # (syncs, W)
    return {**_mean_interval(times.max(axis=1)), "mean_step": float(times.mean()), "exact": exact}


# ---------------------------------------------------------------------------
# Stragglers with H local steps between syncs (DiLoCo)

MAX_LOCAL_STEPS = 1000


def check_local_steps(h):
    """H as an int from 1 to MAX_LOCAL_STEPS, or ValueError."""
    return _whole(h, "the number of local steps H", MAX_LOCAL_STEPS)


def erlang_survival(y, h):
    """P(Erlang(h, 1) > y) = exp(-y) sum_{k<h} y^k / k!, for an array y >= 0 (summed in log space)."""
    y = np.asarray(y, dtype=np.float64)  # (m,)
    k = np.arange(h)  # (h,)
    logy = np.log(np.maximum(y, 1e-300))[:, None]  # (m, 1); at y = 0 only the k = 0 term survives
    lgam = np.array([math.lgamma(i + 1) for i in range(h)])  # (h,)
    terms = k * logy - lgam - y[:, None]  # (m, h) the log of each term
    top = terms.max(axis=1, keepdims=True)
    return np.exp(top[:, 0]) * np.exp(terms - top).sum(axis=1)


def expected_slowest_local(workers, h, base, spread, points=4001):
    """Mean time per step when W workers each take H steps of base + Exponential(spread) between
    syncs and every sync waits for the slowest: base + E[max of W Erlang(H, spread)] / H, the
    expectation by integrating 1 - F(x)^W (Simpson's rule on [0, H + 40 sqrt(H) + 60] spreads)."""
    w, h = check_workers(workers), check_local_steps(h)
    base, spread = _check_times(base, spread)
    if spread == 0:
        return base
    top = h + 40.0 * math.sqrt(h) + 60.0
    y = np.linspace(0.0, top, points)  # (points,), in units of the spread
    cdf = 1.0 - erlang_survival(y, h)
    f = 1.0 - cdf ** w
    dy = y[1] - y[0]
    integral = dy / 3.0 * (f[0] + f[-1] + 4.0 * f[1:-1:2].sum() + 2.0 * f[2:-1:2].sum())
    return float(base + spread * integral / h)


def once_per_h_naive(workers, h, base, spread):
    """The per-step time if the slowest worker's excess over the average, spread (H_W - 1), were
    paid once per H steps: base + spread + spread (H_W - 1) / H."""
    w, h = check_workers(workers), check_local_steps(h)
    base, spread = _check_times(base, spread)
    return base + spread + spread * (harmonic(w) - 1.0) / h


def simulate_local_stragglers(workers, h, base, spread, syncs=20_000, seed=0):
    """Simulated syncs of W workers with H local steps each: {"mean", "low", "high" (95% t-interval
    of the time per step, the slowest worker's H steps over H), "exact", "naive"}."""
    w, h = check_workers(workers), check_local_steps(h)
    base, spread = _check_times(base, spread)
    syncs = _check_syncs(syncs, w)
    rng = np.random.default_rng(seed)
    # The sum of H Exponential(spread) step delays is Gamma(H, spread): one draw per worker and sync.
    sums = h * base + rng.gamma(h, spread, size=(syncs, w)) if spread > 0 else np.full((syncs, w), h * base)  # (syncs, W)
    return {**_mean_interval(sums.max(axis=1) / h),  # the time per step, over (syncs,)
            "exact": expected_slowest_local(w, h, base, spread), "naive": once_per_h_naive(w, h, base, spread)}
