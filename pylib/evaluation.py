"""The course's one evaluation: every final loss is scored on the whole validation split.

The validation split (four held-out plays) is cut into non-overlapping windows of block_size
targets, starting at token 0: window i has inputs tokens[iT : iT + T] and targets shifted by one.
Every window that fits is used, so the score has no sampling error and every chapter's final
number is comparable with every other's. A forward pass over all of them takes a second or two
in CPython, which is small next to a run, so it is done once, at the end.

Curves during training use a fixed subset instead (pylib.train's eval_windows evenly spaced
windows, pylib.data.eval_windows): cheap enough to repeat every few steps, the same windows in
every run, and labelled as the subset wherever it is shown.
"""

import numpy as np

from pylib import loss as xent, model

FULL_NAME = "the whole validation split, in non-overlapping windows"
CHUNK_WINDOWS = 256  # windows per forward pass: bounds the memory of one chunk of logits


def full_windows(tokens, block_size):
    """Every non-overlapping window of the token stream: x, y (N, T) with y[:, t] = x[:, t + 1]'s token."""
    tokens = np.asarray(tokens)
    n = (len(tokens) - 1) // block_size
    if n < 1:
        raise ValueError(f"need at least {block_size + 1} tokens, got {len(tokens)}")
    x = tokens[:n * block_size].reshape(n, block_size).astype(np.int64)  # (N, T)
    y = tokens[1:n * block_size + 1].reshape(n, block_size).astype(np.int64)  # (N, T)
    return x, y


def full_loss(params, cfg, tokens, chunk_windows=CHUNK_WINDOWS):
    """Mean cross-entropy (nats per token) over every non-overlapping window of tokens."""
    x, y = full_windows(tokens, cfg.block_size)
    total = 0.0
    with np.errstate(all="ignore"):  # a diverged model's loss is inf or nan: the caller decides
        for i in range(0, len(x), chunk_windows):
            logits = model.forward_logits(params, cfg, x[i:i + chunk_windows])
            total += float(xent.cross_entropy_forward(logits, y[i:i + chunk_windows], None, 1.0)[0])
    return total / y.size
