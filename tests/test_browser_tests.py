"""Rules the browser tests keep, checked on their source, so that a test that would race the page
fails here at once instead of at random on CI. A browser test reads what the page computes only once
the page has said it is ready:

- a chart's data table only through kit_checks.chart_table, which waits for the table's own "toggle"
  (the table is filled a task after the click that opens it);
- a widget's result only after the widget's own signals (conftest.wait_settled / settle_after:
  data-status, data-settles, data-pending), never after a status the test wrote itself."""

import pathlib
import re

import pytest

BROWSER = pathlib.Path(__file__).parent / "browser"

RULES = [
    (re.compile(r"kit-chart-data|data-role=\\?[\"'][\w-]*-data\\?[\"']"),
     "reads a chart's data table itself: use kit_checks.chart_table(scope[, role]), which waits for the "
     "table to be filled"),
    (re.compile(r"dataset\.(status|result|settles|pending)\s*=(?!=)|delete\s+\w+\.dataset\.(status|result|settles|pending)"),
     "writes the widget's own status signals: use conftest.settle_after(w, action) (or wait_settled with "
     "after=settles(w)) to wait for the answer to an action"),
]


def browser_tests():
    return sorted(p for p in BROWSER.glob("test_*.py"))


def violations(source):
    """(line number, line, why) for every line of source that breaks a rule."""
    out = []
    for n, line in enumerate(source.splitlines(), 1):
        for pattern, why in RULES:
            if pattern.search(line):
                out.append((n, line.strip(), why))
    return out


@pytest.mark.parametrize("path", browser_tests(), ids=lambda p: p.name)
def test_browser_test_waits_for_the_pages_own_signals(path):
    found = violations(path.read_text())
    assert not found, "\n".join(f"{path.name}:{n}: {line}\n    {why}" for n, line, why in found)


@pytest.mark.parametrize("line", [
    """w.locator('[data-role="chart-weights-data"] summary').click()""",
    """rows = w.locator(".kit-chart-data tbody tr")""",
    """w.evaluate("el => { el.dataset.status = 'waiting'; }")""",
    """w.evaluate("el => { delete el.dataset.result; }")""",
])
def test_the_rules_catch_the_races_they_name(line):
    assert violations(line), line
