"""pylib against an independent PyTorch nanoGPT: same loss and every gradient, in float64 and in
float32.

The PyTorch model is companions/model.py, written from nanoGPT's model.py. It shares no code with
pylib; pylib's weights reach it only through pylib.export, loaded with strict=True, so a wrong name,
shape or layout fails here.
"""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companions import model as torch_gpt  # noqa: E402
from companions.model import GPT  # noqa: E402
from pylib import export, model, optim  # noqa: E402

CFG = model.GPTConfig()


# ---------------------------------------------------------------------------


def torch_model(params, cfg):
    net = GPT(cfg).double()
    sd = export.to_nanogpt_state_dict(params, cfg)
    net.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=True)
    return net


def trained_like_params(cfg, seed):
    params = model.init_params(cfg, seed, dtype=np.float64)
    rng = np.random.default_rng(seed + 100)
    for v in params.values():
        v += 0.2 * rng.standard_normal(v.shape)  # away from the init's zeros and ones
    return params


@pytest.mark.parametrize("cfg", [CFG, model.GPTConfig(n_layer=2, n_head=4, n_embd=32, block_size=16),
                                 model.GPTConfig(n_layer=2, block_size=16, bias=False)],
                         ids=["decoder-5k", "2-layer", "no-bias"])
def test_loss_and_every_gradient_match_pytorch(cfg):
    params = trained_like_params(cfg, 0)
    rng = np.random.default_rng(1)
    x = rng.integers(0, cfg.vocab_size, (3, cfg.block_size))
    y = rng.integers(0, cfg.vocab_size, (3, cfg.block_size))
    loss, grads = model.loss_and_grads(params, cfg, x, y)
    net = torch_model(params, cfg)
    logits_t, loss_t = net(torch.from_numpy(x), torch.from_numpy(y))
    loss_t.backward()
    assert loss == pytest.approx(loss_t.item(), rel=1e-12)
    np.testing.assert_allclose(model.forward_logits(params, cfg, x), logits_t.detach().numpy(), rtol=1e-10, atol=1e-12)
    torch_grads = {k: p.grad.numpy() for k, p in net.named_parameters()}  # the tied weight appears once
    assert "transformer.wte.weight" in torch_grads or "lm_head.weight" in torch_grads
    for name, g in grads.items():
        key = export.nanogpt_name(name)
        tg = torch_grads.get(key, torch_grads.get("lm_head.weight") if name == "wte" else None)
        assert tg is not None, key
        # the tied wte gradient is the sum of the embedding's and the output head's
        np.testing.assert_allclose(g, tg, rtol=1e-9, atol=1e-12 * max(1.0, np.abs(tg).max()), err_msg=key)


def test_adamw_matches_torch_adamw_over_several_steps():
    params = trained_like_params(CFG, 2)
    net = torch_model(params, CFG)
    groups = optim.param_groups(params)
    decay = [p for n, p in net.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in net.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-2, betas=(0.9, 0.99), eps=1e-8)
    state = optim.adamw_init(params)
    rng = np.random.default_rng(3)
    for _ in range(5):
        x = rng.integers(0, CFG.vocab_size, (2, 32))
        y = rng.integers(0, CFG.vocab_size, (2, 32))
        _, grads = model.loss_and_grads(params, CFG, x, y)
        norm = optim.clip_grad_norm(grads, 0.5)
        optim.adamw_step(params, grads, state, 1e-2, 0.9, 0.99, 1e-8, 0.1, groups)
        opt.zero_grad()
        net(torch.from_numpy(x), torch.from_numpy(y))[1].backward()
        torch_norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
        opt.step()
        assert norm == pytest.approx(torch_norm.item(), rel=1e-10)
    sd = net.state_dict()
    for name, v in params.items():
        np.testing.assert_allclose(v, sd[export.nanogpt_name(name)].numpy(), rtol=1e-8, atol=1e-10, err_msg=name)


def test_init_statistics_match_nanogpt_rules():
    cfg = model.GPTConfig(n_layer=4, n_head=4, n_embd=64)
    sd = export.to_nanogpt_state_dict(model.init_params(cfg, 0), cfg)
    net = GPT(cfg)
    net.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=True)  # float32 loads too
    assert net.transformer.wte.weight.data_ptr() == net.lm_head.weight.data_ptr()
    assert abs(float(net.transformer.h[3].attn.c_proj.weight.detach().std()) - 0.02 / math.sqrt(2 * 4)) < 5e-4


# ---------------------------------------------------------------------------
# float32: the companions' model equals pylib's to float32 rounding

U32 = 2.0 ** -24  # float32's unit roundoff
F32_TOL = 32 * U32  # per tensor, relative to its largest entry; measured today: 13.7u at worst (a float32 gradient of the course model)


def float32_differences(cfg, gelu="tanh"):
    """{what: max |pylib - torch| / max |pylib|} for logits, loss and every gradient, both in float32."""
    params = {k: v.astype(np.float32) for k, v in trained_like_params(cfg, 4).items()}
    rng = np.random.default_rng(5)
    x = rng.integers(0, cfg.vocab_size, (4, cfg.block_size))
    y = rng.integers(0, cfg.vocab_size, (4, cfg.block_size))
    loss, grads = model.loss_and_grads(params, cfg, x, y)
    net = torch_gpt.from_pylib(params, cfg, torch.float32)
    if gelu != "tanh":  # a planted error: the erf GELU instead of GPT-2's tanh approximation
        for block in net.transformer.h:
            block.mlp.forward = lambda h, m=block.mlp: m.c_proj(torch.nn.functional.gelu(m.c_fc(h)))
    logits, loss_t = net(torch.from_numpy(x), torch.from_numpy(y))
    loss_t.backward()
    rel = lambda a, b: float(np.abs(a - b).max() / np.abs(a).max())  # noqa: E731
    out = {"logits": rel(model.forward_logits(params, cfg, x), logits.detach().numpy()),
           "loss": abs(loss - loss_t.item()) / abs(loss)}
    torch_grads = torch_gpt.named_grads(net)
    assert sorted(torch_grads) == sorted(grads)  # every parameter, the tied one once
    out.update({name: rel(g, torch_grads[name]) for name, g in grads.items()})
    return out


@pytest.mark.parametrize("cfg", [CFG, model.GPTConfig(n_layer=2, n_head=4, n_embd=32, block_size=16)],
                         ids=["decoder-5k", "2-layer"])
def test_companion_model_equals_pylib_in_float32(cfg):
    worst = max(float32_differences(cfg).items(), key=lambda kv: kv[1])
    assert worst[1] <= F32_TOL, f"{worst[0]} differs by {worst[1] / U32:.1f} u"


def test_float32_comparison_catches_a_planted_error():
    worst = max(float32_differences(CFG, gelu="erf").values())
    assert worst > 100 * F32_TOL  # the erf GELU differs from tanh's by about 1e-3
