"""The course model in PyTorch: nanoGPT's architecture, loading pylib's weights.

Written from nanoGPT's model.py (CausalSelfAttention with c_attn and c_proj, MLP with c_fc,
tanh-GELU and c_proj, pre-LN Block, GPT with transformer.wte/wpe/h/ln_f and lm_head tied to wte).
It shares no code with pylib: pylib's weights reach it only as a state dict in nanoGPT's layout
(pylib.export.to_nanogpt_state_dict), loaded with strict=True, so a wrong name, shape or layout
fails. Attention takes the explicit path (scores, mask, softmax, weighted sum), as pylib does and as
nanoGPT does without flash attention, so that both store the same activations.

Legend: B batch, T time, C n_embd, H n_head, V vocab_size.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.n_embd, self.head_size = cfg.n_head, cfg.n_embd, cfg.n_embd // cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)

    def forward(self, x):
        # the head count comes from the shape (as in torchtitan's attention), so that the same
        # forward runs on a tensor-parallel rank's share of the heads (companions/ch12_tensor_parallel.py)
        B, T, _ = x.size()
        qkv = self.c_attn(x)  # (B, T, 3C), or this rank's (B, T, 3C/tp)
        q, k, v = qkv.split(qkv.size(-1) // 3, dim=2)
        k = k.view(B, T, -1, self.head_size).transpose(1, 2)  # (B, H, T, C/H)
        q = q.view(B, T, -1, self.head_size).transpose(1, 2)
        v = v.view(B, T, -1, self.head_size).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, H, T, T)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, -1)  # heads side by side again
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
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=nn.LayerNorm(cfg.n_embd, bias=cfg.bias),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying: one tensor, two uses

    def forward(self, idx, targets=None):
        """Logits (B, T, V), and the mean cross-entropy over every position when targets are given."""
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)  # (B, T, C)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# ---------------------------------------------------------------------------
# pylib's weights in, PyTorch's gradients out, by pylib's names


def load_state_dict(net, state_dict):
    """Load a nanoGPT-layout state dict of NumPy arrays (pylib.export's) into net, strictly, in net's dtype."""
    dtype = next(net.parameters()).dtype
    net.load_state_dict({k: torch.tensor(v, dtype=dtype) for k, v in state_dict.items()}, strict=True)
    return net


def from_pylib(params, cfg, dtype=torch.float32):
    """A GPT holding pylib's params (a dict of arrays) for pylib's config cfg, in dtype."""
    from pylib import export  # the state dict in nanoGPT's layout: the only bridge between the two
    return load_state_dict(GPT(cfg).to(dtype), export.to_nanogpt_state_dict(params, cfg))


def pylib_name(key):
    """nanoGPT state-dict key -> pylib name ('transformer.wte.weight' -> 'wte'; lm_head is wte, tied)."""
    if key == "lm_head.weight":
        return "wte"
    name = key.removeprefix("transformer.")
    return name.removesuffix(".weight") if name in ("wte.weight", "wpe.weight") else name


def named_grads(net):
    """{pylib name: gradient as a NumPy array}: the tied weight once, holding both of its uses' sums."""
    return {pylib_name(k): p.grad.detach().cpu().numpy().copy() for k, p in net.named_parameters()}


def named_weights(net):
    """{pylib name: weight as a NumPy array}, the tied weight once."""
    return {pylib_name(k): p.detach().cpu().numpy().copy() for k, p in net.named_parameters()}
