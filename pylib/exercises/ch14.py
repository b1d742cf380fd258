"""Chapter 14's exercises: counting FLOPs, the compute-optimal split, and the IsoFLOP fit's bias
(pylib.exercises says how checks work)."""

import dataclasses
import math

import numpy as np

from pylib import model
from pylib.exercises import Exercise, Mistake, Wrong, close, expect_number, near
from pylib.studies import scaling
from pylib.systems import flops

# ---------------------------------------------------------------------------
# 1. Predict: a token's training FLOPs when the context doubles


def context_doubled():
    """Training FLOPs per token of the course model at context 2T, over those at T (pylib.systems.flops)."""
    cfg = model.GPTConfig()
    return flops.training_flops_per_token(cfg, 2 * cfg.block_size) / flops.training_flops_per_token(cfg)


def check_context_doubled(value, truth):
    if near(value, 1.0, 0.01):
        raise Wrong("That is 6N alone: the weights' cost per token does not depend on the context, but attention's "
                    "does, and in this model it is far from negligible.")
    if near(value, 2.0, 0.02):
        raise Wrong("Only attention's term grows with the context; the weights' 6N per token stays as it was.")
    if near(value, 4.0, 0.02):
        raise Wrong("Quadratic is the cost of a whole window's attention; per token, attention grows linearly with "
                    "the context, and the weights' part not at all.")
    if near(value, 2 * truth, 0.02):
        raise Wrong("That is a whole window's cost (a window of 2T holds twice the tokens); the question is per token.")


# ---------------------------------------------------------------------------
# 2. Implement: the FLOPs of a causal attention that skips the masked scores

CAUSAL_STARTER = '''from pylib.systems import flops


def causal_flops(cfg):
    """Training FLOPs per token (forward and backward) of a model of config cfg, at its context
    T = cfg.block_size, when attention computes only the scores a token can see.

    The token at position t (0-based) of a window scores the t + 1 keys up to and including its
    own, and weights the same t + 1 values; average over the window's T positions. The weights
    cost what the chapter says they cost.
    """
    raise NotImplementedError
'''

CAUSAL_SOLUTION = '''from pylib.systems import flops


def causal_flops(cfg):
    T, C, L = cfg.block_size, cfg.n_embd, cfg.n_layer
    weights = 6 * flops.matmul_params(cfg)
    keys_seen = (T + 1) / 2  # mean of t + 1 over t = 0 .. T-1
    attention = 3 * L * 2 * (2 * keys_seen * C)  # q.k and att@v, 2·(t+1)·C each; backward twice the forward
    return weights + attention
'''


def _causal_truth(cfg):
    """Counted position by position: 2·(t+1)·C for q·k and 2·(t+1)·C for the values, per layer, forward;
    the backward twice that; plus 6N for the weights (pylib.systems.flops.matmul_params)."""
    T, C, L = cfg.block_size, cfg.n_embd, cfg.n_layer
    attention_fwd = sum(2 * (t + 1) * C * 2 for t in range(T)) * L / T
    return 6 * flops.matmul_params(cfg) + 3 * attention_fwd


CAUSAL_CASES = (
    ("the course model", model.GPTConfig()),
    ("three layers of width 32 at context 128", model.GPTConfig(n_layer=3, n_embd=32, n_head=4, block_size=128)),
    ("a vocabulary of 1000 at context 7", model.GPTConfig(vocab_size=1000, block_size=7)),
    ("context 1 (one token sees only itself)", model.GPTConfig(block_size=1)),
)


def check_causal_flops(fn):
    for label, cfg in CAUSAL_CASES:
        want = _causal_truth(cfg)
        got = expect_number(fn(cfg), "causal_flops's result")
        if close(got, want, 1e-12):
            continue
        T, C, L = cfg.block_size, cfg.n_embd, cfg.n_layer
        N = flops.matmul_params(cfg)
        if close(got, flops.training_flops_per_token(cfg), 1e-12):
            raise Wrong(f"For {label} yours is the chapter's count, with the whole (T, T) score matrix: the masked "
                        "half is not computed here.")
        if close(got, 6 * N + 6 * L * T * C, 1e-12):
            raise Wrong(f"For {label} yours is off by exactly the diagonal: each token also scores its own key, so "
                        "position t sees t + 1 keys, not t, on average not T/2.")
        if close(got, want / 3, 1e-12):
            raise Wrong(f"For {label} yours is the forward pass only: training adds the backward, twice the forward.")
        if close(got - want, 6 * (model.count_params(cfg) - N), 1e-9):
            raise Wrong(f"For {label} your weights' term counts every parameter: the position table, biases and norm "
                        "gains are looked up or added, and never multiply.")
        raise Wrong(f"For {label} your count is off by {got - want:+.6g} FLOPs per token "
                    f"({(got - want) / want:+.2%}).")
    cfg = model.GPTConfig()
    saved = 1 - _causal_truth(cfg) / flops.training_flops_per_token(cfg)
    return (f"Right on all four configurations, context 1 included. For the course model, skipping the masked "
            f"scores saves {saved:.1%} of a token's training FLOPs.")


# ---------------------------------------------------------------------------
# 3. Implement: the compute-optimal size and tokens of the parametric form

OPTIMAL_STARTER = '''import math


def compute_optimal(fit, budget):
    """The model size and the tokens that minimise L(N, D) = E + A/N**alpha + B/D**beta
    when the training compute C = 6ND is fixed at budget.

    fit: {"E", "A", "alpha", "B", "beta"}; budget: C in FLOPs.
    Returns (N_opt, D_opt), two floats.
    """
    raise NotImplementedError
'''

OPTIMAL_SOLUTION = '''import math


def compute_optimal(fit, budget):
    alpha, beta = fit["alpha"], fit["beta"]
    # On C = 6ND, D = C/(6N): dL/dN = -alpha A N^-(alpha+1) + beta B (C/6)^-beta N^(beta-1) = 0
    # gives N^(alpha+beta) = (alpha A / (beta B)) (C/6)^beta.
    n = (alpha * fit["A"] / (beta * fit["B"]) * (budget / 6) ** beta) ** (1 / (alpha + beta))
    return n, budget / (6 * n)
'''

TOY_SURFACE = {"E": 1.5, "A": 30.0, "alpha": 0.4, "B": 200.0, "beta": 0.35}  # the chapter's tests' known surface


def _optimal_cases():
    fits = scaling.CITED_FITS
    return (("Hoffmann et al.'s printed constants", fits["hoffmann"], (1e18, 5.76e23, 1e26)),
            ("Besiroglu et al.'s refit", fits["besiroglu"], (1e20, 5.76e23)),
            ("a toy surface", TOY_SURFACE, (3e9, 1e11)),
            ("a surface with alpha = beta", {"E": 2.0, "A": 50.0, "alpha": 0.3, "B": 80.0, "beta": 0.3}, (1e12,)),
            ("a surface with alpha far above beta", {"E": 0.0, "A": 5e4, "alpha": 1.2, "B": 10.0, "beta": 0.1},
             (1e15,)))


def _pair(out, label):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise Wrong("compute_optimal should return a pair (N_opt, D_opt).")
    return expect_number(out[0], "N_opt"), expect_number(out[1], "D_opt")


def check_compute_optimal(fn):
    for label, fit, budgets in _optimal_cases():
        al, be = fit["alpha"], fit["beta"]
        for c in budgets:
            n, d = _pair(fn(dict(fit), c), label)
            n_want, d_want = scaling.chinchilla_optimum(fit, c)
            if not (n > 0 and d > 0 and math.isfinite(n) and math.isfinite(d)):
                raise Wrong(f"For {label} at C = {c:.3g} FLOPs your N_opt and D_opt are not both positive and finite.")
            if close(n, n_want, 1e-6) and close(d, d_want, 1e-6):
                continue
            if close(n * d, c, 1e-6):
                raise Wrong(f"For {label} your N·D is the budget itself: the budget is C = 6ND, so N·D is C/6.")
            if close(n, math.sqrt(c / (6 * scaling.TOKENS_PER_PARAM)), 1e-6):
                raise Wrong("That is the 20-tokens-per-parameter rule of thumb, not the optimum of the fitted form: "
                            "use the constants you are given.")
            if not close(6 * n * d, c, 1e-6):
                raise Wrong(f"For {label} at C = {c:.3g} FLOPs your pair does not spend the budget: 6·N·D is "
                            f"{6 * n * d:.4g}.")
            # The growth rate of the reader's N with C, between this budget and ten times it
            n10, _ = _pair(fn(dict(fit), 10 * c), label)
            slope = math.log10(n10 / n) if n10 > 0 else math.nan
            if not near(al, be, 0.01) and close(slope, al / (al + be), 1e-6):
                raise Wrong(f"For {label} your N grows as a power of C with the wrong exponent: the two exponents "
                            "are swapped. A larger beta (data's exponent) should favour a larger model.")
            if close(slope, be / (al + be), 1e-6):
                raise Wrong(f"For {label} your N grows with C at the right rate but is off by the same factor "
                            f"({n / n_want:.4g}×) at every budget: check the constant in front, from setting the "
                            "derivative of L along C = 6ND to zero.")
            raise Wrong(f"For {label} at C = {c:.3g} FLOPs your N_opt is {n / n_want:.4g} times the optimum: along "
                        "C = 6ND, the loss is lower at another size.")
    n, d = scaling.chinchilla_optimum(scaling.CITED_FITS["besiroglu"], 5.76e23)
    return (f"Right for five surfaces and budgets from 10⁹ to 10²⁶ FLOPs. At Chinchilla's budget, Besiroglu "
            f"et al.'s refit puts the optimum at {n / 1e9:.0f}B parameters and {d / n:.0f} tokens per parameter.")


# ---------------------------------------------------------------------------
# 4. Investigate: the sweep's sizes on a fixed ladder, as the toy's are

LADDER_STARTER = '''import numpy as np

from pylib import model
from pylib.studies import scaling


def ladder_sizes(budget, n_opt):
    """The model sizes (parameter counts) run at one compute budget of an IsoFLOP sweep of a known
    loss surface; n_opt is the surface's optimal size at that budget.

    Unchanged: five sizes a factor 2 apart, placed the same way around every budget's optimum.
    """
    return n_opt * 2.0 ** np.arange(-2, 3)  # change this line only
'''

LADDER_SOLUTION = '''import numpy as np

from pylib import model
from pylib.studies import scaling


def ladder_sizes(budget, n_opt):
    family = np.array([model.count_params(scaling.width_config(w)) for w in scaling.WIDTHS], dtype=float)
    return family[np.abs(np.log(family / n_opt)) <= np.log(4)]  # the family's sizes within 4x of the optimum
'''

LADDER_BUDGETS = (3e9, 1e10, 3e10, 1e11)  # the known surface's optima there lie inside the family's sizes


def _family_sizes():
    return np.array([model.count_params(scaling.width_config(w)) for w in scaling.WIDTHS], dtype=float)


def _ladder_sweep(sizes_at):
    """analyse() of exact points of TOY_SURFACE at each budget's sizes, and the sizes used."""
    points, used = [], {}
    for c in LADDER_BUDGETS:
        n_opt, _ = scaling.chinchilla_optimum(TOY_SURFACE, c)
        sizes = sizes_at(c, n_opt)
        used[c] = (n_opt, sizes)
        for n in sizes:
            d = c / (6 * n)
            points.append({"budget": c, "n": n, "d": d, "loss": scaling.chinchilla_loss(TOY_SURFACE, n, d)})
    return used, points


def check_ladder_sizes(fn):
    def reader(c, n_opt):
        out = fn(c, n_opt)
        try:
            sizes = np.asarray(out, dtype=float).ravel()
        except (TypeError, ValueError):
            raise Wrong("ladder_sizes should return the sizes as a list or 1-D array of numbers.") from None
        if sizes.size == 0 or not np.all(np.isfinite(sizes)) or not np.all(sizes > 0):
            raise Wrong(f"At budget {c:.2g} FLOPs your sizes are empty, or not all positive and finite.")
        return sizes

    used, points = _ladder_sweep(reader)
    relative = [np.sort(s / n_opt) for n_opt, s in used.values()]
    if all(r.shape == relative[0].shape and np.allclose(r, relative[0], rtol=1e-9) for r in relative):
        raise Wrong("Your sizes are still placed the same way around every budget's optimum: change the condition, "
                    "so that every budget draws its sizes from the one fixed ladder of the family's widths.")
    family = _family_sizes()
    for c, (n_opt, sizes) in used.items():
        if not all(np.isclose(family, n, rtol=1e-9).any() for n in sizes):
            raise Wrong(f"At budget {c:.2g} FLOPs some of your sizes are not the family's: the toy's ladder is the "
                        "parameter counts of width_config(w) for w in scaling.WIDTHS.")
        if np.unique(sizes).size < 3:
            raise Wrong(f"At budget {c:.2g} FLOPs you run {np.unique(sizes).size} distinct sizes: a parabola needs at "
                        "least three, so widen the window around the optimum.")
        window = family[np.abs(np.log(family / n_opt)) <= math.log(4) + 1e-12]
        far = [n for n in sizes if not np.isclose(window, n, rtol=1e-9).any()]
        if far:
            raise Wrong(f"At budget {c:.2g} FLOPs you run {far[0]:,.0f} parameters, more than a factor 4 from that "
                        "budget's optimum: the toy ran a window of its ladder around each budget's optimum, not the "
                        "same sizes everywhere.")
        if not all(np.isclose(sizes, n, rtol=1e-9).any() for n in window):
            raise Wrong(f"At budget {c:.2g} FLOPs you leave out some of the family's sizes within a factor 4 of the "
                        "optimum: run all of them.")
    out = scaling.analyse(points)
    for c, opt in out["optima"].items():
        if opt is None or not opt["inside"]:
            raise Wrong(f"At budget {c:.2g} FLOPs the fitted minimum is not inside your sizes: a fixed ladder still "
                        "needs sizes on both sides of each budget's optimum.")
    _, base_points = _ladder_sweep(lambda c, n_opt: n_opt * 2.0 ** np.arange(-2, 3))
    base = scaling.analyse(base_points)
    a_true = TOY_SURFACE["beta"] / (TOY_SURFACE["alpha"] + TOY_SURFACE["beta"])
    base_err, err = abs(base["a"] - a_true), abs(out["a"] - a_true)
    if base_err > 1e-9:
        raise Wrong("The unchanged sweep no longer recovers the surface's exponent: this is the course's bug.")
    factors = [out["optima"][c]["n"] / scaling.chinchilla_optimum(TOY_SURFACE, c)[0] for c in LADDER_BUDGETS]
    base_factor = base["optima"][LADDER_BUDGETS[0]]["n"] / scaling.chinchilla_optimum(TOY_SURFACE, LADDER_BUDGETS[0])[0]
    if err <= 1e-9:
        raise Wrong("Your sizes changed but the exponent came out exact: did every budget get the same pattern "
                    "of sizes around its optimum after all?")
    return (f"Checked: placed the same way around each optimum, every vertex is off by the same factor "
            f"({base_factor:.4f}×) and a comes out exact (error {base_err:.1e}). On the family's fixed ladder the "
            f"vertices are off by factors from {min(factors):.4f} to {max(factors):.4f}×, different at each budget, "
            f"so a = {out['a']:.4f} against the surface's {a_true:.4f}: off by {err:.4f}, and b by "
            f"{abs(out['b'] - (1 - a_true)):.4f}. That is the parabola's bias the chapter warns of: real, and far "
            "smaller than the tenth either way that three seeds leave in the toy's exponents.")


EXERCISES = [
    Exercise(
        id="ch14.context_doubled", kind="predict", title="Twice the context",
        task="""Double the course model's context, from T to 2T tokens per window, and change nothing else.
By what factor does a token's training cost, in FLOPs ($6N + 12LTC$), grow? Commit a number; the check
counts it with `pylib.systems.flops`.""",
        truth=context_doubled, check=check_context_doubled, unit="×", tolerance=0.02,
        solution="""Only attention's term, $12LTC$, grows with the context; the weights' $6N$ per token does not.
Attention is about a third of the course model's work, so the new cost is $6N + 2 \\cdot 12LTC$ over
$6N + 12LTC$, about $1 + 1/3 \\approx 1.33$. A whole window costs twice that again, because it holds twice
the tokens: that quadratic growth is per window, not per token.""",
        hints=("Which of the two terms, $6N$ and $12LTC$, has T in it?",
               "The chapter gives attention's share of the course model's per-token cost."),
        mistakes=(Mistake("1", "6N alone"), Mistake("2", "weights' 6N per token stays"),
                  Mistake("4", "Quadratic"), Mistake("2.66", "whole window's cost")),
    ),
    Exercise(
        id="ch14.causal_flops", kind="implement", title="Attention that skips the masked half",
        task="""pylib computes the whole $(T, T)$ score matrix and then masks it; LLaMA's implementation does not
compute the masked scores at all. Write the training FLOPs per token of a model that computes only what each
position can see: position $t$ scores $t + 1$ keys and weights $t + 1$ values. Count it exactly, averaged over
a window; the weights cost what the chapter says.""",
        starter=CAUSAL_STARTER, function="causal_flops", solution=CAUSAL_SOLUTION, check=check_causal_flops,
        hints=("The chapter's attention term counts $2TC$ for $qk^\\top$ and $2TC$ for the values, per token, layer "
               "and pass forward. Replace T by the number of keys a position actually sees.",
               "The mean of $t + 1$ over $t = 0, \\dots, T-1$ is $(T + 1)/2$.",
               "N is `flops.matmul_params(cfg)`, not `count_params`; and training is forward plus a backward of "
               "twice the forward."),
        mistakes=(
            Mistake(CAUSAL_SOLUTION.replace("keys_seen = (T + 1) / 2", "keys_seen = T"), "whole (T, T) score matrix"),
            Mistake(CAUSAL_SOLUTION.replace("keys_seen = (T + 1) / 2", "keys_seen = T / 2"), "exactly the diagonal"),
            Mistake(CAUSAL_SOLUTION.replace("return weights + attention", "return (weights + attention) / 3"),
                    "forward pass only"),
            Mistake(CAUSAL_SOLUTION.replace("import flops", "import flops\nfrom pylib import model").replace(
                "flops.matmul_params(cfg)", "model.count_params(cfg)"), "counts every parameter"),
        )),
    Exercise(
        id="ch14.compute_optimal", kind="implement", title="The optimum of the parametric form",
        task="""Given the constants of a fitted $L(N, D) = E + A/N^\\alpha + B/D^\\beta$ and a budget $C$, return the
size $N_\\text{opt}$ and the tokens $D_\\text{opt}$ that give the lowest loss on $C = 6ND$: the compute
calculator, the section before these exercises, does this for the cited fits. Work it out in closed form (or minimise numerically
to a relative precision of $10^{-6}$).""",
        starter=OPTIMAL_STARTER, function="compute_optimal", solution=OPTIMAL_SOLUTION, check=check_compute_optimal,
        hints=("On the budget line, $D = C/(6N)$: substitute it and L is a function of N alone.",
               "Set $dL/dN = 0$: $\\alpha A N^{-\\alpha-1} = \\beta B (C/6)^{-\\beta} N^{\\beta-1}$. Solve for "
               "$N^{\\alpha+\\beta}$.",
               "Check yours against the chapter's table: $N_\\text{opt} \\propto C^{\\beta/(\\alpha+\\beta)}$."),
        mistakes=(
            Mistake(OPTIMAL_SOLUTION.replace("(budget / 6) ** beta", "(budget / 6) ** alpha").replace(
                "alpha * fit[\"A\"] / (beta * fit[\"B\"])", "beta * fit[\"B\"] / (alpha * fit[\"A\"])"),
                    "exponents are swapped"),
            Mistake(OPTIMAL_SOLUTION.replace("(budget / 6)", "budget").replace("budget / (6 * n)", "budget / n"),
                    "N·D is the budget itself"),
            Mistake(OPTIMAL_SOLUTION.replace("alpha * fit[\"A\"] / (beta * fit[\"B\"]) * ", ""),
                    "off by the same factor"),
            Mistake(OPTIMAL_SOLUTION.replace("return n, budget", "n = math.sqrt(budget / 120)\n    return n, budget"),
                    "rule of thumb"),
        )),
    Exercise(
        id="ch14.fixed_ladder", kind="investigate", title="One condition changed: a fixed ladder of sizes",
        task="""The chapter's test fits IsoFLOP parabolas to exact points of a known surface, with the sizes placed
the same way around every budget's optimum, and recovers the exponents exactly. The toy could not place its
sizes that way: they come from one fixed ladder, its widths. Change that one condition: at each budget, run
the family's sizes (`model.count_params(scaling.width_config(w))` for `w` in `scaling.WIDTHS`) within a factor
4 of the optimum. The check fits both sweeps and compares the vertices and the exponents.""",
        starter=LADDER_STARTER, function="ladder_sizes", solution=LADDER_SOLUTION, check=check_ladder_sizes,
        hints=("Build the family's sizes once as an array, then keep those whose ratio to `n_opt` lies between "
               "1/4 and 4.",
               "`np.abs(np.log(sizes / n_opt)) <= np.log(4)` is a mask of the sizes within a factor 4."),
        mistakes=(
            Mistake(LADDER_STARTER, "still placed the same way"),
            Mistake(LADDER_SOLUTION.replace("<= np.log(4)", "<= np.log(1.5)"), "a parabola needs at least three"),
            Mistake(LADDER_SOLUTION.replace("return family[np.abs(np.log(family / n_opt)) <= np.log(4)]",
                                            "return family[:5]"),
                    "more than a factor 4"),
            Mistake(LADDER_SOLUTION.replace("return family[", "return 2 ** np.round(np.log2(family))["),
                    "not the family's"),
        )),
]
