"""Finding one's way, in a real browser: each chapter's contents (a sticky sidebar on a wide screen, a
collapsed list on a phone), the "#" link beside every section heading, prev/next above and below the
text, the site search (MiniSearch over the build's index) served under a subpath and driven by the
keyboard, the results page that every measured figure links to, and the compact live run at the top
of chapter 1 and of the index. Every page here fails its test on a console error or a request that
leaves 127.0.0.1."""

import json
import re
import urllib.parse

import pytest
from playwright.sync_api import expect

import build
from conftest import SITE, chapter_url, close_page, new_reader_page, open_reader_page, page_facts
from kit_checks import screenshot_widget

WIDE = {"width": 1280, "height": 800}
PHONE = {"width": 360, "height": 780}
RUN_TIMEOUT = 240_000  # ms: the default 400-step run takes ~20-40 s in the page on a quiet machine


OPENED = []  # this test's pages (open_page), closed after it even when it fails


@pytest.fixture(autouse=True)
def _close_what_a_test_opened():
    """A test that fails before close_clean would leave its page open in the returning reader's
    profile, and the next test of this process would get a fresh context instead of the profile."""
    yield
    while OPENED:
        page = OPENED.pop()
        if not page.is_closed():
            close_page(page)


def open_page(reader_profile, browser, url, viewport=WIDE):
    """The page at url, in the returning reader's profile (conftest.open_reader_page)."""
    # a chapter's load starts Python: seconds on a busy 2-core machine
    page = open_reader_page(reader_profile, browser, url, viewport=viewport, timeout=120_000)
    OPENED.append(page)
    return page


def close_clean(page):
    problems = page.log.problems()
    close_page(page)
    assert not problems, "the page reported problems:\n" + "\n".join(problems)





SECTION_HEADINGS = "article.chapter > h2[id], article.chapter > h3[id]"


def chapter_path(prefix):
    return "chapters/" + sorted((SITE / "chapters").glob(f"{prefix}*.html"))[0].name


# ---------------------------------------------------------------------------
# Contents, heading links, prev/next


def test_the_contents_are_a_sticky_sidebar_on_a_wide_screen(reader_profile, browser, site_url):
    page = open_page(reader_profile, browser, chapter_url(site_url, "05-"))
    ids = page.eval_on_selector_all(SECTION_HEADINGS, "els => els.map(e => e.id)")
    assert len(ids) >= 5
    side = page.locator(".toc-side")
    expect(side).to_be_visible()
    expect(page.locator(".toc-top")).to_be_hidden()
    assert side.locator("a").evaluate_all("as => as.map(a => a.hash.slice(1))") == ids  # every section, in order
    box = side.bounding_box()
    text = page.locator("article.chapter").bounding_box()
    assert box["x"] >= text["x"] + text["width"], "the sidebar sits beside the text, not over it"
    assert box["x"] + box["width"] <= WIDE["width"]
    page.mouse.wheel(0, 6000)  # deep into the chapter: the sidebar is still on screen, and marks where we are
    # the wheel scrolls asynchronously, and the sidebar marks the section on the next frame after
    page.wait_for_function("window.scrollY >= 6000 || innerHeight + scrollY >= document.body.scrollHeight - 1")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))")
    box = side.bounding_box()
    assert 0 <= box["y"] < WIDE["height"] / 2
    current = side.locator('a[aria-current="location"]')
    expect(current).to_have_count(1)
    target = page.locator(f"[id='{current.get_attribute('href')[1:]}']")
    assert target.bounding_box()["y"] <= 200  # the marked section is the one at the top of the screen
    side.locator("a").nth(2).click()
    expect(page).to_have_url(re.compile(f"#{re.escape(ids[2])}$"))
    close_clean(page)


def test_the_contents_are_a_collapsed_list_at_the_top_on_a_phone(reader_profile, browser, site_url):
    page = open_page(reader_profile, browser, chapter_url(site_url, "03-"), viewport=PHONE)
    expect(page.locator(".toc-side")).to_be_hidden()
    details = page.locator(".toc-top details")
    expect(details).to_be_visible()
    assert details.evaluate("d => d.open") is False
    assert details.bounding_box()["y"] < PHONE["height"]  # on the first screen
    details.locator("summary").click()
    links = details.locator("a")
    n = page.locator(SECTION_HEADINGS).count()
    expect(links).to_have_count(n)
    expect(links.first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    close_clean(page)


def test_every_section_heading_has_a_link_to_itself_shown_on_hover_and_keyboard_focus(reader_profile, browser, site_url):
    page = open_page(reader_profile, browser, chapter_url(site_url, "01-"))
    headings = page.locator(SECTION_HEADINGS)
    assert headings.count() >= 10
    for i in range(headings.count()):
        h = headings.nth(i)
        link = h.locator("a.heading-anchor")
        expect(link).to_have_count(1)
        assert link.get_attribute("href") == "#" + h.get_attribute("id")
        expect(link).to_have_accessible_name(re.compile(r"^Link to this section: \S"))
    anchor = headings.nth(1).locator("a.heading-anchor")
    opacity = "el => getComputedStyle(el).opacity"
    assert anchor.evaluate(opacity) == "0"
    headings.nth(1).hover()
    assert anchor.evaluate(opacity) == "1"
    page.mouse.move(0, 0)
    # By keyboard alone: Tab until a heading link has focus. Read in batches (a round trip each) rather
    # than after every press: a listener marks the first heading link that takes focus and holds the
    # focus there (the batch's further Tabs do nothing), then goes.
    page.evaluate("""() => {
        const held = (e) => { if (e.key === "Tab" && window.__anchorFocused) e.preventDefault(); };
        const mark = (e) => { if (e.target.classList?.contains("heading-anchor")) window.__anchorFocused = true; };
        window.__anchorFocused = false;
        window.__anchorListeners = [held, mark];
        document.addEventListener("keydown", held, true);
        document.addEventListener("focusin", mark, true);
    }""")
    for _ in range(400 // 8):
        for _ in range(8):
            page.keyboard.press("Tab")
        if page.evaluate("window.__anchorFocused"):
            break
    page.evaluate("""() => {
        const [held, mark] = window.__anchorListeners;
        document.removeEventListener("keydown", held, true);
        document.removeEventListener("focusin", mark, true);
    }""")
    focused = page.locator("a.heading-anchor:focus")
    expect(focused).to_have_count(1)
    assert focused.evaluate(opacity) == "1"
    href = focused.get_attribute("href")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(re.escape(href) + "$"))
    close_clean(page)


def test_prev_and_next_links_are_above_the_text_as_well_as_below(reader_profile, browser, site_url):
    page = open_page(reader_profile, browser, chapter_url(site_url, "02-"))
    for where in ("top", "bottom"):
        nav = page.locator(f".prev-next-{where}")
        expect(nav.locator("a[rel=prev]")).to_have_attribute("href", re.compile(r"01-[^/]+\.html$"))
        expect(nav.locator("a[rel=next]")).to_have_attribute("href", re.compile(r"03-[^/]+\.html$"))
    top = page.locator(".prev-next-top").bounding_box()
    assert top["y"] < page.locator("article.chapter h1").bounding_box()["y"]
    page.locator(".prev-next-top a[rel=next]").click()
    expect(page.locator("article.chapter")).to_have_attribute("data-chapter", re.compile("^03-"))
    close_clean(page)


# ---------------------------------------------------------------------------
# Search


def search(page, text):
    field = page.locator("#site-search-input")
    field.fill(text)
    status = page.locator('[data-role="search-status"]')
    expect(status).not_to_have_text(re.compile(r"^$|Loading"), timeout=30_000)
    return status


def test_search_finds_a_section_and_the_keyboard_takes_the_reader_there_under_a_subpath(reader_profile, browser, subpath_url):
    page = open_page(reader_profile, browser, subpath_url + chapter_path("03-"))
    status = search(page, "AdamW bias correction")
    expect(status).to_have_text(re.compile(r"^\d+ results? for “AdamW bias correction”"))
    results = page.locator(".site-search-result")
    assert results.count() >= 2
    wheres = results.locator(".site-search-where").all_text_contents()
    hrefs = results.evaluate_all("as => as.map(a => a.href)")
    # the first section of a chapter (a chapter's opening text links to the page itself)
    k = next(i for i, (w, h) in enumerate(zip(wheres, hrefs)) if re.match(r"Chapter \d+: ", w) and "#" in h)
    section = results.nth(k)
    expect(section.locator(".site-search-heading")).not_to_have_text("")
    assert section.locator("mark").count() >= 1  # the matched words, marked
    href = section.get_attribute("href")
    assert href.startswith(subpath_url) and "#" in href  # under the subpath, to the section itself
    page.locator("#site-search-input").press("ArrowDown")
    assert page.evaluate("document.activeElement.href") == results.first.get_attribute("href")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    for _ in range(k):
        page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.href") == href
    page.keyboard.press("Enter")
    expect(page).to_have_url(href)
    fragment = urllib.parse.unquote(href.split("#", 1)[1])
    expect(page.locator(f"[id='{fragment}']")).to_be_in_viewport()
    close_clean(page)


def test_search_with_tab_escape_and_a_click_elsewhere(reader_profile, browser, site_url):
    page = open_page(reader_profile, browser, site_url + "glossary.html")
    search(page, "warmup")
    panel = page.locator('[data-role="search-panel"]')
    expect(panel).to_be_visible()
    page.locator("#site-search-input").press("Tab")  # plain Tab walks into the results
    assert page.evaluate("document.activeElement.classList.contains('site-search-result')")
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    assert page.evaluate("document.activeElement.id") == "site-search-input"
    page.locator("#site-search-input").press("ArrowDown")  # the results come back with the keyboard
    expect(panel).to_be_visible()
    page.mouse.click(5, 700)
    expect(panel).to_be_hidden()
    close_clean(page)


# Queries a reader might paste, and the status each must give (None: any status but an error)
ODD_QUERIES = [
    ("<img src=x onerror=alert(1)><b class=injected>bold</b>", None),
    ("🙂🙂 🚀", r"^No results for “🙂🙂 🚀”\.$"),
    ("zzqxj vvkpw", r"^No results for “zzqxj vvkpw”\.$"),
    ("loss " * 4000, None),  # a huge paste: cut to the field's 200 characters and 12 words
    ("\"'`;--)(*&^%$#@![]{}\\", None),
]


def test_search_takes_any_query_without_breaking_or_injecting_markup_and_covers_the_glossary(reader_profile, browser, subpath_url):
    """On the index (served under a subpath), each odd query in turn: it is answered (a status, not
    an error; the expected one where there is one), no markup from it becomes an element, emptying
    the field closes the results and a plain query still searches afterwards. Then a glossary term is
    found, linked under the subpath, and Enter opens the first result."""
    page = open_page(reader_profile, browser, subpath_url + "index.html")
    field = page.locator("#site-search-input")
    status = page.locator('[data-role="search-status"]')
    panel = page.locator('[data-role="search-panel"]')
    for query, expected in ODD_QUERIES:
        case = repr(query[:40])
        field.evaluate("(el, q) => { el.value = q; el.dispatchEvent(new Event('input')); }", query)  # as a paste would
        expect(status, case).not_to_have_text(re.compile(r"^$|Loading"), timeout=30_000)
        if expected:
            expect(status, case).to_have_text(re.compile(expected))
        assert page.locator(".site-search-panel img, .site-search-panel b, .site-search-panel script").count() == 0, case
        assert "could not" not in status.text_content(), case
        field.fill("")  # empty: the results close
        expect(panel, case).to_be_hidden()
        field.fill("gradient")  # and it still searches
        expect(status, case).to_have_text(re.compile(r"^\d+ results? for “gradient”"))
        field.fill("")
        expect(panel, case).to_be_hidden()
    search(page, "perplexity")
    glossary = page.locator(".site-search-result", has=page.locator(".site-search-where", has_text="Glossary"))
    expect(glossary.first).to_have_attribute("href", subpath_url + "glossary.html#term-perplexity")
    first = page.locator(".site-search-result").first.get_attribute("href")
    page.locator("#site-search-input").press("Enter")
    expect(page).to_have_url(first)
    close_clean(page)


def test_search_says_so_when_its_index_cannot_load(browser, site_url):
    context = browser.new_context(viewport=WIDE, service_workers="block")
    page = context.new_page()
    page.route("**/search-index.json", lambda route: route.fulfill(status=404, body="not here"))
    page.goto(site_url + "index.html")
    search(page, "adam")
    expect(page.locator('[data-role="search-status"]')).to_have_text(
        "Search could not start: the search index could not be fetched (HTTP 404).")
    context.close()


def test_without_javascript_the_search_box_is_not_shown(browser, site_url):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(site_url + "index.html")
    expect(page.locator(".site-search")).to_be_hidden()
    expect(page.locator(".site-header a[href$='results.html']")).to_be_visible()
    context.close()


# ---------------------------------------------------------------------------
# The results page


def test_every_measured_figure_links_to_its_row_on_the_results_page(reader_profile, browser, site_url):
    page = open_page(reader_profile, browser, site_url + "results.html")
    ids = set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)"))
    assert any(i.startswith("key-") for i in ids)
    missing, count, in_widgets = [], 0, 0
    pages = ["glossary.html"] + [f"chapters/{p.name}" for p in sorted((SITE / "chapters").glob("*.html"))]
    for path in pages:
        # every measured figure, a widget's too (a widget quotes a key with the chapter's helpers,
        # fig.measured_pm(...)); only a widget's label naming a whole family, curves or keys with a *,
        # has no single row. The pages are parsed as built, not run (page_facts).
        for title, href, in_widget in page_facts(page, site_url + path)["figures"]:
            if in_widget and re.search(r"curves|curve |\*", title):
                continue
            count += 1
            in_widgets += in_widget
            if not href or "#" not in href:
                missing.append(f"{path}: {title}: no link")
            elif href.split("#")[0] not in ("../results.html", "results.html") or href.split("#")[1] not in ids:
                missing.append(f"{path}: {title}: {href}")
    assert count > 1000 and in_widgets >= 10  # chapter 2's mixture table: 5 weights x 2 sources
    assert not missing, "\n".join(missing[:20])
    close_clean(page)


def test_a_figure_lands_on_its_row_with_its_value(reader_profile, browser, site_url):
    page = open_page(reader_profile, browser, chapter_url(site_url, "01-"))
    title = "measured: results.json keys ch1.default.final_val.mean, ch1.default.final_val.sd (3 seeds, sample sd)"
    figure = page.locator(f'.fig.measured[data-source="{title}"]').first
    text = figure.locator("a.fig-link").text_content()
    # Follow the link from the keyboard: a click aims at coordinates, and a widget or an exercise
    # mounting further up the page can move the figure between aim and click (a full run saw it)
    figure.locator("a.fig-link").focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/results\.html#key-ch1\.default\.final_val$"))
    row = page.locator("[id='key-ch1.default.final_val']")
    expect(row).to_be_in_viewport()
    assert text.split(" ± ")[0][:4] in row.text_content()  # 2.521 ± … in the chapter, 2.5213 ± … in the row
    assert "ch1.default.final_val" in row.text_content()
    close_clean(page)


def test_a_figure_whose_row_is_in_a_folded_table_opens_it(reader_profile, browser, site_url):
    """A key with no row in a chapter's summary has its row in the chapter's folded table of every
    value: a link to it opens that table and shows the row (results.js)."""
    from builder import results_page
    results = json.loads(build.RESULTS_JSON.read_text())
    data = results_page.page(results, build.RESULTS_MD.read_text())
    key = next(row["key"] for s in data["sections"] if s["chapter"] == 5 and s["table"]
               for row in s["table"]["rows"] if row["id"])
    page = open_page(reader_profile, browser, site_url + "results.html#key-" + key)
    row = page.locator(f"[id='key-{key}']")
    expect(row).to_be_in_viewport()
    assert row.evaluate("el => el.closest('details').open")
    assert page.locator("details.results-values-box[open]").count() == 1  # only that one
    close_clean(page)


def test_the_results_page_is_one_section_per_chapter_with_a_filter(reader_profile, browser, site_url):
    page = open_page(reader_profile, browser, site_url + "results.html")
    sections = page.locator(".results-chapter[data-chapter]")
    expect(sections).to_have_count(16)
    expect(page.locator("#how-to-read")).to_be_visible()
    assert page.locator("details.results-values-box[open]").count() == 0  # every value: folded
    # a height a reader can scroll: the tables of every value (thousands of rows) are folded
    assert page.evaluate("document.documentElement.scrollHeight") < 60_000
    text, chapter, count = (page.locator(f'[data-role="filter-{r}"]') for r in ("text", "chapter", "count"))
    text.fill("ch6.noise")
    expect(count).to_have_text(re.compile(r"^[1-9]\d* rows? match\.$"))
    shown = page.locator(".results-chapter:not([hidden])")
    assert shown.count() >= 1 and all(s.get_attribute("data-chapter") in ("6", None) for s in shown.all())
    rows = page.locator(".results-page tbody tr:not([hidden])")
    assert rows.count() >= 1 and all("ch6.noise" in r.text_content() for r in rows.all())
    assert page.locator(".results-chapter[data-chapter='6'] details[open]").count() == 1
    text.fill("")
    chapter.select_option("14")
    expect(count).to_have_text(re.compile(r"^[1-9][\d,]* rows? match\.$"))
    assert [s.get_attribute("data-chapter") for s in page.locator(".results-chapter:not([hidden])").all()] == ["14"]
    text.fill("<img src=x onerror=alert(1)> 🙂" * 50)  # nonsense: no row, no markup, nothing breaks
    expect(count).to_have_text("0 rows match.")
    assert page.locator("img[src=x]").count() == 0
    chapter.select_option("")
    text.fill("")
    expect(count).to_have_text("")
    assert page.locator(".results-chapter[hidden]").count() == 0
    close_clean(page)


def test_the_results_page_lists_every_key_of_results_json_once(reader_profile, browser, site_url):
    values = json.loads((build.RESULTS_JSON).read_text())["values"]
    page = open_page(reader_profile, browser, site_url + "results.html")
    ids = page.eval_on_selector_all("[id^='key-']", "els => els.map(e => e.id)")
    assert len(ids) == len(set(ids))
    from builder import results_page
    expected = {"key-" + results_page.base_key(k, values) for k in values}
    assert expected <= set(ids)
    expect(page.locator("h1")).to_have_text("Results")
    expect(page.locator(".toc-side")).to_be_visible()
    close_clean(page)


# ---------------------------------------------------------------------------
# The compact live run


def live_run_is_on_the_first_screen_and_idle(page):
    """Start is enabled, and on the first screen on a wide screen, then on a phone (the same page,
    narrowed; it is left narrowed); nothing trains until it is pressed; nothing scrolls sideways.
    Returns the widget."""
    w = page.locator('[data-widget="mini-train"]')
    start = w.locator('[data-action="run"]')
    expect(start).to_be_enabled(timeout=120_000)
    expect(w).to_have_attribute("data-status", "ready")
    page.wait_for_timeout(1500)  # nothing trains on its own
    expect(w).to_have_attribute("data-status", "ready")
    expect(w.locator('[data-readout="step"]')).to_have_text("–")
    for viewport in (WIDE, PHONE):
        page.set_viewport_size(viewport)
        box = start.bounding_box()
        assert box["y"] + box["height"] <= viewport["height"], viewport
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"], viewport
    return w


FRAME_STATE = """async (start) => {
  const t0 = performance.now();
  const frame = await Promise.race([new Promise((r) => requestAnimationFrame(() => r(performance.now() - t0))),
                                    new Promise((r) => setTimeout(() => r(null), 2000))]);
  const box = start.getBoundingClientRect();
  return {disabled: start.disabled, box: [box.x, box.y, box.width, box.height], scrollY,
          viewport: [innerWidth, innerHeight], python: document.documentElement.dataset.pyodide,
          status: start.closest("[data-widget]").dataset.status, frame_ms: frame,
          hidden_by: document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2)?.outerHTML.slice(0, 120)};
}"""


def press_start(page, w):
    """Click the live run's Start; if it cannot be clicked, fail with what the page showed (a CI run
    once timed out here after 30 s, waiting for Start to be visible, enabled and stable)."""
    start = w.locator('[data-action="run"]')
    try:
        start.click(timeout=30_000)
    except Exception as e:
        state = start.evaluate(FRAME_STATE)
        raise AssertionError(f"Start could not be clicked: {state}\nconsole:\n" + "\n".join(page.log.console)) from e


# The samples as the loss falls: every change of the live sample box, as the page shows it, recorded in
# the page (window.liveSamples) with the widget's status at that moment
WATCH_SAMPLES = """(w) => {
  const box = w.querySelector('[data-role="sample-live"]');
  window.liveSamples = [];
  new MutationObserver(() => {
    if (!box.dataset.step) return;
    const seen = window.liveSamples, last = seen[seen.length - 1];
    const now = {step: Number(box.dataset.step), text: box.textContent, status: w.dataset.status,
                 at: w.querySelector('[data-role="sample-at"]').textContent, elements: box.children.length};
    if (!last || last.step !== now.step || last.text !== now.text) seen.push(now);
  }).observe(box, {childList: true, characterData: true, subtree: true, attributes: true});
}"""

# the id of "e" shown as "<b>e</b>": the same ids, so the same run, but every "e" the model writes is markup
RELABEL = {"e": "<b>e</b>"}


def open_index_with_markup_in_its_vocabulary(reader_profile, browser, site_url):
    """The index, its vocabulary (data/vocab.json) relabelled by RELABEL on its way to the page: each "e"
    the model writes reaches the page as "<b>e</b>", which must stay text."""
    url = site_url + "index.html"
    page = new_reader_page(reader_profile, browser, url, viewport=WIDE)
    OPENED.append(page)

    def relabel(route):
        vocab = json.loads(route.fetch().text())
        assert not {"<", ">"} & set(vocab["chars"])
        vocab["chars"] = [RELABEL.get(c, c) for c in vocab["chars"]]
        route.fulfill(status=200, content_type="application/json", body=json.dumps(vocab))

    page.route("**/data/vocab.json", relabel)
    page.goto(url, timeout=120_000)
    return page


def samples_fell_with_the_loss_and_stayed_text(page, w):
    """After a default run watched with WATCH_SAMPLES: at least two different samples were shown while
    it trained, at increasing steps, each with its step and validation loss; the last, at the last
    step, is the "after" sample; "<b>" the model wrote is text in both boxes, never an element; the
    reader steps back and forth through the samples with the keyboard."""
    seen = page.evaluate("window.liveSamples")
    print("live samples:", [(x["step"], x["status"], x["text"][:40]) for x in seen])
    during = [x for x in seen if x["status"] == "running"]
    assert len({x["text"] for x in during}) >= 2 and len(during) >= 2
    steps = [x["step"] for x in during]
    assert steps == sorted(set(steps)) and steps[-1] == 400, steps
    assert all(re.fullmatch(r"Step \d+ of 400: validation loss \d\.\d{3} on the 128 fixed validation windows \(as the chart's dots\)", x["at"])
               for x in during), [x["at"] for x in during]
    assert all(x["elements"] == 0 for x in seen)
    live, after = w.locator('[data-role="sample-live"]'), w.locator('[data-role="sample"]')
    assert during[-1]["text"] == after.text_content() == live.text_content()
    for box in (live, after):  # the markup is characters on the page, never an element
        assert "<b>e</b>" in box.text_content()
        assert box.evaluate("el => el.children.length") == 0
        assert "<b>" not in box.inner_html() and "&lt;b&gt;e&lt;/b&gt;" in box.inner_html()
    # after the run: Earlier and Later step through them (real buttons, from the keyboard)
    position = w.locator('[data-role="sample-position"]')
    expect(position).to_have_text(f"Sample {len(during)} of {len(during)}")
    later, earlier = w.locator('[data-action="sample-later"]'), w.locator('[data-action="sample-earlier"]')
    expect(later).to_be_disabled()
    earlier.focus()
    page.keyboard.press("Enter")
    expect(position).to_have_text(f"Sample {len(during) - 1} of {len(during)}")
    expect(live).to_have_attribute("data-step", str(steps[-2]))
    assert live.text_content() == during[-2]["text"]
    later.focus()
    page.keyboard.press("Space")
    expect(live).to_have_attribute("data-step", "400")
    assert w.locator('[data-role="sample-live"][aria-live], [data-role="samples-live"] [aria-live]').count() == 0


def the_link_to_the_full_widget_lands_on_its_section(page, w):
    """On a phone: the live run's link to the full widget lands on its section of chapter 1, which
    holds the full widget, and nothing scrolls sideways there."""
    page.set_viewport_size(PHONE)
    link = w.locator(".mini-train-more a")
    href = link.get_attribute("href")
    assert href.endswith("#run-it")
    link.click()  # from the index, this opens chapter 1: a page load, seconds on a busy machine
    page.wait_for_url(re.compile(r"#run-it$"), wait_until="domcontentloaded", timeout=120_000)
    expect(page.locator("#run-it")).to_be_in_viewport(timeout=30_000)
    assert page.locator("#run-it ~ [data-widget='train']").count() == 1  # the full widget is in that section
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_the_live_run_on_the_index_is_idle_until_start_trains_the_model_and_links_to_chapter_1(reader_profile, browser, site_url):
    """The index's live run: on the first screen and idle until Start (live_run_is_on_the_first_screen_and_idle);
    Start trains the default 400 steps inside the measured band and says which loss it shows; then
    its link opens chapter 1 at the full widget's section. As it trains, it shows samples of what the model
    writes (samples_fell_with_the_loss_and_stayed_text; the vocabulary relabelled so that they hold markup)."""
    page = open_index_with_markup_in_its_vocabulary(reader_profile, browser, site_url)
    w = live_run_is_on_the_first_screen_and_idle(page)
    # Python too waits for Start (issue 26: the index loaded Pyodide and NumPy before any click while
    # saying that nothing runs): no worker, no request for Pyodide, no Python state on the page
    page.mouse.move(200, 300)
    w.hover()
    page.wait_for_timeout(500)
    assert page.get_attribute("html", "data-pyodide") is None
    assert page.evaluate(r"performance.getEntriesByType('resource').filter(e => /\/(pyodide|wheels|data)\//.test(e.name)).length") == 0
    expect(w.locator(".mini-train-what")).to_contain_text("Nothing runs until you press it, not even Python")
    page.set_viewport_size(WIDE)
    expect(w.locator("figcaption").first).to_contain_text("128 fixed, evenly spaced windows of the held-out plays")
    w.evaluate(WATCH_SAMPLES)
    press_start(page, w)
    expect(w.locator('[data-role="message"]')).to_contain_text(re.compile("Loading Python and NumPy|Training"))
    expect(w).to_have_attribute("data-status", "running")
    expect(w.locator(".uplot canvas").first).to_be_visible(timeout=60_000)
    page.wait_for_function("el => ['done', 'error', 'stopped'].includes(el.dataset.status)",
                           arg=w.element_handle(), timeout=RUN_TIMEOUT)
    expect(w).to_have_attribute("data-status", "done")
    result = json.loads(w.get_attribute("data-result"))
    assert result["steps"] == 400 and not result["diverged"]
    assert result["outside_band"] is False  # the default run, seed 0: inside the measured band all along
    assert result["final_val_loss"] < 2.8  # well below the unigram loss (3.31 nats), the first plateau
    expect(w.locator('[data-role="message"]')).to_contain_text(
        f"validation loss {result['final_val_loss']:.3f} on the 128 fixed validation windows")
    expect(w.locator('[data-readout="step"]')).to_have_text("400 of 400")
    # the promise made visible: what the model writes before training (pylib's sample of the fresh
    # weights, taken at build time) beside what it writes after this run (the run's own sample)
    before, after = (w.locator(f'[data-role="{r}"]').text_content() for r in ("sample-before", "sample"))
    assert before == build.untrained_sample()
    assert after.strip() and after != before and "<" not in w.locator('[data-role="sample"]').inner_html()
    samples_fell_with_the_loss_and_stayed_text(page, w)
    screenshot_widget(w, "mini-train-samples")
    the_link_to_the_full_widget_lands_on_its_section(page, w)
    close_clean(page)


def test_the_live_run_in_chapter_1_is_idle_until_start_stops_when_asked_and_links_to_its_section(reader_profile, browser, site_url):
    """Chapter 1's live run: on the first screen and idle until Start; Stop stops a run (no result,
    Start enabled again); its link lands on the full widget's section of the same page."""
    page = open_page(reader_profile, browser, chapter_url(site_url, "01-"))
    w = live_run_is_on_the_first_screen_and_idle(page)
    page.set_viewport_size(WIDE)
    press_start(page, w)
    step = w.locator('[data-readout="step"]').element_handle()
    page.wait_for_function("el => /^[1-9]\\d* of 400$/.test(el.textContent)", arg=step, timeout=60_000)
    w.locator('[data-action="stop"]').click()
    page.wait_for_function("el => el.dataset.status === 'stopped'", arg=w.element_handle(), timeout=60_000)
    expect(w.locator('[data-role="message"]')).to_contain_text("Stopped at step")
    assert w.get_attribute("data-result") is None
    expect(w.locator('[data-action="run"]')).to_be_enabled()
    the_link_to_the_full_widget_lands_on_its_section(page, w)
    close_clean(page)
