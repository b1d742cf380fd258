"""The page-facing facade over pylib: what the in-page widgets (in a Pyodide Web Worker) call.

Each chapter's widgets bring their ops in a module of this package, <topic>_ops.py, with an
OPS dict; all_ops() collects them.

It does three things and no numerics of its own:

1. validates what a reader typed (strings from form fields) against `LIMITS`, raising
   `InputError` with one reader-facing message per field (inputs.py);
2. holds a `Session` (session.py): the corpus loaded once per page, and the current training run,
   which the worker advances in short chunks so that a Stop message is handled between chunks. The
   page loads the vocabulary (data/vocab.json, 1 kB) with Python and the token files
   (data/train.bin and val.bin, 4.8 MB) only when an op first needs them: the op raises
   `DataNotLoaded` naming the files, `handle` answers {"kind": "data", "files": [...]}, and the
   worker fetches them, loads them (op "load_data") and runs the op again. An op therefore asks for
   the corpus (`Session._need_corpus()`) before it changes any state;
3. speaks JSON: `handle(op, args_json) -> result_json`, so the worker needs no Python objects.

Training, sampling and export are pylib.train, pylib.sample and pylib.export. The band check
(`band_verdict`, band.py) compares the default run, live, with the band measured over the default
run's seeds; `band_series` is what the page draws, the same limits, so what is drawn is what flags.
Both use the validation loss on the trainer's fixed subset (`TrainConfig.eval_windows` windows), the
evaluation the live run's dots use.

This module holds the op registry (all_ops, find_op, handle) and the page's one Session, SESSION;
the names below are imported from here by the ops modules, the tests and build.py.
"""

import functools
import importlib
import json
import pkgutil

from pylib.web.band import band_series, band_verdict  # noqa: F401
from pylib.web.inputs import (  # noqa: F401
    FIELD_NAMES,
    LIMITS,
    InputError,
    collect_fields,
    parse_field,
    parse_int,
    parse_number,
    parse_positive,
    validate_text,
    validate_train_settings,
)
from pylib.web.session import CORPUS_FILES, VOCAB_FILE, DataNotLoaded, Session  # noqa: F401
from pylib.web.check_ops import checked_by  # noqa: E402  (after inputs: check_ops imports from it)

SESSION = Session()


def validate_tokenize(args):
    """The tokenizer's {text} -> the text, or InputError: validate_text, which Session.tokenize calls on
    the same value (also what the page asks when the reader leaves the field: op check_args)."""
    return validate_text(args.get("text"))


@checked_by(validate_tokenize)
def _tokenize(s, a):
    return s.tokenize(a.get("text"))  # Session.tokenize checks it with validate_text, after loading the vocabulary

# ---------------------------------------------------------------------------
# JSON dispatch for the worker

_OPS = {
    "load_corpus": lambda s, a: s.load_corpus(a["folder"]),
    "load_data": lambda s, a: s.load_data(a["folder"], a.get("files") or ()),
    "vocab": lambda s, a: s.vocab_table(),
    "tokenize": _tokenize,
    "band": lambda s, a: band_series(a.get("curve"), int(a.get("n_steps", 0)), a.get("shade", "sd")),
    "train_start": lambda s, a: s.start_run(a.get("settings") or {}, a.get("curve"), bool(a.get("live_samples"))),
    "train_chunk": lambda s, a: s.train_chunk(a.get("seconds")),
    "train_finish": lambda s, a: s.finish_run(),
    "bench_step": lambda s, a: _bench_step(a),
}


def _bench_step(a):
    """build.py --bench, in Chromium. Imported here, not at the top: pylib.studies.benchmark brings
    statistics, fractions and decimal, which the page's start-up does not need."""
    from pylib.studies import benchmark
    return benchmark.time_train_step(B=int(a.get("B", 16)), T=int(a.get("T", 64)), steps=int(a.get("steps", 50)),
                                     repeats=int(a.get("repeats", 5)))


def _ops_modules():
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.name.endswith("_ops"))


@functools.cache
def all_ops():
    """This module's ops plus OPS from every pylib/web/<topic>_ops.py: each chapter's widgets bring theirs."""
    ops = dict(_OPS)
    for name in _ops_modules():
        module = importlib.import_module(f"{__name__}.{name}")
        clash = set(ops) & set(module.OPS)
        if clash:
            raise RuntimeError(f"{module.__name__} redefines ops {sorted(clash)}")
        ops.update(module.OPS)
    return ops


_FOUND = dict(_OPS)  # the ops of the modules imported so far
_IMPORTED = set()


def find_op(op):
    """The op's function, importing no more than it needs: importing every <topic>_ops module (and
    the pylib modules behind them) is a good part of the page's start-up. The core ops first, then
    the module whose name starts like the op (data_window: data_ops), then the others in turn.
    all_ops() imports them all and checks that no two define the same op (tests call it)."""
    if op in _FOUND:
        return _FOUND[op]
    topic = op.split("_")[0] + "_"
    for name in sorted(_ops_modules(), key=lambda n: not n.startswith(topic)):
        if name in _IMPORTED:
            continue
        _FOUND.update({k: v for k, v in importlib.import_module(f"{__name__}.{name}").OPS.items() if k not in _FOUND})
        _IMPORTED.add(name)
        if op in _FOUND:
            return _FOUND[op]
    raise KeyError(f"unknown op {op!r}")


def handle(op, args_json="{}"):
    """Run one op with JSON args; returns JSON {"ok": true, "value": ...} or {"ok": false, ...}."""
    try:
        value = find_op(op)(SESSION, json.loads(args_json or "{}"))
        return json.dumps({"ok": True, "value": value}, allow_nan=False)
    except InputError as e:
        return json.dumps({"ok": False, "kind": "input", "message": str(e), "errors": e.errors})
    except DataNotLoaded as e:  # the worker loads e.files and runs the op again
        return json.dumps({"ok": False, "kind": "data", "message": str(e), "files": e.files})
