"""How soon a chapter's first widget is ready, cold and on a second visit, and how many bytes it takes.

For each built site given (default _site/; give two to compare, e.g. a build of an older commit and
this one), it serves the site on 127.0.0.1 with build.py's handler (which serves the precompressed
.br/.gz files when a build has them), opens a chapter in a fresh Chromium context (empty caches, no
service worker: a cold visit), and records, in the page:

- "ready": when the page's first widget leaves data-status "loading" (Python is ready and the
  widget has set itself up: html[data-pyodide=ready] comes just before it);
- the loading steps the status bar showed, with their times;

and, at the server, the bytes it sent (bodies as sent, so compressed when compressed) until then.
It then waits until the visit has settled (the service worker, when the build has one, has saved
the site for offline use: html[data-offline=ready]) and opens the chapter again in the same context:
the second visit. Each figure is the median of --runs visits (min-max after it). Requests the
service worker makes to save the site (it revalidates: they carry a Cache-Control header, which
the page's own requests do not) are counted apart. The sites' visits alternate (A, B, A, B, ...),
so a busy machine slows them alike. It
prints figures and asserts nothing; the machine is shared, so it prints the load average too.

    .venv/bin/python bench/bench_load.py [--site DIR [DIR ...]] [--chapter 01-] [--runs 5]
    .venv/bin/python bench/bench_load.py --site /tmp/site-before _site --bytes-all   # every chapter once
    .venv/bin/python bench/bench_load.py --site _site _site#nosw   # with and without the service worker
    .venv/bin/python bench/bench_load.py --profile   # each visit pair on a new browser profile (see contexts)
    .venv/bin/python bench/bench_load.py --site /tmp/site-before _site --page index.html   # another page than a chapter
"""

import argparse
import functools
import http.server
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import build  # noqa: E402

# Installed before any page script: timestamps (ms since navigation start) of the page's own signals.
RECORDER = r"""(() => {
  const t = { marks: [] };
  window.__load = t;
  const now = () => performance.now();
  document.addEventListener("python-ready", (e) => {  // the worker's own steps, on the page's clock
    t.boot = e.detail.boot;
    t.steps = (e.detail.steps || []).map(([name, at]) => [name, Math.round(at - performance.timeOrigin)]);
  });
  let first = null;
  new MutationObserver((records) => {
    for (const r of records) {
      const el = r.target;
      const html = document.documentElement;
      if (el === html && r.type === "attributes") {
        for (const name of ["pyodide", "offline"]) {
          const v = html.dataset[name];
          if (v && t[`${name}_${v}`] === undefined) t[`${name}_${v}`] = now();
        }
        continue;
      }
      if (r.attributeName === "data-status") {
        first = first || document.querySelector("[data-widget]");
        if (el !== first) continue;
        t.widget = el.dataset.widget;
        const s = el.dataset.status;
        if (s === "loading" && t.widget_loading === undefined) t.widget_loading = now();
        // ready: the first status past "idle" and "loading" (a widget whose Python starts on demand,
        // the index's, goes from idle straight to ready)
        else if (s !== "loading" && s !== "idle" && t.ready === undefined) t.ready = now();
      } else if (el.nodeType === 3 || r.type === "childList") {
        const box = document.querySelector('[data-role="pyodide-status-text"]');
        if (box && box.contains(el)) t.marks.push([Math.round(now()), box.textContent]);
      }
    }
  }).observe(document, { attributes: true, attributeFilter: ["data-pyodide", "data-offline", "data-status"],
                     subtree: true, childList: true, characterData: true });
})();"""

DONE = "() => window.__load && (window.__load.ready !== undefined || window.__load.pyodide_error !== undefined)"


class Log:
    """What the server sent: (monotonic time, path, status, body bytes, encoding, precache?)."""

    def __init__(self):
        self.rows, self.lock = [], threading.Lock()

    def add(self, row):
        with self.lock:
            self.rows.append(row)

    def between(self, t0, t1):
        with self.lock:
            return [r for r in self.rows if t0 <= r[0] <= t1]


class CountingHandler(build.SiteHandler):
    log = None

    def send_response(self, code, message=None):
        self._code, self._length, self._encoding = code, 0, "identity"
        super().send_response(code, message)

    def send_header(self, keyword, value):
        if keyword.lower() == "content-length":
            self._length = int(value)
        elif keyword.lower() == "content-encoding":
            self._encoding = value
        super().send_header(keyword, value)

    def end_headers(self):
        super().end_headers()
        precache = self.headers.get("Cache-Control") is not None  # the service worker revalidates
        body = self._length if self.command == "GET" and self._code == 200 else 0
        self.log.add((time.monotonic(), self.path, self._code, body, self._encoding, precache))


def serve(directory, log):
    handler = functools.partial(type("H", (CountingHandler,), {"log": log}), directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}/", server


def visit(page, url, log, timeout=180_000):
    """One navigation: (the page's timings, the bytes sent until the widget was ready, rows)."""
    t0 = time.monotonic()
    page.goto(url)
    page.wait_for_function(DONE, timeout=timeout, polling=20)
    t1 = time.monotonic()
    timings = page.evaluate("window.__load")
    rows = [r for r in log.between(t0, t1) if not r[5]]
    return timings, sum(r[3] for r in rows), rows


def settle(page, log, has_sw, timeout=300):
    """Wait until the service worker has saved the site (html[data-offline=ready]), or, for a build
    without one, until the server has been quiet for 2 s; returns the bytes the saving took."""
    t0 = quiet_since = time.monotonic()
    seen = 0
    while time.monotonic() - t0 < timeout:
        if has_sw:
            if page.evaluate("document.documentElement.dataset.offline || ''") in ("ready", "error"):
                break
        else:
            n = len(log.between(t0, time.monotonic()))
            if n != seen:
                seen, quiet_since = n, time.monotonic()
            if time.monotonic() - quiet_since > 2:
                break
        time.sleep(0.1)
    return sum(r[3] for r in log.between(t0, time.monotonic()) if r[5])


def fmt_ms(values):
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    return f"{statistics.median(values) / 1000:.2f} s ({min(values) / 1000:.2f}-{max(values) / 1000:.2f})"


def median_steps(visits):
    """'Python <how it started>: <step> <ms> (median), ...' over visits (the page's clock, ms since
    navigation), or 'n/a' for a build whose worker reports no steps."""
    boots = sorted({boot for boot, _ in visits if boot})
    names = list(dict.fromkeys(name for _, steps in visits for name, _ in steps))
    if not names:
        return "n/a (this build's worker does not report them)"
    at = {n: [ms for _, steps in visits for name, ms in steps if name == n] for n in names}
    return f"Python {'/'.join(boots)}: " + ", ".join(f"{n} {statistics.median(v):.0f} ms" for n, v in at.items())


def fmt_mb(values):
    return f"{statistics.median(values) / 1e6:.2f} MB" if values else "n/a"


def bench_sites(new_context, sites, chapter, runs, page=None):
    """runs cold + second visits of chapter on each site, alternating between the sites.
    new_context(service_workers=...): a fresh browser context (see contexts())."""
    out = []
    for spec in sites:
        site, _, variant = spec.partition("#")
        log = Log()
        url, server = serve(site, log)
        path = page or "chapters/" + next(pathlib.Path(site, "chapters").glob(f"{chapter}*.html")).name
        out.append({"site": spec, "block_sw": variant == "nosw", "chapter": path, "cold": [], "warm": [], "cold_bytes": [],
                    "warm_bytes": [], "saved": [], "marks": None, "steps": {"cold": [], "warm": []}, "log": log, "server": server,
                    "url": f"{url}{path}",
                    "has_sw": pathlib.Path(site, "sw.js").is_file() and variant != "nosw"})
    try:
        for _ in range(runs):
            for r in out:
                context = new_context(service_workers="block" if r["block_sw"] else "allow")
                context.add_init_script(RECORDER)
                page = context.new_page()
                t, n, _rows = visit(page, r["url"], r["log"])
                r["cold"].append(t.get("ready"))
                r["steps"]["cold"].append((t.get("boot"), t.get("steps") or []))
                r["cold_bytes"].append(n)
                r["marks"] = r["marks"] or t.get("marks")
                r["saved"].append(settle(page, r["log"], r["has_sw"]))
                t, n, _rows = visit(page, r["url"], r["log"])
                r["warm"].append(t.get("ready"))
                r["steps"]["warm"].append((t.get("boot"), t.get("steps") or []))
                r["warm_bytes"].append(n)
                context.close()
    finally:
        for r in out:
            r["server"].shutdown()
            r["server"].server_close()
    return out


def contexts(playwright, browser, profile):
    """A function that makes a fresh, empty browser context for one cold + second visit.

    Without profile: browser.new_context(), Playwright's usual one, which is off the record, like a
    private window. Chromium keeps no code cache there, so every visit compiles the page's wasm and
    JavaScript again (measured: the fifth visit in one such context is no faster than the second).
    With profile: a browser of its own on a new, empty profile folder, as a reader's browser is;
    Chromium then keeps the compiled wasm of Pyodide in its code cache after the first visit."""
    if not profile:
        return browser.new_context

    def new_context(**options):
        folder = tempfile.mkdtemp(prefix="bench-profile-")
        context = playwright.chromium.launch_persistent_context(
            folder, executable_path=build.CHROMIUM, args=build.CHROMIUM_ARGS, headless=True, **options)
        context.on("close", lambda _: shutil.rmtree(folder, ignore_errors=True))
        return context
    return new_context


def bytes_per_chapter(browser, site):
    """Every chapter once, cold: seconds to its first widget and bytes sent until then."""
    log = Log()
    url, server = serve(site, log)
    out = []
    try:
        for page_path in sorted(pathlib.Path(site, "chapters").glob("*.html")):
            context = browser.new_context()
            context.add_init_script(RECORDER)
            page = context.new_page()
            t, n, rows = visit(page, f"{url}chapters/{page_path.name}", log)
            corpus = any("/data/train.bin" in r[1] for r in rows)
            out.append((page_path.name, t.get("ready"), n, corpus))
            context.close()
    finally:
        server.shutdown()
        server.server_close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", nargs="+", default=[str(build.OUT)],
                    help="built sites to compare; DIR#nosw: that site with service workers blocked")
    ap.add_argument("--chapter", default="01-", help="the chapter's file-name prefix (default 01-)")
    ap.add_argument("--page", help="a page of the site instead of a chapter, e.g. index.html")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bytes-all", action="store_true", help="also every chapter once, cold")
    ap.add_argument("--profile", action="store_true",
                    help="each cold + second visit in a browser on a new profile folder (code cache kept, as in a "
                         "reader's browser) instead of an off-the-record context (none kept, as in a private window)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=build.CHROMIUM, args=build.CHROMIUM_ARGS)
        print(f"Chromium {browser.version}, headless; {os.cpu_count()} cores, load average before "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; the page's Python runs on one thread "
              f"(a Web Worker); server on 127.0.0.1 (no network delay)")
        kind = ("a new profile each (code cache kept)" if args.profile
                else "an off-the-record context each (no code cache, as in a private window)")
        print(f"visits: {kind}")
        for r in bench_sites(contexts(p, browser, args.profile), args.site, args.chapter, args.runs, args.page):
            print(f"\n{r['site']}: {r['chapter']}, {args.runs} visits each (median, min-max)")
            print(f"  first widget ready, cold:         {fmt_ms(r['cold'])}")
            print(f"  first widget ready, second visit: {fmt_ms(r['warm'])}")
            print(f"  bytes sent until ready, cold:     {fmt_mb(r['cold_bytes'])}")
            print(f"  bytes sent until ready, second:   {fmt_mb(r['warm_bytes'])}")
            print(f"  saved for offline after the first visit (service worker): {fmt_mb(r['saved'])}")
            for visit_kind in ("cold", "warm"):
                print(f"  worker's start-up steps, {visit_kind}: {median_steps(r['steps'][visit_kind])}")
            if r["marks"]:
                print("  loading steps of the first cold visit (ms: status bar): " +
                      "; ".join(f"{ms}: {text}" for ms, text in r["marks"]))
        if args.bytes_all:
            for site in dict.fromkeys(spec.partition("#")[0] for spec in args.site):
                print(f"\n{site}: every chapter once, cold (first widget ready, bytes sent until then, corpus fetched)")
                for name, ready, n, corpus in bytes_per_chapter(browser, site):
                    shown = f"{ready / 1000:.2f} s" if ready is not None else "n/a"
                    print(f"  {name:<44} {shown:>7}  {n / 1e6:6.2f} MB  {'corpus' if corpus else ''}")
        print(f"\nload average after {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        browser.close()


if __name__ == "__main__":
    main()
