"""build.py --measure --scheduler: the measure tasks on a Dask cluster give the local pool's results,
and a scheduler that cannot be reached is a message, not a hang or a traceback."""

import concurrent.futures
import os
import socket

import pytest

from builder import measure
from test_measure import _without_timings

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

# Two chapters' quickest parts (under a second each in results.json's measure.task.* timings):
# chapter 12's float32 split (values) and chapter 15's goodput (values, curves and settings).
FAST_TASKS = [("ch12", "part_split"), ("ch15", "part_goodput")]
# the same BLAS thread count and kernels as the local pool (tests/conftest.py set them: builder/blas.py)
BLAS_ENV = {k: os.environ[k] for k in ("OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE") if k in os.environ}
TIMEOUT = 120  # seconds for anything that waits on the cluster; the test takes about 10


@pytest.fixture
def restored_environ():
    """A Nanny writes its pre-spawn variables (OMP_NUM_THREADS, PYTHONHASHSEED, ...) into this
    process's os.environ before starting a worker: put it back for the tests that follow."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_a_dask_cluster_gives_the_local_pools_results(monkeypatch, restored_environ, shared_corpus):
    assert all(task in measure.chapter_tasks([task[0]]) for task in FAST_TASKS), "a part was renamed"
    monkeypatch.setattr(measure, "chapter_tasks", lambda only=None: [t for t in FAST_TASKS if t[0] in only])
    only = sorted({chapter for chapter, _ in FAST_TASKS})
    monkeypatch.setattr(measure, "_corpus", lambda: shared_corpus)  # the forked pool's; Dask's workers build their own
    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        local = measure.run_experiments(only, executor=pool, timeout=TIMEOUT)
    # non-daemonic workers, which may start processes of their own (cluster_executor checks it)
    with dask.config.set({"distributed.worker.daemon": False}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                     dashboard_address=":0", env=BLAS_ENV,
                                     timeout=TIMEOUT) as cluster, \
            measure.cluster_executor(cluster.scheduler_address, timeout=TIMEOUT) as executor:
        assert measure.executor_slots(executor) == 2
        on_cluster = measure.run_experiments(only, executor=executor, timeout=TIMEOUT)
    assert _without_timings(on_cluster) == _without_timings(local)
    assert on_cluster["values"] and on_cluster["curves"], "nothing measured"
    assert {k for k in on_cluster["timings"] if k.startswith("measure.task.")} == \
        {f"measure.task.{chapter}.{part}" for chapter, part in FAST_TASKS}


def test_an_unreachable_scheduler_is_a_message_not_a_traceback():
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(SystemExit, match=f"no Dask scheduler answered at {address} within 1 s"):
        with measure.cluster_executor(address, timeout=1):
            pytest.fail("connected to nothing")
