"""What the chapters' notebooks share (notebooks/NN-slug.py, built into the site as .ipynb).

A notebook runs its chapter's experiments from experiments/chN.py, the same parts that
`build.py --measure` runs, and shows what results.md shows: the chapter's tables (the module's own
markdown()), per-seed values and paired verdicts (pylib.compare, through experiments.common), and
matplotlib versions of its charts. Nothing here is read by the page or by --measure.

    from experiments import ch1, notebook as nb
    corpus = nb.start(small=SMALL)   # progress bars, the size, the corpus
    results = nb.run(ch1, corpus)    # every part, with a progress bar
    nb.show(ch1.markdown(results))   # results.md's section for the chapter
"""

import math

from experiments import common


def corpus():
    """The course corpus, built from the plays as --measure builds it (pylib.data.build_corpus)."""
    from pylib import data
    return data.build_corpus()


def use_progress_bars():
    """tqdm's bars on the parts and on the loops the experiments mark (experiments.common.progress)."""
    from tqdm.auto import tqdm
    common._progress = tqdm


def start(small=False):
    """A notebook's first call: tqdm's progress bars on, and every part and run after it at the full
    size or, with small=True (the tests' SMALL), at the reduced size (experiments.common.scaled).
    Returns the corpus."""
    use_progress_bars()
    common._small = bool(small)
    return corpus()


def run(module, corpus, parts=None):
    """The chapter's parts (module.PARTS, or the names given), one after the other with a progress bar:
    one output as --measure merges it, {"values", "curves", "settings", "timings"}."""
    return common.run_parts(vars(module), parts or module.PARTS, corpus)


def merged(*outputs):
    """Several run() outputs as one (the later ones win on a shared key)."""
    out = {"values": {}, "curves": {}, "settings": {}, "timings": {}}
    for o in outputs:
        for section, entries in o.items():
            out.setdefault(section, {}).update(entries)
    return out


def show(lines):
    """Markdown lines (a module's markdown(results), or a table built here) rendered in the notebook,
    or printed outside one."""
    text = "\n".join(lines) if not isinstance(lines, str) else lines
    try:
        from IPython.display import Markdown, display
    except ImportError:
        print(text)
        return
    display(Markdown(text))


def fmt(x, spec=".4f"):
    if x is None:
        return "diverged"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)


def arms_table(values, keys, spec=".4f"):
    """A table of stored arms (experiments.common.arm): each seed's value, the mean and the sd."""
    seeds = sorted({s for k in keys for s in values[f"{k}.per_seed"]}, key=int)
    lines = ["| arm | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± sd |",
             "| --- |" + " --- |" * (len(seeds) + 1)]
    for k in keys:
        per = values[f"{k}.per_seed"]
        mean, sd = values.get(f"{k}.mean"), values.get(f"{k}.sd")
        summary = "–" if mean is None else f"{fmt(mean, spec)} ± {fmt(sd, spec)}"
        lines.append(f"| `{k}` | " + " | ".join(fmt(per.get(s), spec) for s in seeds) + f" | {summary} |")
    return lines


def verdict(values, key_a, key_b, margin=0.0):
    """The paired comparison a - b over seeds, in results.md's words (pylib.compare)."""
    return f"`{key_a}` − `{key_b}` (margin {margin}): " + common.paired_text(values, key_a, key_b, margin)


def plot_band(ax, steps, mean, sd, label, color=None):
    """A mean curve with its ±1 sd band over seeds, as the chapters' charts draw it."""
    import numpy as np
    mean, sd = np.asarray(mean, dtype=float), np.asarray(sd, dtype=float)
    line, = ax.plot(steps, mean, label=label, color=color)
    ax.fill_between(steps, mean - sd, mean + sd, color=line.get_color(), alpha=0.2, linewidth=0)
    return line


def device():
    """"cuda" when PyTorch sees a GPU, else "cpu": the Beyond the toy sections say which they used."""
    from companions import beyond
    return beyond.device()
