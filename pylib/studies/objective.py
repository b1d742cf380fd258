"""The objective, taken apart: the gradient p - y at the logits, the loss denominator, and what
the denominator does to gradient accumulation.

The loss itself is pylib.loss (masked cross-entropy with an explicit `denom`); this module only
uses it. Two reductions of the same per-token losses are compared throughout:

  - the token-weighted mean: sum of every counted token's loss / number of counted tokens
    (what pylib.loss computes, and what "the loss" means in this course);
  - the mean of per-sequence (or per-microbatch) means: each group's own mean, then the plain
    mean of those, which gives every token of a short group more weight than one of a long group.

The two worked examples are the ones chapter 3 works through.

Legend: B batch, T time, C n_embd, V vocab, K microbatches.
"""

import math

import numpy as np

from pylib import loss as xent, model

# ---------------------------------------------------------------------------
# Perplexity: the unigram model at a temperature


def tempered_unigram(train, val, vocab_size, tau):
    """The letter-frequency model sharpened or flattened: q ∝ p^(1/tau), p the add-one frequencies of
    train (pylib.data.unigram_loss's model, which tau = 1 gives back).

    Returns {probs (V,), entropy (nats: the model's own uncertainty, whose e^H is the number of
    equally likely tokens that would be as uncertain), val_loss (the mean cross-entropy of val's
    tokens under q, nats/token), val_ppl = e^val_loss}. As tau grows q tends to uniform (perplexity V);
    as it shrinks q puts nearly all its mass on the commonest token, and the val loss explodes."""
    if not tau > 0:
        raise ValueError("tau must be positive")
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64) + 1.0
    z = np.log(counts / counts.sum()) / tau  # (V,)
    logq = z - (z.max() + np.log(np.exp(z - z.max()).sum()))  # log-softmax
    q = np.exp(logq)
    val_counts = np.bincount(val, minlength=vocab_size).astype(np.float64)
    val_loss = float(-(val_counts @ logq) / val_counts.sum())
    entropy = float(-(q * logq).sum())
    return {"probs": q, "entropy": entropy, "own_ppl": math.exp(entropy), "val_loss": val_loss,
            "val_ppl": math.exp(val_loss)}


# ---------------------------------------------------------------------------
# The gradient at the logits: p - y


def logit_gradient(logits_row, target):
    """One position's logits (V,) and target id -> (p (V,), y one-hot (V,), p - y (V,)), via pylib.loss."""
    logits = np.asarray(logits_row, dtype=np.float64)[None, :]  # (1, V): one position
    t = np.array([int(target)])
    _, cache = xent.cross_entropy_forward(logits, t)
    dlogits = xent.cross_entropy_backward(cache)[0]  # (V,), denom 1: this position's own gradient
    p = cache[0][0]  # (V,) the softmax the loss computed
    y = np.zeros_like(p)
    y[int(target)] = 1.0
    return p, y, dlogits


def top_k_rows(p, y, grad, k):
    """Indices of the k most probable tokens, plus the target's if it is not among them."""
    order = np.argsort(-p, kind="stable")[:k]
    target = int(np.argmax(y))
    if target not in order:
        order = np.append(order, target)
    return [int(i) for i in order]


# ---------------------------------------------------------------------------
# The denominator: token-weighted mean against the mean of per-sequence means

# Chapter 3's two worked examples: (counted tokens, summed loss) per sequence.
WORKED_EXAMPLES = {
    "a": [(2, 4.0), (6, 6.0)],  # 2 targets summing to 4, 6 targets summing to 6
    "b": [(2, 8.0), (8, 8.0)],  # 2 tokens of loss 4 each, 8 tokens of loss 1 each
}


def token_weighted_mean(counts, loss_sums):
    """Sum of all counted tokens' losses / number of counted tokens."""
    total = sum(counts)
    if total <= 0:
        raise ValueError("no counted tokens: the mean is undefined")
    return float(sum(loss_sums)) / total


def mean_of_sequence_means(counts, loss_sums):
    """The plain mean of each sequence's own mean; sequences with no counted token are left out."""
    means = [s / n for n, s in zip(counts, loss_sums) if n > 0]
    if not means:
        raise ValueError("no counted tokens: the mean is undefined")
    return float(sum(means)) / len(means)


def token_weights(counts):
    """Each counted token's weight in the objective under both reductions, per sequence."""
    total = sum(counts)
    used = sum(1 for n in counts if n > 0)
    return [{"token_weighted": 1.0 / total, "mean_of_means": (1.0 / (used * n)) if n > 0 else 0.0}
            for n in counts]


def compare_denominators(counts, loss_sums):
    """Both reductions, each sequence's mean and each token's weight under each, for one table."""
    return {
        "token_weighted": token_weighted_mean(counts, loss_sums),
        "mean_of_means": mean_of_sequence_means(counts, loss_sums),
        "sequence_means": [(s / n) if n > 0 else None for n, s in zip(counts, loss_sums)],
        "token_weights": token_weights(counts),  # not "weights": the worker transfers a result's .weights buffer
        "total_tokens": int(sum(counts)),
        "total_loss": float(sum(loss_sums)),
    }


# ---------------------------------------------------------------------------
# Gradient accumulation: the denominator across microbatches


def prompt_masks(counts, B, T):
    """(K, B, T) 0/1 loss masks: in microbatch k each window counts only its last counts[k] targets.

    The masked-out start plays the part of a prompt (or padding): a fine-tuning batch whose
    answers have different lengths gives microbatches with different numbers of counted tokens.
    """
    masks = np.zeros((len(counts), B, T), dtype=np.float32)
    for k, n in enumerate(counts):
        if not 0 <= n <= T:
            raise ValueError(f"counted positions per window must be in [0, {T}], got {n}")
        if n:
            masks[k, :, T - n:] = 1.0
    return masks


def accumulated_grads(params, cfg, micro, reduction):
    """Grads summed over microbatches [(x, y, mask)], each normalised as `reduction` says.

    "token_weighted": every microbatch divides by the TOTAL count of counted tokens (exact);
    "mean_of_means": each divides by its own count and the sum is divided by the number of
    microbatches (the loss / grad_accum habit), which is exact only when all counts are equal.
    """
    counts = [xent.count_targets(y, m) for _, y, m in micro]
    total = sum(counts)
    grads = None
    for (x, y, m), n in zip(micro, counts):
        if reduction == "token_weighted":
            denom = total
        elif reduction == "mean_of_means":
            denom = n * len(micro)
        else:
            raise ValueError(f"unknown reduction {reduction!r}")
        if n == 0:
            continue  # no counted token: no loss, no gradient (and no division by zero)
        _, g = model.loss_and_grads(params, cfg, x, y, m, denom=denom)
        grads = g if grads is None else {k: grads[k] + g[k] for k in grads}
    return grads


def relative_error(grads, reference):
    """||g - ref|| / ||ref|| over all parameters as one vector (in float64)."""
    diff = math.sqrt(sum(float(np.sum((grads[k].astype(np.float64) - reference[k]) ** 2)) for k in reference))
    ref = math.sqrt(sum(float(np.sum(reference[k].astype(np.float64) ** 2)) for k in reference))
    return diff / ref


def accumulation_errors(params, cfg, x, y, counts):
    """The one-big-batch gradient against both accumulations of the same windows, split in len(counts).

    x, y (K*B, T); counts[k]: counted targets per window in microbatch k. Returns the token counts
    and each reduction's relative error against the gradient of the whole batch in one call.
    """
    K = len(counts)
    B, T = x.shape[0] // K, x.shape[1]
    if B * K != x.shape[0]:
        raise ValueError("the batch must split into len(counts) equal microbatches")
    masks = prompt_masks(counts, B, T)  # (K, B, T)
    if masks.sum() == 0:
        raise ValueError("no counted tokens in any microbatch")
    big_mask = masks.reshape(K * B, T)
    _, reference = model.loss_and_grads(params, cfg, x, y, big_mask)  # one batch, one mean
    micro = [(x[k * B:(k + 1) * B], y[k * B:(k + 1) * B], masks[k]) for k in range(K)]
    return {
        "tokens": [int(masks[k].sum()) for k in range(K)],
        "token_weighted": relative_error(accumulated_grads(params, cfg, micro, "token_weighted"), reference),
        "mean_of_means": relative_error(accumulated_grads(params, cfg, micro, "mean_of_means"), reference),
    }


def accumulation_pair(train_cfg, accum):
    """(one step on accum*B windows, accum microbatches of B windows): otherwise the same run.

    pylib.train draws each microbatch with get_batch(tokens, B, T, rng) from one generator, so
    accum draws of B start positions are the same numbers as one draw of accum*B (NumPy's
    Generator.integers; tests/test_objective.py checks it): both runs see the same windows in the
    same order, and their losses can differ only by floating-point rounding.
    """
    import dataclasses
    big = dataclasses.replace(train_cfg, batch_size=train_cfg.batch_size * accum, grad_accum=1)
    return big, dataclasses.replace(train_cfg, grad_accum=accum)


def init_train_state(model_cfg, train_cfg, dtype=np.float32):
    """pylib.train.init_train_state with the weights and optimiser state in dtype (e.g. float64).

    The same initial values (cast), the same batch stream: a float64 twin of a float32 run, to
    tell rounding from a real difference.
    """
    from pylib import optim, train
    state = train.init_train_state(model_cfg, train_cfg)
    params = model.pack_params({k: v.astype(dtype) for k, v in state["params"].items()}, dtype)
    opt = optim.adamw_init(params) if train_cfg.optimizer == "adamw" else optim.sgd_init(params)
    state.update(params=params, opt=opt, groups=optim.param_groups(params))
    return state


def parameter_difference(params_a, params_b, cfg):
    """Where two runs' weights differ: {tensor: ||a - b||} (float64), with each block's c_attn.bias
    split into its query, key and value thirds (…c_attn.bias.q / .k / .v).

    The key bias gets its own entry because its true gradient is exactly zero (adding the same
    number to every key's score in a row leaves the softmax unchanged; chapter 4): what it
    receives is rounding noise, it moves without changing the loss, and a difference there says
    nothing about whether two runs compute different things.
    """
    C = cfg.n_embd
    out = {}
    for name, a in params_a.items():
        d = a.astype(np.float64) - params_b[name]
        if name.endswith("attn.c_attn.bias"):
            for i, part in enumerate("qkv"):
                out[f"{name}.{part}"] = float(np.linalg.norm(d[i * C:(i + 1) * C]))
        else:
            out[name] = float(np.linalg.norm(d))
    return out


def key_bias_probe(state, cfg):
    """Record, at each step of a run, what the key biases receive and how far Adam moves them.

    Wraps state["update"]: before each update, the largest |gradient| over every block's key bias
    (the middle third of c_attn.bias), and after it the largest move of one of them in units of the
    step's learning rate (the biases are not decayed, so this is Adam's |m_hat / (sqrt(v_hat) + eps)|:
    about 1 when |g| >> eps, about |g| / eps when |g| << eps). Returns the list the records go to,
    one {"grad": ..., "step_frac": ...} per step.
    """
    C, update, records = cfg.n_embd, state["update"], []
    names = [f"h.{i}.attn.c_attn.bias" for i in range(cfg.n_layer)]

    def probed(state, tc, record, grads, lr):
        before = [state["params"][n][C:2 * C].astype(np.float64) for n in names]
        grad = max(float(np.abs(grads[n][C:2 * C]).max()) for n in names)
        update(state, tc, record, grads, lr)
        moved = max(float(np.abs(state["params"][n][C:2 * C] - b).max()) for n, b in zip(names, before))
        records.append({"grad": grad, "step_frac": moved / lr if lr else 0.0})

    state["update"] = probed
    return records


def loss_relevant_difference(diffs):
    """The norm of a parameter_difference over every entry except the key biases (see there)."""
    return math.sqrt(sum(v * v for k, v in diffs.items() if not k.endswith("c_attn.bias.k")))
