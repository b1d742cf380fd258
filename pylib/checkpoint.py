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
    DynamicLossScaler gives; optional: a float32 run has none); loaded as state["loss_scaler"], which
    mixed_precision.resume_state hands to DynamicLossScaler.load_state_dict;
  - the model and train configs (JSON), so a checkpoint is never loaded into another model;
  - optionally, the run's logged records (JSON), so a page can redraw the curve up to here.

Format: an .npz (a zip of .npy arrays, written by numpy.savez) read with allow_pickle=False, plus
one entry "meta" holding UTF-8 JSON. Neither can execute anything when loaded (a pickle can: its
loader calls constructors named in the file). load_checkpoint bounds everything a file declares
before allocating anything for it: the file's size before reading it, each member's uncompressed
size before inflating it, each .npy header's shape and dtype against the bytes that follow it
(numpy's own reader allocates what the header says), the JSON's nesting depth before parsing it,
and every config value (CONFIG_LIMITS), the model's weight count and one batch's activations
before a state is built. Then it checks every name, shape, dtype and value against a fresh state
of the checkpoint's own config. Anything wrong raises
CheckpointError with a reader-facing message, and nothing outside the returned state is touched,
so the caller's current run is never lost to a bad file.
"""

import dataclasses
import io
import json
import math
import os
import re
import zipfile
import zlib

import numpy as np

from pylib import model, train

FORMAT = "training-course-checkpoint"
VERSION = 1
MAX_BYTES = 32 * 2**20  # a default-model checkpoint is ~70 kB; the largest preset's ~3 MB
MAX_MEMBERS = 512
MAX_JSON_DEPTH = 16  # meta and log nest 4 deep; a deeper entry is refused before it is parsed
MAX_NDIM = 4  # every array of a checkpoint is 1-D or 2-D
MAX_LOG_RECORDS = 100_000
MAX_ACTIVATION_FLOATS = 2**26  # one micro-batch's forward and backward, roughly (see _check_configs)
# Every config value a checkpoint may carry: (type, lowest, highest); for a str, the allowed values.
# Wide enough for every run of the course (the largest preset, chapter 8's learning-rate spikes),
# narrow enough that nothing a file claims can make the loader or the next step exhaust memory or time.
CONFIG_LIMITS = {
    "model": {
        "block_size": (int, 1, 1024), "vocab_size": (int, 2, 65_536), "n_layer": (int, 1, 64),
        "n_head": (int, 1, 64), "n_embd": (int, 1, 4096), "bias": (bool,), "dropout": (float, 0.0, 0.0),
        "gelu": (str, "tanh"), "ln_eps": (float, 1e-12, 1.0), "norm": (str, "layernorm", "rmsnorm"),
        "norm_position": (str, "pre", "post"), "qk_norm": (bool,), "init_std": (float, 1e-6, 10.0),
        "mup_base_width": (int, 0, 4096), "mup_output_mult": (bool,),
    },
    "training": {
        "lr": (float, 0.0, 100.0), "min_lr_ratio": (float, 0.0, 1.0), "warmup_steps": (int, 0, 100_000),
        "steps": (int, 1, 100_000), "batch_size": (int, 1, 1024), "grad_accum": (int, 1, 64),
        "weight_decay": (float, 0.0, 10.0), "beta1": (float, 0.0, 1.0), "beta2": (float, 0.0, 1.0),
        "eps": (float, 0.0, 1.0), "grad_clip": (float, 0.0, 1e6), "seed": (int, 0, 2**32 - 1),
        "eval_interval": (int, 1, 10**9), "eval_windows": (int, 1, 4096), "final_eval": (bool,),
        "optimizer": (str, "adamw", "adam_l2", "sgd", "muon"), "momentum": (float, 0.0, 1.0),
        "schedule": (str, "cosine", "wsd", "constant"), "decay_frac": (float, 0.0, 1.0),
        "mup_constant_decay": (bool,), "skip_factor": (float, 0.0, 1e6), "z_loss": (float, 0.0, 10.0),
    },
}
_JSON_TOKENS = re.compile(r'\\.|["\[\]{}]', re.DOTALL)
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
        name = info.filename[:-4]
        if name in out:
            raise CheckpointError(f"The file holds two arrays named {name!r}: not a checkpoint.")
        try:
            with zf.open(info) as member:
                blob = member.read(info.file_size + 1)  # the sum of these sizes was bounded above
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, RuntimeError, NotImplementedError,
                ValueError, zlib.error) as e:
            raise CheckpointError(f"The file is damaged or truncated ({e}).") from None
        if len(blob) != info.file_size:
            raise CheckpointError(f"The file is damaged: the array {name!r} is not the size its zip entry states.")
        out[name] = _read_npy(blob, name)
    return out


def _read_npy(blob, name):
    """One .npy member's array, its header checked against the bytes that follow it before anything
    is allocated (numpy's read_array allocates what the header declares); CheckpointError otherwise."""
    f = io.BytesIO(blob)
    try:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f".npy format version {version} is not one numpy.savez writes")
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(f)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError, OverflowError, EOFError) as e:
        raise CheckpointError(f"The array {name!r} has a damaged header: {e}.") from None
    if dtype.hasobject:
        raise CheckpointError(f"The array {name!r} holds Python objects (a pickle), which can run code when "
                              "loaded; the file was refused.")
    if dtype.names is not None or dtype.subdtype is not None or dtype.kind not in "biuf":
        raise CheckpointError(f"The array {name!r} has dtype {dtype}; a checkpoint holds plain numbers only.")
    if not isinstance(shape, tuple) or len(shape) > MAX_NDIM or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise CheckpointError(f"The array {name!r} declares the shape {shape!r}; a checkpoint's arrays have at "
                              f"most {MAX_NDIM} dimensions of whole sizes.")
    count = math.prod(shape)  # Python ints: a header declaring 10**15 elements cannot overflow this
    if count * dtype.itemsize != len(blob) - f.tell():
        raise CheckpointError(f"The array {name!r} declares {count:,} elements of {dtype.itemsize} bytes, but "
                              f"{len(blob) - f.tell():,} bytes follow its header: the file is damaged.")
    data = np.frombuffer(blob, dtype=dtype, count=count, offset=f.tell())
    return data.reshape(shape, order="F" if fortran_order else "C")


def _json_depth(text):
    """How deep [ and { nest in JSON text, outside strings: a scan without recursion that stops
    as soon as the depth passes MAX_JSON_DEPTH."""
    depth = deepest = 0
    in_string = False
    for m in _JSON_TOKENS.finditer(text):
        t = m.group()
        if t[0] == "\\":  # an escape: its character never opens or closes anything
            continue
        if t == '"':
            in_string = not in_string
        elif not in_string:
            depth += 1 if t in "[{" else -1
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                break
    return deepest


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _json_entry(members, name):
    arr = members[name]
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise CheckpointError(f"The entry {name!r} is not JSON text.")
    try:
        text = arr.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(f"The entry {name!r} is not valid UTF-8 text.") from None
    depth = _json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise CheckpointError(f"The entry {name!r} nests {depth:,} levels deep; a checkpoint's JSON nests at most "
                              f"{MAX_JSON_DEPTH}. It was not parsed.")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, NaN/Infinity, an integer of too many digits
        raise CheckpointError(f"The entry {name!r} is not valid JSON ({e}).") from None


def _config(cls, d, label):
    """A frozen config dataclass from a JSON dict with exactly its fields, each of its type and
    within CONFIG_LIMITS[label]."""
    fields = {f.name for f in dataclasses.fields(cls)}
    if not isinstance(d, dict) or set(d) != fields:
        raise CheckpointError(f"The {label} config does not have this course's fields.")
    limits = CONFIG_LIMITS[label]
    for key, value in d.items():
        kind, *allowed = limits[key]
        if kind is str:
            if value not in allowed:
                raise CheckpointError(f"The {label} config's {key} is {str(value)[:40]!r}; it must be one of "
                                      f"{', '.join(allowed)}.")
            continue
        if kind is bool:
            if not isinstance(value, bool):
                raise CheckpointError(f"The {label} config's {key} must be true or false.")
            continue
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind is int and not (isinstance(value, int) and not isinstance(value, bool)):
            raise CheckpointError(f"The {label} config's {key} must be a whole number.")
        if not is_number or not math.isfinite(value) or not allowed[0] <= value <= allowed[1]:
            shown = f"{value:g}" if is_number and abs(value) < 1e300 else str(value)[:40]
            raise CheckpointError(f"The {label} config's {key} is {shown}; this course's runs use "
                                  f"{allowed[0]:g} to {allowed[1]:g}. The file was not loaded.")
    try:
        return cls(**{k: float(v) if limits[k][0] is float else v for k, v in d.items()})
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"The {label} config is invalid: {e}.") from None


def _check_sizes(mcfg, tcfg):
    """Refuse a model or a batch too large to hold, before a single array of it is allocated: the
    weights must fit in a checkpoint's size, and one micro-batch's activations (about
    B*T*(L*(16C + 2H*T) + 2V) floats, a bound of the order of pylib.model's caches) in MAX_ACTIVATION_FLOATS."""
    n_params = sum(math.prod(s) for s in model.param_shapes(mcfg).values())
    if 4 * n_params > MAX_BYTES:
        raise CheckpointError(f"The model config describes {n_params:,} weights ({4 * n_params:,} bytes in float32), "
                              f"more than a checkpoint of at most {MAX_BYTES:,} bytes can hold. It was not built.")
    B, T, C, L, H, V = (tcfg.batch_size, mcfg.block_size, mcfg.n_embd, mcfg.n_layer, mcfg.n_head, mcfg.vocab_size)
    floats = B * T * (L * (16 * C + 2 * H * T) + 2 * V)
    if floats > MAX_ACTIVATION_FLOATS:
        raise CheckpointError(f"One batch of this run (batch_size {B}, block_size {T}) would need about {floats:,} "
                              f"floats of activations; this course's runs need at most {MAX_ACTIVATION_FLOATS:,}.")


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
    except (KeyError, TypeError, ValueError, OverflowError):
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

    _check_sizes(mcfg, tcfg)
    state = train.init_train_state(mcfg, tcfg)  # the shapes and dtypes every entry must match
    step = meta.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= tcfg.steps:
        raise CheckpointError(f"The step {step!r} is outside the run's 0..{tcfg.steps}.")
    position = meta.get("data_position")
    if not isinstance(position, dict) or position.get("batches_drawn") != step * tcfg.grad_accum:
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
        if not isinstance(scaler, dict) or len(scaler) > 8 or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in scaler.values()) \
                or not scaler.get("scale", 0) > 0:
            raise CheckpointError("The loss scaler's state is invalid (its scale must be a finite positive number).")
    streams = meta.get("rng_streams")
    named_ok = lambda k: k == "batch_rng" or (k.endswith("rng") and k not in state)  # noqa: E731 (no clobbering)
    if not isinstance(streams, dict) or "batch_rng" not in streams or len(streams) > 8 \
            or not all(named_ok(k) for k in streams):
        raise CheckpointError("The random-stream states are missing or invalid.")
    rngs = {k: _rng_from(v if isinstance(v, dict) else {}) for k, v in streams.items()}
    if not isinstance(meta.get("diverged"), bool):
        raise CheckpointError("The diverged flag must be true or false.")
    log = None
    if "log" in members:
        log = _json_entry(members, "log")
        if not isinstance(log, list) or len(log) > MAX_LOG_RECORDS or not all(isinstance(r, dict) for r in log):
            raise CheckpointError(f"The stored log is not a list of at most {MAX_LOG_RECORDS:,} records.")

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
