"""Preferences (pylib.studies.preferences): the DPO loss and its gradients (float64 finite
differences, and PyTorch autograd where installed), a response's log-probability and its backward,
the Bradley-Terry reward model, the rule-made pairs, and DPO and RL moving the property."""

import dataclasses
import math

import numpy as np
import pytest

from pylib import data, model, sample
from pylib.studies import preferences as pf, sft

TEXT = "the quick brown fox jumps over the lazy dog; see the bees, eleven geese!\n" * 4
VOCAB = data.build_char_vocab(TEXT)
CFG = dataclasses.replace(model.GPTConfig(), vocab_size=VOCAB.size, block_size=16)


def random_logps(seed, n=5):
    rng = np.random.default_rng(seed)
    return [-rng.uniform(5, 40, n) for _ in range(4)]


def test_dpo_loss_known_value_at_the_reference():
    pc = np.array([-10.0, -20.0])
    loss, dc, dr = pf.dpo_loss(pc, pc - 3, pc, pc - 3, 0.5)  # policy == reference: z = 0
    assert loss == pytest.approx(math.log(2), abs=1e-15)
    np.testing.assert_allclose(dc, [-0.5 * 0.5 / 2] * 2, rtol=1e-15)  # -beta * sigmoid(0) / N
    np.testing.assert_allclose(dr, [0.5 * 0.5 / 2] * 2, rtol=1e-15)


def assert_gradient_matches_finite_differences(loss_fn, coefficient, seed):
    """loss_fn(pc, pr, rc, rr, coefficient) -> (loss, d/dpc, d/dpr): each gradient element against a
    centred difference of the loss, h = 1e-6."""
    pc, pr, rc, rr = random_logps(seed)
    _, dc, dr = loss_fn(pc, pr, rc, rr, coefficient)
    h = 1e-6
    for i in range(pc.size):
        for arr, grad in ((pc, dc), (pr, dr)):
            old = arr[i]
            arr[i] = old + h
            up = loss_fn(pc, pr, rc, rr, coefficient)[0]
            arr[i] = old - h
            down = loss_fn(pc, pr, rc, rr, coefficient)[0]
            arr[i] = old
            assert abs((up - down) / (2 * h) - grad[i]) <= 1e-7 * max(1.0, abs(grad[i]))


@pytest.mark.parametrize("beta", [0.01, 0.1, 1.0, 5.0])
def test_dpo_loss_gradient_matches_finite_differences(beta):
    assert_gradient_matches_finite_differences(pf.dpo_loss, beta, int(beta * 100))


def test_dpo_loss_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    pc, pr, rc, rr = random_logps(3, 7)
    beta = 0.3
    loss, dc, dr = pf.dpo_loss(pc, pr, rc, rr, beta)
    tc = torch.tensor(pc, dtype=torch.float64, requires_grad=True)
    tr = torch.tensor(pr, dtype=torch.float64, requires_grad=True)
    z = beta * ((tc - torch.tensor(rc)) - (tr - torch.tensor(rr)))
    tl = -torch.nn.functional.logsigmoid(z).mean()
    tl.backward()
    assert abs(loss - tl.item()) < 1e-14
    np.testing.assert_allclose(dc, tc.grad.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(dr, tr.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_ipo_loss_known_value_at_the_reference_and_at_its_target():
    pc = np.array([-10.0, -20.0])
    loss, dc, dr = pf.ipo_loss(pc, pc - 3, pc, pc - 3, 0.25)  # h = 0, target 1/(2 tau) = 2
    assert loss == 4.0
    np.testing.assert_array_equal(dc, [2 * -2.0 / 2] * 2)  # 2 (h - target) / N
    np.testing.assert_array_equal(dr, -dc)
    loss, dc, dr = pf.ipo_loss(pc + 1.5, pc - 3.5, pc, pc - 3, 0.25)  # h = 2: at the target, no pull
    assert loss == 0.0 and not dc.any() and not dr.any()
    loss, dc, _ = pf.ipo_loss(pc + 10, pc - 3, pc, pc - 3, 0.25)  # h = 10: past the target, pulled back
    assert loss == 64.0 and (dc > 0).all()  # gradient descent lowers log pi(y_w)


@pytest.mark.parametrize("tau", [0.05, 0.5, 4.0])
def test_ipo_loss_gradient_matches_finite_differences(tau):
    assert_gradient_matches_finite_differences(pf.ipo_loss, tau, int(tau * 100) + 7)


def test_ipo_loss_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    pc, pr, rc, rr = random_logps(4, 7)
    tau = 0.1
    loss, dc, dr = pf.ipo_loss(pc, pr, rc, rr, tau)
    tc = torch.tensor(pc, dtype=torch.float64, requires_grad=True)
    tr = torch.tensor(pr, dtype=torch.float64, requires_grad=True)
    logits = (tc - tr) - (torch.tensor(rc) - torch.tensor(rr))
    tl = ((logits - 1 / (2 * tau)) ** 2).mean()  # eric-mitchell/direct-preference-optimization, trainers.py, ipo=True
    tl.backward()
    assert abs(loss - tl.item()) <= 1e-12 * tl.item()
    np.testing.assert_allclose(dc, tc.grad.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(dr, tr.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("tau,message", [(0, "greater than 0"), (float("inf"), "finite"), (True, "a number")])
def test_ipo_loss_rejects_a_bad_tau(tau, message):
    with pytest.raises(ValueError, match=f"tau must be .*{message}"):
        pf.ipo_loss([-1.0], [-2.0], [-1.0], [-2.0], tau)
    with pytest.raises(ValueError, match="same length"):
        pf.ipo_loss([-1.0, -2.0], [-2.0], [-1.0], [-2.0], 0.1)


def test_dpo_loss_is_finite_far_from_the_reference():
    loss, dc, _ = pf.dpo_loss([0.0], [-1e5], [0.0], [0.0], 1.0)  # z = 1e5
    assert loss == 0.0 and dc[0] == -0.0
    loss, dc, _ = pf.dpo_loss([-1e5], [0.0], [0.0], [0.0], 1.0)  # z = -1e5
    assert loss == pytest.approx(1e5) and dc[0] == pytest.approx(-1.0)


@pytest.mark.parametrize("beta,message", [(0, "greater than 0"), (-1.0, "greater than 0"), (float("nan"), "finite"),
                                          (float("inf"), "finite"), (True, "a number"), ("0.1", "a number"),
                                          (None, "a number")])
def test_dpo_loss_rejects_a_bad_beta(beta, message):
    with pytest.raises(ValueError, match=message):
        pf.dpo_loss([-1.0], [-2.0], [-1.0], [-2.0], beta)


def test_dpo_loss_rejects_bad_log_probabilities():
    with pytest.raises(ValueError, match="finite"):
        pf.dpo_loss([float("nan")], [-2.0], [-1.0], [-2.0], 0.1)
    with pytest.raises(ValueError, match="same length"):
        pf.dpo_loss([-1.0, -2.0], [-2.0], [-1.0], [-2.0], 0.1)
    with pytest.raises(ValueError, match="non-empty"):
        pf.dpo_loss([], [], [], [], 0.1)


def test_response_logps_is_the_sum_of_next_token_log_probabilities():
    params = model.init_params(CFG, 0, dtype=np.float64)
    rng = np.random.default_rng(0)
    prompts, responses = rng.integers(0, VOCAB.size, (3, 5)), rng.integers(0, VOCAB.size, (3, 6))
    logps = pf.response_logps(params, CFG, prompts, responses)
    for b in range(3):
        ctx, total = list(prompts[b]), 0.0
        for tok in responses[b]:
            total += math.log(sample.next_token_probs(params, CFG, ctx)[tok])
            ctx.append(int(tok))
        assert logps[b] == pytest.approx(total, rel=1e-12)


def test_response_logps_backward_matches_finite_differences():
    params = model.init_params(CFG, 1, dtype=np.float64)
    rng = np.random.default_rng(1)
    prompts, responses = rng.integers(0, VOCAB.size, (3, 5)), rng.integers(0, VOCAB.size, (3, 6))
    weights = rng.standard_normal(3)
    _, cache = pf.response_logps_forward(params, CFG, prompts, responses)
    grads = pf.response_logps_backward(weights, cache)
    f = lambda: float(weights @ pf.response_logps(params, CFG, prompts, responses))
    h = 1e-6
    for name in ("wte", "h.0.attn.c_attn.weight", "h.0.mlp.c_proj.weight", "ln_f.bias", "wpe"):
        p = params[name].reshape(-1)
        for i in rng.choice(p.size, 4, replace=False):
            old = p[i]
            p[i] = old + h
            up = f()
            p[i] = old - h
            down = f()
            p[i] = old
            g = grads[name].reshape(-1)[i]
            assert abs((up - down) / (2 * h) - g) <= 1e-6 * max(1.0, abs(g)), name


def test_bradley_terry_gradient_and_fit():
    rng = np.random.default_rng(2)
    V, target = VOCAB.size, VOCAB.chars.index("e")
    a, b = rng.integers(0, V, (200, 12)), rng.integers(0, V, (200, 12))
    ca, cb = (a == target).sum(-1), (b == target).sum(-1)
    keep = ca != cb
    pairs = {"chosen": np.where((ca > cb)[keep][:, None], a[keep], b[keep]),
             "rejected": np.where((ca > cb)[keep][:, None], b[keep], a[keep])}
    cc, rc = pf.char_counts(pairs["chosen"], V), pf.char_counts(pairs["rejected"], V)
    w = rng.standard_normal(V)
    _, dw = pf.bradley_terry_loss(w, cc, rc, 1e-3)
    h = 1e-6
    for i in (0, target, V - 1):
        e = np.zeros(V)
        e[i] = h
        num = (pf.bradley_terry_loss(w + e, cc, rc, 1e-3)[0] - pf.bradley_terry_loss(w - e, cc, rc, 1e-3)[0]) / (2 * h)
        assert abs(num - dw[i]) < 1e-7
    fitted = pf.fit_reward_model(pairs, V)
    assert fitted.argmax() == target and pf.pair_accuracy(fitted, pairs) == 1.0


def test_make_pairs_prefers_the_target_letter_and_sampling_is_seeded():
    params = model.init_params(CFG, 3)
    target = VOCAB.chars.index("e")
    prompts = pf.prompts_from(VOCAB.encode(TEXT)[0], 40, 4)
    settings = dict(pf.PREF, response_tokens=8)
    pairs = pf.make_pairs(params, CFG, prompts, target, np.random.default_rng(0), settings)
    assert len(pairs["prompts"]) > 10
    assert ((pairs["chosen"] == target).sum(-1) > (pairs["rejected"] == target).sum(-1)).all()
    again = pf.make_pairs(params, CFG, prompts, target, np.random.default_rng(0), settings)
    np.testing.assert_array_equal(again["chosen"], pairs["chosen"])
    with pytest.raises(ValueError, match="one character"):
        pf.target_id(VOCAB, "ee")
    with pytest.raises(ValueError, match="one character"):
        pf.target_id(VOCAB, "\U0001F600")


@pytest.fixture(scope="module")
def toy_run():
    """A small model pretrained on TEXT, pairs for 'e', the reference's measurement."""
    from pylib import train
    tokens = np.tile(VOCAB.encode(TEXT)[0], 20)
    tcfg = train.TrainConfig(steps=150, eval_interval=10**6, eval_windows=4)
    params, _ = train.train(CFG, tcfg, tokens, tokens)
    target = VOCAB.chars.index("e")
    settings = dict(pf.PREF, response_tokens=8)
    prompts = pf.prompts_from(tokens, 128, 7)
    pairs = pf.make_pairs(params, CFG, prompts, target, np.random.default_rng(0), settings)
    ref = pf.measure_policy(params, params, CFG, prompts, target, 0, settings)
    return params, target, settings, prompts, pairs, ref


def test_dpo_raises_the_target_frequency(toy_run):
    params, target, settings, prompts, pairs, ref = toy_run
    assert ref["kl"] == 0.0
    rc = pf.response_logps(params, CFG, pairs["prompts"], pairs["chosen"])
    rr = pf.response_logps(params, CFG, pairs["prompts"], pairs["rejected"])
    state = sft.init_finetune(params, 0)
    records = pf.dpo_steps(state, CFG, pairs, rc, rr, 40)
    assert records[0]["loss"] == pytest.approx(math.log(2), abs=1e-6) and records[-1]["loss"] < 0.5
    # before the first step the policy is the reference: zero up to float32 rounding (batch of 32 against chunks of 256)
    assert abs(records[0]["chosen"]) < 1e-5 and abs(records[0]["rejected"]) < 1e-5
    for r in records:
        assert r["margin"] == r["chosen"] - r["rejected"]
    after = pf.measure_policy(state["params"], params, CFG, prompts, target, 0, settings)
    assert after["frequency"] > ref["frequency"] + 0.05 and after["kl"] > 0


def test_ipo_holds_the_margin_near_its_target(toy_run):
    params, target, settings, prompts, pairs, ref = toy_run
    rc = pf.response_logps(params, CFG, pairs["prompts"], pairs["chosen"])
    rr = pf.response_logps(params, CFG, pairs["prompts"], pairs["rejected"])
    tau = 0.5  # target margin 1 nat
    state = sft.init_finetune(params, 0)
    records = pf.dpo_steps(state, CFG, pairs, rc, rr, 40, dict(pf.IPO, tau=tau), method="ipo")
    assert records[0]["loss"] == pytest.approx(1.0, abs=1e-6)  # (0 - 1)^2 at the reference, float32 rounding aside
    pc = pf.response_logps(state["params"], CFG, pairs["prompts"], pairs["chosen"])
    pr = pf.response_logps(state["params"], CFG, pairs["prompts"], pairs["rejected"])
    h = pf.log_ratio_margin(pc, pr, rc, rr)
    assert abs(h.mean() - 1 / (2 * tau)) < 0.25 and records[-1]["loss"] < 0.5 * records[0]["loss"]


def test_rl_with_a_kl_penalty_raises_the_target_frequency(toy_run):
    params, target, settings, prompts, pairs, ref = toy_run
    w = pf.fit_reward_model(pairs, VOCAB.size)
    state = sft.init_finetune(params, 0)
    pf.rl_steps(state, params, CFG, prompts, w, 40, pref=settings)
    after = pf.measure_policy(state["params"], params, CFG, prompts, target, 0, settings)
    assert after["frequency"] > ref["frequency"] + 0.05 and after["kl"] > 0


# ---------------------------------------------------------------------------
# The page's DPO ops (pylib.web.posttrain_ops), in CPython


@pytest.fixture(scope="module")
def pretrained_page(tmp_path_factory, shared_corpus):
    """pylib.web's session over the course corpus, with a short pretraining run done through the ops."""
    import json
    from pylib import web
    from pylib.web import posttrain_ops as ops
    corpus = shared_corpus
    folder = tmp_path_factory.mktemp("data")
    (folder / "train.bin").write_bytes(corpus.train.tobytes())
    (folder / "val.bin").write_bytes(corpus.val.tobytes())
    (folder / "vocab.json").write_text(json.dumps(corpus.vocab.to_json()))
    web.SESSION.load_corpus(folder)
    for key in ops._STATE:
        ops._STATE[key] = None
    ops.pretrain_start(web.SESSION, {"steps": "60", "seed": "0"})
    while not ops.pretrain_chunk(web.SESSION, {})["done"]:
        pass
    assert ops.pretrain_finish(web.SESSION, {})["complete"]
    return web.SESSION


def handle(op, args):
    import json
    from pylib import web
    return json.loads(web.handle(op, json.dumps(args)))


def test_page_dpo_raises_the_target_frequency_and_matches_cpython(pretrained_page):
    from pylib.web import posttrain_ops as ops
    info = ops.dpo_start(pretrained_page, {"beta": "0.1", "target": "e", "steps": "30", "seed": "0"})
    assert info["pairs"] > 50 and len(info["example_pairs"]) == 2
    records = []
    while True:
        chunk = ops.dpo_chunk(pretrained_page, {})
        records += chunk["records"]
        if chunk["done"]:
            break
    result = ops.dpo_finish(pretrained_page, {})
    assert [r["step"] for r in records] == list(range(30))
    # asked now, only the pretrained model answers: the DPO copy learned preferences, not answers
    answer = ops.ask(pretrained_page, {"line": "Good morrow", "seed": "0"})
    assert answer["tuned_kind"] == "dpo" and "tuned" not in answer and answer["pretrained"]["text"]
    assert result["after"]["frequency"] > result["before"]["frequency"] and result["before"]["kl"] == 0.0
    # the same run through pylib directly
    pre = ops._STATE["pretrained"]
    vocab, mcfg, params = pretrained_page.vocab, pre["mcfg"], pre["params"]
    target = pf.target_id(vocab, "e")
    prompts = pf.prompts_from(pretrained_page.val_tokens, ops.PAGE["pairs"], pf.PREF["prompt_tokens"])
    pairs = pf.make_pairs(params, mcfg, prompts, target, np.random.default_rng([0, 160]))
    rc = pf.response_logps(params, mcfg, pairs["prompts"], pairs["chosen"])
    rr = pf.response_logps(params, mcfg, pairs["prompts"], pairs["rejected"])
    state = sft.init_finetune(params, 0)
    direct = pf.dpo_steps(state, mcfg, pairs, rc, rr, 30)
    assert [r["loss"] for r in records] == [r["loss"] for r in direct]


@pytest.mark.parametrize("args,field,fragment", [
    ({"beta": "0"}, "beta", "greater than 0"),
    ({"beta": "-1"}, "beta", "greater than 0"),
    ({"beta": "NaN"}, "beta", "finite"),
    ({"beta": "1e309"}, "beta", "finite"),
    ({"beta": ""}, "beta", "empty"),
    ({"beta": "<b>1</b>"}, "beta", "must be a number"),
    ({"target": "\U0001F600"}, "target", "one character"),
    ({"target": "ee"}, "target", "one character"),
    ({"target": ""}, "target", "one character"),
    ({"target": "7"}, "target", "one character"),
    ({"steps": "1e6"}, "steps", "between"),
])
def test_page_dpo_refuses_bad_settings_with_a_message(pretrained_page, args, field, fragment):
    out = handle("posttrain_dpo_start", {"beta": "0.1", "target": "e", "steps": "10", "seed": "0", **args})
    assert not out["ok"] and fragment in out["errors"][field]


def test_page_dpo_loss_op_checks_its_input():
    ok = handle("posttrain_dpo_loss", {"policy_chosen": [-1.0], "policy_rejected": [-2.0], "ref_chosen": [-1.0],
                                       "ref_rejected": [-2.0], "beta": 0.5})
    assert ok["ok"] and ok["value"]["loss"] == pytest.approx(math.log(2))
    for beta in (0, -1, None, "x"):
        bad = handle("posttrain_dpo_loss", {"policy_chosen": [-1.0], "policy_rejected": [-2.0], "ref_chosen": [-1.0],
                                            "ref_rejected": [-2.0], "beta": beta})
        assert not bad["ok"] and "beta" in bad["message"]
    bad = handle("posttrain_dpo_loss", {"policy_chosen": ["a"], "policy_rejected": [-2.0], "ref_chosen": [-1.0],
                                        "ref_rejected": [-2.0], "beta": 0.1})
    assert not bad["ok"]
