"""Steps, bytes and time to a target loss: comparing methods by when they first reach a loss fixed in advance.

Two methods that end at different final losses after the same number of steps say little about
which is cheaper: one may get there sooner and stall, the other may still be falling. The course
compares them instead by the first evaluation at which each reaches a loss chosen before the runs
(the target), and by what that cost: steps, bytes sent, or seconds. A run that never reaches the
target has no value (None), which is reported as such, never dropped or replaced by its last step.

A history is a list of records in step order, each with "step" (steps done) and, at evaluation
steps, the loss under `key` (the 128-window validation subset, "val", unless said otherwise);
cumulative costs ("bytes", "seconds") are read from the same record. pylib.train's records are the
exception: their "step" is the 0-based step, evaluated before its update (steps done = step) except
the run's last, evaluated after it (steps done = steps); reading one needs the run's length.
"""


def first_reaching(history, target, key="val"):
    """The first record whose loss under key is at or below target, or None if none is."""
    for record in history:
        loss = record.get(key)
        if loss is not None and loss <= target:
            return record
    return None


def steps_to_target(history, target, key="val", steps=None):
    """Steps done when the loss first reaches target; None if it never does. A record that says
    when its loss was measured (key + "_step", as the dashboard's rows do) is read at that step; a
    pylib.train record (it has "lr") of the last step, steps - 1, at steps: its evaluation follows the update."""
    record = first_reaching(history, target, key)
    if record is None:
        return None
    if f"{key}_step" in record:
        return record[f"{key}_step"]
    if "lr" in record:  # a pylib.train record: its step is the step's index, not the steps done
        if steps is None:
            raise ValueError("a pylib.train history needs steps=, the run's length: its last evaluation "
                             "follows the update")
        return record["step"] + 1 if record["step"] == steps - 1 else record["step"]
    return record["step"]


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


# ---------------------------------------------------------------------------
# Comparing two arms when some runs never reach the target


def censored_order(steps_a, steps_b, limit):
    """Which of two paired runs reached the target first, a miss (None) treated as censored.

    A run that never reached the target within `limit` steps is right-censored: its steps to the
    target are only known to be more than `limit`. So a pair is still ordered when one run reached
    the target and the other did not (the one that reached it was first), and unordered only when
    neither did. Returns "a", "b", "tie" (the same evaluation) or "neither"."""
    for s in (steps_a, steps_b):
        if s is not None and not 0 <= s <= limit:
            raise ValueError(f"steps to target {s} outside 0..{limit}")
    if steps_a is None and steps_b is None:
        return "neither"
    if steps_b is None or (steps_a is not None and steps_a < steps_b):
        return "a"
    if steps_a is None or steps_b < steps_a:
        return "b"
    return "tie"


def censored_sign_test(pairs, limit):
    """A paired sign test of steps to the target with misses censored: pairs is [(steps_a, steps_b)].

    Counts the pairs each arm reached first (censored_order) and the exact two-sided binomial
    p-value of that split under "either arm is equally likely to be first"; ties and pairs where
    neither run reached the target carry no order and are left out of the test (and counted).
    {"a": n, "b": n, "tie": n, "neither": n, "p": p or None when no pair is ordered}."""
    from math import comb

    counts = {"a": 0, "b": 0, "tie": 0, "neither": 0}
    for a, b in pairs:
        counts[censored_order(a, b, limit)] += 1
    n, k = counts["a"] + counts["b"], min(counts["a"], counts["b"])
    p = None if n == 0 else min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n)
    return {**counts, "p": p}
