"""Steps per second of chapter 9's precision recipes against fp32: in CPython and in the page's worker.

The recipes emulate 16- and 8-bit rounding with uint32 bit tricks on every matmul input, gradient
and (pure recipes) stored weight; the page must train them at no less than a third of its fp32 rate.
It serves a built site on 127.0.0.1 (default _site/; --site another build that has chapter 9), asks
the worker to run pylib.web.precision_ops.bench, runs the same function in CPython, and prints both.
It asserts nothing.

    .venv/bin/python bench/bench_precision.py [--steps 30] [--repeats 3] [--site /tmp/site-ch9]
"""

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import build  # noqa: E402

CALL_WORKER = """async (args) => {
  const client = await import(new URL("../static/js/pyodide-client.js", document.baseURI).href);
  return await client.call("precision_bench", args);
}"""


def bench_in_page(site, args):
    from playwright.sync_api import sync_playwright
    page_path = next(pathlib.Path(site, "chapters").glob("09-*.html"))
    url, server = build.serve_in_thread(site)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=build.CHROMIUM, args=build.CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"{url}chapters/{page_path.name}")
            page.wait_for_selector("html[data-pyodide=ready]", timeout=180_000)
            result = page.evaluate(CALL_WORKER, args)
            browser.close()
    finally:
        server.shutdown()
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--site", default=str(build.OUT))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    from pylib.web import precision_ops
    args = {"steps": a.steps, "repeats": a.repeats}
    rows = {"cpython": precision_ops.bench(None, args), "page": bench_in_page(a.site, args)}
    if a.json:
        print(json.dumps(rows))
    else:
        for where, rates in rows.items():
            base = rates["fp32"]
            print(f"{where}: " + ", ".join(f"{k} {v:.1f} steps/s ({v / base:.2f} of fp32)" for k, v in rates.items()))
