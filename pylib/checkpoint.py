"""Checkpoints that resume a run bit for bit, in a format that cannot run code when it is read.

A checkpoint holds everything pylib.train's state needs to continue exactly where it stopped:
  - the weights (every tensor, float32, by name);
  - the optimiser state: AdamW's m and v and its step t (t drives the bias correction), SGD's
    momentum buffers, or Muon's buffers and its AdamW part;
  - the schedule step (the train state's "step": the learning rate is a function of it);
  - the states of every random stream in the state (every numpy Generator it holds: the batch
    stream "batch_rng", and any other, such as mixed precision's stochastic-rounding "round_rng");
    the initial-weights stream is used once, at step 0, and is fixed by the seed in the train config;
  - the position in the data: the number of batches drawn so far (step x grad_accum); with random
    windows the next batch is fixed by the batch stream's state, which is stored exactly;
  - the outlier-skipping window (the last applied steps' gradient norms) and the diverged flag;
  - the loss scaler's state when the run has one (state["loss_scaler"], a dict with a finite
    positive "scale", or state["scaler"].state_dict(), as pylib.systems.mixed_precision's
    DynamicLossScaler gives; optional: a float32 run has none); loaded as state["loss_scaler"];
  - the model and train configs (JSON), so a checkpoint is never loaded into another model;
  - optionally, the run's logged records (JSON), so a page can redraw the curve up to here.

Format: an .npz (a zip of .npy arrays, written by numpy.savez) read with allow_pickle=False, plus
one entry "meta" holding UTF-8 JSON. Neither can execute anything when loaded (a pickle can: its
loader calls constructors named in the file). load_checkpoint checks the file's size before
reading it, each member's uncompressed size before inflating it, and then every name, shape,
dtype and value against a fresh state of the checkpoint's own config; anything wrong raises
CheckpointError with a reader-facing message, and nothing outside the returned state is touched,
so the caller's current run is never lost to a bad file.
"""

import dataclasses
import io
import json
import math
import os
import zipfile

import numpy as np

from pylib import model, train

FORMAT = "training-course-checkpoint"
VERSION = 1
MAX_BYTES = 32 * 2**20  # a default-model checkpoint is ~70 kB; the largest preset's ~3 MB
MAX_MEMBERS = 512
CACHE_KEYS = ("decay_mask", "decay_key", "mult", "mult_key")  # optimiser caches, rebuilt from the config


class CheckpointError(ValueError):
    """A file that cannot be resumed from; the message says why, for the reader."""


# ---------------------------------------------------------------------------
# Flattening the optimiser state (nested dicts of arrays, ints and name lists)


def _flatten_opt(opt, prefix="opt"):
    """{entry name: array} and {key path: JSON value} of an optimiser state, caches left out."""
    arrays, scalars = {}, {}
    for key, value in opt.items():
        if key in CACHE_KEYS:
            continue
        name = f"{prefix}/{key}"
        if isinstance(value, np.ndarray):
            arrays[name] = value
        elif isinstance(value, dict):
            a, s = _flatten_opt(value, name)
            arrays.update(a)
            scalars.update(s)
        elif isinstance(value, (list, tuple)):
            scalars[name] = list(value)
        else:
            scalars[name] = int(value)
    return arrays, scalars


def _opt_targets(opt, prefix="opt"):
    """{entry name: the fresh state's array} and {key path: (dict, key)} to fill in place."""
    arrays, slots = {}, {}
    for key, value in opt.items():
        if key in CACHE_KEYS:
            continue
        name = f"{prefix}/{key}"
        if isinstance(value, np.ndarray):
            arrays[name] = value
        elif isinstance(value, dict):
            a, s = _opt_targets(value, name)
            arrays.update(a)
            slots.update(s)
        else:
            slots[name] = (opt, key)
    return arrays, slots


# ---------------------------------------------------------------------------
# Save


def _rng_state(rng):
    """A Generator's PCG64 state as JSON: its 128-bit integers written exactly, as text."""
    st = rng.bit_generator.state
    return {"bit_generator": st["bit_generator"], "state": {k: str(v) for k, v in st["state"].items()},
            "has_uint32": int(st["has_uint32"]), "uinteger": str(st["uinteger"])}


def checkpoint_bytes(state, model_cfg, train_cfg, log=None):
    """The checkpoint of a pylib.train state as .npz bytes (see save_checkpoint)."""
    opt_arrays, opt_scalars = _flatten_opt(state["opt"])
    streams = {k: _rng_state(v) for k, v in state.items() if isinstance(v, np.random.Generator)}
    scaler = state.get("loss_scaler")
    if scaler is None and hasattr(state.get("scaler"), "state_dict"):  # e.g. pylib.systems.mixed_precision's
        scaler = state["scaler"].state_dict()
    meta = {
        "format": FORMAT, "version": VERSION,
        "model_cfg": dataclasses.asdict(model_cfg), "train_cfg": dataclasses.asdict(train_cfg),
        "step": int(state["step"]),
        "data_position": {"batches_drawn": int(state["step"]) * train_cfg.grad_accum},
        "rng_streams": streams,
        "opt": opt_scalars,
        "recent_norms": [float(x) for x in state.get("recent_norms", [])],
        "diverged": bool(state["diverged"]),
        "loss_scaler": None if scaler is None else {k: float(v) for k, v in scaler.items()},
    }
    entries = {"meta": np.frombuffer(json.dumps(meta, allow_nan=False).encode(), dtype=np.uint8)}
    if log is not None:
        entries["log"] = np.frombuffer(json.dumps(log, allow_nan=False).encode(), dtype=np.uint8)
    entries.update({f"param/{n}": np.ascontiguousarray(p) for n, p in state["params"].items()})
    entries.update({n: np.ascontiguousarray(a) for n, a in opt_arrays.items()})
    buf = io.BytesIO()
    np.savez(buf, **entries)
    return buf.getvalue()


def save_checkpoint(state, file, model_cfg, train_cfg, log=None):
    """Write the checkpoint of a pylib.train state to file (a path or a binary file object)."""
    data = checkpoint_bytes(state, model_cfg, train_cfg, log)
    if hasattr(file, "write"):
        file.write(data)
    else:
        with open(file, "wb") as f:
            f.write(data)
    return len(data)


# ---------------------------------------------------------------------------
# Load


def _size_of(file):
    """The file's size in bytes, without reading it."""
    if isinstance(file, (bytes, bytearray, memoryview)):
        return len(file)
    if hasattr(file, "seek"):
        here = file.tell()
        end = file.seek(0, os.SEEK_END)
        file.seek(here)
        return end - here
    return os.stat(file).st_size


def _read_members(file):
    """{member name without .npy: array}, after every size check; CheckpointError otherwise."""
    size = _size_of(file)
    if size > MAX_BYTES:
        raise CheckpointError(f"The file is {size:,} bytes; a checkpoint of this course is at most "
                              f"{MAX_BYTES:,} bytes. It was not read.")
    raw = bytes(file) if isinstance(file, (bytes, bytearray, memoryview)) else None
    if raw is None:
        if hasattr(file, "read"):
            raw = file.read(MAX_BYTES + 1)
        else:
            with open(file, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise CheckpointError(f"The file is larger than {MAX_BYTES:,} bytes. It was not read.")
    if raw[:1] == b"\x80":
        raise CheckpointError("The file is a Python pickle. Pickles can run code when loaded, so it was refused; "
                              "a checkpoint is an .npz file.")
    if not raw.startswith(b"PK"):
        raise CheckpointError("The file is not a checkpoint: a checkpoint is an .npz (zip) file, and this one "
                              "does not start like one.")
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
        infos = zf.infolist()
    except (zipfile.BadZipFile, EOFError, ValueError) as e:
        raise CheckpointError(f"The file is damaged or truncated: it cannot be read as a zip ({e}).") from None
    if len(infos) > MAX_MEMBERS:
        raise CheckpointError(f"The file holds {len(infos):,} arrays; a checkpoint holds fewer than {MAX_MEMBERS}.")
    total = sum(i.file_size for i in infos)
    if total > MAX_BYTES:
        raise CheckpointError(f"The file unpacks to {total:,} bytes, more than {MAX_BYTES:,}. It was not unpacked.")
    out = {}
    for info in infos:
        if not info.filename.endswith(".npy"):
            raise CheckpointError(f"The file holds {info.filename!r}, which is not an array: not a checkpoint.")
        try:
            with zf.open(info) as member:
                out[info.filename[:-4]] = np.lib.format.read_array(member, allow_pickle=False)
        except ValueError as e:
            if "pickle" in str(e).lower() or "object" in str(e).lower():
                raise CheckpointError(f"The array {info.filename[:-4]!r} holds Python objects (a pickle), which "
                                      "can run code when loaded; the file was refused.") from None
            raise CheckpointError(f"The array {info.filename[:-4]!r} is damaged: {e}.") from None
        except (zipfile.BadZipFile, EOFError, OSError) as e:
            raise CheckpointError(f"The file is damaged or truncated ({e}).") from None
    return out


def _json_entry(members, name):
    arr = members[name]
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise CheckpointError(f"The entry {name!r} is not JSON text.")
    try:
        return json.loads(arr.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CheckpointError(f"The entry {name!r} is not valid JSON.") from None


def _config(cls, d, label):
    """A frozen config dataclass from a JSON dict with exactly its fields."""
    fields = {f.name for f in dataclasses.fields(cls)}
    if not isinstance(d, dict) or set(d) != fields:
        raise CheckpointError(f"The {label} config does not have this course's fields.")
    try:
        return cls(**d)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"The {label} config is invalid: {e}.") from None


def _rng_from(meta_rng):
    """A numpy Generator restored exactly from the stored bit-generator state."""
    try:
        if meta_rng["bit_generator"] != "PCG64":
            raise ValueError("not PCG64")
        rng = np.random.default_rng()
        rng.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": int(meta_rng["state"]["state"]), "inc": int(meta_rng["state"]["inc"])},
            "has_uint32": int(meta_rng["has_uint32"]), "uinteger": int(meta_rng["uinteger"])}
    except (KeyError, TypeError, ValueError):
        raise CheckpointError("The random-stream state is missing or invalid.") from None
    return rng


def _differences(a, b):
    """Field names where two config dataclasses differ."""
    da, db = dataclasses.asdict(a), dataclasses.asdict(b)
    return [k for k in da if da[k] != db.get(k)]


def load_checkpoint(file, expect_model_cfg=None):
    """(state, model_cfg, train_cfg, log) from a checkpoint; CheckpointError if it is unusable.

    file: a path, bytes, or a binary file object. With expect_model_cfg, a checkpoint of another
    model is refused. The state is a new pylib.train state (params packed as init_train_state
    packs them), ready for train.train_steps; log is the stored records or None."""
    members = _read_members(file)
    if "meta" not in members:
        raise CheckpointError("The file is an .npz but not a checkpoint of this course (it has no 'meta' entry).")
    meta = _json_entry(members, "meta")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError("The file is an .npz but not a checkpoint of this course (its 'meta' is not ours).")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"The checkpoint has format version {meta.get('version')!r}; this page reads {VERSION}.")
    mcfg = _config(model.GPTConfig, meta.get("model_cfg"), "model")
    tcfg = _config(train.TrainConfig, meta.get("train_cfg"), "training")
    if expect_model_cfg is not None and mcfg != expect_model_cfg:
        diff = ", ".join(f"{k} {getattr(mcfg, k)!r} (this run: {getattr(expect_model_cfg, k)!r})"
                         for k in _differences(mcfg, expect_model_cfg))
        raise CheckpointError(f"The checkpoint is of another model: {diff}.")

    state = train.init_train_state(mcfg, tcfg)  # the shapes and dtypes every entry must match
    step = meta.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= tcfg.steps:
        raise CheckpointError(f"The step {step!r} is outside the run's 0..{tcfg.steps}.")
    position = meta.get("data_position") or {}
    if position.get("batches_drawn") != step * tcfg.grad_accum:
        raise CheckpointError("The data position does not match the step (batches drawn != step x grad_accum).")

    targets = {f"param/{n}": p for n, p in state["params"].items()}
    opt_arrays, opt_slots = _opt_targets(state["opt"])
    targets.update(opt_arrays)
    expected = set(targets) | {"meta", "log"}
    extra, missing = set(members) - expected, set(targets) - set(members)
    if missing:
        raise CheckpointError(f"The checkpoint lacks {len(missing)} arrays, e.g. {sorted(missing)[0]!r}.")
    if extra:
        raise CheckpointError(f"The checkpoint has arrays this model does not, e.g. {sorted(extra)[0]!r}.")
    for name, target in targets.items():
        got = members[name]
        if got.shape != target.shape:
            raise CheckpointError(f"{name!r} has shape {got.shape}; this model needs {target.shape}.")
        if got.dtype != target.dtype:
            raise CheckpointError(f"{name!r} is {got.dtype}; this model needs {target.dtype}.")
        if not np.all(np.isfinite(got)):
            raise CheckpointError(f"{name!r} holds NaN or infinite values: the run had already failed when "
                                  "this was saved. Resume from an earlier checkpoint.")
    scalars = meta.get("opt")
    if not isinstance(scalars, dict) or set(scalars) != set(opt_slots):
        raise CheckpointError("The optimiser's counters do not match this optimiser.")
    for key, (holder, k) in opt_slots.items():
        fresh, got = holder[k], scalars[key]
        if isinstance(fresh, list):
            if got != fresh:
                raise CheckpointError(f"The optimiser's {key!r} does not match this model.")
        elif not isinstance(got, int) or isinstance(got, bool) or not 0 <= got <= step:
            raise CheckpointError(f"The optimiser's step {key!r} = {got!r} must be a whole number in 0..{step}.")
    norms = meta.get("recent_norms")
    if not isinstance(norms, list) or len(norms) > 20 or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in norms):
        raise CheckpointError("The skipping window (recent gradient norms) is invalid.")
    scaler = meta.get("loss_scaler")
    if scaler is not None:
        if not isinstance(scaler, dict) or not all(isinstance(v, (int, float)) and math.isfinite(v)
                                                   for v in scaler.values()) or not scaler.get("scale", 0) > 0:
            raise CheckpointError("The loss scaler's state is invalid (its scale must be a finite positive number).")
    streams = meta.get("rng_streams")
    named_ok = lambda k: k == "batch_rng" or (k.endswith("rng") and k not in state)  # noqa: E731 (no clobbering)
    if not isinstance(streams, dict) or "batch_rng" not in streams or not all(named_ok(k) for k in streams):
        raise CheckpointError("The random-stream states are missing or invalid.")
    rngs = {k: _rng_from(v if isinstance(v, dict) else {}) for k, v in streams.items()}
    log = None
    if "log" in members:
        log = _json_entry(members, "log")
        if not isinstance(log, list) or not all(isinstance(r, dict) for r in log):
            raise CheckpointError("The stored log is not a list of records.")

    # Every check passed: fill the fresh state (in place, so params stay views of one buffer).
    for name, target in targets.items():
        target[...] = members[name]
    for key, (holder, k) in opt_slots.items():
        if not isinstance(holder[k], list):
            holder[k] = int(scalars[key])
    state["step"] = step
    state.update(rngs)
    state["recent_norms"] = [float(x) for x in norms]
    state["diverged"] = bool(meta.get("diverged"))
    if scaler is not None:
        state["loss_scaler"] = {k: float(v) for k, v in scaler.items()}
    return state, mcfg, tcfg, log
