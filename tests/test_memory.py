"""Activation memory: the formula in pylib.systems.memory matches the bytes the caches really keep."""

import numpy as np
import pytest

from pylib import model
from pylib.systems import memory


def ids(B, T, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 65, (B, T)), rng.integers(0, 65, (B, T))


@pytest.mark.parametrize("B, T, C, H, L", [
    (16, 64, 16, 2, 1),  # the course's model at its training batch
    (2, 8, 32, 4, 2),
    (3, 5, 8, 1, 3),  # one head: merging heads is a view, not a copy
    (1, 1, 16, 2, 1),  # one position: also a view
    (4, 64, 64, 4, 4),
])
def test_activation_formula_matches_counted_cache_bytes(B, T, C, H, L):
    cfg = model.GPTConfig(n_embd=C, n_head=H, n_layer=L)
    params = model.init_params(cfg, 0)
    x, y = ids(B, T, seed=L)
    rows = memory.measure_activations(params, cfg, x, y)
    assert sum(r["bytes"] for r in rows) == memory.activation_bytes(cfg, B, T)["total"]


def test_float64_doubles_the_float_buffers():
    cfg = model.GPTConfig()
    x, y = ids(2, 16, seed=0)
    rows = memory.measure_activations(model.init_params(cfg, 0, dtype=np.float64), cfg, x, y)
    assert sum(r["bytes"] for r in rows) == memory.activation_bytes(cfg, 2, 16, itemsize=8)["total"]


def test_views_and_parameters_are_not_counted():
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    x, y = ids(2, 8, seed=0)
    rows = memory.measure_activations(params, cfg, x, y)
    names = [r["name"] for r in rows]
    assert names.count("h.0.attn.qkv") == 1  # k and v are views of one (N, 3C) buffer
    assert not any("weight" in n for n in names)  # the caches point at the weights; they are params
    qkv = next(r for r in rows if r["name"] == "h.0.attn.qkv")
    assert qkv["bytes"] == 2 * 8 * 3 * cfg.n_embd * 4


def test_layer_count_scales_the_layer_part_only():
    one, two = (memory.activation_bytes(model.GPTConfig(n_layer=L), 4, 32) for L in (1, 2))
    assert two["total"] - one["total"] == one["per_layer"]


def test_korthikanti_formula_known_value():
    # Their GPT-3 175B example per layer (s=2048, b=1, h=12288, a=96): 34sbh + 5as^2b bytes.
    assert memory.korthikanti_bytes_per_layer(2048, 1, 12288, 96) == 34 * 2048 * 12288 + 5 * 96 * 2048 ** 2


# ---------------------------------------------------------------------------
# The memory calculator


def test_llama_7b_parameter_count():
    # 6,738,415,616: the count of LLaMA 7B's released weights (untied head, RMSNorm gains, SwiGLU)
    assert memory.param_count(memory.LLAMA_7B) == 6_738_415_616
    parts = memory.param_count_parts(memory.LLAMA_7B)
    assert parts["head"] == parts["embeddings"] == 32000 * 4096  # untied: counted twice
    assert parts["per_layer"] == 4 * 4096 ** 2 + 3 * 4096 * 11008 + 2 * 4096


def test_grouped_query_attention_narrows_k_and_v_only():
    """n_kv_head key/value heads: k and v are n_kv_head x head_dim wide; everything else is unchanged."""
    C, L = 4096, 32
    mha = memory.LLAMA_7B
    assert memory.param_count(mha.__class__(**{**mha.__dict__, "n_kv_head": 32})) == memory.param_count(mha)
    gqa = mha.__class__(**{**mha.__dict__, "n_kv_head": 8})
    kv = 8 * 128  # 8 heads of 4096 / 32 channels
    assert memory.param_count(mha) - memory.param_count(gqa) == L * 2 * C * (C - kv)  # k and v projections
    for mode in ("none", "selective"):
        for tp in (1, 8):
            diff = (memory.korthikanti_layer_bytes(mha, 2048, 1, recompute=mode, tp=tp)
                    - memory.korthikanti_layer_bytes(gqa, 2048, 1, recompute=mode, tp=tp))
            assert diff == 2 * 2 * 2048 * (C - kv) / tp  # K and V at 2 bytes, split over tp
    assert memory.korthikanti_layer_bytes(gqa, 2048, 1, recompute="full") == \
        memory.korthikanti_layer_bytes(mha, 2048, 1, recompute="full")  # the layer's input only


def test_llama_3_405b_parameter_count_with_grouped_query_attention():
    # Table 3 of the Llama 3 paper: 126 layers, width 16,384, MLP 53,248, 128 heads, 8 key/value
    # heads, vocabulary 128,000 (untied head, RMSNorm gains, no biases): about 405 billion.
    from pylib.systems import planner
    C, kv, F, V, L = 16384, 8 * 128, 53248, 128000, 126
    expected = L * (2 * C * C + 2 * C * kv + 3 * C * F + 2 * C) + 2 * V * C + C
    assert memory.param_count(planner.LLAMA3_405B) == expected
    assert 405e9 <= expected < 406e9  # "405B"
    without_gqa = planner.LLAMA3_405B.__class__(**{**planner.LLAMA3_405B.__dict__, "n_kv_head": None})
    assert memory.param_count(without_gqa) > 465e9  # what the calculator counted before it knew GQA


@pytest.mark.parametrize("cfg", [model.GPTConfig(), model.GPTConfig(n_layer=2, n_head=4, n_embd=32),
                                 model.GPTConfig(norm="rmsnorm"), model.GPTConfig(bias=False),
                                 model.GPTConfig(n_layer=4, n_head=4, n_embd=64, vocab_size=300, block_size=128)])
def test_param_count_agrees_with_pylib(cfg):
    assert memory.param_count(memory.shape_from_config(cfg)) == model.count_params(cfg)


def test_course_model_preset_is_pylibs_model():
    assert memory.param_count(memory.COURSE_MODEL) == model.count_params(model.GPTConfig()) == 5376
    assert memory.config_from_shape(memory.COURSE_MODEL) == model.GPTConfig()


@pytest.mark.parametrize("recompute", memory.RECOMPUTE_MODES)
def test_calculator_counts_the_course_models_measured_cache(recompute):
    cfg = model.GPTConfig()
    B, T = 16, 64
    params = model.init_params(cfg, 0)
    x, y = ids(B, T, seed=0)
    r = memory.training_memory(memory.COURSE_MODEL, B, T, precision="fp32", optimizer="adamw",
                               recompute=recompute, activation_model="pylib")
    from pylib.systems import checkpointing
    assert r["activations"] == checkpointing.timeline(params, cfg, x, y, recompute)["stored"]
    if recompute == "none":
        assert r["activations"] == sum(row["bytes"] for row in memory.measure_activations(params, cfg, x, y))
    # fp32 Adam: 4 + 4 + 8 bytes per parameter, no master copy
    assert (r["weights"], r["gradients"], r["optimizer"], r["master"]) == (4 * 5376, 4 * 5376, 8 * 5376, 0)


def test_sixteen_bytes_per_parameter_both_ways():
    mixed, fp32 = memory.bytes_per_param("mixed", "adamw"), memory.bytes_per_param("fp32", "adamw")
    assert (mixed["weights"], mixed["gradients"], mixed["moments"], mixed["master"]) == (2, 2, 8, 4)
    assert (fp32["weights"], fp32["gradients"], fp32["moments"], fp32["master"]) == (4, 4, 8, 0)
    assert mixed["total"] == fp32["total"] == 16
    r = memory.training_memory(memory.LLAMA_7B, 1, 2048, precision="mixed")
    assert r["model_states"] == 16 * 6_738_415_616
    assert memory.bytes_per_param("mixed", "sgd")["total"] == 8
    assert memory.bytes_per_param("fp32", "momentum")["total"] == 12


def test_korthikanti_layer_bytes_reproduce_their_table_2():
    # GPT-3 175B's shape with dropout and a 4h MLP: Table 2's rows at t = 1 and t = 8
    gpt3 = memory.TransformerShape(n_layer=96, n_embd=12288, n_head=96, vocab_size=51200, seq_len=2048,
                                   ffn_hidden=4 * 12288, dropout=True)
    s, b, h, a = 2048, 1, 12288, 96
    assert memory.korthikanti_layer_bytes(gpt3, s, b) == memory.korthikanti_bytes_per_layer(s, b, h, a)
    assert memory.korthikanti_layer_bytes(gpt3, s, b, recompute="selective") == 34 * s * b * h
    assert memory.korthikanti_layer_bytes(gpt3, s, b, recompute="full") == 2 * s * b * h
    t = 8
    assert memory.korthikanti_layer_bytes(gpt3, s, b, tp=t) == s * b * h * (10 + 24 / t) + 5 * a * s * s * b / t
    assert memory.korthikanti_layer_bytes(gpt3, s, b, tp=t, sequence_parallel=True) == pytest.approx(
        s * b * h / t * (34 + 5 * a * s / h))
    assert memory.korthikanti_layer_bytes(gpt3, s, b, recompute="selective", tp=t) == s * b * h * (10 + 24 / t)
    # section 5: selective saves 70% of GPT-3's activations (5as/h = 80 against 34)
    full = memory.korthikanti_layer_bytes(gpt3, s, b)
    assert round(1 - memory.korthikanti_layer_bytes(gpt3, s, b, recompute="selective") / full, 2) == 0.70


def test_zero_stages_shard_as_the_paper_says():
    # ZeRO section 5: 4 + K/Nd, 2 + (2 + K)/Nd and (2 + 2 + K)/Nd bytes per parameter, K = 12
    shape, psi, nd = memory.LLAMA_7B, 6_738_415_616, 64
    states = [memory.training_memory(shape, 1, precision="mixed", zero_stage=z, dp=nd)["model_states"] for z in range(4)]
    assert states[0] == 16 * psi
    assert states[1] == pytest.approx((4 + 12 / nd) * psi)
    assert states[2] == pytest.approx((2 + 14 / nd) * psi)
    assert states[3] == pytest.approx(16 / nd * psi)


def test_activations_grow_with_sequence_length():
    rows = memory.activation_growth(memory.LLAMA_7B, 1, [512, 1024, 2048, 4096], precision="mixed")
    acts = [r["activations_layers"] for r in rows]
    assert all(b > 2 * a for a, b in zip(acts, acts[1:]))  # the s^2 term: more than doubling
    sel = [r["activations_layers"] for r in memory.activation_growth(memory.LLAMA_7B, 1, [512, 1024], recompute="selective")]
    assert sel[1] == 2 * sel[0]  # selective: linear in s
    assert len({r["model_states"] for r in rows}) == 1  # the states do not depend on s


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_embd=4096, n_head=30), "30 heads do not divide the width 4096"),
    (dict(n_layer=0), "n_layer must be between 1"),
    (dict(n_embd=-5), "n_embd must be between 1"),
    (dict(vocab_size=10 ** 12), "vocab_size must be between 1"),
    (dict(seq_len=2.5), "seq_len must be a whole number"),
    (dict(n_head=True), "n_head must be a whole number"),
    (dict(norm="batchnorm"), "norm must be"),
    (dict(n_embd=4096, n_head=32, n_kv_head=3), "3 key/value heads must divide the 32 query heads"),
    (dict(n_embd=4096, n_head=32, n_kv_head=64), "64 key/value heads must divide"),
    (dict(n_kv_head=1.5), "n_kv_head must be a whole number"),
])
def test_shapes_that_cannot_exist_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        memory.TransformerShape(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(micro_batch=0), "micro_batch"), (dict(seq_len=-1), "seq_len"), (dict(precision="fp8"), "precision"),
    (dict(optimizer="lion"), "optimizer"), (dict(recompute="half"), "recompute"), (dict(zero_stage=4), "zero_stage"),
    (dict(tp=3), "heads to split evenly"), (dict(pp=5), "layers to split evenly"),
    (dict(activation_model="pylib"), "pylib's model"),
])
def test_training_memory_refuses_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        memory.training_memory(memory.LLAMA_7B, **{"micro_batch": 1, **kwargs})


# ---------------------------------------------------------------------------
# The page's ops (pylib.web.memory_ops)

BAD_INPUTS = ["", "NaN", "-3", "0", "1e309", "99999999999999999999999", "🎭", "<b>x</b>", "2.5", None]


def calc_args(**over):
    from pylib.web import memory_ops
    args = {k: str(v) for k, v in memory_ops.presets()["llama-7b"].items()}
    return {**args, "precision": "mixed", "recompute": "none", "optimizer": "adamw", **over}


def test_memory_calc_op_is_training_memory():
    import json
    from pylib import web
    r = json.loads(web.handle("memory_calc", json.dumps(calc_args(recompute="selective", micro_batch="4"))))
    assert r["ok"]
    v = r["value"]
    want = memory.training_memory(memory.LLAMA_7B, 4, 2048, precision="mixed", recompute="selective",
                                  memory_efficient_attention=True)  # the LLaMA preset's attention
    assert v["params"] == 6_738_415_616 and v["memory"]["activations_peak"] == want["activations_peak"]
    assert v["memory"]["total"] == want["total"] and v["memory"]["activations"] == want["activations"]
    assert 2048 in v["growth"]["seq_len"] and len(v["growth"]["total"]) == len(v["growth"]["seq_len"])


def test_memory_calc_course_preset_is_the_course_model():
    from pylib.web import memory_ops
    args = {**memory_ops.presets()["course"], "precision": "fp32", "recompute": "none", "optimizer": "adamw"}
    assert memory_ops.memory_calc(None, args)["params"] == model.count_params(model.GPTConfig())


@pytest.mark.parametrize("bad", BAD_INPUTS)
@pytest.mark.parametrize("field", ["seq_len", "micro_batch", "n_layer", "n_embd", "n_head", "vocab_size", "ffn_hidden"])
def test_memory_calc_refuses_bad_input_per_field(field, bad):
    import json
    from pylib import web
    r = json.loads(web.handle("memory_calc", json.dumps(calc_args(**{field: bad}))))
    assert not r["ok"] and r["kind"] == "input" and list(r["errors"]) == [field]


def test_memory_calc_refuses_heads_that_do_not_divide_the_width():
    import json
    from pylib import web
    r = json.loads(web.handle("memory_calc", json.dumps(calc_args(n_head="30"))))
    assert not r["ok"] and "30 heads do not divide the width 4,096" in r["errors"]["n_head"]
    ok = json.loads(web.handle("memory_calc", json.dumps(calc_args())))
    assert ok["ok"]  # and the next good input works


@pytest.mark.parametrize("field, bad", [("arch", "bert"), ("precision", "fp8"), ("recompute", "half"), ("optimizer", "lion"),
                                        ("attention", "<b>flash</b>")])
def test_memory_calc_refuses_unknown_choices(field, bad):
    import json
    from pylib import web
    r = json.loads(web.handle("memory_calc", json.dumps(calc_args(**{field: bad}))))
    assert not r["ok"] and list(r["errors"]) == [field]


def test_memory_efficient_attention_stores_what_selective_recomputation_keeps():
    """No s x s probabilities: LLaMA 7B stores the selective count at every length, and no mode's peak
    brings an s^2 term back; with standard attention the s^2 terms dominate at 8,192 tokens."""
    for s in (2048, 8192):
        sel = memory.training_memory(memory.LLAMA_7B, 1, s, recompute="selective")
        for mode in ("none", "selective"):
            fa = memory.training_memory(memory.LLAMA_7B, 1, s, recompute=mode, memory_efficient_attention=True)
            assert fa["activations"] == fa["activations_peak"] == sel["activations"]
        std = memory.training_memory(memory.LLAMA_7B, 1, s, recompute="none")
        assert std["activations"] > 2 * sel["activations"] if s == 8192 else std["activations"] > sel["activations"]
    with pytest.raises(ValueError, match="memory_efficient_attention"):
        memory.training_memory(memory.COURSE_MODEL, 16, 64, activation_model="pylib", memory_efficient_attention=True)


def test_full_recomputation_peaks_with_one_layer_recomputed_on_top_of_the_checkpoints():
    """The Korthikanti path's peak, modelled as recompute_bytes models pylib's: L checkpoints plus one
    whole layer (the logits freed by then), when that is more than the forward leaves stored."""
    s, L = 2048, memory.LLAMA_7B.n_layer
    full = memory.training_memory(memory.LLAMA_7B, 1, s, recompute="full")
    one = memory.korthikanti_layer_bytes(memory.LLAMA_7B, s, 1, 2, "none")
    assert full["activations_peak"] == L * memory.korthikanti_layer_bytes(memory.LLAMA_7B, s, 1, 2, "full") + one
    assert full["activations_peak"] > full["activations"]
    none = memory.training_memory(memory.LLAMA_7B, 1, s, recompute="none")
    assert none["activations_peak"] == none["activations"] and none["total_peak"] == none["total"]


def test_bf16_with_fp32_main_gradients_is_megatrons_18_bytes_per_parameter():
    """Megatron-LM's table (docs/user-guide/features/dist_optimizer.md): bf16 parameters with fp32
    gradients, 18 bytes per parameter without the distributed optimiser; ZeRO's mixed Adam, 16."""
    assert memory.bytes_per_param("mixed_fp32_grads", "adamw")["total"] == 18
    assert memory.bytes_per_param("mixed", "adamw")["total"] == 16
    r = memory.training_memory(memory.LLAMA_7B, precision="mixed_fp32_grads")
    assert r["model_states"] == 18 * memory.param_count(memory.LLAMA_7B)
