"""Reader input: the limits (`LIMITS`) and the parsing and validation of what a reader typed.

Form fields arrive as strings; each parser returns a value or raises `InputError` with one
reader-facing message per field, and `collect_fields` gathers every bad field into one error, so
the reader sees them all at once. LIMITS also holds the page's other bounds and settings: the
band's k and floor (band.py), the chunk time (chunks.py), the sample length and the smoothing
(session.py). pylib.web re-exports these names; the ops modules import them from there.
"""

import dataclasses
import math

LIMITS = {
    "lr_max": 1000.0,  # learning rate must be > 0 and <= this (100 is allowed: it shows divergence)
    "steps_max": 20000,  # a default run is far shorter; this bounds a page's work
    "batch_max": 256,  # windows per step; memory and time grow linearly with it
    "seed_max": 2**32 - 1,
    "temperature_max": 5.0,
    "sample_tokens": 240,  # characters generated at the end of a run
    # samples a live run takes as it trains, evenly spaced, the last at its end (session.py); in Chromium's
    # Pyodide the four before the end took 0.5-0.7 s of a 15-18 s default run (~4%; in CPython ~9%)
    "live_samples": 5,
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


DEFAULT_TEMPERATURE = 1.0  # a run's sample when the form gives no temperature


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
            values[field] = DEFAULT_TEMPERATURE
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
