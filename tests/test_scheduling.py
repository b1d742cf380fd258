"""How the suite is shared out among pytest-xdist's processes (tests/conftest.py): a module's tests run
on one process, test_a11y's visits a page each. The second test runs pytest-xdist for real, with the
installed pytest, because the scheduling once failed silently there: xdist's own groups were ignored
by pytest 9.2, so chapter 16's tests ran on two processes and half of them waited for a model that the
other process had trained."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_module_is_one_group_and_an_accessibility_visit_is_a_page(group_of_test):
    group_of = group_of_test
    assert group_of("tests/test_optim.py::test_weight_decay_is_decoupled") == "tests/test_optim.py"
    assert group_of("tests/browser/test_chapter16.py::test_bad_sft_settings_are_refused_visibly[chromium-steps-NaN]") \
        == "tests/browser/test_chapter16.py"
    dark = "tests/browser/test_a11y.py::test_no_serious_accessibility_violations_in_the_dark_theme[chapters/01-x.html-chromium]"
    phone = "tests/browser/test_a11y.py::test_no_page_scrolls_sideways_on_a_360_px_phone[chapters/01-x.html-chromium]"
    other = "tests/browser/test_a11y.py::test_no_page_scrolls_sideways_on_a_360_px_phone[index.html-chromium]"
    assert group_of(dark) == group_of(phone) == "tests/browser/test_a11y.py:chapters/01-x.html"
    assert group_of(other) == "tests/browser/test_a11y.py:index.html"
    ring = "tests/browser/test_a11y.py::test_every_control_shows_a_focus_ring_the_reader_can_see[chromium-light]"
    assert group_of(ring) == "tests/browser/test_a11y.py"  # not a visit: with its module


def test_two_processes_run_each_module_whole():
    # two small pure-Python modules with several tests each; load balancing alone would split them
    modules = ["tests/test_optim.py", "tests/test_compare.py"]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider", *modules],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "TEST_RECORD_GROUP_SECONDS"})  # not this run's to record
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    workers = {}
    for worker, nodeid in re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)", out.stdout, re.MULTILINE):
        workers.setdefault(nodeid.split("::")[0], set()).add(worker)
    assert set(workers) == set(modules), out.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), workers


def test_the_longest_groups_come_first_and_each_stays_together(longest_groups_first_test):
    ids = ["tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_b.py::t1",
           "tests/browser/test_a11y.py::test_x[index.html-chromium]", "tests/test_c.py::t1", "tests/test_a.py::t3"]
    seconds = {"tests/test_b.py": 50.0, "tests/browser/test_a11y.py:index.html": 20.0, "tests/test_a.py": 5.0}
    order = longest_groups_first_test(ids, seconds)
    assert order == ["tests/test_b.py::t1", "tests/browser/test_a11y.py::test_x[index.html-chromium]",
                     "tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_a.py::t3", "tests/test_c.py::t1"]
    # with nothing recorded, a group counts one second per test: the largest group first, ties in collection order
    assert longest_groups_first_test(ids, {})[:3] == ["tests/test_a.py::t1", "tests/test_a.py::t2", "tests/test_a.py::t3"]
