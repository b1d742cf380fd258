"""Steps, bytes and time to a target loss: comparing methods by when they first reach a loss fixed in advance.

Two methods that end at different final losses after the same number of steps say little about
which is cheaper: one may get there sooner and stall, the other may still be falling. The course
compares them instead by the first evaluation at which each reaches a loss chosen before the runs
(the target), and by what that cost: steps, bytes sent, or seconds. A run that never reaches the
target has no value (None), which is reported as such, never dropped or replaced by its last step.

A history is a list of records in step order, each with "step" (steps done) and, at evaluation
steps, the loss under `key` (the 128-window validation subset, "val", unless said otherwise);
cumulative costs ("bytes", "seconds") are read from the same record.
"""


def first_reaching(history, target, key="val"):
    """The first record whose loss under key is at or below target, or None if none is."""
    for record in history:
        loss = record.get(key)
        if loss is not None and loss <= target:
            return record
    return None


def steps_to_target(history, target, key="val"):
    """Steps done when the loss first reaches target; None if it never does."""
    record = first_reaching(history, target, key)
    return None if record is None else record["step"]


def cost_to_target(history, target, cost="bytes", key="val"):
    """The cumulative cost (record[cost], e.g. "bytes") when the loss first reaches target; None if never."""
    record = first_reaching(history, target, key)
    return None if record is None else record[cost]


def time_to_target(steps, syncs, step_seconds, sync_seconds):
    """Wall-clock to the target: steps of compute plus syncs of communication, one after the
    other (no overlap); None if the target was not reached (steps is None)."""
    if steps is None:
        return None
    return steps * step_seconds + syncs * sync_seconds
