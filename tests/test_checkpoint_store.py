"""Checkpoints on disk: an atomic write leaves the old file or the new one, never part; the last K
are kept; an asynchronous save writes the state as it was when save() returned."""

import os
import threading

import numpy as np
import pytest

from pylib import checkpoint, checkpoint_store as store, model, train

CFG = model.GPTConfig()
SHORT = train.TrainConfig(steps=40, warmup_steps=5, eval_interval=10, eval_windows=8)


@pytest.fixture(scope="module")
def tokens(shared_corpus):
    return shared_corpus.train, shared_corpus.val


def test_a_failed_write_leaves_the_previous_checkpoint_whole(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    store.write_atomic(b"old checkpoint", path)

    def crash(*a):  # the machine dies between writing the temporary file and renaming it
        raise OSError("power lost")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="power lost"):
        store.write_atomic(b"new checkpoint, never finished", path)
    assert path.read_bytes() == b"old checkpoint"
    assert os.listdir(tmp_path) == ["ckpt.npz"]  # the temporary file was removed
    monkeypatch.undo()
    real_fdopen = os.fdopen

    class Torn:  # the write itself fails half-way
        def __init__(self, f):
            self.f = f
        def __enter__(self):  # noqa: E301
            return self
        def __exit__(self, *a):  # noqa: E301
            self.f.close()
        def write(self, data):  # noqa: E301
            self.f.write(data[: len(data) // 2])
            raise OSError("disk full")
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: Torn(real_fdopen(fd, mode)))
    with pytest.raises(OSError, match="disk full"):
        store.write_atomic(b"x" * 1000, path)
    assert path.read_bytes() == b"old checkpoint" and os.listdir(tmp_path) == ["ckpt.npz"]


def test_the_last_k_checkpoints_are_kept_and_the_newest_loads(tokens, tmp_path):
    state = train.init_train_state(CFG, SHORT)
    (tmp_path / ".tmp-abc.partial").write_bytes(b"a write that never finished")
    for _ in range(5):
        train.train_steps(state, CFG, SHORT, *tokens, 3)
        store.save(state, tmp_path, CFG, SHORT, keep=2)
    assert [s for s, _ in store.list_checkpoints(tmp_path)] == [12, 15]
    loaded, *_ = checkpoint.load_checkpoint(store.latest_checkpoint(tmp_path), CFG)
    assert loaded["step"] == 15
    np.testing.assert_array_equal(loaded["params"]["wte"], state["params"]["wte"])
    with pytest.raises(ValueError, match="keep"):
        store.prune(tmp_path, 0)


def test_an_async_save_writes_the_state_as_it_was_when_save_returned(tokens, tmp_path, monkeypatch):
    state = train.init_train_state(CFG, SHORT)
    train.train_steps(state, CFG, SHORT, *tokens, 8)
    expected = checkpoint.checkpoint_bytes(state, CFG, SHORT)
    release = threading.Event()
    real_write = store.write_atomic

    def slow_write(data, path):  # the disk is slow: the write waits until training has moved on
        assert release.wait(30)
        return real_write(data, path)
    monkeypatch.setattr(store, "write_atomic", slow_write)
    saver = store.AsyncCheckpointer(tmp_path, keep=3)
    path = saver.save(state, CFG, SHORT)
    train.train_steps(state, CFG, SHORT, *tokens, 5)  # training goes on while the write is pending
    assert not os.path.exists(path)
    release.set()
    saver.wait()
    with open(path, "rb") as f:
        assert f.read() == expected  # step 8's state, not step 13's
    monkeypatch.setattr(store, "write_atomic", lambda *a: (_ for _ in ()).throw(OSError("disk gone")))
    saver.save(state, CFG, SHORT)
    with pytest.raises(OSError, match="disk gone"):  # a background failure surfaces on the training thread
        saver.wait()
