"""Checked exercises: each chapter ends with a few, and their checks are plain Python, here.

One check serves two callers: the page's cell worker (site/js/exercises.js through
pylib.web.cells.check_in_page) and the command line (`python -m pylib.exercises check ch5
answers.py`). Both give the same messages, because both call check(exercise_id, answer).

There are three kinds of exercise:

- implement: the reader writes a function (the answer is code that defines `function`); the
  check calls it on random and edge-case inputs and compares it with pylib's own computation;
- predict: the reader commits a number before the run shows it (the answer is that number);
  the check computes the true value with pylib and says how far off the prediction was;
- investigate: the reader changes one condition of a fixed run (the answer is code too); the check
  compares the changed run's outputs, gradients and update with the unchanged run, within
  tolerances the chapter justifies.

A check says what is wrong without giving the answer away. Each exercise lists the typical wrong
answers (`Mistake`: the answer and a fragment of the message it must get); tests/test_exercises.py
runs every one of them, and the reference solution, through check().

Each chapter's exercises are in chNN.py, registered in EXERCISES in chapter order. A chapter shows
an exercise with `{{ exercise("chN.name") }}` (build.py), which renders its task, its answer box,
its hints and its solution (hidden until asked for).
"""

import dataclasses
import importlib
import linecache
import math
import re
import sys
import traceback
import warnings
from typing import Callable

KINDS = ("implement", "predict", "investigate")
ANSWER_FILE = "<answer>"  # the filename the reader's code is compiled under (tracebacks name it)
CHAPTERS = 16


class Wrong(Exception):
    """Raised by a check: the answer is wrong, and str(self) says what is wrong (not the answer)."""


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A typical wrong answer (code, or a number as text) and a fragment of the message it gets."""

    answer: str
    message: str


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a check says: passed or not, one message, and for a prediction the value and the truth."""

    passed: bool
    message: str
    status: str = "checked"  # "checked" | "invalid" (the answer could not be checked: syntax, name, number)
    value: float | None = None  # predict: the reader's number
    truth: float | None = None  # predict: pylib's

    def as_dict(self):
        d = dataclasses.asdict(self)
        for k in ("value", "truth"):
            if d[k] is not None and not math.isfinite(d[k]):
                d[k] = None
        return d


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One exercise. check(answer) raises Wrong (or returns a message of success):

    implement, investigate: answer is the reader's function, taken from their code by `function`;
    predict: answer is the reader's number (a finite float); the check compares it with truth()."""

    id: str  # "chN.name"
    kind: str
    title: str
    task: str  # Markdown, rendered in the chapter and printed by the command line
    check: Callable
    solution: str  # implement, investigate: reference code; predict: the worked answer (Markdown)
    mistakes: tuple = ()  # Mistake(...) each
    hints: tuple = ()  # Markdown, shown one at a time
    starter: str = ""  # implement, investigate: the code the answer box starts with
    function: str = ""  # implement, investigate: the function the answer defines
    unit: str = ""  # predict: the unit of the number ("nats", "bytes", ...)
    tolerance: float = 0.05  # predict: relative distance that counts as right
    truth: Callable | None = None  # predict: the value, computed by pylib
    needs_corpus: bool = False  # the check reads corpus() (the page loads it first)

    @property
    def chapter(self):
        return int(self.id.split(".")[0][2:])

    @property
    def takes_code(self):
        return self.kind != "predict"


# ---------------------------------------------------------------------------
# The registry


def _collect():
    out = {}
    for n in range(1, CHAPTERS + 1):
        try:
            module = importlib.import_module(f"pylib.exercises.ch{n:02d}")
        except ModuleNotFoundError as e:
            if e.name != f"pylib.exercises.ch{n:02d}":
                raise
            continue
        for ex in module.EXERCISES:
            if ex.id in out:
                raise ValueError(f"two exercises are called {ex.id}")
            if not ex.id.startswith(f"ch{n}."):
                raise ValueError(f"{ex.id} is in ch{n:02d}.py")
            if ex.kind not in KINDS:
                raise ValueError(f"{ex.id}: kind {ex.kind!r} is not one of {KINDS}")
            if ex.takes_code and not (ex.function and ex.starter):
                raise ValueError(f"{ex.id}: a code exercise needs its function's name and a starter")
            if ex.kind == "predict" and ex.truth is None:
                raise ValueError(f"{ex.id}: a prediction needs truth()")
            out[ex.id] = ex
    return out


_REGISTRY = None


def exercises():
    """{id: Exercise}, every chapter's, in chapter order (imported on first use)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _collect()
    return _REGISTRY


def of_chapter(chapter):
    """The exercises of chapter (an int, or "ch5"), in their order."""
    text = str(chapter).removeprefix("ch")
    if not text.isdigit():
        raise ValueError(f"{chapter!r} is not a chapter: write ch1 to ch{CHAPTERS}")
    n = int(text)
    return [ex for ex in exercises().values() if ex.chapter == n]


def get(exercise_id):
    ex = exercises().get(exercise_id)
    if ex is None:
        chapter = str(exercise_id).split(".", 1)[0]
        known = [i for i in exercises() if i.startswith(chapter + ".")] or list(exercises())
        raise KeyError(f"no exercise {exercise_id!r} (known: {', '.join(known)})")
    return ex


# ---------------------------------------------------------------------------
# What a check may use: the corpus (built once, or the page's), progress, and comparisons

_corpus = None
_progress = None  # progress(text): a slow check says how far it is


def corpus():
    """The course's corpus: in the page, the one the worker loaded; elsewhere built once."""
    global _corpus
    if _corpus is None:
        from pylib import data
        _corpus = data.build_corpus()
    return _corpus


def use_corpus(value):
    global _corpus
    _corpus = value


_kept = {}


def kept(key, make):
    """make(), computed once for the corpus in use and kept: for what a check compares an answer with
    that does not depend on the answer (a reference run, the live pairs, a checkpoint), so that the
    reader's next try is checked sooner. Its arrays are made read-only: a check that wrote to one
    would fail loudly rather than spoil the next check."""
    c = corpus()
    entry = _kept.get(key)
    if entry is None or entry[0] is not c:
        entry = _kept[key] = (c, _read_only(make()))
    return entry[1]


def _read_only(value):
    import numpy as np
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, dict):
        for v in value.values():
            _read_only(v)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _read_only(v)
    return value


def progress(text):
    """A slow check reports how far it is (the page shows it; the command line prints it)."""
    if _progress is not None:
        _progress(text)


def max_error(got, want):
    """max |got - want| as a float (inf when shapes differ or got is not finite)."""
    import numpy as np
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    if got.shape != want.shape:
        return math.inf
    if got.size == 0:
        return 0.0
    if not np.all(np.isfinite(got)):
        return math.inf
    return float(np.abs(got - want).max())


def close(got, want, rtol=1e-7, atol=1e-9):
    """got matches want elementwise (same shape, finite) within atol + rtol * |want|."""
    import numpy as np
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return got.shape == want.shape and bool(np.all(np.isfinite(got))) and bool(
        np.all(np.abs(got - want) <= atol + rtol * np.abs(want)))


def expect_number(got, what):
    """got as a float: one real number (a Python or NumPy scalar, or a 0-d array); otherwise Wrong."""
    import numpy as np
    if isinstance(got, (bool, np.bool_)) or got is None:
        raise Wrong(f"{what} should be a number; yours is {got!r}.")
    if isinstance(got, np.ndarray) and got.ndim == 0:
        got = got[()]
    if isinstance(got, np.ndarray):
        raise Wrong(f"{what} should be one number; yours is an array of shape {got.shape} (is a sum or mean missing?).")
    if not isinstance(got, (int, float, np.integer, np.floating)):
        raise Wrong(f"{what} should be a number; yours is a {type(got).__name__}.")
    return float(got)


def expect_array(got, shape, what):
    """got is an array of this shape with finite values; otherwise Wrong says which."""
    import numpy as np
    if not isinstance(got, np.ndarray):
        raise Wrong(f"{what} should be a NumPy array; yours is a {type(got).__name__}.")
    if got.shape != tuple(shape):
        raise Wrong(f"{what} should have shape {tuple(shape)}; yours has {got.shape}.")
    if not np.all(np.isfinite(got)):
        raise Wrong(f"{what} has values that are not finite (nan or inf).")
    return got


# ---------------------------------------------------------------------------
# Checking an answer


def number(text):
    """The reader's prediction as a float; Wrong (with what to type instead) when it is not one."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        raw = str(text).strip().replace("\u2212", "-").replace(",", "").replace("_", "")
        if not raw:
            raise Wrong("Type a number first.")
        if len(raw) > 60:
            raise Wrong("That is too long to be a number: type one number, like 1.25 or 3e-4.")
        try:
            value = float(raw)
        except ValueError:
            raise Wrong(f"{str(text).strip()[:30]!r} is not a number: type one, like 1.25 or 3e-4.") from None
    if not math.isfinite(value):
        raise Wrong("A prediction has to be a finite number.")
    return value


def load_function(ex, code):
    """The function the reader's code defines, compiled under ANSWER_FILE; Wrong when it cannot be had."""
    if not isinstance(code, str) or not code.strip():
        raise Wrong(f"The answer is empty: define a function called {ex.function}.")
    linecache.cache[ANSWER_FILE] = (len(code), None, code.splitlines(True), ANSWER_FILE)
    try:
        compiled = compile(code, ANSWER_FILE, "exec")
    except SyntaxError as e:
        where = f" on line {e.lineno}" if e.lineno else ""
        raise Wrong(f"{type(e).__name__}{where}: {e.msg}. Nothing was run.") from None
    namespace = {"__name__": "answer"}
    exec(compiled, namespace)
    return function_from(ex, namespace)


def function_from(ex, namespace):
    """namespace[ex.function], checked: a function whose parameters are the starter's."""
    import inspect
    fn = namespace.get(ex.function)
    if fn is None:
        defined = sorted(k for k, v in namespace.items() if inspect.isfunction(v) and not k.startswith("_"))
        also = f" (it defines {', '.join(defined)})" if defined else ""
        raise Wrong(f"The answer must define a function called {ex.function}{also}.")
    if not callable(fn):
        raise Wrong(f"{ex.function} must be a function; yours is a {type(fn).__name__}.")
    want = starter_parameters(ex)
    try:
        got = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        got = None
    if got is not None and got != want:
        raise Wrong(f"{ex.function} takes ({', '.join(want)}); yours takes ({', '.join(got)}). "
                    "Keep the starter's signature: the check calls it that way.")
    return fn


def starter_parameters(ex):
    """The parameter names of the starter's ex.function."""
    import ast
    for node in ast.walk(ast.parse(ex.starter)):
        if isinstance(node, ast.FunctionDef) and node.name == ex.function:
            a = node.args
            return [p.arg for p in a.posonlyargs + a.args] + ([a.vararg.arg] if a.vararg else []) + \
                [p.arg for p in a.kwonlyargs] + ([a.kwarg.arg] if a.kwarg else [])
    raise ValueError(f"{ex.id}: the starter does not define {ex.function}")


def _answer_line(exc):
    """The line of the answer where exc was raised or last passed through; None if it never did."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == ANSWER_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def check(exercise_id, answer, progress_to=None):
    """Check the reader's answer (code, or a number as text) to exercise_id: a Verdict.

    A KeyboardInterrupt (the page's Stop) passes through. Any other error in the reader's code is
    reported with its line; an error in the check itself is reported as the check's fault."""
    global _progress
    ex = get(exercise_id)
    old, _progress = _progress, progress_to
    try:
        with warnings.catch_warnings(), _quiet_numpy():
            warnings.simplefilter("ignore")  # an overflow is the check's to report, in its own words
            return _check(ex, answer)
    finally:
        _progress = old


def _quiet_numpy():
    import numpy as np
    return np.errstate(all="ignore")


def _check(ex, answer):
    try:
        answer_value = number(answer) if ex.kind == "predict" else load_function(ex, answer)
    except Wrong as e:
        return Verdict(False, str(e), status="invalid")
    except Exception as e:  # the answer's own top-level code raised
        line = _answer_line(e)
        where = f" (line {line})" if line else ""
        return Verdict(False, f"Your code raised {type(e).__name__}{where} before the check could start: {e}",
                       status="invalid")
    try:
        if ex.kind == "predict":
            return _check_prediction(ex, answer_value)
        message = ex.check(answer_value)
        return Verdict(True, message or "Right: every case matches.")
    except Wrong as e:
        return Verdict(False, str(e))
    except KeyboardInterrupt:
        raise
    except RecursionError:
        return Verdict(False, "Your function recursed too deeply (RecursionError).")
    except MemoryError:
        return Verdict(False, "Your function ran out of memory (MemoryError): does it build an array far "
                              "larger than its inputs?")
    except Exception as e:
        line = _answer_line(e)
        if line is None:  # not raised in the reader's code: the check itself failed
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            return Verdict(False, f"The check itself failed ({detail}); this is the course's bug, not yours.",
                           status="invalid")
        return Verdict(False, f"Your function raised {type(e).__name__} on line {line}: {e}")


def _check_prediction(ex, value):
    """A prediction against pylib's value: right within ex.tolerance (relative), else how far off.

    ex.check(value, truth) may raise Wrong with a message for a typical wrong prediction; it is
    called only when the prediction is off."""
    truth = truth_of(ex)
    fmt = lambda x: f"{x:.4g}"  # noqa: E731
    unit = f" {ex.unit}" if ex.unit else ""
    off = value - truth
    rel = abs(off) / abs(truth) if truth != 0 else abs(off)
    if rel <= ex.tolerance:
        return Verdict(True, f"Right: pylib gives {fmt(truth)}{unit}; you said {fmt(value)}{unit} "
                             f"({_how_far(off, rel, truth)}).", value=value, truth=truth)
    hint = ""
    try:
        ex.check(value, truth)
    except Wrong as e:
        hint = " " + str(e)
    return Verdict(False, f"Off: pylib gives {fmt(truth)}{unit}; you said {fmt(value)}{unit} "
                          f"({_how_far(off, rel, truth)}).{hint}", value=value, truth=truth)


_truths = {}


def truth_of(ex):
    """ex.truth(), computed once per process (it depends only on pylib and the corpus)."""
    if ex.id not in _truths:
        _truths[ex.id] = float(ex.truth())
    return _truths[ex.id]


def _how_far(off, rel, truth):
    if off == 0:
        return "exactly"
    if truth == 0:
        return f"{abs(off):.3g} {'high' if off > 0 else 'low'}"
    if rel >= 10:
        return f"{abs(off / truth) + (1 if off > 0 else -1):.3g}× {'too high' if off > 0 else 'off'}"
    return f"{rel:.1%} {'high' if off > 0 else 'low'}"


def near(value, target, rtol=0.02):
    """For a prediction's typical wrong values: value is within rtol of target."""
    return abs(value - target) <= rtol * max(abs(target), 1e-12)


# ---------------------------------------------------------------------------
# Reading a file of answers (the command line)


def check_file(chapter, path, out=sys.stdout):
    """Check every exercise of chapter that the file answers; returns the number that failed.

    The file is Python: it defines the code exercises' functions by their names, and gives each
    prediction as a variable of the same name as the exercise (e.g. `loss_at_step_0 = 4.2`)."""
    from pathlib import Path
    exs = of_chapter(chapter)
    if not exs:
        print(f"No exercises for {chapter}.", file=out)
        return 1
    text = Path(path).read_text()
    failed = 0
    for ex in exs:
        name = ex.function if ex.takes_code else ex.id.split(".", 1)[1]
        if not re.search(rf"^(def\s+{re.escape(name)}\b|{re.escape(name)}\s*=)", text, re.M):
            print(f"[ -- ] {ex.id} ({ex.kind}): not answered (define {name})", file=out)
            continue
        if ex.takes_code:
            answer = text
        else:
            namespace = {"__name__": "answers"}
            try:
                exec(compile(text, str(path), "exec"), namespace)
                answer = namespace.get(name, "")
                if answer is None:
                    print(f"[ -- ] {ex.id} ({ex.kind}): not answered ({name} is None)", file=out)
                    continue
            except Exception as e:  # noqa: BLE001
                answer = f"<{type(e).__name__}: {e}>"
        verdict = check(ex.id, answer, progress_to=lambda t: print(f"       {t}", file=out, flush=True))
        failed += not verdict.passed
        print(f"[{' ok ' if verdict.passed else 'FAIL'}] {ex.id} ({ex.kind}): {verdict.message}", file=out)
    return failed
