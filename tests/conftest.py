"""Shared by every test: one BLAS thread, as build.py uses (set before NumPy is first imported).

With the default thread count, the process pools of tests/test_measure.py oversubscribe the two
cores and one task can take several times as long."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
