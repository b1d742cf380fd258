"""torch.distributed.checkpoint (DCP) beside pylib's checkpoints: save a sharded run on one number of
ranks, load it on another.

Chapter 15's companion. pylib.systems.reshard writes one shard per ZeRO worker and cuts the whole
again for another number of workers; DCP does the same for a PyTorch job. Here the course model
(companions.model.GPT, pylib's initial weights) and its AdamW are sharded with FSDP2 (fully_shard:
dim 0 of every weight and of its moments cut into one piece per rank, held as DTensors) on W ranks
of one gloo group, and trained on the same global batches whatever W is (each step's batch comes
from its own seeded stream; rank r takes rows r B/W .. (r+1) B/W, and FSDP2 averages the gradients).

    save(net, opt, path)   every rank writes its own pieces (torch.distributed.checkpoint.save);
                           rank 0 also writes .metadata: each tensor's global shape and every
                           piece's offsets in it
    load(net, opt, path)   a fresh sharded model of any world size asks for its own pieces: the
                           planner finds the saved pieces that overlap them from the metadata

The state dicts come from torch.distributed.checkpoint.state_dict.get_state_dict / set_state_dict,
which give and take the DTensor-sharded model and optimiser state dicts under their parameter names.
dcp_vs_pylib runs the whole comparison: train on save_world ranks, save, load on load_world ranks,
compare every weight, moment and step count bit for bit; continue, and compare with the runs that
never stopped; and write the same state through pylib.checkpoint and resume from that too.
"""

import math
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from companions import launch, model as torch_gpt

# ---------------------------------------------------------------------------
# A sharded run on this process's group


def sharded_run(mcfg, tcfg):
    """The course model at pylib's initial weights and its AdamW, sharded over the group with FSDP2."""
    from pylib import model
    net = torch_gpt.from_pylib(model.init_params(mcfg, tcfg.seed), mcfg, torch.float32)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for block in net.transformer.h:
        fully_shard(block, mesh=mesh)
    fully_shard(net, mesh=mesh)  # the rest (embeddings, tied head, ln_f) as one unit
    named = list(net.named_parameters())  # the tied weight once
    groups = [{"params": [p for _, p in named if p.ndim >= 2], "weight_decay": tcfg.weight_decay},
              {"params": [p for _, p in named if p.ndim < 2], "weight_decay": 0.0}]  # pylib.optim.param_groups
    opt = torch.optim.AdamW(groups, lr=tcfg.lr, betas=(tcfg.beta1, tcfg.beta2), eps=tcfg.eps)
    return net, opt


def batch_arrays(tokens, mcfg, tcfg, step):
    """The step's whole batch (x, y), the same on every rank and for every world size: its own seeded stream."""
    from pylib import data
    x, y = data.get_batch(tokens, tcfg.batch_size, mcfg.block_size, np.random.default_rng([tcfg.seed, 15, step]))
    return np.ascontiguousarray(x), np.ascontiguousarray(y)


def global_batch(tokens, mcfg, tcfg, step):
    """batch_arrays as tensors."""
    x, y = batch_arrays(tokens, mcfg, tcfg, step)
    return torch.from_numpy(x), torch.from_numpy(y)


def train_steps(net, opt, mcfg, tcfg, tokens, start, stop):
    """Steps start .. stop-1 on this rank's rows of each batch (no clipping, pylib's schedule)."""
    rank, world, B = dist.get_rank(), dist.get_world_size(), tcfg.batch_size
    rows = slice(rank * B // world, (rank + 1) * B // world)
    for step in range(start, stop):
        x, y = global_batch(tokens, mcfg, tcfg, step)
        for group in opt.param_groups:
            group["lr"] = tcfg.lr_at(step)
        _, loss = net(x[rows], y[rows])
        loss.backward()  # FSDP2 reduce-scatters the gradients: each rank gets the mean's piece it owns
        opt.step()
        opt.zero_grad()


# ---------------------------------------------------------------------------
# Save and load with DCP


def save(net, opt, path):
    """Every rank writes the pieces it owns; rank 0 writes the metadata that places them."""
    model_sd, optim_sd = get_state_dict(net, opt)  # DTensors: this rank's pieces, with their global shapes
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)


def load(net, opt, path):
    """Fill a fresh sharded run of any world size from a checkpoint saved by any other."""
    model_sd, optim_sd = get_state_dict(net, opt)  # this world's layout: the pieces to fill
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=path)  # reads the saved pieces that overlap this rank's, in place
    set_state_dict(net, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])


# ---------------------------------------------------------------------------
# The whole state by pylib's names, and back


def full_state(net, opt):
    """{"weights", "m", "v": {pylib name: array}, "step": AdamW's step counts}, gathered on rank 0 (None elsewhere)."""
    model_sd, optim_sd = get_state_dict(net, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if dist.get_rank() != 0:
        return None
    out = {"weights": {torch_gpt.pylib_name(k): v.numpy().copy() for k, v in model_sd.items()},
           "m": {}, "v": {}, "step": sorted({float(s["step"]) for s in optim_sd["state"].values()})}
    for key, s in optim_sd["state"].items():  # AdamW's exp_avg and exp_avg_sq are pylib's m and v
        out["m"][torch_gpt.pylib_name(key)] = s["exp_avg"].numpy().copy()
        out["v"][torch_gpt.pylib_name(key)] = s["exp_avg_sq"].numpy().copy()
    return out


def load_full(net, opt, state):
    """Set a sharded run from a whole state by pylib's names (each rank keeps its own pieces)."""
    options = StateDictOptions(full_state_dict=True)
    model_sd, optim_sd = get_state_dict(net, opt, options=options)  # the layout and the param groups
    model_sd = {k: torch.from_numpy(state["weights"][torch_gpt.pylib_name(k)]) for k in model_sd}
    (step,) = state["step"]
    for key, s in optim_sd["state"].items():
        name = torch_gpt.pylib_name(key)
        s.update(exp_avg=torch.from_numpy(state["m"][name]), exp_avg_sq=torch.from_numpy(state["v"][name]),
                 step=torch.tensor(step, dtype=s["step"].dtype))
    set_state_dict(net, opt, model_state_dict=model_sd, optim_state_dict=optim_sd, options=options)


def to_pylib_checkpoint(state, mcfg, tcfg, step):
    """pylib.checkpoint's bytes for the same weights and AdamW state (its flat m and v, in pylib's order)."""
    from pylib import checkpoint, train
    st = train.init_train_state(mcfg, tcfg)
    for name, p in st["params"].items():
        p[...] = state["weights"][name]
    st["opt"]["m"][...] = np.concatenate([state["m"][n].ravel() for n in st["params"]])
    st["opt"]["v"][...] = np.concatenate([state["v"][n].ravel() for n in st["params"]])
    st["opt"]["t"], st["step"] = step, step
    return checkpoint.checkpoint_bytes(st, mcfg, tcfg)


def from_pylib_checkpoint(data):
    """The whole state held by a pylib checkpoint, by pylib's names, as full_state gives it."""
    from pylib import checkpoint
    st, _, _, _ = checkpoint.load_checkpoint(data)
    out, offset = {"weights": {}, "m": {}, "v": {}, "step": [float(st["opt"]["t"])]}, 0
    for name, p in st["params"].items():
        out["weights"][name] = p.copy()
        for k in "mv":
            out[k][name] = st["opt"][k][offset:offset + p.size].reshape(p.shape).copy()
        offset += p.size
    return out


def identical(a, b):
    """Whether two whole states hold the same names and every value bit for bit."""
    return a["step"] == b["step"] and all(
        a[k].keys() == b[k].keys() and all(
            a[k][n].dtype == b[k][n].dtype and a[k][n].tobytes() == b[k][n].tobytes() for n in a[k])
        for k in ("weights", "m", "v"))


def max_abs_diff(a, b, what="weights"):
    """The largest |a - b| over every tensor of one part of two whole states."""
    return max(float(np.abs(a[what][n].astype(np.float64) - b[what][n]).max()) for n in a[what])


# ---------------------------------------------------------------------------
# The two launches (each function runs on every rank of its group)


def _go_on(net, opt, mcfg, tcfg, tokens, start, stop):
    """Steps start .. stop-1: [the whole state after the first, after the last] (on rank 0)."""
    train_steps(net, opt, mcfg, tcfg, tokens, start, start + 1)
    after_first = full_state(net, opt)
    train_steps(net, opt, mcfg, tcfg, tokens, start + 1, stop)
    return [after_first, full_state(net, opt)]


def _timed(fn, *args):
    """fn(*args) between two barriers, and the seconds it took on this rank."""
    dist.barrier()
    t0 = time.perf_counter()
    fn(*args)
    dist.barrier()
    return time.perf_counter() - t0


def _first_world(rank, world, mcfg, tcfg, tokens, k, n, path):
    """Train k steps, save, go on to k + n; then a fresh run loads the checkpoint on this world and does the same n."""
    net, opt = sharded_run(mcfg, tcfg)
    train_steps(net, opt, mcfg, tcfg, tokens, 0, k)
    seconds = _timed(save, net, opt, path)
    at_save = full_state(net, opt)
    straight = _go_on(net, opt, mcfg, tcfg, tokens, k, k + n)
    net, opt = sharded_run(mcfg, tcfg)
    load(net, opt, path)
    same_world = _go_on(net, opt, mcfg, tcfg, tokens, k, k + n)
    return {"at_save": at_save, "straight": straight, "same_world": same_world, "save_seconds": seconds}


def _second_world(rank, world, mcfg, tcfg, tokens, k, n, path, pylib_bytes):
    """Load the checkpoint on this world and go on n steps; the same from pylib's checkpoint; and a run
    on this world that never stopped."""
    net, opt = sharded_run(mcfg, tcfg)
    seconds = _timed(load, net, opt, path)
    loaded = full_state(net, opt)
    resumed = _go_on(net, opt, mcfg, tcfg, tokens, k, k + n)
    net, opt = sharded_run(mcfg, tcfg)
    load_full(net, opt, from_pylib_checkpoint(pylib_bytes))
    via_pylib = _go_on(net, opt, mcfg, tcfg, tokens, k, k + n)
    net, opt = sharded_run(mcfg, tcfg)
    train_steps(net, opt, mcfg, tcfg, tokens, 0, k)
    straight = _go_on(net, opt, mcfg, tcfg, tokens, k, k + n)
    return {"loaded": loaded, "resumed": resumed, "via_pylib": via_pylib, "straight": straight, "load_seconds": seconds}


def dcp_vs_pylib(mcfg, tcfg, tokens, path, k, n, save_world=4, load_world=2):
    """Save a run on save_world ranks after k steps and resume it on load_world ranks: every state, from rank 0.

    first: at_save, straight and same_world (states after the first and the last of the n steps: the
    run that never stopped, and a resume on save_world); second: loaded (the resume point on load_world), resumed,
    via_pylib (the same resume from pylib's checkpoint of at_save) and straight (load_world from step 0)."""
    first = launch.run(_first_world, save_world, mcfg, tcfg, tokens, k, n, path)[0]
    pylib_bytes = to_pylib_checkpoint(first["at_save"], mcfg, tcfg, k)
    second = launch.run(_second_world, load_world, mcfg, tcfg, tokens, k, n, path, pylib_bytes)[0]
    return {"first": first, "second": second, "pylib_bytes": pylib_bytes}


# ---------------------------------------------------------------------------
# What is on disk


def files_on_disk(path):
    """{file name: bytes} of a DCP checkpoint directory."""
    return {name: os.path.getsize(os.path.join(path, name)) for name in sorted(os.listdir(path))}


def pieces(path):
    """What the checkpoint's metadata says: {"tensors": {saved name: (global shape, [(offsets, sizes) of each
    piece])}, "objects": names saved as pickled bytes, "payload": the tensors' own bytes, "stored": the bytes
    their pieces take in the data files}."""
    meta = dcp.FileSystemReader(path).read_metadata()  # .metadata is a pickle: read only files you wrote
    tensors = {name: (tuple(md.size), [(tuple(c.offsets), tuple(c.sizes)) for c in md.chunks])
               for name, md in meta.state_dict_metadata.items() if hasattr(md, "chunks")}
    payload = sum(math.prod(md.size) * md.properties.dtype.itemsize
                  for md in meta.state_dict_metadata.values() if hasattr(md, "chunks"))
    stored = sum(info.length for index, info in meta.storage_data.items() if index.fqn in tensors)
    return {"tensors": tensors, "objects": sorted(set(meta.state_dict_metadata) - set(tensors)),
            "payload": payload, "stored": stored}
