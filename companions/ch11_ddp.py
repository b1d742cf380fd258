"""Chapter 11's companion: PyTorch's data-parallel engines beside pylib's simulated workers.

pylib's workers (pylib.systems.data_parallel) run in one process and add their gradients with a
NumPy ring. Here the same course model, the same weights and the same batches run in W real
processes of one gloo group (companions.launch), under PyTorch's three engines:

  DDP    torch.nn.parallel.DistributedDataParallel: every rank holds everything; the gradients are
         all-reduced in buckets (bucket_cap_mb, 25 MiB by default: torch/nn/parallel/distributed.py,
         _DEFAULT_BUCKET_CAP_MB) and averaged; each rank runs AdamW on everything.
  ZeRO-1 DDP plus torch.distributed.optim.ZeroRedundancyOptimizer(AdamW): the gradients are still
         all-reduced whole; each rank keeps AdamW's state for, and updates, only its partition of
         the parameters, then broadcasts it (ZeroRedundancyOptimizer._sync_params). The partition
         is by whole parameters, largest first, each to the least-loaded rank
         (ZeroRedundancyOptimizer._partition_parameters), not pylib's element-wise chunks.
  FSDP2  torch.distributed.fsdp.fully_shard on each block and on the root: each rank keeps dim-0
         shards of every parameter (padded to equal sizes, _fsdp_param.py), all-gathers a unit
         before use and reduce-scatters its gradient (_fsdp_collectives.py, foreach_reduce).

What each rank returns: DDP's gradient (and each bucket's payload and result, seen by a comm hook),
the weights after `steps` AdamW steps under each engine, the bytes it holds, the bytes it wrote to
its sockets per step, and optionally the step's compute and communication times. compare() sets
them beside pylib's data_parallel_loss_and_grads and zero_step on the same batches.

Bytes on the wire are counted from /proc/self/io's wchar (bytes this process passed to write
calls, its sockets included), read just before and after a step: gloo's payload plus its message
headers, and nothing else the process writes in that window.

Legend: W ranks, B batch, T time, N parameters.
"""

import time

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

from companions import model as torch_gpt

ENGINES = ("ddp", "ddp_small_buckets", "zero1", "fsdp2")
SMALL_BUCKET_MB = 4096 / 2 ** 20  # a 4 KiB cap: the course model's 21 KB gradient in several buckets

# ---------------------------------------------------------------------------
# One engine


def adamw_groups(params, weight_decay):
    """nanoGPT's groups, as pylib.optim.param_groups: tensors of 2 or more dimensions decay."""
    params = list(params)
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def wrap(net, engine, lr, beta1, beta2, eps, weight_decay):
    """(model, optimiser) of the course model under one engine; the rest of training is the same."""
    adamw = dict(lr=lr, betas=(beta1, beta2), eps=eps)
    if engine in ("ddp", "ddp_small_buckets"):
        cap = SMALL_BUCKET_MB if engine == "ddp_small_buckets" else None  # None: DDP's default, 25 MiB
        ddp = DDP(net, bucket_cap_mb=cap)
        return ddp, torch.optim.AdamW(adamw_groups(ddp.parameters(), weight_decay), **adamw)
    if engine == "zero1":  # DDP's all-reduce, then each rank updates its partition and broadcasts it
        ddp = DDP(net)
        return ddp, ZeroRedundancyOptimizer(adamw_groups(ddp.parameters(), weight_decay),
                                            optimizer_class=torch.optim.AdamW, **adamw)
    if engine == "fsdp2":  # each block is one unit, gathered and freed on its own; the root keeps the rest
        for block in net.transformer.h:
            fully_shard(block)
        fully_shard(net)
        return net, torch.optim.AdamW(adamw_groups(net.parameters(), weight_decay), **adamw)
    raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")


def train_step(net, opt, x, y):
    """One step on this rank's share: forward, backward (the engine communicates), AdamW."""
    opt.zero_grad(set_to_none=True)
    _, loss = net(x, y)
    loss.backward()
    opt.step()
    return loss.detach()


# ---------------------------------------------------------------------------
# What the engine does, seen from inside


def counting_allreduce_hook(seen, bucket):
    """DDP's own all-reduce (default_hooks.allreduce_hook), after noting the bucket's bytes and values."""
    buf = bucket.buffer()  # the bucket's flat gradient: this rank's payload
    seen.append({"index": bucket.index(), "bytes": buf.numel() * buf.element_size(),
                 "payload": buf.detach().numpy().copy()})
    fut = default_hooks.allreduce_hook(None, bucket)  # divides by W, then all-reduces the sum

    def keep_result(fut):
        seen[-1]["result"] = fut.value().detach().numpy().copy()
        return fut.value()
    return fut.then(keep_result)


def bytes_written():
    """This process's wchar from /proc/self/io: bytes handed to write calls, sockets included."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no wchar line")


def _local(t):
    return t.to_local() if isinstance(t, DTensor) else t


def _nbytes(tensors):
    return int(sum(_local(t).numel() * _local(t).element_size() for t in tensors))


def held_bytes(net, opt, engine):
    """Bytes this rank holds between steps: its parameters, gradients and optimiser state (tensors it owns)."""
    params = list(dict.fromkeys(net.parameters()))  # the tied weight once
    inner = opt.optim if isinstance(opt, ZeroRedundancyOptimizer) else opt  # ZeRO-1's local AdamW
    state = [t for s in inner.state.values() for t in s.values() if torch.is_tensor(t)]
    moments = [t for s in inner.state.values() for k, t in s.items() if k in ("exp_avg", "exp_avg_sq")]
    out = {"params": _nbytes(params), "grads": _nbytes(p.grad for p in params if p.grad is not None),
           "optimizer": _nbytes(state), "moments": _nbytes(moments),
           "updated_elements": int(sum(_local(p).numel() for g in inner.param_groups for p in g["params"]))}
    if engine == "fsdp2":  # the padded shards FSDP2 actually allocates (dim 0 rounded up to a multiple of W)
        groups = [m._get_fsdp_state()._fsdp_param_group for m in (*net.transformer.h, net)]
        out["params_padded"] = int(sum(fp._sharded_param_data.numel() * 4 for g in groups for fp in g.fsdp_params))
    return out


def full_weights(net):
    """{pylib name: full weight}; FSDP2's shards are all-gathered (every rank must call this)."""
    out = {}
    for key, p in dict(net.named_parameters(remove_duplicate=True)).items():
        key = key.removeprefix("module.")
        full = p.full_tensor() if isinstance(p, DTensor) else p
        out[torch_gpt.pylib_name(key)] = full.detach().numpy().copy()
    return out


# ---------------------------------------------------------------------------
# The step-time split: compute against communication


def step_time_split(ddp, x, y, repeats):
    """Median seconds of forward+backward without communication (no_sync), of the gradient's
    all-reduce alone, and of forward+backward with DDP's all-reduce; each timed after a barrier."""
    flat = torch.zeros(sum(p.numel() for p in ddp.parameters()))

    def median(fn):
        times = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    def compute():
        with ddp.no_sync():
            ddp(x, y)[1].backward()

    return {"compute": median(compute), "allreduce": median(lambda: dist.all_reduce(flat)),
            "step": median(lambda: ddp(x, y)[1].backward())}


# ---------------------------------------------------------------------------
# The worker: one launch does everything


def collective_wire_bytes(n):
    """Bytes this rank writes to its sockets for gloo's all-reduce, reduce-scatter and all-gather of n floats."""
    world = dist.get_world_size()
    full, shard = torch.ones(n), torch.ones(n // world)
    calls = {"all_reduce": lambda: dist.all_reduce(full),
             "reduce_scatter": lambda: dist.reduce_scatter_single(shard, full),
             "all_gather": lambda: dist.all_gather_single(full, shard)}
    out = {}
    for name, call in calls.items():
        dist.barrier()
        before = bytes_written()
        call()
        out[name] = bytes_written() - before
    return out


def worker(rank, world, params, cfg, batches, hyper, repeats=0):
    """Every engine on this rank's share of each batch (rows split as pylib.systems.data_parallel does)."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:  # kept, not printed: stderr would count as bytes written
        warnings.simplefilter("always")
        out = _work(rank, world, params, cfg, batches, hyper, repeats)
    out["warnings"] = sorted({str(w.message) for w in caught})
    return out


def _work(rank, world, params, cfg, batches, hyper, repeats):
    from pylib.systems import collectives as col
    a, b = col.chunk_bounds(len(batches[0][0]), world)[rank]
    shares = [(torch.from_numpy(x[a:b]), torch.from_numpy(y[a:b])) for x, y in batches]
    out = {}
    # DDP's gradient on the first batch, each bucket seen by the hook
    ddp, seen = DDP(torch_gpt.from_pylib(params, cfg)), []
    ddp.register_comm_hook(seen, counting_allreduce_hook)
    before = bytes_written()
    ddp(*shares[0])[1].backward()
    out["grad_wire_bytes"] = bytes_written() - before
    out["grads"] = torch_gpt.named_grads(ddp.module)
    out["buckets"] = seen
    for engine in ENGINES:
        net, opt = wrap(torch_gpt.from_pylib(params, cfg), engine, **hyper)
        hook = []
        if engine.startswith("ddp"):
            net.register_comm_hook(hook, counting_allreduce_hook)
        wire = []
        for x, y in shares:
            hook.clear()
            before = bytes_written()
            train_step(net, opt, x, y)
            wire.append(bytes_written() - before)
        out[engine] = {"wire_bytes": wire, "held": held_bytes(net, opt, engine), "weights": full_weights(net),
                       "bucket_bytes": [s["bytes"] for s in hook]}
    out["collectives"] = collective_wire_bytes(sum(p.numel() for p in ddp.parameters()))
    if repeats:
        out["seconds"] = step_time_split(ddp, *shares[0], repeats)
    return out


def run(params, cfg, batches, hyper, world=4, repeats=0):
    """Launch `world` gloo processes on this machine; each rank's results, by rank."""
    from companions import launch
    params = {k: np.asarray(v, dtype=np.float32) for k, v in params.items()}
    return launch.run(worker, world, params, cfg, batches, hyper, repeats)


# ---------------------------------------------------------------------------
# Beside pylib

U32 = 2.0 ** -24  # float32's unit roundoff


def sum_check(result, payloads):
    """DDP's averaged bucket against pylib's ring on the same payloads: max |diff| and its ratio to the
    float32 bound on adding W terms in any order, 2 (W-1) u sum|g_i| / W elementwise."""
    from pylib.systems import collectives as col
    W = len(payloads)
    ring = col.ring_all_reduce([p / np.float32(W) for p in payloads])[0][0]  # / W: exact, W a power of 2
    bound = 2 * (W - 1) * U32 * np.sum(np.abs(np.stack(payloads).astype(np.float64)), axis=0) / W
    diff = np.abs(result.astype(np.float64) - ring)
    ratio = np.where(bound > 0, diff / np.maximum(bound, 1e-300), np.where(diff > 0, np.inf, 0.0))
    return {"bit_identical": bool(np.array_equal(result, ring)), "max_abs_diff": float(diff.max()),
            "max_ratio": float(ratio.max())}


def max_rel_u(a, b):
    """Largest over tensors of max |a - b| / max |b|, in units of u: how far a is from b, per tensor."""
    return max(float(np.abs(a[k] - b[k]).max() / np.abs(b[k]).max()) / U32 for k in b)


def max_abs(a, b):
    """Largest |a - b| over every element of every tensor."""
    return max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in b)


def pylib_reference(params, cfg, batches, hyper, world):
    """pylib's side on the same batches: DDP's gradient, the weights after the steps under ZeRO
    stages 0, 1 and 3, the elements each worker holds and the elements it sends per step."""
    from pylib import model
    from pylib.systems import data_parallel as dp
    params = {k: np.asarray(v, dtype=np.float32) for k, v in params.items()}
    _, grads = dp.data_parallel_loss_and_grads(params, cfg, *batches[0], world)
    out = {"grads": grads, "stages": {}}
    N = model.count_params(cfg)
    for stage in (0, 1, 3):
        state = dp.zero_init(params, world, stage)
        for x, y in batches:
            dp.zero_step(state, cfg, x, y, **hyper)
        out["stages"][stage] = {"weights": dp.zero_params(state),
                                "held": [dp.held_elements(state, r) for r in range(world)],
                                "sent_per_step": dp.zero_traffic_per_step(N, world, stage)}
    return out


def compare(ranks, ref, world):
    """The engines beside each other and beside pylib: a flat dict of figures (deterministic)."""
    out = {}
    # Gradients: the collective alone (payloads -> result), then the whole gradient against pylib's
    buckets = ranks[0]["buckets"]
    checks = [sum_check(buckets[i]["result"], [r["buckets"][i]["payload"] for r in ranks]) for i in range(len(buckets))]
    out["grad.sum_bit_identical"] = all(c["bit_identical"] for c in checks)
    out["grad.sum_max_ratio"] = max(c["max_ratio"] for c in checks)
    out["grad.max_rel_u"] = max_rel_u(ranks[0]["grads"], ref["grads"])
    out["grad.ranks_bit_identical"] = all(
        all(np.array_equal(r["grads"][k], ranks[0]["grads"][k]) for k in ranks[0]["grads"]) for r in ranks)
    # Weights after the steps
    w = {e: ranks[0][e]["weights"] for e in ENGINES}
    for e in ENGINES:
        out[f"{e}.ranks_bit_identical"] = all(
            all(np.array_equal(r[e]["weights"][k], w[e][k]) for k in w[e]) for r in ranks)
        out[f"{e}.vs_ddp_max_abs"] = max_abs(w[e], w["ddp"])
        out[f"{e}.vs_ddp_bit_identical"] = all(np.array_equal(w[e][k], w["ddp"][k]) for k in w["ddp"])
        out[f"{e}.vs_pylib_max_abs"] = max_abs(w[e], ref["stages"][0]["weights"])
    p0 = ref["stages"][0]["weights"]
    out["pylib.stages_bit_identical"] = all(
        all(np.array_equal(ref["stages"][s]["weights"][k], p0[k]) for k in p0) for s in (1, 3))
    # Bytes held per rank, beside pylib's ZeRO table (elements x 4 bytes)
    for e, stage in (("ddp", 0), ("zero1", 1), ("fsdp2", 3)):
        for part in ("params", "grads", "optimizer", "moments"):
            out[f"{e}.held.{part}"] = [r[e]["held"][part] for r in ranks]
        out[f"{e}.held.updated_elements"] = [r[e]["held"]["updated_elements"] for r in ranks]
        for part in ("params", "grads", "optimizer"):
            out[f"pylib{stage}.held.{part}"] = [4 * h[part] for h in ref["stages"][stage]["held"]]
        out[f"pylib{stage}.sent_bytes"] = 4 * ref["stages"][stage]["sent_per_step"]
    out["fsdp2.held.params_padded"] = [r["fsdp2"]["held"]["params_padded"] for r in ranks]
    # Bytes: what DDP's hook saw, and what each rank wrote to its sockets per step
    for e in ENGINES:
        out[f"{e}.wire_bytes"] = [r[e]["wire_bytes"] for r in ranks]
        out[f"{e}.bucket_bytes"] = ranks[0][e]["bucket_bytes"]
    out["grad.wire_bytes"] = [r["grad_wire_bytes"] for r in ranks]
    for name in ranks[0]["collectives"]:
        out[f"collective.{name}.wire_bytes"] = [r["collectives"][name] for r in ranks]
    return out
