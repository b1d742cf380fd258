"""The course's CPU measurements, run by `python build.py --measure` (and `--bench`).

Writes results.json (for the build and for machines) and results.md (for people). Everything
outside the "timings" section is a deterministic function of the code, the corpus and the seeds:
a second run gives identical files apart from the date and the timings.
"""

import concurrent.futures
import contextlib
import datetime
import fcntl
import functools
import importlib
import importlib.util
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np

from builder import blas
from experiments import common

ROOT = pathlib.Path(__file__).resolve().parent.parent  # the repository's root
RESULTS_JSON = ROOT / "results.json"
RESULTS_MD = ROOT / "results.md"


# ---------------------------------------------------------------------------
# The experiments, as independent tasks on an executor
#
# A task is one chapter's run(corpus), or one of its PARTS when the module lists them (names of
# functions part(corpus) -> {"values", "curves", "settings", "timings"}): the parts of a chapter
# must not depend on each other. Tasks go to any concurrent.futures.Executor (a local process
# pool by default, or e.g. a Dask cluster's executor), and their outputs are merged in chapter
# and part order, never in completion order, so the results do not depend on the scheduling.


def experiment_modules():
    """experiments/chN.py in chapter order."""
    names = sorted((p.stem for p in (ROOT / "experiments").glob("ch*.py")), key=lambda n: int(n[2:]))
    return [importlib.import_module(f"experiments.{name}") for name in names]


def chapter_tasks(only=None):
    """[(chapter, part or None)] in merge order: a chapter's PARTS, or its run as one task."""
    tasks = []
    for module in experiment_modules():
        chapter = module.__name__.split(".")[-1]
        if only and chapter not in only:
            continue
        tasks += [(chapter, part) for part in getattr(module, "PARTS", None) or [None]]
    return tasks


@functools.cache
def _corpus():
    from pylib import data
    return data.build_corpus()


def run_task(chapter, part=None):
    """One task, in whatever process the executor chose: its output and its wall-clock seconds."""
    sys.path.insert(0, str(ROOT)) if str(ROOT) not in sys.path else None
    module = importlib.import_module(f"experiments.{chapter}")
    from experiments import common
    if common.is_small():
        raise RuntimeError("a measurement inside experiments.common.small_size(): results.json is always the full size")
    t0 = time.perf_counter()
    out = getattr(module, part)(_corpus()) if part else module.run(_corpus())
    return out, time.perf_counter() - t0


def default_executor(workers=None):
    """A local pool of worker processes, one per core unless workers says otherwise."""
    return concurrent.futures.ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1)


SCHEDULER_TIMEOUT = 10  # seconds to reach a Dask scheduler, and for it to have a worker


@contextlib.contextmanager
def cluster_executor(address, timeout=SCHEDULER_TIMEOUT):
    """The executor of the Dask cluster whose scheduler is at address (e.g. "tcp://10.0.0.5:8786"),
    its client closed afterwards. Tasks travel as a reference to run_task, so the scheduler and every
    worker must import this repository (the same code): start them from its root with PYTHONPATH=. (README).
    An unreachable scheduler, one with no workers, or workers that cannot run the tasks are a SystemExit
    with a message, not a traceback."""
    try:
        import distributed
    except ImportError:
        raise SystemExit("--scheduler needs Dask's distributed package, a test requirement: "
                         "`.venv/bin/pip install -r requirements-test.txt`") from None
    try:
        client = distributed.Client(address, timeout=timeout)
    except ValueError as e:
        raise SystemExit(f"--scheduler: {address} is not a scheduler's address ({e})") from None
    except OSError as e:  # a timeout is one
        raise SystemExit(f"--scheduler: no Dask scheduler answered at {address} within {timeout} s ({e})") from None
    with contextlib.closing(client):
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise SystemExit(f"--scheduler: the scheduler at {address} has no workers after {timeout} s: "
                             f"start one with `dask worker {address}`") from None
        # the scheduler unpickles the tasks too: it and every worker must import this repository
        specs = {"the scheduler": client.run_on_scheduler(importlib.util.find_spec, "builder"),
                 **client.run(importlib.util.find_spec, "builder")}  # None where it cannot
        cannot = [name for name, spec in specs.items() if spec is None]
        if cannot:
            raise SystemExit(f"--scheduler: {', '.join(cannot[:3])}{', ...' if len(cannot) > 3 else ''} cannot import "
                             "this repository: start the scheduler and the workers from its root with PYTHONPATH=.")
        if not all(client.run(may_start_processes).values()):
            raise SystemExit("--scheduler: the workers are daemonic processes, which cannot start the PyTorch parts' "
                             "processes: start them with DASK_DISTRIBUTED__WORKER__DAEMON=False")
        yield client.get_executor()


def may_start_processes():
    """On a worker: can it start processes of its own, as companions.launch does? Not if it is daemonic."""
    import multiprocessing
    return not multiprocessing.current_process().daemon


def executor_slots(executor):
    """How many tasks run at once: a local pool's processes, a Dask cluster's threads."""
    client = getattr(executor, "_client", None)  # distributed's ClientExecutor
    return sum(client.nthreads().values()) if client else getattr(executor, "_max_workers", "?")


def run_experiments(only=None, results=None, executor=None, workers=None, timeout=None):
    """Every chapter's experiments (or those named in only, e.g. ["ch5"]), merged into results;
    a key measured twice is an error. Prints one line of progress as each task ends. timeout: seconds
    for every task to end (TimeoutError past it; default: no limit)."""
    results = results or {"values": {}, "curves": {}, "settings": {}, "timings": {}}
    tasks = chapter_tasks(only)
    own = executor is None
    executor = executor or default_executor(workers)
    t0, outputs = time.perf_counter(), {}
    # Longest first (by the last run's task times, when there are any), so that no worker is left
    # with a long task at the end; the merge below is in chapter order whatever the submission order.
    last = last_task_seconds()
    submit_order = sorted(tasks, key=lambda task: -last.get(task_name(*task), 0.0))
    try:
        futures = {executor.submit(run_task, chapter, part): (chapter, part) for chapter, part in submit_order}
        print(f"measure: {len(tasks)} tasks on {executor_slots(executor)} workers", flush=True)
        for done, future in enumerate(concurrent.futures.as_completed(futures, timeout=timeout), 1):
            chapter, part = futures[future]
            outputs[chapter, part] = future.result()
            print(f"measure: [{done}/{len(tasks)}] {task_name(chapter, part)} took "
                  f"{outputs[chapter, part][1]:.1f} s ({time.perf_counter() - t0:.0f} s elapsed)", flush=True)
    finally:
        if own:
            executor.shutdown(cancel_futures=True)
    chapter_seconds = {}
    for chapter, part in tasks:  # merge order, not completion order
        out, seconds = outputs[chapter, part]
        chapter_seconds[chapter] = chapter_seconds.get(chapter, 0.0) + seconds
        for section, entries in out.items():
            clash = set(results[section]) & set(entries)
            if clash:
                raise RuntimeError(f"experiments.{chapter} measures {sorted(clash)} again")
            results[section].update(entries)
    for chapter, seconds in chapter_seconds.items():
        results["timings"][f"{chapter}.total_seconds"] = seconds  # CPU-side: the sum of its tasks
    for (chapter, part), (_, seconds) in outputs.items():
        results["timings"][f"measure.task.{task_name(chapter, part)}"] = seconds
    return results


def task_seconds(timings):
    """The chapters' task seconds summed (each chapter's total_seconds is the sum of its tasks)."""
    return sum(v for k, v in timings.items() if k.startswith("ch") and k.endswith(".total_seconds"))


def task_name(chapter, part):
    return f"{chapter}.{part}" if part else chapter


def last_task_seconds():
    """{task name: seconds} from results.json's timings, for the submission order; {} if none."""
    try:
        timings = json.loads(RESULTS_JSON.read_text()).get("timings", {})
    except (OSError, ValueError):
        return {}
    prefix = "measure.task."
    return {k[len(prefix):]: v for k, v in timings.items() if k.startswith(prefix) and isinstance(v, (int, float))}


# ---------------------------------------------------------------------------
# Writing results


def run_bench():
    """CPython and PyTorch rows (a fresh process, so its thread settings hold) and the in-page row."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_page
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_step.py"), "--json"],
                         check=True, capture_output=True, text=True, cwd=ROOT).stdout
    rows = json.loads(out)
    rows.append(bench_page.bench_in_page())
    cpython = next(r for r in rows if r["implementation"].startswith("pylib (") and r["malloc"] == "default")
    torch_row = next((r for r in rows if r["implementation"].startswith("PyTorch") and r["malloc"] == "default"), None)
    notes = sorted({r["note"] for r in rows})
    notes.append(f"In-page step / CPython step (default malloc): {rows[-1]['median_ms'] / cpython['median_ms']:.1f}×.")
    if torch_row:
        notes.append(f"pylib / PyTorch eager (default malloc): {cpython['median_ms'] / torch_row['median_ms']:.2f}×.")
    notes.append(f"Load average when the bench started: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores.")
    return {"rows": rows, "notes": notes}


def library_versions():
    import jinja2
    import markdown_it
    versions = {"python": platform.python_version(), "numpy": np.__version__,
                "markdown-it-py": markdown_it.__version__, "jinja2": jinja2.__version__}
    try:
        import torch
        versions["torch"] = torch.__version__
    except ImportError:
        pass
    return versions


def write_results(results):
    """results.json and results.md, each written to a temporary file and renamed into place."""
    for path, text in [(RESULTS_JSON, json.dumps(results, indent=1, sort_keys=True, ensure_ascii=False) + "\n"),
                       (RESULTS_MD, results_markdown(results))]:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)


def results_markdown(results):
    """results.md: generated, for people; the same numbers as results.json."""
    meta = results["meta"]
    lines = [
        "# Results",
        "",
        f"Generated by `{meta['command']}` on {meta['date']}. Do not edit: run the command again.",
        f"Libraries: {', '.join(f'{k} {x}' for k, x in sorted(meta['versions'].items()))}. "
        f"Machine: {meta['machine']}.",
        "Everything above **Timings** is deterministic: a second run gives identical numbers.",
        "",
    ]
    for module in experiment_modules():
        try:
            lines += module.markdown(results)
        except (KeyError, TypeError) as missing:  # a chapter added or changed since its last run
            name = module.__name__.split(".")[-1]
            lines += [f"## {name}", "", f"Not measured yet ({type(missing).__name__}: {missing}): run "
                      f"`python build.py --measure --only {name}`.", ""]
    lines += ["## Timings",
              "",
              "Not deterministic: wall-clock figures from the run that wrote this file.",
              ""]
    for key, value in sorted(results["timings"].items()):
        if isinstance(value, (int, float)):
            lines.append(f"- `{key}`: {value:.3f}")
    bench = results["timings"].get("bench")
    if bench:
        lines += ["", f"### The training step (`python build.py --bench`, {bench.get('date', '')})", "",
                  "Forward, backward, clipping and AdamW on a fixed batch of the default model; "
                  "median of several timed loops. Targets: pylib in CPython no slower than PyTorch eager; "
                  "the in-page step within 12× of CPython.", "",
                  "| implementation | malloc | B | T | threads | median ms/step | steps/s |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['implementation']} | {r['malloc']} | {r['B']} | {r['T']} | {r['threads']} | "
                  f"{r['median_ms']:.2f} | {r['steps_per_s']:.0f} |" for r in bench["rows"]]
        lines += ["", *[f"- {note}" for note in bench["notes"]]]
    return "\n".join(lines) + "\n"


def chapter_owns(key, only):
    """Does a key belong to one of the chapters in only? "ch5" owns "ch5.*" and "measure.task.ch5.*"."""
    prefixes = tuple(f"{name}." for name in only)
    return key.startswith(prefixes) or key.startswith(tuple(f"measure.task.{p}" for p in prefixes))


def without_chapters(results, only):
    """A copy of results without the keys of the chapters in only."""
    return {section: {k: v for k, v in entries.items() if not chapter_owns(k, only)}
            for section, entries in results.items() if section != "meta"}


def merge_chapters(fresh, only):
    """Under a lock, the results.json on disk now with the chapters in only replaced by fresh's:
    two --only runs of different chapters at once then both keep their keys."""
    lock = RESULTS_JSON.with_suffix(".json.lock")
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        current = json.loads(RESULTS_JSON.read_text())
        merged = without_chapters(current, only)
        for section, entries in fresh.items():
            if section == "meta":
                continue
            merged.setdefault(section, {}).update(
                {k: v for k, v in entries.items() if chapter_owns(k, only) or section == "timings" and k == "bench"})
        merged["meta"] = current.get("meta", {})
        merged["timings"].pop("measure.total_seconds", None)  # the old name, which meant two things
        # task time summed over the chapters as they now stand; measure.full_run.* stays the last full run's
        merged["timings"]["measure.task_seconds"] = task_seconds(merged["timings"])
        write_results(merged)
    return merged


def measure_on(only=None, workers=None, scheduler=None):
    """run_experiments on a local pool of workers processes, or on the Dask cluster whose scheduler
    is at scheduler (its client closed afterwards): (results, how many tasks ran at once)."""
    if not scheduler:
        return run_experiments(only, workers=workers), workers or os.cpu_count() or 1
    with cluster_executor(scheduler) as executor:
        return run_experiments(only, executor=executor), executor_slots(executor)


def main(measure=True, bench=False, only=None, workers=None, scheduler=None):
    """only: re-measure just these chapters (e.g. ["ch5"]) and keep the other chapters' results.
    workers: processes for the local pool (default: one per core); scheduler: a Dask scheduler's
    address, to run the tasks on its cluster instead."""
    previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.is_file() else None
    if measure and only:
        if not previous:
            raise SystemExit("--only needs an existing results.json: run `python build.py --measure` first")
        unknown = set(only) - {m.__name__.split(".")[-1] for m in experiment_modules()}
        if unknown:
            raise SystemExit(f"--only: no experiments/{sorted(unknown)[0]}.py")
        fresh, _ = measure_on(only, workers, scheduler)
        if bench:
            fresh["timings"]["bench"] = run_bench()
            fresh["timings"]["bench"]["date"] = datetime.date.today().isoformat()
        merge_chapters(fresh, only)
        print(f"merged {', '.join(only)} into {RESULTS_JSON.name} and {RESULTS_MD.name}")
        return
    if measure:
        t0, load = time.perf_counter(), os.getloadavg()[0]
        results, slots = measure_on(None, workers, scheduler)
        wall = time.perf_counter() - t0
        # a full run's wall time beside its task time (the tasks' seconds summed, what one worker
        # would take) and its worker count: the budget is 15 minutes of wall time on 2 cores
        results["timings"]["measure.task_seconds"] = task_seconds(results["timings"])
        results["timings"].update({"measure.full_run.wall_seconds": wall, "measure.full_run.workers": slots,
                                   "measure.full_run.task_seconds": results["timings"]["measure.task_seconds"],
                                   "measure.full_run.load_average_at_start": load})
        print(f"measure: {wall:.0f} s wall, {results['timings']['measure.task_seconds']:.0f} s of tasks on "
              f"{results['timings']['measure.full_run.workers']} workers", flush=True)
    elif previous:
        results = previous
    else:
        raise SystemExit("no results.json yet: run `python build.py --measure` first")
    if bench:
        results["timings"]["bench"] = run_bench()
    elif previous and "bench" in previous.get("timings", {}):
        results["timings"]["bench"] = previous["timings"]["bench"]
    if measure:
        results["meta"] = {
            "command": "python build.py --measure",
            "date": datetime.date.today().isoformat(),
            "versions": library_versions(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                       f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, {blas.setting()}",
            "seeds": list(common.SEEDS),
        }
    if bench:
        results["timings"]["bench"]["date"] = datetime.date.today().isoformat()
    write_results(results)
    print(f"wrote {RESULTS_JSON.name} and {RESULTS_MD.name}")
