"""Offline after one visit, in a real browser: the service worker (sw.js, written by builder/offline.py)
saves the whole built site under a cache named by the build's version; with the server stopped,
another chapter opens and trains from that copy. A rebuilt site (another version) replaces the
copy and deletes the old cache; a file that does not match its build is never saved. The pages are
served under /course/, by a plain static server (no compression, no headers) for the offline test,
so the cross-origin-isolation headers the page ends up with come from the service worker."""

import functools
import http.server
import json
import re
import shutil
import threading
import urllib.parse
import urllib.request

import pytest
from playwright.sync_api import expect

import build
from builder import offline
from conftest import SITE, PageLog, corpus, wait_until

PREFIX = "/course/"
SAVE_TIMEOUT = 300_000  # ms: saving the whole site (about 60 MB unpacked) on a busy 2-core machine
RUN_TIMEOUT = 180_000


def subpath_handler(base):
    class Handler(base):
        """The site under /course/ only; anything else is a 404, as on a shared host."""

        def translate_path(self, path):
            if not urllib.parse.urlsplit(path).path.startswith(PREFIX):
                return "/nonexistent" + path
            return super().translate_path("/" + path[len(PREFIX):])

        def log_message(self, *args):
            pass

    Handler.extensions_map = {**build.SiteHandler.extensions_map}
    return Handler


class PlainHandler(http.server.SimpleHTTPRequestHandler):
    """A static host that sends files as they are: no precompressed copies, no extra headers."""


class Server:
    def __init__(self, directory, base=build.SiteHandler):
        handler = functools.partial(subpath_handler(base), directory=str(directory))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}{PREFIX}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def wait_ready(page, log):
    """Wait for Python; on a timeout, fail with what the page showed and logged."""
    try:
        page.wait_for_selector("html[data-pyodide=ready]", timeout=RUN_TIMEOUT)
    except Exception:
        shown = page.evaluate("[document.documentElement.dataset.pyodide, document.documentElement.dataset.offline, "
                              "document.querySelector('[data-role=pyodide-status]').textContent, "
                              "document.querySelector('[data-role=page-error]').textContent]")
        pytest.fail(f"Python not ready: {shown}\n" + "\n".join(log.console), pytrace=False)


def manifest(directory):
    return json.loads((directory / offline.MANIFEST_NAME).read_text())


def wait_saved(page, version):
    """Wait until this page's build is saved and the service worker controls the page."""
    page.wait_for_function("v => document.documentElement.dataset.offline === 'ready' && "
                           "document.documentElement.dataset.offlineVersion === v && !!navigator.serviceWorker.controller",
                           arg=version, timeout=SAVE_TIMEOUT)


def cache_state(page):
    """{cache name: number of entries} of every cache the site's origin holds."""
    return page.evaluate("""async () => {
      const out = {};
      for (const name of await caches.keys()) out[name] = (await (await caches.open(name)).keys()).length;
      return out;
    }""")


def test_after_one_visit_every_page_opens_from_the_saved_copy_and_a_chapter_trains(browser):
    """One visit saves the site; with the server stopped, another chapter opens from the copy, restores
    Python's snapshot and trains as CPython does on the saved corpus; then every page of the site opens,
    with the service worker's isolation headers (Cross-Origin-Embedder-Policy: require-corp blocks
    nothing: every file is same-origin), no request fails, and Python starts on the index (when its
    Start is pressed) as on chapter 1. (One saved copy serves both: saving the whole site costs seconds of CPU.)"""
    site = manifest(SITE)
    server = Server(SITE, PlainHandler)
    context = browser.new_context()
    page = context.new_page()
    log = PageLog(page)
    try:
        # The first visit: chapter 14, whose widgets never read the corpus, so the page itself
        # never fetches data/train.bin: only the service worker's copy of the site holds it.
        page.goto(server.url + "chapters/" + next(p.name for p in (SITE / "chapters").glob("14-*.html")))
        wait_ready(page, log)
        assert page.evaluate("crossOriginIsolated") is False  # the plain server sends no headers
        wait_saved(page, site["version"])
        wait_until(page, "async () => (await caches.keys()).includes('course-python-snapshot')",
                   what="the worker keeps its snapshot (once Python is ready: worker.js)", timeout=60_000)
        caches = cache_state(page)
        # the site's files, and the worker's memory snapshot of the booted interpreter (worker.js)
        assert caches == {f"course-site:{PREFIX}:{site['version']}": len(site["files"]), "course-python-snapshot": 1}
        # the footer says so, with the copy's size (issue 26 §3: the reader is told, not saved on silently)
        expect(page.locator('[data-role="offline-text"]')).to_have_text(
            f"Saved in this browser for offline reading ({round(site['bytes'] / 1e6)} MB): every page and widget works without a network.")
        expect(page.locator('[data-action="offline-choice"]')).to_have_text("Remove the saved copy")
    finally:
        server.stop()
    with pytest.raises(OSError):  # the server is really gone
        urllib.request.urlopen(server.url + "index.html", timeout=5)

    # an address that is not in the copy: the copy's offline page, not the browser's error
    page.goto(server.url + "chapters/no-such-page.html")
    assert page.url == server.url + "offline.html"
    expect(page.locator("h1")).to_have_text("You are offline")
    chapter_links = page.locator(".offline-chapters a")
    assert chapter_links.count() == len(build.find_chapters())
    chapter_links.first.click()  # and its links open from the copy
    expect(page.locator("h1").first).to_contain_text(build.find_chapters()[0].title)

    page.goto(server.url + "chapters/" + next(p.name for p in (SITE / "chapters").glob("01-*.html")))
    wait_ready(page, log)
    assert page.evaluate("crossOriginIsolated") is True  # the service worker's headers
    assert page.evaluate("document.documentElement.dataset.pythonBoot") == "snapshot"  # offline too
    # The wheel's name has a "+" (its local version): the saved copy answers it written either way,
    # as the widgets' worker (+) and the editable cells (%2B, cells.js) ask for it.
    wheel = page.evaluate("document.documentElement.dataset.wheel")
    assert "+" in wheel
    sizes = page.evaluate("""async (names) => Promise.all(names.map(async (n) => {
      const r = await fetch('../' + n);
      return [r.status, (await r.arrayBuffer()).byteLength];
    }))""", [wheel, wheel.replace("+", "%2B")])
    assert sizes[0] == sizes[1] and sizes[0][0] == 200 and sizes[0][1] == (SITE / wheel).stat().st_size, sizes
    w = page.locator('[data-widget="train"]').first
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=RUN_TIMEOUT)
    settings = {"steps": 20, "seed": 1, "lr": 0.01, "batch_size": 8}
    for name, value in settings.items():
        w.locator(f'input[name="{name}"]').fill(str(value))
    w.locator('[data-action="run"]').click()
    page.wait_for_function("el => ['done', 'error', 'stopped'].includes(el.dataset.status)",
                           arg=w.element_handle(), timeout=RUN_TIMEOUT)
    assert w.get_attribute("data-status") == "done", w.locator('[data-role="message"]').text_content()
    r = json.loads(w.get_attribute("data-result"))
    # The same run in CPython on the built corpus: the page trained on the saved train.bin and val.bin.
    import dataclasses

    from pylib import model, train
    _, tr, va = corpus()
    _, history = train.train(model.GPTConfig(), dataclasses.replace(train.TrainConfig(), **settings), tr, va)
    assert r["steps"] == 20
    assert abs(r["final_train_loss"] - history[-1]["loss"]) < 1e-5
    assert not log.problems(), log.problems()

    failed = []
    # ERR_ABORTED: a request of the page left behind (its widgets were still loading the corpus)
    page.on("requestfailed", lambda request: request.failure == "net::ERR_ABORTED"
            or failed.append(f"{request.url}: {request.failure}"))
    pages = sorted(p for p in site["files"] if p.endswith(".html"))
    assert len(pages) >= 3 + len(build.find_chapters())
    for path in pages:
        page.goto(server.url + path, wait_until="load")
        assert page.evaluate("crossOriginIsolated") is True, path
        expect(page.locator("h1").first).to_be_visible()
        page.evaluate("document.fonts.ready")  # KaTeX's fonts, from the copy
        # Python starts from the copy on a page with widgets at the root (the index): its worker asks
        # for the same files as chapter 1's above, by other relative URLs. The other chapters sit where
        # chapter 1 does, so their workers ask for the very URLs that chapter 1's got from the copy
        # (waiting for each cost a Python start per chapter, about 3 s of CPU each).
        if "/" not in path and page.locator("[data-widget]").count():
            if page.get_attribute("html", "data-widgets") == "on-demand":  # the index: Python starts at Start
                page.locator('[data-widget] [data-action="run"]').first.click()
            wait_ready(page, log)
        assert not failed, (path, failed)
    assert not log.problems(), log.problems()
    context.close()


def test_the_reader_chooses_whether_the_browser_keeps_a_copy(browser):
    """Issue 26 §3: the footer's button declines the copy while it is being saved (the worker stops and
    deletes what it saved), the choice holds on the next visit (nothing registers), and the same button
    then saves it."""
    site = manifest(SITE)
    server = Server(SITE, PlainHandler)
    context = browser.new_context()
    page = context.new_page()
    log = PageLog(page)
    registrations = "async () => (await navigator.serviceWorker.getRegistrations()).length"
    copies = "async () => (await caches.keys()).filter((n) => n.startsWith('course-site:')).length"
    try:
        page.goto(server.url + "glossary.html")  # no widgets: the worker registers once the page has loaded
        page.wait_for_function("() => ['saving', 'ready'].includes(document.documentElement.dataset.offline)", timeout=60_000)
        button = page.locator('[data-action="offline-choice"]')
        expect(button).to_have_text(re.compile("Don't keep a copy|Remove the saved copy"))
        button.click()
        expect(page.locator("html")).to_have_attribute("data-offline", "declined")
        expect(page.locator('[data-role="offline-text"]')).to_have_text(
            "Not saved for offline reading: this browser keeps no copy of the course.")
        wait_until(page, f"async () => (await ({registrations})()) === 0 && (await ({copies})()) === 0",
                   what="the worker unregistered and the copy deleted", timeout=60_000)

        page.reload()
        expect(page.locator("html")).to_have_attribute("data-offline", "declined", timeout=60_000)
        assert page.evaluate(registrations) == 0 and page.evaluate(copies) == 0
        expect(button).to_have_text("Save it for offline reading")
        button.click()
        wait_saved(page, site["version"])
        assert cache_state(page)[f"course-site:{PREFIX}:{site['version']}"] == len(site["files"])
        expect(button).to_have_text("Remove the saved copy")
        assert not log.problems(), log.problems()
    finally:
        context.close()
        server.stop()


def copy_site(tmp_path):
    target = tmp_path / "site"
    shutil.copytree(SITE, target)
    return target


def test_a_rebuilt_site_replaces_the_saved_copy_and_deletes_the_old_cache(browser, tmp_path):
    site = copy_site(tmp_path)
    first = manifest(site)
    server = Server(site)
    context = browser.new_context()
    page = context.new_page()
    log = PageLog(page)
    glossary = server.url + "glossary.html"
    try:
        page.goto(glossary)
        wait_saved(page, first["version"])
        assert set(cache_state(page)) == {f"course-site:{PREFIX}:{first['version']}"}

        # A new build: one stylesheet changes; offline.finish (the build's last step) gives a new version.
        css = site / "static" / "css" / "status.css"
        css.write_text(css.read_text() + "\n/* rebuilt */\n")
        second = offline.finish(site)
        assert second["version"] != first["version"]

        page.goto(glossary)  # the visit sees the new sw.js, saves the new build and takes over
        wait_saved(page, second["version"])
        assert cache_state(page) == {f"course-site:{PREFIX}:{second['version']}": len(second["files"])}
    finally:
        server.stop()
    text = page.evaluate("async () => (await fetch('static/css/status.css')).text()")  # from the new copy
    assert text.endswith("/* rebuilt */\n")
    page.goto(glossary)  # offline too
    expect(page.locator("h1")).to_be_visible()
    assert not log.problems(), log.problems()
    context.close()


def test_a_file_that_does_not_match_its_build_is_never_saved(browser, tmp_path):
    """The site changes under the service worker (a deploy half done): its install fails, nothing
    of that build is served, and the page says so with data-offline="error"."""
    site = copy_site(tmp_path)
    css = site / "static" / "css" / "status.css"
    for sibling in (".br", ".gz"):
        (site / f"static/css/status.css{sibling}").unlink(missing_ok=True)
    css.write_text(css.read_text() + "\n/* changed after the build */\n")
    server = Server(site)
    context = browser.new_context()
    page = context.new_page()
    try:
        log = PageLog(page)
        page.goto(server.url + "glossary.html")
        try:
            page.wait_for_function("document.documentElement.dataset.offline === 'error'", timeout=SAVE_TIMEOUT)
        except Exception:
            shown = page.evaluate("""async () => ({ offline: document.documentElement.dataset.offline ?? null,
              said: document.querySelector('[data-role="offline-text"]')?.textContent,
              workers: (await navigator.serviceWorker.getRegistrations()).map((r) => [r.installing?.state, r.waiting?.state, r.active?.state]),
              caches: await caches.keys() })""")
            pytest.fail(f"no data-offline=error: {shown}\n" + "\n".join(log.console), pytrace=False)
        assert page.evaluate("navigator.serviceWorker.getRegistration().then((r) => !!(r && r.active))") is False
        page.goto(server.url + "glossary.html")
        assert page.evaluate("!!navigator.serviceWorker.controller") is False
    finally:
        server.stop()
        context.close()
