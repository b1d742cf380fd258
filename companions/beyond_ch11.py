"""Beyond the toy, chapter 11: DDP, ZeRO-1 and FSDP2 on a wider member of the course's model family.

The chapter's part_torch (companions/ch11_ddp.py) runs PyTorch's data-parallel engines on the 5k-parameter
model, where every gradient fits in one 21 KB bucket. Here the same engines train a wider member of the
family (companions.beyond's sizes, pylib's initialisation for one seed) across `world` spawned processes
(companions.launch: one gloo group on this machine), from the same weights on the same batches:

    ddp    DistributedDataParallel: every rank holds everything; gradients all-reduced in buckets
    zero1  DDP plus ZeroRedundancyOptimizer(AdamW): each rank keeps AdamW's state for its partition only
    fsdp2  fully_shard on each block and on the root: weights, gradients and AdamW state in dim-0 shards

On a machine with several GPUs (at least `world`), each rank takes one GPU and the engines communicate
over an NCCL group made beside launch's gloo group (dist.new_group(backend="nccl")); otherwise they run on
the CPU over gloo, one thread per process. What each rank reports, per engine: its batch loss per step,
each step's time (after a barrier), the bytes it holds between steps (companions.ch11_ddp.held_bytes:
parameters, gradients, optimiser state), on the CPU the bytes it wrote to its sockets per step
(ch11_ddp.bytes_written, /proc/self/io: gloo's payload and headers) and on a GPU its peak allocated
bytes; and for DDP the step-time split (compute under no_sync, the all-reduce alone, DDP's forward and
backward; ch11_ddp.step_time_split on the CPU). summary() sets the bytes beside pylib's ZeRO calculator
(pylib.systems.memory.training_memory, fp32) and pylib's per-step traffic (data_parallel.zero_traffic_per_step).

    from companions import beyond, beyond_ch11
    out = beyond_ch11.run(corpus, beyond.Size(256, 4, 4, 64), world=2, steps=10)
    nb.show(beyond_ch11.table(out))

The learning rate follows chapter 1's schedule (warmup over a fifth of the steps, then cosine; no clipping, as
in ch11_ddp.train_step): the point is what the engines hold and send, and that they train alike, not the loss
reached. One seed; the numbers are the reader's own.
"""

import time

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

from companions import ch11_ddp, launch
from companions import model as torch_gpt

ENGINES = ("ddp", "zero1", "fsdp2")
ZERO_STAGE = {"ddp": 0, "zero1": 1, "fsdp2": 3}  # the ZeRO stage each engine is, for pylib's calculator


def backend_for(world):
    """"nccl" when this machine has at least `world` GPUs (world >= 2), else "gloo" (CPU processes)."""
    return "nccl" if world >= 2 and torch.cuda.is_available() and torch.cuda.device_count() >= world else "gloo"


# ---------------------------------------------------------------------------
# On each rank


def _place(rank, world, backend):
    """(device, process group for the engines, 1-D device mesh for FSDP2) on this rank."""
    if backend == "nccl":
        torch.cuda.set_device(rank)
        group = dist.new_group(list(range(world)), backend="nccl")  # every rank calls it, as new_group requires
        return torch.device("cuda", rank), group, DeviceMesh.from_group(group, "cuda")
    return torch.device("cpu"), None, init_device_mesh("cpu", (world,))


def _sync(group, dev):
    """Wait for this rank's GPU work (if any), then for every rank."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    dist.barrier(group=group)


def wrap(net, engine, group, mesh, dev, lr, beta1, beta2, eps, weight_decay):
    """(model, optimiser) under one engine: ch11_ddp.wrap's engines with the group, mesh and device given."""
    adamw = dict(lr=lr, betas=(beta1, beta2), eps=eps)
    ids = [dev.index] if dev.type == "cuda" else None
    if engine in ("ddp", "zero1"):
        ddp = DDP(net, device_ids=ids, process_group=group)  # default buckets (25 MiB)
        groups = ch11_ddp.adamw_groups(ddp.parameters(), weight_decay)
        if engine == "ddp":
            return ddp, torch.optim.AdamW(groups, **adamw)
        return ddp, ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, process_group=group, **adamw)
    if engine == "fsdp2":  # each block one unit, gathered and freed on its own; the root keeps the rest
        for block in net.transformer.h:
            fully_shard(block, mesh=mesh)
        fully_shard(net, mesh=mesh)
        return net, torch.optim.AdamW(ch11_ddp.adamw_groups(net.parameters(), weight_decay), **adamw)
    raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")


def full_weights(net):
    """{name: full weight as a float64 CPU array}; FSDP2's shards all-gathered (every rank must call this)."""
    out = {}
    for key, p in dict(net.named_parameters(remove_duplicate=True)).items():
        full = p.full_tensor() if isinstance(p, DTensor) else p
        out[torch_gpt.pylib_name(key.removeprefix("module."))] = full.detach().cpu().double().numpy()
    return out


def split_cuda(ddp, x, y, repeats, group, dev):
    """ch11_ddp.step_time_split on a GPU: each timed call between two synchronisations."""
    flat = torch.zeros(sum(p.numel() for p in ddp.parameters()), device=dev)

    def median(fn):
        times = []
        for _ in range(repeats):
            _sync(group, dev)
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize(dev)
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    def compute():
        with ddp.no_sync():
            ddp(x, y)[1].backward()

    return {"compute": median(compute), "allreduce": median(lambda: dist.all_reduce(flat, group=group)),
            "step": median(lambda: ddp(x, y)[1].backward())}


def worker(rank, world, params, cfg, batches, hyper, lrs, engines, repeats, backend):
    """launch.run's worker: every engine on this rank's rows of each batch (rows split as pylib splits them)."""
    from pylib.systems import collectives as col
    dev, group, mesh = _place(rank, world, backend)
    a, b = col.chunk_bounds(len(batches[0][0]), world)[rank]
    shares = [(torch.from_numpy(x[a:b]).to(dev), torch.from_numpy(y[a:b]).to(dev)) for x, y in batches]
    out, reference = {"device": str(dev), "backend": backend, "rows": b - a}, None
    for engine in engines:
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(dev)
        net, opt = wrap(torch_gpt.from_pylib(params, cfg).to(dev), engine, group, mesh, dev, **hyper)
        losses, seconds, wire = [], [], []
        for (x, y), lr in zip(shares, lrs):
            for g in opt.param_groups:  # ZeroRedundancyOptimizer passes its groups' lr on to its local AdamW
                g["lr"] = lr
            _sync(group, dev)
            before = ch11_ddp.bytes_written() if dev.type == "cpu" else 0
            t0 = time.perf_counter()
            loss = ch11_ddp.train_step(net, opt, x, y)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            seconds.append(time.perf_counter() - t0)
            wire.append(ch11_ddp.bytes_written() - before if dev.type == "cpu" else None)
            losses.append(float(loss))
        res = {"losses": losses, "seconds": seconds, "wire_bytes": wire,
               "held": ch11_ddp.held_bytes(net, opt, engine),
               "peak_bytes": int(torch.cuda.max_memory_allocated(dev)) if dev.type == "cuda" else None}
        weights = full_weights(net)
        if rank == 0:  # the largest difference from DDP's weights after the same steps
            reference = reference or weights
            res["vs_first_max_abs"] = max(float(np.abs(weights[k] - reference[k]).max()) for k in reference)
        if engine == "ddp" and repeats:
            x, y = shares[0]
            res["split"] = (ch11_ddp.step_time_split(net, x, y, repeats) if dev.type == "cpu"
                            else split_cuda(net, x, y, repeats, group, dev))
        out[engine] = res
        del net, opt
        _sync(group, dev)
    return out


# ---------------------------------------------------------------------------
# From the notebook


def run(corpus, size, world=2, steps=10, batch_size=16, lr=1e-3, seed=0, engines=ENGINES, repeats=5,
        backend=None, timeout=600):
    """Train size under each engine on `world` processes, steps steps of batch_size windows (split over the
    ranks), from pylib's initial weights for seed: {"ranks": each rank's results, "cfg", "params" (N),
    "world", "steps", "batch_size", "backend", "device", "seconds" (the whole launch, processes included)}."""
    from companions import beyond
    from pylib import model, train
    if batch_size % world:
        raise ValueError(f"batch_size ({batch_size}) must split evenly over the {world} ranks")
    backend = backend or backend_for(world)
    cfg = beyond.model_config(size, corpus.vocab.size)
    params = model.init_params(cfg, seed)
    rng = np.random.default_rng([seed, 11])
    batches = [beyond.windows(corpus.train, batch_size, size.block_size, rng) for _ in range(steps)]
    tc = train.TrainConfig(lr=lr, steps=steps, warmup_steps=max(1, steps // 5))
    hyper = dict(lr=lr, beta1=tc.beta1, beta2=tc.beta2, eps=tc.eps, weight_decay=tc.weight_decay)
    lrs = [tc.lr_at(step) for step in range(steps)]  # chapter 1's schedule: warmup, then cosine
    t0 = time.perf_counter()
    ranks = launch.run(worker, world, params, cfg, batches, hyper, lrs, tuple(engines), repeats, backend, timeout=timeout)
    return {"ranks": ranks, "cfg": cfg, "params": model.count_params(cfg), "world": world, "steps": steps,
            "batch_size": batch_size, "backend": backend, "device": ranks[0]["device"], "engines": tuple(engines),
            "seconds": time.perf_counter() - t0, "size": size, "lr": lr, "seed": seed}


def summary(out):
    """Per engine: bytes per rank (min and max over ranks) beside pylib's calculator, wire bytes per step,
    median step time, the mean batch loss per step (over ranks: equal shares) and the weights' distance from
    the first engine's; and DDP's step-time split. Plain numbers, for tables and charts."""
    from pylib.systems import data_parallel as dp
    from pylib.systems import memory
    ranks, W, N = out["ranks"], out["world"], out["params"]
    shape = memory.shape_from_config(out["cfg"])
    rows = {}
    for e in out["engines"]:
        runs = [r[e] for r in ranks]
        calc = memory.training_memory(shape, precision="fp32", zero_stage=ZERO_STAGE[e], dp=W)
        row = {"losses": np.mean([r["losses"] for r in runs], axis=0).tolist(),
               "step_ms": 1e3 * float(np.median([s for r in runs for s in (r["seconds"][1:] or r["seconds"])])),  # after the first
               "vs_first_max_abs": runs[0]["vs_first_max_abs"],
               "predicted": {"params": int(calc["weights"]), "grads": int(calc["gradients"]),
                             "optimizer": int(calc["optimizer"])},
               "predicted_wire_bytes": int(round(4 * dp.zero_traffic_per_step(N, W, ZERO_STAGE[e])))}
        for part in ("params", "grads", "optimizer", "moments"):
            row[part] = (min(r["held"][part] for r in runs), max(r["held"][part] for r in runs))
        last = [r["wire_bytes"][-1] for r in runs]
        row["wire_bytes"] = None if None in last else (min(last), max(last))
        row["peak_bytes"] = None if runs[0]["peak_bytes"] is None else max(r["peak_bytes"] for r in runs)
        rows[e] = row
    split = ranks[0].get("ddp", {}).get("split")
    if split:
        split = {k: 1e3 * v for k, v in split.items()}
        split["exposed"] = split["step"] - split["compute"]
    return {"engines": rows, "split_ms": split}


def _span(pair):
    lo, hi = pair
    return f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"


def table(out, summ=None):
    """Markdown lines: what each engine holds per rank (beside pylib's ZeRO calculator), sends and takes."""
    s = summ or summary(out)
    lines = [f"{out['params']:,} parameters ({out['size']}), {out['world']} ranks on {out['device']} over "
             f"{out['backend']}, {out['steps']} steps of {out['batch_size']} windows, peak lr {out['lr']}; "
             f"the whole launch took {out['seconds']:.1f} s, starting the processes included.", "",
             "| engine | parameters (bytes per rank) | gradients | AdamW moments | pylib's calculator (params / grads / moments) "
             "| bytes written per rank, last step | pylib's ring, per step | median step | weights vs DDP (max abs) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for e, r in s["engines"].items():
        p = r["predicted"]
        wire = "–" if r["wire_bytes"] is None else _span(r["wire_bytes"])
        lines.append(f"| {e} | {_span(r['params'])} | {_span(r['grads'])} | {_span(r['moments'])} | "
                     f"{p['params']:,} / {p['grads']:,} / {p['optimizer']:,} | {wire} | {r['predicted_wire_bytes']:,} | "
                     f"{r['step_ms']:.1f} ms | {r['vs_first_max_abs']:.2e} |")
    if any(r["peak_bytes"] is not None for r in s["engines"].values()):
        lines += ["", "Peak GPU memory allocated per rank: " + ", ".join(
            f"{e} {r['peak_bytes'] / 2 ** 20:,.1f} MiB" for e, r in s["engines"].items())]
    if s["split_ms"]:
        t = s["split_ms"]
        lines += ["", f"DDP's step-time split on rank 0 (medians): compute alone (no_sync) {t['compute']:.1f} ms, "
                  f"the gradient's all-reduce alone {t['allreduce']:.1f} ms, DDP's forward and backward {t['step']:.1f} ms: "
                  f"{t['exposed']:.1f} ms of communication not hidden behind the backward."]
    return lines
