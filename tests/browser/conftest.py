"""Browser-test fixtures: Debian's Chromium, the built site served on 127.0.0.1, and one shared
chapter page per module (loading Pyodide costs seconds) that records console errors and any
request leaving 127.0.0.1. A test fails on either, and prints the page's console when it fails.
It also holds the helpers the chapters' browser tests share (widget, wait_settled, result,
no_injected_markup, corpus)."""

import functools
import http.server
import json
import os
import pathlib
import re
import threading
import time
import urllib.parse
import warnings

import pytest
from playwright.sync_api import Frame, Page, expect

import build

# expect() retries until its condition holds, so a longer limit costs a passing test nothing. Its 5 s
# default is shorter than a page load or a Python call on a busy 2-core machine (a link to another
# chapter failed to_be_in_viewport that way with a CPU-bound process beside the tests).
expect.set_options(timeout=30_000)


def _poll_every_100_ms(wait_for_function):
    """Playwright polls a wait_for_function on every animation frame unless told otherwise, which keeps
    the page drawing 60 frames a second for as long as a test waits (a training run's length, on a
    2-core machine whose other core runs the other test process). Every 100 ms is soon enough."""
    @functools.wraps(wait_for_function)
    def wait(self, expression, *, arg=None, timeout=None, polling=100):
        return wait_for_function(self, expression, arg=arg, timeout=timeout, polling=polling)
    return wait


Page.wait_for_function = _poll_every_100_ms(Page.wait_for_function)
Frame.wait_for_function = _poll_every_100_ms(Frame.wait_for_function)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = pathlib.Path(os.environ.get("COURSE_SITE", ROOT / "_site"))  # another build folder: build.py --out

@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": build.CHROMIUM, "args": build.CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def site_url():
    """The built site, served from _site/ on 127.0.0.1 at a free port."""
    if not (SITE / "index.html").is_file():
        pytest.fail("_site/index.html is missing: run the README's setup (scripts/setup.sh, then "
                    ".venv/bin/python build.py) before the browser tests", pytrace=False)
    url, server = build.serve_in_thread(SITE)
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def fresh_context(browser, site_url):
    """A browser context of the module's own (empty storage, no service worker: not the returning
    reader's profile) and the site's URL: (context, base URL)."""
    context = browser.new_context(viewport={"width": 1100, "height": 1000}, service_workers="block")
    yield context, site_url
    context.close()


# ---------------------------------------------------------------------------
# The returning reader's profile
#
# A page opened in a fresh browser context (incognito: no disk cache, and no code cache, which
# Chromium keeps only in a profile on disk) compiles Pyodide's JavaScript and WebAssembly from
# scratch and boots Python with no snapshot: about 5.5 s of CPU for a chapter, measured. In one
# profile with a disk cache, a later page of the same site takes the compiled code from the cache
# and Python from its memory snapshot (worker.js): about 3 s. So the pages that are not about
# what a first visit does (each chapter module's page, the accessibility visits, the navigation and
# theme checks) open in one such profile per test process, as a reader's later visits do; what a
# first visit does is tested on fresh contexts (test_start, test_load, test_offline, test_cells).
#
# Isolation: before a page opens, the site's cookies and storage (local and session storage,
# IndexedDB, service workers) are cleared, so a page starts as a first visit would in all that a
# test can see: the theme, exercise progress and saved edits are gone. Only the HTTP cache, the
# code cache and Python's snapshot (Cache Storage) stay. While another of the profile's pages is
# open (a test's second page beside its module's page), a page gets a fresh context instead:
# clearing the storage under an open page would change it.

READER_STORAGE = "cookies,local_storage,session_storage,indexeddb,websql,file_systems,service_workers"


@pytest.fixture(scope="session")
def reader_profile(browser_type, browser_type_launch_args, tmp_path_factory):
    """This test process's returning-reader profile (above): a persistent Chromium context."""
    context = browser_type.launch_persistent_context(
        str(tmp_path_factory.mktemp("reader-profile")), **browser_type_launch_args, service_workers="block")
    for page in context.pages:  # the blank page a profile opens with
        page.close()
    yield context
    context.close()


def new_reader_page(reader_profile, browser, site, viewport=None, color_scheme=None):
    """A blank page of the returning reader's profile, the storage of site's origin cleared, with the
    viewport and colour scheme given (a fresh context if another of the profile's pages is open).
    Close it with close_page. page.log is its PageLog."""
    if reader_profile.pages:
        options = {k: v for k, v in (("viewport", viewport), ("color_scheme", color_scheme)) if v}
        page = browser.new_context(**options, service_workers="block").new_page()
        page.own_context = True
    else:
        page = reader_profile.new_page()
        page.own_context = False
        origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(site))
        cdp = reader_profile.new_cdp_session(page)
        try:
            cdp.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": READER_STORAGE})
        finally:
            cdp.detach()
        if viewport:
            page.set_viewport_size(viewport)
        if color_scheme:
            page.emulate_media(color_scheme=color_scheme)
    page.log = PageLog(page)
    return page


def open_reader_page(reader_profile, browser, url, viewport=None, color_scheme=None, timeout=None):
    """new_reader_page, opened at url."""
    page = new_reader_page(reader_profile, browser, url, viewport, color_scheme)
    page.goto(url, timeout=timeout)
    return page


@pytest.fixture
def page(reader_profile, browser, site_url):
    """pytest-playwright's page, from the returning reader's profile (above), at 1280 x 720."""
    page = new_reader_page(reader_profile, browser, site_url, viewport={"width": 1280, "height": 720})
    yield page
    close_page(page)


def close_page(page):
    """Close a page from open_reader_page, and its context if it had one of its own."""
    if page.own_context:
        page.context.close()
    else:  # the profile stays for the next page
        page.close()


class SubpathHandler(build.SiteHandler):
    """The built site under /course/ only, as on a shared host: anything outside it is a 404."""
    prefix = "/course/"

    def translate_path(self, path):
        if not urllib.parse.urlsplit(path).path.startswith(self.prefix):
            return "/nonexistent/" + path
        return super().translate_path("/" + path[len(self.prefix):])


@pytest.fixture(scope="session")
def subpath_url():
    """The built site served under http://127.0.0.1:<port>/course/ (SubpathHandler)."""
    handler = functools.partial(SubpathHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/course/"
    server.shutdown()
    server.server_close()


class PageLog:
    """What a page said and fetched: console lines, errors, and requests off 127.0.0.1."""

    def __init__(self, page):
        self.console, self.errors, self.off_host, self.dialogs = [], [], [], []
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        page.on("request", self._on_request)
        page.on("dialog", self._on_dialog)

    def _on_console(self, msg):
        line = f"[{msg.type}] {msg.text}"
        self.console.append(line)
        if msg.type == "error":
            self.errors.append(line)

    def _on_request(self, request):
        url = urllib.parse.urlsplit(request.url)
        if url.scheme in ("data", "blob"):
            return
        if url.hostname != "127.0.0.1":
            self.off_host.append(request.url)

    def _on_dialog(self, dialog):
        self.dialogs.append(dialog.message)  # e.g. an injected alert(); never expected
        dialog.dismiss()

    def problems(self):
        out = list(self.errors)
        out += [f"request off 127.0.0.1: {u}" for u in self.off_host]
        out += [f"unexpected dialog: {d}" for d in self.dialogs]
        return out


# ---------------------------------------------------------------------------
# Helpers for the chapters' tests

SETTLED = ("done", "error", "stopped")  # a widget's data-status once a run or a call has ended


def wait_until(page, script, arg=None, what="the page's condition holds", timeout=180_000):
    """Poll page.evaluate(script, arg) until it returns true. page.wait_for_function does not await a
    promise (an async function's promise counts as true at once), so async checks (Cache Storage)
    need this."""
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(script, arg):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}", pytrace=False)
        time.sleep(0.2)


def widget(page, name):
    """The first widget called name on the page (its data-widget root)."""
    return page.locator(f'[data-widget="{name}"]').first


# The page's own signals (widget-kit.js): data-status, data-settles (how many runs or calls have
# ended: one more after each), and data-pending (a calculator's live update is waiting for the keys to
# pause, or a call is on its way). A status read while data-pending is set, or before data-settles
# has moved past its count before the action, may belong to an earlier result.
SETTLED_JS = """([el, s, before]) => s.includes(el.dataset.status) && !("pending" in el.dataset)
                                 && (before === null || Number(el.dataset.settles || 0) > before)"""


def settles(w):
    """How many runs or calls of widget w have ended so far (its data-settles)."""
    return int(w.get_attribute("data-settles") or 0)


def wait_settled(w, statuses=SETTLED, timeout=180_000, after=None):
    """Wait until widget w's data-status is one of statuses and nothing is pending (no live update
    waiting to fire, no call on its way); with after (a settles() count taken before an action), also
    until a run or call has ended since. Returns the status."""
    w.page.wait_for_function(SETTLED_JS, arg=[w.element_handle(), list(statuses), after], timeout=timeout)
    return w.get_attribute("data-status")


PRESS_STOP_AT_JS = """([el, n]) => {
  const readout = el.querySelector('[data-readout=step]');
  const watch = new MutationObserver(() => {
    if (el.dataset.runStarted === 'true' && Number(readout.textContent) >= n) {
      watch.disconnect();
      el.querySelector('[data-action=stop]').click();
    }
  });
  watch.observe(readout, { childList: true, characterData: true, subtree: true });
}"""


def press_stop_at(w, step):
    """Arm widget w to have its Stop pressed as soon as its step readout shows `step` or more, during
    the next run. The press happens in the page, in the task that updates the readout: a test that waits
    for the readout and then clicks lets the worker train on meanwhile, and on a loaded machine a short
    run could end before the click arrived. The worker still finishes the chunk under way."""
    w.page.evaluate(PRESS_STOP_AT_JS, [w.element_handle(), step])


def settle_after(w, action, statuses=SETTLED, timeout=180_000):
    """Do action() (a click, a fill, a key press) and wait for the answer to it: a run or call of
    widget w that ended after the action, with nothing pending. Returns the status."""
    before = settles(w)
    action()
    return wait_settled(w, statuses, timeout, after=before)


def result(w):
    """The widget's data-result JSON, or None."""
    raw = w.get_attribute("data-result")
    return json.loads(raw) if raw else None


def no_injected_markup(page):
    """Bad-input tests type <b class=injected> and <img src=x>: neither may become an element."""
    assert page.locator("[data-widget] b.injected, [data-widget] img[src='x']").count() == 0


def corpus():
    """(vocab, train ids, val ids) exactly as the page loads them from the built site."""
    import numpy as np

    from pylib import data
    meta = json.loads((SITE / "data" / "vocab.json").read_text())
    vocab = data.CharVocab(chars=tuple(meta["chars"]))
    train = np.fromfile(SITE / "data" / "train.bin", dtype=np.uint8)
    val = np.fromfile(SITE / "data" / "val.bin", dtype=np.uint8)
    return vocab, train, val


# A built page as Chromium parses it, without running it: fetched from a page of the same site and parsed
# with DOMParser (no scripts run, so no Python starts), its links resolved against its own URL.
PAGE_FACTS = """async (url) => {
  const response = await fetch(url);
  const doc = new DOMParser().parseFromString(await response.text(), "text/html");
  const base = doc.createElement("base");
  base.href = url;
  doc.head.prepend(base);
  const all = (selector, f) => [...doc.querySelectorAll(selector)].map(f);
  return {
    status: response.status,
    ids: all("[id]", (e) => e.id),
    links: { a: all("a[href]", (e) => e.href), link: all("link[href]", (e) => e.href), script: all("script[src]", (e) => e.src) },
    glossary_where: all(".glossary-where a", (e) => e.href),
    glossary_entries: doc.querySelectorAll(".glossary-entry").length,
    figures: all(".fig.measured", (e) => [e.dataset.source, e.querySelector("a.fig-link")?.getAttribute("href") ?? null,
                                           !!e.closest("[data-widget]")]),
  };
}"""


def page_facts(page, url):
    """The ids, links (a, link, script: resolved), glossary links and measured figures of the built
    page at url, parsed by Chromium without running its scripts (PAGE_FACTS); page must be on the
    same site. For checks of what the build wrote: loading each chapter would start Python for
    nothing."""
    return page.evaluate(PAGE_FACTS, url)


def chapter_url(site_url, slug_prefix="01-"):
    pages = sorted((SITE / "chapters").glob(f"{slug_prefix}*.html"))
    if not pages:
        pytest.fail(f"no _site/chapters/{slug_prefix}*.html: is chapters/{slug_prefix}*.md missing?", pytrace=False)
    return site_url + "chapters/" + pages[0].name


PYTHON_START_S = 60  # a chapter's Python is ready in 2-8 s here; this is for a stall, not a slow start

# What a page shows of its start: html[data-pyodide], how it booted, the status line, an error.
PYTHON_STATE = """() => ({
  pyodide: document.documentElement.dataset.pyodide ?? null,
  boot: document.documentElement.dataset.pythonBoot ?? null,
  status: document.querySelector('[data-role="pyodide-status-text"]')?.textContent ?? null,
  error: document.querySelector('[data-role="page-error"]:not([hidden])')?.textContent ?? null,
})"""


def wait_for_python(page, seconds=PYTHON_START_S):
    """Wait until the page's Python is ready or has failed (html[data-pyodide=ready|error]): None,
    or, if neither came within seconds, a diagnosis (what the page showed, its last console lines)."""
    try:
        page.wait_for_selector("html[data-pyodide=ready], html[data-pyodide=error]", timeout=seconds * 1000)
        return None
    except Exception as exc:
        try:
            state = page.evaluate(PYTHON_STATE)
        except Exception as inner:
            state = f"(the page did not answer: {inner})"
        tail = " | ".join(page.log.console[-8:]) or "(nothing on the console)"
        return f"{type(exc).__name__} after {seconds} s; the page showed {state}; its console: {tail}"


def chapter_fixture(slug_prefix):
    """A module-scoped fixture: the chapter whose file starts with slug_prefix, loaded once per
    module with Python ready (html[data-pyodide=ready]). Name it chapterN in the test module:
    `chapter2 = chapter_fixture("02-")`; the checks below apply to every fixture named so."""

    @pytest.fixture(scope="module")
    def chapter(reader_profile, browser, site_url):
        # In the returning reader's profile (above), whose service workers are blocked: a chapter's
        # tests do not need the saved copy (test_offline and test_cells test it), and saving the
        # whole site costs each page seconds of CPU.
        url = chapter_url(site_url, slug_prefix)
        page = open_reader_page(reader_profile, browser, url, viewport={"width": 1100, "height": 1000})
        stuck = wait_for_python(page)
        if stuck:
            # Once on CI (chapter 12, under load) Python was not ready after 60 s in the profile,
            # where a page here is ready in 2-8 s even beside four busy loops; no log of why was
            # kept. The page is opened once more in a fresh context (no disk cache, no snapshot) so
            # that one stall fails nothing, and the stall is reported with what the page showed.
            close_page(page)
            page = browser.new_context(viewport={"width": 1100, "height": 1000}, service_workers="block").new_page()
            page.own_context, page.log = True, PageLog(page)
            page.goto(url)
            again = wait_for_python(page)
            if again:
                close_page(page)
                pytest.fail(f"Python did not start on {url}, twice.\nIn the reader's profile: {stuck}\n"
                            f"In a fresh context: {again}", pytrace=False)
            warnings.warn(f"Python did not start on {url} in the reader's profile, and did in a fresh "
                          f"context: {stuck}")
        yield page
        close_page(page)

    return chapter


chapter1 = chapter_fixture("01-")


def _chapter_fixtures(names):
    return [n for n in names if re.fullmatch(r"chapter\d+", n)]


@pytest.fixture(autouse=True)
def _no_console_errors_or_foreign_requests(request):
    """After each test using a chapter page: no new console error, off-host request or dialog."""
    pages = [request.getfixturevalue(n) for n in _chapter_fixtures(request.fixturenames)]
    before = [len(page.log.problems()) for page in pages]
    yield
    for page, n in zip(pages, before):
        new = page.log.problems()[n:]
        if new:
            print("--- page console ---")
            print("\n".join(page.log.console))
            pytest.fail("the page reported problems:\n" + "\n".join(new), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the shared page's console to a failing test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for name in _chapter_fixtures(item.fixturenames):
            page = item.funcargs.get(name)
            if page is not None:
                report.sections.append((f"{name} console", "\n".join(page.log.console) or "(empty)"))
