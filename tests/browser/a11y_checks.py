"""Accessibility, measured by a real engine: axe-core (npm, node_modules/axe-core), for test_a11y.py
(the pages without a chapter's widgets, and the keyboard) and for every chapter module, which checks its
own chapter page at the end of its tests (check_accessibility): one visit of a chapter serves both its
widgets' tests and these checks, for loading a chapter starts Python and runs its widgets, which costs
seconds of CPU. A violation of impact "serious" or "critical" fails the page, listed with its rule, the
selectors of the elements and, for an element inside a widget, the widget's name."""

import pytest

from conftest import ROOT

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
FAILING = ("serious", "critical")

# The rules whose outcome depends on the colours: all that the theme changes (its switch sets the colour
# properties and the charts redraw their canvases; no element, name, role or size changes with it).
COLOUR_RULES = ["color-contrast", "link-in-text-block"]

# axe's violations (every rule, or only the rules given), with for each node its selector and the widget (data-widget) it sits in, if any.
RUN_AXE = """async (rules) => {
  const options = { resultTypes: ["violations"] };
  if (rules) options.runOnly = { type: "rule", values: rules };
  const result = await axe.run(document, options);
  return result.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map((n) => {
      const el = n.target.length === 1 ? document.querySelector(n.target[0]) : null;
      const w = el && el.closest("[data-widget]");
      return { target: n.target.join(" >> "), widget: w ? w.dataset.widget : null, summary: n.failureSummary };
    }),
  }));
}"""

# Python ready (or failed) on a page with widgets, then no widget still loading or running, and none
# with a call or a live update on its way (data-pending, widget-kit.js). On a page whose Python starts
# only when a Start is pressed (the index: html[data-widgets=on-demand]), Python is not waited for.
SETTLED = """() => {
  const widgets = document.querySelectorAll("[data-widget]");
  if (!widgets.length) return true;
  const py = document.documentElement.dataset.pyodide;
  const onDemand = document.documentElement.dataset.widgets === "on-demand";
  if (!onDemand && py !== "ready" && py !== "error") return false;
  return [...widgets].every((w) => !["loading", "running"].includes(w.dataset.status) && !("pending" in w.dataset));
}"""

# Two animation frames: resize observers, and charts that draw on the next frame, have run.
FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"

PHONE = {"width": 360, "height": 780}
WIDE = {"width": 1100, "height": 900}


def settle(page):
    """Wait for the page's widgets to have drawn (a widget that keeps running is left running)."""
    try:
        page.wait_for_function(SETTLED, timeout=180_000, polling=250)
    except Exception:
        pass  # a widget still running after 3 minutes is checked as it stands
    page.evaluate(FRAMES)


# Each exercise block: whether the page has begun mounting it (it came near: mountWhenNear, cells.js),
# has mounted it, or gave up (data-status "error"), and where it is; a Python state for the report.
EXERCISE_STATES = """() => ({ pyodide: document.documentElement.dataset.pyodide ?? null, scrollY: Math.round(scrollY),
  exercises: [...document.querySelectorAll("[data-exercise]")].map((el) => ({
    id: el.dataset.exercise, kind: el.dataset.kind, mounting: "mounting" in el.dataset, mounted: el.dataset.mounted === "true",
    status: el.dataset.status ?? null, top: Math.round(el.getBoundingClientRect().top) })) })"""


def wait_for_exercises(page, condition, arg, timeout, what):
    """Wait for `condition` (a function of `arg`) on the page, or fail with every exercise's state."""
    try:
        page.wait_for_function(condition, arg=arg, timeout=timeout, polling=250)
    except Exception as err:
        pytest.fail(f"{what} within {timeout // 1000} s ({type(err).__name__}): {page.evaluate(EXERCISE_STATES)}",
                    pytrace=False)


def mount_exercises(page):
    """Bring each exercise into view, so that it mounts (its editor or its input, its buttons): axe and
    the width check then see the blocks as a reader does. Back to the top afterwards. Scrolled by the
    page's own scrollIntoView, not Playwright's (which waits for the block to hold still for two frames:
    a block above that is still mounting moves it, and a busy machine starves the frames); each block
    has begun mounting before the next is scrolled to, as a reader's page would have while they read it."""
    for i in range(page.locator("[data-exercise]").count()):
        page.evaluate("i => document.querySelectorAll('[data-exercise]')[i].scrollIntoView({ block: 'center' })", i)
        page.evaluate(FRAMES)
        wait_for_exercises(page, "i => 'mounting' in document.querySelectorAll('[data-exercise]')[i].dataset", i,
                           30_000, f"exercise {i + 1}, scrolled into view, did not begin mounting")
    wait_for_exercises(page, """() => [...document.querySelectorAll("[data-exercise]")]
        .every((el) => el.dataset.mounted === "true" || el.dataset.status === "error")""", None,
                       60_000, "the exercises did not all mount")
    page.evaluate("window.scrollTo(0, 0)")


def serious(violations):
    return [v for v in violations if v["impact"] in FAILING]


def describe(path, theme, violations):
    """One line per rule, then per place (the page itself, or a widget by name): how many elements, the
    first selectors, and what axe says about the first."""
    lines = []
    for v in violations:
        lines.append(f"{path} [{theme}] {v['id']} ({v['impact']}): {v['help']} — {len(v['nodes'])} element(s)")
        places = {}
        for n in v["nodes"]:
            places.setdefault(f"widget {n['widget']}" if n["widget"] else "page", []).append(n)
        for where, nodes in places.items():
            targets = ", ".join(n["target"] for n in nodes[:4]) + (f", … ({len(nodes) - 4} more)" if len(nodes) > 4 else "")
            lines.append(f"    {where}: {len(nodes)} × {targets}")
            lines.append(f"        {' '.join(nodes[0]['summary'].split())[:300]}")
    return "\n".join(lines)


def axe_source():
    if not AXE.is_file():
        pytest.fail("node_modules/axe-core is missing: run the README's setup (npm ci)", pytrace=False)
    return str(AXE)


def assert_no_violations(path, theme, violations, console):
    report = describe(path, theme, violations)
    if report:
        print(report)
        print("--- page console ---\n" + "\n".join(console))
    assert not report, "axe found serious or critical violations:\n" + report


def check_accessibility(page, path):
    """A chapter page after its module's tests, as a reader who has used its widgets and then reads on:
    the widgets settled and every exercise mounted; at 1100 px in the light theme (chosen with the
    header's switch), axe's serious and critical violations (every rule); in the dark theme (the
    switch again), the colour rules (nothing else changes with the theme; the charts redraw on
    "themechange", in the same task as the click); then narrowed to a 360 px phone, nothing wider
    than the screen (tables and code scroll inside their own box, which is allowed) and the chapter
    list collapsed to one line (WCAG 1.4.10, reflow)."""
    settle(page)
    mount_exercises(page)
    assert page.evaluate("document.documentElement.dataset.pyodide") == "ready", f"{path}: Python is not ready"
    page.set_viewport_size(WIDE)
    page.evaluate(FRAMES)
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=axe_source())
    found = {}
    for theme, rules in (("light", None), ("dark", COLOUR_RULES)):
        page.click(f'button[data-theme-choice="{theme}"]')
        assert page.evaluate("document.documentElement.dataset.theme") == theme
        page.evaluate(FRAMES)
        found[theme] = serious(page.evaluate(RUN_AXE, rules))
    for theme in found:
        assert_no_violations(path, f"{theme}, chosen in the header", found[theme], page.log.console)
    page.set_viewport_size(PHONE)
    page.evaluate(FRAMES)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{path} is {width} px wide on a 360 px screen"
    assert page.evaluate("document.querySelector('.chapter-nav-list').open") is False, path
