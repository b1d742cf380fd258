"""Chapter 12's tensor parallelism in PyTorch's own engine: DTensor's ColwiseParallel and RowwiseParallel.

On a DeviceMesh of two gloo ranks, parallelize_module (torch/distributed/tensor/parallel/style.py)
shards the first Linear of an FFN by output feature (ColwiseParallel: weight Shard(0), input
Replicate) and the second by input feature (RowwiseParallel: weight Shard(1), output Partial, then
Replicate: the forward all-reduce, Megatron's g). The backward all-reduce (Megatron's f) happens
where the replicated input became a DTensor: DTensor.from_local's backward turns the Partial input
gradient into a Replicate one (torch/distributed/tensor/_api.py, _FromTorchTensor.backward).

Run first on seed 000's two-device FFN (pylib.systems.tensor_parallel.worked_example:
[2, -1] -> [9, 6]), then on every block of the course model: the MLP alone, then the MLP and the
attention, split by heads as pylib's shard_block splits it. The fused c_attn holds all the queries,
then all the keys, then all the values, so its rows are first regrouped by head
(regroup_qkv_by_head) and then cut evenly by ColwiseParallel; the attention's forward
(companions/model.py) takes its head count from the shape, so it runs on a rank's H/tp heads as on
all H. The same cut straight on the packed rows is run too, to measure what it gets wrong.

Legend: B batch, T time, C n_embd, H n_head, d rank, tp ranks.
"""

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from companions import model as torch_gpt

# ---------------------------------------------------------------------------
# Seed 000's FFN on two ranks


class FFN(nn.Module):
    """relu(x W1) W2 as two bias-free Linears (nn.Linear holds W.T: (out, in))."""

    def __init__(self, w1, w2):
        super().__init__()
        self.w1 = nn.Linear(w1.shape[0], w1.shape[1], bias=False)
        self.w2 = nn.Linear(w2.shape[0], w2.shape[1], bias=False)
        with torch.no_grad():
            self.w1.weight.copy_(torch.as_tensor(w1).T)
            self.w2.weight.copy_(torch.as_tensor(w2).T)

    def forward(self, x):
        return self.w2(F.relu(self.w1(x)))


def dtensor_ffn(x, w1, w2, dy):
    """Seed 000's FFN split over the 2 ranks by DTensor -> this rank's h, partial y, y and dx."""
    mesh = DeviceMesh("cpu", list(range(dist.get_world_size())))
    ffn = parallelize_module(FFN(w1, w2), mesh, {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    seen = {}
    ffn.w1.register_forward_hook(lambda m, i, out: seen.update(h=out.detach().clone()))  # after the local view
    ffn.w2.register_forward_hook(lambda m, i, out: seen.update(partial_y=out.to_local().detach().clone()),
                                 prepend=True)  # before RowwiseParallel's all-reduce: a partial sum
    x = torch.tensor(x).reshape(1, -1).requires_grad_()  # a batch of one row: (1, in)
    y = ffn(x)
    y.backward(torch.tensor(dy).reshape(1, -1))
    return {"h": seen["h"][0].tolist(), "partial_y": seen["partial_y"][0].tolist(), "y": y[0].detach().tolist(),
            "dx": x.grad[0].tolist(), "w1_local": ffn.w1.weight.to_local().T.tolist(),
            "w2_local": ffn.w2.weight.to_local().T.tolist()}


# ---------------------------------------------------------------------------
# The course model's blocks on two ranks


def regroup_qkv_by_head(attn, tp):
    """Reorder c_attn's rows so that ColwiseParallel's even cut gives rank d its own heads' q, k and v.

    c_attn's weight (3C, C) holds every head's queries, then every head's keys, then every head's
    values, and ColwiseParallel cuts it into tp blocks of rows in that order (Shard(0)): rank 0 would
    get all the queries and half the keys. Reordered as [q, k, v of the first H/tp heads; q, k, v of
    the next H/tp; ...], block d is rank d's heads, as pylib's shard_block cuts it. Returns the order:
    new row i is old row order[i]."""
    C, H = attn.n_embd, attn.n_head
    if H % tp:
        raise ValueError(f"tp ({tp}) must divide the heads ({H})")
    Cl = C // tp  # one rank's share of q (and of k, and of v): its H/tp heads
    order = torch.cat([torch.arange(part * C + d * Cl, part * C + (d + 1) * Cl) for d in range(tp) for part in range(3)])
    with torch.no_grad():
        attn.c_attn.weight.copy_(attn.c_attn.weight[order])
        if attn.c_attn.bias is not None:
            attn.c_attn.bias.copy_(attn.c_attn.bias[order])
    return order


def dtensor_loss_and_grads(params, cfg, x, y, attention=None):
    """The course model with every block's MLP, and its attention if asked, split by DTensor over the ranks.

    attention: None (whole on every rank), "by_head" (c_attn's rows regrouped by head, then
    ColwiseParallel; c_proj RowwiseParallel) or "packed" (ColwiseParallel straight on the packed
    rows: the wrong cut, run to show what it does). -> {loss, grads by pylib name (c_attn's rows
    back in their order), each block's output (B, T, C), this rank's shards of block 0's attention}."""
    net = torch_gpt.from_pylib(params, cfg, torch.float32)
    tp = dist.get_world_size()
    mesh = DeviceMesh("cpu", list(range(tp)))
    orders, outputs = {}, []
    for l, block in enumerate(net.transformer.h):
        parallelize_module(block.mlp, mesh, {"c_fc": ColwiseParallel(), "c_proj": RowwiseParallel()})
        if attention == "by_head":
            orders[f"h.{l}.attn.c_attn"] = regroup_qkv_by_head(block.attn, tp).numpy()
        if attention:
            parallelize_module(block.attn, mesh, {"c_attn": ColwiseParallel(), "c_proj": RowwiseParallel()})
        block.register_forward_hook(lambda m, i, out: outputs.append(out.detach().numpy().copy()))  # replicated
    _, loss = net(torch.from_numpy(x), torch.from_numpy(y))
    loss.backward()
    grads = {}
    for key, p in net.named_parameters():
        g = p.grad
        g = (g.full_tensor() if hasattr(g, "full_tensor") else g).detach().numpy()  # a shard's gradient: gather it
        name = torch_gpt.pylib_name(key)
        order = orders.get(name.rpartition(".")[0])
        grads[name] = g.copy() if order is None else g[np.argsort(order)]  # regrouped rows back in place
    attn = net.transformer.h[0].attn
    local = lambda w: (w.to_local() if hasattr(w, "to_local") else w).detach().numpy().copy()  # noqa: E731
    shards = {"attn.c_attn.weight": local(attn.c_attn.weight), "attn.c_attn.bias": local(attn.c_attn.bias),
              "attn.c_proj.weight": local(attn.c_proj.weight)}
    return {"loss": float(loss.detach()), "grads": grads, "outputs": outputs, "shards": shards}


def worker_body(params, cfg, x, y):
    """What ch12_pipeline.worker runs on each rank when asked for tensor parallelism."""
    from pylib.systems import tensor_parallel as tp
    ffn = dtensor_ffn(tp.EXAMPLE_X.astype(np.float32), tp.EXAMPLE_W1.astype(np.float32),
                      tp.EXAMPLE_W2.astype(np.float32), tp.EXAMPLE_DY.astype(np.float32))
    mlp = dtensor_loss_and_grads(params, cfg, x, y)
    return {"ffn": ffn, "mlp_loss": mlp["loss"], "mlp_grads": mlp["grads"],
            "attn": dtensor_loss_and_grads(params, cfg, x, y, "by_head"),
            "attn_packed": dtensor_loss_and_grads(params, cfg, x, y, "packed")}
