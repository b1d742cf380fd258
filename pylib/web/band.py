"""The measured band: the validation loss of the default run's seeds, mean ± max(k·sd, floor).

`band_verdict` flags a live default run that leaves it; `band_series` is what the page draws, the
same limits, so what is drawn is what flags. Both use the validation loss on the trainer's fixed
subset (`TrainConfig.eval_windows` windows), the evaluation the live run's dots use.
"""

import numpy as np

from pylib.web.inputs import LIMITS


def band_verdict(step, val_loss, curve):
    """Is val_loss at step inside the measured band? {"inside", "mean", "half"}, or None if no band there.

    The band is curve["val_mean"] ± max(k * curve["val_sd"], floor) at curve["steps"], with k and
    floor from LIMITS; between measured steps mean and sd are interpolated linearly. curve holds
    the validation loss on the trainer's fixed subset, so val_loss must be a record's "val".
    """
    if not curve or val_loss is None:
        return None
    steps = curve.get("steps") or []
    mean, sd = curve.get("val_mean") or [], curve.get("val_sd") or []
    if not steps or not steps[0] <= step <= steps[-1]:
        return None
    m = float(np.interp(step, steps, mean))
    s = float(np.interp(step, steps, sd))
    half = max(LIMITS["band_k"] * s, LIMITS["band_floor"])
    return {"inside": abs(val_loss - m) <= half, "mean": m, "half": half}


def band_series(curve, n_steps, shade="sd"):
    """The band drawn behind a run, at steps 0..n_steps-1 (None outside the measured range).

    shade "flag" (chapter 1): {"mean", "lo", "hi"}, lo and hi being the limits band_verdict flags
    outside of, mean ∓ max(k * sd, floor), so that the shaded band and the flag are one rule.
    shade "sd" (the other chapters' widgets): {"mean", "lo", "hi" (mean ± sd), "lo_k", "hi_k"
    (the flag limits)}.
    """
    if shade not in ("sd", "flag"):
        raise ValueError(f"shade must be 'sd' or 'flag', not {shade!r}")
    if not curve or not curve.get("steps"):
        return None
    steps = np.asarray(curve["steps"], dtype=np.float64)
    x = np.arange(int(n_steps), dtype=np.float64)
    mean = np.interp(x, steps, curve["val_mean"])
    sd = np.interp(x, steps, curve["val_sd"])
    half = np.maximum(LIMITS["band_k"] * sd, LIMITS["band_floor"])
    inside = (x >= steps[0]) & (x <= steps[-1])
    if shade == "flag":
        arrays = {"mean": mean, "lo": mean - half, "hi": mean + half}
    else:
        arrays = {"mean": mean, "lo": mean - sd, "hi": mean + sd, "lo_k": mean - half, "hi_k": mean + half}
    return {k: [float(v) if ok else None for v, ok in zip(a, inside)] for k, a in arrays.items()}
