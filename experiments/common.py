"""What the experiments share: the seeds, the one evaluation, and how an arm is stored.

An arm is one setting run once per seed. Its final values are stored in results.json under one
key with four suffixes, so that any two arms can be paired by seed later (pylib.compare):
  key.per_seed  {"0": value, "1": value, ...}  (seed -> value; JSON keys are strings)
  key.mean, key.sd  mean and sample standard deviation over the seeds
  key.n         how many seeds
Final validation losses come from the last record's val_full: the whole validation split
(pylib.evaluation), the same evaluation in every chapter. Curves use the trainer's fixed subset.
"""

import contextlib
import math
import statistics

SEEDS = (0, 1, 2)  # every setting is run with these three seeds unless a comparison needs more

EVAL_FULL = "the whole validation split (8,837 non-overlapping windows)"  # how results.md names it


# The notebooks' reduced size (notebooks/*.py, SMALL = True): inside small_size(), scaled(full, small)
# gives each part's small sizes (fewer steps, seeds, widths), so that a notebook runs in seconds in the
# tests. build.py --measure never enters it (builder.measure refuses to): results.json is the full size.
_small = False


@contextlib.contextmanager
def small_size(on=True):
    """Run the parts at their reduced size while inside (or at full size, with on=False)."""
    global _small
    before, _small = _small, bool(on)
    try:
        yield
    finally:
        _small = before


def is_small():
    return _small


def scaled(full, small):
    """A part's size: full, or small inside small_size()."""
    return small if _small else full


REDUCED_EVAL = "the first {:,} {} of the validation split (the notebook's reduced size)"  # results.md's words


def val_tokens(tokens, n_tokens):
    """The validation tokens a part scores on: tokens itself at full size, its first n_tokens at the
    reduced size (a whole-split pass costs more than a short run)."""
    return tokens[:n_tokens] if _small else tokens


def scored_on(n, unit="tokens", full=EVAL_FULL):
    """What the final losses are scored on, in results.md's words: full, or at the reduced size the first
    n tokens (or windows) of the validation split."""
    return REDUCED_EVAL.format(n, unit) if _small else full


def progress(iterable, **tqdm_args):
    """A loop worth a progress bar (seeds, settings): tqdm's in a notebook (experiments.notebook turns it
    on), the iterable itself elsewhere."""
    return _progress(iterable, **tqdm_args) if _progress else iterable


_progress = None


def mean_sd(xs):
    """Mean and sample standard deviation (n - 1) of a list of floats."""
    return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0


def rounded(arr, digits=5):
    """A curve as a list of Python floats, rounded so that results.json stays readable."""
    return [round(float(x), digits) for x in arr]


def final_val(history):
    """The run's final validation loss on the whole validation split, or None if it diverged.

    The run must have been trained with TrainConfig(final_eval=True): a KeyError says it was not."""
    last = history[-1]
    if last.get("diverged"):
        return None
    value = last["val_full"]
    return value if value is not None and math.isfinite(value) else None


def arm(key, per_seed):
    """results.json values for one arm: key.per_seed, key.mean, key.sd and key.n.

    per_seed: {seed: value}. A seed whose value is None (a diverged run) is kept in per_seed as
    None, and mean/sd are then None too: a diverged arm has no mean."""
    per_seed = {str(s): (None if v is None else float(v)) for s, v in per_seed.items()}
    finite = [v for v in per_seed.values() if v is not None]
    complete = len(finite) == len(per_seed)
    mean, sd = mean_sd(finite) if complete and finite else (None, None)
    return {f"{key}.per_seed": per_seed, f"{key}.mean": mean, f"{key}.sd": sd, f"{key}.n": len(per_seed)}


def paired(values, key_a, key_b, margin=0.0):
    """pylib.compare.paired_comparison of two stored arms (a - b), for results.md."""
    from pylib.compare import paired_comparison
    return paired_comparison(values[f"{key_a}.per_seed"], values[f"{key_b}.per_seed"], margin)


def paired_text(values, key_a, key_b, margin=0.0, fmt="+.3f"):
    """'Δ +0.012 [−0.020, +0.044], 3 seeds: unresolved': a paired comparison as a results.md cell."""
    c = paired(values, key_a, key_b, margin)
    return f"Δ {c.mean:{fmt}} [{c.low:{fmt}}, {c.high:{fmt}}], {c.n} seeds: {c.verdict}"


def run_parts(namespace, parts, corpus):
    """A module's PARTS, one after the other, merged into one output: what measure.py does with
    them as separate tasks. namespace: the module's globals(), where the part functions live."""
    out = {"values": {}, "curves": {}, "settings": {}, "timings": {}}
    for name in progress(parts, desc=namespace.get("__name__", "parts"), unit="part"):
        for section, entries in namespace[name](corpus).items():
            out[section].update(entries)
    return out


def needs_torch(key):
    """A part that runs one of PyTorch's engines (companions/): without torch installed it measures
    nothing and says so under key + ".status" (the chapter's build then fails on the missing keys)."""
    import functools

    def wrap(part):
        @functools.wraps(part)
        def run(corpus):
            try:
                import torch  # noqa: F401
            except ImportError:
                return {"values": {f"{key}.status": "not measured: torch is not installed"}, "timings": {}}
            return part(corpus)
        return run
    return wrap
