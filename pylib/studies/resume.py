"""Restarting a run from a checkpoint: with or without the optimiser state, and the replay that
tells a data spike from a numerics one.

- Resuming without the optimiser state: the weights come back but AdamW's m, v and t start again
  from zero. Bias correction then makes the first update full size (m_hat / sqrt(v_hat) = g/|g|
  per coordinate at t = 1, chapter 1's test_bias_correction_makes_first_step_full_size), where the
  run had been taking updates damped by the averaged second moment; the loss jumps. Both arms
  continue on the same batches (the batch stream's state is in the checkpoint), so their batch
  losses are paired step by step.
- The replay (chapter 8's diagnosis): restart from a checkpoint taken before a spike and run the
  same batches again; if the spike returns at the same step, the data (or the data with that
  state) caused it. Run other batches from the same checkpoint; if the spike does not return, it
  belonged to those batches. In this model the bad batch is part of the data: the original batch
  stream serves it at its step (pylib.studies.stability's repeated-token batch); another stream
  serves other windows there, so a replay on other batches does not meet it.
"""

import numpy as np

from pylib import checkpoint, guards, train
from pylib.studies import stability

OTHER_STREAM = 7  # the replay on other batches reads np.random.default_rng([seed, 1, OTHER_STREAM])
REPLAY = {"before": 10, "after": 20}  # checkpoint this many steps before the bad stretch; spike window after it


def drop_optimizer_state(state, model_cfg, train_cfg):
    """Forget the optimiser state (m = v = 0, t = 0), as a resume from the weights alone does."""
    fresh = train.init_train_state(model_cfg, train_cfg)
    state["opt"] = fresh["opt"]
    state["recent_norms"] = []
    return state


def paired_excess(history, reference, window):
    """Per-step batch-loss excess of a resumed arm over the proper resume, on the same batches:
    {"excess": [...], "max": largest, "mean": mean over the window}."""
    a = [r["loss"] for r in history[:window]]
    b = [r["loss"] for r in reference[:window]]
    excess = [x - y for x, y in zip(a, b)]
    return {"excess": excess, "max": max(excess), "mean": float(np.mean(excess))}


def update_norm(params_before, params_after):
    """Norm of one step's change of all the weights together (float64)."""
    return float(np.sqrt(sum(float(np.sum((params_after[n].astype(np.float64) - p.astype(np.float64)) ** 2))
                             for n, p in params_before.items())))


def restart(ckpt, model_cfg, with_optimizer=True):
    """A new train state from checkpoint bytes; without the optimiser state if with_optimizer is False."""
    state, mcfg, tcfg, _ = checkpoint.load_checkpoint(ckpt, model_cfg)
    if not with_optimizer:
        drop_optimizer_state(state, mcfg, tcfg)
    return state, tcfg


def replay(ckpt, model_cfg, train_tokens, val_tokens, n_steps, bad_steps, token_id, same_batches, on_step=None):
    """Replay n_steps from a checkpoint: on the same batches (the stored stream, which serves the
    bad batches at bad_steps) or on other batches (another stream, which does not). Returns records."""
    state, tcfg = restart(ckpt, model_cfg)
    if same_batches:
        guards.hook_batches(state, stability.bad_batch_hook(set(bad_steps), token_id))
    else:
        state["batch_rng"] = np.random.default_rng([tcfg.seed, 1, OTHER_STREAM])
    return train.train_steps(state, model_cfg, tcfg, train_tokens, val_tokens, n_steps, on_step)


def spike_height(history, step, before=10):
    """Batch loss at step minus the median batch loss of the `before` steps preceding it (None if absent)."""
    at = {r["step"]: r.get("loss") for r in history}
    prior = [at[s] for s in range(step - before, step) if at.get(s) is not None]
    if at.get(step) is None or not prior:
        return None
    return at[step] - float(np.median(prior))


def first_update_sizes(ckpt, model_cfg, train_tokens, val_tokens):
    """The first update's size after a restart, with and without the optimiser state (same batch)."""
    sizes = {}
    for with_opt in (True, False):
        state, tcfg = restart(ckpt, model_cfg, with_opt)
        before = {n: p.copy() for n, p in state["params"].items()}
        train.train_steps(state, model_cfg, tcfg, train_tokens, val_tokens, 1)
        sizes["proper" if with_opt else "no_opt"] = update_norm(before, state["params"])
    return sizes



def replay_spike(history, bad_steps, before=REPLAY["before"], after=REPLAY["after"]):
    """The spike a bad stretch leaves: the largest batch loss on the clean steps in the `after`
    steps after the stretch, minus the median batch loss of the `before` steps before it (None
    if the history does not cover both)."""
    first, last = min(bad_steps), max(bad_steps)
    loss = {r["step"]: r.get("loss") for r in history}
    prior = [loss.get(s) for s in range(first - before, first)]
    later = [loss.get(s) for s in range(last + 1, last + 1 + after)]
    if any(x is None for x in prior + later):
        return None
    return max(later) - float(np.median(prior))
