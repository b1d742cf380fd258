"""Timing one training step: the same function runs in CPython (bench/) and in the page's worker.

A step is what the trainer does per optimiser update, minus batch sampling and evaluation:
forward, backward, clipping by global norm and AdamW, on a fixed batch of B windows of T tokens.
Benchmarks print figures; nothing here is a test.
"""

import statistics
import time

import numpy as np

from pylib import model, optim


def time_train_step(cfg=None, B=16, T=64, steps=50, repeats=5, warmup=20, seed=0):
    """Median milliseconds per step over `repeats` timed loops of `steps` steps, in float32."""
    cfg = cfg or model.GPTConfig()
    params = model.init_params(cfg, seed)
    state, groups = optim.adamw_init(params), optim.param_groups(params)
    rng = np.random.default_rng(seed)
    x = rng.integers(0, cfg.vocab_size, (B, T))  # (B, T)
    y = rng.integers(0, cfg.vocab_size, (B, T))

    def step():
        _, grads = model.loss_and_grads(params, cfg, x, y)
        optim.clip_grad_norm(grads, 1.0)
        optim.adamw_step(params, grads, state, 1e-3, 0.9, 0.99, 1e-8, 0.1, groups)

    times = ms_per_call(step, steps, repeats, warmup)
    return {"B": B, "T": T, "steps": steps, "repeats": repeats, "ms_per_step": statistics.median(times),
            "ms_all": times}


def ms_per_call(fn, calls, repeats, warmup):
    """Milliseconds per call of fn(), one figure per timed loop of `calls` calls, after warmup."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e3)
    return times
