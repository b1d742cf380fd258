"""pylib.studies.gradcheck: finite differences agree with pylib's backward, and disagree when they should."""

import numpy as np
import pytest

from pylib import layers, model
from pylib.studies import gradcheck

CFG = model.GPTConfig()


def tokens(n=4000, seed=0):
    return np.random.default_rng(seed).integers(0, CFG.vocab_size, n).astype(np.uint8)


def test_relative_error_is_symmetric_and_zero_for_two_zeros():
    assert gradcheck.relative_error(0.0, 0.0) == 0.0
    assert gradcheck.relative_error(1.0, 0.5) == gradcheck.relative_error(0.5, 1.0) == 0.5
    assert gradcheck.relative_error(1.0, -1.0) == 2.0


def test_centred_difference_is_exact_for_a_quadratic_and_restores_the_weight():
    p = np.array([3.0, -2.0])
    slope, _, _ = gradcheck.centred_difference(lambda: float(p[0] ** 2 + 5 * p[1]), p, (0,), 1e-3)
    assert abs(slope - 6.0) < 1e-9  # the centred formula has no h^2 error on a quadratic
    assert p.tolist() == [3.0, -2.0]


def test_every_tensor_of_the_model_passes_on_a_real_batch():
    params = gradcheck.float64_params(CFG, 0)
    x, y = gradcheck.fixed_batch(tokens(), 2, 16)
    rows = gradcheck.check_all(params, CFG, x, y, subset=24)
    assert [r["name"] for r in rows] == list(params)
    for r in rows:
        assert r["max"] < 1e-6, r


def test_a_wrong_gradient_is_caught():
    params = gradcheck.float64_params(CFG, 0)
    x, y = gradcheck.fixed_batch(tokens(), 2, 16)
    grads = model.loss_and_grads(params, CFG, x, y)[1]
    grads["h.0.mlp.c_fc.weight"] *= 1.01  # a 1% error in one tensor
    row = gradcheck.check_tensor(params, CFG, x, y, "h.0.mlp.c_fc.weight", grads, subset=24)
    assert row["max"] > 1e-3


def test_error_vs_h_has_rounding_on_the_left_and_truncation_on_the_right():
    params = gradcheck.float64_params(CFG, 0)
    x, y = gradcheck.fixed_batch(tokens(), 2, 16)
    hs = gradcheck.H_SWEEP
    errors = gradcheck.error_vs_h(params, CFG, x, y, "h.0.mlp.c_fc.weight", 5)
    best = int(np.argmin(errors))
    assert 0 < best < len(hs) - 1  # a minimum inside the sweep, not at an end
    assert errors[0] > 100 * errors[best] and errors[-1] > 100 * errors[best]
    assert 1e-8 <= hs[best] <= 1e-2


def test_nudge_reports_both_slopes():
    params = gradcheck.float64_params(CFG, 0)
    x, y = gradcheck.fixed_batch(tokens(), 2, 16)
    r = gradcheck.nudge(params, CFG, x, y, "wte", 17, 1e-5)
    assert r["rel_error"] < 1e-5 and r["index"] == [1, 1]
    assert r["loss_minus"] != r["loss_plus"]


@pytest.mark.parametrize("make", [
    lambda rng: (layers.linear_forward, layers.linear_backward,
                 [rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(5)]),
    lambda rng: (layers.gelu_forward, lambda d, c: (layers.gelu_backward(d, c),), [rng.standard_normal((3, 4))]),
])
def test_check_layer_passes_correct_layers(make):
    forward, backward, inputs = make(np.random.default_rng(0))
    errors = gradcheck.check_layer(forward, backward, inputs)
    assert all(e < 1e-7 for e in errors if e is not None)


# ---------------------------------------------------------------------------
def test_perturbed_params_move_every_gain_and_bias_and_keep_the_matrices():
    init, pert = gradcheck.float64_params(CFG, 0), gradcheck.perturbed_params(CFG, 0)
    for name, p in pert.items():
        if name.endswith(".bias") or (p.ndim == 1 and name.endswith(".weight")):
            assert not np.array_equal(p, init[name]), name  # drawn away from 0 or 1
        else:
            assert np.array_equal(p, init[name]), name
    assert all(np.array_equal(pert[k], gradcheck.perturbed_params(CFG, 0)[k]) for k in pert)  # seeded


def test_layernorm_backward_ignoring_gain_passes_at_init_and_fails_when_perturbed():
    x, y = gradcheck.fixed_batch(tokens(), 2, 16)
    worst = {}
    with gradcheck.layernorm_backward_ignoring_gain():
        for which in ("init", "perturbed"):
            rows = gradcheck.check_all(gradcheck.weights_at(CFG, 0, which), CFG, x, y, subset=24)
            worst[which] = max(r["max"] for r in rows)
    assert worst["init"] < 1e-6  # every gain is 1 at init: the bug computes the right numbers
    assert worst["perturbed"] > 1e-2  # gains away from 1: the bug shows
    # and the correct backward (restored on exit) passes at the perturbed weights
    rows = gradcheck.check_all(gradcheck.perturbed_params(CFG, 0), CFG, x, y, subset=24)
    assert max(r["max"] for r in rows) < 1e-5


# The page's ops (pylib.web.backprop_ops): validation and the streamed check


@pytest.fixture
def session(tmp_path):
    """A Session over a small corpus written the way build.py writes _site/data/."""
    import json
    from pylib import data, web
    from pylib.web import backprop_ops as web_backprop
    text = "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east.\n" * 40
    vocab = data.build_char_vocab(text, n_chars=64)
    ids, _ = data.pack_documents([text] * 3, vocab)
    (tmp_path / "train.bin").write_bytes(ids.tobytes())
    (tmp_path / "val.bin").write_bytes(ids.tobytes())
    (tmp_path / "vocab.json").write_text(json.dumps(vocab.to_json()))
    s = web.Session()
    s.load_corpus(tmp_path)
    web_backprop._state.clear()
    yield s
    web_backprop._state.clear()


@pytest.mark.parametrize("raw, field", [
    ({"name": "h.9.nope", "index": "0", "h": "1e-5"}, "name"),
    ({"name": "<img src=x onerror=alert(1)>", "index": "0", "h": "1e-5"}, "name"),
    ({"name": "", "index": "0", "h": "1e-5"}, "name"),
    ({"name": "wte", "index": "99999", "h": "1e-5"}, "index"),
    ({"name": "wte", "index": "-1", "h": "1e-5"}, "index"),
    ({"name": "wte", "index": "2.5", "h": "1e-5"}, "index"),
    ({"name": "wte", "index": "🙂", "h": "1e-5"}, "index"),
    ({"name": "wte", "index": "0", "h": "0"}, "h"),
    ({"name": "wte", "index": "0", "h": "-1e-5"}, "h"),
    ({"name": "wte", "index": "0", "h": "NaN"}, "h"),
    ({"name": "wte", "index": "0", "h": "1e300"}, "h"),
    ({"name": "wte", "index": "0", "h": ""}, "h"),
])
def test_nudge_refuses_bad_input_with_a_message_per_field(session, raw, field):
    from pylib import web
    from pylib.web import backprop_ops as web_backprop
    with pytest.raises(web.InputError) as e:
        web_backprop.nudge(session, raw)
    assert field in e.value.errors and e.value.errors[field]


def test_nudge_op_returns_json_with_a_sweep(session):
    import json
    from pylib import web
    web.SESSION.__dict__.update(session.__dict__)
    out = json.loads(web.handle("backprop_nudge", json.dumps({"name": "h.0.mlp.c_fc.weight", "index": "7", "h": "1e-5"})))
    assert out["ok"], out
    v = out["value"]
    assert v["rel_error"] < 1e-5 and len(v["sweep"]["h"]) == len(v["sweep"]["rel_error"])
    bad = json.loads(web.handle("backprop_nudge", json.dumps({"name": "wte", "index": "0", "h": "0"})))
    assert not bad["ok"] and bad["kind"] == "input" and "h" in bad["errors"]


def test_streamed_check_covers_every_tensor_and_can_stop_early(session):
    from pylib.web import backprop_ops as web_backprop
    info = web_backprop.check_start(session, {})
    first = web_backprop.check_chunk(session, {})
    assert first["rows"] and first["checked"] >= 1
    early = web_backprop.check_finish(session, {})  # what Stop does: finish after any chunk
    assert early["tensors_checked"] == first["checked"]
    while not web_backprop.check_chunk(session, {})["done"]:
        pass
    full = web_backprop.check_finish(session, {})
    assert full["complete"] and full["tensors_checked"] == info["tensors"]
    assert full["max"] < 1e-6


def test_streamed_check_runs_at_perturbed_weights_and_refuses_unknown_weights(session):
    from pylib import web
    from pylib.web import backprop_ops as web_backprop
    for bad in ("<b>x</b>", "", None, 3):
        with pytest.raises(web.InputError) as e:
            web_backprop.check_start(session, {"weights": bad})
        assert e.value.errors["weights"]
    info = web_backprop.check_start(session, {"weights": "perturbed"})
    assert info["weights"] == "perturbed"
    while not web_backprop.check_chunk(session, {})["done"]:
        pass
    full = web_backprop.check_finish(session, {})
    assert full["complete"] and full["weights"] == "perturbed" and full["max"] < 1e-5
