"""How a page loads Python, in a real browser: the loading status stays in view wherever the reader
has scrolled; a page whose widgets do not read the corpus never downloads it; and when something
fails, the message names what failed: a data file (Python still runs, only the widgets that need
it fail), the worker, Pyodide, NumPy or the course's library. Failures are made by a server
that answers some paths with a 404 or drops the connection (a request aborted on the way), so they
reach the page's worker exactly as a broken host would make them; these contexts block service
workers (a saved copy of the site would hide the failure)."""

import functools
import http.server
import re
import threading

import pytest
from playwright.sync_api import expect

import build
from conftest import SITE, PageLog

TIMEOUT = 180_000


class BrokenHost(build.SiteHandler):
    """The built site, except that paths matching a key of `broken` fail: "404", or "abort" (the
    connection closes without an answer)."""
    broken = {}

    def send_head(self):
        for pattern, how in self.broken.items():
            if re.search(pattern, self.path):
                if how == "abort":
                    self.close_connection = True
                    return None
                self.send_error(404, "Not here")
                return None
        return super().send_head()


@pytest.fixture
def broken_site():
    """broken_site({regex: "404" | "abort"}) -> the URL of a server of the built site that fails so."""
    servers = []

    def serve(broken):
        handler = functools.partial(type("Host", (BrokenHost,), {"broken": broken}), directory=str(SITE))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def context(browser):
    context = browser.new_context(service_workers="block", viewport={"width": 1100, "height": 800})
    yield context
    context.close()


def wait_python(page, state, log=None):
    """Wait for html[data-pyodide=state]; on a timeout, fail with what the page showed."""
    try:
        page.wait_for_function("s => document.documentElement.dataset.pyodide === s", arg=state, timeout=TIMEOUT)
    except Exception:
        shown = page.evaluate("[document.documentElement.dataset.pyodide, "
                              "document.querySelector('[data-role=pyodide-status]').textContent.trim(), "
                              "document.querySelector('[data-role=page-error]').textContent]")
        pytest.fail(f"Python not {state}: {shown}\n" + "\n".join(log.console if log else []), pytrace=False)


def chapter(site_url, prefix):
    return site_url + "chapters/" + next(p.name for p in (SITE / "chapters").glob(f"{prefix}*.html"))


def settled(w):
    w.page.wait_for_function("el => ['done', 'error', 'stopped'].includes(el.dataset.status)",
                             arg=w.element_handle(), timeout=TIMEOUT)
    return w.get_attribute("data-status")


def page_error(page):
    box = page.locator('[data-role="page-error"]')
    expect(box).to_be_visible(timeout=TIMEOUT)
    return box.text_content()


def test_the_loading_status_stays_in_view_wherever_the_reader_scrolls(context, site_url):
    page = context.new_page()
    held = []  # NumPy's download is held until the checks are done, so Python is still loading
    page.route("**/pyodide/numpy-*.whl", lambda route: held.append(route))
    page.goto(chapter(site_url, "01-"))
    status = page.locator('[data-role="pyodide-status"]')
    expect(status).to_be_visible()
    assert page.evaluate("document.documentElement.dataset.pyodide") == "loading"
    box = status.bounding_box()
    assert box["height"] < 40  # one small line
    # Where the page starts it takes its own place: it covers neither the header nor the text.
    for other in (".site-header", "main.content"):
        b = page.locator(other).bounding_box()
        assert box["y"] + box["height"] <= b["y"] + 0.5 or box["y"] >= b["y"] + b["height"] - 0.5, other
    for where in ("document.body.scrollHeight / 2", "document.body.scrollHeight"):
        page.evaluate(f"window.scrollTo(0, {where})")
        page.wait_for_timeout(100)
        box = status.bounding_box()
        assert 0 <= box["y"] and box["y"] + box["height"] <= 800, (where, box)  # in the viewport
    while not held:
        page.wait_for_timeout(100)
    for route in held:
        route.continue_()
    page.unroute("**/pyodide/numpy-*.whl")
    wait_python(page, "ready")
    expect(status).to_be_hidden()


SLOW_START_KEY = "course-python-boot-afresh"  # pyodide-client.js and python-start.js


def test_a_slow_start_says_so_and_the_next_start_in_the_tab_boots_without_the_saved_snapshot(context, site_url):
    """A start not finished after the slow-start delay (45 s; 1.5 s here) says so on the status line and
    asks the tab's next start to boot afresh; a start that then ends forgets the request. A reload with
    the request drops the saved snapshot, boots, and keeps a new one, which the reload after restores."""
    page = context.new_page()
    log = PageLog(page)
    page.add_init_script("window.__coursePythonSlowStartMs = 1500")
    url = chapter(site_url, "01-")
    page.goto(url)  # a first visit: it boots, then keeps a snapshot
    wait_python(page, "ready", log)
    page.wait_for_function("() => caches.open('course-python-snapshot').then((c) => c.keys()).then((k) => k.length === 1)",
                           timeout=TIMEOUT, polling=200)
    held = []  # NumPy's download is held, so this start stalls after Python itself has started
    page.route("**/pyodide/numpy-*.whl", lambda route: held.append(route))
    page.reload()
    status = page.locator('[data-role="pyodide-status-text"]')
    expect(status).to_have_text(re.compile(r"^Python is slow to start \(\d+ s so far\)\. If nothing changes, reload the page\.$"),
                                timeout=30_000)
    assert page.evaluate(f"sessionStorage.getItem('{SLOW_START_KEY}')") == "1"
    assert page.evaluate("document.documentElement.dataset.pyodide") == "loading"
    while not held:
        page.wait_for_timeout(100)
    for route in held:
        route.continue_()
    page.unroute("**/pyodide/numpy-*.whl")
    wait_python(page, "ready", log)
    expect(page.locator('[data-role="pyodide-status"]')).to_be_hidden()
    assert page.evaluate("document.documentElement.dataset.pythonBoot") == "snapshot"  # it had restored
    assert page.evaluate(f"sessionStorage.getItem('{SLOW_START_KEY}')") is None  # it ended: nothing asked
    # A tab whose last start stalled (the request left, as a reload mid-start leaves it): boot afresh.
    page.evaluate(f"sessionStorage.setItem('{SLOW_START_KEY}', '1')")
    page.reload()
    wait_python(page, "ready", log)
    assert page.evaluate("document.documentElement.dataset.pythonBoot") == "booted"
    assert page.evaluate(f"sessionStorage.getItem('{SLOW_START_KEY}')") is None
    page.wait_for_function("() => caches.open('course-python-snapshot').then((c) => c.keys()).then((k) => k.length === 1)",
                           timeout=TIMEOUT, polling=200)
    page.reload()
    wait_python(page, "ready", log)
    assert page.evaluate("document.documentElement.dataset.pythonBoot") == "snapshot"
    assert not log.problems(), log.problems()
    page.close()


def test_a_page_whose_widgets_do_not_read_the_corpus_never_downloads_it(context, site_url):
    page = context.new_page()
    log = PageLog(page)
    fetched = []
    page.on("request", lambda request: fetched.append(request.url))
    page.goto(chapter(site_url, "14-"))
    wait_python(page, "ready")
    first = page.locator("[data-widget]").first
    page.wait_for_function("el => !['idle', 'loading'].includes(el.dataset.status)", arg=first.element_handle(),
                           timeout=TIMEOUT)
    page.wait_for_timeout(1000)
    assert any(u.endswith("/data/vocab.json") for u in fetched)  # 1 kB, loaded with Python
    assert not [u for u in fetched if re.search(r"/data/(train|val)\.bin$", u)]
    assert not [u for u in fetched if "micropip" in u or "packaging" in u]  # pylib is unpacked without micropip
    assert not log.problems(), log.problems()


def test_a_missing_training_file_names_the_file_and_only_the_widgets_that_train_fail(context, broken_site):
    page = context.new_page()
    page.goto(chapter(broken_site({r"/data/train\.bin$": "abort"}), "01-"))
    wait_python(page, "ready")
    tokenizer = page.locator('[data-widget="tokenizer"]').first
    assert settled(tokenizer) == "done"  # the vocabulary loaded: the tokenizer works
    train = page.locator('[data-widget="train"]').first
    expect(train.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    train.locator('input[name="steps"]').fill("5")
    train.locator('[data-action="run"]').click()
    assert settled(train) == "error"
    message = train.locator('[data-role="message"]').text_content()
    for text in (message, page_error(page)):
        assert "data/train.bin" in text and "data/val.bin" not in text, text
        assert "could not be loaded" in text and "train on the corpus" in text, text
        assert "Python" not in text, text  # Python is fine: the message must not blame it
    assert page.evaluate("document.documentElement.dataset.pyodide") == "ready"
    tokenizer.locator("textarea").fill("To be")  # the page still runs Python
    page.wait_for_function("el => el.dataset.status === 'done' && JSON.parse(el.dataset.result).n_tokens === 5",
                           arg=tokenizer.element_handle(), timeout=TIMEOUT)


def test_a_missing_vocabulary_names_it_and_python_still_runs(context, broken_site):
    page = context.new_page()
    page.goto(chapter(broken_site({r"/data/vocab\.json$": "404"}), "01-"))
    wait_python(page, "ready")
    tokenizer = page.locator('[data-widget="tokenizer"]').first
    assert settled(tokenizer) == "error"
    message = tokenizer.locator('[data-role="message"]').text_content()
    for text in (message, page_error(page)):
        assert "vocabulary (data/vocab.json) could not be loaded: HTTP 404" in text, text
        assert "Python" not in text, text


@pytest.mark.parametrize("path, how, expected", [
    (r"/static/js/worker\.js$", "404", "The page could not start its Python worker"),
    (r"/pyodide/pyodide\.asm\.wasm$", "abort", "Python (Pyodide) could not be loaded: pyodide/pyodide.asm.wasm could not be downloaded"),
    (r"/pyodide/python_stdlib\.zip$", "404", "Python (Pyodide) could not be loaded: pyodide/python_stdlib.zip could not be downloaded (HTTP 404"),
    (r"/pyodide/numpy-[^/]*\.whl$", "abort", "NumPy could not be loaded into Python: pyodide/numpy-"),
    (r"/wheels/pylib-[^/]*\.whl$", "404", "The course's Python library (wheels/pylib-"),
])
def test_each_part_that_fails_to_load_gets_its_own_message(context, broken_site, path, how, expected):
    page = context.new_page()
    log = PageLog(page)
    page.goto(chapter(broken_site({path: how}), "01-"))
    wait_python(page, "error", log)
    text = page_error(page)
    assert text.startswith(expected), text
    assert "The live widgets on this page cannot run" in text, text
    w = page.locator('[data-widget="train"]').first
    assert settled(w) == "error"
    assert w.locator('[data-role="message"]').text_content().startswith(expected)
