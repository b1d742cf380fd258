"""Chapter 5's exercises: optimiser steps by hand, checked against pylib.optim (pylib.exercises says how
checks work)."""

import math

import numpy as np

from pylib import data, model, optim, train
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_array, max_error, near, progress
from pylib.studies import quadratic

# ---------------------------------------------------------------------------
# 1. Predict: Adam + L2's first step on a weight whose gradient the decay outweighs

L2_WEIGHT, L2_GRAD, L2_LR, L2_WD = 2.0, -0.05, 0.01, 0.1


def _first_change(step, **kwargs):
    """new - old of one weight (a 1x1 matrix, so in the decay group) after one step of `step`."""
    params = {"w": np.full((1, 1), L2_WEIGHT)}
    grads = {"w": np.full((1, 1), L2_GRAD)}
    state = optim.sgd_init(params) if step is optim.sgd_step else optim.adamw_init(params)
    step(params, grads, state, L2_LR, weight_decay=L2_WD, **kwargs)
    return float(params["w"][0, 0] - L2_WEIGHT)


def l2_first_step():
    return _first_change(optim.adam_l2_step)


def check_l2_first_step(value, truth):
    if near(value, _first_change(optim.adamw_step), 0.03):
        raise Wrong("That is AdamW's change: decay the weight, then the Adam step on the loss's gradient alone. "
                    "With L2 the decay term is added to the gradient before the moments see it.")
    if near(value, -truth, 0.03):
        raise Wrong("Right size, wrong direction: follow the sign of the gradient Adam actually sees.")
    g = L2_GRAD + L2_WD * L2_WEIGHT  # the gradient with the L2 term
    if near(value, -L2_LR * 0.1 * g / math.sqrt(0.001 * g * g), 0.03):
        raise Wrong("That is the step without bias correction, (1 − β1)/√(1 − β2) times the rate: the course's "
                    "Adam divides m and v by 1 − βᵗ.")
    if near(value, _first_change(optim.sgd_step), 0.03):
        raise Wrong("That is plain gradient descent with L2, the rate times the gradient; Adam divides its step by "
                    "the gradient's running size.")


# ---------------------------------------------------------------------------
# 2. Implement: AdamW as the paper writes it (the decay scaled by the schedule multiplier alone)

PAPER_STARTER = '''import numpy as np


def adamw_paper_step(p, g, m, v, t, alpha, eta, weight_decay, beta1=0.9, beta2=0.999, eps=1e-8):
    """One step of AdamW in Loshchilov & Hutter's form (Algorithm 2), on one array of weights.

    p, g, m, v: arrays of the same shape: the weights, their gradient, Adam's two moments
    (zeros before the first step). t: the step number, 1 for the first step.
    alpha: Adam's step size. eta: the schedule multiplier of this step.
    weight_decay: lambda, the paper's decay factor.
    Returns the new (p, m, v).
    """
    raise NotImplementedError
'''

PAPER_SOLUTION = '''import numpy as np


def adamw_paper_step(p, g, m, v, t, alpha, eta, weight_decay, beta1=0.9, beta2=0.999, eps=1e-8):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat = m / (1 - beta1 ** t)
    v_hat = v / (1 - beta2 ** t)
    p = p - eta * (alpha * m_hat / (np.sqrt(v_hat) + eps) + weight_decay * p)
    return p, m, v
'''


def _paper_reference(p, grads, alphas_etas, weight_decay, beta1=0.9, beta2=0.999, eps=1e-8):
    """pylib's AdamW (PyTorch's form) run as the paper's: lr = alpha * eta, its decay lambda / alpha.

    PyTorch's form multiplies the weight by 1 - lr * wd; the paper's by 1 - eta * lambda; the two agree
    when wd = lambda / alpha. Returns the weights after each step."""
    params = {"w": p.copy()}
    state = optim.adamw_init(params)
    out = []
    for g, (alpha, eta) in zip(grads, alphas_etas):
        optim.adamw_step(params, {"w": g}, state, alpha * eta, beta1, beta2, eps, weight_decay / alpha)
        out.append(params["w"].copy())
    return out


def _run_paper(fn, p, grads, alphas_etas, weight_decay):
    m, v = np.zeros_like(p), np.zeros_like(p)
    out = []
    for t, (g, (alpha, eta)) in enumerate(zip(grads, alphas_etas), start=1):
        res = fn(p.copy(), g.copy(), m.copy(), v.copy(), t, alpha, eta, weight_decay, 0.9, 0.999, 1e-8)
        if not (isinstance(res, tuple) and len(res) == 3):
            raise Wrong("adamw_paper_step should return the new (p, m, v), a tuple of three arrays.")
        p, m, v = (expect_array(np.asarray(a, dtype=float) if np.isscalar(a) else a, p.shape, name)
                   for a, name in zip(res, ("the new p", "the new m", "the new v")))
        out.append(p.copy())
    return out


def _paper_variant(p, grads, sched, lam, kind, beta1=0.9, beta2=0.999, eps=1e-8):
    """Typical wrong forms, for diagnosis: "eps inside" the square root, "torch" decay (alpha * eta * lambda),
    "l2" (the decay in the gradient)."""
    m, v, out = np.zeros_like(p), np.zeros_like(p), []
    for t, (g, (alpha, eta)) in enumerate(zip(grads, sched), start=1):
        if kind == "l2":
            g = g + lam * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        mh, vh = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
        adam = mh / (np.sqrt(vh + eps) if kind == "eps inside" else np.sqrt(vh) + eps)
        decay = {"torch": alpha * lam * p, "l2": 0.0}.get(kind, lam * p)
        p = p - eta * (alpha * adam + decay)
        out.append(p)
    return out


VARIANT_MESSAGES = {
    "eps inside": "Right where the gradient is large, off where it is near or below ε: ε is added to √v̂, outside "
                  "the square root.",
    "torch": "Your decay is multiplied by alpha as well as eta: that is PyTorch's form (p *= 1 − lr·λ, lr = αη). In "
             "the paper's Algorithm 2 the decay is scaled by the schedule multiplier alone.",
    "l2": "Your decay went into the gradient (L2), so m and v carry it and Adam normalises it. AdamW keeps it out of "
          "the moments.",
}


def _diagnose_paper(got, p0, grads, sched, lam):
    for kind, message in VARIANT_MESSAGES.items():
        if all(close(a, b, 1e-9, 1e-12) for a, b in zip(got, _paper_variant(p0, grads, sched, lam, kind))):
            raise Wrong(message)


def check_adamw_paper(fn):
    rng = np.random.default_rng(7)
    p0 = rng.normal(0, 1, (4, 6))
    # The first step alone, without decay, on gradients far above eps: Adam's bias-corrected step, times eta
    g1 = rng.normal(0, 1, (4, 6))
    g1 += np.where(g1 < 0, -0.5, 0.5)  # |g| >= 0.5, so eps is negligible
    sched = [(1e-2, 0.5)]
    got = _run_paper(fn, p0, [g1], sched, 0.0)
    want = _paper_reference(p0, [g1], sched, 0.0)
    if not close(got[0], want[0], 1e-9, 1e-12):
        _diagnose_paper(got, p0, [g1], sched, 0.0)
        ratio = float(np.median((got[0] - p0) / (want[0] - p0)))
        if near(ratio, 1 / math.sqrt(0.001), 0.01):
            raise Wrong(f"Bias correction is missing on v: your first step is {ratio:.3g}× too large.")
        if near(ratio, 0.1 / math.sqrt(0.001), 0.01):
            raise Wrong(f"Bias correction is missing: your first step is {ratio:.3g}× too large. m and v start at "
                        "zero, so their first values are too small.")
        if near(ratio, 0.1, 0.01):
            raise Wrong(f"Bias correction is missing on m: your first step is {1 / ratio:.3g}× too small.")
        if near(ratio, 1 / sched[0][1], 0.01):
            raise Wrong("Your step ignores eta, the schedule multiplier: in the paper's form it scales the whole "
                        "update.")
        if near(ratio, -1, 0.01):
            raise Wrong("Your step goes up the gradient: it should go against it.")
        raise Wrong(f"With no decay, your first step should be Adam's bias-corrected step times eta; yours is "
                    f"{ratio:.3g} times it (median over the weights).")
    # The decay alone: a zero gradient, so the Adam part is 0 and only the decay moves the weights
    zero, lam, sched = np.zeros_like(p0), 0.05, [(1e-2, 0.8)]
    got = _run_paper(fn, p0, [zero], sched, lam)
    want = _paper_reference(p0, [zero], sched, lam)
    if not close(got[0], want[0], 1e-9, 1e-12):
        _diagnose_paper(got, p0, [zero], sched, lam)
        if close(got[0], p0, 1e-12, 1e-15):
            raise Wrong("With a zero gradient and λ > 0 your weights do not move: the decay is missing.")
        raise Wrong(f"With a zero gradient only the decay moves the weights, and your step is off by up to "
                    f"{max_error(got[0], want[0]):.3g}.")
    # Several steps: a schedule, gradients of different sizes, some far below eps
    progress("Ten steps with a schedule…")
    grads = [rng.normal(0, 1, (4, 6)) * rng.choice([1e-10, 1e-8, 1e-3, 1.0, 30.0], (4, 6)) for _ in range(10)]
    sched = [(3e-2, e) for e in (0.1, 0.4, 0.7, 1.0, 1.0, 0.9, 0.7, 0.5, 0.3, 0.1)]
    got = _run_paper(fn, p0, grads, sched, lam)
    want = _paper_reference(p0, grads, sched, lam)
    for t, (a, b) in enumerate(zip(got, want), start=1):
        if not close(a, b, 1e-9, 1e-12):
            _diagnose_paper(got, p0, grads, sched, lam)
            raise Wrong(f"Your first step is right, but step {t} is off by up to {max_error(a, b):.3g}: do m and v "
                        "carry over from step to step, and does the correction use this step's t?")
    return ("Right: it matches pylib's AdamW run with lr = αη and decay λ/α (the two forms agree then) on a first "
            "step, on the decay alone, and over ten scheduled steps with gradients from 1e-10 to 30.")


# ---------------------------------------------------------------------------
# 3. Implement: the heavy ball on a function given by its gradient

BALL_STARTER = '''import numpy as np


def heavy_ball(grad, start, lr, momentum, steps):
    """Heavy-ball momentum, in the chapter's form, from start.

    grad: a function, grad(theta) -> the gradient at the point theta (a 1-D array).
    start: the first point, a 1-D array. lr: the learning rate. momentum: beta.
    steps: how many updates to take.
    Returns an array (steps + 1, len(start)): start, then the point after each update.
    """
    raise NotImplementedError
'''

BALL_SOLUTION = '''import numpy as np


def heavy_ball(grad, start, lr, momentum, steps):
    theta = np.array(start, dtype=float)
    b = np.zeros_like(theta)  # the velocity: a running sum of past gradients
    points = [theta.copy()]
    for _ in range(steps):
        b = momentum * b + grad(theta)
        theta = theta - lr * b
        points.append(theta.copy())
    return np.array(points)
'''


def _ball_variant(kind, grad, start, lr, beta, steps):
    theta, b = np.array(start, dtype=float), np.zeros(len(start))
    g0 = grad(theta)
    points = [theta.copy()]
    for _ in range(steps):
        g = g0 if kind == "once" else grad(theta)
        if kind == "lag":  # move first, then add the gradient at the new point
            theta = theta - lr * b
            b = beta * b + grad(theta)
        else:
            b = beta * b + ((1 - beta) * g if kind == "ema" else g)
            theta = theta - lr * b
        points.append(theta.copy())
    return np.array(points)


def _pylib_ball(grad, start, lr, beta, steps):
    """The same run by pylib.optim.sgd_step (what the valley widget and the model use)."""
    params = {"xy": np.array(start, dtype=float)}
    state = optim.sgd_init(params)
    points = [params["xy"].copy()]
    for _ in range(steps):
        optim.sgd_step(params, {"xy": grad(params["xy"].copy())}, state, lr, momentum=beta)
        points.append(params["xy"].copy())
    return np.array(points)


def check_heavy_ball(fn):
    kappa = quadratic.DEFAULTS["kappa"]
    valley = lambda xy: quadratic.gradient(np.asarray(xy, dtype=float), kappa)  # noqa: E731
    cases = [  # (what, grad, start, lr, beta, steps)
        ("the valley at the widget's defaults", valley, quadratic.START, quadratic.DEFAULTS["lr"],
         quadratic.DEFAULTS["momentum"], 60),
        ("the valley with momentum 0 (gradient descent)", valley, quadratic.START, 1.5, 0.0, 20),
        ("the valley at a rate where gradient descent diverges", valley, quadratic.START, 3.0, 0.9, 60),
        ("a constant gradient", lambda xy: np.array([1.0, -2.0, 0.5]), (0.0, 0.0, 0.0), 0.1, 0.9, 40),
        ("zero steps", valley, quadratic.START, 1.0, 0.9, 0),
    ]
    for what, grad, start, lr, beta, steps in cases:
        want = _pylib_ball(grad, start, lr, beta, steps)
        got = fn(grad, np.array(start, dtype=float), lr, beta, steps)
        got = expect_array(np.asarray(got, dtype=float) if isinstance(got, list) else got, want.shape,
                           f"heavy_ball's points on {what}")
        if close(got, want, 1e-9, 1e-12):
            continue
        if close(got, _ball_variant("ema", grad, start, lr, beta, steps), 1e-9, 1e-12):
            raise Wrong(f"On {what}: your velocity is an average, β·b + (1 − β)·g. The chapter's heavy ball (PyTorch's "
                        "form) sums, β·b + g, so with a steady gradient your steps are 1 − β times too small.")
        if close(got, _ball_variant("lag", grad, start, lr, beta, steps), 1e-9, 1e-12):
            raise Wrong(f"On {what} your update uses the velocity from before this step's gradient was added: your "
                        "first update does not move at all, and every point after it is one step late.")
        if close(got, _ball_variant("once", grad, start, lr, beta, steps), 1e-9, 1e-12):
            raise Wrong(f"On {what} you use the gradient at the start for every step: take it at the current point.")
        if close(got[1:], want[:-1], 1e-9, 1e-12) or close(got[:-1], want[1:], 1e-9, 1e-12):
            raise Wrong(f"On {what} your points are shifted by one: the first row is start itself, then one row per "
                        "update.")
        raise Wrong(f"On {what} (lr = {lr}, momentum = {beta}, {steps} steps) your points are off by up to "
                    f"{max_error(got, want):.3g}.")
    return ("Right: your points match pylib.optim.sgd_step with momentum on the valley (at the widget's defaults, "
            "without momentum, and at a rate where gradient descent diverges), on a constant gradient, and for "
            "zero steps.")


# ---------------------------------------------------------------------------
# 4. Investigate: exempt the embeddings from weight decay and compare the update and a short run

EXEMPT_STARTER = '''from pylib import optim


def decay_groups(params):
    """Which tensors AdamW decays: {"decay": [names], "no_decay": [names]}, each name in exactly one.

    The course's groups are nanoGPT's, optim.param_groups: every tensor of 2 or more dimensions,
    the embeddings wte and wpe included. Change one condition: exempt the embeddings, as minGPT does.
    """
    groups = optim.param_groups(params)
    return groups  # change this
'''

EXEMPT_SOLUTION = '''from pylib import optim


def decay_groups(params):
    groups = optim.param_groups(params)
    embeddings = ["wte", "wpe"]
    return {"decay": [n for n in groups["decay"] if n not in embeddings],
            "no_decay": groups["no_decay"] + embeddings}
'''

EXEMPT_STEPS, EXEMPT_B = 30, 8


def _checked_groups(groups, params):
    if not (isinstance(groups, dict) and set(groups) == {"decay", "no_decay"}):
        raise Wrong('decay_groups should return a dict with two lists of names, {"decay": [...], "no_decay": [...]}.')
    decay, no_decay = list(groups["decay"]), list(groups["no_decay"])
    names = decay + no_decay
    unknown = sorted(set(names) - set(params))
    if unknown:
        raise Wrong(f"Your groups name tensors the model does not have: {', '.join(map(str, unknown))}.")
    missing = [n for n in params if n not in names]
    twice = sorted({n for n in names if names.count(n) > 1})
    if missing or twice:
        raise Wrong("Every parameter must be in exactly one group: "
                    + (f"missing {', '.join(missing)}" if missing else f"twice: {', '.join(twice)}") + ".")
    default = optim.param_groups(params)
    if set(decay) == set(default["decay"]):
        raise Wrong("Your groups are the course's own: nothing changed. Move the embeddings, wte and wpe, "
                    "to the no-decay group.")
    should = set(default["decay"]) - {"wte", "wpe"}
    if set(decay) - should:
        raise Wrong(f"You still decay {', '.join(sorted(set(decay) - should))}: both embeddings, the token's and the "
                    "position's, should be exempt." if set(decay) & {"wte", "wpe"} else
                    "You now decay tensors the course does not (biases or LayerNorm parameters).")
    if should - set(decay):
        raise Wrong(f"You also exempted {', '.join(sorted(should - set(decay)))}: change one condition, the "
                    "embeddings, and keep decaying the attention and MLP matrices.")
    return {"decay": decay, "no_decay": no_decay}


def _run(params, cfg, tc, groups, batches):
    """AdamW with these groups for len(batches) steps, at the default run's rate, schedule, decay and betas."""
    state = optim.adamw_init(params)
    losses = []
    for step, (x, y) in enumerate(batches):
        loss, grads = model.loss_and_grads(params, cfg, x, y)
        losses.append(loss)
        optim.adamw_step(params, grads, state, tc.lr_at(step), tc.beta1, tc.beta2, tc.eps, tc.weight_decay, groups)
    return losses


def check_exempt(fn):
    cfg, tc = model.GPTConfig(), train.TrainConfig()
    params0 = model.init_params(cfg, tc.seed, np.float64)
    groups = _checked_groups(fn({k: v.copy() for k, v in params0.items()}), params0)
    rng = np.random.default_rng([tc.seed, 1])
    batches = [data.get_batch(corpus().train, EXEMPT_B, cfg.block_size, rng) for _ in range(EXEMPT_STEPS)]
    # One step: the loss and the gradients cannot see the groups; the update differs on the embeddings only
    x, y = batches[0]
    loss0, grads0 = model.loss_and_grads(params0, cfg, x, y)
    after = []
    for gr in (optim.param_groups(params0), groups):
        p = {k: v.copy() for k, v in params0.items()}
        optim.adamw_step(p, {k: v.copy() for k, v in grads0.items()}, optim.adamw_init(p), tc.lr_at(0), tc.beta1,
                         tc.beta2, tc.eps, tc.weight_decay, gr)
        after.append(p)
    lr0 = tc.lr_at(0)
    for k in params0:
        diff = after[1][k] - after[0][k]
        expected = lr0 * tc.weight_decay * params0[k] if k in ("wte", "wpe") else 0 * diff
        if max_error(diff, expected) > 1e-12 * max(1.0, float(np.abs(params0[k]).max())):
            raise Wrong(f"The first update of {k} differs from the course's by more than the decay term.")
    # The next step: the weights now differ, so the loss and the gradients do too, a little
    (loss_a, g_a), (loss_b, g_b) = (model.loss_and_grads(p, cfg, *batches[1]) for p in after)
    g_diff = max(max_error(g_b[k], g_a[k]) / (float(np.abs(g_a[k]).max()) or 1.0) for k in g_a)
    progress(f"{EXEMPT_STEPS} steps with each grouping…")
    runs = []
    for gr in (optim.param_groups(params0), groups):
        p = {k: v.copy() for k, v in params0.items()}
        runs.append((p, _run(p, cfg, tc, gr, batches)))
    rms = lambda p, k: float(np.sqrt(np.mean(p[k] ** 2)))  # noqa: E731
    (pa, la), (pb, lb) = runs
    return (f"Right. The first step's loss ({loss0:.4f}) and gradients cannot see the groups, which enter only the "
            "update; the update differs only on wte and wpe, by exactly the decay term lr·λ·θ "
            f"({lr0:.2e} × {tc.weight_decay} × θ at step 0, in warmup). At the next step the weights differ, so the "
            f"loss does by {abs(loss_b - loss_a):.1e} and the gradients by up to {g_diff:.1e} relative to each "
            f"tensor's largest. After "
            f"{EXEMPT_STEPS} steps of the default run's schedule the RMS of wte is {rms(pb, 'wte'):.5f} exempt "
            f"against {rms(pa, 'wte'):.5f} decayed, and of wpe {rms(pb, 'wpe'):.5f} against {rms(pa, 'wpe'):.5f}; "
            f"the last batch's loss is {lb[-1]:.4f} against {la[-1]:.4f}. With decay lr·λ of at most "
            f"{tc.lr * tc.weight_decay:.0e} per step, this short a run moves the embeddings' scale by little: the "
            "chapter's balance point is reached only after a few times 1/(2ηλ) steps.")


EXERCISES = [
    Exercise(
        id="ch5.l2_first_step", kind="predict", title="Adam + L2's first step",
        task=f"""One weight of a matrix (so in the decay group) has the value θ = {L2_WEIGHT:g}, and the loss's
gradient on it at the first step is g = {L2_GRAD:g}: the loss would like it larger. Take one step of Adam with L2
(`pylib.optim.adam_l2_step`, λ = {L2_WD:g}, learning rate {L2_LR:g}, the default β1, β2 and ε). By how much does the
weight change (new minus old, with its sign)?""",
        truth=l2_first_step, check=check_l2_first_step, tolerance=0.05,
        solution=f"""L2 adds λθ = {L2_WD * L2_WEIGHT:g} to the gradient before Adam sees it, so Adam steps on
g + λθ = {L2_GRAD + L2_WD * L2_WEIGHT:g}. The sign flipped: the decay outweighs the loss's pull. Adam's bias-corrected
first step is the learning rate times the sign of the gradient it sees (|g| ≫ ε), so the weight moves by
−{L2_LR:g}, however small or large the decay term was. AdamW would instead shrink the weight by ηλθ and then step
against g alone: the weight would go up.""",
        hints=("Write down the gradient Adam sees under L2, with its sign.",
               "The chapter: the bias-corrected first step moves every weight by exactly the learning rate when "
               "|g| ≫ ε, whatever the size of g."),
        mistakes=(Mistake(repr(_first_change(optim.adamw_step)), "AdamW's change"),
                  Mistake(repr(-l2_first_step()), "wrong direction"),
                  Mistake(repr(-L2_LR * 0.1 / math.sqrt(0.001)), "without bias correction"),
                  Mistake(repr(_first_change(optim.sgd_step)), "plain gradient descent")),
    ),
    Exercise(
        id="ch5.adamw_paper", kind="implement", title="AdamW as the paper writes it",
        task="""The course's AdamW is PyTorch's: the decay per step is lr·λ. Write one step of the paper's form
(Loshchilov & Hutter, Algorithm 2, as the chapter quotes it), on one array: Adam's bias-corrected step scaled by its
step size α, and the decay λθ, both multiplied by the schedule multiplier η of the step.""",
        starter=PAPER_STARTER, function="adamw_paper_step", solution=PAPER_SOLUTION, check=check_adamw_paper,
        hints=("The moments are Adam's, unchanged: m and v are running averages of g and g², corrected by "
               "1 − β1ᵗ and 1 − β2ᵗ.",
               "θₜ = θₜ₋₁ − η(α m̂/(√v̂ + ε) + λθₜ₋₁): the decay uses the weight from before the step, and α does "
               "not multiply it."),
        mistakes=(
            Mistake(PAPER_SOLUTION.replace("m_hat = m / (1 - beta1 ** t)", "m_hat = m"), "missing on m"),
            Mistake(PAPER_SOLUTION.replace("m_hat = m / (1 - beta1 ** t)", "m_hat = m").replace(
                "v_hat = v / (1 - beta2 ** t)", "v_hat = v"), "your first step is 3.16× too large"),
            Mistake(PAPER_SOLUTION.replace("+ weight_decay * p)", ") - eta * alpha * weight_decay * p"),
                    "PyTorch's form"),
            Mistake(PAPER_SOLUTION.replace("(np.sqrt(v_hat) + eps)", "np.sqrt(v_hat + eps)"),
                    "outside the square root"),
        )),
    Exercise(
        id="ch5.heavy_ball", kind="implement", title="The heavy ball",
        task="""Write heavy-ball momentum in the chapter's form, for any function given by its gradient, and return
every point it visits. The check runs it on the chapter's valley and compares with `pylib.optim.sgd_step`.""",
        starter=BALL_STARTER, function="heavy_ball", solution=BALL_SOLUTION, check=check_heavy_ball,
        hints=("Keep one array, the velocity b, from step to step; it starts at zero.",
               "Each step: add this step's gradient (at the current point) to β times the velocity, then move "
               "against the velocity."),
        mistakes=(
            Mistake(BALL_SOLUTION.replace("b = momentum * b + grad(theta)",
                                          "b = momentum * b + (1 - momentum) * grad(theta)"), "is an average"),
            Mistake(BALL_SOLUTION.replace("        b = momentum * b + grad(theta)\n        theta = theta - lr * b\n",
                                          "        theta = theta - lr * b\n        b = momentum * b + grad(theta)\n"),
                    "velocity from before"),
            Mistake(BALL_SOLUTION.replace("    points = [theta.copy()]\n", "    points = [theta.copy()]\n"
                                          "    g0 = grad(theta)\n").replace("+ grad(theta)", "+ g0"),
                    "gradient at the start for every step"),
        )),
    Exercise(
        id="ch5.exempt_embeddings", kind="investigate", title="One condition changed: no decay on the embeddings",
        task="""Change one condition of the default run: which tensors get weight decay. The course decays every
matrix, the embeddings included (nanoGPT); exempt `wte` and `wpe`, as minGPT does. The check compares the first
step's loss, gradients and update with the course's grouping, then runs a short stretch of the default schedule
with each.""",
        starter=EXEMPT_STARTER, function="decay_groups", solution=EXEMPT_SOLUTION, check=check_exempt,
        needs_corpus=True,
        hints=("`optim.param_groups(params)` gives the course's groups; build new lists from them.",
               "Both embeddings go to no_decay; everything else stays where it was."),
        mistakes=(
            Mistake(EXEMPT_STARTER, "nothing changed"),
            Mistake(EXEMPT_SOLUTION.replace('embeddings = ["wte", "wpe"]', 'embeddings = ["wte"]'),
                    "both embeddings"),
            Mistake(EXEMPT_SOLUTION.replace('if n not in embeddings]', 'if False]').replace(
                '"no_decay": groups["no_decay"] + embeddings}', '"no_decay": list(params)}'),
                    "You also exempted"),
            Mistake(EXEMPT_SOLUTION.replace('"no_decay": groups["no_decay"] + embeddings}',
                                            '"no_decay": groups["no_decay"]}'), "exactly one group"),
        )),
]
