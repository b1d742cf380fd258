"""The learning-rate ladder: rates a fixed factor apart, one short run per rate, and the band
of rates that train.

A sweep like this is the first thing to run on a new model (nanoGPT's and most papers' practice):
rates about 3x apart (half a decade), each trained for the same short budget, the final
validation loss plotted against log(lr). Too small a rate learns slowly; too large a rate
diverges, and pylib.train detects that (a non-finite or > 2 ln V loss ends the run). Between
them lies the band of rates that train; where the best one sits inside it is measured, not assumed
(for the course model it is well below the first rate that diverges).
"""

import dataclasses
import math

from pylib import train

# ---------------------------------------------------------------------------

LADDER_STEPS = 200  # a short budget per rung: the measured ladder and the page's sweep use the same
BAND_TOLERANCE = 0.1  # nats: the "good band" is every rung within this of the best rung's loss


def ladder(lo, hi, per_decade=2):
    """Rates from lo to hi, per_decade to each factor of 10, rounded to one significant figure:
    ladder(1e-3, 1) = [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0] (steps of sqrt(10), about 3x)."""
    n = round(per_decade * math.log10(hi / lo))
    return [float(f"{lo * 10 ** (k / per_decade):.1g}") for k in range(n + 1)]


def rung_config(lr, seed, base=None):
    """The TrainConfig of one rung: the default run's settings, LADDER_STEPS steps, one eval at the end."""
    base = base or train.TrainConfig()
    return dataclasses.replace(base, lr=float(lr), seed=int(seed), steps=LADDER_STEPS,
                               eval_interval=LADDER_STEPS)


def rung_outcome(history):
    """{"final_val", "final_val_full", "final_train", "diverged_at"} of one finished (or diverged) rung.

    final_val is on the trainer's fixed subset of validation windows (what the page's live sweep
    shows); final_val_full is the whole validation split, present only if the rung was trained
    with final_eval=True (the measured ladder), else None."""
    last = history[-1]
    if last.get("diverged"):
        return {"final_val": None, "final_val_full": None, "final_train": None, "diverged_at": last["step"]}
    return {"final_val": last.get("val"), "final_val_full": last.get("val_full"),
            "final_train": last.get("train_eval"), "diverged_at": None}


def good_band(rates, final_means, diverged_counts, tolerance=BAND_TOLERANCE):
    """(lo, hi): the lowest and highest rate with no diverged seed and a mean final loss within
    tolerance of the best such rate; None if no rate trained."""
    ok = [(lr, m) for lr, m, d in zip(rates, final_means, diverged_counts)
          if d == 0 and m is not None and math.isfinite(m)]
    if not ok:
        return None
    best = min(m for _, m in ok)
    inside = [lr for lr, m in ok if m <= best + tolerance]
    return min(inside), max(inside)
