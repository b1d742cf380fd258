"""Beyond the toy, chapter 9: PyTorch's mixed precision on a wider member of the course's model family.

The chapter emulates its recipes on the 5k-parameter model. Here PyTorch's own engine trains a wider
member of the family (companions.beyond: pylib's initialisation, chapter 1's loop, the same random
windows for every recipe) from the same weights on the same batches, in up to three ways:

    fp32   float32 throughout (companions.beyond.train)
    bf16   torch.autocast(bfloat16) around the forward pass, float32 master weights and AdamW state
           (beyond.train's autocast_dtype): the chapter's bf16_master recipe as PyTorch runs it
    fp16   torch.autocast(float16) with torch.amp.GradScaler: the scaled loss's backward, unscale, clip,
           step or skip, update the scale (companions.ch9_autocast.fp16_scaled_step, the chapter's fp16
           recipe; on CUDA the same step with CUDA's autocast); by default on CUDA only

Each run reports its batch loss per step, the loss on a fixed subset of validation windows at the
end, and its time; compare() sets each low-precision run against the float32 one step by step (the
batch losses differ only by the precision: same weights, same batches, same learning rates) and by
how far apart the final weights are, relative to how far float32 moved them
(ch9_autocast.fp16_run_differences). One seed: the differences are the reader's own, not a verdict.

    from companions import beyond, beyond_ch9
    out = beyond_ch9.compare(corpus, beyond.Size(128, 4, 4, 128), steps=200)
    out["vs_fp32"]["bf16"]["loss_max_abs"], out["runs"]["bf16"]["seconds"]
"""

import dataclasses
import math
import time

import numpy as np
import torch

from companions import beyond
from companions import ch9_autocast as c9
from companions import model as torch_gpt

RECIPES = ("fp32", "bf16", "fp16")
DEFAULT_SCALER = {"init_scale": 2.0 ** 16, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 50}
# pylib.systems.mixed_precision.SCALER's values: PyTorch's defaults, with the course's shorter growth interval


def recipes_for(dev):
    """The recipes that make sense on dev: bf16 where the device has it, fp16 with loss scaling on CUDA."""
    if dev == "cuda":
        return ("fp32",) + (("bf16",) if torch.cuda.is_bf16_supported() else ()) + ("fp16",)
    return ("fp32", "bf16")


def cuda_fp16_scaled_step(net, opt, scaler, x, y, grad_clip):
    """ch9_autocast.fp16_scaled_step with CUDA's autocast instead of the CPU's: forward in float16, backward of
    the scaled loss, unscale before clipping, step (skipped on inf or NaN), update the scale."""
    with torch.autocast("cuda", dtype=torch.float16):
        _, loss = net(x, y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
    scaler.step(opt)
    scaler.update()
    return loss


def train_fp16(corpus, size, steps, batch_size=16, lr=1e-2, seed=0, dev=None, eval_windows=128, scaler_kw=None,
               progress=None):
    """beyond.train's run with the fp16 recipe: torch.autocast(float16) and torch.amp.GradScaler, the same
    initial weights, batches, learning rates and AdamW as beyond.train gives the other recipes. Returns its
    dictionary, with "scale" (per step, the scale used) and "skipped" (per step, whether AdamW skipped it)."""
    from pylib import train as ptrain
    dev = beyond.device(dev)
    torch.manual_seed(seed)
    cfg = dataclasses.replace(ptrain.TrainConfig(), steps=steps, lr=lr, batch_size=batch_size, seed=seed)
    net, _ = beyond.build(size, corpus.vocab.size, seed, dev)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                            weight_decay=cfg.weight_decay)  # beyond.train's default optimiser
    scaler = torch.amp.GradScaler(dev, **(scaler_kw or DEFAULT_SCALER))
    step_fn = c9.fp16_scaled_step if dev == "cpu" else cuda_fp16_scaled_step
    rng = np.random.default_rng(seed)
    losses, scales, skipped, diverged = [], [], [], False
    t0 = time.perf_counter()
    loop = progress(range(steps), desc=f"fp16, width {size.n_embd}, {dev}", unit="step") if progress else range(steps)
    for step in loop:
        for group in opt.param_groups:
            group["lr"] = cfg.lr_at(step)
        x, y = beyond.windows(corpus.train, cfg.batch_size, size.block_size, rng)
        opt.zero_grad(set_to_none=True)
        taken = c9._adam_steps(opt)
        scales.append(scaler.get_scale())
        loss = step_fn(net, opt, scaler, torch.as_tensor(x, device=dev), torch.as_tensor(y, device=dev), cfg.grad_clip)
        skipped.append(c9._adam_steps(opt) == taken)
        value = float(loss.detach())
        losses.append(value)
        if not math.isfinite(value):
            diverged = True
            break
    val = None if diverged else beyond.evaluate(net, corpus.val, size.block_size, eval_windows, dev)
    if dev == "cuda":
        torch.cuda.synchronize()
    return {"losses": losses, "evals": [] if diverged else [(len(losses), val)], "val": val, "diverged": diverged,
            "params": beyond.count_params(net), "tokens": len(losses) * cfg.batch_size * size.block_size,
            "seconds": time.perf_counter() - t0, "device": dev, "size": size, "lr": lr, "steps": steps,
            "eval": f"{eval_windows} evenly spaced windows of the validation split", "net": net,
            "scale": scales, "skipped": skipped}


def run(corpus, recipe, size, steps, batch_size=16, lr=1e-2, seed=0, dev=None, eval_windows=128, progress=None):
    """One recipe's run (fp32, bf16 or fp16), with its final weights by pylib's names under "weights"."""
    dev = beyond.device(dev)
    if recipe == "fp16":
        out = train_fp16(corpus, size, steps, batch_size, lr, seed, dev, eval_windows, progress=progress)
    elif recipe in ("fp32", "bf16"):
        out = beyond.train(corpus, size, steps, batch_size, lr, seed, dev, eval_every=steps, eval_windows=eval_windows,
                           autocast_dtype=torch.bfloat16 if recipe == "bf16" else None, progress=progress)
    else:
        raise ValueError(f"unknown recipe {recipe!r}; one of {', '.join(RECIPES)}")
    out["weights"] = torch_gpt.named_weights(out.pop("net"))
    out["recipe"] = recipe
    out["steps_per_second"] = len(out["losses"]) / out["seconds"]
    return out


def differences(run_, reference, params0):
    """A run against the float32 reference, from the same weights and batches: the batch loss's largest, mean and
    last-tenth mean absolute difference, the final subset loss's difference, and how far apart the weights end,
    ||w - w_fp32|| / ||w_fp32 - w_0|| (ch9_autocast.fp16_run_differences)."""
    n = min(len(run_["losses"]), len(reference["losses"]))
    a = {"loss": run_["losses"][:n], "weights": run_["weights"], "scale": [None] * n, "skipped": [False] * n}
    b = {"loss": reference["losses"][:n], "weights": reference["weights"], "scale": [None] * n, "skipped": [False] * n}
    d = c9.fp16_run_differences(a, b, params0)
    gap = np.abs(np.array(run_["losses"][:n], np.float64) - np.array(reference["losses"][:n], np.float64))
    tail = max(1, n // 10)
    val = (run_["val"] - reference["val"]) if run_["val"] is not None and reference["val"] is not None else None
    return {"loss_max_abs": d["loss_max_abs"], "loss_mean_abs": float(gap.mean()), "loss_last_tenth_abs": float(gap[-tail:].mean()),
            "loss_step0_abs": d["loss_step0_abs"], "val_minus_fp32": val, "weights_rel_moved": d["weights_rel_moved"],
            "time_over_fp32": run_["seconds"] / reference["seconds"]}


def compare(corpus, size, steps, batch_size=16, lr=1e-2, seed=0, dev=None, recipes=None, eval_windows=128,
            warmup_steps=2, progress=None):
    """Every recipe in recipes (default recipes_for(dev)) from the same initial weights (pylib's, for seed) on the
    same batches. Each is first run for warmup_steps untimed steps, so that one-time costs (kernel selection, the
    CUDA context, the first autocast) are not counted. Returns {"device", "size", "params", "steps", "batch_size",
    "runs": {recipe: run()}, "vs_fp32": {recipe: differences()}}."""
    from pylib import model
    dev = beyond.device(dev)
    recipes = tuple(recipes or recipes_for(dev))
    if "fp32" not in recipes:
        recipes = ("fp32",) + recipes
    if warmup_steps:
        for recipe in recipes:
            run(corpus, recipe, size, warmup_steps, batch_size, lr, seed, dev, eval_windows=8)
    runs = {r: run(corpus, r, size, steps, batch_size, lr, seed, dev, eval_windows, progress) for r in recipes}
    params0 = model.init_params(beyond.model_config(size, corpus.vocab.size), seed)
    return {"device": dev, "size": size, "params": runs["fp32"]["params"], "steps": steps, "batch_size": batch_size,
            "seed": seed, "eval": runs["fp32"]["eval"], "runs": runs,
            "vs_fp32": {r: differences(runs[r], runs["fp32"], params0) for r in recipes if r != "fp32"}}


def table(out):
    """Markdown lines: each recipe's final subset loss, time, and differences from float32."""
    lines = [f"{out['device']}: width {out['size'].n_embd}, {out['size'].n_layer} layers, {out['size'].n_head} heads, "
             f"T = {out['size'].block_size}, {out['params']:,} parameters; {out['steps']} steps of batch "
             f"{out['batch_size']}, seed {out['seed']}; loss on {out['eval']}.", "",
             "| recipe | final loss (subset) | − fp32 | batch loss vs fp32: max, mean, last tenth | weights apart (of fp32's move) "
             "| seconds | steps/s | × fp32's time | skipped |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in out["runs"].items():
        d = out["vs_fp32"].get(name)
        val = "diverged" if r["val"] is None else f"{r['val']:.4f}"
        if d is None:
            diff = gap = apart = ratio = "–"
        else:
            diff = "–" if d["val_minus_fp32"] is None else f"{d['val_minus_fp32']:+.4f}"
            gap = f"{d['loss_max_abs']:.1e}, {d['loss_mean_abs']:.1e}, {d['loss_last_tenth_abs']:.1e}"
            apart = f"{d['weights_rel_moved']:.1%}"
            ratio = f"{d['time_over_fp32']:.2f}"
        skips = str(sum(r["skipped"])) if "skipped" in r else "–"
        lines.append(f"| {name} | {val} | {diff} | {gap} | {apart} | {r['seconds']:.1f} | {r['steps_per_second']:.1f} | "
                     f"{ratio} | {skips} |")
    return lines
