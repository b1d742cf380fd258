"""The whole model: size, gradients, causality, initial loss, masking and gradient accumulation."""

import math

import numpy as np

from pylib import loss as xent
from pylib import model, optim

CFG = model.GPTConfig()


def batch(B, T, seed=0, V=CFG.vocab_size):
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


# ---------------------------------------------------------------------------


def test_param_count_is_5376():
    assert model.count_params(CFG) == 5376
    assert sum(p.size for p in model.init_params(CFG, 0).values()) == 5376


def test_presets_build_and_count():
    assert model.GPTConfig.preset("decoder-5k") == CFG
    for cfg in model.PRESETS.values():
        assert sum(p.size for p in model.init_params(cfg, 0).values()) == model.count_params(cfg)


def test_init_follows_nanogpt():
    p = model.init_params(model.GPTConfig(n_layer=4, n_embd=64, n_head=4), 0)
    assert abs(p["h.0.mlp.c_fc.weight"].std() - 0.02) < 0.001
    assert abs(p["h.0.mlp.c_proj.weight"].std() - 0.02 / math.sqrt(8)) < 0.0005  # 0.02 / sqrt(2L)
    assert (p["h.0.ln_1.weight"] == 1).all() and (p["h.0.attn.c_attn.bias"] == 0).all()


def test_every_param_gradient_matches_finite_differences():
    # Every element of every parameter (all 5,376), float64, centred differences with h = 1e-5.
    # Per tensor, the max error relative to the tensor's largest gradient must be < 1e-6.
    # B=2, T=8 keeps it fast; wpe rows 8..63 are unused and must have gradient exactly 0.
    params = model.init_params(CFG, 0, dtype=np.float64)
    rng = np.random.default_rng(1)
    for name in params:  # move off the init (zero biases, unit LN weights) to a generic point
        params[name] += 0.1 * rng.standard_normal(params[name].shape)
    x, y = batch(2, 8, seed=2)
    _, grads = model.loss_and_grads(params, CFG, x, y)
    h = 1e-5
    for name, p in params.items():
        numeric = np.zeros_like(p)
        for i in np.ndindex(p.shape):
            old = p[i]
            p[i] = old + h
            plus = model.evaluate_loss(params, CFG, x, y)
            p[i] = old - h
            minus = model.evaluate_loss(params, CFG, x, y)
            p[i] = old
            numeric[i] = (plus - minus) / (2 * h)
        scale = max(np.abs(numeric).max(), np.abs(grads[name]).max())
        assert scale > 0, name
        err = np.abs(numeric - grads[name]).max() / scale
        assert err < 1e-6, f"{name}: relative error {err:.2e}"
    assert (grads["wpe"][8:] == 0).all()


def test_model_is_causal():
    params = model.init_params(CFG, 0, dtype=np.float64)
    x, _ = batch(2, CFG.block_size)
    logits = model.forward_logits(params, CFG, x)
    t = 20
    x2 = x.copy()
    x2[:, t] = (x2[:, t] + 1) % CFG.vocab_size
    logits2 = model.forward_logits(params, CFG, x2)
    np.testing.assert_array_equal(logits[:, :t], logits2[:, :t])  # the past is untouched, exactly
    assert (np.abs(logits[:, t:] - logits2[:, t:]).max(axis=-1) > 0).all()  # every later position sees it


def test_initial_loss_is_ln_vocab():
    # At init the logits are ln_f(x) . wte with wte ~ N(0, 0.02): their spread is about
    # 0.02 * sqrt(C) = 0.08, which raises the expected loss above ln V by about 0.08^2 / 2 = 0.003.
    # Averaged over 1,024 targets the estimate varies by less than that again, so 0.02 is a margin
    # of several times the expected gap, and far below the distance to any trained loss (< 3.5).
    params = model.init_params(CFG, 0)
    x, y = batch(16, 64, seed=3)
    loss = model.evaluate_loss(params, CFG, x, y)
    assert abs(loss - math.log(CFG.vocab_size)) < 0.02


def test_model_can_overfit_one_batch():
    params = model.init_params(CFG, 0)
    state = optim.adamw_init(params)
    x, y = batch(4, 32, seed=4)
    first = None
    for _ in range(300):
        loss, grads = model.loss_and_grads(params, CFG, x, y)
        first = loss if first is None else first
        optim.adamw_step(params, grads, state, lr=3e-2, beta1=0.9, beta2=0.99)
    assert first > 4.0 and loss < 0.5  # 128 random targets memorised by 5,376 parameters


def test_masked_cross_entropy_ignores_masked_positions():
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((2, 6, 7))
    targets = rng.integers(0, 7, (2, 6))
    mask = np.array([[1, 1, 0, 1, 0, 0], [0, 1, 1, 1, 1, 0]])
    loss, cache = xent.cross_entropy_forward(logits, targets, mask)
    dlogits = xent.cross_entropy_backward(cache)
    # the loss is the mean over the 7 counted positions, computed the slow way
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, targets[..., None], -1)[..., 0]
    assert abs(loss - nll[mask == 1].mean()) < 1e-12
    assert (dlogits[mask == 0] == 0).all()
    # changing logits and targets at masked positions changes nothing
    logits2, targets2 = logits.copy(), targets.copy()
    logits2[mask == 0] += 5 * rng.standard_normal((int((mask == 0).sum()), 7))
    targets2[mask == 0] = (targets2[mask == 0] + 1) % 7
    loss2, cache2 = xent.cross_entropy_forward(logits2, targets2, mask)
    assert loss2 == loss
    np.testing.assert_array_equal(xent.cross_entropy_backward(cache2)[mask == 1], dlogits[mask == 1])


def test_grad_accumulation_matches_large_batch():
    params = model.init_params(CFG, 0, dtype=np.float64)
    x, y = batch(8, 16, seed=6)
    rng = np.random.default_rng(7)
    mask = (rng.random((8, 16)) < np.linspace(0.2, 0.9, 8)[:, None]).astype(np.int64)
    big_loss, big_grads = model.loss_and_grads(params, CFG, x, y, mask)
    parts = [slice(2 * i, 2 * i + 2) for i in range(4)]
    counts = [xent.count_targets(y[s], mask[s]) for s in parts]
    assert len(set(counts)) == 4  # the microbatches count different numbers of tokens
    total = sum(counts)
    acc_loss, acc_grads = 0.0, {k: np.zeros_like(v) for k, v in params.items()}
    mom_loss, mom_grads = 0.0, {k: np.zeros_like(v) for k, v in params.items()}  # mean of means
    for s in parts:
        loss, grads = model.loss_and_grads(params, CFG, x[s], y[s], mask[s], denom=total)
        acc_loss += loss
        mean_loss, mean_grads = model.loss_and_grads(params, CFG, x[s], y[s], mask[s])
        mom_loss += mean_loss / 4
        for k in params:
            acc_grads[k] += grads[k]
            mom_grads[k] += mean_grads[k] / 4
    assert abs(acc_loss - big_loss) < 1e-12
    for k in params:
        np.testing.assert_allclose(acc_grads[k], big_grads[k], rtol=1e-9, atol=1e-14)
    assert abs(mom_loss - big_loss) > 1e-3  # the mean of means is a different objective...
    assert np.abs(mom_grads["wte"] - big_grads["wte"]).max() > 1e-2 * np.abs(big_grads["wte"]).max()  # ...and gradient


def test_loss_sum_and_count_add_up_over_microbatches():
    params = model.init_params(CFG, 0, dtype=np.float64)
    x, y = batch(4, 8, seed=8)
    sums, counts = zip(*[model.loss_sum_and_grads(params, CFG, x[i:i + 1], y[i:i + 1])[:2] for i in range(4)])
    assert abs(sum(sums) / sum(counts) - model.evaluate_loss(params, CFG, x, y)) < 1e-12


def test_float32_forward_matches_float64():
    p64 = model.init_params(CFG, 0, dtype=np.float64)
    rng = np.random.default_rng(9)
    for name in p64:
        p64[name] += 0.3 * rng.standard_normal(p64[name].shape)  # larger, trained-like weights
    p32 = {k: v.astype(np.float32) for k, v in p64.items()}
    x, y = batch(4, 64, seed=10)
    l64, l32 = model.forward_logits(p64, CFG, x), model.forward_logits(p32, CFG, x)
    assert l32.dtype == np.float32
    np.testing.assert_allclose(l32, l64, rtol=0, atol=1e-4 * np.abs(l64).max())
    _, g32 = model.loss_and_grads(p32, CFG, x, y)
    _, g64 = model.loss_and_grads(p64, CFG, x, y)
    for k in g64:
        assert g32[k].dtype == np.float32
        np.testing.assert_allclose(g32[k], g64[k], rtol=0, atol=1e-3 * np.abs(g64[k]).max())
