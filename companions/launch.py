"""Start a gloo process group of `world` processes on this machine and collect what each returns.

What torchrun does for a real job, reduced to what the companions need: fresh processes (forked from
a forkserver that has imported torch and nothing else, or spawned where there is no fork; never a
fork of the caller, as torch.multiprocessing recommends), one thread each (2 cores here, so 4 processes are
already oversubscribed), a rendezvous through a file (no port to race for), the gloo backend over
the loopback device, and the results back by rank. A rank that raises sends its traceback, and
run() raises it in the caller with the rank's name, instead of leaving the others waiting.

    results = launch.run(my_worker, 4, arg)   # my_worker(rank, world, arg) -> anything picklable

The worker must be a module-level function (spawn imports it by name in each new process).
"""

import multiprocessing as mp
import os
import queue as queue_module
import tempfile
import traceback


class RankFailed(RuntimeError):
    """A rank raised: the message holds its traceback."""


def _main(fn, rank, world, store_path, args, results):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only: no other interface is used
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
        try:
            out = fn(rank, world, *args)
        finally:
            dist.destroy_process_group()
        results.put((rank, "ok", out))
    except BaseException:  # noqa: B902 - everything goes back to the caller
        results.put((rank, "error", traceback.format_exc()))


_PRELOAD = ["torch", "torch.distributed", "numpy", "companions.launch"]


def context():
    """A forkserver: one clean process (no threads, nothing run) that imports torch once and forks
    each rank from itself, so a rank starts without importing torch again (about 1.5 s of CPU each);
    a spawn everywhere else (a platform without fork)."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def run(fn, world, *args, timeout=300):
    """[fn(rank, world, *args) for every rank], each in its own process of one gloo group."""
    ctx = context()
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="gloo-") as tmp:
        store_path = os.path.join(tmp, "store")  # FileStore: created by the first rank, removed with tmp
        procs = [ctx.Process(target=_main, args=(fn, r, world, store_path, args, results), daemon=True)
                 for r in range(world)]
        for proc in procs:
            proc.start()
        try:
            out = {}
            while len(out) < world:
                try:
                    rank, status, value = results.get(timeout=timeout)
                except queue_module.Empty:
                    raise TimeoutError(f"{world - len(out)} of {world} ranks did not finish in {timeout} s") from None
                if status == "error":
                    raise RankFailed(f"rank {rank} of {world} raised:\n{value}")
                out[rank] = value
        finally:
            for proc in procs:
                proc.join(timeout=10)
                if proc.is_alive():
                    proc.kill()
                    proc.join()
    return [out[r] for r in range(world)]
