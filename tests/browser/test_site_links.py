"""The glossary and the site's links in a real browser: a term's definition shows on hover and on
keyboard focus, every glossary link lands on a section or widget that exists, and the whole site
works when it is served under a subpath (every link and asset on every page resolves there)."""

import re
import urllib.parse

from playwright.sync_api import expect

import build
from conftest import page_facts


def test_a_terms_definition_shows_on_hover_and_on_focus(page, site_url):
    page.goto(f"{site_url}chapters/03-the-objective.html", wait_until="domcontentloaded")
    term = page.locator('a.gloss-term[href$="#term-perplexity"]').first
    definition = term.get_attribute("data-definition")
    assert definition.startswith("e^L: a model with loss L")
    after = "el => getComputedStyle(el, '::after').content"
    assert term.evaluate(after) in ("none", "normal", "")  # hidden until asked for
    page.keyboard.press("Tab")  # focus is by keyboard: move it onto the term
    for _ in range(200):
        if page.evaluate("document.activeElement && document.activeElement.matches('a.gloss-term[href$=\"#term-perplexity\"]')"):
            break
        page.keyboard.press("Tab")
    assert definition in term.evaluate(after)
    page.mouse.move(0, 0)
    term.hover()
    assert definition in term.evaluate(after)
    # Follow the link from the keyboard, where focus already is: a click aims at coordinates, and a
    # widget or exercise mounting further up the page can move the term between aim and click.
    term.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"glossary\.html#term-perplexity$"))
    expect(page.locator("#term-perplexity")).to_be_visible()


def test_on_a_touch_screen_the_first_tap_on_a_term_shows_it_and_the_second_follows_it(browser, site_url):
    """A phone has no hover, and a tap on a link follows it: there the first tap shows the term's
    sentence (inside the screen), a tap elsewhere hides it, and a second tap on the term opens its entry."""
    context = browser.new_context(viewport={"width": 360, "height": 780}, has_touch=True, is_mobile=True,
                                  service_workers="block")
    page = context.new_page()
    try:
        page.goto(f"{site_url}chapters/03-the-objective.html", wait_until="domcontentloaded")
        assert page.evaluate("matchMedia('(hover: none)').matches")
        term = page.locator('a.gloss-term[href$="#term-perplexity"]').first
        definition = term.get_attribute("data-definition")
        after = "el => getComputedStyle(el, '::after').content"
        url = page.url
        term.scroll_into_view_if_needed()
        term.tap()
        assert page.url == url and definition in term.evaluate(after)
        box = term.evaluate("""el => { const r = el.getBoundingClientRect(), s = getComputedStyle(el, '::after');
            return [r.left + parseFloat(s.left), parseFloat(s.width)]; }""")
        assert box[0] >= 0 and box[0] + box[1] <= 360, box  # the sentence is inside the screen
        page.locator("main h1").first.tap()
        assert term.evaluate(after) in ("none", "normal", "")
        term.tap()
        assert definition in term.evaluate(after)
        term.tap()
        expect(page).to_have_url(re.compile(r"glossary\.html#term-perplexity$"))
    finally:
        context.close()


def test_every_glossary_link_lands_on_what_it_names(page, site_url):
    page.goto(f"{site_url}glossary.html", wait_until="domcontentloaded")
    glossary = page_facts(page, f"{site_url}glossary.html")
    hrefs = glossary["glossary_where"]
    assert len(hrefs) >= 2 * glossary["glossary_entries"]  # a section and a widget each
    by_page = {}
    for href in hrefs:
        url, _, fragment = href.partition("#")
        by_page.setdefault(url, set()).add(urllib.parse.unquote(fragment))
    for url, fragments in by_page.items():
        ids = page_facts(page, url)["ids"]
        for fragment in fragments:
            assert ids.count(fragment) == 1, f"{url}#{fragment}"


def test_every_link_and_asset_resolves_when_served_under_a_subpath(page, subpath_url):
    """Every page's links and assets, as the build wrote them, resolve under /course/ (the pages are
    parsed by Chromium, not run: page_facts); the index is also opened for real."""
    pages = [subpath_url + "index.html", subpath_url + "glossary.html", subpath_url + "troubleshooting.html"]
    pages += [f"{subpath_url}chapters/{c.slug}.html" for c in build.find_chapters()]
    checked, missing = {}, []
    ids = {}
    links = set()
    response = page.goto(pages[0], wait_until="domcontentloaded")
    assert response.status == 200, pages[0]
    for url in pages:
        facts = page_facts(page, url)
        assert facts["status"] == 200, url
        ids[url] = set(facts["ids"])
        for target in facts["links"]["a"] + facts["links"]["link"] + facts["links"]["script"]:
            if target.startswith("http://127.0.0.1"):
                links.add((url, target))
            else:
                assert target.startswith(("data:", "mailto:", "https://", "http://")), target
    for source, target in sorted(links):
        resource, _, fragment = target.partition("#")
        fragment = urllib.parse.unquote(fragment)
        assert resource.startswith(subpath_url), f"{source} links off the site's folder: {target}"
        if resource not in checked:
            checked[resource] = page.request.get(resource).status
        if checked[resource] != 200:
            missing.append(f"{source} -> {target}: {checked[resource]}")
        elif fragment and resource in ids and fragment not in ids[resource]:
            missing.append(f"{source} -> {target}: no element with that id")
    assert not missing, "\n".join(missing)
    assert len(checked) > len(pages)


def test_enter_in_a_widget_field_never_reloads_the_page_even_when_its_code_cannot_load(browser, site_url):
    """The NaN-sources form has one text field and no submit button, so Enter submits it (HTML's
    implicit submission) unless the page stops it; with the widget's module and Python both failing
    to load, no widget code ever runs, and main.js must stop it."""
    context = browser.new_context(service_workers="block")  # page.route does not see what a service worker serves
    page = context.new_page()
    page.route("**/pyodide/**", lambda route: route.abort())
    page.route("**/static/js/widgets/nan-sources.js", lambda route: route.abort())
    page.goto(site_url + "chapters/08-stability.html")
    page.evaluate("window.__marker = 'still here'")
    field = page.locator('[data-widget="nan-sources"] input[name="logit"]')
    field.fill("0.5")
    field.press("Enter")
    page.wait_for_timeout(500)
    assert page.evaluate("window.__marker") == "still here"  # no navigation, nothing typed lost
    assert field.input_value() == "0.5"
    context.close()


def test_without_javascript_the_page_says_why_nothing_runs(browser, site_url):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(site_url + "chapters/01-the-training-loop.html")
    expect(page.locator("noscript").first).to_be_attached()
    assert "JavaScript is off" in page.content()
    context.close()


def test_the_chapter_list_is_open_on_a_wide_screen(page, site_url):
    page.set_viewport_size({"width": 1100, "height": 800})
    page.goto(site_url + "chapters/03-the-objective.html", wait_until="domcontentloaded")
    expect(page.locator(".chapter-nav-list li")).to_have_count(len(build.find_chapters()))
    expect(page.locator(".chapter-nav-list li").first).to_be_visible()
    expect(page.locator(".chapter-nav-list summary")).to_be_hidden()
