"""Each idea layered on chapter 1's core computes, to the bit, what the all-in-one core did
(tests/allinone.py, frozen at commit b1f78d9), on the settings the chapters run."""

import dataclasses

import numpy as np
import pytest

from pylib import guards, model, mup, optim, train
from pylib import loss as xent
from pylib.studies import stability

import allinone

TOKENS = np.random.default_rng(0).integers(0, 65, 30_000).astype(np.uint16)
# 20 steps (was 40): past the warmup, into the decay, three evaluations; a layering that changed any
# bit shows at the first step it touches, and the runs compare every record and every final weight.
SHORT = dict(steps=20, warmup_steps=5, batch_size=8, eval_interval=10, eval_windows=4)


def both(mcfg, tcfg, hooks=None):
    """(new records, new params, old records, old params) of one short run, the old by the all-in-one loop."""
    new, old = train.init_train_state(mcfg, tcfg), allinone.init_train_state(mcfg, tcfg)
    for name, hook in (hooks or {}).items():
        {"batch_hook": guards.hook_batches, "grad_hook": guards.hook_grads}[name](new, hook)
        old[name] = hook
    a = train.train_steps(new, mcfg, tcfg, TOKENS, TOKENS, tcfg.steps)
    b = allinone.train_steps(old, mcfg, tcfg, TOKENS, TOKENS, tcfg.steps)
    return a, new["params"], b, old["params"]


def assert_same_run(a, pa, b, pb):
    strip = lambda records: [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in records]  # noqa: E731
    assert strip(a) == strip(b)
    for name in pb:
        assert np.array_equal(pa[name], pb[name]), name


@pytest.mark.parametrize("width,constant_decay", [(32, False), (64, False), (64, True), (128, True)])
def test_mup_groups_equal_the_per_tensor_multipliers(width, constant_decay):
    mcfg = model.GPTConfig(n_embd=width, mup_base_width=16)  # chapter 7's widths over base 16
    tcfg = train.TrainConfig(**SHORT, mup_constant_decay=constant_decay)
    assert_same_run(*both(mcfg, tcfg))


def test_mup_with_sgd_equals_the_per_tensor_multipliers():
    mcfg = model.GPTConfig(n_embd=64, mup_base_width=16)
    assert_same_run(*both(mcfg, train.TrainConfig(**SHORT, optimizer="sgd", lr=0.1)))


@pytest.mark.parametrize("weight_decay", [0.0, 0.1, 1.0])
def test_adam_l2_equals_the_decoupled_flag(weight_decay):
    tcfg = train.TrainConfig(**SHORT, optimizer="adam_l2", weight_decay=weight_decay)  # chapter 5's grid
    assert_same_run(*both(model.GPTConfig(), tcfg))


@pytest.mark.parametrize("qk_norm", [False, True])
def test_z_loss_term_equals_the_loss_flag(qk_norm):
    mcfg, tcfg = stability.attn_configs(65, qk_norm, stability.ATTN["z_loss"])  # chapter 8's setting
    tcfg = dataclasses.replace(tcfg, steps=20, eval_interval=10, eval_windows=4)  # past its 10-step warmup
    a, pa, b, pb = both(mcfg, tcfg)
    for name in pb:  # the same gradients at every step, so the same weights
        assert np.array_equal(pa[name], pb[name]), name
    # The loss is cross-entropy + the term, added in float64; the old code added them in float32.
    assert [r["loss"] for r in a] == pytest.approx([r["loss"] for r in b], rel=2 ** -22)


def test_z_loss_gradient_is_the_old_one_bit_for_bit():
    mcfg = model.GPTConfig()
    params = model.init_params(mcfg, 0)
    x = TOKENS[:8 * 64].reshape(8, 64).astype(np.int64)
    y = TOKENS[1:8 * 64 + 1].reshape(8, 64).astype(np.int64)
    for name in params:
        params[name] *= 5.0  # larger logits, so the term matters
    _, new = model.z_loss_and_grads(params, mcfg, x, y, 1e-2, denom=512)
    _, old = allinone.loss_and_grads(params, mcfg, x, y, denom=512, z_loss=1e-2)
    for name in old:
        assert np.array_equal(new[name], old[name]), name
    logits = model.forward_logits(params, mcfg, x)
    assert np.array_equal(xent.log_normaliser(logits), allinone.cross_entropy_forward(logits, y, z_loss=1.0)[1][6])


@pytest.mark.parametrize("reset_positions", [False, True])
def test_doc_forward_equals_the_forward_flags(reset_positions):
    mcfg = model.GPTConfig()
    params = model.init_params(mcfg, 1)
    x = TOKENS[:4 * 64].reshape(4, 64).astype(np.int64) % 64
    x[:, [9, 30, 31, 50]] = 64  # end-of-document tokens: several documents per window
    y = np.roll(x, -1, axis=1)
    doc_ids = __import__("pylib.data", fromlist=["doc_ids_from_eos"]).doc_ids_from_eos(x, 64)
    new = model.doc_forward(params, mcfg, x, doc_ids, reset_positions)[0]
    old = allinone.forward(params, mcfg, x, doc_ids, reset_positions)[0]
    assert np.array_equal(new, old)
    loss_new, g_new = model.doc_loss_and_grads(params, mcfg, x, y, doc_ids, reset_positions)
    loss_old, g_old = allinone.loss_and_grads(params, mcfg, x, y, doc_ids=doc_ids, reset_positions=reset_positions)
    assert loss_new == loss_old
    for name in g_old:
        assert np.array_equal(g_new[name], g_old[name]), name


@pytest.mark.parametrize("decay_frac", [0.1, 0.2, 0.5])
def test_wsd_config_equals_the_schedule_flag(decay_frac):
    tcfg = train.TrainConfig(**SHORT, schedule="wsd", decay_frac=decay_frac)  # chapter 6
    assert_same_run(*both(model.GPTConfig(), tcfg))


def test_skipping_and_hooks_equal_the_loop_flags():
    # Chapter 8's bad-batch run: repeated-token batches at three steps, skipping on, per-layer norms.
    mcfg, tcfg = stability.bad_configs(65, "skip", seed=1)
    tcfg = dataclasses.replace(tcfg, steps=40, eval_interval=10, eval_windows=4)
    hooks = {"batch_hook": stability.bad_batch_hook({25, 26, 27}, 7), "grad_hook": stability.grad_norm_hook(mcfg)}
    a, pa, b, pb = both(mcfg, tcfg, hooks)
    assert_same_run(a, pa, b, pb)
    assert [r["step"] for r in a if r.get("skipped")]  # the rule did act


def test_clipping_cure_equals_the_loop_flags():
    mcfg, tcfg = stability.bad_configs(65, "clip", seed=0)
    tcfg = dataclasses.replace(tcfg, steps=40, eval_interval=10, eval_windows=4)
    a, pa, b, pb = both(mcfg, tcfg, {"batch_hook": stability.bad_batch_hook({25, 26, 27}, 7)})
    assert_same_run(a, pa, b, pb)
    assert any(r.get("clipped") for r in a)


def test_chapter_one_run_is_unchanged():
    assert_same_run(*both(model.GPTConfig(), train.TrainConfig(**SHORT)))


def test_adamw_step_on_separate_arrays_writes_back():
    params = {n: v.copy() for n, v in model.init_params(model.GPTConfig(), 0).items()}  # not one buffer
    ref = {n: v.copy() for n, v in params.items()}
    grads = {n: np.full_like(v, 1e-2) for n, v in params.items()}
    optim.adamw_step(params, grads, optim.adamw_init(params), 1e-2, weight_decay=0.1)
    allinone.adamw_step(ref, grads, optim.adamw_init(ref), 1e-2, weight_decay=0.1)
    for name in ref:
        assert np.array_equal(params[name], ref[name]), name
    mult = {n: 0.25 if n.endswith("c_fc.weight") else 1.0 for n in params}  # two groups, separate arrays
    mup.grouped_step(optim.adamw_step, params, grads, mup.grouped_init(optim.adamw_init, params, mult), 1e-2, mult,
                     weight_decay=0.1)
    allinone.adamw_step(ref, grads, optim.adamw_init(ref), 1e-2, weight_decay=0.1, lr_mult=mult)
    for name in ref:
        assert np.array_equal(params[name], ref[name]), name


@pytest.mark.parametrize("recipe", ["bf16_master", "fp16_dynamic", "fp8"])
def test_rounding_recipes_equal_the_all_in_one_core(recipe, monkeypatch):
    # Chapter 9's recipes round through layers.MATMUL_INPUT (a hook the layering left as it was) and
    # run their own loop over the core's loss and AdamW: the same bits with the old core patched in.
    from pylib.systems import mixed_precision as mp

    mcfg, tcfg = model.GPTConfig(), train.TrainConfig(**SHORT)
    new = mp.train_recipe(mcfg, tcfg, TOKENS, TOKENS, recipe)
    monkeypatch.setattr(optim, "adamw_step", allinone.adamw_step)
    monkeypatch.setattr(xent, "cross_entropy_forward", allinone.cross_entropy_forward)
    monkeypatch.setattr(xent, "cross_entropy_backward", allinone.cross_entropy_backward)
    old = mp.train_recipe(mcfg, tcfg, TOKENS, TOKENS, recipe)
    assert_same_run(new[1], new[0], old[1], old[0])


@pytest.mark.parametrize("mcfg", [model.GPTConfig(), model.GPTConfig(n_embd=32, mup_base_width=16)])
def test_loop_config_trains_as_train_config_defaults(mcfg):
    # Chapter 1's LoopConfig runs the loop with TrainConfig's defaults for every later option.
    runs = []
    for cfg in (train.LoopConfig(**SHORT), train.TrainConfig(**SHORT)):
        state = train.init_train_state(mcfg, cfg)
        runs += [train.train_steps(state, mcfg, cfg, TOKENS, TOKENS, cfg.steps), state["params"]]
    assert_same_run(*runs)
