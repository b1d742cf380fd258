"""The page loads the corpus only when an op needs it: pylib.web raises DataNotLoaded naming the
files, handle() answers {"kind": "data", "files"}, and the worker loads them and runs the op again.
That retry is only safe if an op asks before it changes any state: checked here for every op."""

import json
import sys

import numpy as np
import pytest

from pylib import data, web

TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east.\n" * 40


@pytest.fixture
def folder(tmp_path):
    """The three corpus files, written the way build.py writes _site/data/."""
    vocab = data.build_char_vocab(TEXT, n_chars=64)
    ids, _ = data.pack_documents([TEXT] * 3, vocab)
    (tmp_path / "train.bin").write_bytes(ids.tobytes())
    (tmp_path / "val.bin").write_bytes(ids[::-1].copy().tobytes())
    (tmp_path / "vocab.json").write_text(json.dumps(vocab.to_json()))
    return tmp_path


def call(op, args=None):
    return json.loads(web.handle(op, json.dumps(args or {})))


@pytest.fixture
def fresh(monkeypatch):
    session = web.Session()
    monkeypatch.setattr(web, "SESSION", session)
    return session


def test_a_fresh_session_names_the_files_an_op_needs(fresh, folder):
    out = call("vocab")
    assert out == {"ok": False, "kind": "data", "files": ["vocab.json"], "message": out["message"]}
    assert "data/vocab.json" in out["message"]
    assert call("load_data", {"folder": str(folder), "files": ["vocab.json"]})["value"] == {
        "vocab_size": fresh.vocab.size, "train_tokens": None, "val_tokens": None}
    assert call("vocab")["ok"] and call("tokenize", {"text": "soft"})["value"]["n_tokens"] == 4  # the vocabulary is enough
    out = call("train_start", {"settings": {"lr": "0.01", "steps": "3", "batch_size": "4", "seed": "0"}})
    assert out["kind"] == "data" and out["files"] == ["train.bin", "val.bin"]
    assert fresh.run is None  # asked before it set anything up
    with pytest.raises(web.DataNotLoaded):
        fresh.train_tokens
    info = call("load_data", {"folder": str(folder), "files": ["train.bin", "val.bin"]})["value"]
    assert info["train_tokens"] == fresh.train_tokens.size and info["val_tokens"] == fresh.val_tokens.size
    assert call("train_start", {"settings": {"lr": "0.01", "steps": "3", "batch_size": "4", "seed": "0"}})["ok"]


def test_load_data_reads_what_load_corpus_reads(fresh, folder):
    whole = web.Session()
    whole.load_corpus(folder)
    for name in ("vocab.json", "val.bin", "train.bin"):
        fresh.load_data(folder, [name])
    assert fresh.vocab == whole.vocab
    assert np.array_equal(fresh.train_tokens, whole.train_tokens) and np.array_equal(fresh.val_tokens, whole.val_tokens)
    with pytest.raises(ValueError, match="unknown corpus files"):
        fresh.load_data(folder, ["../secrets"])


def test_a_vocabulary_that_does_not_match_its_size_is_refused(fresh, folder):
    meta = json.loads((folder / "vocab.json").read_text())
    (folder / "vocab.json").write_text(json.dumps({**meta, "size": meta["size"] + 1}))
    with pytest.raises(ValueError, match="do not match"):
        fresh.load_data(folder, ["vocab.json"])


def _module_state():
    """Every ops module's module-level containers, by identity and length: what an op would change."""
    state = {}
    for op_fn in web.all_ops().values():
        module = getattr(op_fn, "__module__", None)
        if not module or not module.startswith("pylib.web"):
            continue
        for name, value in vars(sys.modules[module]).items():
            if isinstance(value, (dict, list, set)) and not name.isupper():
                state[(module, name)] = (id(value), len(value), tuple(sorted(map(str, value)))[:50]
                                         if isinstance(value, dict) else None)
    return state


def test_every_op_that_needs_the_corpus_asks_before_it_changes_anything(fresh, folder):
    """With only the vocabulary loaded, each op called with empty arguments either answers, refuses
    the input, fails for another reason, or asks for the corpus; when it asks, neither the session
    nor any ops module's state has changed, so the worker can run it again once the files are in."""
    fresh.load_data(folder, ["vocab.json"])
    asked = []
    quick = {"precision_bench": {"steps": 2, "repeats": 1}}  # a benchmark: its defaults take seconds
    for op in sorted(web.all_ops()):
        if op in ("load_corpus", "load_data", "bench_step"):
            continue
        before, run = _module_state(), fresh.run
        try:
            out = call(op, quick.get(op))
        except Exception:  # noqa: BLE001 (empty arguments: an op may fail in other ways, not checked here)
            continue
        if out.get("kind") == "data":
            asked.append(op)
            assert out["files"] == ["train.bin", "val.bin"], op
            assert fresh.run is run and _module_state() == before, f"{op} changed state before asking for the corpus"
    assert "train_start" in asked and len(asked) >= 10, asked


def test_each_op_is_found_by_name_and_no_two_modules_define_the_same_op():
    ops = web.all_ops()  # raises if two <topic>_ops modules define one op
    for op, fn in ops.items():
        assert web.find_op(op) is fn, op
    with pytest.raises(KeyError, match="unknown op"):
        web.find_op("no_such_op")
