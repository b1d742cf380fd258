"""Mixture-of-experts routing: top-k choice, expert capacity and dropped tokens, the load-balancing
loss, and what a published MoE run's figures imply.

Each token's router scores pick its top-k experts. An expert takes at most `capacity` tokens per
batch; the rest are dropped (they skip the expert and pass on through the residual connection).
Switch Transformer (Fedus et al. 2022, section 2.2) sets the capacity to
(tokens per batch / experts) x capacity factor, times k for top-k routing. To keep routing even,
it adds an auxiliary loss E * sum_i f_i P_i (their eqs. 4-6; Hugging Face's
modeling_switch_transformers.load_balancing_loss_func implements it), f_i the fraction of tokens
sent to expert i and P_i the mean router probability of expert i: 1 (times k for top-k) when
routing is uniform, E when every token goes to one expert. DeepSeek-V3 (arXiv 2412.19437) replaces
it mostly by a per-expert bias on the scores ("auxiliary-loss-free", section 2.1.2) and keeps a
small sequence-wise balance loss.

Legend: N tokens, E experts, k experts per token, C capacity, h model width.
"""

import math

import numpy as np

# ---------------------------------------------------------------------------
# Routing, capacity, balance


def expert_capacity(tokens, experts, top_k=1, capacity_factor=1.0):
    """Tokens one expert may take per batch: ceil(capacity_factor x tokens x k / experts)."""
    if tokens < 0 or experts < 1 or top_k < 1 or not capacity_factor > 0:
        raise ValueError("tokens >= 0, experts >= 1, top_k >= 1 and capacity_factor > 0 are needed")
    return math.ceil(capacity_factor * tokens * top_k / experts)


def route_top_k(router_probs, top_k):
    """(N, k) expert ids of each token's k highest router probabilities, best first."""
    probs = np.asarray(router_probs)  # (N, E)
    if not 1 <= top_k <= probs.shape[1]:
        raise ValueError(f"top_k must be between 1 and {probs.shape[1]}, not {top_k}")
    return np.argsort(-probs, axis=1, kind="stable")[:, :top_k]


def dispatch_with_capacity(expert_ids, experts, capacity):
    """Which (token, choice) pairs an expert keeps, in token order until it is full.

    expert_ids (N, k). Returns {"kept": (N, k) bool, "load": tokens each expert was sent,
    "dropped": pairs over capacity}. Tokens earlier in the batch win, as in Hugging Face's
    Switch router (a cumulative count per expert, compared with the capacity)."""
    ids = np.asarray(expert_ids)
    onehot = ids[..., None] == np.arange(experts)  # (N, k, E)
    order = np.cumsum(onehot.reshape(-1, experts), axis=0).reshape(onehot.shape)  # position in each queue
    kept = (onehot & (order <= capacity)).any(axis=-1)  # (N, k)
    load = onehot.sum(axis=(0, 1))
    return {"kept": kept, "load": load, "dropped": int((~kept).sum())}


def load_balancing_loss(router_probs, expert_ids, experts):
    """Switch Transformer's auxiliary loss, E * sum_i f_i P_i (f_i: the fraction of tokens sent to
    expert i, each token counted once per expert it chose; P_i: expert i's mean router probability)."""
    probs = np.asarray(router_probs, dtype=np.float64)  # (N, E)
    ids = np.asarray(expert_ids)  # (N, k)
    sent = (ids[..., None] == np.arange(experts)).any(axis=1)  # (N, E)
    f = sent.mean(axis=0)
    P = probs.mean(axis=0)
    return float(experts * np.sum(f * P))


# ---------------------------------------------------------------------------
# What a published MoE run's figures imply


def mla_attention_flops_per_token(seq_len, heads, qk_head_dim, v_head_dim, attention="full"):
    """Forward FLOPs per token and layer of the score and value products: 2 s H (d_qk + d_v), halved
    for the causal convention (the projections are weights, counted with the parameters)."""
    if attention not in ("full", "causal"):
        raise ValueError(f"attention must be 'full' or 'causal', not {attention!r}")
    full = 2 * seq_len * heads * (qk_head_dim + v_head_dim)
    return full if attention == "full" else full / 2


def implied_utilisation(gpu_hours_per_trillion_tokens, active_params, n_layer, seq_len, heads, qk_head_dim,
                        v_head_dim, peak_flops, attention="full"):
    """Tokens per GPU-second, model FLOPs per token (6 x active parameters + attention, forward and
    backward) and the implied FLOP/s per GPU and MFU of a run reported as GPU-hours per 10^12 tokens."""
    tokens_per_gpu_s = 1e12 / (gpu_hours_per_trillion_tokens * 3600)
    attn = 3 * n_layer * mla_attention_flops_per_token(seq_len, heads, qk_head_dim, v_head_dim, attention)
    flops_per_token = 6 * active_params + attn
    achieved = tokens_per_gpu_s * flops_per_token
    return {"tokens_per_gpu_s": tokens_per_gpu_s, "flops_per_token": flops_per_token,
            "attention_share": attn / flops_per_token, "flops_per_gpu_s": achieved, "mfu": achieved / peak_flops}


def dispatch_combine_bytes_per_token(d_model, nodes_per_token, dispatch_bytes=1, combine_bytes=2):
    """Bytes one token sends between nodes in one MoE layer's forward pass: a copy of its d_model
    activation to each of at most `nodes_per_token` nodes (dispatch), and the results back (combine)."""
    return nodes_per_token * d_model * (dispatch_bytes + combine_bytes)
