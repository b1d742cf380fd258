"""Beyond the toy, chapter 12: PyTorch's pipeline schedules, and its tensor parallelism, on a deeper and
wider member of the course's model family.

The chapter's part_torch runs torch.distributed.pipelining and DTensor on the 4-layer (and 8-layer)
course model, to check that splitting changes where the work happens and not the answer. Here the same
companions (companions/ch12_pipeline.py, ch12_tensor_parallel.py) run on a model deep and wide enough
for the work to take time, on `world` gloo processes (companions.launch), and the question is the one
the chapter's Gantt chart asks: how long does a step take, against one process doing all of it?

For each (schedule, micro-batches m, chunks v) case, every rank:
  1. runs one step of ch12_pipeline.run_schedule: its executed order (against pylib's device_order) and
     its gradients, which the parent sets beside pylib's unsplit float32 model (in units of float32's u);
  2. builds the same stages once more (ch12_pipeline.StageModule, one PipelineStage per chunk) and times
     `repeats` steps, each between two barriers, after one untimed step.
Before the cases, rank 0 times the unsplit model's forward and backward on the whole batch while the other
ranks wait: t_1. A perfect split over p processes would take t_1 / p; pylib's simulator
(pylib.systems.pipeline.simulate_pipeline, backward = 2 forwards) predicts (t_1 / p) x makespan / ideal,
the bubble included. What it leaves out (smaller matrices per micro-batch, sending activations, Python's
overhead per action) is what the measured time adds.

With tensor_parallel=True each rank also runs ch12_tensor_parallel.dtensor_loss_and_grads on the same
model and batch (every block's MLP and attention split by heads over the ranks), once, for its loss and
gradients against the unsplit model.

Both companions build their stages and meshes on the CPU (StageModule, DeviceMesh("cpu")), so this runs
on CPU processes whatever GPU the machine has; it says so in what it returns.

    from companions import beyond, beyond_ch12
    out = beyond_ch12.run(corpus, beyond.Size(128, 8, 4, 64), cases=beyond_ch12.default_cases(16))
    nb.show(beyond_ch12.table(out))
"""

import time

import numpy as np
import torch
import torch.distributed as dist

from companions import ch12_pipeline, launch
from companions import model as torch_gpt

U32 = 2.0 ** -24  # float32's unit roundoff


def default_cases(batch_size, world=2):
    """1F1B at every m in 2, 4, 8, 16 that divides the batch (the bubble against m), and GPipe and the
    interleaved schedule (2 chunks a rank) at the largest of them up to 8 that the interleaved schedule accepts."""
    ms = [m for m in (2, 4, 8, 16) if batch_size % m == 0 and m >= world]
    cases = [("1f1b", m, 1) for m in ms]
    mid = max((m for m in ms if m % world == 0 and m <= 8), default=None)
    if mid:
        cases += [("gpipe", mid, 1), ("interleaved", mid, 2)]
    return cases


# ---------------------------------------------------------------------------
# On each rank


def _timed(fn, repeats):
    """Median seconds of fn() between two barriers, after one untimed call."""
    fn()
    times = []
    for _ in range(repeats):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        dist.barrier()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def unsplit_seconds(net, x, y, repeats):
    """Rank 0: the whole model's forward and backward on the whole batch; the other ranks wait in the barriers."""
    def step():
        if dist.get_rank() == 0:
            net.zero_grad(set_to_none=True)
            net(x, y)[1].backward()
    return _timed(step, repeats)


def schedule_seconds(net, x, y, schedule_name, microbatches, chunks, repeats):
    """One step of torch's schedule, built once (as ch12_pipeline.run_schedule builds it) and timed."""
    from torch.distributed import pipelining
    from pylib.systems.pipeline import stage_layers
    rank, p = dist.get_rank(), dist.get_world_size()
    n_stages = p * chunks
    cut = stage_layers(net.cfg.n_layer, n_stages)
    modules, stages = [], []
    for c in range(chunks):
        j = c * p + rank
        modules.append(ch12_pipeline.StageModule(net, cut[j], j == 0, j == n_stages - 1))
        stages.append(pipelining.PipelineStage(modules[-1], j, n_stages, torch.device("cpu")))
    cls = getattr(pipelining, ch12_pipeline.SCHEDULES[schedule_name])
    schedule = cls(stages if chunks > 1 else stages[0], n_microbatches=microbatches, loss_fn=ch12_pipeline.loss_fn)
    first, last = any(m.first for m in modules), any(m.last for m in modules)

    def step():
        for m in modules:
            m.zero_grad(set_to_none=True)
        schedule.step(*([x] if first else []), target=y if last else None)
    return _timed(step, repeats)


def worker(rank, world, params, cfg, x, y, cases, repeats, tensor_parallel):
    """launch.run's worker: t_1, then each case's checked step and its timed steps; optionally DTensor's split."""
    net = torch_gpt.from_pylib(params, cfg, torch.float32)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    out = {"unsplit_seconds": unsplit_seconds(net, xt, yt, repeats), "cases": []}
    net.zero_grad(set_to_none=True)  # the stages deep-copy the blocks: no gradient may come with them
    for schedule_name, microbatches, chunks in cases:
        order, plan, loss, grads = ch12_pipeline.run_schedule(net, x, y, schedule_name, microbatches, chunks)
        dist.barrier()
        seconds = schedule_seconds(net, xt, yt, schedule_name, microbatches, chunks, repeats)
        out["cases"].append({"schedule": schedule_name, "microbatches": microbatches, "chunks": chunks,
                             "order": order, "loss": loss, "grads": grads, "seconds": seconds})
    if tensor_parallel:
        from companions import ch12_tensor_parallel
        tp = ch12_tensor_parallel.dtensor_loss_and_grads(params, cfg, x, y, "by_head")
        out["tp"] = {"loss": tp["loss"], "grads": tp["grads"]}
    return out


# ---------------------------------------------------------------------------
# From the notebook


def _rel_u(a, b):
    """The worst tensor's largest |a - b|, relative to b's largest entry, in units of u."""
    return max(float(np.abs(a[k].astype(np.float64) - b[k]).max() / np.abs(b[k]).max()) for k in b) / U32


def run(corpus, size, world=2, batch_size=16, cases=None, repeats=3, seed=0, tensor_parallel=True, timeout=900):
    """The cases on `world` CPU processes, for size (pylib's initial weights for seed) on batch_size evenly
    spaced validation windows: each case's measured and predicted step time, its order against pylib's,
    and its gradients' distance from pylib's unsplit float32 model; DTensor's split too if asked."""
    from companions import beyond
    from pylib import data, model
    from pylib.systems import pipeline
    cases = list(cases or default_cases(batch_size, world))
    cfg = beyond.model_config(size, corpus.vocab.size)
    params = model.init_params(cfg, seed, np.float32)
    x, y = data.eval_windows(corpus.val, batch_size, cfg.block_size)
    x, y = np.ascontiguousarray(x, dtype=np.int64), np.ascontiguousarray(y, dtype=np.int64)
    loss, grads = model.loss_and_grads(params, cfg, x, y)  # pylib's unsplit model, float32
    t0 = time.perf_counter()
    ranks = launch.run(worker, world, params, cfg, x, y, cases, repeats, tensor_parallel, timeout=timeout)
    seconds = time.perf_counter() - t0
    t1 = ranks[0]["unsplit_seconds"]
    rows = []
    for i, (schedule, m, v) in enumerate(cases):
        runs = [r["cases"][i] for r in ranks]
        tgrads = {name: g for r in runs for name, g in r["grads"].items()}
        sim = pipeline.simulate_pipeline(schedule, world, m, v)
        mine = [pipeline.device_order(schedule, s, world, m, v) for s in range(world)]
        rows.append({"schedule": schedule, "microbatches": m, "chunks": v,
                     "measured_s": max(r["seconds"] for r in runs),
                     "predicted_s": t1 / world * sim["makespan"] / sim["ideal"],
                     "bubble_over_ideal": sim["bubble_over_ideal"],
                     "grad_u": _rel_u(tgrads, grads),
                     "loss_rel": abs(runs[-1]["loss"] - loss) / loss if runs[-1]["loss"] is not None else None,
                     "order_matches": all([tuple(a) for a in r["order"]] == o for r, o in zip(runs, mine))})
    out = {"rows": rows, "unsplit_s": t1, "ideal_s": t1 / world, "world": world, "size": size, "batch_size": batch_size,
           "params": model.count_params(cfg), "repeats": repeats, "seconds": seconds, "device": "cpu",
           "threads": 1, "block_size": cfg.block_size}
    if tensor_parallel:
        tp = ranks[0]["tp"]
        out["tp"] = {"grad_u": max(_rel_u(r["tp"]["grads"], grads) for r in ranks),
                     "loss_rel": abs(tp["loss"] - loss) / loss}
    return out


def table(out):
    """Markdown lines: each case's step time against the unsplit model and pylib's prediction."""
    lines = [f"{out['params']:,} parameters ({out['size']}), {out['batch_size']} windows a step, {out['world']} CPU "
             f"processes of one thread over gloo; medians of {out['repeats']} steps. The unsplit model on one process: "
             f"{1e3 * out['unsplit_s']:.0f} ms a step, so a perfect split would take {1e3 * out['ideal_s']:.0f} ms. "
             f"The whole launch took {out['seconds']:.1f} s, starting the processes included.", "",
             "| schedule | micro-batches | chunks a rank | measured step | pylib's prediction | bubble (of the work) "
             "| measured / perfect split | order as pylib's | gradients vs unsplit (u) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for r in out["rows"]:
        lines.append(f"| {r['schedule']} | {r['microbatches']} | {r['chunks']} | {1e3 * r['measured_s']:.0f} ms | "
                     f"{1e3 * r['predicted_s']:.0f} ms | {r['bubble_over_ideal']:.0%} | {r['measured_s'] / out['ideal_s']:.2f} | "
                     f"{'yes' if r['order_matches'] else 'no'} | {r['grad_u']:.1f} |")
    if "tp" in out:
        lines += ["", f"DTensor's split (every block's MLP and attention over {out['world']} ranks, by heads): gradients "
                  f"within {out['tp']['grad_u']:.1f} u of the unsplit model's, loss within {out['tp']['loss_rel']:.1e} (relative)."]
    return lines
