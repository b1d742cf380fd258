"""Accessibility, measured by a real engine: axe-core (npm, node_modules/axe-core) runs on every built
page (the index, the glossary, every chapter) in the dark theme (the system's setting, emulated), and
its colour rules again in the light one (chosen with the header's switch: the theme changes colours
only), once Python is ready and the widgets have drawn.
A violation of impact "serious" or "critical" fails the page, listed with its rule, the selectors of
the elements and, for an element inside a widget, the widget's name. Reflow (WCAG 1.4.10): opened on a
360 px phone, no page scrolls sideways. One visit per page serves all three checks (loading a chapter
starts Python, which costs seconds). And the keyboard: the first Tab from the top of a page lands on
the skip link, which moves focus to the page's main content; every control shows a focus ring."""

import pytest

from conftest import ROOT, SITE, close_page, open_reader_page

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
FAILING = ("serious", "critical")

# Every page of the site, as the build writes it (pages added later are found by the glob).
PAGES = ["index.html", "glossary.html", "troubleshooting.html", "results.html"] + sorted(
    f"chapters/{p.name}" for p in (SITE / "chapters").glob("*.html"))

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


@pytest.fixture(scope="module")
def axe_source():
    if not AXE.is_file():
        pytest.fail("node_modules/axe-core is missing: run the README's setup (npm ci)", pytrace=False)
    return str(AXE)


@pytest.fixture(scope="module", params=PAGES)
def visit(request, reader_profile, browser, site_url, axe_source):
    """One visit to a page, as a reader on a phone who then widens the window: opened at 360 px in the
    dark theme (the system's setting), its width once the widgets have drawn; then at 1100 px, axe's
    serious and critical violations in the dark theme (every rule), and again after choosing the light
    theme with the header's switch (the colour rules: nothing else changes with the theme; the charts
    redraw on "themechange", in the same task as the click)."""
    path = request.param
    # Service workers blocked, as on every page that does not test the saved copy (test_offline does):
    # saving the site costs a page seconds of CPU, and the page shows nothing of it.
    page = open_reader_page(reader_profile, browser, site_url + path, viewport=PHONE, color_scheme="dark")
    out = {"path": path, "console": page.log.console}
    try:
        settle(page)
        mount_exercises(page)
        out["pyodide"] = page.evaluate("document.documentElement.dataset.pyodide")
        out["width"] = page.evaluate("document.documentElement.scrollWidth")
        out["chapter_list_open"] = page.evaluate("(document.querySelector('.chapter-nav-list') || {}).open")
        page.set_viewport_size(WIDE)
        page.evaluate(FRAMES)
        page.add_script_tag(path=axe_source)
        out["dark_theme"] = page.evaluate("document.documentElement.dataset.theme")
        out["dark"] = serious(page.evaluate(RUN_AXE, None))
        page.click('button[data-theme-choice="light"]')
        out["light_theme"] = page.evaluate("document.documentElement.dataset.theme")
        page.evaluate(FRAMES)
        out["light"] = serious(page.evaluate(RUN_AXE, COLOUR_RULES))
    finally:
        close_page(page)
    return out


def assert_no_violations(visit, theme, key):
    report = describe(visit["path"], theme, visit[key])
    if report:
        print(report)
        print("--- page console ---\n" + "\n".join(visit["console"]))
    assert not report, "axe found serious or critical violations:\n" + report


def test_no_serious_accessibility_violations_in_the_dark_theme(visit):
    assert visit["dark_theme"] == "dark"  # the system's setting
    assert_no_violations(visit, "dark, system setting", "dark")


def test_no_serious_accessibility_violations_in_the_light_theme(visit):
    assert visit["light_theme"] == "light"
    assert_no_violations(visit, "light, chosen in the header", "light")


def test_no_page_scrolls_sideways_on_a_360_px_phone(visit):
    """Nothing wider than the screen once Python is ready and the widgets have drawn (tables and code
    scroll inside their own box, which is allowed); on a chapter, the chapter list is collapsed to one
    line."""
    assert visit["width"] <= PHONE["width"], f"{visit['path']} is {visit['width']} px wide on a 360 px screen"
    if visit["path"].startswith("chapters/"):
        assert visit["pyodide"] == "ready", f"{visit['path']}: Python is {visit['pyodide']}, not ready"
        assert visit["chapter_list_open"] is False, visit["path"]


def test_the_first_tab_reaches_the_skip_link_and_enter_moves_focus_to_the_content(page, site_url):
    page.set_viewport_size({"width": 1100, "height": 800})
    page.goto(site_url + "chapters/" + sorted((SITE / "chapters").glob("03-*.html"))[0].name)
    link = page.locator("a.skip-link")
    assert link.bounding_box()["y"] + link.bounding_box()["height"] <= 0  # out of sight until focused
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert page.evaluate("document.activeElement.textContent.trim()") == "Skip to content"
    box = link.bounding_box()
    assert box["y"] >= 0 and box["height"] > 0  # visible while it has focus
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.tagName") == "MAIN"
    assert page.evaluate("document.activeElement.id") == "main"
    # the next Tab goes on from the content, not back into the header
    page.keyboard.press("Tab")
    assert page.evaluate("!!document.activeElement.closest('main')")


def test_the_page_has_one_of_each_landmark(page, site_url):
    for path in ("index.html", "glossary.html", "chapters/" + sorted((SITE / "chapters").glob("01-*.html"))[0].name):
        page.goto(site_url + path, wait_until="domcontentloaded")
        for role, selector in (("banner", "body > header"), ("main", "main"), ("contentinfo", "body > footer")):
            assert page.locator(selector).count() == 1, f"{path}: {role}"
        assert page.locator("main#main").count() == 1, path


# The focused element's ring: its outline (or, for a control drawn inside a frame, such as the code
# editor's text inside .cm-editor, the outline of the nearest of its two parents that has one), and what it is.
FOCUSED = """() => {
  const e = document.activeElement;
  let ring = e;
  for (let up = 0, a = e; up < 3 && a; up++, a = a.parentElement) {
    if (getComputedStyle(a).outlineStyle !== "none") { ring = a; break; }
  }
  const s = getComputedStyle(ring);
  const w = e.closest("[data-widget]");
  return { tag: e.tagName.toLowerCase(), type: e.type || "", text: (e.textContent || e.name || "").trim().slice(0, 40),
           widget: w ? w.dataset.widget : null, style: s.outlineStyle, width: parseFloat(s.outlineWidth),
           color: s.outlineColor, bg: getComputedStyle(document.body).backgroundColor };
}"""


def test_every_control_shows_a_focus_ring_the_reader_can_see(reader_profile, browser, site_url):
    """Tab through a chapter with sliders, fields, selects, buttons, summaries and links, in the dark theme
    (the system's) and again in the light one (chosen in the header): each stop has an outline at least
    2 px wide whose colour has 3:1 against the page. The page records each stop on "focusin", so a Tab
    costs one key press."""
    from test_theme import contrast, rgb

    page = open_reader_page(reader_profile, browser, site_url + "chapters/" + sorted((SITE / "chapters").glob("06-*.html"))[0].name,
                            viewport={"width": 1100, "height": 900}, color_scheme="dark")
    settle(page)
    page.evaluate(f"""() => {{
      window.courseStops = [];
      document.addEventListener("focusin", () => window.courseStops.push(({FOCUSED})()));
    }}""")
    faint = []
    for theme in ("dark", "light"):
        if theme == "light":
            page.click('button[data-theme-choice="light"]')
        assert page.evaluate("document.documentElement.dataset.theme") == theme
        # From the top: the skip link is the first stop (test_the_first_tab_reaches_the_skip_link...).
        # Focused from the script it shows no ring after the click on the switch (a focus the keyboard
        # did not move is not :focus-visible), so it is left and reached again with Shift+Tab.
        page.evaluate("document.querySelector('a.skip-link').focus(); window.courseStops = []")
        page.keyboard.press("Tab")
        page.keyboard.press("Shift+Tab")
        for n in range(1, 401):
            page.keyboard.press("Tab")
            if n % 25 == 0 and page.evaluate("document.activeElement === document.body"):
                break
        stops = page.evaluate("window.courseStops")
        assert stops[1]["text"] == "Skip to content", (theme, stops[:2])  # the skip link, by the keyboard
        kinds = {f["tag"] if f["tag"] != "input" else f"input[{f['type']}]" for f in stops}
        assert {"a", "button", "summary", "select", "input[text]", "input[range]"} <= kinds, (theme, kinds)
        for f in stops:
            ratio = contrast(rgb(f["color"])[0], rgb(f["bg"])[0]) if f["style"] != "none" else 0
            if f["style"] == "none" or f["width"] < 2 or ratio < 3:
                where = f"widget {f['widget']}" if f["widget"] else "page"
                faint.append(f"{theme}: {where}: <{f['tag']}> {f['text']!r}: outline {f['style']} {f['width']}px {f['color']} ({ratio:.2f}:1)")
    close_page(page)
    assert not faint, "\n".join(sorted(set(faint)))
