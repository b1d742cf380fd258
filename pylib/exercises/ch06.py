"""Chapter 6's exercises: schedules, warmup, the noise scale and the linear rule (pylib.exercises says how
checks work)."""

import dataclasses
import math

import numpy as np

from pylib import model, schedules, train
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_number, near
from pylib.studies import noise_scale

# ---------------------------------------------------------------------------
# 1. Implement: WSD with a 1 - sqrt cooldown (the chapter shows the linear one)

WSD_STARTER = '''import math

from pylib.schedules import warmup_lr, wsd_lr


def wsd_sqrt_lr(step, max_lr, warmup_steps, total_steps, min_lr, decay_frac=0.2):
    """Learning rate at a 0-based step: wsd_lr's warmup and stable phase, then a 1 - sqrt cooldown.

    Everything is as in pylib.schedules.wsd_lr (the same warmup, the same decay_start, min_lr from
    total_steps on) except the shape of the cooldown: where wsd_lr uses progress p (0 -> 1), this
    one uses sqrt(p), so the rate falls fastest at the start of the cooldown.
    """
    raise NotImplementedError
'''

WSD_SOLUTION = '''import math

from pylib.schedules import warmup_lr, wsd_lr


def wsd_sqrt_lr(step, max_lr, warmup_steps, total_steps, min_lr, decay_frac=0.2):
    if step < warmup_steps:
        return warmup_lr(step, max_lr, warmup_steps)
    if step >= total_steps:
        return min_lr
    decay_start = max(warmup_steps, total_steps - round(decay_frac * total_steps))
    if step < decay_start:
        return max_lr
    progress = (step - decay_start) / max(1, total_steps - decay_start)  # 0 -> 1
    return max_lr + math.sqrt(progress) * (min_lr - max_lr)  # 1 - sqrt: steep first, then flat
'''

# (max_lr, warmup_steps, total_steps, min_lr, decay_frac): the default run's shape, no warmup, a cooldown
# that takes every step after the warmup, a run too short for its cooldown, and a floor of zero
WSD_CASES = ((1e-2, 20, 400, 1e-3, 0.2), (3e-3, 0, 100, 3e-4, 0.25), (1.0, 5, 50, 0.1, 1.0),
             (2e-2, 3, 7, 2e-3, 0.5), (5e-3, 10, 60, 0.0, 0.3))


def _wsd_sqrt_reference(step, max_lr, warmup_steps, total_steps, min_lr, decay_frac):
    """wsd_lr with its linear progress p replaced by sqrt(p): p read back from pylib's linear cooldown."""
    linear = schedules.wsd_lr(step, max_lr, warmup_steps, total_steps, min_lr, decay_frac)
    if step < warmup_steps or step >= total_steps or max_lr == min_lr or linear == max_lr:
        return linear
    p = (max_lr - linear) / (max_lr - min_lr)
    return max_lr + math.sqrt(p) * (min_lr - max_lr)


def _phase(step, warmup_steps, total_steps, decay_frac):
    if step < warmup_steps:
        return "warmup"
    if step >= total_steps:
        return "after the last step"
    if step < max(warmup_steps, total_steps - round(decay_frac * total_steps)):
        return "stable"
    return "cooldown"


def check_wsd_sqrt(fn):
    for max_lr, warmup, total, min_lr, frac in WSD_CASES:
        steps = range(0, total + 3)
        want = [_wsd_sqrt_reference(s, max_lr, warmup, total, min_lr, frac) for s in steps]
        got = [expect_number(fn(s, max_lr, warmup, total, min_lr, frac), "The learning rate") for s in steps]
        bad = [s for s in steps if not close(got[s], want[s], 1e-9, 1e-15)]
        if not bad:
            continue
        where = f"(max_lr={max_lr:g}, warmup_steps={warmup}, total_steps={total}, min_lr={min_lr:g}, decay_frac={frac:g})"
        phases = {_phase(s, warmup, total, frac) for s in bad}
        cool = [s for s in steps if _phase(s, warmup, total, frac) == "cooldown"]
        linear = [schedules.wsd_lr(s, max_lr, warmup, total, min_lr, frac) for s in steps]
        if phases == {"cooldown"} or phases == {"cooldown", "after the last step"}:
            start = cool[0]
            ps = [(s - start) / max(1, total - start) for s in cool]
            if all(close(got[s], linear[s], 1e-9, 1e-15) for s in cool):
                raise Wrong(f"Your cooldown is linear, as wsd_lr's is {where}: the 1 − sqrt shape falls fastest "
                            "at the start of the cooldown and flattens towards its end.")
            if all(close(got[s], min_lr + (max_lr - min_lr) * math.sqrt(1 - p), 1e-9, 1e-15) for s, p in zip(cool, ps)):
                raise Wrong(f"Your cooldown falls slowly at first and steeply at the end {where}: that is sqrt of "
                            "the distance still to go, the mirror image of 1 − sqrt, which is steepest at the start.")
            if min_lr > 0 and all(close(got[s], max_lr * (1 - math.sqrt(p)), 1e-9, 1e-15) for s, p in zip(cool, ps)):
                raise Wrong(f"Your cooldown heads for 0 instead of min_lr {where}: it should end at the floor, as "
                            "wsd_lr's does.")
        if phases == {"after the last step"}:
            raise Wrong(f"Right up to the last step, but wrong after it {where}: from total_steps on the rate is "
                        "min_lr, as in wsd_lr (a run that goes on past its schedule must not get a negative or "
                        "growing rate).")
        s = bad[0]
        raise Wrong(f"In the {_phase(s, warmup, total, frac)} phase {where}, step {s}: your rate is {got[s]:.6g}, "
                    "which is not what wsd_lr's schedule with a 1 − sqrt cooldown gives there.")
    return ("Right: it matches wsd_lr's warmup and stable phase and the 1 − sqrt cooldown at every step of five "
            "schedules, including no warmup, a cooldown over the whole run after the warmup, a floor of zero, and "
            "the steps past the end.")


# ---------------------------------------------------------------------------
# 2. Investigate: the default run without its warmup, its first updates

NOWARM_STARTER = '''import dataclasses

from pylib import train


def drop_warmup(train_cfg):
    """Change one condition of the default run: no warmup. Return the changed TrainConfig.

    The check trains the first steps of the default run with train_cfg and with yours, from the same
    initial weights and batches, and compares the losses, the gradients and the updates.
    """
    return dataclasses.replace(train_cfg)  # change this line only
'''

NOWARM_SOLUTION = '''import dataclasses

from pylib import train


def drop_warmup(train_cfg):
    return dataclasses.replace(train_cfg, warmup_steps=0)
'''

NOWARM_STEPS = 5  # the first updates; warmup (20 steps by default) is still under way in the base run


def _run_first_steps(tc, steps=NOWARM_STEPS):
    """The default model trained `steps` steps with tc: (records, params after each step, step 0's grads)."""
    mc = model.GPTConfig()
    tokens = corpus()
    state = train.init_train_state(mc, tc)
    grads0 = train.accumulated_loss_and_grads(state["params"], mc, tc, tokens.train,
                                              np.random.default_rng([tc.seed, 1]))[1]
    snapshots = [{k: v.astype(np.float64) for k, v in state["params"].items()}]
    records = []
    for _ in range(steps):
        records += train.train_steps(state, mc, tc, tokens.train, tokens.val, 1)
        snapshots.append({k: v.astype(np.float64) for k, v in state["params"].items()})
    return records, snapshots, grads0


def check_drop_warmup(fn):
    base = train.TrainConfig(eval_interval=10_000)  # the default run (one evaluation, at step 0)
    new = fn(base)
    if not isinstance(new, train.TrainConfig):
        raise Wrong(f"drop_warmup should return a TrainConfig (dataclasses.replace of train_cfg); yours returned "
                    f"a {type(new).__name__}.")
    changed = sorted(f.name for f in dataclasses.fields(base) if getattr(new, f.name) != getattr(base, f.name))
    if not changed:
        raise Wrong("Your config is the unchanged one: you did not change the warmup, so there is nothing to compare.")
    if "warmup_steps" not in changed:
        raise Wrong(f"You changed {', '.join(changed)}, not the warmup: the condition to change is warmup_steps.")
    if changed != ["warmup_steps"]:
        others = ", ".join(c for c in changed if c != "warmup_steps")
        raise Wrong(f"You changed {others} as well as the warmup: change one condition, and nothing else, or the "
                    "comparison cannot say which change did what.")
    if new.warmup_steps != 0:
        raise Wrong(f"Your warmup is {new.warmup_steps} step{'s' if new.warmup_steps != 1 else ''}, still a warmup (step 0's rate is "
                    f"{new.lr_at(0) / new.lr:.3g} of the peak): drop it entirely.")
    rec0, snap0, g0 = _run_first_steps(base)
    rec1, snap1, g1 = _run_first_steps(new)
    if len(rec1) < NOWARM_STEPS or any(r.get("diverged") for r in rec1):
        raise Wrong("Your run diverged within its first steps: at the default peak rate, dropping the warmup alone "
                    "should not do that.")
    if not close(rec1[0]["lr"], base.lr, 1e-9):
        raise Wrong(f"Your run's first step used a rate of {rec1[0]['lr']:.3g}, not the peak {base.lr:g}.")
    # step 0: the same weights and the same batch, so the same loss and gradients
    if rec0[0]["loss"] != rec1[0]["loss"]:
        raise Wrong("The two runs' losses at step 0 differ: they should start from the same weights and batch.")
    gdiff = max(float(np.abs(g1[k] - g0[k]).max()) for k in g0)
    if gdiff != 0.0:
        raise Wrong("The two runs' step-0 gradients differ: they should start from the same weights and batch.")
    # the first update: AdamW's step is proportional to the rate, so it is larger by the ratio of the rates
    ratio = rec1[0]["lr"] / rec0[0]["lr"]
    d0 = np.concatenate([(snap0[1][k] - snap0[0][k]).ravel() for k in snap0[0]])
    d1 = np.concatenate([(snap1[1][k] - snap1[0][k]).ravel() for k in snap1[0]])
    off = float(np.abs(d1 - ratio * d0).max() / np.abs(d1).max())
    if off > 1e-3:  # float32 weights: the update is read back from rounded weights
        raise Wrong(f"The first update is not the base run's scaled by the ratio of the rates ({ratio:.3g}): "
                    f"it is off by {off:.2g} relative. Did something besides the rate change?")
    rms = lambda d: float(np.sqrt(np.mean(d ** 2)))  # noqa: E731
    moved0 = rms(np.concatenate([(snap0[-1][k] - snap0[0][k]).ravel() for k in snap0[0]]))
    moved1 = rms(np.concatenate([(snap1[-1][k] - snap1[0][k]).ravel() for k in snap1[0]]))
    losses0 = ", ".join(f"{r['loss']:.3f}" for r in rec0)
    losses1 = ", ".join(f"{r['loss']:.3f}" for r in rec1)
    return (f"Right. Step 0: the same loss ({rec0[0]['loss']:.4f} nats) and the very same gradients, but a rate "
            f"{ratio:.3g}× the warmed-up run's ({rec1[0]['lr']:.3g} against {rec0[0]['lr']:.3g}), and AdamW's first "
            f"update is exactly that much larger (to {off:.1g} relative): Adam's step is the rate times a "
            f"normalised gradient, so the rate alone sets its size. After {NOWARM_STEPS} steps the weights have "
            f"moved {moved1 / moved0:.3g}× as far (RMS {moved1:.2g} against {moved0:.2g}, with weights drawn at std "
            f"{model.GPTConfig().init_std:g}). Losses at steps 0–{NOWARM_STEPS - 1}: warmup {losses0}; none {losses1}.")


# ---------------------------------------------------------------------------
# 3. Implement: the noise scale from per-example gradients (the chapter shows two batch sizes)

NOISE_STARTER = '''import numpy as np


def noise_from_examples(per_example):
    """|G|^2, tr(Sigma) and B_simple from B per-example gradients (rows of per_example, (B, P), B >= 2).

    Returns (g2, tr_sigma, b_simple): unbiased estimates of |G|^2 and tr(Sigma), and B_simple =
    tr(Sigma) / |G|^2, or None when the estimate of |G|^2 is not positive.
    """
    raise NotImplementedError
'''

NOISE_SOLUTION = '''import numpy as np


def noise_from_examples(per_example):
    g = np.asarray(per_example, dtype=np.float64)
    B = g.shape[0]
    g2_one = float(np.mean(np.sum(g ** 2, axis=1)))  # |G_1|^2 averaged over B batches of one
    g2_all = float(np.sum(g.mean(axis=0) ** 2))  # |G_B|^2 of the whole batch
    tr_sigma = (g2_one - g2_all) / (1.0 - 1.0 / B)
    g2 = (B * g2_all - g2_one) / (B - 1)
    return g2, tr_sigma, (tr_sigma / g2 if g2 > 0 else None)
'''


def _reference_noise(g):
    B = g.shape[0]
    g2_one = float(np.mean(np.sum(g ** 2, axis=1)))
    g2_all = float(np.sum(g.mean(axis=0) ** 2))
    g2, tr = noise_scale.unbiased_estimates(g2_one, g2_all, 1, B)
    return g2, tr, noise_scale.simple_noise_scale(g2, tr)


def _model_per_example_grads(B=4):
    """Per-window gradients of the course model at init on B windows of random tokens, as (B, P) rows."""
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0, np.float64)
    rng = np.random.default_rng(6)
    x = rng.integers(0, cfg.vocab_size, (B, cfg.block_size))
    y = rng.integers(0, cfg.vocab_size, (B, cfg.block_size))
    rows = []
    for i in range(B):
        _, grads = model.loss_and_grads(params, cfg, x[i:i + 1], y[i:i + 1])
        rows.append(np.concatenate([grads[k].ravel() for k in sorted(grads)]))
    return np.stack(rows)


def _noise_cases():
    rng = np.random.default_rng(6)
    mean = rng.normal(0, 1, 40)
    ordinary = mean + rng.normal(0, 2, (8, 40))  # signal and noise of comparable size
    two = mean[:5] + rng.normal(0, 1, (2, 5))  # the smallest batch the estimator takes
    same = np.tile(mean[:6], (5, 1))  # every example agrees: no noise at all
    noise_only = rng.normal(0, 1, (3, 30))
    noise_only -= noise_only.mean(axis=0)  # no signal at all: the |G|^2 estimate comes out negative
    assert _reference_noise(noise_only)[0] < 0
    return (("random gradients (B = 8)", ordinary), ("two examples", two), ("identical examples", same),
            ("pure noise, zero mean", noise_only), ("the course model's per-window gradients", None))


def check_noise_from_examples(fn):
    for name, g in _noise_cases():
        if g is None:
            g = _model_per_example_grads()
        out = fn(g.copy())
        if not (isinstance(out, tuple) and len(out) == 3):
            raise Wrong("noise_from_examples should return a tuple (g2, tr_sigma, b_simple).")
        want_g2, want_tr, want_b = _reference_noise(g)
        g2 = expect_number(out[0], "g2")
        tr = expect_number(out[1], "tr_sigma")
        B = g.shape[0]
        g2_all = float(np.sum(g.mean(axis=0) ** 2))
        if not close(tr, want_tr, 1e-7, 1e-12):
            if close(tr, want_tr * (B - 1) / B, 1e-7, 1e-12):
                raise Wrong(f"On {name}, your tr(Σ) is too small by a factor (B − 1)/B: a variance around the "
                            "sample's own mean, divided by B, is biased low. Use the two batch sizes' equations.")
            raise Wrong(f"On {name}, your tr(Σ) is off by {abs(tr - want_tr):.3g} ({tr:.4g}).")
        if not close(g2, want_g2, 1e-7, 1e-12):
            if close(g2, g2_all, 1e-7, 1e-12):
                raise Wrong(f"On {name}, your |G|² is the squared norm of the batch's mean gradient: that still "
                            "contains the noise, tr(Σ)/B of it, so it overestimates the signal.")
            raise Wrong(f"On {name}, your |G|² is off by {abs(g2 - want_g2):.3g} ({g2:.4g}).")
        if want_b is None:
            if out[2] is not None:
                raise Wrong(f"On {name} the |G|² estimate is not positive ({want_g2:.3g}), so there is no noise scale: "
                            "return None for b_simple, not a number.")
            continue
        b = expect_number(out[2], "b_simple")
        if not close(b, want_b, 1e-7, 1e-12):
            if want_b and close(b, 1 / want_b, 1e-7, 1e-12):
                raise Wrong(f"On {name}, your b_simple is |G|²/tr(Σ): the noise scale is the noise over the signal.")
            raise Wrong(f"On {name}, your b_simple is off ({b:.4g}).")
    return ("Right: it matches pylib.studies.noise_scale.unbiased_estimates with batches of 1 and of B on random "
            "gradients, on two examples, with no noise, with no signal (no noise scale), and on the course "
            "model's per-window gradients.")


# ---------------------------------------------------------------------------
# 4. Predict: by how much the linear rule over-shoots

OVER_B, OVER_K, OVER_NOISE = 8, 4, 40


def linear_rule_overshoot():
    """k over the best rate's growth factor when the batch grows k-fold (pylib's optimal_lr_factor)."""
    return OVER_K / noise_scale.optimal_lr_factor(OVER_B, OVER_K, OVER_NOISE)


def check_linear_rule_overshoot(value, truth):
    factor = noise_scale.optimal_lr_factor(OVER_B, OVER_K, OVER_NOISE)
    if near(value, factor):
        raise Wrong("That is how much the best rate grows; the over-shoot is how much more than that the rule "
                    "multiplies it by.")
    if near(value, OVER_K):
        raise Wrong("That is the rule's own factor, k; the over-shoot compares it with the best rate's growth.")
    if near(value, 1 / truth):
        raise Wrong("Upside down: the rule asks for more than the best rate, so the over-shoot is above 1.")
    if near(value, 1 + OVER_NOISE / OVER_B):
        raise Wrong("That is the most the best rate can ever grow (k very large); here k is 4.")
    if value < 1:
        raise Wrong("The rule multiplies the rate by k, more than the best rate grows, so the over-shoot is above 1.")


EXERCISES = [
    Exercise(
        id="ch6.wsd_sqrt", kind="implement", title="A 1 − sqrt cooldown",
        task="""The chapter's WSD decays linearly. Hägele et al. (2024), cited above, propose a cooldown
shaped $1 - \\sqrt{p}$ instead. Here, with $p$ going from 0 to 1 over the decay as in `wsd_lr`, and
towards `min_lr` as `wsd_lr` goes, the rate is
$\\text{max\\_lr} + \\sqrt{p}\\,(\\text{min\\_lr} - \\text{max\\_lr})$, falling fastest at the start.
Write `wsd_sqrt_lr`: everything as `wsd_lr` does it (the warmup, where the decay starts, `min_lr`
from `total_steps` on), only the cooldown's shape changed. It must work with no warmup, at the last
step, and after it.""",
        starter=WSD_STARTER, function="wsd_sqrt_lr", solution=WSD_SOLUTION, check=check_wsd_sqrt,
        hints=("Start from `wsd_lr` above: only its last line changes.",
               "`progress` runs from 0 at `decay_start` towards 1 at `total_steps`; the linear cooldown moves "
               "the fraction `progress` of the way from max_lr to min_lr, the 1 − sqrt one moves `sqrt(progress)` "
               "of the way."),
        mistakes=(
            Mistake(WSD_SOLUTION.replace("math.sqrt(progress) * ", "progress * "), "cooldown is linear"),
            Mistake(WSD_SOLUTION.replace("return max_lr + math.sqrt(progress) * (min_lr - max_lr)",
                                         "return min_lr + math.sqrt(1 - progress) * (max_lr - min_lr)"),
                    "falls slowly at first"),
            Mistake(WSD_SOLUTION.replace("return max_lr + math.sqrt(progress) * (min_lr - max_lr)",
                                         "return max_lr * (1 - math.sqrt(progress))"), "heads for 0"),
            Mistake(WSD_SOLUTION.replace("    if step >= total_steps:\n        return min_lr\n", ""), "wrong after it"),
        )),
    Exercise(
        id="ch6.no_warmup", kind="investigate", title="One condition changed: no warmup",
        task=f"""Change one condition of the default run: drop the warmup. The check trains the first
{NOWARM_STEPS} steps with and without it, from the same weights and batches, and compares the loss and
the gradients at step 0, the first update, and how far the weights have moved.""",
        starter=NOWARM_STARTER, function="drop_warmup", solution=NOWARM_SOLUTION, check=check_drop_warmup,
        needs_corpus=True,
        hints=("`dataclasses.replace(train_cfg, name=value)` returns a copy with one field changed.",
               "The field is `warmup_steps`; no warmup is 0 steps."),
        mistakes=(
            Mistake(NOWARM_STARTER, "did not change the warmup"),
            Mistake(NOWARM_SOLUTION.replace("warmup_steps=0", "warmup_steps=1"), "still a warmup"),
            Mistake(NOWARM_SOLUTION.replace("warmup_steps=0", "warmup_steps=0, steps=20"), "as well as the warmup"),
            Mistake(NOWARM_SOLUTION.replace("warmup_steps=0", "schedule='constant'"), "not the warmup"),
        )),
    Exercise(
        id="ch6.noise_estimates", kind="implement", title="The noise scale from one batch",
        task="""The chapter estimates $|G|^2$ and $\\operatorname{tr}(\\Sigma)$ from squared gradient norms at
two batch sizes. With the $B$ per-example gradients of one batch you have two batch sizes already:
each example alone is a batch of 1, and their mean is a batch of $B$. Write `noise_from_examples`,
returning unbiased estimates of both and $B_{\\text{simple}}$ (or `None` when the estimate of
$|G|^2$ is not positive).""",
        starter=NOISE_STARTER, function="noise_from_examples", solution=NOISE_SOLUTION,
        check=check_noise_from_examples,
        hints=("For batches of one, average $|g_i|^2$ over the $B$ examples; for the batch of $B$, take "
               "$|\\bar g|^2$ once.",
               "Put those two into the chapter's `unbiased_estimates` with `b_small = 1`, `b_big = B`, or solve "
               "$\\mathbb{E}|G_b|^2 = |G|^2 + \\operatorname{tr}(\\Sigma)/b$ at $b = 1$ and $b = B$ yourself."),
        mistakes=(
            Mistake(NOISE_SOLUTION.replace("tr_sigma = (g2_one - g2_all) / (1.0 - 1.0 / B)",
                                           "tr_sigma = float(np.sum(g.var(axis=0)))"), "(B − 1)/B"),
            Mistake(NOISE_SOLUTION.replace("g2 = (B * g2_all - g2_one) / (B - 1)", "g2 = g2_all"),
                    "still contains the noise"),
            Mistake(NOISE_SOLUTION.replace("(tr_sigma / g2 if g2 > 0 else None)", "tr_sigma / g2"),
                    "return None for b_simple"),
            Mistake(NOISE_SOLUTION.replace("(tr_sigma / g2 if g2 > 0 else None)", "(g2 / tr_sigma if g2 > 0 else None)"),
                    "noise over the signal"),
        )),
    Exercise(
        id="ch6.linear_rule_overshoot", kind="predict", title="How far the linear rule over-shoots",
        task=f"""Take McCandlish et al.'s best rate $\\epsilon_{{\\text{{opt}}}}(B) = \\epsilon_{{\\max}} / (1 +
B_{{\\text{{noise}}}}/B)$ with $B_{{\\text{{noise}}}} = {OVER_NOISE}$ windows. A run at batch $B = {OVER_B}$
grows its batch $k = {OVER_K}$-fold and, by the linear rule, its rate {OVER_K}-fold. By what factor
does that rate exceed the best rate at the new batch? (1 would mean the rule is exact.)""",
        truth=linear_rule_overshoot, check=check_linear_rule_overshoot, tolerance=0.02,
        solution=f"""The best rate grows by $(1 + B_{{\\text{{noise}}}}/B) / (1 + B_{{\\text{{noise}}}}/kB) =
(1 + 5)/(1 + 1.25) \\approx 2.67$, not {OVER_K}. The rule multiplies by {OVER_K}, so it over-shoots by
${OVER_K} / 2.67 = 1.5$. Equivalently, $(k + B_{{\\text{{noise}}}}/B)/(1 + B_{{\\text{{noise}}}}/B) =
(4 + 5)/6$. At a base batch far below the noise scale the over-shoot would be near 1; the closer the
batch comes to $B_{{\\text{{noise}}}}$, the more the rule over-shoots.""",
        hints=("Compute the best rate's growth factor first: `optimal_lr_factor` in the chapter does it.",
               "The over-shoot is the rule's factor divided by that growth factor."),
        mistakes=(Mistake("2.667", "how much the best rate grows"), Mistake("4", "rule's own factor"),
                  Mistake("0.6667", "Upside down"), Mistake("6", "most the best rate can ever grow")),
    ),
]
