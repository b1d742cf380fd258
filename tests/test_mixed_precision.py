"""Mixed-precision recipes on the course model (pylib.systems.mixed_precision) and layers' rounding hook."""

import dataclasses

import numpy as np
import pytest

from pylib import data, layers, model, train
from pylib.systems import mixed_precision as mp, precision


@pytest.fixture(scope="module")
def tokens():
    # A synthetic, learnable stream (a cycle of 13 tokens with 10% noise): the recipes' plumbing, not the corpus.
    rng = np.random.default_rng(0)

    def stream(n):
        t = (np.arange(n) % 13) * 5
        noise = rng.random(n) < 0.1
        t[noise] = rng.integers(0, 65, int(noise.sum()))
        return t
    return stream(20_000), stream(5_000)


CFG = model.GPTConfig()


def short(steps=30, **kw):
    return train.TrainConfig(steps=steps, eval_interval=10, eval_windows=8, warmup_steps=5, **kw)


def batch(seed=0, B=4):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 65, (B, 64)), rng.integers(0, 65, (B, 64))


def test_no_hook_and_identity_hook_give_bit_identical_loss_and_grads():
    params = model.init_params(CFG, 0)
    x, y = batch()
    l0, g0 = model.loss_and_grads(params, CFG, x, y)
    roles = set()
    layers.MATMUL_INPUT = lambda a, role: (roles.add(role), a)[1]
    try:
        l1, g1 = model.loss_and_grads(params, CFG, x, y)
    finally:
        layers.MATMUL_INPUT = None
    assert l0 == l1 and roles == {"activation", "weight", "grad"}
    for k in g0:
        assert np.array_equal(g0[k].view(np.uint32), g1[k].view(np.uint32)), k


def test_fp32_recipe_is_pylib_train_bit_for_bit(tokens):
    tr, va = tokens
    tcfg = short()
    p_ref, h_ref = train.train(CFG, tcfg, tr, va)
    p, h = mp.train_recipe(CFG, tcfg, tr, va, "fp32")
    assert [r["loss"] for r in h] == [r["loss"] for r in h_ref]
    for k in p:
        assert np.array_equal(p[k], p_ref[k]), k
    assert layers.MATMUL_INPUT is None  # the hook is restored


def test_bf16_recipe_rounds_every_matmul_input_to_bf16():
    params = model.init_params(CFG, 0)
    x, y = batch()
    seen = []
    with mp.matmul_rounding(mp.RECIPES["bf16_master"]):
        inner = layers.MATMUL_INPUT

        def spy(a, role):
            r = inner(a, role)
            seen.append(r)
            return r
        layers.MATMUL_INPUT = spy
        model.loss_and_grads(params, CFG, x, y)
        layers.MATMUL_INPUT = inner
    assert layers.MATMUL_INPUT is None and len(seen) > 20
    for r in seen:
        assert np.array_equal(precision.round_to(r, "bf16"), r)  # already bf16 values


def test_bf16_step_is_close_to_fp32_within_the_unit_roundoff_bound():
    tcfg = short()
    x, y = batch(1, 16)
    out = mp.one_step_comparison(CFG, tcfg, x, y, "bf16_master")
    assert 0 < out["logits_rel"] <= out["tolerance_logits"]
    assert 0 < out["grads_rel_all"] <= out["tolerance_grads"]
    assert out["update_sign_differs"] <= out["unresolved_fraction"]


def test_pure_bf16_weights_stay_bf16_and_lose_updates(tokens):
    tr, va = tokens
    state = mp.init_state(CFG, short(20), "bf16_pure")
    recs = mp.recipe_steps(state, CFG, short(20), tr, va, 20)
    flat = np.concatenate([p.ravel() for p in state["params"].values()])
    assert np.array_equal(precision.round_to(flat, "bf16"), flat)
    assert np.array_equal(precision.round_to(state["opt"]["v"], "bf16"), state["opt"]["v"])
    assert all(0 <= r["lost"] <= 1 for r in recs) and max(r["lost"] for r in recs) > 0


def test_stochastic_rounding_loses_fewer_updates_than_nearest(tokens):
    tr, va = tokens
    lost = {}
    for name in ("bf16_pure", "bf16_pure_sr"):
        state = mp.init_state(CFG, short(40), name)
        lost[name] = np.mean([r["lost"] for r in mp.recipe_steps(state, CFG, short(40), tr, va, 40)])
    assert lost["bf16_pure_sr"] < lost["bf16_pure"]


def test_fp16_without_scaling_flushes_gradients_and_scaling_recovers_them(tokens):
    tr, va = tokens
    flushed = {}
    for name in ("fp16_noscale", "fp16_dynamic"):
        state = mp.init_state(CFG, short(10), name)
        flushed[name] = np.mean([r["flushed"] for r in mp.recipe_steps(state, CFG, short(10), tr, va, 10)])
    assert flushed["fp16_noscale"] > 10 * flushed["fp16_dynamic"] and flushed["fp16_noscale"] > 0.01


class TestDynamicLossScaler:
    def test_overflow_halves_the_scale_and_resets_the_count(self):
        s = mp.DynamicLossScaler(init_scale=1024.0, growth_interval=3)
        s.update(False)
        s.update(False)
        s.update(True)
        assert s.scale == 512.0 and s.clean_steps == 0

    def test_growth_after_n_clean_steps(self):
        s = mp.DynamicLossScaler(init_scale=8.0, growth_interval=3)
        for _ in range(3):
            s.update(False)
        assert s.scale == 16.0 and s.clean_steps == 0
        s.update(False)
        assert s.scale == 16.0

    def test_unscale_divides_and_detects_inf(self):
        s = mp.DynamicLossScaler(init_scale=4.0)
        g = {"a": np.array([4.0, 8.0], np.float32), "b": np.array([np.inf], np.float32)}
        assert s.unscale_(g) is False
        assert g["a"].tolist() == [1.0, 2.0]
        assert s.unscale_({"a": np.array([4.0], np.float32)}) is True

    def test_bad_settings_raise(self):
        with pytest.raises(ValueError):
            mp.DynamicLossScaler(growth_factor=1.0)


def test_loss_scaling_skips_overflowing_steps_and_unscales_before_clipping(tokens):
    tr, va = tokens
    tcfg = short(20)
    state = mp.init_state(CFG, tcfg, "fp16_dynamic")
    state["scaler"] = mp.DynamicLossScaler(init_scale=2.0 ** 24, growth_interval=1000)  # overflows fp16 at first
    before = {k: v.copy() for k, v in state["params"].items()}
    first = mp.recipe_steps(state, CFG, tcfg, tr, va, 1)[0]
    assert first.get("skipped") and first["scale"] == 2.0 ** 24 and first["grad_norm"] is None
    for k in before:  # a skipped step changes no weight
        assert np.array_equal(before[k], state["params"][k]), k
    recs = [first] + mp.recipe_steps(state, CFG, tcfg, tr, va, 19)
    assert recs[1]["scale"] == 2.0 ** 23  # halved after the skip
    applied = [r for r in recs if not r.get("skipped")]
    assert applied, "the scale came down into fp16's range and steps were applied"
    assert all(r["scale"] < 2.0 ** 24 for r in applied)
    # Unscaled before clipping: the reported norm is the true gradient's, the same size as fp32's
    # at those weights (scaled, it would be s times larger and always clipped to nothing).
    assert 0.01 < applied[0]["grad_norm"] < 100


def test_fp8_scaling_puts_each_tensor_amax_in_range():
    rng = np.random.default_rng(0)
    g = (rng.standard_normal(1000) * 1e-7).astype(np.float32)  # far below E5M2's smallest subnormal x 2^10
    plain = mp.round_tensor(g, "fp8_e5m2")
    scaled = mp.round_tensor(g, "fp8_e5m2", amax_scaling=True)
    assert np.count_nonzero(plain) == 0
    assert np.count_nonzero(scaled) == np.count_nonzero(g)
    assert np.abs(scaled - g).max() <= 0.13 * np.abs(g).max()  # 2 mantissa bits: relative step 2^-2 at worst
    assert mp.pow2_scale(0.0, "fp8_e4m3") == 1.0 and mp.pow2_scale(448.0, "fp8_e4m3") == 1.0


@pytest.mark.parametrize("name", list(mp.RECIPES))
def test_every_recipe_trains_without_diverging(tokens, name):
    tr, va = tokens
    _, h = mp.train_recipe(CFG, short(30), tr, va, name)
    assert not any(r.get("diverged") for r in h)
    assert h[-1]["loss"] < h[0]["loss"]


def test_unknown_recipe_and_unsupported_settings_raise():
    with pytest.raises(ValueError, match="unknown recipe"):
        mp.recipe("fp4")
    with pytest.raises(ValueError):
        mp.init_state(CFG, dataclasses.replace(short(), optimizer="sgd"), "fp32")


# ---------------------------------------------------------------------------
# Resuming a mixed-precision run (chapter 15)


def _strip_timing(records):
    return [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in records]


@pytest.mark.parametrize("rec_name", ["fp16_dynamic", "bf16_pure_sr"])
def test_a_mixed_precision_resume_is_the_uninterrupted_run_bit_for_bit(tokens, rec_name):
    """Saved with pylib.checkpoint and resumed through resume_state: every record (the loss scale
    of every step included) and every final weight equal the run that never stopped."""
    from pylib import checkpoint
    tr, va = tokens
    tcfg = short(40)
    full_state = mp.init_state(CFG, tcfg, rec_name)
    if rec_name == "fp16_dynamic":  # start where fp16 overflows, so the scale moves before the save
        full_state["scaler"] = mp.DynamicLossScaler(init_scale=2.0 ** 24, growth_interval=4)
    full = mp.recipe_steps(full_state, CFG, tcfg, tr, va, 40)
    state = mp.init_state(CFG, tcfg, rec_name)
    state["scaler"] = full_state["scaler"] and mp.DynamicLossScaler(init_scale=2.0 ** 24, growth_interval=4)
    head = mp.recipe_steps(state, CFG, tcfg, tr, va, 13)
    blob = checkpoint.checkpoint_bytes(state, CFG, tcfg)
    loaded, mcfg, lcfg, _ = checkpoint.load_checkpoint(blob, CFG)
    if rec_name == "fp16_dynamic":
        assert {r["scale"] for r in head} != {2.0 ** 24}, "the scale never moved before the save: a weak test"
        fresh = mp.resume_state(dict(loaded), rec_name)  # what a resume without the scaler's state would do
        fresh["scaler"] = mp.DynamicLossScaler(growth_interval=4)  # init_scale again
        assert mp.recipe_steps(fresh, CFG, lcfg, tr, va, 1)[0]["scale"] != full[13]["scale"]
        loaded, *_ = checkpoint.load_checkpoint(blob, CFG)
    resumed = mp.resume_state(loaded, rec_name)
    tail = mp.recipe_steps(resumed, CFG, lcfg, tr, va, 40)
    assert _strip_timing(head + tail) == _strip_timing(full)
    for name in full_state["params"]:
        np.testing.assert_array_equal(resumed["params"][name], full_state["params"][name])


def test_a_loss_scaler_refuses_a_bad_state():
    s = mp.DynamicLossScaler()
    good = {**mp.DynamicLossScaler(growth_interval=8).state_dict(), "scale": 512.0, "clean_steps": 3.0}
    s.load_state_dict(good)
    assert (s.scale, s.clean_steps, s.growth_interval) == (512.0, 3, 8)
    for key, value in (("scale", 0.0), ("scale", float("inf")), ("clean_steps", 8), ("clean_steps", 1.5),
                       ("scale", "2"), ("growth_factor", 1.0), ("backoff_factor", 1.0), ("growth_interval", 0)):
        with pytest.raises(ValueError):
            s.load_state_dict({**good, key: value})
    assert (s.scale, s.clean_steps, s.growth_interval) == (512.0, 3, 8)  # a refused state changes nothing
