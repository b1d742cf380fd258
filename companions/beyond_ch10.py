"""Beyond the toy, chapter 10: activation memory with and without torch.utils.checkpoint on a larger model.

Chapter 10 counts the activations of three small models, in pylib and in PyTorch
(companions/ch10_checkpoint.py). Here the same measurement runs on a larger member of the course's
model family (companions.beyond.Size), from pylib's initial weights, on B evenly spaced validation
windows, in each of the chapter's modes: no recomputation, selective (the attention core recomputed,
ch10_checkpoint.AttentionCorePolicy) and full (each block through torch.utils.checkpoint). Per mode:

    saved       bytes autograd keeps for the backward, by saved-tensor hooks (ch10_checkpoint.saved_bytes:
                each storage once, parameters left out, and what a selective policy saves)
    predicted   the same, predicted from what each backward node saves (ch10_checkpoint.torch_saved_bytes)
    pylib       pylib's count for the same shape (pylib.systems.memory.recompute_bytes: "stored" at the end of
                the forward, and the step's "peak"), and pylib less PyTorch term by term
                (ch10_checkpoint.pylib_minus_torch), which leaves "unexplained" (0 when the terms hold)
    measured    on CUDA, torch.cuda.memory_allocated after the forward less before it, and
                torch.cuda.max_memory_allocated over the forward and backward less before it (the peak also
                holds the parameters' gradients and the activations' gradients, which pylib's peak leaves
                out); on the CPU, PyTorch's memory profiler over the forward (ch10_checkpoint.profiled_bytes:
                what was allocated in it and is still allocated at its end)
    ms          the fastest of `repeats` forward-and-backward steps (recomputation's price in time)

    from companions import beyond, beyond_ch10
    out = beyond_ch10.measure(corpus, beyond.Size(256, 8, 8, 256), batch_size=8)
    out["modes"]["full"]["saved"], out["modes"]["none"]["pylib_stored"]
"""

import time

import numpy as np
import torch

from companions import beyond
from companions import ch10_checkpoint as c10
from companions import model as torch_gpt

MODES = c10.MODES


def _sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def measure_mode(net, cfg, idx, targets, mode, dev, repeats=3):
    """One mode's counts and times on the batch (idx, targets) of shape (B, T)."""
    from pylib.systems import memory
    B, T = idx.shape
    policy = (lambda: c10.AttentionCorePolicy(cfg, B, T)) if mode == "selective" else (lambda: None)
    out = {"predicted": c10.torch_saved_bytes(cfg, B, T, mode)["total"]}
    counted = memory.recompute_bytes(cfg, B, T, mode)
    out.update(pylib_stored=counted["stored"], pylib_peak=counted["peak"],
               pylib_minus_torch=sum(c10.pylib_minus_torch(cfg, B, T, mode).values()))
    sac = policy()
    net.zero_grad(set_to_none=True)
    _sync(dev)
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    loss, out["saved"] = c10.saved_bytes(net, lambda: c10.loss(net, idx, targets, mode, sac), sac)
    if dev == "cuda":
        _sync(dev)
        out["measured_stored"] = torch.cuda.memory_allocated() - base
    loss.backward()
    if dev == "cuda":
        _sync(dev)
        out["measured_peak"] = torch.cuda.max_memory_allocated() - base
        out["measured_unexplained"] = None
    else:
        net.zero_grad(set_to_none=True)
        sac = policy()
        out["measured_stored"] = c10.profiled_bytes(lambda: c10.loss(net, idx, targets, mode, sac))[1]
        out["measured_peak"] = None
        # the profiler's count less the hooks', less what ch10_checkpoint.profiler_minus_hooks names: 0 when it holds
        out["measured_unexplained"] = (out["measured_stored"] - out["saved"]
                                       - sum(c10.profiler_minus_hooks(cfg, B, T, mode).values()))
    out["unexplained"] = out["pylib_stored"] - out["saved"] - out["pylib_minus_torch"]
    out["saved_minus_predicted"] = out["saved"] - out["predicted"]
    times = []
    for _ in range(repeats):
        net.zero_grad(set_to_none=True)
        sac = policy()
        _sync(dev)
        t0 = time.perf_counter()
        c10.loss(net, idx, targets, mode, sac).backward()
        _sync(dev)
        times.append(time.perf_counter() - t0)
    out["ms"] = 1e3 * min(times)
    return out


def measure(corpus, size, batch_size=8, seed=0, dev=None, repeats=3, modes=MODES, progress=None):
    """Every mode on one larger model: {"device", "size", "params", "B", "T", "modes": {mode: measure_mode()}}."""
    from pylib import data, model
    dev = beyond.device(dev)
    cfg = beyond.model_config(size, corpus.vocab.size)
    net = torch_gpt.from_pylib(model.init_params(cfg, seed), cfg).to(dev)
    x, y = data.eval_windows(corpus.val, batch_size, size.block_size)[:2]
    idx = torch.as_tensor(np.ascontiguousarray(x, dtype=np.int64), device=dev)
    targets = torch.as_tensor(np.ascontiguousarray(y, dtype=np.int64), device=dev)
    c10.loss(net, idx, targets, "full").backward()  # one untimed step: first-call costs (checkpoint's imports)
    loop = progress(modes, desc=f"width {size.n_embd}, {dev}", unit="mode") if progress else modes
    res = {mode: measure_mode(net, cfg, idx, targets, mode, dev, repeats) for mode in loop}
    return {"device": dev, "size": size, "params": beyond.count_params(net), "B": batch_size, "T": size.block_size,
            "modes": res}


def table(out):
    """Markdown lines: per mode the bytes kept, predicted, counted by pylib and measured, and the step's time."""
    s = out["size"]
    unit, scale = ("MiB", 2 ** 20) if max(r["saved"] for r in out["modes"].values()) > 2 ** 24 else ("KiB", 2 ** 10)
    cuda = out["device"] == "cuda"
    measured = ("CUDA allocator: held after the forward, peak over the step" if cuda else
                "CPU memory profiler: allocated in the forward and still held; its unexplained bytes")
    lines = [f"{out['device']}: width {s.n_embd}, {s.n_layer} layers, {s.n_head} heads, B = {out['B']}, T = {out['T']}, "
             f"{out['params']:,} parameters; float32; bytes in {unit} unless marked (B).", "",
             f"| mode | kept for backward (hooks) | prediction − hooks (B) | pylib stored | pylib peak | pylib − hooks, unexplained (B) "
             f"| measured ({measured}) | step (ms) | × none's time |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    none_ms = out["modes"].get("none", {}).get("ms")
    for mode, r in out["modes"].items():
        second = r["measured_peak"] / scale if cuda else r["measured_unexplained"]
        meas = f"{r['measured_stored'] / scale:,.1f}, " + (f"{second:,.1f}" if cuda else f"{second:,} B")
        ratio = f"{r['ms'] / none_ms:.2f}" if none_ms else "–"
        lines.append(f"| {mode} | {r['saved'] / scale:,.1f} | {-r['saved_minus_predicted']:,} | {r['pylib_stored'] / scale:,.1f} | "
                     f"{r['pylib_peak'] / scale:,.1f} | {r['unexplained']:,} | {meas} | {r['ms']:.1f} | {ratio} |")
    return lines
