"""Where checkpoints live on disk: atomic writes, the last K kept, and writes in the background.

pylib.checkpoint turns a train state into bytes and back. A long job also needs the files to be
safe against the failures it checkpoints for:
  - atomic writes: the bytes go to a temporary file in the same directory, are flushed to the disk
    (fsync), and only then renamed over the final name (os.replace, atomic on POSIX and Windows
    when both names are on one filesystem). A crash mid-write leaves the previous checkpoint and a
    stray temporary file, never a half-written checkpoint under the real name. Cost: the disk
    holds two copies for the length of one write, plus an fsync;
  - keeping the last K: checkpoints are named by step (ckpt-step00001200.npz) and, after each
    write, all but the newest K are deleted. A checkpoint that turns out to hold an already
    broken run (a loss spike found late, silent data corruption) can still be stepped back from.
    Cost: K times the disk;
  - asynchronous writes (as torch.distributed.checkpoint.async_save does): the state is turned
    into bytes at once, which blocks training for the serialisation only, and the write to disk
    runs on a background thread while training goes on. At most one write is in flight: the next
    save waits for the previous one. Cost: one more copy of the state in memory while it is
    written. Threads exist in CPython, not in the page's Pyodide, so the page saves synchronously.
"""

import os
import re
import tempfile
import threading

from pylib import checkpoint

NAME = re.compile(r"^ckpt-step(\d{8})\.npz$")  # a complete checkpoint; temporary files never match


def checkpoint_name(step):
    """The file name of the checkpoint at a step."""
    return f"ckpt-step{int(step):08d}.npz"


def write_atomic(data, path):
    """Write bytes to path so that path holds either its old content or all of data, never part."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".partial", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return len(data)


def list_checkpoints(directory):
    """[(step, path)] of the complete checkpoints in directory, oldest first."""
    found = [(int(m.group(1)), os.path.join(directory, name))
             for name in os.listdir(directory) if (m := NAME.match(name))]
    return sorted(found)


def latest_checkpoint(directory):
    """The path of the newest complete checkpoint in directory, or None."""
    found = list_checkpoints(directory)
    return found[-1][1] if found else None


def prune(directory, keep):
    """Delete all but the newest `keep` checkpoints; returns the deleted paths."""
    if not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be a whole number >= 1, got {keep!r}")
    old = list_checkpoints(directory)[:-keep]
    for _, path in old:
        os.remove(path)
    return [p for _, p in old]


def save(state, directory, model_cfg, train_cfg, keep=3, log=None):
    """Write the state's checkpoint atomically as checkpoint_name(step) and keep the newest `keep`."""
    path = os.path.join(directory, checkpoint_name(state["step"]))
    write_atomic(checkpoint.checkpoint_bytes(state, model_cfg, train_cfg, log), path)
    prune(directory, keep)
    return path


class AsyncCheckpointer:
    """Checkpoints written on a background thread: save() returns once the state is bytes."""

    def __init__(self, directory, keep=3):
        self.directory, self.keep = directory, keep
        self._thread, self._error = None, None

    def save(self, state, model_cfg, train_cfg, log=None):
        """Serialise now (the state may change as soon as this returns), write and prune in the background."""
        self.wait()  # one write in flight at most
        data = checkpoint.checkpoint_bytes(state, model_cfg, train_cfg, log)
        path = os.path.join(self.directory, checkpoint_name(state["step"]))

        def write():
            try:
                write_atomic(data, path)
                prune(self.directory, self.keep)
            except BaseException as e:  # reported by the next wait(), on the training thread
                self._error = e

        self._thread = threading.Thread(target=write, name="checkpoint-writer", daemon=False)
        self._thread.start()
        return path

    def wait(self):
        """Block until the write in flight (if any) is on disk; re-raise its error there."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error
