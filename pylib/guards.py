"""Chapter 8's guards on pylib.train's loop, each layered on the state's step functions.

skip_outliers: a step whose gradient norm exceeds factor times the median of the last 20 applied
steps' norms (once 10 have been applied) is not applied and is marked {"skipped": True}; the run
goes on with the next batch (pylib.train installs it when TrainConfig.skip_factor > 0).

hook_batches: hook(step, x, y) -> (x, y) may replace each microbatch (e.g. inject a corrupted
batch); the clean batch is still drawn, so the batch stream goes on unchanged.

hook_grads: hook(record, grads) sees each step's gradients before clipping and may add entries to
the record (e.g. per-layer gradient norms) or change the gradients in place.
"""

import numpy as np

# ---------------------------------------------------------------------------


def skip_outliers(state, factor):
    """Wrap state["update"]: an outlier step (see above) is marked skipped instead of applied."""
    update = state["update"]
    state.setdefault("recent_norms", [])

    def guarded(state, tc, record, grads, lr):
        recent, norm = state["recent_norms"], record["grad_norm"]  # the last applied steps' norms
        if len(recent) >= 10 and norm > factor * float(np.median(recent)):
            record.pop("clipped", None)  # not applied, so not clipped either
            record["skipped"] = True  # an outlier: this batch's update is dropped
            return
        update(state, tc, record, grads, lr)
        recent.append(norm)
        del recent[:-20]

    state["update"] = guarded


def hook_batches(state, hook):
    """Wrap state["loss_fn"]: each microbatch (x, y) of the step state["step"] becomes hook(step, x, y)."""
    loss_fn = state["loss_fn"]
    state["loss_fn"] = lambda params, cfg, x, y, denom: loss_fn(params, cfg, *hook(state["step"], x, y), denom=denom)


def hook_grads(state, hook):
    """Wrap state["step_grads"]: hook(record, grads) sees the step's gradients before clipping."""
    step_grads = state["step_grads"]

    def hooked(state, model_cfg, tc, tokens, record):
        loss, grads, n_tokens = step_grads(state, model_cfg, tc, tokens, record)
        hook(record, grads)
        return loss, grads, n_tokens

    state["step_grads"] = hooked
