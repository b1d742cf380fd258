"""Multi-token prediction (pylib.studies.mtp): targets stay inside a document, every gradient (the head's
and the trunk's, with the loss weight lambda) matches finite differences in float64, and with
lambda = 0 training is exactly pylib.train's."""

import dataclasses

import numpy as np

from pylib import model, train
from pylib.studies import mtp

CFG = model.GPTConfig()
EOS = CFG.vocab_size - 1


def test_mtp_targets_never_cross_a_document_boundary():
    rng = np.random.default_rng(0)
    stream = rng.integers(0, EOS, 2000)
    stream[rng.choice(2000, 120, replace=False)] = EOS  # many short documents
    doc = np.concatenate([[0], np.cumsum(stream[:-1] == EOS)])  # an EOS belongs to the document it ends
    T = 16
    starts = rng.integers(0, len(stream) - T - 1, 64)
    idx = starts[:, None] + np.arange(T + 1)
    x, y = stream[idx[:, :-1]], stream[idx[:, 1:]]
    y2, mask = mtp.mtp_targets(x, y, EOS)
    counted = 0
    for b in range(len(starts)):
        for t in range(T):
            i = starts[b] + t  # stream index of token t
            if mask[b, t]:
                counted += 1
                assert t < T - 1 and y2[b, t] == stream[i + 2]  # the target is token t+2 ...
                assert doc[i + 2] == doc[i]  # ... of the same document
            elif t < T - 1:
                assert doc[i + 2] != doc[i]  # only boundary crossings are dropped
    assert 0 < counted < x.size  # some targets counted, some masked: the test means something


def test_mtp_head_cost_is_c_squared_plus_3c():
    C = CFG.n_embd
    assert mtp.count_mtp_params(CFG) == C * C + 3 * C
    p = mtp.init_params(CFG, 0)
    assert sum(v.size for v in p.values()) == model.count_params(CFG) + mtp.count_mtp_params(CFG)
    trunk = model.init_params(CFG, 0)
    assert all(np.array_equal(p[k], trunk[k]) for k in trunk)  # the head does not move the trunk's init


def test_every_mtp_gradient_matches_finite_differences(gradient_check):
    # Every parameter tensor (trunk and head), float64, centred differences, lambda = 0.7: each small
    # tensor whole, an element in each row and column of a larger one, and one random direction
    # through all of it (tests/conftest.py).
    cfg = model.GPTConfig(block_size=8)
    params = mtp.init_params(cfg, 0, dtype=np.float64)
    rng = np.random.default_rng(1)
    for name in params:  # a generic point, off the init's zeros and ones
        params[name] += 0.1 * rng.standard_normal(params[name].shape)
    x = rng.integers(0, cfg.vocab_size, (2, 8))
    x[0, 3] = EOS  # one boundary, so the mask matters
    y = np.concatenate([x[:, 1:], rng.integers(0, cfg.vocab_size, (2, 1))], axis=1)
    lam = 0.7
    total, main, extra, grads = mtp.loss_and_grads(params, cfg, x, y, EOS, lam)
    assert abs(total - (main + lam * extra)) < 1e-12 and extra > 0
    checks = gradient_check(lambda: mtp.loss_and_grads(params, cfg, x, y, EOS, lam)[0], params, grads)
    assert set(checks) == set(model.param_shapes(cfg)) | set(mtp.mtp_param_shapes(cfg))
    for name, c in checks.items():
        if c["scale"] == 0:  # wpe rows past T are unused
            continue
        assert c["error"] < 1e-6, name
        assert c["directional"] < 1e-6, name


def test_mtp_gradient_reaches_the_trunk():
    params = mtp.init_params(CFG, 0, dtype=np.float64)
    rng = np.random.default_rng(3)
    x = rng.integers(0, EOS, (2, 16))
    y = rng.integers(0, EOS, (2, 16))
    g0 = mtp.loss_and_grads(params, CFG, x, y, EOS, 0.0)[3]
    g1 = mtp.loss_and_grads(params, CFG, x, y, EOS, 1.0)[3]
    assert not np.allclose(g0["h.0.mlp.c_fc.weight"], g1["h.0.mlp.c_fc.weight"])
    assert not np.any(g0["mtp.c_proj.weight"]) and np.any(g1["mtp.c_proj.weight"])


def test_mtp_with_zero_weight_trains_exactly_like_pylib_train():
    rng = np.random.default_rng(4)
    tokens = rng.integers(0, CFG.vocab_size, 5000).astype(np.uint8)
    cfg = dataclasses.replace(train.TrainConfig(), steps=12, eval_interval=5, eval_windows=4)
    _, plain = train.train(CFG, cfg, tokens, tokens)
    _, with_head = mtp.train(CFG, cfg, 0.0, tokens, tokens, EOS)
    for a, b in zip(plain, with_head):
        assert a["loss"] == b["loss"] and a.get("val") == b.get("val"), a["step"]


def test_mtp_final_eval_scores_the_main_head_on_the_whole_split_like_pylib_train():
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, CFG.vocab_size, 5000).astype(np.uint8)
    cfg = dataclasses.replace(train.TrainConfig(), steps=6, eval_interval=5, eval_windows=4, final_eval=True)
    _, plain = train.train(CFG, cfg, tokens, tokens)
    _, with_head = mtp.train(CFG, cfg, 0.0, tokens, tokens, EOS)  # lambda 0: the same trunk as pylib.train's
    assert "val_full" not in with_head[0]
    assert with_head[-1]["val_full"] == plain[-1]["val_full"]
