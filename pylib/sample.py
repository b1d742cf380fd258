"""Sampling text from a trained model, one token at a time (nanoGPT's GPT.generate).

Each new token is drawn from softmax(logits / temperature) at the last position, with the context
cropped to the last block_size tokens. The draw uses np.random.default_rng(seed) and an inverse
CDF on float64 probabilities, so a given seed gives the same tokens everywhere NumPy does.
"""

import numpy as np

from pylib import model

# ---------------------------------------------------------------------------


def next_token_probs(params, cfg, context, temperature=1.0):
    """Probabilities (V,) of the next token after context (a list of ids)."""
    ctx = np.asarray(context[-cfg.block_size:], dtype=np.int64)[None, :]  # (1, T)
    logits = model.forward_logits(params, cfg, ctx)[0, -1].astype(np.float64) / temperature  # (V,)
    e = np.exp(logits - logits.max())
    return e / e.sum()


def generate(params, cfg, prompt_ids, max_new_tokens, temperature=1.0, seed=0, stop_at=None):
    """prompt_ids followed by up to max_new_tokens sampled ids (stopping after stop_at, if given)."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    ids = [int(i) for i in prompt_ids]
    if not ids:
        raise ValueError("the prompt needs at least one token (e.g. the end-of-document id)")
    if min(ids) < 0 or max(ids) >= cfg.vocab_size:
        raise ValueError(f"prompt ids must be in [0, {cfg.vocab_size})")
    rng = np.random.default_rng(seed)
    for _ in range(max_new_tokens):
        cdf = np.cumsum(next_token_probs(params, cfg, ids, temperature))
        token = min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), cfg.vocab_size - 1)
        ids.append(token)
        if stop_at is not None and token == stop_at:
            break
    return ids
