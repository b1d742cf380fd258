"""Shared by every test: one BLAS thread and the BLAS kernels build.py uses (set before NumPy is first imported).

With the default thread count, the process pools of tests/test_measure.py oversubscribe the two
cores and one task can take several times as long.

Also shared: the course's corpus, built once per test process (a build takes seconds and a dozen
modules read it), and a sampled finite-difference gradient check (tests/test_mtp.py's). The checks
that the chapters describe as covering every element of every parameter (tests/test_model.py,
test_packing.py, test_model_variants.py) nudge every element themselves.

And how the tests are shared out among pytest-xdist's processes (xdist_group, at the end)."""

import os
import re

from builder import blas  # noqa: E402 (imports nothing but os)

blas.pin()  # OPENBLAS_NUM_THREADS=1 and, with AVX-512, the kernels results.json was measured with

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def torch_one_thread():
    """PyTorch on one thread for a module's tests, as build.py --measure runs the companions (float16
    products on two threads were slower here, not faster); the count is restored afterwards."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def shared_corpus():
    """pylib.data.build_corpus(), once per process, its token arrays read-only: a test that wrote
    into them would change what every later test reads, so it fails at the write instead."""
    from pylib import data
    corpus = data.build_corpus()
    corpus.train.flags.writeable = False
    corpus.val.flags.writeable = False
    return corpus


ALL_UP_TO = 64  # a tensor with at most this many elements has every element checked


def checked_elements(shape, rng, all_up_to=ALL_UP_TO):
    """Flat indices of the elements a finite-difference check nudges, in increasing order.

    Every element of a tensor of at most all_up_to elements. Of a larger matrix (any tensor of
    2 or more dimensions, seen as rows of its first axis), one element drawn in every row and one in
    every column, so that a backward wrong in one row (a position, a token, an output unit) or in
    one column (an input feature) is checked somewhere; of a larger vector, all_up_to drawn elements."""
    import numpy as np
    size = int(np.prod(shape))
    if size <= all_up_to:
        return np.arange(size)
    if len(shape) == 1:
        return np.sort(rng.choice(size, all_up_to, replace=False))
    rows, cols = shape[0], size // shape[0]
    by_row = np.arange(rows) * cols + rng.integers(0, cols, rows)
    by_col = rng.integers(0, rows, cols) * cols + np.arange(cols)
    return np.unique(np.concatenate([by_row, by_col]))


def finite_difference_errors(loss, params, grads, h=1e-5, seed=0, all_up_to=ALL_UP_TO):
    """Backward against centred differences (loss() reads params as they are now; float64 params).

    Per tensor: {"checked": elements nudged, "scale": the tensor's largest gradient (analytic over
    the whole tensor, or numeric), "error": max |numeric - analytic| / scale over the checked
    elements (0 if scale is 0), "directional": the same comparison along one random unit direction
    v (random signs) in which every element of the tensor moves at once, by the same amount, |(L(p + h v) - L(p - h v)) / 2h - <g, v>|
    over |g| (or over the numeric slope if that is larger; 0 if both are 0)}. The elementwise check
    is the classic one; the directional one also sees a wrong gradient in an element that the
    sample left out."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = {}
    for name, p in params.items():
        g = grads[name]
        flat = checked_elements(p.shape, rng, all_up_to)
        numeric = np.empty(flat.size)
        for j, k in enumerate(flat):
            i = np.unravel_index(int(k), p.shape)
            old = p[i]
            p[i] = old + h
            plus = loss()
            p[i] = old - h
            minus = loss()
            p[i] = old
            numeric[j] = (plus - minus) / (2 * h)
        scale = max(float(np.abs(numeric).max()), float(np.abs(g).max()))
        error = float(np.abs(numeric - g.reshape(-1)[flat]).max() / scale) if scale > 0 else 0.0
        v = rng.choice([-1.0, 1.0], p.shape) / np.sqrt(p.size)  # every element moves by h / sqrt(size)
        old = p.copy()
        p[...] = old + h * v
        plus = loss()
        p[...] = old - h * v
        minus = loss()
        p[...] = old
        along = (plus - minus) / (2 * h)
        norm = max(float(np.linalg.norm(g)), abs(along))  # |<g, v>| <= |g| for a unit v
        directional = abs(along - float((g * v).sum())) / norm if norm > 0 else 0.0
        out[name] = {"checked": int(flat.size), "scale": scale, "error": error, "directional": directional}
    return out


@pytest.fixture(scope="session")
def gradient_check():
    """finite_difference_errors, for the tests that check a backward."""
    return finite_difference_errors


# ---------------------------------------------------------------------------
# How the tests are shared out among pytest-xdist's processes (scripts/test.sh runs `-n 2`).
#
# A scheduler of our own, not xdist's `--dist loadgroup`: loadgroup finds a test's group in its id,
# which it rewrites through pytest's private `item._nodeid`, and pytest 9.2 no longer reads that
# attribute, so every test was its own group and a chapter's tests were split between the two
# processes, each loading the chapter (and the page that had not pretrained chapter 16's model
# waited 240 s for a button that never came on).


def group_of(nodeid):
    """The group a test runs in, from its id: its module, so that a module's fixtures (a chapter page
    loaded once, a corpus built once) serve all its tests on one process; but test_a11y's visits, one
    page each (ids ending "[<page>.html-chromium]"), are a group per page, so that the pages are shared
    out among the processes like modules; and test_notebooks' notebooks, a group each."""
    module = nodeid.split("::")[0]
    visit = re.search(r"\[(.+\.html)-chromium\]$", nodeid) if module.endswith("browser/test_a11y.py") else None
    if module.endswith("tests/test_notebooks.py"):  # a notebook per group too: each runs a kernel of its own
        visit = re.search(r"::test_notebook_runs\[(.+)\]$", nodeid)
    return f"{module}:{visit.group(1)}" if visit else module


@pytest.fixture(scope="session")
def longest_groups_first_test():
    """longest_groups_first, for tests/test_scheduling.py."""
    return longest_groups_first


@pytest.fixture(scope="session")
def group_of_test():
    """group_of, for tests/test_scheduling.py (a test module cannot import this conftest by name: the
    browser tests' conftest is the one called "conftest" in a whole run)."""
    return group_of


# The longest groups first, by their seconds in the last recorded run (tests/group_seconds.json),
# so that no process is left with a long browser module at the end while the other idles: xdist's
# own order (most tests first) put test_exercises.py's 677 quick tests first and the few-test, minute-long
# browser modules last. A group not in the file counts DEFAULT_TEST_SECONDS per test. The file is
# rewritten by a whole run with TEST_RECORD_GROUP_SECONDS=1 (scripts/test.sh passes the variable on).
GROUP_SECONDS = os.path.join(os.path.dirname(__file__), "group_seconds.json")
DEFAULT_TEST_SECONDS = 1.0


def recorded_group_seconds():
    import json
    try:
        with open(GROUP_SECONDS, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def longest_groups_first(nodeids, seconds):
    """nodeids reordered so that the groups come longest first (a stable sort: a group's tests keep
    their order, and a group stays together)."""
    counts = {}
    for nodeid in nodeids:
        counts[group_of(nodeid)] = counts.get(group_of(nodeid), 0) + 1
    weight = {g: seconds.get(g, DEFAULT_TEST_SECONDS * n) for g, n in counts.items()}
    first_seen = {}
    for i, nodeid in enumerate(nodeids):
        first_seen.setdefault(group_of(nodeid), i)
    return sorted(nodeids, key=lambda nodeid: (-weight[group_of(nodeid)], first_seen[group_of(nodeid)]))


def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist") or not getattr(config.option, "numprocesses", None) \
            and not hasattr(config, "workerinput"):
        return  # one process: the order does not matter for the time, keep pytest's
    order = {nodeid: i for i, nodeid in enumerate(longest_groups_first([it.nodeid for it in items],
                                                                       recorded_group_seconds()))}
    items.sort(key=lambda it: order[it.nodeid])


_group_totals = {}


def pytest_runtest_logreport(report):
    """On the controller (reports from every process come here), each group's seconds, all phases."""
    _group_totals[group_of(report.nodeid)] = _group_totals.get(group_of(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput") or not os.environ.get("TEST_RECORD_GROUP_SECONDS"):
        return
    import json
    with open(GROUP_SECONDS, "w", encoding="utf-8") as f:
        json.dump({g: round(s, 1) for g, s in sorted(_group_totals.items(), key=lambda kv: -kv[1])}, f, indent=1)
        f.write("\n")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduling with group_of() as the scope: a group goes whole to one process,
    in the order of the collection, which pytest_collection_modifyitems made longest first."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return group_of(nodeid)

    config.option.loadscopereorder = False  # keep the collection's order (longest first), not most tests first
    return GroupScheduling(config, log)
