"""pylib.studies.scaling: the IsoFLOP fits recover known answers; the family and budgets add up."""

import math

import numpy as np
import pytest

from pylib import model
from pylib.studies import scaling
from pylib.systems import flops

TRUE = {"E": 1.5, "A": 30.0, "alpha": 0.4, "B": 200.0, "beta": 0.35}


def synthetic_sweep(fit, budgets, ratios=(0.25, 0.5, 1.0, 2.0, 4.0)):
    """Points on IsoFLOP curves C = 6ND of a known parametric loss, around its optimum."""
    points = []
    for c in budgets:
        n_opt, _ = scaling.chinchilla_optimum(fit, c)
        for r in ratios:
            n = n_opt * r
            d = c / (6 * n)
            points.append({"budget": c, "n": n, "d": d, "loss": scaling.chinchilla_loss(fit, n, d)})
    return points


def test_parabola_minimum_of_an_exact_parabola():
    x = np.array([-2.0, -1.0, 0.0, 1.0, 3.0])
    m = scaling.parabola_minimum(x, 2.0 * (x - 0.5) ** 2 + 1.0)
    assert m["x"] == pytest.approx(0.5) and m["y"] == pytest.approx(1.0) and m["inside"]


def test_parabola_opening_down_has_no_minimum():
    x = np.arange(5.0)
    assert scaling.parabola_minimum(x, -(x - 2.0) ** 2) is None


def test_parabola_needs_three_distinct_points():
    with pytest.raises(ValueError):
        scaling.fit_parabola([1.0, 1.0, 2.0], [0.0, 1.0, 2.0])


def test_power_law_fit_recovers_exponent_and_coefficient():
    c = np.array([1e9, 1e10, 1e11])
    a, k = scaling.fit_power_law(c, 3.0 * c ** 0.6)
    assert a == pytest.approx(0.6) and k == pytest.approx(3.0)


def test_chinchilla_fit_recovers_known_constants():
    rng = np.random.default_rng(0)
    n = np.exp(rng.uniform(np.log(1e3), np.log(5e4), 40))
    d = np.exp(rng.uniform(np.log(1e5), np.log(5e6), 40))
    fit = scaling.fit_chinchilla(n, d, scaling.chinchilla_loss(TRUE, n, d))
    for key, tol in (("E", 1e-3), ("A", 1e-2), ("alpha", 1e-3), ("B", 1e-2), ("beta", 1e-3)):
        assert fit[key] == pytest.approx(TRUE[key], rel=tol)
    assert fit["rmse"] < 1e-4


def test_chinchilla_optimum_minimises_loss_on_the_isoflop_curve():
    c = 1e12
    n_opt, d_opt = scaling.chinchilla_optimum(TRUE, c)
    assert 6 * n_opt * d_opt == pytest.approx(c)
    for r in (0.8, 1.25):  # either side of the optimum along C = 6ND is worse
        assert scaling.chinchilla_loss(TRUE, n_opt * r, c / (6 * n_opt * r)) > scaling.chinchilla_loss(TRUE, n_opt, d_opt)


def test_isoflop_analysis_recovers_the_exponents_of_a_known_surface():
    """Approach 2 on exact points of L = E + A/N^α + B/D^β: a = β/(α+β), b = α/(α+β).

    Each parabola's vertex is biased (a parabola is only a second-order approximation), but with
    the same sizes relative to each optimum the curves are shifted copies in ln N, so every vertex
    is off by the same factor and the exponents come out exact."""
    out = scaling.analyse(synthetic_sweep(TRUE, [1e10, 3e10, 1e11, 3e11]))
    s = TRUE["alpha"] + TRUE["beta"]
    assert out["a"] == pytest.approx(TRUE["beta"] / s, abs=1e-9)
    assert out["b"] == pytest.approx(TRUE["alpha"] / s, abs=1e-9)
    assert all(o["inside"] for o in out["optima"].values())


def test_steps_spend_the_budget():
    cfg = scaling.width_config(16)
    steps = scaling.steps_for_budget(cfg, 1.2e10)
    spent = flops.training_flops_per_token(cfg) * scaling.tokens(cfg, steps)
    per_step = flops.training_flops_per_token(cfg) * scaling.BATCH * cfg.block_size
    assert abs(spent - 1.2e10) <= per_step / 2  # rounded to the nearest whole step


def test_family_spans_the_course_model():
    course = model.count_params(model.GPTConfig())
    sizes = [model.count_params(scaling.width_config(w)) for w in scaling.WIDTHS]
    assert min(sizes) < course / 4 and max(sizes) > 4 * course
    assert scaling.width_config(16) == model.GPTConfig(n_head=scaling.N_HEAD)
    assert all(set(ws) <= set(scaling.WIDTHS) for ws in scaling.BUDGETS.values())


def test_width_for_params_picks_the_nearest_in_log():
    for w in (4, 16, 48):
        assert scaling.width_for_params(model.count_params(scaling.width_config(w))) == w
    with pytest.raises(ValueError):
        scaling.width_for_params(float("nan"))
    with pytest.raises(ValueError):
        scaling.width_for_params(-5.0)


def test_warmup_is_short_for_short_runs():
    assert scaling.warmup_for(1000) == 20 and scaling.warmup_for(50) == 5 and scaling.warmup_for(3) == 1
