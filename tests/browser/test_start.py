"""How Python starts in the page, in a real browser (site/js/python-start.js, site/js/worker.js):

- on a page with widgets the worker is created from <head>, before the body is parsed;
- NumPy's and pylib's wheels are written out by the worker's own unzipper (their members are stored);
- the first start keeps a memory snapshot of the booted interpreter in Cache Storage, a later visit
  restores it, and Python then computes exactly what a booted one does;
- a snapshot that does not restore is dropped and replaced, and the page works as on a first visit.

Service workers are blocked here: the snapshot does not depend on them (test_offline covers them)."""

import json

import pytest
from playwright.sync_api import expect

from conftest import PageLog, chapter_url, result, wait_settled, wait_until, widget

TIMEOUT = 180_000
SNAPSHOT_CACHE = "course-python-snapshot"  # worker.js
RUN = {"steps": 12, "seed": 3, "lr": 0.01, "batch_size": 8}


@pytest.fixture
def context(browser):
    context = browser.new_context(service_workers="block", viewport={"width": 1100, "height": 900})
    yield context
    context.close()


def open_chapter1(page, site_url, log):
    page.goto(chapter_url(site_url, "01-"))
    try:
        page.wait_for_selector("html[data-pyodide=ready]", timeout=TIMEOUT)
    except Exception:
        pytest.fail(f"Python not ready: {page.evaluate('document.documentElement.dataset.pyodide')}\n"
                    + "\n".join(log.console), pytrace=False)
    return page.evaluate("document.documentElement.dataset.pythonBoot")


def snapshot_size(page):
    """The stored snapshot's size in bytes, or None."""
    return page.evaluate("""async ([name, key]) => {
      const hit = await (await caches.open(name)).match(key);
      return hit ? (await hit.arrayBuffer()).byteLength : null;
    }""", [SNAPSHOT_CACHE, snapshot_key(page)])


def snapshot_key(page):
    return page.evaluate("new URL('pyodide/memory-snapshot', new URL(document.documentElement.dataset.siteRoot, location.href)).href")


def wait_snapshot_kept(page, size=None):
    """Wait until the worker has kept a snapshot (of this size, when given) with its X-Snapshot header."""
    wait_until(page, """async ([name, key, size]) => {
      const hit = await (await caches.open(name)).match(key);
      return !!hit && hit.headers.has("X-Snapshot") && (size === null || (await hit.arrayBuffer()).byteLength === size);
    }""", [SNAPSHOT_CACHE, snapshot_key(page), size], "the snapshot is kept", TIMEOUT)


def train(page):
    """The chapter-1 training widget's result for RUN."""
    w = widget(page, "train")
    expect(w.locator('[data-action="run"]')).to_be_enabled(timeout=TIMEOUT)
    for name, value in RUN.items():
        w.locator(f'input[name="{name}"]').fill(str(value))
    w.locator('[data-action="run"]').click()
    assert wait_settled(w, timeout=TIMEOUT) == "done", w.locator('[data-role="message"]').text_content()
    return result(w)


def test_the_worker_is_created_from_head_before_the_body_is_parsed(context, site_url):
    page = context.new_page()
    log = PageLog(page)
    open_chapter1(page, site_url, log)
    created, interactive = page.evaluate("""[performance.getEntriesByName('course-worker-created')[0]?.startTime ?? null,
                                             performance.getEntriesByType('navigation')[0].domInteractive]""")
    assert created is not None and created < interactive, (created, interactive)
    info = page.evaluate("""() => new Promise((resolve) => import(new URL('../static/js/pyodide-client.js', location.href).href)
                                   .then((m) => m.start()).then(resolve))""")
    assert info["unpacked"] == {"numpy": "stored", "pylib": "stored"}, info["unpacked"]
    names = [name for name, _ in info["steps"]]
    assert names[:2] == ["init", "pyodide.mjs"] and names[-1] == "vocabulary", names
    assert not log.problems(), log.problems()


def test_a_second_visit_restores_the_snapshot_and_trains_exactly_as_the_first(context, site_url):
    page = context.new_page()
    log = PageLog(page)
    assert open_chapter1(page, site_url, log) == "booted"
    wait_snapshot_kept(page)
    size = snapshot_size(page)
    assert size > 10_000_000, size  # the interpreter's whole wasm memory (20 MiB in Pyodide 0.27.7)
    first = train(page)

    assert open_chapter1(page, site_url, log) == "snapshot"
    second = train(page)
    assert second["steps"] == first["steps"] == RUN["steps"]
    assert isinstance(first["final_train_loss"], float)
    # the same run, bit for bit: every number of the result but the speeds
    same = lambda r: json.dumps({k: v for k, v in r.items() if k not in ("steps_per_s", "tokens_per_s")}, sort_keys=True)  # noqa: E731
    assert same(second) == same(first)
    assert snapshot_size(page) == size  # restored, not taken again
    assert not log.problems(), log.problems()


# How a stored snapshot is damaged, in the page: (bytes, its X-Snapshot header) -> the same, damaged.
DAMAGE = {
    # not a snapshot at all, and no header
    "junk": "(bytes, kept) => [new Uint8Array(4096).fill(7), null]",
    # cut short (a write that did not finish): no longer what the header says
    "truncated": "(bytes, kept) => [bytes.slice(0, bytes.length - 65536), kept]",
    # well formed, but made by another Pyodide build: one byte of the build id differs, so Pyodide
    # itself refuses it (the header kept matches: the build id lies past the bytes it records)
    "another build": "(bytes, kept) => { const b = bytes.slice(); b[20] ^= 1; return [b, kept]; }",
}


def test_a_snapshot_that_does_not_restore_is_replaced_and_the_page_works(context, site_url):
    """For each damage in turn, on one page (each round starts from the snapshot the round before kept):
    the damaged snapshot is dropped, Python boots, the page trains, and a new snapshot of the same size
    is kept, which the next visit restores."""
    page = context.new_page()
    log = PageLog(page)
    open_chapter1(page, site_url, log)
    wait_snapshot_kept(page)
    size = snapshot_size(page)
    for damage, how in DAMAGE.items():
        page.evaluate(f"""async ([name, key]) => {{
          const cache = await caches.open(name);
          const hit = await cache.match(key);
          const [bytes, kept] = ({how})(new Uint8Array(await hit.arrayBuffer()), hit.headers.get("X-Snapshot"));
          await cache.put(key, new Response(bytes, {{ headers: kept ? {{ "X-Snapshot": kept }} : {{}} }}));
        }}""", [SNAPSHOT_CACHE, snapshot_key(page)])
        assert snapshot_size(page) != size or damage == "another build", damage

        assert open_chapter1(page, site_url, log) == "booted", damage
        expect(page.locator('[data-role="page-error"]')).to_be_hidden()
        assert train(page)["steps"] == RUN["steps"], damage
        wait_snapshot_kept(page, size)
        assert open_chapter1(page, site_url, log) == "snapshot", damage
        assert not log.problems(), (damage, log.problems())
