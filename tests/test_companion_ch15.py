"""torch.distributed.checkpoint (companions/ch15_dcp.py): a sharded run saved on 2 ranks and loaded on
1 comes back bit for bit, and holds the same numbers as pylib's checkpoint of the same state.

One small run for the whole module (the default model, 2 steps, save, 2 more): two launches of
spawned gloo processes, 2 then 1. The chapter-scale run (4 ranks, then 2) is experiments/ch15.py's
part_torch, under build.py --measure only.
"""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companions import ch15_dcp  # noqa: E402
from pylib import model, train  # noqa: E402

K, N, SAVE_WORLD, LOAD_WORLD = 2, 2, 2, 1


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    mcfg, tcfg = model.GPTConfig(), train.TrainConfig()
    tokens = np.random.default_rng(0).integers(0, mcfg.vocab_size, 3000)
    path = str(tmp_path_factory.mktemp("dcp") / "checkpoint")
    out = ch15_dcp.dcp_vs_pylib(mcfg, tcfg, tokens, path, K, N, SAVE_WORLD, LOAD_WORLD)
    out["pieces"] = ch15_dcp.pieces(path)
    out["init"] = model.init_params(mcfg, tcfg.seed)
    return out


def test_a_checkpoint_saved_on_two_ranks_loads_on_one_bit_for_bit(run):
    first, second = run["first"], run["second"]
    assert first["at_save"]["step"] == [float(K)]
    assert any(not np.array_equal(w, run["init"][n]) for n, w in first["at_save"]["weights"].items())  # it trained
    assert ch15_dcp.identical(second["loaded"], first["at_save"])


def test_a_dcp_resume_on_the_same_ranks_is_the_run_that_never_stopped(run):
    first = run["first"]
    assert not ch15_dcp.identical(first["straight"][-1], first["at_save"])  # the n steps changed the state
    assert all(ch15_dcp.identical(a, b) for a, b in zip(first["same_world"], first["straight"]))


def test_pylibs_checkpoint_of_the_same_state_holds_the_same_numbers(run):
    """pylib.checkpoint's file of the torch state restores it bit for bit, and resuming from it is
    resuming from DCP's checkpoint, step for step."""
    assert ch15_dcp.identical(ch15_dcp.from_pylib_checkpoint(run["pylib_bytes"]), run["first"]["at_save"])
    assert all(ch15_dcp.identical(a, b) for a, b in zip(run["second"]["via_pylib"], run["second"]["resumed"]))


def test_the_metadata_places_every_piece_in_its_global_tensor(run):
    """The global shapes and each piece's offsets are what let another world size find its rows: the
    pieces of every sharded tensor tile it exactly once, cut as FSDP2 cuts dim 0 (torch.chunk)."""
    tensors = run["pieces"]["tensors"]
    assert tensors["model.transformer.wte.weight"] == ((65, 16), [((0, 0), (33, 16)), ((33, 0), (32, 16))])
    for name, (shape, chunks) in tensors.items():
        if not shape:  # AdamW's step count: one scalar, written once
            assert chunks == [((), ())], name
            continue
        rows = sorted((o[0], o[0] + s[0]) for o, s in chunks)
        assert [a for a, _ in rows] == [0] + [b for _, b in rows[:-1]] and rows[-1][1] == shape[0], name
        assert all(o[1:] == (0,) * (len(shape) - 1) and s[1:] == shape[1:] for o, s in chunks), name
    assert run["pieces"]["payload"] == sum(4 * math.prod(shape) for shape, _ in tensors.values())


def test_the_comparison_sees_one_ulp(run):
    """A planted error: one weight one float32 ulp away, or another step count, is not identical."""
    state = run["first"]["at_save"]
    nudged = {**state, "weights": dict(state["weights"])}
    w = nudged["weights"]["h.0.attn.c_proj.weight"].copy()
    w[3, 5] = np.nextafter(w[3, 5], np.float32(np.inf))
    nudged["weights"]["h.0.attn.c_proj.weight"] = w
    assert not ch15_dcp.identical(nudged, state)
    assert not ch15_dcp.identical({**state, "step": [float(K + 1)]}, state)
    ulp = np.spacing(np.abs(state["weights"]["h.0.attn.c_proj.weight"][3, 5]))
    assert ch15_dcp.max_abs_diff(nudged, state) == float(ulp)
