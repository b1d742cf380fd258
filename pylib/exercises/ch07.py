"""Chapter 7's exercises: the initial scales, GPT-2's residual scaling, and post-LN's backward (pylib.exercises
says how checks work)."""

import math

import numpy as np

from pylib import data, loss as xent, model, optim
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_array, near
from pylib.studies import init_study

# ---------------------------------------------------------------------------
# 1. Predict: the residual projections' initial std, with GPT-2's rule and µP's

PROJ_CFG = model.GPTConfig(n_layer=4, n_head=2, n_embd=64, mup_base_width=16)


def c_proj_std():
    """The standard deviation of every residual projection's initial weights (both c_proj of every block,
    pooled), as pylib.model.init_params draws them for PROJ_CFG at seed 0."""
    params = model.init_params(PROJ_CFG, 0, np.float64)
    return float(np.concatenate([v.ravel() for k, v in params.items() if k.endswith("c_proj.weight")]).std())


def check_c_proj_std(value, truth):
    std, L, m = PROJ_CFG.init_std, PROJ_CFG.n_layer, PROJ_CFG.width_mult
    if near(value, std / math.sqrt(2 * L)):
        raise Wrong("That is the standard model's value: under µP the hidden matrices, these included, are scaled "
                    "once more, with the width.")
    if near(value, std / math.sqrt(m)):
        raise Wrong("You left out GPT-2's residual scaling: the matrices that write into the stream get a further "
                    "1/√N, N the number of residual branches.")
    if near(value, std / math.sqrt(L) / math.sqrt(m)):
        raise Wrong("N counts residual branches, and each block has two (attention and MLP): N = 2L, not L.")
    if near(value, std / math.sqrt(2 * L) / m):
        raise Wrong("µP makes the variance proportional to 1/fan-in, so the standard deviation is divided by √m, "
                    "not by m.")


# ---------------------------------------------------------------------------
# 2. Predict: the spread of the logits at initialisation

LOGIT_CFG = model.GPTConfig(n_head=4, n_embd=64, init_std=0.05)
LOGIT_SEEDS = (0, 1, 2)


def logit_std():
    """The standard deviation of LOGIT_CFG's logits at init, on 4 windows of random tokens, averaged over seeds."""
    x = np.random.default_rng(7).integers(0, LOGIT_CFG.vocab_size, (4, LOGIT_CFG.block_size))
    stds = [float(model.forward_logits(model.init_params(LOGIT_CFG, seed, np.float64), LOGIT_CFG, x).std())
            for seed in LOGIT_SEEDS]
    return float(np.mean(stds))


def check_logit_std(value, truth):
    C, s = LOGIT_CFG.n_embd, LOGIT_CFG.init_std
    if near(value, s):
        raise Wrong("That is one weight's standard deviation; a logit is a dot product over the C entries of the "
                    "stream, so C products add up.")
    if near(value, C * s):
        raise Wrong("Variances add, not standard deviations: C independent products of standard deviation σ sum to "
                    "a standard deviation of √C·σ.")
    if near(value, math.sqrt(2) * s):
        raise Wrong("That is the stream's standard deviation as the embeddings leave it; the final LayerNorm "
                    "rescales the stream before the head reads it.")
    if near(value, 1.0):
        raise Wrong("The normalised stream's entries have size one, but each logit weights them by a row of the "
                    "tied embedding, whose entries are small.")


# ---------------------------------------------------------------------------
# 3. Investigate: undo GPT-2's 1/sqrt(2L) on the residual projections of an 8-block model

UNDO_STARTER = '''import math

import numpy as np


def undo_residual_scaling(params, cfg):
    """Change one condition of the initialisation: the residual projections (attn.c_proj.weight and
    mlp.c_proj.weight of every block) at the same scale as every other matrix, as if GPT-2's
    1/sqrt(2L) had never been applied. Every other parameter stays as it is.

    params: the model's initial weights (a dict of arrays); cfg: its GPTConfig (cfg.n_layer blocks).
    Return the changed weights, as a dict with the same names.
    """
    new = {name: value.copy() for name, value in params.items()}
    return new
'''

UNDO_SOLUTION = '''import math

import numpy as np


def undo_residual_scaling(params, cfg):
    new = {name: value.copy() for name, value in params.items()}
    for name in new:
        if name.endswith("c_proj.weight"):  # the two matrices per block that write into the stream
            new[name] *= math.sqrt(2 * cfg.n_layer)
    return new
'''

UNDO_CFG = model.GPTConfig(n_layer=8)  # the chapter's depth family: 8 blocks of the course's width


def _step_stats(params, cfg, x, y):
    """Loss, the stream's std after the embeddings and each block, each block's gradient norm, and the RMS of
    each tensor's first AdamW update (the default run's rate and settings), for these weights."""
    trace = []
    logits, cache = model.traced_forward(params, cfg, x, trace)
    loss, c_loss = xent.cross_entropy_forward(logits, y)
    grads = model.backward(xent.cross_entropy_backward(c_loss), cache)
    p = model.pack_params({k: v.copy() for k, v in params.items()})
    optim.clip_grad_norm(grads, 1.0)
    optim.adamw_step(p, grads, optim.adamw_init(p), 1e-2, 0.9, 0.99, 1e-8, 0.1, optim.param_groups(p))
    update = {k: (p[k] - params[k], grads[k]) for k in params}  # each weight's step, and its (clipped) gradient
    return {"loss": float(loss), "act": [float(h.std()) for h in trace],
            "grad": init_study.block_grad_norms(grads, cfg), "update": update}


def check_undo_residual_scaling(fn):
    cfg = UNDO_CFG
    params = model.init_params(cfg, 0, np.float64)
    new = fn({k: v.copy() for k, v in params.items()}, cfg)
    if not isinstance(new, dict) or set(new) != set(params):
        raise Wrong("undo_residual_scaling should return a dict of the model's weights, with the same names.")
    for k in params:
        expect_array(np.asarray(new[k]) if np.isscalar(new[k]) else new[k], params[k].shape, f"new[{k!r}]")
    changed = [k for k in params if not np.array_equal(new[k], params[k])]
    if not changed:
        raise Wrong("Your weights are the unchanged ones: you did not undo the scaling, so there is nothing to compare.")
    others = [k for k in changed if not k.endswith("c_proj.weight")]
    if others:
        raise Wrong(f"You changed {len(others)} tensors besides the residual projections (e.g. {others[0]}): change "
                    "one condition, the c_proj weights' scale, and leave the rest as drawn.")
    proj = [k for k in params if k.endswith("c_proj.weight")]
    if len(changed) < len(proj):
        raise Wrong(f"You changed {len(changed)} of the {len(proj)} residual projections: every block has two, "
                    "attention's and the MLP's.")
    factors = [float(np.median(new[k] / params[k])) for k in proj]
    for k, f in zip(proj, factors):
        if not close(new[k], f * params[k], 1e-9, 1e-15):
            raise Wrong(f"{k} is not the drawn weights times one factor: rescale them, do not redraw them.")
    L = cfg.n_layer
    f = factors[0]
    if not all(close(g, f, 1e-9) for g in factors):
        raise Wrong("Your factor differs from block to block: GPT-2's rule scales every residual projection alike.")
    if close(f, 1 / math.sqrt(2 * L), 1e-6):
        raise Wrong("You scaled them down once more: undoing 1/√(2L) means multiplying by √(2L).")
    if close(f, math.sqrt(L), 1e-6):
        raise Wrong("Your factor is √L: N counts residual branches, two per block, so N = 2L.")
    if not close(f, math.sqrt(2 * L), 1e-6):
        raise Wrong(f"Your factor is {f:.4g}: it should bring the c_proj weights to cfg.init_std, the other matrices' "
                    "scale, from the std init_params gave them.")
    x, y = data.get_batch(corpus().train, 8, cfg.block_size, np.random.default_rng([7, 0]))
    base, undone = _step_stats(params, cfg, x, y), _step_stats(new, cfg, x, y)
    # Adam's first step is about lr per weight whatever the gradient's size, as long as that is well above eps
    # (the chapter): so on the weights whose gradient is, in both runs, the step's size should not follow the
    # gradients. Within 2%, tensor by tensor: what is left is the decay, lr * wd * p.
    worst = 0.0
    for k in params:
        (d0, g0), (d1, g1) = base["update"][k], undone["update"][k]
        big = (np.abs(g0) > 1e3 * 1e-8) & (np.abs(g1) > 1e3 * 1e-8)
        if big.any():
            rms0, rms1 = np.sqrt(np.mean(d0[big] ** 2)), np.sqrt(np.mean(d1[big] ** 2))
            worst = max(worst, float(abs(rms1 / rms0 - 1)))
    if worst > 0.02:
        raise Wrong(f"The first AdamW update changed size by {worst:.1%} in some tensor: with only the c_proj scale "
                    "changed, Adam's step should stay about the rate per weight.")
    grow = lambda s: s["act"][-1] / s["act"][0]  # noqa: E731
    g_ratio = [u / b for u, b in zip(undone["grad"], base["grad"])]
    return (f"Right: with the c_proj weights √(2L) = {math.sqrt(2 * L):.3g} times larger, the stream leaves block {L} "
            f"{grow(undone):.3g}× the embeddings' std (against {grow(base):.3g}× with GPT-2's scaling), the loss at "
            f"init is {undone['loss']:.4f} nats (against {base['loss']:.4f}), and the blocks' gradient norms change "
            f"by factors from {min(g_ratio):.3g} to {max(g_ratio):.3g}. But the first AdamW update is the same size "
            f"tensor by tensor, on every weight whose gradient is well above Adam's ε (at most {worst:.1%} apart): Adam divides by √v, so it moves every weight by about the "
            "rate, whatever its gradient's scale.")


# ---------------------------------------------------------------------------
# 4. Implement: post-LN's block backward (the chapter shows its forward; chapter 4 shows pre-LN's backward)

POST_STARTER = '''from pylib.model import attn_backward, mlp_backward, norm_backward


def post_ln_backward(cfg, g, n, dh, cache):
    """Backward of pylib.model.post_ln_block_forward for block n (e.g. "h.0.").

    dh: the gradient of the loss with respect to the block's output (B, T, C); cache: what
    post_ln_block_forward returned, (c_ln1, c_attn, c_ln2, c_mlp). Put every parameter's gradient
    into g (norm_backward, mlp_backward and attn_backward do that), and return the gradient with
    respect to the block's input h.
    """
    raise NotImplementedError
'''

POST_SOLUTION = '''from pylib.model import attn_backward, mlp_backward, norm_backward


def post_ln_backward(cfg, g, n, dh, cache):
    c_ln1, c_attn, c_ln2, c_mlp = cache
    ds = norm_backward(cfg, g, n + "ln_2", dh, c_ln2)  # into h1 + m: reaches h1 directly and through the MLP
    dh1 = ds + mlp_backward(g, n, ds, c_mlp)
    ds = norm_backward(cfg, g, n + "ln_1", dh1, c_ln1)  # into h + y: reaches h directly and through attention
    return ds + attn_backward(cfg, g, n, ds, c_attn)
'''


def _post_case(seed, B, T, **kw):
    cfg = model.GPTConfig(norm_position="post", init_std=0.3, **kw)
    rng = np.random.default_rng(seed)
    p = model.init_params(cfg, seed, np.float64)
    for k in p:
        if model.is_norm_param(k) or k.endswith(".bias"):  # gains and biases away from 1 and 0: each one shows
            p[k] = p[k] + 0.3 * rng.normal(size=p[k].shape)
    h = rng.normal(0, 1, (B, T, cfg.n_embd))
    dh = rng.normal(0, 1, (B, T, cfg.n_embd))
    return cfg, p, h, dh


def check_post_ln_backward(fn):
    n = "h.0."
    cases = (("LayerNorm, B = 2, T = 5", _post_case(1, 2, 5)), ("RMSNorm", _post_case(2, 2, 4, norm="rmsnorm")),
             ("one position (B = T = 1), no biases", _post_case(3, 1, 1, bias=False)))
    for name, (cfg, p, h, dh) in cases:
        want_g = {}
        want = model.post_ln_block_backward(cfg, want_g, n, dh.copy(), model.post_ln_block_forward(cfg, p, n, h, None)[1])
        got_g = {}
        got = fn(cfg, got_g, n, dh.copy(), model.post_ln_block_forward(cfg, p, n, h, None)[1])
        got = expect_array(got, h.shape, "The gradient you return")
        missing = sorted(set(want_g) - set(got_g))
        if missing:
            raise Wrong(f"On {name}, g has no gradient for {', '.join(missing[:3])}: every parameter of the block needs one.")
        right = {k: close(got_g[k], want_g[k], 1e-7, 1e-10) for k in want_g}
        part = lambda s: [k for k in want_g if s in k]  # noqa: E731
        ok = lambda s: all(right[k] for k in part(s))  # noqa: E731
        if not ok("ln_2") and ok("ln_1") is False and all(
                close(got_g[k], want_g[k.replace("ln_2", "ln_1")], 1e-7, 1e-10) for k in part("ln_2")):
            raise Wrong(f"On {name}, ln_1's and ln_2's gradients are filed under each other's names: the cache "
                        "holds (c_ln1, c_attn, c_ln2, c_mlp); each norm's cache goes with its own name.")
        if not ok("ln_2"):
            raise Wrong(f"On {name}, ln_2's gain and bias gradients are wrong: ln_2 is the block's last operation, so "
                        "its backward comes first, on the incoming dh.")
        if not ok("mlp."):
            raise Wrong(f"On {name}, the MLP's gradients are wrong: the MLP's output reaches the loss only through "
                        "ln_2, so its branch must receive the gradient after ln_2's backward, not dh itself.")
        if not ok("ln_1"):
            raise Wrong(f"On {name}, the gradient that reaches ln_1 is wrong: the MLP's input is also the skip path "
                        "past it, so it is the sum of both paths' gradients.")
        if not ok("attn."):
            raise Wrong(f"On {name}, attention's gradients are wrong: attention's output reaches the loss only "
                        "through ln_1, so its branch must receive the gradient after ln_1's backward.")
        if not close(got, want, 1e-7, 1e-10):
            raise Wrong(f"On {name}, every parameter's gradient is right but the gradient you return for the block's "
                        "input is not: h reaches ln_1 directly (the skip) as well as through attention.")
    return ("Right: every parameter's gradient and the input's gradient match pylib's post_ln_block_backward, with "
            "LayerNorm and RMSNorm, with and without biases, down to a single position.")


EXERCISES = [
    Exercise(
        id="ch7.c_proj_std", kind="predict", title="The residual projections' scale",
        task=f"""A model of {PROJ_CFG.n_layer} blocks, width {PROJ_CFG.n_embd}, under µP with base width
{PROJ_CFG.mup_base_width}, `init_std` {PROJ_CFG.init_std}. What standard deviation does `init_params`
give the matrices that write into the residual stream (`attn.c_proj` and `mlp.c_proj`)? The check
measures it over all of them.""",
        truth=c_proj_std, check=check_c_proj_std, tolerance=0.05,
        solution=f"""Two rules act on these matrices. GPT-2's divides `init_std` by $\\sqrt{{2L}} =
\\sqrt{{{2 * PROJ_CFG.n_layer}}}$ (two residual branches per block), and µP divides every hidden matrix's
standard deviation by $\\sqrt{{m}}$, $m = {PROJ_CFG.n_embd}/{PROJ_CFG.mup_base_width} =
{PROJ_CFG.width_mult:g}$. So ${PROJ_CFG.init_std} / (\\sqrt{{{2 * PROJ_CFG.n_layer}}} \\cdot
\\sqrt{{{PROJ_CFG.width_mult:g}}}) \\approx {PROJ_CFG.init_std / math.sqrt(2 * PROJ_CFG.n_layer * PROJ_CFG.width_mult):.4f}$;
the measured value differs from it only by the sampling of a finite draw.""",
        hints=("Two rules in the chapter apply: GPT-2's residual scaling and µP's hidden-matrix scaling.",
               "GPT-2's N is the number of residual branches; µP's rule is on the variance."),
        mistakes=(Mistake(repr(0.02 / math.sqrt(8)), "standard model's value"), Mistake("0.01", "residual scaling"),
                  Mistake("0.005", "N = 2L"), Mistake(repr(0.02 / math.sqrt(8) / 4), "divided by √m")),
    ),
    Exercise(
        id="ch7.logit_std", kind="predict", title="How spread out the first logits are",
        task=f"""The course model widened to {LOGIT_CFG.n_embd} (`n_embd`), initialised with `init_std`
{LOGIT_CFG.init_std}, otherwise as drawn by `init_params`. What is the standard deviation of its
logits at initialisation? The check measures it over every logit of 4 windows, averaged over
{len(LOGIT_SEEDS)} seeds; the chapter's estimate is close enough.""",
        truth=logit_std, check=check_logit_std, tolerance=0.1,
        solution=f"""The final LayerNorm gives the stream entries of size one whatever the weights, and each
logit is the dot product of that vector with a row of the tied embedding, $C$ entries of standard
deviation `init_std`. The variances of $C$ products add, so the standard deviation is about
$\\sqrt{{C}}\\cdot$`init_std` $= \\sqrt{{{LOGIT_CFG.n_embd}}} \\times {LOGIT_CFG.init_std} =
{math.sqrt(LOGIT_CFG.n_embd) * LOGIT_CFG.init_std:g}$. The measurement comes out a little higher: because the
embedding is tied, the input token's own row is part of the stream, so the logit of the input token itself
is positive on average rather than centred on zero.""",
        hints=("Start from the head: each logit is a dot product of the normalised stream with a row of `wte`.",
               "The final LayerNorm's output has entries of standard deviation one; the row's entries have "
               "standard deviation `init_std`. How do the variances of $C$ independent products add?"),
        mistakes=(Mistake("0.05", "one weight's standard deviation"), Mistake("3.2", "Variances add"),
                  Mistake("0.0707", "as the embeddings leave it"), Mistake("1", "entries have size one")),
    ),
    Exercise(
        id="ch7.scaled_init", kind="investigate", title="One condition changed: no residual scaling",
        task=f"""Take the chapter's {UNDO_CFG.n_layer}-block model at initialisation and change one condition:
undo GPT-2's $1/\\sqrt{{2L}}$, so that the residual projections start at the same scale as every other
matrix. The check compares the stream's growth through the blocks, the loss at initialisation, the
blocks' gradient norms, and the first AdamW update, against the model as `init_params` draws it.""",
        starter=UNDO_STARTER, function="undo_residual_scaling", solution=UNDO_SOLUTION,
        check=check_undo_residual_scaling, needs_corpus=True,
        hints=("The residual projections are the weights whose names end in `c_proj.weight`, two per block.",
               "`init_params` divided their standard deviation by √(2L); multiply them back by the same factor."),
        mistakes=(
            Mistake(UNDO_STARTER, "did not undo the scaling"),
            Mistake(UNDO_SOLUTION.replace("math.sqrt(2 * cfg.n_layer)", "math.sqrt(cfg.n_layer)"), "N = 2L"),
            Mistake(UNDO_SOLUTION.replace('name.endswith("c_proj.weight")', 'name.endswith(".weight") and name.startswith("h.")'),
                    "besides the residual projections"),
            Mistake(UNDO_SOLUTION.replace("*= math.sqrt(2 * cfg.n_layer)", "/= math.sqrt(2 * cfg.n_layer)"),
                    "scaled them down once more"),
        )),
    Exercise(
        id="ch7.post_ln_backward", kind="implement", title="Post-LN's backward",
        task="""The chapter shows the post-LN block's forward; chapter 4 shows the pre-LN block's backward.
Write the post-LN block's backward: every parameter's gradient into `g`, and the gradient with
respect to the block's input returned. The check compares it with pylib's on random blocks with
LayerNorm and RMSNorm.""",
        starter=POST_STARTER, function="post_ln_backward", solution=POST_SOLUTION, check=check_post_ln_backward,
        hints=("Go through the forward from its last line up: `ln_2` was applied last, so its backward comes first.",
               "Each addition `x + branch(x)` sends the gradient down two paths, the skip and the branch; the "
               "gradient of `x` is their sum."),
        mistakes=(
            Mistake(POST_SOLUTION.replace("dh1 = ds + mlp_backward(g, n, ds, c_mlp)", "dh1 = ds + mlp_backward(g, n, dh, c_mlp)"),
                    "after ln_2's backward"),
            Mistake(POST_SOLUTION.replace("dh1 = ds + mlp_backward(g, n, ds, c_mlp)", "dh1 = mlp_backward(g, n, ds, c_mlp)"),
                    "sum of both paths"),
            Mistake(POST_SOLUTION.replace("return ds + attn_backward(cfg, g, n, ds, c_attn)",
                                          "return attn_backward(cfg, g, n, ds, c_attn)"), "the skip) as well"),
            Mistake(POST_SOLUTION.replace('n + "ln_2", dh, c_ln2', 'n + "ln_1", dh, c_ln2').replace(
                'n + "ln_1", dh1, c_ln1', 'n + "ln_2", dh1, c_ln1'), "each other's names"),
        )),
]
