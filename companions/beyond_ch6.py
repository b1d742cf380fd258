"""Beyond the toy, chapter 6: the learning-rate ladder at larger widths, in PyTorch.

Chapter 6 sweeps the peak learning rate of the 5k-parameter model over a ladder two rungs per decade
(pylib.studies.lr_sweep.ladder), each rung the default run shortened to 200 steps, and finds where the
best rate sits. This runs the same ladder with companions/beyond.py's trainer (pylib's initialisation,
chapter 1's AdamW, warmup, cosine and clipping) at several widths of the model family, with everything
but the width held as the course model has it (1 layer, 2 heads, context 64, batch 16), so that the
reader can see where the best rate lands as the model widens (chapter 7 takes this up). One seed per
rung; every loss is beyond.evaluate's, on a fixed subset of evenly spaced validation windows, not the
whole split. The numbers are the reader's own: no chapter quotes them.

    from companions import beyond_ch6
    out = beyond_ch6.ladders(corpus, widths=(16, 64), rates=[0.003, 0.01, 0.03, 0.1], steps=200)
    out["best"][64], out["runs"][64][0.01]["val"]
"""

from companions import beyond
from companions.beyond_ch5 import cpu_threads


def size(width):
    """The course model at another width: 1 layer, 2 heads, context 64 (pylib.model.GPTConfig's)."""
    return beyond.Size(n_embd=width, n_layer=1, n_head=2, block_size=64)


def plan(dev, small=False):
    """(widths, rates, steps) for this device: a few seconds at the reduced size, about a minute on a CPU,
    widths up to 512 and a longer ladder on a GPU."""
    from pylib.studies import lr_sweep
    if small:
        return (16, 32), [0.01, 0.1], 10
    if dev == "cuda":
        return (16, 64, 256, 512), lr_sweep.ladder(3e-4, 1.0), 500
    return (16, 64, 128), lr_sweep.ladder(1e-3, 0.3), lr_sweep.LADDER_STEPS


def ladders(corpus, widths, rates, steps, batch_size=16, seed=0, dev=None, eval_windows=64, progress=None,
            threads=None):
    """The ladder at every width: {"runs": {width: {lr: run}}, "best": {width: lr or None}, "params":
    {width: count}, "device", "steps", "eval"}. A rung whose loss stopped being finite is diverged
    (run["diverged"], its step in len(run["losses"]) - 1) and cannot be the best. threads: PyTorch's CPU
    threads for the runs (None: as they are; beyond_ch5.cpu_threads)."""
    dev = beyond.device(dev)
    runs, best, params = {}, {}, {}
    with cpu_threads(threads):
        for width in widths:
            runs[width] = {}
            for lr in rates:
                run = beyond.train(corpus, size(width), steps=steps, batch_size=batch_size, lr=lr, seed=seed, dev=dev,
                                   eval_every=steps, eval_windows=eval_windows, progress=progress)  # one evaluation, at the end
                run.pop("net")
                runs[width][lr] = run
            ok = {lr: r["val"] for lr, r in runs[width].items() if not r["diverged"] and r["val"] is not None}
            best[width] = min(ok, key=ok.get) if ok else None
            params[width] = next(iter(runs[width].values()))["params"]
    first = next(iter(runs[widths[0]].values()))
    return {"runs": runs, "best": best, "params": params, "device": dev, "steps": steps, "eval": first["eval"]}
