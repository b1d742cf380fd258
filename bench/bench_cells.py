"""How long an editable cell takes from Run to its first output, cold and warm.

It serves a built site on 127.0.0.1 with build.py's handler (cross-origin isolated), opens a
chapter in a fresh Chromium context (empty caches: a cold visit), waits until the page's widgets
have Python (so the cells' worker does not share the two cores with the widgets' start-up), scrolls
to the cell and presses Run:

- cold: the first Run on the page, which starts the cells' own Python (PyScript's worker on the
  site's Pyodide, with NumPy and the pylib wheel) before the cell's code runs;
- warm: each later Run of the same cell on the same page.

"First output" is the cell's data-first-output (cells.js: seconds from the click to the first text
the run printed); "run" is the click to the end of the run. Medians of --runs (min-max after). It
prints figures, asserts nothing, and prints the load average: the machine is shared.

    .venv/bin/python bench/bench_cells.py [--site DIR] [--runs 5]
        [--cell 09-:pylib.systems.precision.round_to] [--cell 05-:pylib.optim.adamw_step]
"""

import argparse
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import build  # noqa: E402

DEFAULT_CELLS = ["09-:pylib.systems.precision.round_to", "05-:pylib.optim.adamw_step"]


def chapter_path(site, prefix):
    pages = sorted((site / "chapters").glob(f"{prefix}*.html"))
    if not pages:
        sys.exit(f"no chapters/{prefix}*.html in {site}")
    return "chapters/" + pages[0].name


def run_once(page, cell):
    """Press Run on cell and wait for the end: (seconds to the first output, seconds to the end)."""
    cell.evaluate("el => { el.dataset.status = 'waiting'; delete el.dataset.firstOutput; }")
    t0 = time.perf_counter()
    cell.locator('[data-role="run"]').click()
    page.wait_for_function("el => ['done', 'error', 'stopped'].includes(el.dataset.status)",
                           arg=cell.element_handle(), timeout=600_000)
    total = time.perf_counter() - t0
    if cell.get_attribute("data-status") != "done":
        raise RuntimeError(f"the run ended {cell.get_attribute('data-status')}")
    return float(cell.get_attribute("data-first-output")), total


def fmt(values):
    return f"{statistics.median(values):6.2f} s  ({min(values):.2f}-{max(values):.2f})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=pathlib.Path, default=build.OUT)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cell", action="append", help="chapter prefix:pylib name (repeatable)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    site = args.site.resolve()
    url, server = build.serve_in_thread(site)
    print(f"site {site}, {args.runs} runs each, load average {os.getloadavg()[0]:.2f} at the start")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=build.CHROMIUM, args=build.CHROMIUM_ARGS)
            for spec in args.cell or DEFAULT_CELLS:
                prefix, name = spec.split(":", 1)
                cold_first, cold_total, warm_first, warm_total = [], [], [], []
                for _ in range(args.runs):
                    context = browser.new_context(viewport={"width": 1100, "height": 1000}, service_workers="block")
                    page = context.new_page()
                    page.goto(url + chapter_path(site, prefix))
                    page.wait_for_selector("html[data-pyodide=ready]", timeout=300_000)
                    cell = page.locator(f'[data-code-cell="{name}"]')
                    cell.scroll_into_view_if_needed()
                    page.wait_for_selector(f'[data-code-cell="{name}"][data-mounted=true]', timeout=60_000)
                    first, total = run_once(page, cell)
                    cold_first.append(first)
                    cold_total.append(total)
                    first, total = run_once(page, cell)
                    warm_first.append(first)
                    warm_total.append(total)
                    context.close()
                print(f"\n{name} (chapters/{prefix}…)")
                print(f"  cold: first output {fmt(cold_first)}   run {fmt(cold_total)}")
                print(f"  warm: first output {fmt(warm_first)}   run {fmt(warm_total)}")
            browser.close()
    finally:
        server.shutdown()
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end; Chromium {build.CHROMIUM}, 2 cores shared")


if __name__ == "__main__":
    main()
