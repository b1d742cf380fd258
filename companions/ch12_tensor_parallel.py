"""Chapter 12's tensor parallelism in PyTorch's own engine: DTensor's ColwiseParallel and RowwiseParallel.

On a DeviceMesh of two gloo ranks, parallelize_module (torch/distributed/tensor/parallel/style.py)
shards the first Linear of an FFN by output feature (ColwiseParallel: weight Shard(0), input
Replicate) and the second by input feature (RowwiseParallel: weight Shard(1), output Partial, then
Replicate: the forward all-reduce, Megatron's g). The backward all-reduce (Megatron's f) happens
where the replicated input became a DTensor: DTensor.from_local's backward turns the Partial input
gradient into a Replicate one (torch/distributed/tensor/_api.py, _FromTorchTensor.backward).

Run first on seed 000's two-device FFN (pylib.systems.tensor_parallel.worked_example:
[2, -1] -> [9, 6]), then on the MLP of every block of the course model (attention stays whole
here: its fused c_attn would need its rows regrouped by head before a column split).

Legend: B batch, T time, C n_embd, d rank.
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
# The course model's MLPs on two ranks


def dtensor_mlp_loss_and_grads(params, cfg, x, y):
    """The course model, every block's MLP split by DTensor over the ranks -> (loss, grads by pylib name)."""
    net = torch_gpt.from_pylib(params, cfg, torch.float32)
    mesh = DeviceMesh("cpu", list(range(dist.get_world_size())))
    for block in net.transformer.h:
        parallelize_module(block.mlp, mesh, {"c_fc": ColwiseParallel(), "c_proj": RowwiseParallel()})
    _, loss = net(torch.from_numpy(x), torch.from_numpy(y))
    loss.backward()
    grads = {}
    for key, p in net.named_parameters():
        g = p.grad
        g = g.full_tensor() if hasattr(g, "full_tensor") else g  # a sharded weight's gradient: gather it
        grads[torch_gpt.pylib_name(key)] = g.detach().numpy().copy()
    return float(loss.detach()), grads


def worker_body(params, cfg, x, y):
    """What ch12_pipeline.worker runs on each rank when asked for tensor parallelism."""
    from pylib.systems import tensor_parallel as tp
    ffn = dtensor_ffn(tp.EXAMPLE_X.astype(np.float32), tp.EXAMPLE_W1.astype(np.float32),
                      tp.EXAMPLE_W2.astype(np.float32), tp.EXAMPLE_DY.astype(np.float32))
    loss, grads = dtensor_mlp_loss_and_grads(params, cfg, x, y)
    return {"ffn": ffn, "mlp_loss": loss, "mlp_grads": grads}
