"""pylib against an independent PyTorch nanoGPT: same loss and every gradient, in float64.

The PyTorch model below is written from nanoGPT's model.py (CausalSelfAttention with c_attn and
c_proj, MLP with c_fc, tanh-GELU and c_proj, pre-LN Block, GPT with transformer.wte/wpe/h/ln_f
and lm_head tied to wte). It shares no code with pylib; pylib's weights reach it only through
pylib.export, loaded with strict=True, so a wrong name, shape or layout fails here.
"""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from pylib import export, model, optim  # noqa: E402

CFG = model.GPTConfig()


# ---------------------------------------------------------------------------
# nanoGPT, written out


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.n_embd = cfg.n_head, cfg.n_embd
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # the explicit path
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=nn.LayerNorm(cfg.n_embd, bias=cfg.bias),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1))
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


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
