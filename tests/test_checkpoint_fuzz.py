"""Hostile checkpoints: every size, depth and configuration value a file declares is bounded before
anything is allocated, and thousands of mutated checkpoints are each refused with a CheckpointError
that says what is wrong, or load to exactly the valid file's state (a byte of a zip timestamp)."""

import base64
import dataclasses
import io
import json
import time
import zipfile

import numpy as np
import pytest

from pylib import checkpoint, data, model, train
from pylib.checkpoint import CheckpointError

CFG = model.GPTConfig()
SHORT = train.TrainConfig(steps=40, warmup_steps=5, eval_interval=10, eval_windows=8)


@pytest.fixture(scope="module")
def valid(shared_corpus):
    state = train.init_train_state(CFG, SHORT)
    log = train.train_steps(state, CFG, SHORT, shared_corpus.train, shared_corpus.val, 3)
    return checkpoint.checkpoint_bytes(state, CFG, SHORT, log=log)


def members_of(blob):
    """{member name: raw .npy bytes}, in the file's order."""
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def zip_of(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, raw in members.items():
            zf.writestr(name, raw)
    return buf.getvalue()


def npy_bytes(arr):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def crafted_npy(header, body=b"\0" * 16):
    """An .npy member with a header written by hand (version 1.0), padded as numpy pads it."""
    text = repr(header).encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    return b"\x93NUMPY\x01\x00" + (len(text) + pad + 1).to_bytes(2, "little") + text + b" " * pad + b"\n" + body


def with_meta(valid, meta_text, entry="meta.npy"):
    m = members_of(valid)
    m[entry] = npy_bytes(np.frombuffer(meta_text.encode(), np.uint8))
    return zip_of(m)


def meta_of(valid):
    return json.loads(np.lib.format.read_array(io.BytesIO(members_of(valid)["meta.npy"])).tobytes())


# ---------------------------------------------------------------------------
# The five files of the issue


def test_a_header_declaring_1e15_elements_is_refused_before_allocating(valid):
    m = members_of(valid)
    m["param/wte.npy"] = crafted_npy({"descr": "<f4", "fortran_order": False, "shape": (10**15,)})
    with pytest.raises(CheckpointError, match=r"'param/wte' declares 1,000,000,000,000,000 elements of 4 bytes"):
        checkpoint.load_checkpoint(zip_of(m))


def test_a_meta_entry_nested_200000_deep_is_refused_unparsed(valid):
    with pytest.raises(CheckpointError, match=r"'meta' nests 17 levels deep; .* at most 16"):
        checkpoint.load_checkpoint(with_meta(valid, "[" * 200_000 + "]" * 200_000))


def test_a_small_file_claiming_a_huge_model_is_refused_before_it_is_built(valid, monkeypatch):
    meta = meta_of(valid)
    meta["model_cfg"].update(n_embd=4096, n_layer=64, vocab_size=65_536)  # each within its bound; together 13.2e9 weights
    monkeypatch.setattr(train, "init_train_state", lambda *a: pytest.fail("a state was allocated"))
    blob = with_meta(valid, json.dumps(meta))
    assert len(blob) < 100_000
    with pytest.raises(CheckpointError, match=r"describes 13,157,015,552 weights .* was not built"):
        checkpoint.load_checkpoint(blob)
    meta["model_cfg"].update(n_layer=10**9)  # past its bound: not even the shapes are listed
    with pytest.raises(CheckpointError, match="n_layer is 1e\\+09; this course's runs use 1 to 64"):
        checkpoint.load_checkpoint(with_meta(valid, json.dumps(meta)))


@pytest.mark.parametrize("field,value,message", [
    ("batch_size", 10**8, "batch_size is 1e\\+08; this course's runs use 1 to 1024"),
    ("grad_accum", 10**6, "grad_accum is 1e\\+06; this course's runs use 1 to 64"),
    ("lr", "abc", "lr is abc"),
    ("steps", 2.5, "steps must be a whole number"),
])
def test_out_of_bounds_training_configs_are_refused(valid, field, value, message):
    meta = meta_of(valid)
    meta["train_cfg"][field] = value
    with pytest.raises(CheckpointError, match=message):
        checkpoint.load_checkpoint(with_meta(valid, json.dumps(meta)))


def test_the_page_refuses_a_bad_log_and_a_run_it_cannot_continue(shared_corpus, valid):
    from pylib import web
    from pylib.web import job_ops
    session = web.Session()
    session.vocab = data.CharVocab(chars=shared_corpus.vocab.chars)
    session.train_tokens, session.val_tokens = shared_corpus.train, shared_corpus.val

    def load(blob):
        return job_ops.OPS["job_ckpt_load"](session, {"data": base64.b64encode(blob).decode(), "size": len(blob)})

    assert load(valid)["step"] == 3  # the valid file still loads
    log = json.loads(np.lib.format.read_array(io.BytesIO(members_of(valid)["log.npy"])).tobytes())
    log[1]["seconds"] = "abc"
    with pytest.raises(web.InputError) as e:
        load(with_meta(valid, json.dumps(log), "log.npy"))
    assert e.value.errors["file"] == ("The checkpoint's log is invalid: record 1 has seconds = 'abc', not a finite "
                                      "number. It was not loaded.")
    meta = meta_of(valid)
    meta["train_cfg"]["batch_size"] = 512  # within the loader's bound, past the page's
    with pytest.raises(web.InputError, match="512 windows per batch \\(batch_size\\); this widget runs at most 256"):
        load(with_meta(valid, json.dumps(meta)))


# ---------------------------------------------------------------------------
# The fuzz test

HOSTILE = ["abc", None, [], {"x": 1}, [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]], "1e999"]  # never a valid value
HOSTILE_NUMBERS = [10**15, -1, 2**70, 1e308]  # outside every config field's bounds
HEADERS = [  # each invalid for any member
    {"descr": "<f4", "fortran_order": False, "shape": (10**15,)},
    {"descr": "<f4", "fortran_order": False, "shape": (2**62, 2**62)},
    {"descr": "<f4", "fortran_order": False, "shape": (-1,)},
    {"descr": "<f4", "fortran_order": False, "shape": (1,) * 40},
    {"descr": "|O", "fortran_order": False, "shape": (1,)},
    {"descr": "<c8", "fortran_order": False, "shape": (2,)},
    {"descr": "<U4", "fortran_order": False, "shape": (1,)},
    {"descr": [("a", "<f4")], "fortran_order": False, "shape": (4,)},
    {"descr": "<f4", "fortran_order": "yes", "shape": (4,)},
    {"descr": "<f4", "shape": (4,)},
    "not a dict",
]


def leaves(obj, path=()):
    """Every (path, value) in nested JSON, containers included."""
    yield path, obj
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        yield from leaves(v, path + (k,))


def set_at(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def mutants(valid, rng, n):
    """n (kind, bytes) mutations of the valid file, drawn from rng."""
    members, meta = members_of(valid), meta_of(valid)
    names = list(members)
    meta_paths = [p for p, _ in leaves(meta) if p and p[0] not in ("recent_norms", "loss_scaler")]
    cfg_paths = [p for p in meta_paths if p[0] in ("model_cfg", "train_cfg") and len(p) == 2]
    for _ in range(n):
        kind = str(rng.choice(["flip", "truncate", "header", "json", "config", "huge", "delete", "text"]))
        if kind == "flip":
            b = bytearray(valid)
            for i in rng.integers(0, len(b), rng.integers(1, 9)):
                b[i] ^= 1 << int(rng.integers(0, 8))
            yield kind, bytes(b)
        elif kind == "truncate":
            yield kind, valid[: int(rng.integers(0, len(valid)))]
        elif kind == "header":
            m = dict(members)
            body = rng.bytes(int(rng.integers(0, 64)))
            m[names[int(rng.integers(0, len(names)))]] = crafted_npy(HEADERS[int(rng.integers(0, len(HEADERS)))], body)
            yield kind, zip_of(m)
        elif kind in ("json", "config", "huge", "delete"):
            new = json.loads(json.dumps(meta))
            if kind == "json":
                set_at(new, meta_paths[int(rng.integers(0, len(meta_paths)))], HOSTILE[int(rng.integers(0, len(HOSTILE)))])
            elif kind == "config":
                set_at(new, cfg_paths[int(rng.integers(0, len(cfg_paths)))],
                       HOSTILE_NUMBERS[int(rng.integers(0, len(HOSTILE_NUMBERS)))])
            elif kind == "huge":  # in bounds one by one, too large together
                new["model_cfg"].update(n_embd=int(rng.choice([1024, 2048, 4096])), n_layer=int(rng.integers(16, 65)),
                                        n_head=1, block_size=1024)
                new["train_cfg"]["batch_size"] = int(rng.integers(64, 1025))
            else:
                path = meta_paths[int(rng.integers(1, len(meta_paths)))]
                holder = new
                for k in path[:-1]:
                    holder = holder[k]
                del holder[path[-1]]
            yield kind, with_meta(valid, json.dumps(new).replace('"1e999"', "1e999"))
        else:  # the meta's text itself: a structural character flipped (a digit flipped is another valid file), cut short, or a NaN
            text = json.dumps(meta)
            structural = [j for j, c in enumerate(text) if c in '{}[]:," ']
            i = int(rng.choice(structural))
            choice = int(rng.integers(0, 3))
            text = (text[:i] + chr(ord(text[i]) ^ 1) + text[i + 1:] if choice == 0 else text[:i] if choice == 1
                    else text.replace("0.9", "NaN", 1))
            yield kind, with_meta(valid, text)


def same_state(a, b):
    (sa, ma, ta, la), (sb, mb, tb, lb) = a, b
    return (ma, ta, la, sa["step"]) == (mb, tb, lb, sb["step"]) and all(
        np.array_equal(sa["params"][k], sb["params"][k]) for k in sa["params"]) and all(
        np.array_equal(sa["opt"][k], sb["opt"][k]) for k in ("m", "v")) and (
        sa["batch_rng"].bit_generator.state == sb["batch_rng"].bit_generator.state)


def test_thousands_of_mutated_checkpoints_are_refused_with_a_message(valid):
    """Each mutant raises CheckpointError with a message, or (a byte outside anything read, such as
    a zip timestamp; a deleted entry whose default is what was stored) loads to the valid file's own
    state; never another exception. The crafted headers, JSON values and configs are all refused."""
    reference = checkpoint.load_checkpoint(valid)
    t0 = time.perf_counter()
    outcomes = {}
    for kind, blob in mutants(valid, np.random.default_rng(22), 2000):
        try:
            loaded = checkpoint.load_checkpoint(blob)
        except CheckpointError as e:
            assert isinstance(e.args[0], str) and len(e.args[0]) > 20, (kind, e.args)
            outcomes.setdefault(kind, []).append("refused")
            continue
        assert same_state(loaded, reference), f"a {kind} mutant loaded into another state"
        outcomes.setdefault(kind, []).append("same")
    seconds = time.perf_counter() - t0
    counts = {k: (v.count("refused"), len(v)) for k, v in outcomes.items()}
    print(f"\n{sum(len(v) for v in outcomes.values())} mutants in {seconds:.2f} s: (refused, made) {counts}")
    assert set(counts) == {"flip", "truncate", "header", "json", "config", "huge", "delete", "text"}
    for kind in ("truncate", "header", "json", "config", "huge", "text"):
        assert counts[kind][0] == counts[kind][1], kind
    assert counts["flip"][0] > 0.9 * counts["flip"][1]  # a flipped data byte fails the zip's CRC
    assert same_state(checkpoint.load_checkpoint(valid), reference)  # and the valid file still loads
