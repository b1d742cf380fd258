"""PyTorch's own engines beside pylib's simulators: the course's companions.

pylib teaches each mechanism with NumPy, in the page. The companions run the same mechanism with
the engine a reader will actually use (autocast and GradScaler, torch.utils.checkpoint, DDP,
ZeroRedundancyOptimizer and FSDP2, torch.distributed.pipelining and DTensor, and
torch.distributed.checkpoint), on this machine's CPU with the gloo backend, and measure how closely
the two agree. `build.py --measure` runs them as chapter parts (experiments/chN.py), so their
numbers reach the chapters like every other measurement.

PyTorch only, and one way: the companions import pylib to compare with it, and pylib never imports
them (tests/test_layering.py). The page stays NumPy-only.

    model.py      the course model as a torch.nn.Module, loading pylib's weights (nanoGPT's layout)
    launch.py     start a gloo process group of W processes on this machine and collect their results
    ch9_autocast.py        torch.autocast (CPU, bf16) and GradScaler beside pylib's recipes and scaler
    ch10_checkpoint.py     torch.utils.checkpoint per block, full and selective; saved bytes against pylib's count
    ch11_ddp.py            DDP, ZeroRedundancyOptimizer and FSDP2 beside pylib's data parallelism and ZeRO
    ch12_pipeline.py       torch.distributed.pipelining's schedules against pylib's device orders
    ch12_tensor_parallel.py  DTensor's Colwise/RowwiseParallel against pylib's split
    ch15_dcp.py            torch.distributed.checkpoint: save on 4 ranks, load on 2
"""
