"""A chunk of work: the steps a widget runs between two page updates.

The worker advances a long run in chunks of about LIMITS["chunk_seconds"], so the page redraws and
a Stop message is seen between them. Every *_chunk op loops the same way, written once here:

    for _ in chunk_steps(done):
        ...one step...

runs the body until done() is true or the time budget is spent, checking the clock after each
step, so a chunk makes at least one step unless the work is already done.
"""

import time

from pylib import web


def chunk_steps(done, seconds=None):
    """Yield once per step until done() or `seconds` (default LIMITS["chunk_seconds"]) have passed."""
    budget = web.LIMITS["chunk_seconds"] if seconds is None else seconds
    t0 = time.perf_counter()
    while not done():
        yield
        if time.perf_counter() - t0 >= budget:
            return
