"""The page-facing facade over pylib: what the in-page widgets (in a Pyodide Web Worker) call.

Each chapter's widgets bring their ops in a module of this package, <topic>_ops.py, with an
OPS dict; all_ops() collects them.

It does three things and no numerics of its own:

1. validates what a reader typed (strings from form fields) against `LIMITS`, raising
   `InputError` with one reader-facing message per field;
2. holds a `Session`: the corpus loaded once per page, and the current training run, which the
   worker advances in short chunks so that a Stop message is handled between chunks. The page
   loads the vocabulary (data/vocab.json, 1 kB) with Python and the token files (data/train.bin
   and val.bin, 4.8 MB) only when an op first needs them: the op raises `DataNotLoaded` naming
   the files, `handle` answers {"kind": "data", "files": [...]}, and the worker fetches them,
   loads them (op "load_data") and runs the op again. An op therefore asks for the corpus
   (`Session._need_corpus()`) before it changes any state;
3. speaks JSON: `handle(op, args_json) -> result_json`, so the worker needs no Python objects.

Training, sampling and export are pylib.train, pylib.sample and pylib.export. The band check
(`band_verdict`) compares the default run, live, with the band measured over the default run's
seeds; `band_series` is what the page draws, the same limits, so what is drawn is what flags. Both
use the validation loss on the trainer's fixed subset (`TrainConfig.eval_windows` windows), the
evaluation the live run's dots use.
"""

import dataclasses
import functools
import importlib
import json
import math
import pathlib
import pkgutil
import time

import numpy as np

from pylib import data, model

# ---------------------------------------------------------------------------
# Limits and reader-input validation

LIMITS = {
    "lr_max": 1000.0,  # learning rate must be > 0 and <= this (100 is allowed: it shows divergence)
    "steps_max": 20000,  # a default run is far shorter; this bounds a page's work
    "batch_max": 256,  # windows per step; memory and time grow linearly with it
    "seed_max": 2**32 - 1,
    "temperature_max": 5.0,
    "sample_tokens": 240,  # characters generated at the end of a run
    "text_max": 20000,  # characters accepted by the tokenizer widget
    "ids_shown": 2000,  # token ids returned to the page (the count is always exact)
    "band_k": 3.0,  # the band is mean ± max(band_k * sd, band_floor); a run outside it is flagged
    "band_floor": 0.01,  # nats: three seeds can give a tiny sd early on
    "chunk_seconds": 0.08,  # training time per chunk: about 12 page updates a second
    "smoothing": 0.9,  # the moving average of the train loss: ema = 0.9 * ema + 0.1 * loss
}

FIELD_NAMES = {
    "lr": "Learning rate",
    "steps": "Steps",
    "batch_size": "Batch size",
    "seed": "Seed",
    "temperature": "Temperature",
    "text": "Text",
}


class InputError(ValueError):
    """Reader input that cannot be used; `errors` maps field name to a reader-facing message."""

    def __init__(self, errors):
        self.errors = dict(errors)
        super().__init__("; ".join(self.errors.values()))


def _shown(raw):
    """The reader's input, shortened for a message (the page shows it as text, never as HTML)."""
    s = str(raw)
    return repr(s if len(s) <= 24 else s[:24] + "…")


def parse_number(raw, field):
    """A finite float from a form value (str, int or float), or InputError."""
    name = FIELD_NAMES.get(field, field)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise InputError({field: f"{name} is empty: enter a number."})
    if isinstance(raw, bool):
        raise InputError({field: f"{name} must be a number."})
    try:
        value = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise InputError({field: f"{name} must be a number, not {_shown(raw)}."}) from None
    if not math.isfinite(value):
        raise InputError({field: f"{name} must be a finite number, not {_shown(raw)}."})
    return value


def parse_int(raw, field, lo, hi):
    """A whole number in [lo, hi] from a form value, or InputError."""
    name = FIELD_NAMES.get(field, field)
    value = parse_number(raw, field)
    if value != int(value):
        raise InputError({field: f"{name} must be a whole number, not {_shown(raw)}."})
    if not lo <= value <= hi:
        raise InputError({field: f"{name} must be between {lo:,} and {hi:,}; got {_shown(raw)}."})
    return int(value)


def parse_field(parse, key, label, raw, *bounds):
    """parse(raw, label, *bounds) (parse_number or parse_int) with a reader-facing label; the
    error is keyed by the form field's name, key."""
    try:
        return parse(raw, label, *bounds)
    except InputError as e:
        raise InputError({key: next(iter(e.errors.values()))}) from None


def collect_fields(parsers, args=None):
    """Run every field's parser and gather all the errors into one InputError, so the reader sees
    every bad field at once. parsers: {key: thunk} (or (key, thunk) pairs); with args,
    {key: parse} and each is called as parse(args.get(key)). Returns {key: value}."""
    items = parsers.items() if isinstance(parsers, dict) else parsers
    values, errors = {}, {}
    for key, parse in items:
        try:
            values[key] = parse() if args is None else parse(args.get(key))
        except InputError as e:
            errors.update(e.errors)
    if errors:
        raise InputError(errors)
    return values


def parse_positive(raw, field, hi):
    """A float in (0, hi] from a form value, or InputError."""
    name = FIELD_NAMES.get(field, field)
    value = parse_number(raw, field)
    if not 0 < value <= hi:
        raise InputError({field: f"{name} must be greater than 0 and at most {hi:g}; got {_shown(raw)}."})
    return value


def validate_train_settings(raw):
    """Form values {lr, steps, batch_size, seed, temperature?} -> (TrainConfig, temperature)."""
    from pylib import train

    defaults = train.TrainConfig()
    parsers = {
        "lr": lambda v: parse_positive(v, "lr", LIMITS["lr_max"]),
        "steps": lambda v: parse_int(v, "steps", 1, LIMITS["steps_max"]),
        "batch_size": lambda v: parse_int(v, "batch_size", 1, LIMITS["batch_max"]),
        "seed": lambda v: parse_int(v, "seed", 0, LIMITS["seed_max"]),
        "temperature": lambda v: parse_positive(v, "temperature", LIMITS["temperature_max"]),
    }
    values, errors = {}, {}
    for field, parse in parsers.items():
        if field == "temperature" and raw.get(field) is None:
            values[field] = 1.0
            continue
        try:
            values[field] = parse(raw.get(field))
        except InputError as e:
            errors.update(e.errors)
    if errors:
        raise InputError(errors)
    temperature = values.pop("temperature")
    return dataclasses.replace(defaults, **values), temperature


def validate_text(raw):
    """Tokenizer input: a string of at most LIMITS['text_max'] characters (code points)."""
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise InputError({"text": "Text must be a string."})
    if len(raw) > LIMITS["text_max"]:
        raise InputError(
            {"text": f"Text is {len(raw):,} characters long; the limit is {LIMITS['text_max']:,}. Paste less."}
        )
    return raw


# ---------------------------------------------------------------------------
# The measured band


def band_verdict(step, val_loss, curve):
    """Is val_loss at step inside the measured band? {"inside", "mean", "half"}, or None if no band there.

    The band is curve["val_mean"] ± max(k * curve["val_sd"], floor) at curve["steps"], with k and
    floor from LIMITS; between measured steps mean and sd are interpolated linearly. curve holds
    the validation loss on the trainer's fixed subset, so val_loss must be a record's "val".
    """
    if not curve or val_loss is None:
        return None
    steps = curve.get("steps") or []
    mean, sd = curve.get("val_mean") or [], curve.get("val_sd") or []
    if not steps or not steps[0] <= step <= steps[-1]:
        return None
    m = float(np.interp(step, steps, mean))
    s = float(np.interp(step, steps, sd))
    half = max(LIMITS["band_k"] * s, LIMITS["band_floor"])
    return {"inside": abs(val_loss - m) <= half, "mean": m, "half": half}


def band_series(curve, n_steps, shade="sd"):
    """The band drawn behind a run, at steps 0..n_steps-1 (None outside the measured range).

    shade "flag" (chapter 1): {"mean", "lo", "hi"}, lo and hi being the limits band_verdict flags
    outside of, mean ∓ max(k * sd, floor), so that the shaded band and the flag are one rule.
    shade "sd" (the other chapters' widgets): {"mean", "lo", "hi" (mean ± sd), "lo_k", "hi_k"
    (the flag limits)}.
    """
    if shade not in ("sd", "flag"):
        raise ValueError(f"shade must be 'sd' or 'flag', not {shade!r}")
    if not curve or not curve.get("steps"):
        return None
    steps = np.asarray(curve["steps"], dtype=np.float64)
    x = np.arange(int(n_steps), dtype=np.float64)
    mean = np.interp(x, steps, curve["val_mean"])
    sd = np.interp(x, steps, curve["val_sd"])
    half = np.maximum(LIMITS["band_k"] * sd, LIMITS["band_floor"])
    inside = (x >= steps[0]) & (x <= steps[-1])
    if shade == "flag":
        arrays = {"mean": mean, "lo": mean - half, "hi": mean + half}
    else:
        arrays = {"mean": mean, "lo": mean - sd, "hi": mean + sd, "lo_k": mean - half, "hi_k": mean + half}
    return {k: [float(v) if ok else None for v, ok in zip(a, inside)] for k, a in arrays.items()}


# ---------------------------------------------------------------------------
# The session: corpus and current run


def _clean(x):
    """A JSON-safe number: NaN and infinities become None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


CORPUS_FILES = ("train.bin", "val.bin")  # uint8 token ids, as build.py writes them into data/
VOCAB_FILE = "vocab.json"


class DataNotLoaded(RuntimeError):
    """An op needs corpus files the session has not loaded yet; `files` names them (in data/)."""

    def __init__(self, files):
        self.files = list(files)
        super().__init__(f"the corpus is not loaded yet (this needs data/{', data/'.join(self.files)})")


class Session:
    """The loaded corpus and the current run; one per page (one per worker).

    train_tokens and val_tokens raise DataNotLoaded until they are loaded (or assigned)."""

    def __init__(self):
        self.vocab = None
        self._tokens = {"train": None, "val": None}
        self.run = None

    @property
    def train_tokens(self):
        return self._split("train")

    @train_tokens.setter
    def train_tokens(self, ids):
        self._tokens["train"] = ids

    @property
    def val_tokens(self):
        return self._split("val")

    @val_tokens.setter
    def val_tokens(self, ids):
        self._tokens["val"] = ids

    def _split(self, name):
        if self._tokens[name] is None:
            raise DataNotLoaded(self._missing() or CORPUS_FILES)
        return self._tokens[name]

    def _missing(self):
        """The corpus files not loaded yet, in data/: what an op that needs the corpus waits for."""
        missing = [] if self.vocab is not None else [VOCAB_FILE]
        return missing + [f"{name}.bin" for name, ids in self._tokens.items() if ids is None]

    # --- corpus

    def load_corpus(self, folder):
        """Read train.bin, val.bin (uint8 ids) and vocab.json from folder."""
        return self.load_data(folder, (VOCAB_FILE, *CORPUS_FILES))

    def load_data(self, folder, files):
        """Read the named corpus files (vocab.json, train.bin, val.bin) from folder; returns what is
        loaded so far: {vocab_size, train_tokens, val_tokens} (None for what is not)."""
        folder = pathlib.Path(folder)
        unknown = set(files) - {VOCAB_FILE, *CORPUS_FILES}
        if unknown:
            raise ValueError(f"unknown corpus files {sorted(unknown)}")
        if VOCAB_FILE in files:
            meta = json.loads((folder / VOCAB_FILE).read_text(encoding="utf-8"))
            vocab = data.CharVocab(chars=tuple(meta["chars"]))
            if vocab.size != meta["size"] or vocab.eos_id != meta["eos_id"]:
                raise ValueError(f"{VOCAB_FILE}: size {meta['size']} and eos_id {meta['eos_id']} do not match "
                                 f"its {len(meta['chars'])} characters")
            self.vocab = vocab
        for name in CORPUS_FILES:
            if name in files:
                self._tokens[name.removesuffix(".bin")] = np.fromfile(folder / name, dtype=np.uint8)
        sizes = {f"{k}_tokens": None if ids is None else int(ids.size) for k, ids in self._tokens.items()}
        return {"vocab_size": None if self.vocab is None else self.vocab.size, **sizes}

    def _need_vocab(self):
        if self.vocab is None:
            raise DataNotLoaded([VOCAB_FILE])

    def _need_corpus(self):
        """Raises DataNotLoaded unless the vocabulary and both token files are loaded; an op that
        trains or reads the corpus calls it first, before it changes any state."""
        missing = self._missing()
        if missing:
            raise DataNotLoaded(missing)

    # --- tokenizer

    def vocab_table(self):
        """[{id, char, name}] for every id, with names for the invisible ones."""
        self._need_vocab()
        names = {"\n": "newline", " ": "space", "\t": "tab"}
        rows = [{"id": i, "char": ch, "name": names.get(ch, "")} for i, ch in enumerate(self.vocab.chars)]
        rows.append({"id": self.vocab.eos_id, "char": data.EOS_DISPLAY, "name": "end of document (EOS)"})
        return rows

    def tokenize(self, text):
        """Text -> ids (first LIMITS['ids_shown']), counts, and which characters were dropped."""
        self._need_vocab()
        text = validate_text(text)
        normalised = data.normalise_text(text)  # the corpus rule: dashes to ASCII, accents stripped
        ids, n_dropped = self.vocab.encode(normalised)
        known = set(self.vocab.chars)
        dropped = []
        for ch in normalised:
            if ch not in known and ch not in dropped:
                dropped.append(ch)
        shown = ids[: LIMITS["ids_shown"]].tolist()
        return {
            "ids": shown,
            "chars": [self.vocab.chars[i] for i in shown],
            "n_tokens": int(ids.size),
            "n_chars": len(text),
            "truncated": int(ids.size) > len(shown),
            "n_dropped": int(n_dropped),
            "dropped": [{"char": ch, "codepoint": f"U+{ord(ch):04X}"} for ch in dropped[:50]],
            "n_dropped_kinds": len(dropped),
        }

    # --- training

    def start_run(self, settings, curve=None):
        """Validate settings and set up a fresh run; returns the config the run uses."""
        from pylib import train

        self._need_corpus()
        train_cfg, temperature = validate_train_settings(settings)
        model_cfg = dataclasses.replace(model.GPTConfig(), vocab_size=self.vocab.size)  # 65 for the course corpus
        is_default = train_cfg == train.TrainConfig()
        self.run = {
            "model_cfg": model_cfg,
            "train_cfg": train_cfg,
            "temperature": temperature,
            "state": train.init_train_state(model_cfg, train_cfg),
            "last": {},
            "last_val": None,
            "diverged_at": None,
            "outside_band": False if (is_default and curve) else None,
            "left_band": None,  # the first eval step outside the band
            "ema": 0.0,
            "ema_weight": 0.0,
            "curve": curve if is_default else None,  # the band is compared only with default runs
            "elapsed": 0.0,
            "steps_timed": 0,
        }
        return {
            "config": dataclasses.asdict(train_cfg),
            "temperature": temperature,
            "is_default": is_default,
            "band_applies": bool(is_default and curve),
            "tokens_per_step": train_cfg.batch_size * model_cfg.block_size,
            "band": band_series(curve, max(train_cfg.steps, int(((curve or {}).get("steps") or [0])[-1]) + 1), "flag"),
        }

    def train_chunk(self, seconds=None):
        """Run steps for about `seconds` (at least one step); returns the new records and the run's state."""
        from pylib import train
        from pylib.web.chunks import chunk_steps

        run = self.run
        if run is None:
            raise RuntimeError("no run: start one first")
        cfg = run["train_cfg"]
        out = []
        state = run["state"]
        done = lambda: state["step"] >= cfg.steps or state["diverged"]  # noqa: E731
        for _ in chunk_steps(done, None if seconds is None else float(seconds)):
            t_step = time.perf_counter()
            records = train.train_steps(
                run["state"], run["model_cfg"], cfg, self.train_tokens, self.val_tokens, 1
            )
            run["elapsed"] += time.perf_counter() - t_step
            run["steps_timed"] += 1
            for rec in records:
                out.append(self._record(rec))
        return {
            "records": out,
            "step": state["step"],
            "steps": cfg.steps,
            "done": done(),
            "diverged_at": run["diverged_at"],
            "outside_band": run["outside_band"],
            "left_band": run["left_band"],
            "steps_per_s": self._steps_per_s(),
        }

    def _record(self, rec):
        """A train_steps record made JSON-safe, with the band verdict at eval steps."""
        run = self.run
        r = {}
        for k, v in rec.items():
            numeric = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            r[k] = _clean(v) if numeric else v
        r["step"] = int(rec["step"])
        if r.get("loss") is not None:  # a bias-corrected moving average, as the plot's thick line
            run["ema"] = LIMITS["smoothing"] * run["ema"] + (1 - LIMITS["smoothing"]) * r["loss"]
            run["ema_weight"] = LIMITS["smoothing"] * run["ema_weight"] + (1 - LIMITS["smoothing"])
            r["loss_smooth"] = run["ema"] / run["ema_weight"]
        if rec.get("diverged") or run["state"].get("diverged"):
            r["diverged"] = True
            if run["diverged_at"] is None:
                run["diverged_at"] = r["step"]
        if r.get("val") is not None:
            run["last_val"] = r["val"]
            verdict = band_verdict(r["step"], r["val"], run["curve"])
            r["band"] = verdict
            if verdict is not None and not verdict["inside"] and not run["outside_band"]:
                run["outside_band"] = True
                run["left_band"] = {"step": r["step"], "val": r["val"], **verdict}
        run["last"] = r
        return r

    def _steps_per_s(self):
        run = self.run
        return run["steps_timed"] / run["elapsed"] if run["elapsed"] > 0 else None

    def finish_run(self):
        """The final figures and a generated sample."""
        from pylib import sample, train

        run = self.run
        if run is None:
            raise RuntimeError("no run: start one first")
        cfg, last = run["train_cfg"], run["last"]
        result = {
            "steps": run["state"]["step"],
            "final_train_loss": last.get("loss"),
            "final_val_loss": run["last_val"],
            "steps_per_s": self._steps_per_s(),
            "tokens_per_s": None,
            "diverged": run["diverged_at"] is not None,
            "diverged_at": run["diverged_at"],
            "diverged_loss": last.get("loss") if run["diverged_at"] is not None else None,
            "divergence_limit": train.divergence_threshold(run["model_cfg"].vocab_size),
            "seed": cfg.seed,
            "lr": cfg.lr,
            "batch_size": cfg.batch_size,
            "outside_band": run["outside_band"],
            "left_band": run["left_band"],
            "sample": None,
        }
        if result["steps_per_s"]:
            result["tokens_per_s"] = result["steps_per_s"] * cfg.batch_size * run["model_cfg"].block_size
        if not result["diverged"]:
            ids = sample.generate(
                run["state"]["params"],
                run["model_cfg"],
                [self.vocab.eos_id],
                LIMITS["sample_tokens"],
                run["temperature"],
                cfg.seed,
                stop_at=self.vocab.eos_id,  # one document at most
            )
            ids = [int(i) for i in np.asarray(ids).ravel()]
            if ids and ids[0] == self.vocab.eos_id:
                ids = ids[1:]  # the prompt
            result["sample"] = self.vocab.decode(ids)
        return result

    def export_npz(self):
        """The current run's weights as .npz bytes with nanoGPT state_dict names."""
        from pylib import export

        if self.run is None:
            raise RuntimeError("no run: start one first")
        sd = export.to_nanogpt_state_dict(self.run["state"]["params"], self.run["model_cfg"])
        return export.state_dict_to_npz_bytes(sd)


SESSION = Session()

# ---------------------------------------------------------------------------
# JSON dispatch for the worker

_OPS = {
    "load_corpus": lambda s, a: s.load_corpus(a["folder"]),
    "load_data": lambda s, a: s.load_data(a["folder"], a.get("files") or ()),
    "vocab": lambda s, a: s.vocab_table(),
    "tokenize": lambda s, a: s.tokenize(a.get("text")),
    "band": lambda s, a: band_series(a.get("curve"), int(a.get("n_steps", 0)), a.get("shade", "sd")),
    "train_start": lambda s, a: s.start_run(a.get("settings") or {}, a.get("curve")),
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
