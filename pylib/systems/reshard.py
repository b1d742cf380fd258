"""Sharded checkpoints of a ZeRO run, and resharding them onto another number of workers.

Under ZeRO (pylib.systems.data_parallel) worker i of W owns the slice bounds[i] of the flat
parameter vector: its AdamW moments (stages 1-3) and, at stage 3, its weights. A sharded checkpoint
is what each worker writes for itself, as torch.distributed.checkpoint does: its slice, the slice's
place in the whole (start, stop of N) and the step count, with no worker gathering the whole model.
A job that restarts on another number of workers (a node lost, or more nodes granted) reads every
shard, checks that the slices tile 0..N exactly once, and cuts the whole into the new workers'
slices (pylib.systems.collectives.chunk_bounds, the ring's chunks). Nothing is recomputed: the
state is the saved one bit for bit, and on the same number of workers the resumed run is the run
that never stopped. On another number the gradient's reduction adds the workers' sums in another
order, so the run continues the same to float32 rounding, not bit for bit. Cost: at load time every new worker reads the shards that overlap its slice
(here, simply all of them) and the job needs the whole state's memory once, to cut it again.

A shard's file is an .npz read with pylib.checkpoint's bounded reader (no pickles; every size checked
before anything is allocated); stage 0 (plain data parallelism) is not sharded and uses pylib.checkpoint.
"""

import io
import json

import numpy as np

from pylib import checkpoint
from pylib.systems import collectives as col, data_parallel as dp

FORMAT = "training-course-zero-shard"


def shard_bytes(state, rank):
    """Worker `rank`'s shard of a ZeRO state (stage 1-3) as .npz bytes."""
    stage, (a, b) = state["stage"], state["bounds"][rank]
    if stage not in (1, 2, 3):
        raise ValueError("only ZeRO stages 1-3 are sharded; save stage 0 with pylib.checkpoint")
    w = state["workers"][rank]
    own_params = w["params"] if stage == 3 else w["params"][a:b]  # stages 1-2 hold all weights, own a slice
    meta = {"format": FORMAT, "stage": stage, "rank": rank, "W": state["W"], "N": state["N"], "start": a, "stop": b,
            "t": int(w["opt"]["t"]), "steps": int(state["steps"])}
    buf = io.BytesIO()
    np.savez(buf, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), params=own_params,
             m=w["opt"]["m"], v=w["opt"]["v"])
    return buf.getvalue()


def read_shard(blob):
    """(meta, {"params", "m", "v"}) of one shard's bytes; CheckpointError if it is not a valid shard."""
    members = checkpoint._read_members(blob)
    if set(members) != {"meta", "params", "m", "v"}:
        raise checkpoint.CheckpointError("The file is not a ZeRO shard of this course (its arrays are not params, m, v).")
    meta = checkpoint._json_entry(members, "meta")
    ints = ("stage", "rank", "W", "N", "start", "stop", "t", "steps")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or not all(
            isinstance(meta.get(k), int) and not isinstance(meta.get(k), bool) and meta[k] >= 0 for k in ints):
        raise checkpoint.CheckpointError("The shard's description (meta) is missing or invalid.")
    n = meta["stop"] - meta["start"]
    for name in ("params", "m", "v"):
        arr = members[name]
        if arr.dtype != np.float32 or arr.shape != (n,):
            raise checkpoint.CheckpointError(f"The shard's {name} has shape {arr.shape} and dtype {arr.dtype}; its "
                                             f"slice {meta['start']}..{meta['stop']} needs ({n},) float32.")
    return meta, members


def reshard(blobs, like, new_workers):
    """A ZeRO state for new_workers workers from every shard of a run (in any order).

    like: the model's params dict (names and shapes, as zero_init takes). The shards must agree on
    stage, N and step count, and their slices must tile 0..N exactly once; CheckpointError otherwise."""
    shards = sorted((read_shard(b) for b in blobs), key=lambda s: s[0]["start"])
    metas = [m for m, _ in shards]
    first = metas[0]
    N = sum(int(np.prod(p.shape)) for p in like.values())
    if any((m["stage"], m["N"], m["t"], m["steps"], m["W"]) != (first["stage"], N, first["t"], first["steps"], first["W"])
           for m in metas):
        raise checkpoint.CheckpointError("The shards are not of one run: stage, size N, step or worker count differ.")
    if len(metas) != first["W"]:
        raise checkpoint.CheckpointError(f"The run had {first['W']} workers; {len(metas)} shards were given.")
    if sorted(m["rank"] for m in metas) != list(range(first["W"])):
        raise checkpoint.CheckpointError(f"The shards' ranks are {sorted(m['rank'] for m in metas)}; a run of "
                                         f"{first['W']} workers has one shard of each rank 0..{first['W'] - 1}.")
    edges = [0] + [m["stop"] for m in metas]
    if [m["start"] for m in metas] != edges[:-1] or edges[-1] != N:
        raise checkpoint.CheckpointError("The shards' slices do not cover the parameters exactly once.")
    flat = {k: np.concatenate([s[k] for _, s in shards]) for k in ("params", "m", "v")}  # (N,) each
    state = dp.zero_init(dp.unflatten(flat["params"], like), new_workers, first["stage"])
    for w, (a, b) in zip(state["workers"], col.chunk_bounds(N, state["W"])):
        w["opt"]["t"] = first["t"]
        w["opt"]["m"][...] = flat["m"][a:b]
        w["opt"]["v"][...] = flat["v"][a:b]
    state["steps"] = first["steps"]
    return state
