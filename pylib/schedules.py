"""Learning-rate schedules.

`warmup_cosine_lr` is nanoGPT's `get_lr` (train.py): a linear warmup, then a half cosine from
max_lr down to min_lr (Loshchilov & Hutter 2017, SGDR, without restarts). The warmup uses
lr * (step + 1) / (warmup_steps + 1), so step 0 already takes a small non-zero step and the
last warmup step (step = warmup_steps - 1) is just below max_lr; max_lr is reached at
step = warmup_steps, where the cosine begins. Steps are 0-based.
"""

import math

# ---------------------------------------------------------------------------


def warmup_cosine_lr(step, max_lr, warmup_steps, total_steps, min_lr):
    """Learning rate at 0-based step: linear warmup, cosine decay to min_lr at total_steps, then min_lr."""
    if step < warmup_steps:
        return max_lr * (step + 1) / (warmup_steps + 1)
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)  # 0 -> 1
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (max_lr - min_lr)
