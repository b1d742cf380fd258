"""The editable cells' drivers: what Run does with each edited pylib function (CELLS).

A driver, driver(fn, corpus), runs the reader's function fn next to pylib's own on the same inputs,
prints both as it goes and returns a JSON-ready summary. The optimiser and schedule drivers train
the course model with fn patched into pylib for the run (`patched`: restored afterwards, even when
the run fails or is stopped), then compare with a run of the unedited function on the same seed.
`Cell` says which function a cell edits, its driver, whether it needs the corpus, and what Run does
(the page shows it); the *_RUN and *_CHECK settings say what each driver runs. pylib.web.cells, the
runner, compiles the edited code and calls the driver; it re-exports CELLS.

No numerics here: training is pylib.train, the loss pylib.loss, rounding pylib.systems.precision,
the ring pylib.systems.collectives.
"""

import contextlib
import dataclasses
import math

import numpy as np

# ---------------------------------------------------------------------------
# The drivers: each runs the edited function next to pylib's, prints both, returns a summary


def _fmt(x, spec=".4f"):
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def loss_driver(fn, corpus):
    """The untrained course model's logits on fixed validation windows, scored by your function and
    by pylib's, with no mask, with a mask and with a fixed denominator."""
    from pylib import data, loss, model

    cfg = model.GPTConfig()
    params = model.init_params(cfg, LOSS_CHECK["seed"])
    x, y = data.eval_windows(corpus.val, LOSS_CHECK["windows"], cfg.block_size)
    logits = model.forward_logits(params, cfg, x)
    half = np.zeros(y.shape, dtype=np.float32)
    half[:, : cfg.block_size // 2] = 1.0  # count the first half of every window only
    n = y.size
    cases = [
        ("every position", {}),
        ("mask: first half of each window", {"mask": half}),
        (f"denominator {2 * n} (twice the count)", {"denom": 2 * n}),
    ]
    print(f"Untrained model (seed {LOSS_CHECK['seed']}), {LOSS_CHECK['windows']} validation windows "
          f"of {cfg.block_size} tokens; ln V = {math.log(cfg.vocab_size):.4f} nats.")
    print(f"{'case':<36} {'yours':>10} {'pylib':>10}")
    rows = []
    for label, kwargs in cases:
        reference = loss.cross_entropy_forward(logits.copy(), y, **kwargs)[0]
        out = fn(logits.copy(), y, **kwargs)
        yours = float(out[0] if isinstance(out, tuple) else out)
        rows.append({"case": label, "yours": yours, "pylib": float(reference)})
        print(f"{label:<36} {_fmt(yours):>10} {_fmt(reference):>10}", flush=True)
    same = all(r["yours"] == r["pylib"] for r in rows)
    print("Every case matches pylib exactly." if same else
          "Your function differs from pylib's where the two columns differ.")
    return {"cases": rows, "same": same}


def _eval_rows(history, steps):
    """(steps done, lr, val) at every evaluation of a run (the last one is after the last update)."""
    rows = []
    for r in history:
        if "val" in r:
            done = r["step"] + 1 if r["step"] == steps - 1 else r["step"]
            rows.append({"step": done, "lr": r.get("lr"), "val": r["val"]})
    return rows


@contextlib.contextmanager
def patched(module, attr, value):
    """module.attr = value for the duration, restored afterwards whatever happens."""
    old = getattr(module, attr)
    setattr(module, attr, value)
    try:
        yield
    finally:
        setattr(module, attr, old)


def _train_run(corpus, train_cfg, patch=None, on_row=None):
    """Train the course model (pylib.train) with an optional (module, attr, fn) patched in.

    Returns (evaluation rows, step it diverged at or None)."""
    from pylib import model, train

    cfg = model.GPTConfig()
    state = {"diverged": None}

    def on_step(record):
        if record.get("diverged"):
            state["diverged"] = record["step"]
        if on_row and "val" in record:
            on_row(_eval_rows([record], train_cfg.steps)[0])

    with patched(*patch) if patch else contextlib.nullcontext():
        _, history = train.train(cfg, train_cfg, corpus.train, corpus.val, on_step=on_step)
    return _eval_rows(history, train_cfg.steps), state["diverged"]


_REFERENCE = {}  # (cell, corpus size) -> the unedited run's rows: the same every time, so run once


def _compare_training(fn, corpus, target, train_cfg, show_lr=False):
    """Train with pylib's function, then with the reader's (patched in), same seed; print both."""
    from pylib.web.cells import resolve  # here, not at the top: cells imports this module for CELLS

    module, attr = resolve(target)
    key = (target, int(corpus.train.size), train_cfg)
    if key not in _REFERENCE:
        print(f"Training {train_cfg.steps} steps with pylib's {attr} (seed {train_cfg.seed}), for reference…",
              flush=True)
        _REFERENCE[key] = _train_run(corpus, train_cfg)
    reference, ref_diverged = _REFERENCE[key]
    by_step = {r["step"]: r for r in reference}
    print(f"Training {train_cfg.steps} steps with your {attr}, same seed and batches:", flush=True)
    header = f"{'step':>5}  {'val loss: yours':>15}  {'pylib':>7}"
    if show_lr:
        header += f"  {'lr: yours':>10}  {'pylib':>9}"
    print(header, flush=True)

    def on_row(row):
        ref = by_step.get(row["step"], {})
        line = f"{row['step']:>5}  {_fmt(row['val']):>15}  {_fmt(ref.get('val')):>7}"
        if show_lr:
            line += f"  {_fmt(row['lr'], '.2e'):>10}  {_fmt(ref.get('lr'), '.2e'):>9}"
        print(line, flush=True)

    rows, diverged = _train_run(corpus, train_cfg, (module, attr, fn), on_row)
    if diverged is not None:
        print(f"Your run diverged at step {diverged} (loss not finite or above 2 ln V), so it stopped there.")
    first, last = rows[0]["val"], rows[-1]["val"]
    ref_first, ref_last = reference[0]["val"], reference[-1]["val"]

    def change(a, b):
        return None if a is None or b is None else b - a

    yours_change, ref_change = change(first, last), change(ref_first, ref_last)
    print(f"Validation loss from step 0 to step {rows[-1]['step']}:")
    print(f"  yours   {_fmt(first)} → {_fmt(last)}  (change {_fmt(yours_change, '+.4f')})")
    print(f"  pylib's {_fmt(ref_first)} → {_fmt(ref_last)}  (change {_fmt(ref_change, '+.4f')})")
    return {"yours": rows, "reference": reference, "diverged": diverged, "reference_diverged": ref_diverged,
            "yours_change": yours_change, "reference_change": ref_change}


def _train_config(**overrides):
    from pylib import train
    return train.TrainConfig(**overrides)


def adamw_driver(fn, corpus):
    """Trains the course model with your adamw_step, then compares with pylib's on the same seed."""
    return _compare_training(fn, corpus, "pylib.optim.adamw_step", _train_config(**ADAMW_RUN))


def schedule_driver(fn, corpus):
    """Trains the course model on the WSD schedule with your wsd_lr, then compares with pylib's."""
    return _compare_training(fn, corpus, "pylib.schedules.wsd_lr", _train_config(**SCHEDULE_RUN), show_lr=True)


def round_driver(fn, corpus):
    """Rounds a few chosen numbers, then random float32 bit patterns, with yours and pylib's."""
    from pylib.systems import precision

    values = np.array(ROUND_CHECK["values"], dtype=np.float32)
    formats = precision.ROUNDED
    print("Your round_to's results; * marks one that differs from pylib's, bit for bit.")
    print(f"{'x':>14}" + "".join(f"{precision.NAMES[f]:>14}" for f in formats))
    for v in values:
        cells = []
        for f in formats:
            yours = np.asarray(fn(np.array([v], dtype=np.float32), f), dtype=np.float32).reshape(-1)[0]
            ref = precision.round_to(np.array([v], dtype=np.float32), f)[0]
            mark = "" if yours.view(np.uint32) == ref.view(np.uint32) else "*"
            cells.append(f"{float(yours):.6g}{mark}")
        print(f"{float(v):>14.8g}" + "".join(f"{c:>14}" for c in cells), flush=True)
    rng = np.random.default_rng(ROUND_CHECK["seed"])
    n = ROUND_CHECK["random_patterns"]
    bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    summary = {}
    print(f"\n{n:,} random float32 bit patterns (every exponent, NaNs and infinities included), bit for bit:")
    for f in formats:
        yours = np.asarray(fn(x.copy(), f), dtype=np.float32).reshape(-1)
        ref = precision.round_to(x, f)
        if yours.shape != ref.shape:
            raise ValueError(f"round_to(x, {f!r}) returned {yours.size} values for {ref.size} inputs")
        same = int(np.count_nonzero(yours.view(np.uint32) == ref.view(np.uint32)))
        summary[f] = {"same": same, "of": n}
        differ = yours.view(np.uint32) != ref.view(np.uint32)
        first = f"; the first differs at x = {float(x[np.argmax(differ)]):.8g}" if differ.any() else ""
        print(f"  {precision.NAMES[f]:<9} {same:,} of {n:,} the same as pylib's{first}", flush=True)
    return {"formats": summary}


def ring_driver(fn, corpus):
    """A small ring you can follow step by step, then larger rings checked against the sum."""
    from pylib import model
    from pylib.systems import collectives

    p, n = RING_CHECK["small"]
    vectors = [np.arange(1, n + 1, dtype=np.float32) * 10.0 ** w for w in range(p)]
    print(f"{p} workers, {n} elements each; worker w starts with [1, 2, …, {n}] × 10^w.")
    steps = list(_ring_steps(fn, vectors))
    for s in steps:
        messages = ", ".join(f"{src}→{dst} chunk {c}" for src, dst, c, _ in s["messages"])
        print(f"{s['phase']} step {s['step']}: {messages}")
        for w, buf in enumerate(s["buffers"]):
            print(f"    worker {w}: " + " ".join(f"{float(v):g}" for v in buf))
    total = np.sum(vectors, axis=0)
    print("the sum: " + " ".join(f"{float(v):g}" for v in total), flush=True)
    checks = []
    rng = np.random.default_rng(RING_CHECK["seed"])
    big_n = model.count_params(model.GPTConfig())  # a gradient's length
    print(f"\nRandom float32 vectors as long as the course model's gradient, {big_n:,} elements "
          f"(seed {RING_CHECK['seed']}); pylib's in brackets:")
    print(f"{'p':>3} {'steps':>9} {'workers agree':>14} {'= pylib':>8} {'max |error|':>12} "
          f"{'sent by worker 0':>18} {'2(p-1)/p n':>11}")
    for workers in RING_CHECK["workers"]:
        vecs = [rng.standard_normal(big_n).astype(np.float32) for _ in range(workers)]
        mine = list(_ring_steps(fn, vecs))
        ref_bufs, ref_sent = collectives.ring_all_reduce(vecs)
        bufs, sent = (mine[-1]["buffers"], mine[-1]["sent"]) if mine else ([v.copy() for v in vecs], [0] * workers)
        agree = all(np.array_equal(b.view(np.uint32), bufs[0].view(np.uint32)) for b in bufs)
        same_as_pylib = all(np.array_equal(np.asarray(b).reshape(-1).view(np.uint32), r.reshape(-1).view(np.uint32))
                            for b, r in zip(bufs, ref_bufs))
        err = float(np.max(np.abs(np.asarray(bufs[0], dtype=np.float64) - np.sum(vecs, axis=0, dtype=np.float64))))
        checks.append({"workers": workers, "steps": len(mine), "workers_agree": agree, "same_as_pylib": same_as_pylib,
                       "max_error": err, "sent": [int(v) for v in sent], "ref_sent": [int(v) for v in ref_sent]})
        steps_text = f"{len(mine)} ({2 * (workers - 1)})"
        sent_text = f"{int(sent[0]):,} ({int(ref_sent[0]):,})"
        print(f"{workers:>3} {steps_text:>9} {'yes' if agree else 'NO':>14} {'yes' if same_as_pylib else 'no':>8} "
              f"{err:>12.2e} {sent_text:>18} {2 * (workers - 1) / workers * big_n:>11,.0f}", flush=True)
    print("max |error|: against the sum in float64 (float32 sums round, in an order that depends on p).")
    return {"checks": checks}


def _ring_steps(fn, vectors):
    """The steps an edited ring yields, each one's buffers copied (the generator reuses them)."""
    for s in fn(vectors):
        yield {**s, "buffers": [np.array(b, copy=True) for b in s["buffers"]], "sent": list(s["sent"])}


# ---------------------------------------------------------------------------
# The cells

# What each driver runs. A short run: the page's NumPy takes about ten times as long as CPython's.
LOSS_CHECK = {"seed": 0, "windows": 8}
ADAMW_RUN = {"steps": 60, "eval_interval": 10, "eval_windows": 64, "seed": 0}
SCHEDULE_RUN = {"steps": 80, "schedule": "wsd", "warmup_steps": 10, "eval_interval": 10, "eval_windows": 64,
                "seed": 0}
ROUND_CHECK = {"values": [1.0, 1.00390625, 1.01171875, 3.14159265, 0.1, 448.0, 500.0, 65504.0, 65520.0,
                          1e-5, 1e-8, -2.5, math.inf, math.nan],
               "random_patterns": 100_000, "seed": 0}
RING_CHECK = {"small": (3, 6), "workers": (2, 3, 4, 8), "seed": 0}


@dataclasses.dataclass(frozen=True)
class Cell:
    target: str  # the pylib function the reader edits (dotted name)
    driver: object  # driver(fn, corpus) -> JSON-ready summary; prints as it goes
    needs_corpus: bool  # the page loads the corpus into the cell worker first
    summary: str  # what Run does, for the page


def _cells():
    adamw, sched = ADAMW_RUN, SCHEDULE_RUN
    return [
        Cell("pylib.loss.cross_entropy_forward", loss_driver, True,
             f"Run scores the untrained model's logits on {LOSS_CHECK['windows']} validation windows with your "
             "function and with pylib's: with no mask, with a mask and with a fixed denominator."),
        Cell("pylib.optim.adamw_step", adamw_driver, True,
             f"Run trains the course model for {adamw['steps']} steps with your adamw_step and compares its "
             f"validation loss, every {adamw['eval_interval']} steps, with a run of pylib's on the same seed "
             "and batches."),
        Cell("pylib.schedules.wsd_lr", schedule_driver, True,
             f"Run trains the course model for {sched['steps']} steps on the WSD schedule "
             f"({sched['warmup_steps']} warmup steps) with your wsd_lr, and compares its learning rate and "
             "validation loss with a run of pylib's on the same seed and batches."),
        Cell("pylib.systems.precision.round_to", round_driver, False,
             f"Run rounds {len(ROUND_CHECK['values'])} chosen numbers to every format with your round_to, then "
             f"{ROUND_CHECK['random_patterns']:,} random float32 bit patterns, and compares each with pylib's bit "
             "for bit."),
        Cell("pylib.systems.collectives.ring_all_reduce_steps", ring_driver, False,
             f"Run prints every step of a {RING_CHECK['small'][0]}-worker ring on small vectors, then checks "
             f"rings of {', '.join(str(p) for p in RING_CHECK['workers'])} workers against the sum and against "
             "pylib's ring."),
    ]


CELLS = {c.target: c for c in _cells()}
