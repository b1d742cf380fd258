"""Beyond the toy, chapter 5: the optimiser comparison on a wider member of the model family.

Chapter 5 sweeps each optimiser's learning rate on the 5k-parameter model and compares the best
rates. This does the same in PyTorch (companions/beyond.py's trainer: pylib's initialisation,
chapter 1's warmup, cosine and clipping) on a wider model, for three of the chapter's optimisers, each
as the chapter sets it up:
  - "momentum": torch.optim.SGD, momentum 0.9, no weight decay (pylib.optim.sgd_step's form: the
    buffer accumulates the raw gradient, p -= lr * buffer);
  - "adamw": torch.optim.AdamW with TrainConfig's betas and eps, weight decay on the tensors with 2 or
    more dimensions only (pylib.optim.param_groups, nanoGPT's configure_optimizers);
  - "muon": torch.optim.Muon (in recent PyTorch releases; has_muon() says) on the hidden matrices (pylib.model.is_hidden_matrix),
    Nesterov momentum 0.95, Moonshot's RMS matching (adjust_lr_fn="match_rms_adamw": 0.2 sqrt(max(A, B))
    times the orthogonalised update, pylib.muon.RMS_MATCH), decoupled decay; AdamW as above on the
    embeddings, biases and norm gains. One learning rate and one schedule drive both, as in pylib.muon.
Each optimiser runs at a few rates; the best is the lowest final loss. Every loss is beyond.evaluate's:
a fixed subset of evenly spaced validation windows, not the whole split. The numbers are the reader's
own: no chapter quotes them.

    from companions import beyond_ch5
    out = beyond_ch5.sweep(corpus, beyond_ch5.size_for("cpu"), steps=200,
                           rates={"adamw": [0.01, 0.03, 0.1], "momentum": [0.3, 1.0, 3.0]})
    out["best"]["adamw"]["lr"], out["runs"]["adamw"][0.03]["val"]
"""

import contextlib

import torch

from companions import beyond

NAMES = {"momentum": "SGD + momentum 0.9", "adamw": "AdamW (decay 0.1)", "muon": "Muon + AdamW"}


def has_muon():
    """True when this PyTorch has torch.optim.Muon (older releases do not)."""
    return hasattr(torch.optim, "Muon")


def _decay_groups(named, cfg):
    """AdamW's parameter groups: weight decay on tensors with ndim >= 2 only (pylib.optim.param_groups)."""
    decay = [p for _, p in named if p.dim() >= 2]
    no_decay = [p for _, p in named if p.dim() < 2]
    return [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _adamw(named, cfg):
    return torch.optim.AdamW(_decay_groups(named, cfg), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps)


class Combined:
    """Two optimisers stepped as one (Muon's matrices, AdamW's rest): beyond.train sets every group's lr."""

    def __init__(self, *optimizers):
        self.optimizers = optimizers

    @property
    def param_groups(self):
        return [g for o in self.optimizers for g in o.param_groups]

    def zero_grad(self, set_to_none=True):
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)

    def step(self):
        for o in self.optimizers:
            o.step()


def make_optimizer(name):
    """A function (net, cfg) -> the optimiser `name` for net, with cfg's rate and AdamW settings."""
    def momentum(net, cfg):
        return torch.optim.SGD(net.parameters(), lr=cfg.lr, momentum=0.9, weight_decay=0.0)

    def adamw(net, cfg):
        return _adamw(list(net.named_parameters()), cfg)

    def muon(net, cfg):
        from companions.model import pylib_name
        from pylib import model, muon as pmuon
        named = list(net.named_parameters())
        hidden = [(n, p) for n, p in named if model.is_hidden_matrix(pylib_name(n)) and p.dim() == 2]
        rest = [(n, p) for n, p in named if not any(p is q for _, q in hidden)]
        return Combined(torch.optim.Muon([p for _, p in hidden], lr=cfg.lr, weight_decay=cfg.weight_decay,
                                         momentum=pmuon.MOMENTUM, nesterov=True, adjust_lr_fn="match_rms_adamw"),
                        _adamw(rest, cfg))

    return {"momentum": momentum, "adamw": adamw, "muon": muon}[name]


def size_for(dev, small=False):
    """The width this section trains: a few seconds' worth at the reduced size, about a minute's worth on a
    CPU, a model 16 times wider than the course's on a GPU."""
    if small:
        return beyond.Size(n_embd=32, n_layer=1, n_head=2, block_size=64)
    if dev == "cuda":
        return beyond.Size(n_embd=256, n_layer=4, n_head=4, block_size=128)
    return beyond.Size(n_embd=64, n_layer=2, n_head=4, block_size=64)


def rates_around(lr, factor=3.0, n=3):
    """n rates `factor` apart, centred on lr (the toy's best): [lr / 3, lr, 3 lr] by default."""
    half = (n - 1) / 2
    return [float(f"{lr * factor ** (i - half):.3g}") for i in range(n)]


@contextlib.contextmanager
def cpu_threads(n=None):
    """PyTorch's CPU threads set to n while inside (unchanged with None), then restored. A model this small
    gains little from more than one thread, and on a machine whose cores are busy it loses much."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def sweep(corpus, size, steps, rates, batch_size=16, seed=0, dev=None, eval_windows=64, eval_every=None, progress=None,
          threads=None):
    """Every optimiser in rates ({name: [lr, ...]}) at each of its rates, one seed: {"runs": {name: {lr: run}},
    "best": {name: {"lr", "val", "edge"}}, "device", "size", "params", "steps", "eval"}. A run whose loss
    stopped being finite is marked diverged and cannot be the best; "edge" says the best is the highest or
    lowest rate tried (the sweep did not bracket it). eval_every: steps between evaluations (default a tenth of
    the run, beyond.train's). threads: PyTorch's CPU threads for the runs (None: as they are)."""
    dev = beyond.device(dev)
    runs, best = {}, {}
    with cpu_threads(threads):
        for name, lrs in rates.items():
            runs[name] = {}
            for lr in lrs:
                runs[name][lr] = beyond.train(corpus, size, steps=steps, batch_size=batch_size, lr=lr, seed=seed,
                                              dev=dev, eval_every=eval_every, eval_windows=eval_windows,
                                              optimizer=make_optimizer(name), progress=progress)
                runs[name][lr].pop("net")
            ok = {lr: r["val"] for lr, r in runs[name].items() if not r["diverged"] and r["val"] is not None}
            if ok:
                lr = min(ok, key=ok.get)
                best[name] = {"lr": lr, "val": ok[lr], "edge": lr in (min(lrs), max(lrs))}
    first = next(r for by_lr in runs.values() for r in by_lr.values())
    return {"runs": runs, "best": best, "device": dev, "size": size, "params": first["params"], "steps": steps,
            "eval": first["eval"]}
