"""Accessibility, measured by a real engine (axe-core: a11y_checks.py), on the pages without a chapter's
widgets: the index, the glossary, the troubleshooting page, the results and the offline page. Each is opened on a 360 px
phone in the dark theme (the system's setting, emulated): nothing scrolls sideways once it has drawn
(WCAG 1.4.10, reflow); then at 1100 px, axe's serious and critical violations in the dark theme (every
rule), and its colour rules again in the light one (chosen with the header's switch: the theme changes
colours only). Each chapter page is checked by its own module at the end of its tests
(a11y_checks.check_accessibility: loading a chapter starts Python, which costs seconds). And the
keyboard: the first Tab from the top of a page lands on the skip link, which moves focus to the page's
main content; every control shows a focus ring."""

import pytest

from a11y_checks import COLOUR_RULES, FRAMES, PHONE, RUN_AXE, WIDE, assert_no_violations, axe_source, mount_exercises, serious, settle
from conftest import ROOT, SITE, close_page, open_reader_page

# Every page of the site without a chapter's widgets (the chapters are checked by their own modules).
PAGES = ["index.html", "glossary.html", "troubleshooting.html", "results.html", "offline.html"]


def test_every_page_is_checked_here_or_by_its_chapters_module():
    built = {p.name for p in SITE.glob("*.html")}
    assert built <= set(PAGES), f"pages no accessibility check visits: {sorted(built - set(PAGES))}"
    for page in sorted((SITE / "chapters").glob("*.html")):
        number = int(page.name.split("-")[0])
        module = (ROOT / "tests" / "browser" / f"test_chapter{number}.py").read_text(encoding="utf-8")
        assert "check_accessibility(chapter" in module, f"test_chapter{number}.py does not check {page.name}"


@pytest.fixture(scope="module", params=PAGES)
def visit(request, reader_profile, browser, site_url):
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
        out["width"] = page.evaluate("document.documentElement.scrollWidth")
        page.set_viewport_size(WIDE)
        page.evaluate(FRAMES)
        page.add_script_tag(path=axe_source())
        out["dark_theme"] = page.evaluate("document.documentElement.dataset.theme")
        out["dark"] = serious(page.evaluate(RUN_AXE, None))
        page.click('button[data-theme-choice="light"]')
        out["light_theme"] = page.evaluate("document.documentElement.dataset.theme")
        page.evaluate(FRAMES)
        out["light"] = serious(page.evaluate(RUN_AXE, COLOUR_RULES))
    finally:
        close_page(page)
    return out


def test_no_serious_accessibility_violations_in_the_dark_theme(visit):
    assert visit["dark_theme"] == "dark"  # the system's setting
    assert_no_violations(visit["path"], "dark, system setting", visit["dark"], visit["console"])


def test_no_serious_accessibility_violations_in_the_light_theme(visit):
    assert visit["light_theme"] == "light"
    assert_no_violations(visit["path"], "light, chosen in the header", visit["light"], visit["console"])


def test_no_page_scrolls_sideways_on_a_360_px_phone(visit):
    """Nothing wider than the screen once the widgets have drawn (tables and code scroll inside their
    own box, which is allowed)."""
    assert visit["width"] <= PHONE["width"], f"{visit['path']} is {visit['width']} px wide on a 360 px screen"


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
