"""Quiet evidence: a number's source is an underline, not a badge. Every figure keeps its kind (said to
screen readers, drawn as a dotted, dashed or solid underline in its kind's colour) and its source
(label, key, seeds) in a popover on hover, focus or tap; a table column of one kind carries one mark,
in its header; each chapter explains the marks once, under its title."""

import re

from playwright.sync_api import expect

CH6 = "chapters/06-learning-rate-and-batch-size.html"
POP = ".fig-pop"


def popover(page):
    """(shown, text, box) of the page's figure popover."""
    return page.evaluate("""() => { const p = document.querySelector('.fig-pop');
        if (!p || p.hidden) return [false, null, null];
        const r = p.getBoundingClientRect();
        return [true, p.textContent, [r.left, r.top, r.right, r.bottom]]; }""")


def inside(box, width, height):
    return box[0] >= 0 and box[1] >= 0 and box[2] <= width and box[3] <= height


def test_figures_are_quiet_underlines_explained_once_with_one_mark_per_table_column(page, site_url):
    page.goto(site_url + CH6, wait_until="domcontentloaded")
    legend = page.locator(".fig-legend")
    expect(legend).to_have_count(1)
    assert [legend.locator(f".fig-sample.{k}").count() for k in ("measured", "derived", "cited")] == [1, 1, 1]
    # no visible badge: each figure's kind is a visually hidden word for screen readers
    tags = page.evaluate("""() => [...document.querySelectorAll('.fig .fig-tag')].map(t => {
        const r = t.getBoundingClientRect(); return [t.textContent, r.width, r.height]; })""")
    assert len(tags) > 200
    assert all(kind in ("measured", "derived", "cited") and w <= 1 and h <= 1 for kind, w, h in tags), tags[:5]
    styles = page.evaluate("""() => Object.fromEntries(['measured', 'derived', 'cited'].map(k => {
        const f = [...document.querySelectorAll('.fig.' + k)].find(e => !e.closest('.fig-quiet'));
        return [k, f && getComputedStyle(f).borderBottomStyle]; }))""")
    assert styles == {"measured": "dotted", "derived": "dashed", "cited": "solid"}
    # the rate ladder's table: every column measured, marked once in its header, its cells quiet
    table = page.locator("table").filter(has_text="diverged at step").first
    heads = table.locator("thead th")
    assert heads.count() == 4
    for i in range(4):
        expect(heads.nth(i).locator(".fig-col.measured")).to_have_text("measured")
    cells = table.locator("tbody td")
    assert cells.count() == 4 * table.locator("tbody tr").count()
    assert cells.evaluate_all("cs => cs.every(c => c.classList.contains('fig-quiet') && "
                              "getComputedStyle(c.querySelector('.fig')).borderBottomColor === 'rgba(0, 0, 0, 0)')")


def test_a_figures_source_shows_on_hover_and_on_focus_inside_the_screen(page, site_url):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(site_url + CH6, wait_until="domcontentloaded")
    assert popover(page)[0] is False
    figure = page.locator("article.chapter > p .fig.measured").first
    source = figure.get_attribute("data-source")
    assert source.startswith("measured: results.json key")
    figure.scroll_into_view_if_needed()
    page.wait_for_timeout(100)
    figure.hover()
    shown, text, box = popover(page)
    assert shown and text == source and inside(box, 1280, 800), (text, box)
    page.mouse.move(5, 5)
    assert popover(page)[0] is False
    # keyboard: the figure's link takes focus, the popover describes it; Escape hides it
    cell = page.locator("table .fig-quiet .fig").nth(3)
    cell.locator("a").focus()
    shown, text, box = popover(page)
    assert shown and text == cell.get_attribute("data-source") and inside(box, 1280, 800)
    expect(cell.locator("a")).to_have_attribute("aria-describedby", "fig-pop")
    page.keyboard.press("Escape")
    assert popover(page)[0] is False
    expect(cell.locator("a")).not_to_have_attribute("aria-describedby", "fig-pop")
    # a derived figure has no link, and shows its source on hover too
    derived = page.locator("article.chapter .fig.derived").first
    derived.scroll_into_view_if_needed()
    page.wait_for_timeout(100)
    derived.hover()
    shown, text, _ = popover(page)
    assert shown and text.startswith("derived by pylib at build time: ")


def test_on_a_touch_screen_the_first_tap_shows_a_figures_source_and_the_second_follows_its_link(browser, site_url):
    context = browser.new_context(viewport={"width": 360, "height": 740}, has_touch=True, is_mobile=True,
                                  service_workers="block")
    page = context.new_page()
    try:
        page.goto(site_url + CH6, wait_until="domcontentloaded")
        assert page.evaluate("matchMedia('(hover: none)').matches")
        figure = page.locator("table .fig-quiet .fig.measured").nth(5)
        href = figure.locator("a").get_attribute("href")
        url = page.url
        figure.scroll_into_view_if_needed()
        page.wait_for_timeout(100)
        figure.tap()
        shown, text, box = popover(page)
        assert page.url == url and shown and text == figure.get_attribute("data-source")
        assert inside(box, 360, 740), box
        assert page.evaluate("document.documentElement.scrollWidth") <= 360  # nothing scrolls sideways
        page.locator("main h1").first.tap()
        assert popover(page)[0] is False
        figure.tap()
        assert popover(page)[0] is True and page.url == url
        figure.tap()
        expect(page).to_have_url(re.compile(re.escape(href.split("/")[-1]) + "$"))
    finally:
        context.close()
