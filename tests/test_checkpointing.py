"""Activation checkpointing: bit-identical gradients, and the bytes held against the formula."""

import numpy as np
import pytest

from pylib import model
from pylib.systems import checkpointing, memory

CONFIGS = [  # (config, B, T)
    (model.GPTConfig(), 16, 64),  # the course's model at its training batch
    (model.GPTConfig(n_layer=2, n_head=4, n_embd=32), 4, 64),
    (model.GPTConfig(n_layer=3, n_head=1, n_embd=8), 3, 5),  # one head: the merged heads are a view
    (model.GPTConfig(n_layer=2, norm="rmsnorm", qk_norm=True), 2, 16),
    (model.GPTConfig(n_layer=2, n_embd=32, n_head=4, mup_base_width=16), 2, 8),
    (model.GPTConfig(n_layer=2, n_embd=16, n_head=8, block_size=256), 1, 256),  # long: the recomputed
    # attention core outweighs the freed MLP, so selective's peak falls during the backward
]


def batch(cfg, B, T, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, cfg.vocab_size, (B, T)), rng.integers(0, cfg.vocab_size, (B, T))


@pytest.mark.parametrize("mode", checkpointing.MODES)
@pytest.mark.parametrize("cfg, B, T", CONFIGS)
def test_checkpointed_gradients_are_bit_identical(cfg, B, T, mode):
    params = model.init_params(cfg, 1)
    x, y = batch(cfg, B, T)
    loss_ref, grads_ref = model.loss_and_grads(params, cfg, x, y)
    loss, grads, _ = checkpointing.step(params, cfg, x, y, mode)
    assert loss == loss_ref
    assert list(grads) == list(grads_ref)
    for name in grads_ref:
        assert grads[name].dtype == grads_ref[name].dtype
        assert np.array_equal(grads[name], grads_ref[name]), name  # every element, bit for bit


def test_bit_identical_in_float64_and_after_training_steps():
    cfg = model.GPTConfig(n_layer=2)
    params = model.init_params(cfg, 0, dtype=np.float64)
    x, y = batch(cfg, 4, 32, seed=3)
    _, ref = model.loss_and_grads(params, cfg, x, y)
    for mode in checkpointing.MODES:
        _, grads, _ = checkpointing.step(params, cfg, x, y, mode)
        assert all(np.array_equal(grads[k], ref[k]) for k in ref)


@pytest.mark.parametrize("mode", checkpointing.MODES)
@pytest.mark.parametrize("cfg, B, T", [c for c in CONFIGS if not c[0].qk_norm])  # the formula has no QK-norm caches
def test_bytes_held_match_the_formula(cfg, B, T, mode):
    params = model.init_params(cfg, 0)
    x, y = batch(cfg, B, T)
    tl = checkpointing.timeline(params, cfg, x, y, mode)
    f = memory.recompute_bytes(cfg, B, T, mode)
    assert tl["stored"] == f["stored"]
    assert tl["peak"] == f["peak"]
    assert tl["events"][-1]["held"] == 0  # everything is freed by the end of the step


def test_no_checkpointing_holds_what_the_model_caches():
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    x, y = batch(cfg, 16, 64)
    rows = memory.measure_activations(params, cfg, x, y)
    tl = checkpointing.timeline(params, cfg, x, y, "none")
    assert tl["stored"] == tl["peak"] == sum(r["bytes"] for r in rows)


def test_selective_peak_can_fall_in_the_backward():
    cfg, B, T = CONFIGS[-1]
    f = memory.recompute_bytes(cfg, B, T, "selective")
    assert f["peak"] > f["stored"]  # the case the last config exercises
    tl = checkpointing.timeline(model.init_params(cfg, 0), cfg, *batch(cfg, B, T), "selective")
    assert tl["events"][tl["peak_index"]]["phase"] == "recompute"
    assert tl["set_by"][0] == "h.1.attn.probs"


def test_checkpointing_stores_less_and_recomputes():
    cfg = model.GPTConfig(n_layer=2, n_head=4, n_embd=32)
    params = model.init_params(cfg, 0)
    x, y = batch(cfg, 4, 64)
    tls = {m: checkpointing.timeline(params, cfg, x, y, m) for m in checkpointing.MODES}
    assert tls["full"]["stored"] < tls["selective"]["stored"] < tls["none"]["stored"]
    phases = {m: {e["phase"] for e in tls[m]["events"]} for m in tls}
    assert "recompute" not in phases["none"] and "recompute" in phases["full"] and "recompute" in phases["selective"]
    # full keeps one (B, T, C) input per block; selective drops exactly the probabilities and two BTC arrays
    assert memory.recompute_bytes(cfg, 4, 64, "full")["stored_layers"] == 2 * 4 * 64 * 32 * 4
    none, sel = (memory.recompute_bytes(cfg, 4, 64, m)["stored_layers"] for m in ("none", "selective"))
    assert none - sel == 2 * (4 * 4 * 64 * 64 + 2 * 4 * 64 * 32) * 4


def test_bad_mode_and_post_ln_are_refused():
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    x, y = batch(cfg, 2, 8)
    with pytest.raises(ValueError, match="recompute"):
        checkpointing.step(params, cfg, x, y, "some")
    post = model.GPTConfig(norm_position="post")
    with pytest.raises(ValueError, match="pre-LN"):
        checkpointing.step(model.init_params(post, 0), post, x, y, "full")


# ---------------------------------------------------------------------------
# The page's op (pylib.web.memory_ops.memory_timeline)


@pytest.fixture
def session(tmp_path):
    """A Session over a tiny corpus written the way build.py writes _site/data/."""
    import json
    from pylib import data, web
    text = "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east.\n" * 40
    vocab = data.build_char_vocab(text, n_chars=64)
    ids, _ = data.pack_documents([text] * 3, vocab)
    (tmp_path / "train.bin").write_bytes(ids.tobytes())
    (tmp_path / "val.bin").write_bytes(ids[::-1].copy().tobytes())
    (tmp_path / "vocab.json").write_text(json.dumps(vocab.to_json()))
    s = web.Session()
    s.load_corpus(tmp_path)
    return s


def test_timeline_op_is_the_checkpointing_timeline(session):
    import dataclasses
    from pylib import data
    from pylib.web import memory_ops
    r = memory_ops.memory_timeline(session, {"n_layer": "2", "batch_size": "4", "seq_len": "32"})
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=session.vocab.size, n_layer=2)
    x, y = data.eval_windows(session.val_tokens, 4, 32)
    for mode in checkpointing.MODES:
        tl = checkpointing.timeline(model.init_params(cfg, 0), cfg, x.copy(), y.copy(), mode)
        got = r["modes"][mode]
        assert [e["held"] for e in got["events"]] == [e["held"] for e in tl["events"]]
        assert got["peak"] == got["formula_peak"] == tl["peak"]
        assert got["stored"] == got["formula_stored"]


@pytest.mark.parametrize("bad", ["", "NaN", "-1", "0", "1e309", "99999999999999999999", "🎭", "<b>x</b>", "1.5", None])
@pytest.mark.parametrize("field", ["n_layer", "batch_size", "seq_len"])
def test_timeline_op_refuses_bad_input(session, field, bad):
    from pylib.web import InputError, memory_ops
    args = {"n_layer": "1", "batch_size": "2", "seq_len": "8", field: bad}
    with pytest.raises(InputError) as e:
        memory_ops.memory_timeline(session, args)
    assert list(e.value.errors) == [field]
    assert memory_ops.memory_timeline(session, {"n_layer": "1", "batch_size": "2", "seq_len": "8"})["modes"]
