"""pylib.systems.flops: C ≈ 6ND against a count of the matmuls pylib's own step performs."""

import math

import numpy as np
import pytest

from pylib import model
from pylib.systems import flops, memory

CONFIGS = {
    "course": model.GPTConfig(),
    "2x32": model.GPTConfig(n_layer=2, n_head=4, n_embd=32),
    "rmsnorm_no_bias_post": model.GPTConfig(norm="rmsnorm", bias=False, norm_position="post"),
    "rmsnorm_bias": model.GPTConfig(norm="rmsnorm"),
    "short_context": model.GPTConfig(n_embd=8, block_size=32),
}


def batch(cfg, B, T, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, cfg.vocab_size, (B, T)), rng.integers(0, cfg.vocab_size, (B, T))


def test_matmul_count_is_two_m_k_n():
    a, b = np.ones((3, 4)), np.ones((4, 5))
    assert flops.count_matmul_flops(lambda p, x: p["a"] @ x, {"a": a}, b)[1:] == (2 * 3 * 4 * 5, 1)
    batched = np.ones((2, 3, 4))
    assert flops.count_matmul_flops(lambda p, x: p["a"] @ x, {"a": batched}, b)[1] == 2 * 2 * 3 * 4 * 5
    v = np.ones(4)
    assert flops.count_matmul_flops(lambda p, x: x @ p["a"], {"a": b}, v)[1] == 2 * 4 * 5  # vector @ matrix
    assert flops.count_matmul_flops(lambda p: p["a"] + 1.0, {"a": a})[1] == 0  # additions are not matmuls


@pytest.mark.parametrize("name", CONFIGS)
def test_counted_training_step_equals_closed_form(name):
    cfg = CONFIGS[name]
    B, T = 3, cfg.block_size
    x, y = batch(cfg, B, T)
    params = model.init_params(cfg, 0)
    _, counted, _ = flops.count_matmul_flops(model.loss_and_grads, params, cfg, x, y)
    assert counted == sum(flops.pylib_step_flops(cfg, B, T).values())


def test_counted_step_at_a_shorter_sequence():
    cfg = model.GPTConfig()
    B, T = 2, 40  # T below block_size: the attention term scales with T, not with the context limit
    x, y = batch(cfg, B, T)
    _, counted, _ = flops.count_matmul_flops(model.loss_and_grads, model.init_params(cfg, 0), cfg, x, y)
    assert counted == sum(flops.pylib_step_flops(cfg, B, T).values())


def test_counting_does_not_change_the_arithmetic_or_leak():
    cfg = model.GPTConfig()
    x, y = batch(cfg, 2, cfg.block_size)
    params = model.init_params(cfg, 0)
    (loss, grads), _, _ = flops.count_matmul_flops(model.loss_and_grads, params, cfg, x, y)
    ref_loss, ref_grads = model.loss_and_grads(params, cfg, x, y)
    assert float(loss) == float(ref_loss)
    for k in ref_grads:
        np.testing.assert_array_equal(np.asarray(grads[k]), ref_grads[k])
    assert type(np.ones(3)) is np.ndarray and flops._Counted.log is None  # constructors restored
    assert type(model.loss_and_grads(params, cfg, x, y)[1]["wte"]) is np.ndarray  # nothing cached as recording


def test_forward_alone_is_a_third_of_the_formula():
    """Forward = 2N + 4LTC per token; the training step triples it (backward = 2 x forward)."""
    cfg = model.GPTConfig()
    B, T = 2, cfg.block_size
    x, _ = batch(cfg, B, T)
    _, counted, _ = flops.count_matmul_flops(model.forward_logits, model.init_params(cfg, 0), cfg, x)
    fwd = sum(flops.forward_flops_per_token(cfg, T).values()) * B * T
    C, L, H = cfg.n_embd, cfg.n_layer, cfg.n_head
    reductions = ((2 * L + 1) * 4 * C + L * 2 * H * T) * B * T  # the norms' row means, the softmax row sums
    assert counted == fwd + reductions
    assert flops.training_flops_per_token(cfg) == 3 * sum(flops.forward_flops_per_token(cfg).values())


def test_matmul_params_are_the_two_dimensional_weights_but_the_position_table():
    cfg = model.GPTConfig(n_layer=2, n_embd=32, n_head=4)
    shapes = model.param_shapes(cfg)
    two_d = sum(math.prod(s) for name, s in shapes.items() if len(s) == 2 and name != "wpe")
    assert flops.matmul_params(cfg) == two_d  # wte counted once: it is the tied head's matrix


def test_six_nd_is_the_weights_term():
    cfg = model.GPTConfig()
    per_token = flops.forward_flops_per_token(cfg)
    assert 3 * per_token["weights"] == 6 * flops.matmul_params(cfg)
    assert flops.six_nd(10, 7) == 420.0


def test_shape_flops_match_the_config_for_the_course_model():
    cfg = model.GPTConfig()
    shape = memory.shape_from_config(cfg)
    assert flops.shape_flops_per_token(shape) == flops.training_flops_per_token(cfg)


def test_llama_7b_flops_per_token_from_its_shape():
    s = memory.LLAMA_7B
    per_layer = 4 * s.n_embd ** 2 + 3 * s.n_embd * s.ffn_hidden  # attention and the SwiGLU MLP
    n = s.n_layer * per_layer + s.vocab_size * s.n_embd  # + the untied head
    assert flops.shape_matmul_params(s) == n
    assert flops.shape_flops_per_token(s) == 6 * n + 12 * s.n_layer * s.seq_len * s.n_embd


@pytest.mark.parametrize("peak,mfu", [(0.0, 0.5), (-1.0, 0.5), (1e15, 0.0), (1e15, 1.5), (float("nan"), 0.5),
                                      (1e15, float("nan"))])
def test_gpu_days_refuses_a_bad_peak_or_utilisation(peak, mfu):
    with pytest.raises(ValueError):
        flops.gpu_days(1e20, peak, mfu)


def test_gpu_days_of_a_known_amount():
    assert flops.gpu_days(86400 * 1e15 * 0.5, 1e15, 0.5) == pytest.approx(1.0)
