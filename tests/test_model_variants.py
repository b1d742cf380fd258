"""The model's variants (RMSNorm, post-norm, QK-norm, muP, init scale, z-loss), gradient-checked,
and the trainer's options that go with them (schedules, Adam with L2, outlier skipping, hooks)."""

import dataclasses
import math

import numpy as np
import pytest

from pylib import guards, layers, model, mup, optim, schedules, train
from pylib import loss as xent
from pylib.studies.gradcheck import check_layer

SMALL = model.GPTConfig(block_size=8, n_layer=2, n_head=2, n_embd=8, vocab_size=11)
VARIANTS = {
    "rmsnorm": dict(norm="rmsnorm"),
    "post": dict(norm_position="post"),
    "post-rmsnorm": dict(norm_position="post", norm="rmsnorm"),
    "qk_norm": dict(qk_norm=True),
    "mup": dict(mup_base_width=4),  # n_embd 8 = 2x the base width
    "mup-no-output-mult": dict(mup_base_width=4, mup_output_mult=False),
    "init_std": dict(init_std=0.3),
}


def batch(cfg, B=2, seed=2):
    rng = np.random.default_rng(seed)
    T = cfg.block_size
    return rng.integers(0, cfg.vocab_size, (B, T)), rng.integers(0, cfg.vocab_size, (B, T))


def max_relative_errors(cfg, z_loss=0.0, h=1e-5):
    """Per tensor: max |analytic - centred difference| / the tensor's largest gradient, float64."""
    params = model.init_params(cfg, 0, dtype=np.float64)
    rng = np.random.default_rng(1)
    for name in params:  # off the init (unit gains, zero biases) to a generic point
        params[name] += 0.1 * rng.standard_normal(params[name].shape)
    x, y = batch(cfg)
    # loss_and_grads's loss (its forward and cross-entropy), without the cost of a backward per nudge
    if z_loss:
        loss_fn = lambda: xent.z_loss_forward(model.forward_logits(params, cfg, x), y, z_loss)[0]  # noqa: E731
        loss, grads = model.z_loss_and_grads(params, cfg, x, y, z_loss)
    else:
        loss_fn = lambda: xent.cross_entropy_forward(model.forward_logits(params, cfg, x), y)[0]  # noqa: E731
        loss, grads = model.loss_and_grads(params, cfg, x, y)
    assert loss_fn() == loss
    errors = {}
    for name, p in params.items():
        numeric = np.zeros_like(p)
        for i in np.ndindex(p.shape):
            old = p[i]
            p[i] = old + h
            plus = loss_fn()
            p[i] = old - h
            minus = loss_fn()
            p[i] = old
            numeric[i] = (plus - minus) / (2 * h)
        scale = max(np.abs(numeric).max(), np.abs(grads[name]).max())
        errors[name] = float(np.abs(numeric - grads[name]).max() / scale) if scale > 0 else 0.0
    return errors


# ---------------------------------------------------------------------------
# Backward passes


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_gradients_match_finite_differences(variant):
    cfg = dataclasses.replace(SMALL, **VARIANTS[variant])
    errors = max_relative_errors(cfg)
    worst = max(errors, key=errors.get)
    assert errors[worst] < 1e-6, f"{variant}: {worst} relative error {errors[worst]:.2e}"


def test_z_loss_gradient_matches_finite_differences():
    errors = max_relative_errors(SMALL, z_loss=1e-2)
    worst = max(errors, key=errors.get)
    assert errors[worst] < 1e-6, f"{worst} relative error {errors[worst]:.2e}"


def test_rmsnorm_backward_matches_finite_differences():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4, 6)), rng.standard_normal(6)
    errors = check_layer(lambda x, w: layers.rmsnorm_forward(x, w), layers.rmsnorm_backward, [x, w])
    assert max(errors) < 1e-7


def test_rmsnorm_output_has_unit_rms():
    x = np.random.default_rng(0).standard_normal((5, 16)) * 7 + 3
    out, _ = layers.rmsnorm_forward(x, np.ones(16), eps=0.0)
    assert np.allclose(np.sqrt((out**2).mean(-1)), 1.0)


def test_z_loss_adds_mean_squared_log_normaliser():
    from pylib import loss as xent

    rng = np.random.default_rng(0)
    logits, t = rng.standard_normal((4, 5)) * 3, rng.integers(0, 5, 4)
    ce, _ = xent.cross_entropy_forward(logits, t)
    total, _ = xent.z_loss_forward(logits, t, 0.1)
    lse = np.log(np.exp(logits).sum(-1))
    assert total == pytest.approx(ce + 0.1 * (lse**2).mean(), rel=1e-12)


# ---------------------------------------------------------------------------
# Shapes and init


def test_variant_param_counts():
    base = model.count_params(model.GPTConfig())
    C, L, D = 16, 1, 8
    rms = model.GPTConfig(norm="rmsnorm")
    assert model.count_params(rms) == base - (2 * L + 1) * C  # no norm biases
    assert model.count_params(model.GPTConfig(qk_norm=True)) == base + 2 * L * D
    assert model.count_params(model.GPTConfig(norm_position="post")) == base


def test_default_model_is_unchanged_by_the_variant_switches():
    cfg = model.GPTConfig()
    same = dataclasses.replace(cfg, mup_base_width=cfg.n_embd)  # muP at its base width is SP
    x, y = batch(cfg)
    a = model.evaluate_loss(model.init_params(cfg, 3), cfg, x, y)
    b = model.evaluate_loss(model.init_params(same, 3), same, x, y)
    assert a == b


def test_mup_scales_hidden_init_and_learning_rate_with_width():
    wide = model.GPTConfig(n_embd=64, n_head=2, mup_base_width=16)  # width_mult 4
    p = model.init_params(wide, 0, dtype=np.float64)
    assert p["h.0.mlp.c_fc.weight"].std() == pytest.approx(0.02 / 2, rel=0.05)
    assert p["wte"].std() == pytest.approx(0.02, rel=0.05)  # embeddings keep their init
    mult = model.lr_multipliers(wide)
    assert mult["h.0.attn.c_attn.weight"] == 0.25 and mult["wte"] == 1.0 and mult["h.0.ln_1.weight"] == 1.0
    assert wide.attn_scale == pytest.approx(math.sqrt(8) / 32)


def test_trace_records_the_residual_stream():
    cfg = dataclasses.replace(SMALL, n_layer=3)
    trace = []
    x, _ = batch(cfg)
    model.traced_forward(model.init_params(cfg, 0), cfg, x, trace)
    assert len(trace) == 4 and trace[0].shape == (2, cfg.block_size, cfg.n_embd)


# ---------------------------------------------------------------------------
# Trainer options


def test_wsd_is_flat_then_decays_linearly_to_min_lr():
    lrs = [schedules.wsd_lr(s, 1.0, 10, 100, 0.1, decay_frac=0.2) for s in range(101)]
    assert lrs[10] == lrs[79] == 1.0
    assert lrs[80] == 1.0 and lrs[90] == pytest.approx(0.55) and lrs[100] == 0.1
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))


def test_adam_l2_differs_from_decoupled_decay():
    params = model.init_params(model.GPTConfig(), 0, dtype=np.float64)
    grads = {k: np.full_like(v, 1e-3) for k, v in params.items()}
    out = {}
    for decoupled in (True, False):
        p = {k: v.copy() for k, v in params.items()}
        p = model.pack_params(p)
        step = optim.adamw_step if decoupled else optim.adam_l2_step
        step(p, {k: g.copy() for k, g in grads.items()}, optim.adamw_init(p), 1e-2, eps=1e-12, weight_decay=0.1)
        out[decoupled] = p
    # Decoupled: every decayed weight shrinks by exactly lr * wd * w, on top of the Adam step.
    w0 = params["h.0.mlp.c_fc.weight"]
    assert np.allclose(out[True]["h.0.mlp.c_fc.weight"], w0 * (1 - 1e-3) - 1e-2, atol=1e-9)
    # L2: wd * w joins the gradient and is normalised with it, so the decay is not proportional to w.
    assert not np.allclose(out[False]["h.0.mlp.c_fc.weight"], out[True]["h.0.mlp.c_fc.weight"], atol=1e-6)
    assert np.array_equal(out[False]["h.0.ln_1.bias"], out[True]["h.0.ln_1.bias"])  # no decay there


def test_outlier_skipping_drops_a_corrupted_batch():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 65, 20000)
    cfg = model.GPTConfig()
    tc = train.TrainConfig(steps=30, batch_size=4, eval_interval=100, eval_windows=2, skip_factor=3.0,
                           grad_clip=0.0)
    state = train.init_train_state(cfg, tc)

    def corrupt(step, x, y):  # step 20: every input token and target the same id
        return (np.zeros_like(x), np.zeros_like(y)) if step == 20 else (x, y)

    guards.hook_batches(state, corrupt)
    seen = []
    guards.hook_grads(state, lambda record, grads: seen.append(record["step"]))
    records = train.train_steps(state, cfg, tc, tokens, tokens, 30)
    assert seen == list(range(30))
    skipped = [r["step"] for r in records if r.get("skipped")]
    assert skipped == [20]


def test_mup_constant_decay_keeps_lr_times_wd_for_scaled_tensors():
    # mup's MuAdamW default (decoupled_wd=False) divides a hidden matrix's lr by the width multiplier
    # and multiplies its weight decay by it: the decay lr * wd is the base model's. The default here
    # scales the decay with the lr multiplier; constant_decay=True is mup's rule. The Adam step is the
    # same in both (the multiplier still scales it).
    cfg = dataclasses.replace(model.GPTConfig(), n_embd=64, mup_base_width=16)
    mult = model.lr_multipliers(cfg)
    params = model.init_params(cfg, 0, dtype=np.float64)
    grads = {k: np.zeros_like(v) for k, v in params.items()}  # no gradient: only the decay moves weights
    out = {}
    for mult_decay in (True, False):
        p = model.pack_params({k: v.copy() for k, v in params.items()})
        mup.grouped_step(optim.adamw_step, p, grads, mup.grouped_init(optim.adamw_init, p, mult), 1e-2, mult,
                         weight_decay=0.1, constant_decay=not mult_decay)
        out[mult_decay] = p
    hidden = "h.0.mlp.c_fc.weight"
    assert mult[hidden] == pytest.approx(0.25)
    w0 = params[hidden]
    assert np.allclose(out[True][hidden], w0 * (1 - 1e-3 * 0.25), rtol=0, atol=1e-15)
    assert np.allclose(out[False][hidden], w0 * (1 - 1e-3), rtol=0, atol=1e-15)
    assert np.array_equal(out[True]["wte"], out[False]["wte"])  # multiplier 1: the two rules agree


def test_mup_constant_decay_is_off_by_default_and_reaches_the_optimiser():
    assert train.TrainConfig().mup_constant_decay is False
    cfg = dataclasses.replace(model.GPTConfig(), n_embd=32, mup_base_width=16)
    tokens = np.random.default_rng(0).integers(0, cfg.vocab_size, 5000)
    finals = {}
    for flag in (False, True):
        tc = train.TrainConfig(steps=3, batch_size=2, eval_interval=100, eval_windows=1, weight_decay=0.5,
                               mup_constant_decay=flag)
        finals[flag] = train.train(cfg, tc, tokens, tokens)[0]["h.0.mlp.c_fc.weight"]
    assert not np.allclose(finals[False], finals[True])
