"""Chapter 15's exercises: a cluster's failure rate, restoring a checkpoint bit for bit, a resume
without the optimiser state, and the best checkpoint interval (pylib.exercises says how checks work)."""

import copy
import io
import json
import math

import numpy as np

from pylib import checkpoint, guards, model, train
from pylib.exercises import Exercise, Mistake, Wrong, corpus, expect_number, kept, near
from pylib.studies import resume
from pylib.systems import goodput

# ---------------------------------------------------------------------------
# 1. Predict: the mean time between failures of a smaller cluster

# Dubey et al. 2024, The Llama 3 Herd of Models, section 3.3.4 (as chapter 15 cites them): a 54-day
# snapshot, 466 interruptions of which 419 unexpected, on 16K GPUs.
LLAMA3_DAYS, LLAMA3_UNEXPECTED, LLAMA3_ALL = 54, 419, 466
SCALE = 4  # the cluster in the task has a quarter of the GPUs


def cluster_interval():
    """M, in hours, of the same job on a quarter of the GPUs, each part failing at the same rate."""
    m_full = LLAMA3_DAYS * 24 / LLAMA3_UNEXPECTED  # the 16K-GPU job's mean time between unexpected failures
    return m_full * SCALE  # a quarter of the parts fail a quarter as often


def check_cluster_interval(value, truth):
    full = truth / SCALE
    if near(value, full, 0.03):
        raise Wrong("That is the 16K-GPU job's own mean time between failures: the smaller job has fewer parts "
                    "that can fail.")
    if near(value, full / SCALE, 0.03):
        raise Wrong("Fewer parts fail less often, not more: with a quarter of the GPUs, failures come a quarter "
                    "as often.")
    if near(value, LLAMA3_DAYS * 24 / LLAMA3_ALL * SCALE, 0.03):
        raise Wrong("You counted all 466 interruptions: the 47 planned ones are not failures (a job checkpoints "
                    "before a planned stop and loses nothing).")
    if near(value, truth / 24, 0.03):
        raise Wrong("That is in days: the answer is asked in hours.")


# ---------------------------------------------------------------------------
# 2. Implement: restore a train state from a checkpoint's contents, bit for bit

RESTORE_STARTER = '''import numpy as np

from pylib import train


def restore(entries, meta, model_cfg, train_cfg):
    """A train state that continues the saved run exactly, ready for pylib.train.train_steps.

    entries: {name: array}, the checkpoint's arrays ("param/<name>", "opt/...") as np.load reads them;
    meta: the checkpoint's "meta" entry, parsed from its JSON (checkpoint_bytes, in the chapter, writes both).
    """
    state = train.init_train_state(model_cfg, train_cfg)  # fresh: the shapes, and the step's functions
    for name, p in state["params"].items():
        p[...] = entries["param/" + name]  # the weights: the obvious part, and not enough
    return state
'''

RESTORE_SOLUTION = '''import numpy as np

from pylib import train


def restore(entries, meta, model_cfg, train_cfg):
    state = train.init_train_state(model_cfg, train_cfg)
    for name, p in state["params"].items():
        p[...] = entries["param/" + name]

    def fill(opt, prefix):  # the optimiser's arrays and counters, however it nests them
        for key, value in opt.items():
            name = f"{prefix}/{key}"
            if isinstance(value, np.ndarray) and name in entries:
                value[...] = entries[name]
            elif isinstance(value, dict):
                fill(value, name)
            elif isinstance(meta["opt"].get(name), int):
                opt[key] = meta["opt"][name]

    fill(state["opt"], "opt")
    state["step"] = meta["step"]  # the schedule's position
    for name, saved in meta["rng_streams"].items():  # the batch stream: which windows come next
        rng = np.random.default_rng()
        rng.bit_generator.state = {
            "bit_generator": saved["bit_generator"],
            "state": {k: int(v) for k, v in saved["state"].items()},
            "has_uint32": saved["has_uint32"], "uinteger": int(saved["uinteger"])}
        state[name] = rng
    state["recent_norms"] = list(meta["recent_norms"])  # the outlier-skipping window
    state["diverged"] = meta["diverged"]
    return state
'''

NEEDED_KEYS = ("params", "opt", "step", "batch_rng", "diverged", "loss_fn", "step_grads", "update", "groups")


def _restore_cases():
    return (
        ("AdamW", train.TrainConfig(steps=40, warmup_steps=5, eval_interval=5, eval_windows=8), 12, 10),
        ("SGD with momentum and outlier skipping",
         train.TrainConfig(steps=40, warmup_steps=5, eval_interval=5, eval_windows=8, optimizer="sgd", lr=0.3,
                           skip_factor=3.0), 15, 10),
    )


def _opt_leaves(opt, prefix="opt"):
    """{path: value} of an optimiser state's arrays and counters (caches left out)."""
    out = {}
    for key, value in opt.items():
        if key in checkpoint.CACHE_KEYS:
            continue
        name = f"{prefix}/{key}"
        if isinstance(value, dict):
            out.update(_opt_leaves(value, name))
        else:
            out[name] = value
    return out


def _same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _compare_states(got, want, label, k):
    if not isinstance(got, dict) or not all(key in got for key in NEEDED_KEYS):
        raise Wrong("restore should return a train state as train.init_train_state builds it (params, opt, step, "
                    "batch_rng, the step's functions...): build a fresh one and fill it.")
    params = got["params"]
    if not isinstance(params, dict) or set(params) != set(want["params"]) or not all(
            isinstance(params[n], np.ndarray) and _same(params[n], want["params"][n]) for n in params):
        raise Wrong(f"{label}: the weights are not the checkpoint's, bit for bit (same names, shapes, float32 values).")
    if got["step"] != k or type(got["step"]) is not int:
        raise Wrong(f"{label}: the state's step is {got['step']!r}, not the saved step: the learning-rate schedule is a "
                    "function of the step, so it would start again at its warmup.")
    have, need = _opt_leaves(got["opt"]) if isinstance(got["opt"], dict) else {}, _opt_leaves(want["opt"])
    for name, value in need.items():
        if isinstance(value, np.ndarray) and not (isinstance(have.get(name), np.ndarray) and _same(have[name], value)):
            raise Wrong(f"{label}: the optimiser's array {name!r} is not the saved one, bit for bit (values, "
                        "shape and dtype): the moments (or momentum buffers) carry the run's history, and a fresh "
                        "state has zeros there.")
    for name, value in need.items():
        if isinstance(value, int) and have.get(name) != value:
            raise Wrong(f"{label}: the optimiser's step count {name!r} is {have.get(name)!r}, not the saved {value}: "
                        "it drives the bias correction, so the next updates would be the wrong size.")
    if not isinstance(got["batch_rng"], np.random.Generator) or \
            got["batch_rng"].bit_generator.state != want["batch_rng"].bit_generator.state:
        raise Wrong(f"{label}: the batch stream's state is not the saved one: after the resume the run would draw "
                    "other windows than the uninterrupted run.")
    if list(got.get("recent_norms", [])) != list(want.get("recent_norms", [])):
        raise Wrong(f"{label}: the outlier-skipping window (the recent gradient norms) is not restored: a resumed "
                    "run would judge its next steps against another median, or none.")
    if got["diverged"] is not want["diverged"]:
        raise Wrong(f"{label}: the diverged flag is not the saved one.")


def _records_equal(a, b):
    if len(a) != len(b):
        return 0
    for i, (x, y) in enumerate(zip(a, b)):
        x, y = dict(x), dict(y)
        x.pop("tokens_per_s", None), y.pop("tokens_per_s", None)  # wall time: never the same
        if x != y:
            return i
    return None


def _uninterrupted(cfg, tc, k, n):
    """The uninterrupted run of a case: its checkpoint at step k (bytes), the state then, and the records
    and the weights of the n steps after it. The same for every answer."""
    c = corpus()
    state = train.init_train_state(cfg, tc)
    train.train_steps(state, cfg, tc, c.train, c.val, k)
    at_k = copy.deepcopy(state)
    blob = checkpoint.checkpoint_bytes(state, cfg, tc)
    records = train.train_steps(state, cfg, tc, c.train, c.val, n)
    return blob, at_k, records, state["params"]


def check_restore(fn):
    c = corpus()
    cfg = model.GPTConfig()
    for label, tc, k, n in _restore_cases():
        blob, state, want_records, want_params = kept(f"ch15.restore.{label}", lambda: _uninterrupted(cfg, tc, k, n))
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            entries = {name: z[name] for name in z.files}
        meta = json.loads(entries.pop("meta").tobytes().decode())
        try:
            got = fn(entries, meta, cfg, tc)
        except KeyError as e:
            if label.startswith("SGD"):
                raise Wrong(f"Right names for AdamW, but your function raised KeyError ({e}) on the {label} "
                            "checkpoint: its optimiser state has other entries. Let the fresh state's own structure "
                            "(and the checkpoint's names) say what to fill.") from None
            raise
        _compare_states(got, state, label, k)
        try:
            got_records = train.train_steps(got, cfg, tc, c.train, c.val, n)
        except Exception as e:  # noqa: BLE001 (the reader's state broke pylib's step)
            raise Wrong(f"{label}: training from your state failed ({type(e).__name__}: {e}).") from None
        at = _records_equal(got_records, want_records)
        if at is not None:
            raise Wrong(f"{label}: the state looks right, but the run after it differs from the uninterrupted one at "
                        f"its step {k + at}: something it reads is not restored exactly.")
        if not all(_same(got["params"][p], want_params[p]) for p in want_params):
            raise Wrong(f"{label}: the records agree but the final weights do not, bit for bit.")
    return ("Right: for AdamW, and for SGD with momentum and outlier skipping, the resumed run is the "
            "uninterrupted one bit for bit: every batch loss, gradient norm, learning rate, evaluation and final "
            "weight of the steps after the checkpoint.")


# ---------------------------------------------------------------------------
# 3. Investigate: resume without the optimiser state, and compare the next update

NO_OPT_STARTER = '''from pylib import optim


def without_optimizer(state, model_cfg, train_cfg):
    """Change one condition of a resume: forget the optimiser's state, as a resume from the weights
    alone does. state: a train state just loaded from a checkpoint (an AdamW run). Return it.
    """
    return state  # change the optimiser's state, and nothing else
'''

NO_OPT_SOLUTION = '''from pylib import optim


def without_optimizer(state, model_cfg, train_cfg):
    state["opt"] = optim.adamw_init(state["params"])  # m = v = 0, t = 0
    return state
'''

NO_OPT_AT, NO_OPT_AFTER = 30, 20  # resume at step 30 of the default run; compare the next 20 steps


def _no_opt_runs():
    """The checkpoint at NO_OPT_AT of the default run (evaluations only at step 0): bytes, loaded fresh
    by each check."""
    c = corpus()
    cfg, tc = model.GPTConfig(), train.TrainConfig(eval_interval=10**6)
    state = train.init_train_state(cfg, tc)
    train.train_steps(state, cfg, tc, c.train, c.val, NO_OPT_AT)
    return cfg, tc, checkpoint.checkpoint_bytes(state, cfg, tc)


def _first_step(state, cfg, tc):
    """One step: its record, the gradient before clipping, and the change of every weight."""
    c = corpus()
    seen = {}
    guards.hook_grads(state, lambda record, grads: seen.update({k: v.copy() for k, v in grads.items()}))
    before = {n: p.copy() for n, p in state["params"].items()}
    record = train.train_steps(state, cfg, tc, c.train, c.val, 1)[0]
    return record, seen, before


def check_without_optimizer(fn):
    cfg, tc, blob = kept("ch15.without_optimizer", _no_opt_runs)
    proper, _, _, _ = checkpoint.load_checkpoint(blob, cfg)
    changed, _, _, _ = checkpoint.load_checkpoint(blob, cfg)
    saved = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in proper["opt"].items()}
    out = fn(changed, cfg, tc)
    if not (isinstance(out, dict) and "params" in out and "opt" in out):
        raise Wrong("without_optimizer should return the train state it was given, changed.")
    changed = out
    if not all(_same(changed["params"][n], proper["params"][n]) for n in proper["params"]):
        raise Wrong("Your resume changed the weights too: a resume from the weights alone keeps them. Change the "
                    "optimiser's state, and nothing else.")
    if changed["step"] != proper["step"] or \
            changed["batch_rng"].bit_generator.state != proper["batch_rng"].bit_generator.state:
        raise Wrong("Your resume changed the step or the batch stream: the schedule and the data go on as saved. "
                    "Change the optimiser's state, and nothing else.")
    opt = changed["opt"]
    if not (isinstance(opt, dict) and {"t", "m", "v"} <= set(opt)):
        raise Wrong("Your optimiser state is not AdamW's (t, m and v): build it as a fresh run's is built.")
    m_kept = _same(opt["m"], saved["m"]) and _same(opt["v"], saved["v"])
    zeroed = not np.any(opt["m"]) and not np.any(opt["v"])
    if m_kept and opt["t"] == saved["t"]:
        raise Wrong("Your resume still has the saved optimiser state (the same m, v and t): the condition was not "
                    "changed.")
    if opt["t"] != 0:
        raise Wrong(f"m and v are {'zero' if zeroed else 'changed'} but t is still {opt['t']}: a resume from the "
                    "weights alone starts the optimiser's step count again too, and that is what sets its first "
                    "update's size.")
    if not zeroed:
        raise Wrong("t is 0 but m and v still hold the run's averages (or other values): a resume from the weights "
                    "alone starts them at zero.")
    rec_p, g_p, before = _first_step(proper, cfg, tc)
    rec_c, g_c, _ = _first_step(changed, cfg, tc)
    if rec_c["loss"] != rec_p["loss"] or not all(_same(g_c[n], g_p[n]) for n in g_p):
        raise Wrong("The first step's loss or gradient differs from the proper resume's: the same weights on the "
                    "same batch must give the same numbers, bit for bit.")
    size = {name: resume.update_norm(before, st["params"]) for name, st in (("proper", proper), ("changed", changed))}
    ratio = size["changed"] / size["proper"]
    lr = rec_p["lr"]
    moved = np.concatenate([np.abs(changed["params"][n] - before[n]).ravel() for n in before]) / lr
    c = corpus()
    later_p = train.train_steps(proper, cfg, tc, c.train, c.val, NO_OPT_AFTER)
    later_c = train.train_steps(changed, cfg, tc, c.train, c.val, NO_OPT_AFTER)
    excess = resume.paired_excess([rec_c] + later_c, [rec_p] + later_p, NO_OPT_AFTER + 1)
    return (f"Checked: at the resume (step {NO_OPT_AT}) both arms have the same loss and the same gradient, bit for "
            f"bit; only the update differs. Without m, v and t it is {ratio:.1f} times the proper resume's (norm of "
            f"the change of all the weights), and the median weight moved by {np.median(moved):.2f} times the "
            f"learning rate: bias correction makes the first step full size. Over the next {NO_OPT_AFTER + 1} "
            f"steps, on the same batches, the largest excess of a batch's loss over the proper resume's was "
            f"{excess['max']:+.4f} nats (one seed: the chapter's three seeds say how little that resolves).")


# ---------------------------------------------------------------------------
# 4. Implement: the checkpoint interval that maximises goodput

INTERVAL_STARTER = '''import math


def best_interval(delta, M, R):
    """The checkpoint interval tau that maximises the expected goodput of the chapter's failure model:

        goodput(tau) = tau / (M * exp(R/M) * (exp((tau + delta)/M) - 1))

    delta: the time to write a checkpoint; M: the mean time between failures; R: a restart's cost
    (all in one unit of time). Return tau in that unit, to a relative precision of 1e-6.
    """
    raise NotImplementedError
'''

INTERVAL_SOLUTION = '''import math


def best_interval(delta, M, R):
    # log goodput = log tau - log(e^x - 1) + const, x = (tau + delta)/M; R only adds a constant.
    # Its slope 1/tau - e^x / (M (e^x - 1)) falls as tau grows: find where it crosses zero.
    def slope(tau):
        x = (tau + delta) / M
        return 1 / tau + 1 / (M * math.expm1(-x))  # e^x/(e^x - 1) = -1/expm1(-x)

    lo, hi = 1e-12 * M, M
    while slope(hi) > 0:
        hi *= 2
    for _ in range(200):
        mid = (lo * hi) ** 0.5  # bisect in log tau
        lo, hi = (mid, hi) if slope(mid) > 0 else (lo, mid)
    return (lo * hi) ** 0.5
'''

INTERVAL_CASES = (  # (delta, M, R), any one unit
    (5.0, 15.0, 10.0),  # Daly's figure: a machine that fails every quarter hour, minutes
    (5.0, 1440.0, 10.0),  # the same, M = 24 h
    (0.05, 1000.0, 0.5),  # delta << M: Young's first order is nearly exact
    (40.0, 15.0, 10.0),  # delta > 2M: Daly's estimate is undefined
    (5.0, 15.0, 0.0),  # no restart cost
    (5.0, 15.0, 60.0),  # a large one
    (2e-6, 3e-3, 1e-6),  # tiny units
)


def check_best_interval(fn):
    got_by_r = {R: expect_number(fn(5.0, 15.0, R), "best_interval's result") for R in (0.0, 10.0, 60.0)}
    if all(v > 0 and math.isfinite(v) for v in got_by_r.values()) and \
            not math.isclose(min(got_by_r.values()), max(got_by_r.values()), rel_tol=1e-6):
        raise Wrong("Your interval moves with the restart cost R (at delta = 5, M = 15: "
                    f"{', '.join(f'{v:.4g} at R = {r:g}' for r, v in got_by_r.items())}): in this model R multiplies "
                    "the expected time by a constant factor, so it cannot move the optimum.")
    for delta, M, R in INTERVAL_CASES:
        want = goodput.optimal_interval(delta, M)
        got = expect_number(fn(delta, M, R), "best_interval's result")
        if not (got > 0 and math.isfinite(got)):
            raise Wrong(f"At delta = {delta:g}, M = {M:g} your interval is {got!r}: it must be a positive number.")
        if math.isclose(got, want, rel_tol=1e-6):
            continue
        where = f"At delta = {delta:g}, M = {M:g}, R = {R:g}"
        if math.isclose(got, goodput.young_interval(delta, M), rel_tol=1e-6):
            raise Wrong(f"{where} yours is Young's first-order interval, {(got - want) / want:+.1%} from the "
                        "optimum: it is right only when delta is small against M. Maximise the goodput itself.")
        daly = goodput.daly_interval(delta, M)
        if daly is not None and math.isclose(got, daly, rel_tol=1e-6):
            raise Wrong(f"{where} yours is Daly's higher-order estimate, {(got - want) / want:+.2%} from the "
                        "optimum: close, but an approximation. Maximise the goodput itself.")
        ratio = got / want
        if abs(math.log(ratio)) <= math.log(2) / 4 + 1e-9:
            raise Wrong(f"{where} yours is within {abs(ratio - 1):.1%} of the optimum, but not at it: a grid finds "
                        "the optimum only to its spacing. Solve for the point where the goodput's slope is zero.")
        raise Wrong(f"{where} yours is {ratio:.4g} times the interval that maximises the goodput.")
    d, M = 5.0, 15.0
    return (f"Right on seven cases, delta > 2M included. At Daly's delta = {d:g} min, M = {M:g} min the optimum is "
            f"{goodput.optimal_interval(d, M):.2f} min; Young's interval, {goodput.young_interval(d, M):.2f}, gives "
            f"{goodput.expected_goodput(goodput.young_interval(d, M), d, M, 10.0) / goodput.expected_goodput(goodput.optimal_interval(d, M), d, M, 10.0):.1%} "
            "of the best goodput there.")


EXERCISES = [
    Exercise(
        id="ch15.cluster_interval", kind="predict", title="Fewer parts, fewer failures",
        task="""The Llama 3 report counts 419 unexpected interruptions in a 54-day snapshot of pretraining on 16K
GPUs. Take them as the failures of the chapter's goodput model, and suppose every GPU (with its share of
hosts, memory and network) fails at the same rate whatever the size of the job. What is $M$, the mean
time between failures, of the same training on a quarter of the GPUs, in hours?""",
        truth=cluster_interval, check=check_cluster_interval, unit="hours", tolerance=0.03,
        solution="""The 16K-GPU job had $M = 54 \\times 24 / 419 \\approx 3.1$ hours between unexpected failures.
Failures of independent parts add up: $n$ parts that each fail at rate $1/m$ fail together at rate
$n/m$, so $M = m/n$. A quarter of the GPUs fail a quarter as often: $M \\approx 4 \\times 3.1 \\approx 12.4$
hours. Planned interruptions are not counted: the job checkpoints before them and loses nothing.""",
        hints=("First the whole job's M: the elapsed time divided by the number of failures in it.",
               "Each GPU fails at its own rate; the job fails when any of them does. How does the job's rate scale "
               "with the number of GPUs?"),
        mistakes=(Mistake("3.09", "16K-GPU job's own"), Mistake("0.773", "Fewer parts fail less often"),
                  Mistake("11.1", "all 466 interruptions"), Mistake("0.515", "in days")),
    ),
    Exercise(
        id="ch15.restore", kind="implement", title="Restore a checkpoint, bit for bit",
        task="""`checkpoint_bytes` in the chapter writes a checkpoint; write the other half. Given its arrays
and its parsed `meta`, return a train state from which `train.train_steps` continues exactly as the run that
never stopped: every batch loss, gradient norm, evaluation and final weight the same, bit for bit. The check
saves an AdamW run, and an SGD-with-momentum run with outlier skipping, part-way, and compares.""",
        starter=RESTORE_STARTER, function="restore", solution=RESTORE_SOLUTION, check=check_restore,
        needs_corpus=True,
        hints=("The chapter's first paragraphs list what a checkpoint holds: go through that list, and for each item "
               "find where the fresh state keeps it and where `meta` or `entries` has it.",
               "The optimiser's arrays are named by their path in `state[\"opt\"]` (\"opt/m\", \"opt/buf/wte\", ...) and "
               "its counters are in `meta[\"opt\"]` by the same paths. Walk the fresh optimiser state and fill it.",
               "A random stream's state is `rng.bit_generator.state`, a dict; the checkpoint stores its big integers "
               "as text, so turn them back with `int`."),
        mistakes=(
            Mistake(RESTORE_SOLUTION.replace('    state["step"] = meta["step"]', '    pass'), "learning-rate schedule"),
            Mistake(RESTORE_SOLUTION.replace("            elif isinstance(meta[\"opt\"].get(name), int):\n"
                                             "                opt[key] = meta[\"opt\"][name]\n", ""), "step count"),
            Mistake(RESTORE_SOLUTION.replace("        state[name] = rng\n", ""), "batch stream"),
            Mistake(RESTORE_SOLUTION.replace('list(meta["recent_norms"])', "[]"), "outlier-skipping window"),
        )),
    Exercise(
        id="ch15.no_optimizer_state", kind="investigate", title="One condition changed: no optimiser state",
        task="""Resume the default run from its checkpoint at step 30, twice: once as saved, and once with one
condition changed: the optimiser's state forgotten, as a resume from the weights alone would have it. Edit the
one line; the check compares the first step's loss and gradient, the update, and the next steps' losses,
against the proper resume.""",
        starter=NO_OPT_STARTER, function="without_optimizer", solution=NO_OPT_SOLUTION, check=check_without_optimizer,
        needs_corpus=True,
        hints=("A fresh run's optimiser state comes from `optim.adamw_init(params)`.",
               "Forget all of it: m, v and the step count t."),
        mistakes=(
            Mistake(NO_OPT_STARTER, "the condition was not changed"),
            Mistake(NO_OPT_SOLUTION.replace('    state["opt"] = optim.adamw_init(state["params"])  # m = v = 0, t = 0',
                                            '    state["opt"]["m"][:] = 0\n    state["opt"]["v"][:] = 0'),
                    "but t is still"),
            Mistake(NO_OPT_SOLUTION.replace('    state["opt"] = optim.adamw_init(state["params"])  # m = v = 0, t = 0',
                                            '    state["opt"]["t"] = 0'), "still hold the run's averages"),
            Mistake(NO_OPT_SOLUTION.replace("from pylib import optim", "from pylib import optim, train").replace(
                '    state["opt"] = optim.adamw_init(state["params"])  # m = v = 0, t = 0\n    return state',
                "    return train.init_train_state(model_cfg, train_cfg)"), "changed the weights too"),
        )),
    Exercise(
        id="ch15.best_interval", kind="implement", title="The best checkpoint interval",
        task="""Young's and Daly's intervals approximate the optimum; the chapter's failure model has an exact
expected time per segment, so it has an exact optimum too. Write the interval that maximises the expected
goodput, for any $\\delta$, $M$ and $R$, including $\\delta > 2M$ where Daly's estimate does not apply.""",
        starter=INTERVAL_STARTER, function="best_interval", solution=INTERVAL_SOLUTION, check=check_best_interval,
        hints=("Maximise the log of the goodput: it is $\\log\\tau - \\log(e^{(\\tau+\\delta)/M} - 1)$ plus a constant. "
               "Where is R?",
               "Its derivative, $1/\\tau - e^{x}/(M(e^{x} - 1))$ with $x = (\\tau+\\delta)/M$, is positive for small "
               "$\\tau$ and negative for large: bisect for its zero.",
               "Bracket the zero first: start from a tiny $\\tau$ and double an upper end until the slope turns "
               "negative."),
        mistakes=(
            Mistake(INTERVAL_SOLUTION.replace("    lo, hi = 1e-12 * M, M", "    return math.sqrt(2 * delta * M)\n    lo, hi = 1e-12 * M, M"),
                    "Young's first-order interval"),
            Mistake(INTERVAL_SOLUTION.replace(
                "    lo, hi = 1e-12 * M, M",
                "    xi = delta / (2 * M)\n    return math.sqrt(2 * delta * M) * (1 + math.sqrt(xi) / 3 + xi / 9) - delta\n"
                "    lo, hi = 1e-12 * M, M"), "Daly's higher-order estimate"),
            Mistake(INTERVAL_SOLUTION.replace("x = (tau + delta) / M", "x = (tau + delta + R) / M"),
                    "moves with the restart cost"),
            Mistake(INTERVAL_SOLUTION.replace(
                "    lo, hi = 1e-12 * M, M",
                "    grid = [math.sqrt(2 * delta * M) * 2 ** (k / 2) for k in range(-6, 7)]\n"
                "    good = lambda t: t / (M * math.exp(R / M) * math.expm1((t + delta) / M))\n"
                "    return max(grid, key=good)\n    lo, hi = 1e-12 * M, M"), "a grid finds"),
        )),
]
