"""Time pylib's training step at this checkout against another revision's, in one run.

The other revision's pylib is extracted with `git archive` into a temporary folder. Each timing
runs in a fresh one-thread Python process (OPENBLAS_NUM_THREADS=1), and the two revisions
alternate (A B A B ...), so that a change in the machine's load falls on both alike. Two timings:

  step: pylib.studies.benchmark.time_train_step, forward + backward + clip + AdamW on a fixed batch
        (the same function at both revisions);
  loop: pylib.train.train_steps with evaluation off: batch sampling, the step's functions and the
        record, as the page's widget runs it.

Prints each figure's median over the rounds (and min/max); asserts nothing: timings are
measurements, not tests.

    .venv/bin/python bench/bench_revisions.py --against b1f78d9 [--rounds 5] [--batch 16 64]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

# One timing, run with the revision's folder first on sys.path; prints {"step": ms, "loop": ms}.
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pylib import model, train
from pylib.studies import benchmark
import numpy as np
B = int(sys.argv[2])
step = benchmark.time_train_step(B=B, steps=50, repeats=5, warmup=20)["ms_per_step"]
tokens = np.random.default_rng(0).integers(0, 65, 200_000).astype(np.uint16)
cfg = model.GPTConfig()
tc = train.TrainConfig(steps=260, batch_size=B, warmup_steps=20, eval_interval=10**9, eval_windows=1)
state = train.init_train_state(cfg, tc)
train.train_steps(state, cfg, tc, tokens, tokens, 1)  # step 0 evaluates (eval_interval divides 0)
train.train_steps(state, cfg, tc, tokens, tokens, 20)  # warm-up
loops = []
for _ in range(5):
    t0 = time.perf_counter()
    train.train_steps(state, cfg, tc, tokens, tokens, 40)
    loops.append((time.perf_counter() - t0) / 40 * 1e3)
print(json.dumps({"step": step, "loop": sorted(loops)[2]}))
"""


def extract(rev, dest):
    """The revision's pylib/ into dest (git archive)."""
    archive = subprocess.run(["git", "archive", rev, "pylib"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def timing(folder, B):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, str(folder), str(B)], check=True, capture_output=True,
                         text=True, env=env).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required=True, help="the other revision (a commit, tag or branch)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, nargs="+", default=[16, 64])
    args = ap.parse_args()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        extract(args.against, pathlib.Path(tmp))
        folders = {args.against: pathlib.Path(tmp), f"this checkout ({head})": ROOT}
        print(f"one BLAS thread per process; {args.rounds} rounds, revisions alternating; "
              f"each figure a median of 5 timed loops (ms per step)")
        for B in args.batch:
            got = {name: {"step": [], "loop": []} for name in folders}
            for _ in range(args.rounds):
                for name, folder in folders.items():
                    for k, v in timing(folder, B).items():
                        got[name][k].append(v)
            for k in ("step", "loop"):
                for name in folders:
                    xs = got[name][k]
                    print(f"B={B:<3} {k:<4} {name:<28} median {statistics.median(xs):7.3f} ms "
                          f"(min {min(xs):.3f}, max {max(xs):.3f}, {len(xs)} rounds)")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
