"""Learning-rate schedules.

`warmup_cosine_lr` is nanoGPT's `get_lr` (train.py): a linear warmup, then a half cosine from
max_lr down to min_lr (Loshchilov & Hutter 2017, SGDR, without restarts). The warmup uses
lr * (step + 1) / (warmup_steps + 1), so step 0 already takes a small non-zero step and the
last warmup step (step = warmup_steps - 1) is just below max_lr; max_lr is reached at
step = warmup_steps, where the cosine begins. Steps are 0-based.

`wsd_lr` is warmup-stable-decay (Hu et al. 2024, MiniCPM, section 4): the same warmup, then
max_lr held constant, then a linear decay to min_lr over the last decay_frac of the steps.
`constant_lr` is the same warmup, then max_lr to the end. `lr_at` picks one by name.
"""

import math

# ---------------------------------------------------------------------------


def warmup_lr(step, max_lr, warmup_steps):
    """The linear warmup shared by every schedule here, for 0-based step < warmup_steps."""
    return max_lr * (step + 1) / (warmup_steps + 1)


def warmup_cosine_lr(step, max_lr, warmup_steps, total_steps, min_lr):
    """Learning rate at 0-based step: linear warmup, cosine decay to min_lr at total_steps, then min_lr."""
    if step < warmup_steps:
        return warmup_lr(step, max_lr, warmup_steps)
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)  # 0 -> 1
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (max_lr - min_lr)


def wsd_lr(step, max_lr, warmup_steps, total_steps, min_lr, decay_frac=0.2):
    """Learning rate at 0-based step: linear warmup, constant max_lr, linear decay to min_lr at the end."""
    if step < warmup_steps:
        return warmup_lr(step, max_lr, warmup_steps)
    if step >= total_steps:
        return min_lr
    decay_start = max(warmup_steps, total_steps - round(decay_frac * total_steps))
    if step < decay_start:
        return max_lr
    progress = (step - decay_start) / max(1, total_steps - decay_start)  # 0 -> 1
    return max_lr + progress * (min_lr - max_lr)


def constant_lr(step, max_lr, warmup_steps, total_steps, min_lr):
    """Linear warmup, then max_lr for every later step (total_steps and min_lr are ignored)."""
    return warmup_lr(step, max_lr, warmup_steps) if step < warmup_steps else max_lr


SCHEDULES = {"cosine": warmup_cosine_lr, "wsd": wsd_lr, "constant": constant_lr}


def lr_at(schedule, step, max_lr, warmup_steps, total_steps, min_lr, decay_frac=0.2):
    """The learning rate of the named schedule ("cosine", "wsd" or "constant") at a 0-based step."""
    if schedule == "wsd":
        return wsd_lr(step, max_lr, warmup_steps, total_steps, min_lr, decay_frac)
    return SCHEDULES[schedule](step, max_lr, warmup_steps, total_steps, min_lr)
