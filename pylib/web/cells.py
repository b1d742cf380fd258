"""Editable code cells: run a reader's edited copy of a pylib function against the live pylib.

A cell (build.py's `editable(name)`, site/js/cells.js) shows the source of one pylib function,
pulled from pylib at build time. The reader edits it and presses Run; the page's cell worker (a
PyScript worker on the site's own Pyodide, separate from the widgets' worker) calls `run(name,
code, emit)`, which

1. compiles the edited source (a SyntaxError is reported with its line, and nothing runs);
2. executes it in a copy of the function's module namespace, so the helpers and imports it uses
   resolve exactly as they do in pylib, and takes the function of the same name from it;
3. hands that function to the cell's driver (CELLS, from cell_drivers.py), which runs it next to
   pylib's own on the same inputs and prints both. The optimiser and schedule drivers train the
   course model with the edited function patched into pylib for the run (and restored afterwards,
   even when the run fails or is stopped), then compare with the unedited function on the same seed.

Output goes to `emit(text, stream)` ("out" or "err") in pieces, at most every FLUSH_SECONDS unless
a driver flushes, and at most OUTPUT_LIMIT characters per run. A KeyboardInterrupt (the page's
Stop button raises one through Pyodide's interrupt buffer) ends the run as "stopped".

No numerics here nor in cell_drivers.py: training is pylib.train, the loss pylib.loss, rounding
pylib.systems.precision, the ring pylib.systems.collectives; these modules only swap the reader's
function in and report.
"""

import contextlib
import importlib
import io
import json
import linecache
import math
import sys
import time
import traceback

from pylib.web.cell_drivers import CELLS

CELL_FILE = "<cell>"  # the filename the edited code is compiled under (tracebacks name it)
FLUSH_SECONDS = 0.05  # output is sent to the page at most this often (a print loop cannot flood it)
OUTPUT_LIMIT = 100_000  # characters of output kept per run; the rest is dropped, and that is said


# ---------------------------------------------------------------------------
# Output


class CellOutput(io.TextIOBase):
    """A text stream that forwards to emit(text, stream) in throttled pieces, with a size limit."""

    def __init__(self, emit, stream, shared):
        self.emit, self.stream, self.shared = emit, stream, shared  # shared: one budget for out and err
        self.parts = []

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        budget = OUTPUT_LIMIT - self.shared["chars"]
        if budget <= 0:
            self.shared["dropped"] += len(text)
            return len(text)
        kept = text[:budget]
        self.shared["chars"] += len(kept)
        self.shared["dropped"] += len(text) - len(kept)
        self.parts.append(kept)
        if time.monotonic() - self.shared["last"] >= FLUSH_SECONDS:
            self.flush()
        return len(text)

    def flush(self):
        if self.parts:
            text, self.parts = "".join(self.parts), []
            self.shared["last"] = time.monotonic()
            self.emit(text, self.stream)


@contextlib.contextmanager
def captured(emit):
    """sys.stdout and sys.stderr into emit for the duration; yields the shared counters."""
    shared = {"chars": 0, "dropped": 0, "last": 0.0}
    out, err = CellOutput(emit, "out", shared), CellOutput(emit, "err", shared)
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        yield shared
    finally:
        sys.stdout, sys.stderr = old
        out.flush()
        err.flush()
        if shared["dropped"]:
            emit(f"\n[{shared['dropped']:,} more characters of output were not shown: "
                 f"a run shows at most {OUTPUT_LIMIT:,}]\n", "err")


# ---------------------------------------------------------------------------
# Running the edited code


def resolve(name):
    """(module, attribute name) of a dotted pylib name, e.g. "pylib.optim.adamw_step"."""
    module_name, _, attr = name.rpartition(".")
    module = importlib.import_module(module_name)
    getattr(module, attr)  # AttributeError for an unknown name
    return module, attr


class CellError(Exception):
    """A problem with the edited code that is reported as one sentence (no traceback)."""

    def __init__(self, message, line=None):
        super().__init__(message)
        self.line = line


def compile_edited(name, code):
    """The edited function: code compiled and executed in a copy of its module's namespace."""
    module, attr = resolve(name)
    linecache.cache[CELL_FILE] = (len(code), None, code.splitlines(True), CELL_FILE)  # tracebacks show the lines
    try:
        compiled = compile(code, CELL_FILE, "exec")
    except SyntaxError as e:
        where = f" on line {e.lineno}" if e.lineno else ""
        text = (e.text or "").rstrip("\n")
        detail = ""
        if text:
            caret = " " * max((e.offset or 1) - 1 - (len(text) - len(text.lstrip())), 0) + "^"
            detail = f"\n    {text.strip()}\n    {caret}"
        raise CellError(f"{type(e).__name__}{where}: {e.msg}.{detail}", e.lineno) from None
    namespace = dict(vars(module))  # the module's helpers and imports, as pylib sees them
    exec(compiled, namespace)
    fn = namespace.get(attr)
    if not callable(fn) or fn is getattr(module, attr):
        raise CellError(f"The cell must define a function called {attr} (it is what Run uses).")
    return fn


def _cell_line(exc):
    """The line of the cell where exc was raised, or last passed through; None if it never did."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == CELL_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _traceback_text(exc):
    """The traceback from the first frame of the cell on (or from the driver, if the cell is not in it)."""
    tb = exc.__traceback__
    first = tb
    while first is not None and first.tb_frame.f_code.co_filename != CELL_FILE:
        first = first.tb_next
    if first is None:  # raised outside the edited code (e.g. a driver check): skip run()'s own frames
        first = tb.tb_next if tb is not None else None
    return "".join(traceback.format_exception(type(exc), exc, first))


def run(name, code, emit, corpus=None):
    """Run the cell for pylib function name with the edited source code; output goes to emit.

    Returns {"status": "done" | "error" | "stopped", "message", "line", "result", "seconds"}:
    line is the cell's line an error points at (None if none), result the driver's summary."""
    t0 = time.perf_counter()
    cell = CELLS.get(name)
    if cell is None:
        return {"status": "error", "message": f"No cell runs {name}.", "line": None, "result": None, "seconds": 0.0}
    status, message, line, result = "done", "", None, None
    with captured(emit):
        try:
            fn = compile_edited(name, code)
            result = cell.driver(fn, corpus)
            message = "Finished."
        except CellError as e:
            status, message, line = "error", str(e).split("\n")[0], e.line
            print(str(e), file=sys.stderr)
        except KeyboardInterrupt:
            status, message = "stopped", "Stopped."
            print("\nStopped by the reader.", file=sys.stderr)
        except Exception as e:  # the reader's code raised: show where, as Python would
            status, line = "error", _cell_line(e)
            where = f" (line {line} of the cell)" if line else ""
            message = f"{type(e).__name__}{where}: {e}"
            print(_traceback_text(e), end="", file=sys.stderr)
    return {"status": status, "message": message, "line": line, "result": _jsonable(result),
            "seconds": time.perf_counter() - t0}


def _jsonable(value):
    """Floats that are not finite become None, so the result is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def run_json(name, code, emit, corpus=None):
    """run() with a JSON result, for the worker (no Python object crosses to the page)."""
    return json.dumps(run(name, code, emit, corpus), allow_nan=False)


# ---------------------------------------------------------------------------
# In the page's cell worker


CORPUS_FILES = ("train.bin", "val.bin", "vocab.json")  # what site/js/worker.js loads too
_CORPUS = {}


async def load_corpus(data_url):
    """The corpus, fetched from the site's data/ folder once per worker (pylib.web.Session reads it)."""
    if data_url in _CORPUS:
        return _CORPUS[data_url]
    import pathlib

    from pyodide.http import pyfetch  # only in the page

    from pylib import data
    from pylib.web import Session

    folder = pathlib.Path("/cell-corpus")
    folder.mkdir(exist_ok=True)
    for name in CORPUS_FILES:
        response = await pyfetch(data_url + name)
        if not response.ok:
            raise OSError(f"could not fetch data/{name} (HTTP {response.status})")
        (folder / name).write_bytes(await response.bytes())
    session = Session()
    session.load_corpus(folder)
    _CORPUS[data_url] = data.Corpus(vocab=session.vocab, train=session.train_tokens, val=session.val_tokens, stats={})
    return _CORPUS[data_url]


async def run_in_page(name, code, emit, data_url):
    """The worker's entry point: loads the corpus if the cell needs it, then run_json."""
    cell = CELLS.get(name)
    corpus = None
    if cell is not None and cell.needs_corpus:
        try:
            corpus = await load_corpus(data_url)
        except Exception as e:  # noqa: BLE001 (a failed fetch is reported in the cell, not raised)
            return json.dumps({"status": "error", "message": f"The corpus could not be loaded: {e}", "line": None,
                               "result": None, "seconds": 0.0})
    return run_json(name, code, emit, corpus)


async def check_in_page(exercise_id, answer, emit, data_url):
    """The worker's entry point for an exercise (pylib.exercises.check), as JSON: {"status": "done" |
    "stopped" | "error", "message", "verdict": Verdict.as_dict() or None, "seconds"}.

    What the reader's code prints goes to emit(text, "out"/"err"); a slow check's progress to
    emit(text, "progress"). The corpus is loaded first for an exercise that needs it."""
    from pylib import exercises
    t0 = time.perf_counter()
    reply = {"status": "error", "message": "", "verdict": None, "seconds": 0.0}
    try:
        ex = exercises.get(exercise_id)
    except KeyError as e:
        return json.dumps({**reply, "message": e.args[0]})
    if ex.needs_corpus:
        try:
            exercises.use_corpus(await load_corpus(data_url))
        except Exception as e:  # noqa: BLE001 (a failed fetch is reported in the exercise, not raised)
            return json.dumps({**reply, "message": f"The corpus could not be loaded: {e}"})
    with captured(emit):
        try:
            verdict = exercises.check(exercise_id, answer, progress_to=lambda text: emit(text, "progress"))
            reply.update(status="done", message=verdict.message, verdict=verdict.as_dict())
        except KeyboardInterrupt:
            reply.update(status="stopped", message="Stopped.")
            print("\nStopped by the reader.", file=sys.stderr)
    reply["seconds"] = time.perf_counter() - t0
    return json.dumps(_jsonable(reply), allow_nan=False)
