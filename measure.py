"""The course's CPU measurements, run by `python build.py --measure` (and `--bench`).

Writes results.json (for the build and for machines) and results.md (for people). Everything
outside the "timings" section is a deterministic function of the code, the corpus and the seeds:
a second run gives identical files apart from the date and the timings.
"""

import dataclasses
import datetime
import json
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent
RESULTS_JSON = ROOT / "results.json"
RESULTS_MD = ROOT / "results.md"
SEEDS = (0, 1, 2)  # every setting is run with these three seeds
PLATEAU_MARGIN = 0.1  # nats: "at the unigram loss" means within this of it


# ---------------------------------------------------------------------------
# Chapter 1: the default run


def mean_sd(xs):
    """Mean and sample standard deviation (n - 1) of a list of floats."""
    return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0


def first_step(history, key, predicate):
    """The first eval step whose record[key] satisfies predicate, or None."""
    return next((r["step"] for r in history if r.get(key) is not None and predicate(r[key])), None)


def run_default(corpus, seeds=SEEDS, train_cfg=None):
    """The default run (TrainConfig()'s settings) once per seed: finals, plateau, curves."""
    from pylib import data, model, sample, train
    model_cfg = model.GPTConfig()
    base = train_cfg or train.TrainConfig()
    unigram = data.unigram_loss(corpus.train, corpus.val, corpus.vocab.size)
    runs, samples, seconds = [], {}, {}
    for seed in seeds:
        cfg = dataclasses.replace(base, seed=seed)
        t0 = time.perf_counter()
        params, history = train.train(model_cfg, cfg, corpus.train, corpus.val)
        seconds[seed] = time.perf_counter() - t0
        runs.append(history)
        prompt, _ = corpus.vocab.encode("ROMEO:\n")
        ids = sample.generate(params, model_cfg, list(prompt), 200, temperature=0.8, seed=seed)
        samples[seed] = corpus.vocab.decode(ids)
    evals = [[r for r in h if r.get("val") is not None] for h in runs]
    steps = [r["step"] for r in evals[0]]
    values = {"ch1.unigram_loss": unigram, "ch1.ln_vocab": math.log(corpus.vocab.size)}
    for name, key in [("final_train", "train_eval"), ("final_val", "val")]:
        values[f"ch1.default.{name}.mean"], values[f"ch1.default.{name}.sd"] = mean_sd([e[-1][key] for e in evals])
    ppl = [math.exp(e[-1]["val"]) for e in evals]
    values["ch1.default.val_ppl.mean"], values["ch1.default.val_ppl.sd"] = mean_sd(ppl)
    gap = [e[-1]["val"] - e[-1]["train_eval"] for e in evals]
    values["ch1.default.gap.mean"], values["ch1.default.gap.sd"] = mean_sd(gap)
    reach = [first_step(e, "val", lambda v: v < unigram + PLATEAU_MARGIN) for e in evals]
    leave = [first_step(e, "val", lambda v: v < unigram - PLATEAU_MARGIN) for e in evals]
    if None not in reach and None not in leave:
        values["ch1.default.plateau_reached.mean"], values["ch1.default.plateau_reached.sd"] = mean_sd(reach)
        values["ch1.default.plateau_left.mean"], values["ch1.default.plateau_left.sd"] = mean_sd(leave)
    values["ch1.default.seeds"] = len(seeds)
    values["ch1.default.sample"] = samples[seeds[0]]
    curves = {"steps": steps}
    for key, name in [("train_eval", "train"), ("val", "val")]:
        per_step = np.array([[r[key] for r in e] for e in evals])  # (seeds, evals)
        curves[f"{name}_mean"] = _round(per_step.mean(axis=0))
        curves[f"{name}_sd"] = _round(per_step.std(axis=0, ddof=1))
    losses = np.array([[r["loss"] for r in h] for h in runs])  # (seeds, steps)
    curves["loss_mean"] = _round(losses.mean(axis=0))
    settings = {k: v for k, v in dataclasses.asdict(base).items() if k != "seed"}
    return {"values": values, "curves": {"ch1.default": curves}, "settings": {"ch1.default": settings},
            "timings": {"ch1.default.seconds_per_run": statistics.median(seconds.values())}}


def _round(arr, digits=5):
    return [round(float(x), digits) for x in arr]


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
    RESULTS_JSON.write_text(json.dumps(results, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    RESULTS_MD.write_text(results_markdown(results), encoding="utf-8")


def results_markdown(results):
    """results.md: generated, for people; the same numbers as results.json."""
    meta, v = results["meta"], results["values"]
    lines = [
        "# Results",
        "",
        f"Generated by `{meta['command']}` on {meta['date']}. Do not edit: run the command again.",
        f"Libraries: {', '.join(f'{k} {x}' for k, x in sorted(meta['versions'].items()))}. "
        f"Machine: {meta['machine']}.",
        "Everything above **Timings** is deterministic: a second run gives identical numbers.",
        "",
        "## Chapter 1: the default run",
        "",
        f"Settings: {', '.join(f'{k}={x}' for k, x in sorted(results['settings']['ch1.default'].items()))}; "
        f"seeds {', '.join(map(str, meta['seeds']))}. Mean ± sample sd over seeds.",
        "",
        "| quantity | value | key |",
        "| --- | --- | --- |",
    ]
    rows = [("final train loss (fixed train windows)", "ch1.default.final_train"),
            ("final validation loss", "ch1.default.final_val"),
            ("validation perplexity", "ch1.default.val_ppl"),
            ("generalisation gap (val − train)", "ch1.default.gap"),
            ("eval step where val loss first comes within 0.1 of the unigram loss", "ch1.default.plateau_reached"),
            ("eval step where val loss first drops 0.1 below the unigram loss", "ch1.default.plateau_left")]
    for label, key in rows:
        if f"{key}.mean" in v:
            lines.append(f"| {label} | {v[key + '.mean']:.4f} ± {v[key + '.sd']:.4f} | `{key}` |")
    lines += [f"| unigram (letter-frequency) loss | {v['ch1.unigram_loss']:.4f} | `ch1.unigram_loss` |",
              f"| ln V | {v['ch1.ln_vocab']:.4f} | `ch1.ln_vocab` |",
              "",
              f"Sample (seed {meta['seeds'][0]}, temperature 0.8, prompt `ROMEO:`):",
              "",
              "```",
              v["ch1.default.sample"].rstrip(),
              "```",
              "",
              "## Timings",
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


def main(measure=True, bench=False):
    from pylib import data
    previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.is_file() else None
    if measure:
        t0 = time.perf_counter()
        corpus = data.build_corpus()
        results = run_default(corpus)
        results["timings"]["measure.total_seconds"] = time.perf_counter() - t0
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
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "seeds": list(SEEDS),
        }
    if bench:
        results["timings"]["bench"]["date"] = datetime.date.today().isoformat()
    write_results(results)
    print(f"wrote {RESULTS_JSON.name} and {RESULTS_MD.name}")
