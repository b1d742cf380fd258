"""Chapter 12's pipeline in PyTorch's own engine: torch.distributed.pipelining beside pylib's simulator.

The course model (companions/model.py, pylib's weights) is cut into stages as pylib cuts it
(pylib.systems.pipeline.stage_layers): the embeddings on the first stage, ln_f and the head on the
last. Each rank of a gloo group wraps its stage(s) in a PipelineStage and runs one step of
ScheduleGPipe, Schedule1F1B or ScheduleInterleaved1F1B (torch/distributed/pipelining/schedules.py).
What comes back is each rank's executed order of forward and backward actions (recorded by wrapping
the stage's forward_one_chunk and backward_one_chunk, the two calls every schedule makes), the
schedule's own plan (its pipeline_order), the loss and every gradient, by pylib's names.

Two things differ from pylib, and both are handled here in the open:

- The tied head. pylib adds the embedding's and the head's gradients in one array. Here the first
  and the last stage each hold their own copy of the matrix (untied), and after the step the two
  ranks that hold them all-reduce the two gradients, as Megatron-LM does with its embedding group.
- The loss scale. pylib divides each micro-batch's loss by the whole batch's token count; torch
  takes each micro-batch's mean loss and divides every gradient by the number of micro-batches
  after the last backward (scale_grads=True, _PipelineStageBase.scale_grads). Equal micro-batches
  make the two the same, up to rounding.

Legend: p stages (ranks), m micro-batches, v chunks per rank, j = c p + s the virtual stage.
"""

import copy

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from companions import model as torch_gpt

SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B", "interleaved": "ScheduleInterleaved1F1B"}

# ---------------------------------------------------------------------------
# A stage of the course model


class StageModule(nn.Module):
    """Blocks `layers` of net; the embeddings too if first, ln_f and an untied copy of the head if last."""

    def __init__(self, net, layers, first, last):
        super().__init__()
        self.layers, self.first, self.last = list(layers), first, last
        self.blocks = nn.ModuleList(copy.deepcopy(net.transformer.h[l]) for l in layers)
        if first:
            self.wte = copy.deepcopy(net.transformer.wte)
            self.wpe = copy.deepcopy(net.transformer.wpe)
        if last:
            self.ln_f = copy.deepcopy(net.transformer.ln_f)
            self.lm_head = nn.Linear(net.cfg.n_embd, net.cfg.vocab_size, bias=False)
            self.lm_head.weight = nn.Parameter(net.lm_head.weight.detach().clone())  # untied: its own copy

    def forward(self, x):
        if self.first:  # token ids (B, T) in
            x = self.wte(x) + self.wpe(torch.arange(x.size(1)))  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        if self.last:
            x = self.lm_head(self.ln_f(x))  # (B, T, V): the logits, scored by loss_fn
        return x

    def named_grads(self):
        """{pylib name: gradient} for this stage's parameters (the head's as 'wte.head')."""
        out = {}
        for key, p in self.named_parameters():
            top, _, rest = key.partition(".")
            if top == "blocks":
                i, _, rest = rest.partition(".")
                name = f"h.{self.layers[int(i)]}.{rest}"
            else:
                name = {"wte": "wte", "wpe": "wpe", "ln_f": "ln_f." + rest, "lm_head": "wte.head"}[top]
                name = name.removesuffix(".weight") if top in ("wte", "wpe") else name
            out[name] = p.grad.detach().numpy().copy()
        return out


def loss_fn(logits, targets):
    """A micro-batch's mean cross-entropy (torch then divides the gradients by m)."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


# ---------------------------------------------------------------------------
# One step of a torch schedule, recorded


def record_actions(stage, log):
    """Wrap stage's forward_one_chunk and backward_one_chunk: each call appends (kind, microbatch, chunk)."""
    forward, backward = stage.forward_one_chunk, stage.backward_one_chunk
    chunk = stage.stage_index // stage.group_size

    def forward_one_chunk(mb, *args, **kwargs):
        log.append(("F", mb, chunk))
        return forward(mb, *args, **kwargs)

    def backward_one_chunk(mb, *args, **kwargs):
        log.append(("B", mb, chunk))
        return backward(mb, *args, **kwargs)

    stage.forward_one_chunk, stage.backward_one_chunk = forward_one_chunk, backward_one_chunk


def planned_order(schedule, rank):
    """The schedule's own plan for rank (its pipeline_order): compute actions only, as (kind, mb, chunk)."""
    plan = schedule.pipeline_order[rank] if schedule.pipeline_order else []
    p = dist.get_world_size()
    return [(a.computation_type.value, a.microbatch_index, a.stage_index // p)
            for a in plan if a is not None and a.computation_type.value in ("F", "B")]


def run_schedule(net, x, y, schedule_name, microbatches, chunks=1):
    """One training step of torch's schedule on this rank -> (executed order, planned order, loss, grads).

    Rank s holds virtual stages s, s + p, ... (chunks of them), cut by pylib's stage_layers. The
    loss is the batch's (last stage only, else None); grads are this rank's, by pylib's name, the
    tied matrix summed over its two copies."""
    from torch.distributed import pipelining
    from pylib.systems.pipeline import stage_layers
    rank, p = dist.get_rank(), dist.get_world_size()
    n_stages = p * chunks
    cut = stage_layers(net.cfg.n_layer, n_stages)
    modules, stages, order = [], [], []
    for c in range(chunks):
        j = c * p + rank
        modules.append(StageModule(net, cut[j], j == 0, j == n_stages - 1))
        stages.append(pipelining.PipelineStage(modules[-1], j, n_stages, torch.device("cpu")))
        record_actions(stages[-1], order)
    cls = getattr(pipelining, SCHEDULES[schedule_name])
    schedule = cls(stages if chunks > 1 else stages[0], n_microbatches=microbatches, loss_fn=loss_fn)
    holds_first, holds_last = any(m.first for m in modules), any(m.last for m in modules)
    losses = []
    schedule.step(*([torch.from_numpy(x)] if holds_first else []),
                  target=torch.from_numpy(y) if holds_last else None,
                  losses=losses if holds_last else None)
    grads = {}
    for m in modules:
        grads.update(m.named_grads())
    grads = sum_tied_gradients(grads, first_rank=0, last_rank=(n_stages - 1) % p)
    loss = float(torch.stack(losses).detach().mean()) if holds_last else None
    return order, planned_order(schedule, rank), loss, grads


def sum_tied_gradients(grads, first_rank, last_rank):
    """The embedding group: the first and last stage add their copies' gradients of the tied matrix."""
    group = dist.new_group(sorted({first_rank, last_rank}))  # every rank calls new_group, as gloo requires
    mine = [grads.pop(k) for k in ("wte", "wte.head") if k in grads]
    if not mine:
        return grads
    local = torch.from_numpy(sum(mine))  # both copies on this rank: add them here
    if first_rank != last_rank:
        dist.all_reduce(local, group=group)
    grads["wte"] = local.numpy()
    return grads


def worker(rank, world, params, cfg, x, y, cases, tp=False, deeper=None):
    """launch.run's worker: each (schedule, microbatches, chunks) of cases on `world` stages -> results.

    deeper: optional (params, cfg, cases) of a model with more blocks, for cases with more virtual
    stages (p v) than cfg has blocks; run in the same launch, its results after the first model's.
    With tp=True (2 processes) it also runs the tensor-parallel companion
    (companions/ch12_tensor_parallel.py) on the same group."""
    out = {"pipeline": []}
    for model_params, model_cfg, model_cases in [(params, cfg, cases)] + ([deeper] if deeper else []):
        net = torch_gpt.from_pylib(model_params, model_cfg, torch.float32)
        for schedule_name, microbatches, chunks in model_cases:
            order, plan, loss, grads = run_schedule(net, x, y, schedule_name, microbatches, chunks)
            out["pipeline"].append({"schedule": schedule_name, "stages": world, "microbatches": microbatches,
                                    "chunks": chunks, "n_layer": model_cfg.n_layer, "order": order, "plan": plan,
                                    "loss": loss, "grads": grads})
            dist.barrier()
    if tp:
        from companions import ch12_tensor_parallel
        out["tp"] = ch12_tensor_parallel.worker_body(params, cfg, x, y)
    return out
