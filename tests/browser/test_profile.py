"""The returning reader's profile that most browser tests open their pages in (conftest.py,
open_reader_page): each page starts with none of the storage an earlier page left (the theme
choice, exercise progress, saved edits), as a first visit would; the compiled code and Python's
snapshot stay; and a page opened beside another of the profile's pages gets a context of its own."""

from conftest import close_page, new_reader_page, open_reader_page

LEAVE = """() => {
  localStorage.setItem("course-theme", "dark");
  localStorage.setItem("left-by-an-earlier-page", "1");
  sessionStorage.setItem("left-by-an-earlier-page", "1");
  document.cookie = "left=1; path=/";
  return new Promise((done) => {
    const open = indexedDB.open("left-by-an-earlier-page", 1);
    open.onupgradeneeded = () => open.result.createObjectStore("s");
    open.onsuccess = () => { open.result.close(); done(true); };
  });
}"""

FOUND = """async () => ({
  local: localStorage.length, session: sessionStorage.length, cookie: document.cookie,
  databases: (await indexedDB.databases()).map((d) => d.name),
  theme: document.documentElement.dataset.theme,
})"""


def test_a_page_starts_with_none_of_the_storage_an_earlier_page_left(reader_profile, browser, site_url):
    first = open_reader_page(reader_profile, browser, site_url + "glossary.html", color_scheme="light")
    assert not first.own_context  # the profile's own page
    first.evaluate(LEAVE)
    assert first.evaluate(FOUND)["local"] == 2
    close_page(first)

    second = open_reader_page(reader_profile, browser, site_url + "glossary.html", color_scheme="light")
    assert not second.own_context
    assert second.evaluate(FOUND) == {"local": 0, "session": 0, "cookie": "", "databases": [], "theme": "light"}
    close_page(second)


def test_a_page_opened_beside_another_of_the_profiles_pages_gets_its_own_context(reader_profile, browser, site_url):
    first = open_reader_page(reader_profile, browser, site_url + "glossary.html")
    first.evaluate(LEAVE)
    beside = new_reader_page(reader_profile, browser, site_url, viewport={"width": 400, "height": 600})
    try:
        assert beside.own_context and beside.context is not reader_profile
        beside.goto(site_url + "glossary.html")
        assert beside.evaluate(FOUND)["local"] == 0
        assert beside.viewport_size == {"width": 400, "height": 600}
        assert first.evaluate(FOUND)["local"] == 2  # the open page's storage is left alone
    finally:
        close_page(beside)
        close_page(first)
    assert not reader_profile.pages
