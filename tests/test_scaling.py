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


# ---------------------------------------------------------------------------
# The seed bootstrap of the parametric prediction, on a synthetic sweep with three seeds per point

BOOT_GRID = {"alphas": [0.3, 0.35, 0.4, 0.45, 0.5], "betas": [0.25, 0.3, 0.35, 0.4, 0.45], "refine": 0}  # TRUE's on it


def seeded_sweep(sigma, seeds=3, budgets=(1e10, 4e10, 1.6e11)):
    """TRUE's IsoFLOP points per budget (n, d) and their per-seed losses, TRUE's loss plus N(0, sigma²)
    noise: ([n], [d], [(points, seeds)]); and the held-out point at 4x the last budget's optimum, with its loss."""
    rng = np.random.default_rng(1)
    points = synthetic_sweep(TRUE, budgets)
    n, d, per_seed = [], [], []
    for c in budgets:
        ps = [p for p in points if p["budget"] == c]
        n.append(np.array([p["n"] for p in ps]))
        d.append(np.array([p["d"] for p in ps]))
        per_seed.append(np.array([p["loss"] for p in ps])[:, None] + sigma * rng.standard_normal((len(ps), seeds)))
    n_held, d_held = scaling.chinchilla_optimum(TRUE, 4 * budgets[-1])
    return n, d, per_seed, (n_held, d_held), scaling.chinchilla_loss(TRUE, n_held, d_held)


def test_parametric_bootstrap_is_deterministic_for_a_seed():
    n, d, per_seed, at, _ = seeded_sweep(0.01)
    first = scaling.bootstrap_parametric_prediction(n, d, per_seed, at, 20, seed=0, **BOOT_GRID)
    assert scaling.bootstrap_parametric_prediction(n, d, per_seed, at, 20, seed=0, **BOOT_GRID) == first
    other = scaling.bootstrap_parametric_prediction(n, d, per_seed, at, 20, seed=1, **BOOT_GRID)
    assert other["draws"] != first["draws"]


def test_parametric_bootstrap_of_noise_free_seeds_is_the_truth():
    n, d, per_seed, at, truth = seeded_sweep(0.0)
    boot = scaling.bootstrap_parametric_prediction(n, d, per_seed, at, 20, **BOOT_GRID)
    assert boot["low"] == boot["high"]  # every resample draws the same three values
    # (α, β) are on the grid, so only (E, A, B)'s least squares round: about cond(X) float64 roundoffs
    n_all, d_all = np.concatenate(n), np.concatenate(d)
    X = np.stack([np.ones_like(n_all), n_all ** -TRUE["alpha"], d_all ** -TRUE["beta"]], axis=1)  # (points, 3)
    tol = 8 * np.linalg.cond(X) * 2.0 ** -53 * truth
    assert boot["low"] - tol <= truth <= boot["high"] + tol


def test_parametric_bootstrap_widens_with_noise():
    widths = []
    for sigma in (0.005, 0.02):
        n, d, per_seed, at, truth = seeded_sweep(sigma)
        boot = scaling.bootstrap_parametric_prediction(n, d, per_seed, at, 50, **BOOT_GRID)
        widths.append(boot["high"] - boot["low"])
    assert 0 < widths[0] < widths[1]


# ---------------------------------------------------------------------------
# The experiment's order (experiments.ch14), on a synthetic surface instead of training


def test_held_out_prediction_is_written_before_the_held_out_run(monkeypatch):
    from types import SimpleNamespace
    from experiments import ch14

    events = []
    real_predict = ch14.predict

    def fake_run(corpus, width, budget, seed):
        cfg = scaling.width_config(width)
        steps = scaling.steps_for_budget(cfg, budget)
        n, d = model.count_params(cfg), scaling.tokens(cfg, steps)
        events.append(("run", budget))
        return n, d, steps, scaling.chinchilla_loss(TRUE, n, d) + 0.001 * seed

    def spying_predict(fit, vocab_size):
        events.append(("predict", None))
        return real_predict(fit, vocab_size)

    monkeypatch.setattr(ch14, "one_run", fake_run)
    monkeypatch.setattr(ch14, "predict", spying_predict)
    monkeypatch.setattr(ch14, "PARAMETRIC_RESAMPLES", 3)  # the chapter's 200 fits are for --measure
    out = ch14.part_sweep(SimpleNamespace(vocab=SimpleNamespace(size=65)))
    first_held_out = events.index(("run", scaling.HELD_OUT_BUDGET))
    assert events.index(("predict", None)) < first_held_out
    assert all(budget != scaling.HELD_OUT_BUDGET for _, budget in events[:first_held_out])
    keys = list(out["values"])
    assert max(i for i, k in enumerate(keys) if k.startswith("ch14.predict.")) < keys.index("ch14.heldout.final_val.per_seed")
    assert keys.index("ch14.heldout.final_val.mean") < keys.index("ch14.boot_parametric.low")  # added afterwards
    v = out["values"]
    low, high, lies = (v[f"ch14.boot_parametric.{k}"] for k in ("low", "high", "heldout_lies"))
    assert low <= high and lies == ("below" if v["ch14.heldout.final_val.mean"] < low else
                                    "above" if v["ch14.heldout.final_val.mean"] > high else "inside")
    predicted = v["ch14.predict.loss_parametric"]
    assert v["ch14.heldout.error_parametric.mean"] == pytest.approx(v["ch14.heldout.final_val.mean"] - predicted)


# ---------------------------------------------------------------------------
# The page's ops (pylib.web.scaling_ops): bad input gets a sentence, never a NaN


def test_calculator_refuses_bad_input_with_a_message_per_field():
    from pylib.web import InputError, scaling_ops
    for bad in ("", "NaN", "-1", "1e309", "1e31", "🙂", "<b>x</b>", "0"):
        with pytest.raises(InputError) as e:
            scaling_ops.calculator(None, {"compute": bad, "mfu_percent": "40", "tokens": "1e12"})
        assert set(e.value.errors) == {"compute"}
    with pytest.raises(InputError) as e:
        scaling_ops.calculator(None, {"compute": "1e20", "mfu_percent": "101", "tokens": "0.5"})
    assert set(e.value.errors) == {"mfu_percent", "tokens"}


def test_calculator_is_finite_at_the_extremes():
    from pylib.web import scaling_ops
    for c in ("1e-300", "1", "1e30"):
        out = scaling_ops.calculator(None, {"compute": c, "mfu_percent": "0.001", "tokens": "1e16"})
        values = [x for f in out["fits"].values() for x in (f["n"], f["d"])] + [out["llama"]["gpu_days"]]
        assert all(math.isfinite(x) and x > 0 for x in values)


def test_calculator_7b_flops_follow_the_formula():
    from pylib.web import scaling_ops
    out = scaling_ops.calculator(None, {"compute": "1e21", "mfu_percent": "50", "tokens": "1e12"})["llama"]
    assert out["flops"] == flops.shape_flops_per_token(scaling_ops.memory.LLAMA_7B) * 1e12
    assert out["gpu_days"] == pytest.approx(out["flops"] / (scaling_ops.A100_PEAK * 0.5) / 86400)


def test_isoflop_op_refuses_a_malformed_sweep_or_budget():
    from pylib.web import InputError, scaling_ops
    series = [{"budget": c, "n": [p["n"] for p in pts], "d": [p["d"] for p in pts], "loss_mean": [p["loss"] for p in pts]}
              for c, pts in ((c, [p for p in synthetic_sweep(TRUE, [c])]) for c in (1e10, 3e10, 1e11))]
    ok = scaling_ops.isoflop(None, {"series": series, "budget_index": 1, "custom_budget": "1e12"})
    assert ok["prediction"]["extrapolated"] and ok["optimum"]["inside"]
    assert ok["laws"]["a"] == pytest.approx(TRUE["beta"] / (TRUE["alpha"] + TRUE["beta"]), abs=1e-9)
    for bad in ([], None, [{"budget": 1e10}], [{"budget": 1e10, "n": [1, 2], "d": [1, 2], "loss_mean": [1, 2]}]):
        with pytest.raises(InputError):
            scaling_ops.isoflop(None, {"series": bad, "budget_index": 0})
    for index in (-1, 3, "0", True, 1.5):
        with pytest.raises(InputError):
            scaling_ops.isoflop(None, {"series": series, "budget_index": index})
    assert scaling_ops.isoflop(None, {"series": series, "budget_index": 0})["prediction"] is None  # none asked for
    for budget in ("", "  ", "NaN", "-3", "1e309", "<b>x</b>", "0"):  # the page always asks: empty is refused
        with pytest.raises(InputError) as e:
            scaling_ops.isoflop(None, {"series": series, "budget_index": 0, "custom_budget": budget})
        assert set(e.value.errors) == {"custom_budget"}


def test_isoflop_op_returns_every_budgets_profile_and_the_power_laws_line():
    from pylib.web import scaling_ops
    budgets = (1e10, 3e10, 1e11)
    series = [{"budget": c, "n": [p["n"] for p in pts], "d": [p["d"] for p in pts], "loss_mean": [p["loss"] for p in pts]}
              for c, pts in ((c, synthetic_sweep(TRUE, [c])) for c in budgets)]
    out = scaling_ops.isoflop(None, {"series": series, "budget_index": 2, "custom_budget": "3e10"})
    assert [f["budget"] for f in out["family"]] == list(budgets)
    for s, f in zip(series, out["family"]):
        opt = scaling.isoflop_optimum(s["n"], s["d"], s["loss_mean"])
        assert f["optimum"]["n"] == pytest.approx(opt["n"], rel=1e-12) and f["optimum"]["loss"] == pytest.approx(opt["loss"], rel=1e-12)
        assert len(f["curve"]["n"]) == scaling_ops.LIMITS["curve_points"]
        assert min(f["curve"]["loss"]) >= opt["loss"] - 1e-12  # the drawn parabola's lowest point is the optimum
        assert f["curve"]["n"][0] == pytest.approx(min(s["n"])) and f["curve"]["n"][-1] == pytest.approx(max(s["n"]))
    assert {k: out[k] for k in ("budget", "n", "loss", "curve", "optimum")} == {k: out["family"][2][k] for k in ("budget", "n", "loss", "curve", "optimum")}
    laws, line = out["laws"], out["laws"]["line"]
    assert line["c"] == [min(budgets), max(budgets)]
    assert line["n"] == pytest.approx([laws["k_n"] * c ** laws["a"] for c in line["c"]], rel=1e-12)
    assert laws["optima_n"] == pytest.approx([f["optimum"]["n"] for f in out["family"]], rel=1e-12)
    assert out["prediction"]["extension"] is None and not out["prediction"]["extrapolated"]
    for budget, edge in (("1e13", 1e11), ("1e8", 1e10)):  # outside: the line is extended from the nearest measured budget
        p = scaling_ops.isoflop(None, {"series": series, "budget_index": 0, "custom_budget": budget})["prediction"]
        assert p["extrapolated"] and p["extension"]["c"] == [edge, float(budget)]
        assert p["extension"]["n"] == pytest.approx([laws["k_n"] * edge ** laws["a"], p["n"]], rel=1e-12)
        assert p["decades_out"] == pytest.approx(abs(math.log10(float(budget) / edge)))
