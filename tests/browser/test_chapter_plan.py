"""A chapter a learner can plan around: the "What you will learn" box before the first section (what
it builds on, linked, and a reading time counted from the page's words), "Key takeaways" before the
exercises, the references at the end with the first citation in the text linking to its entry, and
the next chapter with why to read it; the last chapter says where to go after the course."""

import re

from playwright.sync_api import expect

from conftest import chapter_url


def test_a_chapter_opens_with_its_plan_and_ends_with_takeaways_references_and_the_next_chapter(page, site_url):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(chapter_url(site_url, "06-"), wait_until="domcontentloaded")
    box = page.locator("article.chapter > aside.chapter-plan")
    expect(box).to_have_count(1)
    expect(box.locator("#chapter-plan-title")).to_have_text("What you will learn")
    assert 3 <= box.locator("li").count() <= 4
    expect(box.locator(".chapter-plan-meta a").first).to_have_attribute("href", re.compile(r"^01-.*\.html$"))
    expect(box.locator(".chapter-plan-meta")).to_contain_text(re.compile(r"About \d+ minutes to read \([\d,]+ words at 200 a minute\)"))
    # the box is before the first section; takeaways come before the exercises, the references last
    order = page.evaluate("""() => [...document.querySelectorAll('article.chapter > aside.chapter-plan, article.chapter > h2')]
        .map(e => e.tagName === 'ASIDE' ? 'plan' : e.id)""")
    assert order[0] == "plan"
    assert order[-3:] == ["key-takeaways", "exercises", "references"], order
    toc = page.locator(".toc-side a")
    assert {"Key takeaways", "References"} <= set(toc.all_text_contents())
    assert 4 <= page.locator("#key-takeaways + ul > li").count() <= 6
    # the first citation of a reference in the text links to its entry, which links out
    cite = page.locator("a.ref-link").first
    target = cite.get_attribute("href")
    assert re.fullmatch(r"#ref-[a-z0-9-]+", target)
    entry = page.locator(f"li:has(> {target.replace('#', 'span#')})")
    expect(entry).to_have_count(1)
    expect(entry.locator("a")).to_have_attribute("href", re.compile(r"^https://"))
    cite.click()
    expect(page).to_have_url(re.compile(re.escape(target) + "$"))
    expect(entry).to_be_in_viewport()
    # the next chapter, and why to read it
    nxt = page.locator("article.chapter > aside.chapter-next")
    expect(nxt.locator("a").first).to_have_attribute("href", re.compile(r"07-.*\.html$"))
    expect(nxt.locator("a").first).to_contain_text("Chapter 7.")
    assert len(nxt.locator("p").last.text_content().split()) >= 8


def test_the_last_chapter_says_where_to_go_after_the_course(page, site_url):
    page.goto(chapter_url(site_url, "16-"), wait_until="domcontentloaded")
    nxt = page.locator("article.chapter > aside.chapter-next")
    expect(nxt.locator(".chapter-next-title")).to_have_text("Where to go from here")
    assert len(nxt.locator("p").last.text_content().split()) >= 8
    expect(page.locator("article.chapter > aside.chapter-plan .chapter-plan-meta a").first).to_be_visible()


def test_the_index_is_a_course_map_in_two_parts_each_chapter_with_its_summary_and_the_time_its_page_states(page, site_url):
    import build
    page.goto(site_url + "index.html", wait_until="domcontentloaded")
    parts = page.locator("section.course-part")
    expect(parts).to_have_count(2)
    expect(parts.nth(0).locator("h3")).to_have_text("Part 1. One device")
    items = page.locator(".course-map > li")
    expect(items).to_have_count(16)
    assert [parts.nth(i).locator(".course-map > li").count() for i in range(2)] == [10, 6]
    chapters = build.find_chapters()
    for i, chapter in enumerate(chapters):
        item = items.nth(i)
        expect(item.locator("a").first).to_have_text(chapter.title)
        assert item.locator(".course-summary").text_content() == build.load_plan(chapter, chapters).summary
        minutes = re.search(r"about (\d+) min", item.locator(".course-meta").text_content()).group(1)
        html = (build.OUT / "chapters" / f"{chapter.slug}.html").read_text()
        assert f"About {minutes} minutes to read" in html, chapter.slug
    # the exercises' tally sits beside the time (progress.js)
    expect(items.first.locator(".course-meta .exercise-tally")).to_have_text(re.compile(r" · \d+ exercises"))
