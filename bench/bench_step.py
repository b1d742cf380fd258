"""Time one training step (forward + backward + clip + AdamW) of the default model, pylib vs PyTorch.

Both run on ONE thread: the thread variables are set before NumPy (and torch) are imported, and
torch.set_num_threads(1) is called. The PyTorch model is nanoGPT's architecture written out
below in eager mode (no torch.compile), with torch.optim.AdamW; same B, T, optimiser settings.
This prints figures and asserts nothing: timings are measurements, not tests.

    .venv/bin/python bench/bench_step.py [--steps 200] [--repeats 7]

`bench_rows(...)` returns the rows as dicts, for build.py --measure.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy/torch are imported, or the BLAS pool is already sized

import argparse
import json
import pathlib
import statistics
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from pylib import model  # noqa: E402
from pylib.studies import benchmark  # noqa: E402

# ---------------------------------------------------------------------------
# Thread check


def blas_threads():
    """Threads the BLAS under NumPy will use: from threadpoolctl if installed, else the env value."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return int(os.environ["OPENBLAS_NUM_THREADS"]), "env OPENBLAS_NUM_THREADS/OMP_NUM_THREADS=1"
    pools = threadpool_info()
    return max([p["num_threads"] for p in pools] or [1]), "threadpoolctl"


def keep_freed_memory(pad_bytes=64 << 20):
    """Ask glibc's malloc to keep up to pad_bytes of freed heap instead of returning it to the OS.

    By default glibc trims the heap when more than ~2x the mmap threshold is free at its top, so
    a step that frees its temporaries (a few MB here) gives the pages back and the next step
    faults them in again. Both NumPy and PyTorch's CPU allocator sit on malloc and both pay.
    Process-wide and irreversible, so it runs after the default measurements. Returns False when
    the C library is not glibc.
    """
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_TOP_PAD = -1, -2
        return bool(libc.mallopt(M_TRIM_THRESHOLD, pad_bytes)) and bool(libc.mallopt(M_TOP_PAD, pad_bytes))
    except (OSError, AttributeError):
        return False


# ---------------------------------------------------------------------------
# Timed loops


def _median_ms(step, steps, repeats, warmup):
    return statistics.median(benchmark.ms_per_call(step, steps, repeats, warmup))


def time_pylib(cfg, B, T, steps, repeats, warmup=50):
    """Median ms per step of pylib in float32: pylib.studies.benchmark.time_train_step, as in the page."""
    return benchmark.time_train_step(cfg, B, T, steps, repeats, warmup)["ms_per_step"]


def time_torch(cfg, B, T, steps, repeats, warmup=50):
    """Median ms per step of an eager PyTorch nanoGPT with torch.optim.AdamW, one thread."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(1)
    torch.manual_seed(0)
    C, H = cfg.n_embd, cfg.n_head

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            Bq, Tq, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(Bq, Tq, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(Bq, Tq, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(cfg.vocab_size, C), nn.Embedding(cfg.block_size, C)
            self.h = nn.ModuleList(Block() for _ in range(cfg.n_layer))
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for block in self.h:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.T  # tied head
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    net = GPT()
    decay = [p for p in net.parameters() if p.dim() >= 2]
    no_decay = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-3, betas=(0.9, 0.99), eps=1e-8,
    )
    x = torch.randint(0, cfg.vocab_size, (B, T))
    y = torch.randint(0, cfg.vocab_size, (B, T))

    def step():
        loss = net(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()

    return _median_ms(step, steps, repeats, warmup), torch.__version__


# ---------------------------------------------------------------------------
# Rows and table


def _rows(cfg, B, T, steps, repeats, malloc):
    threads, how = blas_threads()
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    note = f"NumPy threads via {how}; OPENBLAS_CORETYPE={coretype or 'unset'}; torch.set_num_threads(1)"
    ms = time_pylib(cfg, B, T, steps, repeats)
    rows = [{"implementation": f"pylib (NumPy {np.__version__}, float32)", "malloc": malloc, "B": B, "T": T,
             "threads": threads, "median_ms": ms, "steps_per_s": 1e3 / ms, "note": note}]
    try:
        torch_ms, version = time_torch(cfg, B, T, steps, repeats)
    except ImportError:
        return rows
    rows.append({"implementation": f"PyTorch {version} eager + AdamW", "malloc": malloc, "B": B, "T": T,
                 "threads": 1, "median_ms": torch_ms, "steps_per_s": 1e3 / torch_ms, "note": note})
    return rows


def bench_rows(cfg=None, B=16, T=64, steps=200, repeats=7, with_kept_memory=True):
    """One dict per implementation and malloc setting: implementation, malloc, B, T, threads,
    median_ms, steps_per_s, note. First as the environment is, then (if with_kept_memory and
    glibc) again after keep_freed_memory(), which changes this process for good."""
    cfg = cfg or model.GPTConfig()
    rows = _rows(cfg, B, T, steps, repeats, "default")
    if with_kept_memory and keep_freed_memory():
        rows += _rows(cfg, B, T, steps, repeats, "glibc keeps 64 MB freed (mallopt)")
    return rows


def markdown_table(rows):
    """The rows as a Markdown table, with the notes underneath."""
    lines = ["| implementation | malloc | B | T | threads | median ms/step | steps/s |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['implementation']} | {r['malloc']} | {r['B']} | {r['T']} | {r['threads']} | "
                     f"{r['median_ms']:.2f} | {r['steps_per_s']:.0f} |")
    lines += ["", *sorted({f"Note: {r['note']}" for r in rows})]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--no-kept-memory", action="store_true", help="skip the mallopt rows")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON (for build.py --bench)")
    args = ap.parse_args()
    if args.json:
        rows = bench_rows(steps=args.steps, repeats=args.repeats, with_kept_memory=not args.no_kept_memory)
        print(json.dumps(rows))
        sys.exit(0)
    print(f"model: {model.count_params(model.GPTConfig()):,} parameters; load average {os.getloadavg()[0]:.2f}")
    rows = bench_rows(steps=args.steps, repeats=args.repeats, with_kept_memory=not args.no_kept_memory)
    print(markdown_table(rows))
