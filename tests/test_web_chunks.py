"""pylib.web.chunks: a chunk steps until its work is done or its time is spent, checking the clock
after each step, so it always makes at least one step unless the work is already done.

The clock is a fake time.perf_counter that moves only when a step runs, so the counts are exact."""

import time

import pytest

from pylib import web
from pylib.web.chunks import chunk_steps


@pytest.fixture
def clock(monkeypatch):
    """A fake perf_counter; clock["now"] is its reading, moved by the test's steps."""
    c = {"now": 100.0}
    monkeypatch.setattr(time, "perf_counter", lambda: c["now"])
    return c


def run(clock, step_seconds, done=lambda: False, seconds=None):
    """Steps made by one chunk whose steps each take step_seconds."""
    n = 0
    for _ in chunk_steps(done, seconds):
        n += 1
        clock["now"] += step_seconds
        assert n < 100, "the chunk ignored its budget"
    return n


def test_chunk_stops_once_its_budget_is_spent(clock):
    assert run(clock, 0.25, seconds=1.0) == 4  # 0.25, 0.5, 0.75 are under 1; 1.0 is not
    assert run(clock, 0.3, seconds=1.0) == 4  # 1.2 s: the step that crosses the budget finishes


def test_chunk_makes_one_step_even_when_it_takes_longer_than_the_budget(clock):
    assert run(clock, 5.0, seconds=1.0) == 1


def test_chunk_stops_when_done_before_the_budget(clock):
    steps = []
    for _ in chunk_steps(lambda: len(steps) >= 3, seconds=1.0):
        steps.append(len(steps))
    assert steps == [0, 1, 2]  # the clock never moved: done() alone ended the chunk


def test_chunk_makes_no_step_when_already_done(clock):
    assert run(clock, 0.1, done=lambda: True, seconds=1.0) == 0


def test_done_is_checked_before_each_step_and_after_the_clock(clock):
    calls = []

    def done():
        calls.append(clock["now"])
        return False

    assert run(clock, 0.5, done=done, seconds=1.0) == 2
    assert calls == [100.0, 100.5]  # not asked again once the budget is spent


def test_default_budget_is_limits_chunk_seconds(clock, monkeypatch):
    monkeypatch.setitem(web.LIMITS, "chunk_seconds", 2.0)
    assert run(clock, 0.5) == 4
