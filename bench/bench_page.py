"""Time the training step inside the page's Web Worker, in headless Chromium (Pyodide, no BLAS).

It serves the built site on 127.0.0.1, opens chapter 1, waits for the page's ready signal, and
asks the worker to run pylib.studies.benchmark.time_train_step, the function bench_step.py times in
CPython. It prints figures and asserts nothing.

    .venv/bin/python bench/bench_page.py [--steps 50] [--repeats 5]
"""

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import build  # noqa: E402

CALL_WORKER = """async (args) => {
  const client = await import(new URL("../static/js/pyodide-client.js", document.baseURI).href);
  return await client.call("bench_step", args);
}"""


def bench_in_page(B=16, T=64, steps=50, repeats=5):
    """One row: the median ms per step in the page's worker, with Chromium's version."""
    from playwright.sync_api import sync_playwright
    chapter = build.find_chapters()[0]
    url, server = build.serve_in_thread()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=build.CHROMIUM, args=build.CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"{url}chapters/{chapter.slug}.html")
            page.wait_for_selector("html[data-pyodide=ready]", timeout=120_000)
            result = page.evaluate(CALL_WORKER, {"B": B, "T": T, "steps": steps, "repeats": repeats})
            version = browser.version
            browser.close()
    finally:
        server.shutdown()
    return {"implementation": f"pylib in Pyodide 0.27.7 (NumPy 2.0.2, no BLAS), Chromium {version} worker",
            "malloc": "default", "B": B, "T": T, "threads": 1, "median_ms": result["ms_per_step"],
            "steps_per_s": 1e3 / result["ms_per_step"], "note": "WebAssembly in a Web Worker: one thread"}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    row = bench_in_page(steps=args.steps, repeats=args.repeats)
    print(json.dumps(row) if args.json else f"{row['implementation']}: {row['median_ms']:.2f} ms/step "
          f"(B={row['B']}, T={row['T']}, median of {args.repeats} runs of {args.steps} steps)")
