"""What the experiments share: the seeds and the statistics of a three-seed measurement."""

import statistics

SEEDS = (0, 1, 2)  # every setting is run with these three seeds


def mean_sd(xs):
    """Mean and sample standard deviation (n - 1) of a list of floats."""
    return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0


def rounded(arr, digits=5):
    """A curve as a list of Python floats, rounded so that results.json stays readable."""
    return [round(float(x), digits) for x in arr]
