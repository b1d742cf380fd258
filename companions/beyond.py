"""Beyond the toy: the course's model family in PyTorch, at sizes the page cannot reach.

The notebooks' last sections (chapters 1, 5, 6, 9, 10, 11, 12 and 14) train companions/model.py's GPT
(nanoGPT's architecture, the course model at other widths and depths) from pylib's initialisation,
with chapter 1's loop: AdamW, warmup then cosine (pylib.train.TrainConfig.lr_at), gradient clipping,
random windows of the training split. On a GPU when PyTorch sees one, else on the CPU at a size
that runs in about a minute; every result says which. Its numbers are the reader's own: no chapter
quotes them.

    from companions import beyond
    run = beyond.train(corpus, beyond.Size(n_embd=128, n_layer=4, n_head=4, block_size=128), steps=500)
    run["val"], run["params"], run["device"]

The loss it reports as "val" is the mean cross-entropy on a fixed set of evenly spaced windows of the
validation split (pylib.data.eval_windows), eval_windows of them: a subset, not the whole split.
"""

import dataclasses
import math
import time

import numpy as np
import torch
import torch.nn.functional as F



@dataclasses.dataclass(frozen=True)
class Size:
    """A member of the model family: pylib.model.GPTConfig's sizes (the course model is 16, 1, 2, 64)."""
    n_embd: int = 16
    n_layer: int = 1
    n_head: int = 2
    block_size: int = 64


def device(prefer=None):
    """"cuda" when PyTorch sees a GPU (or prefer, if given), else "cpu"."""
    if prefer:
        return prefer
    return "cuda" if torch.cuda.is_available() else "cpu"


def model_config(size, vocab_size, **changes):
    """pylib's GPTConfig for a member of the family (muP and the other options through changes)."""
    from pylib import model
    return dataclasses.replace(model.GPTConfig(), vocab_size=vocab_size, n_embd=size.n_embd, n_layer=size.n_layer,
                               n_head=size.n_head, block_size=size.block_size, **changes)


def build(size, vocab_size, seed=0, dev="cpu", **changes):
    """The torch GPT for size, holding pylib's initialisation (pylib.model.init_params) for seed."""
    from companions.model import from_pylib
    from pylib import model
    cfg = model_config(size, vocab_size, **changes)
    return from_pylib(model.init_params(cfg, seed), cfg).to(dev), cfg


def count_params(net):
    """Parameters, the tied embedding once."""
    return sum(p.numel() for p in net.parameters())


def windows(tokens, batch_size, block_size, rng):
    """Random windows of the token array: x and y (shifted by one) as int64 arrays (pylib.data.get_batch)."""
    from pylib import data
    x, y = data.get_batch(tokens, batch_size, block_size, rng)
    return np.ascontiguousarray(x, dtype=np.int64), np.ascontiguousarray(y, dtype=np.int64)


@torch.no_grad()
def evaluate(net, tokens, block_size, n_windows, dev, batch=64):
    """Mean cross-entropy on n_windows fixed, evenly spaced windows of tokens (pylib.data.eval_windows)."""
    from pylib import data
    x, y = data.eval_windows(tokens, n_windows, block_size)
    net.eval()
    total = 0.0
    for i in range(0, len(x), batch):
        xb = torch.as_tensor(np.ascontiguousarray(x[i:i + batch], dtype=np.int64), device=dev)
        yb = torch.as_tensor(np.ascontiguousarray(y[i:i + batch], dtype=np.int64), device=dev)
        logits, _ = net(xb)
        total += float(F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), yb.reshape(-1), reduction="sum"))
    net.train()
    return total / (len(x) * block_size)


def train(corpus, size, steps=400, batch_size=16, lr=1e-2, seed=0, dev=None, eval_every=None, eval_windows=128,
          optimizer=None, autocast_dtype=None, train_cfg=None, model_changes=None, progress=None):
    """Train one member of the family with chapter 1's loop (TrainConfig's warmup, cosine, clipping and
    AdamW settings, at this lr and steps); returns {"losses" (batch loss per step), "evals" [(step, val)],
    "val" (the last), "params", "tokens", "seconds", "device", "size", "lr", "steps"}. A step whose loss
    is not finite stops the run ("diverged": True). optimizer: a function(params, cfg) -> torch
    optimizer (default AdamW with TrainConfig's betas, eps and weight decay). autocast_dtype: run the
    forward in torch.autocast with that dtype (chapter 9)."""
    from pylib import train as ptrain
    dev = device(dev)
    torch.manual_seed(seed)
    cfg = dataclasses.replace(train_cfg or ptrain.TrainConfig(), steps=steps, lr=lr, batch_size=batch_size, seed=seed)
    net, mcfg = build(size, corpus.vocab.size, seed, dev, **(model_changes or {}))
    opt = (optimizer(net, cfg) if optimizer else
           torch.optim.AdamW(net.parameters(), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                             weight_decay=cfg.weight_decay))
    rng = np.random.default_rng(seed)
    eval_every = eval_every or max(1, steps // 10)
    losses, evals, diverged = [], [], False
    t0 = time.perf_counter()
    loop = progress(range(steps), desc=f"width {size.n_embd}, {dev}", unit="step") if progress else range(steps)
    for step in loop:
        for group in opt.param_groups:
            group["lr"] = cfg.lr_at(step)
        x, y = windows(corpus.train, cfg.batch_size, size.block_size, rng)
        xb, yb = torch.as_tensor(x, device=dev), torch.as_tensor(y, device=dev)
        if autocast_dtype is not None:
            with torch.autocast(device_type=dev, dtype=autocast_dtype):
                _, loss = net(xb, yb)
        else:
            _, loss = net(xb, yb)
        value = float(loss.detach())
        losses.append(value)
        if not math.isfinite(value):
            diverged = True
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
        opt.step()
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            evals.append((step + 1, evaluate(net, corpus.val, size.block_size, eval_windows, dev)))
    if dev == "cuda":
        torch.cuda.synchronize()
    return {"losses": losses, "evals": evals, "val": evals[-1][1] if evals and not diverged else None,
            "diverged": diverged, "params": count_params(net), "tokens": len(losses) * cfg.batch_size * size.block_size,
            "seconds": time.perf_counter() - t0, "device": dev, "size": size, "lr": lr, "steps": steps,
            "eval": f"{eval_windows} evenly spaced windows of the validation split", "net": net}
