"""The four-worker simulator: its DCT, its byte counts, and the methods' defining properties; steps to a target."""

import numpy as np
import pytest
import scipy.fft

from pylib import data, model
from pylib.studies import target
from pylib.systems import compress, slow_links as sl


@pytest.fixture(scope="module")
def corpus(shared_corpus):
    return shared_corpus


def short(corpus, method, steps=6, **kw):
    cfg = sl.configured(method, seed=0, steps=steps, eval_interval=kw.pop("eval_interval", 2), **kw)
    state = sl.init_run(cfg, corpus.train, corpus.val, corpus.vocab.size)
    return state, sl.run_steps(state, steps)


# ---------------------------------------------------------------------------
# DeMo's DCT


@pytest.mark.parametrize("n", [1, 5, 13, 16, 64])
def test_dct_matrix_is_scipys_orthonormal_dct2(n):
    x = np.random.default_rng(n).standard_normal(n)
    d = sl.dct_matrix(n)
    np.testing.assert_allclose(d @ x, scipy.fft.dct(x, norm="ortho"), atol=1e-12)
    np.testing.assert_allclose(d @ d.T, np.eye(n), atol=1e-12)


def test_smaller_split_as_demo_py():
    assert [sl.smaller_split(s, 64) for s in (65, 64, 16, 48, 128, 7)] == [13, 64, 16, 48, 64, 7]
    assert sl.smaller_split(16, 5) == 4


def test_chunk_dct_is_a_blockwise_2d_dct_and_inverts():
    shapes = model.param_shapes(model.GPTConfig())
    dct = sl.ChunkDCT(shapes, 64)
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        x = rng.standard_normal(shape)
        c = dct.encode(name, x)
        np.testing.assert_allclose(dct.decode(name, c), x, atol=1e-12)
    x = rng.standard_normal((65, 16))  # wte: 13 x 16 blocks
    c = dct.encode("wte", x)
    assert c.shape == (5, 13 * 16)
    np.testing.assert_allclose(c[2], scipy.fft.dctn(x[26:39, :], norm="ortho").ravel(), atol=1e-12)


def test_gathered_coefficients_are_averaged_where_several_workers_sent_them():
    a = (np.array([[0, 2]]), np.array([[1.0, 4.0]]))
    b = (np.array([[2, 3]]), np.array([[2.0, 5.0]]))
    out = sl.chunk_mean_decompress((1, 4), [a, b])
    assert out.tolist() == [[1.0, 0.0, 3.0, 5.0]]


# ---------------------------------------------------------------------------
# The workers


def test_four_workers_on_a_quarter_batch_average_to_one_full_batch_gradient(corpus):
    mcfg = model.GPTConfig(vocab_size=corpus.vocab.size)
    params = model.init_params(mcfg, 0)
    x, y = data.get_batch(corpus.train, 16, mcfg.block_size, np.random.default_rng(1))
    _, full = model.loss_and_grads(params, mcfg, x, y)
    parts = [model.loss_and_grads(params, mcfg, x[i:i + 4], y[i:i + 4])[1] for i in range(0, 16, 4)]
    for name in full:
        np.testing.assert_allclose(np.mean([p[name] for p in parts], axis=0), full[name], rtol=1e-4, atol=1e-7)


def test_topk_at_k_equals_n_trains_exactly_as_dense(corpus):
    _, dense = short(corpus, "dense")
    _, topk = short(corpus, "topk", topk_fraction=1.0)
    for key in ("loss", "val"):
        a = [r[key] for r in topk if key in r]
        assert len(a) >= 3 and a == pytest.approx([r[key] for r in dense if key in r], rel=1e-6)
    assert topk[-1]["bytes"] > dense[-1]["bytes"]  # positions cost bytes, and the gather grows with W


def test_bytes_per_step_of_each_method(corpus):
    n, w, steps = model.count_params(model.GPTConfig(vocab_size=corpus.vocab.size)), 4, 6
    ring = 2 * (w - 1) / w * n * 4
    state, rec = short(corpus, "dense", steps)
    assert rec[-1]["bytes"] == steps * ring and rec[-1]["syncs"] == steps
    state, rec = short(corpus, "topk", steps)
    assert rec[-1]["bytes"] == steps * (w - 1) * state["k"] * 8
    state, rec = short(corpus, "quant", steps)
    payload = sum(compress.quantise_bytes(int(np.prod(s)), 4) for s in state["shapes"].values())
    assert rec[-1]["bytes"] == steps * (w - 1) * payload
    state, rec = short(corpus, "diloco", 10, diloco_h=5, eval_interval=5)
    assert [r["bytes"] for r in rec if r["step"] in (4, 5, 9, 10)] == [0, ring, ring, 2 * ring]
    state, rec = short(corpus, "demo", steps)
    assert rec[-1]["bytes"] == steps * (w - 1) * sl.payload_bytes(state) and sl.payload_bytes(state) < n * 4


def test_update_norm_is_the_global_weights_step(corpus):
    for method, steps in (("topk", 1), ("diloco", 5)):
        state, rec = short(corpus, method, steps, **({"diloco_h": 5, "eval_interval": 5} if method == "diloco" else {}))
        before = np.concatenate([p.ravel() for p in model.init_params(state["model_cfg"], 0).values()]).astype(np.float64)
        after = np.concatenate([p.ravel() for p in state["params"].values()]).astype(np.float64)
        moves = [r["update_norm"] for r in rec if "update_norm" in r]
        assert len(moves) == steps
        if method == "topk":
            assert moves[0] == pytest.approx(np.linalg.norm(after - before), rel=1e-5) and moves[0] > 0
        else:  # DiLoCo's global weights move only at the sync, after H local steps
            assert moves[:-1] == [0.0] * (steps - 1)
            assert moves[-1] == pytest.approx(np.linalg.norm(after - before), rel=1e-5) and moves[-1] > 0


def test_quantised_arm_priced_as_an_all_reduce(corpus):
    shapes = model.param_shapes(model.GPTConfig(vocab_size=corpus.vocab.size))
    n = sum(int(np.prod(s)) for s in shapes.values())
    cfg = sl.configured("quant")
    gather = sl.sync_cost(cfg, shapes, 4, 1e-3, 1e-6)
    ar = sl.sync_cost(cfg, shapes, 4, 1e-3, 1e-6, quant_all_reduce=True)
    assert ar["kind"] == "quantised_all_reduce"
    assert ar["wire_bytes"] == compress.quantised_all_reduce_bytes(n, 4, cfg.quant_bits) < gather["wire_bytes"]
    assert ar["seconds"] == pytest.approx(2 * 3 * 1e-3 + ar["wire_bytes"] * 1e-6)
    with pytest.raises(ValueError):
        sl.sync_cost(sl.configured("topk"), shapes, 4, quant_all_reduce=True)  # positions differ: no all-reduce


def test_outer_nesterov_step():
    glob = np.array([1.0, 2.0])
    workers = [np.array([0.0, 2.0]), np.array([1.0, 1.0])]
    buf = np.zeros(2)
    delta = sl.outer_nesterov_step(glob, workers, buf, lr=0.7, momentum=0.9)
    np.testing.assert_allclose(delta, [0.5, 0.5])
    np.testing.assert_allclose(buf, delta)
    np.testing.assert_allclose(glob, [1.0 - 0.7 * 1.9 * 0.5, 2.0 - 0.7 * 1.9 * 0.5])
    g2, b2 = np.array([1.0, 2.0]), np.zeros(2)
    sl.outer_nesterov_step(g2, workers, b2, lr=1.0, momentum=0.0)  # lr 1, no momentum: plain averaging
    np.testing.assert_allclose(g2, np.mean(workers, axis=0))


def test_diloco_workers_restart_from_the_global_weights(corpus):
    state, _ = short(corpus, "diloco", 10, diloco_h=5, eval_interval=5)
    glob = np.concatenate([p.ravel() for p in state["params"].values()])
    for wk in state["workers"]:
        assert np.array_equal(np.concatenate([p.ravel() for p in wk["params"].values()]), glob)


def test_demo_keeps_what_it_did_not_send_and_steps_by_sign(corpus):
    state, _ = short(corpus, "demo", 1, demo_topk=4)
    before = model.init_params(state["model_cfg"], 0)
    # Every weight moved by exactly lr (the sign step) or not at all (a zero coefficient sum).
    lr = sl._lr(state["cfg"], 0, state["cfg"].demo_lr)
    for name, p in state["params"].items():
        moved = np.abs(p.astype(np.float64) - before[name])
        assert np.all((moved < 1e-9) | (np.abs(moved - lr) < 1e-6))
    assert any(np.abs(d).max() > 0 for d in state["deltas"][0].values())  # the rest is kept


def test_runs_are_deterministic(corpus):
    assert short(corpus, "quant")[1] == short(corpus, "quant")[1]


def test_bad_configs_are_refused():
    for bad in ({"method": "gossip"}, {"workers": 0}, {"workers": 3}, {"steps": 0},
                {"method": "diloco", "eval_interval": 7, "diloco_h": 5}):
        with pytest.raises(ValueError):
            sl.SlowConfig(**bad)


# ---------------------------------------------------------------------------
# Steps and bytes to a target


def test_steps_and_bytes_to_target():
    history = [{"step": 0, "val": 4.0, "bytes": 0}, {"step": 5, "loss": 2.0, "bytes": 50},
               {"step": 10, "val": 3.0, "bytes": 100}, {"step": 20, "val": 2.5, "bytes": 200},
               {"step": 30, "val": 2.7, "bytes": 300}]
    assert target.steps_to_target(history, 3.0) == 10  # the first evaluation at or below: training losses do not count
    assert target.steps_to_target(history, 2.6) == 20
    assert target.cost_to_target(history, 2.6, "bytes") == 200
    assert target.steps_to_target(history, 2.0) is None and target.cost_to_target(history, 2.0) is None
    assert target.time_to_target(20, 2, 0.5, 3.0) == 16.0
    assert target.time_to_target(None, 0, 0.5, 3.0) is None


# ---------------------------------------------------------------------------
# The page's ops (pylib.web.slow_links_ops)

import json  # noqa: E402

from pylib import web  # noqa: E402


def call(op, **args):
    return json.loads(web.handle(op, json.dumps(args)))


LINK = {"bandwidth": "100", "latency": "50", "step_ms": "3", "workers": "4"}
MEASURED = {"dense": {"steps": 120, "syncs": 120}, "topk": {"steps": 210, "syncs": 210},
            "quant": {"steps": 130, "syncs": 130}, "demo": {"steps": 160, "syncs": 160}, "diloco": None}


@pytest.mark.parametrize("field,bad", [("bandwidth", "0"), ("bandwidth", "-5"), ("bandwidth", ""), ("bandwidth", "1e309"),
                                       ("latency", "-1"), ("latency", "NaN"), ("step_ms", "🙂"), ("workers", "0"),
                                       ("workers", "1e9"), ("workers", "2.5"), ("workers", "<b>4</b>")])
def test_link_race_refuses_bad_input_by_field(field, bad):
    out = call("slow_link_race", **{**LINK, field: bad}, measured=MEASURED)
    assert out["ok"] is False and out["kind"] == "input" and set(out["errors"]) == {field}
    if (field, bad) == ("bandwidth", "0"):
        assert "no sync would ever end" in out["errors"]["bandwidth"]


def test_link_race_is_the_alpha_beta_model_on_measured_steps():
    out = call("slow_link_race", **LINK, measured=MEASURED, vocab_size=65)["value"]
    shapes = model.param_shapes(model.GPTConfig(vocab_size=65))
    alpha, beta = 0.05, 1 / (100e6 / 8)
    for m in sl.METHODS:
        cost = sl.sync_cost(sl.configured(m), shapes, 4, alpha, beta)
        assert out["rows"][m]["seconds"] == pytest.approx(cost["seconds"])
        assert out["rows"][m]["wire_bytes"] == cost["wire_bytes"]
    assert out["rows"]["dense"]["time_to_target"] == pytest.approx(120 * 0.003 + 120 * out["rows"]["dense"]["seconds"])
    assert out["rows"]["diloco"]["time_to_target"] is None  # not reached: no time, not a guess
    # The sixth row: the quantised arm's measured steps, priced as a quantised ring all-reduce.
    q_ar = sl.sync_cost(sl.configured("quant"), shapes, 4, alpha, beta, quant_all_reduce=True)
    assert out["rows"]["quant_ar"]["wire_bytes"] == q_ar["wire_bytes"] < out["rows"]["quant"]["wire_bytes"]
    assert out["rows"]["quant_ar"]["time_to_target"] == pytest.approx(130 * 0.003 + 130 * q_ar["seconds"])
    assert out["winner"] in ("topk", "quant", "demo", "dense")
    # With no latency, a fast link leaves compute: the fewest steps win; on a slow one, the fewest bytes.
    sweep = call("slow_link_race", **{**LINK, "latency": "0"}, measured=MEASURED, vocab_size=65)["value"]["sweep"]
    fewest_bytes = min((r for r in out["rows"] if r != "diloco"),
                       key=lambda r: MEASURED[r.removesuffix("_ar")]["syncs"] * out["rows"][r]["wire_bytes"])
    assert sweep["winner"][-1] == "dense" and sweep["winner"][0] == fewest_bytes == "quant_ar"
    # With latency, the all-gather's W-1 messages beat the ring's 2(W-1) even on a fast link.
    assert out["sweep"]["winner"][-1] != "dense"


def test_queue_op_says_unstable_at_full_load_and_refuses_bad_workers():
    base = {"rho": "0.5", "service_ms": "10", "workers": "8", "step_ms": "100", "spread_ms": "20"}
    out = call("slow_queue", **{**base, "rho": "1"})
    assert out["ok"] is False and "unstable" in out["errors"]["rho"]
    for bad in ("0", "1e9", "-3"):
        assert set(call("slow_queue", **{**base, "workers": bad})["errors"]) == {"workers"}
    v = call("slow_queue", **base)["value"]
    assert v["md1"]["exact"] == pytest.approx(0.5 * 10 / (2 * 0.5))
    assert v["md1"]["low"] <= v["md1"]["exact"] <= v["md1"]["high"]
    assert v["stragglers"]["exact"] == pytest.approx(100 + 20 * sum(1 / i for i in range(1, 9)))


def test_train_ops_run_the_same_steps_as_pylib(corpus):
    web.SESSION = web.Session()
    web.SESSION.vocab, web.SESSION.train_tokens, web.SESSION.val_tokens = corpus.vocab, corpus.train, corpus.val
    start = call("slow_train_start", method="quant", seed="1", steps=20, target=3.5)
    assert start["ok"] and start["value"]["bytes_per_sync"] > 0
    bad = call("slow_train_start", method="gossip", seed="1")
    assert bad["ok"] is False and set(bad["errors"]) == {"method"}
    call("slow_train_start", method="quant", seed="1", steps=20, target=3.5)
    while not call("slow_train_chunk")["value"]["done"]:
        pass
    fin = call("slow_train_finish")["value"]
    ref = sl.run(sl.configured("quant", seed=1, steps=20), corpus.train, corpus.val, corpus.vocab.size)
    assert fin["losses"] == pytest.approx([r["loss"] for r in ref if "loss" in r], rel=1e-12)
    assert fin["bytes"] == ref[-1]["bytes"]
    assert fin["steps_to_target"] == target.steps_to_target(ref, 3.5)


def test_steps_to_target_reads_pylib_trains_last_evaluation_after_its_update(corpus):
    # pylib.train's records name the 0-based step; its evaluations are made before that step's
    # update (steps done = step), except the last step's, made after it on the final weights
    # (steps done = steps). A target first reached at that final evaluation is reached after
    # `steps` steps, not steps - 1.
    import dataclasses
    from pylib import train
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=corpus.vocab.size)
    tcfg = train.TrainConfig(steps=6, eval_interval=5, batch_size=4, eval_windows=8)
    _, history = train.train(mcfg, tcfg, corpus.train, corpus.val)
    evals = [(r["step"], r["val"]) for r in history if "val" in r]
    assert [s for s, _ in evals] == [0, 5]  # before step 0; after step 5, the last
    assert evals[1][1] < evals[0][1]  # so the final evaluation is the first to reach its own loss
    assert target.steps_to_target(history, evals[1][1], steps=6) == 6
    assert target.steps_to_target(history, evals[0][1], steps=6) == 0  # an evaluation before its step's update
    assert target.steps_to_target(history, evals[1][1] - 1.0, steps=6) is None
    with pytest.raises(ValueError, match="steps"):  # a pylib.train history read without its length
        target.steps_to_target(history, evals[1][1])
