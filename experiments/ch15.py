"""Chapter 15's experiments: running a job.

1. Resume (RESUME): the default model and settings, TrainConfig(final_eval=True). Each seed runs
   RESUME["at_step"] steps, is saved with pylib.checkpoint and then continued three ways from that
   point: the original state (the uninterrupted run), the checkpoint loaded into a fresh state
   (a proper resume: checked bit for bit against the uninterrupted run, every record but the
   timing), and the checkpoint loaded without its optimiser state (m = v = 0, t = 0). The two
   resumes read the same batches (the batch stream is in the checkpoint), so their batch losses
   are paired step by step: the no-optimiser arm's excess over the proper one in the first
   RESUME["window"] steps is its spike. Also: the first update's size in each arm; the final loss
   on the whole validation split; and the steps to a validation loss of RESUME["target"] on the
   128-window subset (a target fixed before these runs were made: the default run's subset
   curve passes it late in the run, chapter 1's measured curve). The same two resumes at
   RESUME["early_step"], just after the warmup, where the learning rate is at its peak, for the
   spike only. Health check: each seed's first loss against ln V.
2. Replay (REPLAY): chapter 8's bad-batch run (the default model, no clipping, a stretch of
   BAD["repeats"] repeated-token batches at BAD["inject_step"]), saved REPLAY["before"] steps
   before the stretch; from the checkpoint, a replay on the same batches (the stored stream, which
   serves the bad stretch) and one on other batches (another stream); spike height after each
   (the largest batch loss on clean steps in the REPLAY["after"] steps after the stretch, minus the
   median of the REPLAY["before"] steps before it). The same-batch replay is checked bit for bit
   against the original run. And the optimisation's spike, lr BAD["lr_spike"] with no bad batch
   and no clipping: saved at REPLAY["lr_ckpt_step"], replayed on other batches: does it diverge again?
3. Goodput: pylib.systems.goodput's simulation at two settings (GOODPUT): the simulated goodput
   against the interval on a grid of factors of Young's interval, with Young's, Daly's and the
   exact optimum.
4. Health: overfitting one batch (HEALTH["overfit_steps"] steps on one batch), and the entropy
   floor: the default model trained on a Markov chain with a known entropy rate (HEALTH).

5. PyTorch's own engine (part_torch): torch.distributed.checkpoint (DCP), through
   companions/ch15_dcp.py. The default model (pylib's initial weights, seed 0) and its AdamW,
   sharded with FSDP2 over TORCH["save_world"] gloo processes, train TORCH["k"] steps (pylib's
   schedule, no clipping, one global batch per step from its own seeded stream), save with DCP,
   and go on TORCH["n"] steps; a new launch of TORCH["load_world"] processes loads the checkpoint
   (resharding) and goes on the same n steps. Compared: the whole state at the resume point, bit
   for bit; the same resume on the saving world size and from pylib's checkpoint of the same state,
   bit for bit; and, after the first and the last step of the continuation, the largest weight
   difference from the run that never stopped, beside two runs that never stopped on the two world sizes and beside
   pylib's own reshard (pylib.systems.reshard, ZeRO-3) of the same run on the same batches. And
   what it costs: the files, their bytes and the metadata, against pylib's checkpoint of the same
   state; save and load times as timings. Without torch the part says so and measures nothing.

Three seeds (experiments.common.SEEDS) for every arm, eight (REPLAY_SEEDS) for the replay; everything is deterministic.

Budget (idle machine, one BLAS thread): a default step ~3 ms, a whole-split evaluation ~0.9 s.
  resume:  3 seeds x (200 + 3 x 200 steps + 2 single steps) ~ 7.2 s, + 2 evaluations each ~ 5.4 s;
           early: 3 seeds x (30 + 2 x 20 steps + 2) ~ 0.7 s
  replay:  8 seeds x (200 + 2 x 60 steps) ~ 7.7 s; lr spike: 8 x ~60 steps ~ 1.3 s
  goodput: 2 settings x 9 intervals, vectorised ~ 1 s
  health:  overfit 3 x 200 steps ~ 1.8 s; Markov: sampling ~ 0.9 s, 3 x 400 steps ~ 3.6 s + evals ~ 0.3 s
  torch:   two launches (4 then 2 processes, each importing torch and starting FSDP2), 5 sharded runs of
           20-40 steps; pylib's reshard ~0.3 s. 54 s of CPU time measured at load 11-19 on the 2 cores
           (139 s of wall time): ~25 s on an idle machine, an estimate
  total ~ 50 s, past the chapter's 45 s by the torch part; measured under contention on the shared machine: see
  results.json timings.
"""

import dataclasses
import os
import tempfile
import time

import numpy as np

from experiments.common import (SEEDS, arm, final_val, is_small, needs_torch, paired_text, progress, rounded,
                                 run_parts, scaled, scored_on, val_tokens)

RESUME = {"at_step": 200, "early_step": 30, "window": 20, "target": 2.55, "curve_before": 10, "curve_after": 60}
REPLAY = {"lr_ckpt_step": 5, "lr_steps": 80}  # with pylib.studies.resume.REPLAY (the page re-runs it)
REPLAY_SEEDS = tuple(range(8))  # the replay is cheap (~0.3 s a seed): eight seeds, fixed before measuring them
GOODPUT = {  # minutes; "small": delta << M; "daly": Daly 2006's Fig. 5 setting (M = 15 min, R = 10, delta = 5)
    "small": {"delta": 1.0, "M": 1000.0, "R": 10.0, "work_in_M": 5000},
    "daly": {"delta": 5.0, "M": 15.0, "R": 10.0, "work_in_M": 20000},
}
GRID = tuple(2 ** (k / 2) for k in range(-4, 5))  # factors of Young's interval
HEALTH = {"overfit_steps": 200, "markov_concentration": 0.05, "markov_tokens": 200_000, "markov_val": 20_000,
          "markov_seed": 0}
TORCH = {"save_world": 4, "load_world": 2, "k": 20, "n": 20, "seed": 0}  # part_torch: ranks, steps before and after the save
MARGIN = 0.02  # nats: below this two final losses count as the same (chosen before measuring)
# The notebook's reduced size (experiments.common.small_size): every part in seconds, every key still there.
# The resume keeps the three seeds (the chapter quotes each seed's steps to the target) on runs of 40 steps
# saved at step 20 (the target is then out of reach: "not reached"); its six whole-split evaluations are
# most of its time. Two seeds for the replay and the health checks; FSDP2 and DCP save on 2 processes and
# load on 1 after 2 steps (3 processes importing torch, ~2 s of CPU each, instead of 6).
SMALL = {"steps": 40, "resume": {**RESUME, "at_step": 20, "early_step": 10, "window": 10, "curve_before": 5, "curve_after": 20},
         "replay": {**REPLAY, "lr_steps": 30}, "replay_seeds": (0, 1), "seeds": (0, 1),
         "health": {**HEALTH, "overfit_steps": 30, "markov_tokens": 20_000, "markov_val": 5_000},
         "torch": {**TORCH, "save_world": 2, "load_world": 1, "k": 2, "n": 2}, "val_tokens": 32_768}


def _steps(tcfg):
    """tcfg, or at the reduced size tcfg with SMALL's steps (the same object at full size)."""
    return dataclasses.replace(tcfg, steps=SMALL["steps"]) if is_small() else tcfg


def _strip(history):
    return [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in history]


# ---------------------------------------------------------------------------
# 1. Resume, with and without the optimiser state


def resume_seed(corpus, seed):
    from pylib import checkpoint, model, train
    from pylib.studies import monitoring, resume
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    tcfg = _steps(train.TrainConfig(seed=seed, final_eval=True))
    k = scaled(RESUME, SMALL["resume"])["at_step"]
    val = val_tokens(corpus.val, SMALL["val_tokens"])  # the whole split at full size
    state = train.init_train_state(mcfg, tcfg)
    head = train.train_steps(state, mcfg, tcfg, corpus.train, val, k)
    ckpt = checkpoint.checkpoint_bytes(state, mcfg, tcfg)
    sizes = resume.first_update_sizes(ckpt, mcfg, corpus.train, val)
    plain = dataclasses.replace(tcfg, final_eval=False)  # the uninterrupted run: its final evaluation is the proper resume's
    tail = train.train_steps(state, mcfg, plain, corpus.train, val, tcfg.steps)
    proper_state, _ = resume.restart(ckpt, mcfg, with_optimizer=True)
    proper = train.train_steps(proper_state, mcfg, tcfg, corpus.train, val, tcfg.steps)
    no_opt_state, _ = resume.restart(ckpt, mcfg, with_optimizer=False)
    no_opt = train.train_steps(no_opt_state, mcfg, tcfg, corpus.train, val, tcfg.steps)
    identical = [{k: x for k, x in r.items() if k != "val_full"} for r in _strip(proper)] == _strip(tail) and all(
        np.array_equal(proper_state["params"][n], state["params"][n]) for n in state["params"])
    return {"head": head, "tail": tail, "proper": proper, "no_opt": no_opt, "identical": identical,
            "bytes": len(ckpt), "sizes": sizes,
            "initial": monitoring.initial_loss_check(head[0]["loss"], mcfg.vocab_size)}


def early_resume_seed(corpus, seed):
    """The same two resumes at RESUME["early_step"], just after the warmup (the peak learning rate),
    for RESUME["window"] steps: the spike only, no final evaluation."""
    from pylib import checkpoint, model, train
    from pylib.studies import resume
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    tcfg = _steps(train.TrainConfig(seed=seed))
    R = scaled(RESUME, SMALL["resume"])
    state = train.init_train_state(mcfg, tcfg)
    train.train_steps(state, mcfg, tcfg, corpus.train, corpus.val, R["early_step"])
    ckpt = checkpoint.checkpoint_bytes(state, mcfg, tcfg)
    out = {"sizes": resume.first_update_sizes(ckpt, mcfg, corpus.train, corpus.val)}
    for name, with_opt in (("proper", True), ("no_opt", False)):
        st, _ = resume.restart(ckpt, mcfg, with_optimizer=with_opt)
        out[name] = train.train_steps(st, mcfg, tcfg, corpus.train, corpus.val, R["window"])
    return out


def part_resume(corpus):
    from pylib import train
    from pylib.studies import resume, target
    R = scaled(RESUME, SMALL["resume"])
    runs = {s: resume_seed(corpus, s) for s in progress(SEEDS, desc="resume", unit="seed")}
    k, w = R["at_step"], R["window"]
    steps = _steps(train.TrainConfig()).steps

    def reached(r, name):  # steps to the target of one arm: head and tail are one run of `steps` steps
        return target.steps_to_target(r["head"] + r[name], R["target"], steps=steps)

    values = {"ch15.resume.identical_runs": sum(r["identical"] for r in runs.values()),
              "ch15.resume.ckpt_bytes": runs[SEEDS[0]]["bytes"],
              "ch15.health.initial_ok_runs": sum(r["initial"]["ok"] for r in runs.values())}
    values.update(arm("ch15.health.initial_loss", {s: r["initial"]["loss"] for s, r in runs.items()}))
    values.update(arm("ch15.health.initial_gap", {s: r["initial"]["gap"] for s, r in runs.items()}))
    for name in ("proper", "no_opt"):
        values.update(arm(f"ch15.resume.{name}.excess_max",
                          {s: resume.paired_excess(r[name], r["proper"], w)["max"] for s, r in runs.items()}))
        values.update(arm(f"ch15.resume.{name}.excess_mean",
                          {s: resume.paired_excess(r[name], r["proper"], w)["mean"] for s, r in runs.items()}))
        values.update(arm(f"ch15.resume.{name}.final_val", {s: final_val(r[name]) for s, r in runs.items()}))
        values.update(arm(f"ch15.resume.{name}.first_update", {s: r["sizes"][name] for s, r in runs.items()}))
        values.update(arm(f"ch15.resume.{name}.steps_to_target", {s: reached(r, name) for s, r in runs.items()}))
        for seed, r in runs.items():  # per seed, as a word when the target was never reached
            values[f"ch15.resume.{name}.steps_to_target.seed{seed}"] = (
                "not reached" if reached(r, name) is None else reached(r, name))
        values[f"ch15.resume.{name}.reached_runs"] = sum(reached(r, name) is not None for r in runs.values())
    # Steps to the target with misses censored at the run's end: each seed's pair ordered when at
    # least one arm reached the target, and a sign test over the ordered pairs (pylib.studies.target).
    order = target.censored_sign_test(
        [tuple(reached(r, name) for name in ("no_opt", "proper")) for r in runs.values()], steps)
    values.update({"ch15.resume.target_order.no_opt_first": order["a"], "ch15.resume.target_order.proper_first": order["b"],
                   "ch15.resume.target_order.tie": order["tie"], "ch15.resume.target_order.neither": order["neither"],
                   "ch15.resume.target_order.p": order["p"],
                   "ch15.resume.target_order.min_p": target.censored_sign_test([(0, 1)] * len(runs), steps)["p"]})
    early = {s: early_resume_seed(corpus, s) for s in progress(SEEDS, desc="early resume", unit="seed")}
    for name in ("proper", "no_opt"):
        values.update(arm(f"ch15.resume.early.{name}.excess_max",
                          {s: resume.paired_excess(r[name], r["proper"], w)["max"] for s, r in early.items()}))
        values.update(arm(f"ch15.resume.early.{name}.first_update", {s: r["sizes"][name] for s, r in early.items()}))
    values.update(arm("ch15.resume.early.first_update_ratio",
                      {s: r["sizes"]["no_opt"] / r["sizes"]["proper"] for s, r in early.items()}))
    values.update(arm("ch15.resume.first_update_ratio",
                      {s: r["sizes"]["no_opt"] / r["sizes"]["proper"] for s, r in runs.items()}))
    peak = {s: max(range(w), key=lambda i: resume.paired_excess(r["no_opt"], r["proper"], w)["excess"][i])
            for s, r in runs.items()}
    values.update(arm("ch15.resume.no_opt.peak_after", peak))
    lo, hi = k - R["curve_before"], k + R["curve_after"]
    curves = {}
    for name in ("proper", "no_opt"):
        arr = np.array([[x["loss"] for x in (r["head"] + r[name])[lo:hi]] for r in runs.values()])  # (seeds, steps)
        curves[f"ch15.resume.{name}"] = {"steps": list(range(lo, hi)), "loss_mean": rounded(arr.mean(axis=0), 4),
                                         "loss_sd": rounded(arr.std(axis=0, ddof=1), 4)}
    settings = {"resume": {**R, "steps": scaled(400, SMALL["steps"]), "model": "decoder-5k", "seeds": list(SEEDS)}}
    return {"values": values, "curves": curves, "settings": settings}


# ---------------------------------------------------------------------------
# 2. The replay


def replay_seed(corpus, seed):
    from pylib import checkpoint, guards, train
    from pylib.studies import resume, stability
    BAD = stability.BAD
    mcfg, tcfg = stability.bad_configs(corpus.vocab.size, "none", seed)
    token = int(corpus.vocab.encode(BAD["token"])[0][0])
    first = BAD["inject_step"]
    bad_steps = set(range(first, first + BAD["repeats"]))
    ckpt_step = first - resume.REPLAY["before"]
    end = first + BAD["repeats"] + resume.REPLAY["after"]
    state = train.init_train_state(mcfg, tcfg)
    guards.hook_batches(state, stability.bad_batch_hook(bad_steps, token))
    train.train_steps(state, mcfg, tcfg, corpus.train, corpus.val, ckpt_step)
    ckpt = checkpoint.checkpoint_bytes(state, mcfg, tcfg)
    original = train.train_steps(state, mcfg, tcfg, corpus.train, corpus.val, end - ckpt_step)
    same = resume.replay(ckpt, mcfg, corpus.train, corpus.val, end - ckpt_step, bad_steps, token, True)
    other = resume.replay(ckpt, mcfg, corpus.train, corpus.val, end - ckpt_step, bad_steps, token, False)
    return {"original": original, "same": same, "other": other, "bad_steps": bad_steps,
            "identical": _strip(same) == _strip(original)}


def lr_spike_seed(corpus, seed):
    """The optimisation's spike: replayed on other batches from an early checkpoint, does it diverge again?"""
    from pylib import checkpoint, train
    from pylib.studies import resume, stability
    mcfg, tcfg = stability.bad_configs(corpus.vocab.size, "none", seed, lr=stability.BAD["lr_spike"])
    state = train.init_train_state(mcfg, tcfg)
    R = scaled(REPLAY, SMALL["replay"])
    train.train_steps(state, mcfg, tcfg, corpus.train, corpus.val, R["lr_ckpt_step"])
    ckpt = checkpoint.checkpoint_bytes(state, mcfg, tcfg)
    original = train.train_steps(state, mcfg, tcfg, corpus.train, corpus.val, R["lr_steps"])
    other = resume.replay(ckpt, mcfg, corpus.train, corpus.val, R["lr_steps"], set(), 0, False)
    at = lambda h: next((r["step"] for r in h if r.get("diverged")), None)  # noqa: E731
    return {"original": at(original), "other": at(other)}


def part_replay(corpus):
    from pylib.studies import resume, stability
    seeds = scaled(REPLAY_SEEDS, SMALL["replay_seeds"])
    runs = {s: replay_seed(corpus, s) for s in progress(seeds, desc="replay", unit="seed")}
    values = {"ch15.replay.identical_runs": sum(r["identical"] for r in runs.values())}
    for name in ("original", "same", "other"):
        values.update(arm(f"ch15.replay.{name}.spike", {s: resume.replay_spike(r[name], r["bad_steps"]) for s, r in runs.items()}))
    lr = {s: lr_spike_seed(corpus, s) for s in progress(seeds, desc="lr spike", unit="seed")}
    values["ch15.replay.lr.original_diverged_runs"] = sum(v["original"] is not None for v in lr.values())
    values["ch15.replay.lr.other_diverged_runs"] = sum(v["other"] is not None for v in lr.values())
    values.update(arm("ch15.replay.lr.original_diverged_at", {s: v["original"] for s, v in lr.items()}))
    values.update(arm("ch15.replay.lr.other_diverged_at", {s: v["other"] for s, v in lr.items()}))
    curves = {}
    for name in ("same", "other"):
        curves[f"ch15.replay.{name}"] = {"steps": [r["step"] for r in runs[SEEDS[0]][name]],
                                         **{f"loss_{s}": rounded([x["loss"] for x in r[name]], 4) for s, r in runs.items()}}
    settings = {"replay": {**scaled(REPLAY, SMALL["replay"]), **resume.REPLAY, "inject_step": stability.BAD["inject_step"],
                           "repeats": stability.BAD["repeats"], "lr_spike": stability.BAD["lr_spike"], "seeds": list(seeds)}}
    return {"values": values, "curves": curves, "settings": settings}


# ---------------------------------------------------------------------------
# 3. Goodput


def part_goodput(corpus):
    from pylib.systems import goodput
    values, curves = {}, {}
    for name, g in GOODPUT.items():
        d, M, R = g["delta"], g["M"], g["R"]
        young = goodput.young_interval(d, M)
        taus = [young * f for f in GRID]
        sweep = goodput.goodput_sweep(taus, d, M, R, g["work_in_M"] * M, seed=0)
        best = int(np.argmax(sweep["simulated"]))
        b = f"ch15.goodput.{name}"
        daly, opt = goodput.daly_interval(d, M), goodput.optimal_interval(d, M)
        values.update({f"{b}.young": young, f"{b}.daly": daly, f"{b}.optimum": opt,
                       f"{b}.sim_best_tau": sweep["tau"][best], f"{b}.sim_best_factor": GRID[best],
                       f"{b}.sim_at_young": sweep["simulated"][GRID.index(1.0)],
                       f"{b}.expected_at_young": goodput.expected_goodput(young, d, M, R),
                       f"{b}.expected_at_daly": goodput.expected_goodput(daly, d, M, R),
                       f"{b}.expected_at_optimum": goodput.expected_goodput(opt, d, M, R),
                       f"{b}.young_over_optimum": young / opt, f"{b}.daly_over_optimum": daly / opt,
                       f"{b}.failures": int(sum(sweep["failures"]))})
        if name == "daly":  # Young's and Daly's intervals simulated head to head
            for which, tau in (("young", young), ("daly", daly)):
                sim = goodput.simulate_job(tau, d, M, R, int(g["work_in_M"] * M / tau),
                                           np.random.default_rng([1, GRID.index(1.0)]))
                values[f"{b}.sim_{which}"] = sim["goodput"]
        curves[b] = {"tau": rounded(sweep["tau"], 4), "simulated": rounded(sweep["simulated"], 5),
                     "expected": rounded(sweep["expected"], 5)}
    return {"values": values, "curves": curves, "settings": {"goodput": {**GOODPUT, "grid": list(GRID)}}}


# ---------------------------------------------------------------------------
# 4. Health checks


def part_health(corpus):
    from pylib import model, train
    from pylib.studies import monitoring
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    H_ = scaled(HEALTH, SMALL["health"])
    seeds = scaled(SEEDS, SMALL["seeds"])
    tcfg = train.TrainConfig(steps=H_["overfit_steps"])
    values = {}
    over = {s: monitoring.overfit_one_batch(mcfg, dataclasses.replace(tcfg, seed=s), corpus.train,
                                            H_["overfit_steps"], seed=s) for s in progress(seeds, desc="overfit one batch", unit="seed")}
    values.update(arm("ch15.health.overfit_first", {s: h[0] for s, h in over.items()}))
    values.update(arm("ch15.health.overfit_last", {s: h[-1] for s, h in over.items()}))
    P, pi = monitoring.markov_source(mcfg.vocab_size, H_["markov_concentration"], H_["markov_seed"])
    H = monitoring.entropy_rate(P, pi)
    toks = monitoring.sample_markov(P, H_["markov_tokens"] + H_["markov_val"], H_["markov_seed"] + 1)
    tr, va = toks[:H_["markov_tokens"]], toks[H_["markov_tokens"]:]
    runs = {s: train.train(mcfg, _steps(train.TrainConfig(seed=s, final_eval=True)), tr, va)[1]
            for s in progress(seeds, desc="Markov chain", unit="seed")}
    values["ch15.health.markov_entropy"] = H
    values.update(arm("ch15.health.markov_final_val", {s: final_val(h) for s, h in runs.items()}))
    values.update(arm("ch15.health.markov_gap", {s: final_val(h) - H for s, h in runs.items()}))
    arr = np.array([[r["val"] for r in h if "val" in r] for h in runs.values()])
    curves = {"ch15.health.markov": {"steps": [r["step"] for r in runs[seeds[0]] if "val" in r],
                                     "val_mean": rounded(arr.mean(axis=0), 4), "entropy": round(H, 5)}}
    return {"values": values, "curves": curves, "settings": {"health": H_}}


# ---------------------------------------------------------------------------
# 5. PyTorch's own engine: torch.distributed.checkpoint


def pylib_reshard_run(mcfg, tcfg, tokens, k, n, save_world, load_world):
    """pylib's ZeRO-3 run of the same model on the same batches: saved after k steps on save_world workers,
    resharded onto load_world, n more steps. [max |w - w_straight|] after the first and the last
    continued step, and whether the resharded state is the saved one bit for bit."""
    from companions.ch15_dcp import batch_arrays  # numpy only: the same batches as the torch runs
    from pylib import model
    from pylib.systems import data_parallel as dp, reshard
    params = model.init_params(mcfg, tcfg.seed)
    hyper = dict(weight_decay=tcfg.weight_decay, beta1=tcfg.beta1, beta2=tcfg.beta2, eps=tcfg.eps)
    state = dp.zero_init(params, save_world, 3)
    for step in range(k):
        dp.zero_step(state, mcfg, *batch_arrays(tokens, mcfg, tcfg, step), tcfg.lr_at(step), **hyper)
    other = reshard.reshard([reshard.shard_bytes(state, r) for r in range(save_world)], params, load_world)
    flat = lambda st: dp.flatten(dp.zero_params(st))  # noqa: E731
    same = flat(other).tobytes() == flat(state).tobytes() and all(
        np.concatenate([w["opt"][m] for w in other["workers"]]).tobytes()
        == np.concatenate([w["opt"][m] for w in state["workers"]]).tobytes() for m in "mv")
    diffs = []
    for step in range(k, k + n):
        for st in (state, other):
            dp.zero_step(st, mcfg, *batch_arrays(tokens, mcfg, tcfg, step), tcfg.lr_at(step), **hyper)
        diffs.append(float(np.abs(flat(other).astype(np.float64) - flat(state)).max()))
    return [diffs[0], diffs[-1]], same


def _rows(offsets, sizes):
    """'17–33': the rows of a piece, from its offsets and sizes in the checkpoint's metadata."""
    return f"{offsets[0]}–{offsets[0] + sizes[0] - 1}"


def _chunk_rows(rows, world):
    """The rows of each rank's piece as torch.chunk cuts them: '0–32 and 33–64'."""
    size = -(-rows // world)
    pieces = [_rows((a,), (min(size, rows - a),)) for a in range(0, rows, size)]
    return ", ".join(pieces[:-1]) + " and " + pieces[-1] if len(pieces) > 1 else pieces[0]


@needs_torch("ch15.torch")
def part_torch(corpus):
    from pylib import model, train
    t0 = time.perf_counter()
    import torch
    from companions import ch15_dcp as dcp_run
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    tcfg = train.TrainConfig(seed=TORCH["seed"])
    T = scaled(TORCH, SMALL["torch"])
    k, n, W, W2 = T["k"], T["n"], T["save_world"], T["load_world"]
    with tempfile.TemporaryDirectory(prefix="ch15-dcp-") as tmp:
        path = os.path.join(tmp, "checkpoint")  # the metadata records this path: one length on every run
        out = dcp_run.dcp_vs_pylib(mcfg, tcfg, corpus.train, path, k, n, W, W2)
        files = dcp_run.files_on_disk(path)
        pieces = dcp_run.pieces(path)
    first, second, pylib_bytes = out["first"], out["second"], out["pylib_bytes"]
    t1 = time.perf_counter()
    pylib_state = dcp_run.from_pylib_checkpoint(pylib_bytes)  # pylib.checkpoint.load_checkpoint, bounded and checked
    pylib_load_seconds = time.perf_counter() - t1
    t1 = time.perf_counter()
    dcp_run.to_pylib_checkpoint(first["at_save"], mcfg, tcfg, k)
    pylib_save_seconds = time.perf_counter() - t1
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    diff = dcp_run.max_abs_diff
    resumed = [diff(a, b) for a, b in zip(second["resumed"], first["straight"])]
    worlds = [diff(a, b) for a, b in zip(second["straight"], first["straight"])]
    pylib_diffs, pylib_same = pylib_reshard_run(mcfg, tcfg, corpus.train, k, n, W, W2)
    N = sum(w.size for w in first["at_save"]["weights"].values())
    data_bytes = sum(b for name, b in files.items() if name.endswith(".distcp"))
    n_pieces = sum(len(chunks) for _, chunks in pieces["tensors"].values())
    size, chunks = pieces["tensors"]["model.transformer.wte.weight"]
    values = {
        "ch15.torch.status": f"measured on this CPU: gloo, {W} and {W2} processes on {os.cpu_count()} cores",
        "ch15.torch.torch_version": torch.__version__,
        "ch15.torch.resume_point_identical": yes(dcp_run.identical(second["loaded"], first["at_save"])),
        "ch15.torch.step_at_resume": second["loaded"]["step"][0],
        "ch15.torch.same_world_identical": yes(all(dcp_run.identical(a, b) for a, b in zip(first["same_world"], first["straight"]))),
        "ch15.torch.pylib_file_identical": yes(dcp_run.identical(pylib_state, first["at_save"])),
        "ch15.torch.via_pylib_identical": yes(all(dcp_run.identical(a, b) for a, b in zip(second["via_pylib"], second["resumed"]))),
        "ch15.torch.resumed_identical": yes(all(dcp_run.identical(a, b) for a, b in zip(second["resumed"], first["straight"]))),
        "ch15.torch.resumed.first_diff": resumed[0], "ch15.torch.resumed.last_diff": resumed[-1],
        "ch15.torch.worlds.first_diff": worlds[0], "ch15.torch.worlds.last_diff": worlds[-1],
        "ch15.torch.pylib_reshard.identical_at_resume": yes(pylib_same),
        "ch15.torch.pylib_reshard.first_diff": pylib_diffs[0], "ch15.torch.pylib_reshard.last_diff": pylib_diffs[-1],
        "ch15.torch.moved": diff(first["straight"][-1], first["at_save"]),
        "ch15.torch.largest_weight": max(float(np.abs(w).max()) for w in first["straight"][-1]["weights"].values()),
        "ch15.torch.params": N,
        "ch15.torch.state_bytes": 3 * 4 * N,  # float32 weights, m and v
        "ch15.torch.dcp_files": len(files), "ch15.torch.dcp_bytes": sum(files.values()),
        "ch15.torch.dcp_data_bytes": data_bytes, "ch15.torch.dcp_metadata_bytes": files[".metadata"],
        "ch15.torch.dcp_pieces": n_pieces, "ch15.torch.dcp_tensors": len(pieces["tensors"]),
        "ch15.torch.dcp_objects": len(pieces["objects"]),
        "ch15.torch.dcp_head_saved_twice": yes({"model.lm_head.weight", "model.transformer.wte.weight"} <= set(pieces["tensors"])),
        "ch15.torch.dcp_payload_bytes": pieces["payload"],
        "ch15.torch.dcp_bytes_per_piece": (pieces["stored"] - pieces["payload"]) / n_pieces,
        "ch15.torch.pylib_bytes": len(pylib_bytes),
        "ch15.torch.dcp_over_pylib": sum(files.values()) / len(pylib_bytes),
        "ch15.torch.wte_shape": " × ".join(map(str, size)),
        "ch15.torch.wte_pieces": ", ".join(_rows(o, s) for o, s in chunks),
    }
    curves = {}
    timings = {"ch15.torch.save_seconds": first["save_seconds"], "ch15.torch.load_seconds": second["load_seconds"],
               "ch15.torch.pylib_save_seconds": pylib_save_seconds, "ch15.torch.pylib_load_seconds": pylib_load_seconds,
               "ch15.torch.seconds": time.perf_counter() - t0}
    return {"values": values, "curves": curves, "settings": {"ch15.torch": {**T, "files": sorted(files)}},
            "timings": timings}


PARTS = ["part_resume", "part_replay", "part_goodput", "part_health", "part_torch"]


def run(corpus):
    return run_parts(globals(), PARTS, corpus)


# ---------------------------------------------------------------------------
# Build-time values and results.md


def derived(corpus):
    from pylib import checkpoint, train
    from pylib.studies import monitoring, resume, stability
    from pylib.systems import goodput
    from pylib.web import job_ops
    return {
        "ch15.at_step": RESUME["at_step"], "ch15.early_step": RESUME["early_step"], "ch15.steps": train.TrainConfig().steps,
        "ch15.eval_windows": train.TrainConfig().eval_windows, "ch15.window": RESUME["window"], "ch15.target": RESUME["target"],
        "ch15.replay_before": resume.REPLAY["before"], "ch15.replay_seeds": len(REPLAY_SEEDS), "ch15.replay_after": resume.REPLAY["after"],
        "ch15.inject_step": stability.BAD["inject_step"], "ch15.repeats": stability.BAD["repeats"],
        "ch15.ckpt_step": stability.BAD["inject_step"] - resume.REPLAY["before"],
        "ch15.lr_spike": stability.BAD["lr_spike"], "ch15.lr_ckpt_step": REPLAY["lr_ckpt_step"],
        "ch15.overfit_steps": HEALTH["overfit_steps"], "ch15.markov_tokens": HEALTH["markov_tokens"],
        "ch15.max_ckpt_mb": checkpoint.MAX_BYTES / 2**20, "ch15.margin": MARGIN,
        "ch15.goodput.small.delta": GOODPUT["small"]["delta"], "ch15.goodput.small.M": GOODPUT["small"]["M"],
        "ch15.goodput.small.R": GOODPUT["small"]["R"],
        "ch15.goodput.daly.delta": GOODPUT["daly"]["delta"], "ch15.goodput.daly.M": GOODPUT["daly"]["M"],
        "ch15.goodput.daly.R": GOODPUT["daly"]["R"],
        "ch15.widget_steps_max": job_ops.LIMITS["steps_max"],
        "ch15.torch_save_world": TORCH["save_world"], "ch15.torch_load_world": TORCH["load_world"],
        "ch15.torch_k": TORCH["k"], "ch15.torch_n": TORCH["n"], "ch15.torch_batch": train.TrainConfig().batch_size,
        # FSDP2 cuts dim 0 as torch.chunk does (pieces of ceil(rows / W) rows): the embedding's on the loading world
        "ch15.torch_wte_rows_after": _chunk_rows(corpus.vocab.size, TORCH["load_world"]),
        "ch15.goodput_failures": job_ops.LIMITS["goodput_failures"],
        **{f"ch15.metric.{k}": when for k, (_, when) in monitoring.METRICS.items()},  # each chart's moment
        # Daly 2006's captions (R = 10 min, delta = 5 min, M = 24 h, 6 h, 15 min): the exact optimum and his estimate
        **{f"ch15.daly_check.exact.{M}": goodput.optimal_interval(5.0, float(M)) for M in (1440, 360, 15)},
        **{f"ch15.daly_check.estimate.{M}": goodput.daly_interval(5.0, float(M)) for M in (1440, 360, 15)},
    }


def markdown(results):
    """results.md's section for chapter 15."""
    v = results["values"]

    def pm(k, f=".3f"):
        return f"{v[k + '.mean']:{f}} ± {v[k + '.sd']:{f}}" if v.get(k + ".mean") is not None else "–"

    def cmp(a, b, margin=0.0, fmt="+.3f"):
        if f"{a}.per_seed" not in v or f"{b}.per_seed" not in v:
            return "–"
        try:
            return paired_text(v, a, b, margin, fmt)
        except ValueError:
            return "no comparison: a seed has no value (never reached the target, or diverged)"

    g = lambda k, f=".4g": format(v[k], f) if k in v and v[k] is not None else "–"  # noqa: E731
    settings = results.get("settings", {})  # the sizes run (the notebook's reduced size is smaller)
    R = {**RESUME, "steps": 400, "seeds": list(SEEDS), **settings.get("resume", {})}
    seeds, replay_seeds = R["seeds"], settings.get("replay", {}).get("seeds", REPLAY_SEEDS)
    T = {**TORCH, **settings.get("ch15.torch", {})}
    overfit_steps = settings.get("health", {}).get("overfit_steps", HEALTH["overfit_steps"])
    lines = ["## Chapter 15: running a job", "",
             f"Resume: default model and settings, saved at step {R['at_step']} and continued to step {R['steps']}; "
             f"final loss on {scored_on(SMALL['val_tokens'])}; steps to a subset validation loss of {R['target']}. Mean ± sd over seeds "
             f"{', '.join(map(str, seeds))}. Proper resumes identical to the uninterrupted run, bit for bit: "
             f"{v.get('ch15.resume.identical_runs', '–')} of {len(seeds)}; checkpoint size {v.get('ch15.resume.ckpt_bytes', '–')} bytes.", "",
             f"| arm | largest batch-loss excess, first {R['window']} steps | mean excess | first update norm | final val (whole split) | steps to target |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name in ("proper", "no_opt"):
        b = f"ch15.resume.{name}"
        lines.append(f"| {name} | {pm(b + '.excess_max')} | {pm(b + '.excess_mean')} | {pm(b + '.first_update', '.4f')} | "
                     f"{pm(b + '.final_val')} | {pm(b + '.steps_to_target', '.1f')} |")
    lines += ["", f"- first update, no_opt / proper: {pm('ch15.resume.first_update_ratio', '.1f')}",
              f"- at step {R['early_step']}: first update no_opt / proper {pm('ch15.resume.early.first_update_ratio', '.1f')}; "
              f"excess max {pm('ch15.resume.early.no_opt.excess_max')}; no_opt − proper: "
              f"{cmp('ch15.resume.early.no_opt.excess_max', 'ch15.resume.early.proper.excess_max')}",
              f"- excess max, no_opt − proper: {cmp('ch15.resume.no_opt.excess_max', 'ch15.resume.proper.excess_max')}",
              f"- final val, no_opt − proper: {cmp('ch15.resume.no_opt.final_val', 'ch15.resume.proper.final_val', MARGIN)}",
              "- steps to target, misses censored at the run's end: no_opt first in "
              f"{v.get('ch15.resume.target_order.no_opt_first', '–')}, proper first in "
              f"{v.get('ch15.resume.target_order.proper_first', '–')}, same evaluation in "
              f"{v.get('ch15.resume.target_order.tie', '–')}, neither reached in "
              f"{v.get('ch15.resume.target_order.neither', '–')} of {len(seeds)} seeds; sign test p = "
              f"{g('ch15.resume.target_order.p', '.3g')} (the smallest possible with {len(seeds)} seeds: "
              f"{g('ch15.resume.target_order.min_p', '.3g')})",
              f"- initial loss − ln V: {pm('ch15.health.initial_gap', '.4f')} ({v.get('ch15.health.initial_ok_runs', '–')} of {len(seeds)} within 0.1)",
              "", "Replay (chapter 8's bad stretch, no clipping; checkpoint 10 steps before it). Same-batch "
              f"replays identical to the original: {v.get('ch15.replay.identical_runs', '–')} of {len(replay_seeds)}.", "",
              "| run | spike after the stretch (nats) |", "| --- | --- |"]
    for name in ("original", "same", "other"):
        lines.append(f"| {name} | {pm(f'ch15.replay.{name}.spike')} |")
    lines += ["", f"- spike, same − other: {cmp('ch15.replay.same.spike', 'ch15.replay.other.spike')}",
              f"- lr spike: original diverged in {v.get('ch15.replay.lr.original_diverged_runs', '–')} of {len(replay_seeds)}, "
              f"replayed on other batches in {v.get('ch15.replay.lr.other_diverged_runs', '–')} of {len(replay_seeds)}", ""]
    for name, s in GOODPUT.items():
        b = f"ch15.goodput.{name}"
        lines.append(f"Goodput, {name} (δ = {s['delta']}, M = {s['M']}, R = {s['R']} min): Young {g(b + '.young')}, Daly "
                     f"{g(b + '.daly')}, exact optimum {g(b + '.optimum')}; simulated best on the grid {g(b + '.sim_best_tau')} "
                     f"(factor {g(b + '.sim_best_factor')}); expected goodput at Young / Daly / optimum "
                     f"{g(b + '.expected_at_young')} / {g(b + '.expected_at_daly')} / {g(b + '.expected_at_optimum')}"
                     + (f"; simulated at Young {g(b + '.sim_young')}, at Daly {g(b + '.sim_daly')}" if name == "daly" else "") + ".")
        lines.append("")
    if "ch15.torch.status" in v:
        t = lambda k, f=".3g": format(v[k], f) if isinstance(v.get(k), (int, float)) else str(v.get(k, "–"))  # noqa: E731
        lines += [f"PyTorch's checkpoint (torch.distributed.checkpoint, FSDP2; {t('ch15.torch.status')}): saved after "
                  f"{T['k']} steps on {T['save_world']} processes, loaded on {T['load_world']}, {T['n']} more steps.", "",
                  f"- the whole state at the resume point, bit for bit: {t('ch15.torch.resume_point_identical')}; resumed on "
                  f"{T['save_world']}, the run that never stopped: {t('ch15.torch.same_world_identical')}; pylib's checkpoint of "
                  f"the same state holds the same numbers: {t('ch15.torch.pylib_file_identical')}, and resumes the same: "
                  f"{t('ch15.torch.via_pylib_identical')}",
                  f"- largest weight difference from the run that never stopped, after the first / last continued step: resumed "
                  f"on {T['load_world']} {t('ch15.torch.resumed.first_diff')} / {t('ch15.torch.resumed.last_diff')}; two runs "
                  f"that never stopped, {T['load_world']} and {T['save_world']} processes, "
                  f"{t('ch15.torch.worlds.first_diff')} / {t('ch15.torch.worlds.last_diff')}; pylib's ZeRO-3 reshard "
                  f"{t('ch15.torch.pylib_reshard.first_diff')} / {t('ch15.torch.pylib_reshard.last_diff')}; the weights moved "
                  f"up to {t('ch15.torch.moved')} in those steps",
                  f"- on disk: {t('ch15.torch.dcp_files')} files, {t('ch15.torch.dcp_bytes', 'd')} bytes (metadata "
                  f"{t('ch15.torch.dcp_metadata_bytes', 'd')}; {t('ch15.torch.dcp_tensors')} tensors in "
                  f"{t('ch15.torch.dcp_pieces')} pieces, {t('ch15.torch.dcp_payload_bytes', 'd')} bytes of numbers, "
                  f"{t('ch15.torch.dcp_bytes_per_piece', '.0f')} bytes of framing a piece), against pylib's "
                  f"{t('ch15.torch.pylib_bytes', 'd')} bytes in one file", ""]
    lines += [f"Health: one batch, {overfit_steps} steps: {pm('ch15.health.overfit_first')} → "
              f"{pm('ch15.health.overfit_last')}. Markov chain entropy rate {g('ch15.health.markov_entropy')}; final "
              f"held-out loss {pm('ch15.health.markov_final_val')} (gap {pm('ch15.health.markov_gap')}).", ""]
    return lines
