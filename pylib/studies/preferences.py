"""Learning from preferences, as a toy on the course model: a Bradley-Terry reward model, policy-
gradient RL with a KL penalty against the reference (RLHF's shape), and DPO on the same pairs.

The toy, said plainly: the "human" is a rule. For each prompt (a window of the validation split)
the pretrained model (the reference) samples two responses of PREF["response_tokens"] characters;
the one with more of a target letter is "chosen", the other "rejected" (ties are dropped). The
property is one a reader can check by counting: the target letter's frequency in sampled responses.

- Reward model (Christiano et al. 2017, section 2.2.3; Ouyang et al. 2022, section 3.5): a
  Bradley-Terry model P(a preferred to b) = sigmoid(r(a) - r(b)), with r linear in the response's
  character counts (one weight per vocabulary entry: a bag-of-characters reward model, far smaller
  than the language-model reward models of the papers), fitted by gradient descent on -log P.
- RL with a KL penalty (Ouyang et al. 2022, section 3.5, equation 2, without the pretraining-mix
  term): maximise E[r(y) - kl_coef * (log pi(y) - log pi_ref(y))] over the policy's own samples,
  by REINFORCE with the batch mean as the baseline (not PPO: no clipping, no value function).
- DPO (Rafailov et al. 2023, equation 7): the loss -log sigmoid(beta * ((log pi(y_w) - log
  pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l)))) on the same pairs, no reward model, no sampling
  during training.
- IPO (Azar et al. 2023, section 5.2, equation 17): the loss (h - 1/(2 tau))^2 on the same h =
  (log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l)): h is regressed to a fixed
  target instead of pushed ever higher.

Every method is measured the same way on held-out prompts: the target letter's frequency in the
policy's samples, and the KL divergence from the reference, estimated as the mean of log pi(y) -
log pi_ref(y) over those samples (nats per response). That is Schulman's k1 estimator ("Approximating
KL Divergence", 2020: k1 = -log r with r = pi_ref(y) / pi(y), y ~ pi): unbiased, but single samples
can be negative. RL's penalty uses the same per-sample log-ratio, as InstructGPT's equation 2 does.

Legend: N pairs or samples, B batch, P prompt length, L response length, T = P + L - 1, V vocab.
"""

import numpy as np

from pylib import model
from pylib.studies import sft

# ---------------------------------------------------------------------------
# Settings (measured by experiments/ch16.py; the page re-runs them, smaller)

PREF = {
    "target": "e",  # the target letter: responses with more of it are preferred
    "prompt_tokens": 32,  # P: the prompt is a window of the validation split
    "response_tokens": 24,  # L: characters sampled after it
    "pairs": 256,  # prompts for pairs (ties dropped)
    "eval_prompts": 128,  # held-out prompts for the measurements
    "temperature": 1.0,
}
REWARD = {"steps": 300, "lr": 0.05, "l2": 1e-3}
DPO = {"beta": 0.1, "steps": 80, "batch_size": 32, "lr": 3e-3, "grad_clip": 1.0}
IPO = {"tau": 0.1, "steps": 80, "batch_size": 32, "lr": 3e-3, "grad_clip": 1.0}  # tau as DPO's beta
RL = {"kl_coef": 1.0, "steps": 80, "batch_size": 32, "lr": 3e-3, "grad_clip": 1.0}
METHODS = ("reference", "rl", "dpo", "ipo")


# ---------------------------------------------------------------------------
# The DPO loss and its gradient


def _check_logps(name, a):
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of log-probabilities, one per pair")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite (no NaN or infinity)")
    return a


def _check_coefficient(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{name} must be a number")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number greater than 0, got {value}")


def log_ratio_margin(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps):
    """h = (pc - rc) - (pr - rr) (N,): how much more the policy than the reference prefers y_w to y_l."""
    pc = _check_logps("policy_chosen_logps", policy_chosen_logps)  # (N,)
    pr = _check_logps("policy_rejected_logps", policy_rejected_logps)
    rc = _check_logps("ref_chosen_logps", ref_chosen_logps)
    rr = _check_logps("ref_rejected_logps", ref_rejected_logps)
    if not pc.shape == pr.shape == rc.shape == rr.shape:
        raise ValueError("the four log-probability arrays must have the same length (one entry per pair)")
    return (pc - rc) - (pr - rr)


def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta):
    """DPO's loss, the mean over N pairs, and its gradients w.r.t. the two policy log-probabilities.

    loss = mean(-log sigmoid(z)), z = beta * ((pc - rc) - (pr - rr)); dz/dpc = beta, dz/dpr = -beta.
    Returns (loss, d_policy_chosen (N,), d_policy_rejected (N,)), all float64."""
    _check_coefficient("beta", beta)
    z = beta * log_ratio_margin(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)
    loss = float(np.logaddexp(0.0, -z).mean())  # -log sigmoid(z), stable for any z
    dz = -np.exp(-np.logaddexp(0.0, z)) / z.size  # d loss / dz = -sigmoid(-z) / N
    return loss, beta * dz, -beta * dz


def ipo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, tau):
    """IPO's loss (Azar et al. 2023, equation 17), the mean over N pairs, and its gradients.

    loss = mean((h - 1/(2 tau))^2), h = (pc - rc) - (pr - rr); dh/dpc = 1, dh/dpr = -1.
    Returns (loss, d_policy_chosen (N,), d_policy_rejected (N,)), all float64."""
    _check_coefficient("tau", tau)
    h = log_ratio_margin(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)
    gap = h - 1.0 / (2.0 * tau)  # (N,): zero where the margin sits at its target
    dh = 2.0 * gap / h.size
    return float((gap * gap).mean()), dh, -dh


PAIR_LOSSES = {"dpo": (dpo_loss, "beta"), "ipo": (ipo_loss, "tau")}  # method: (loss, its coefficient)


# ---------------------------------------------------------------------------
# Sequences: sampling, and a response's log-probability with its gradient


def prompts_from(tokens, n, prompt_tokens, offset=0):
    """n prompts (n, P): evenly spaced windows of the token stream, shifted by offset tokens."""
    tokens = np.asarray(tokens)
    if len(tokens) < prompt_tokens + offset + 1:
        raise ValueError("the token stream is too short for these prompts")
    starts = np.linspace(offset, len(tokens) - prompt_tokens - 1, n).astype(np.int64)
    return tokens[starts[:, None] + np.arange(prompt_tokens)].astype(np.int64)


def sample_responses(params, cfg, prompts, n_new, rng, temperature=1.0):
    """Sample n_new tokens after each prompt, all rows at once; returns responses (B, n_new)."""
    ids = np.asarray(prompts, dtype=np.int64)  # (B, P)
    out = np.empty((ids.shape[0], n_new), dtype=np.int64)
    for t in range(n_new):
        logits = model.forward_logits(params, cfg, ids[:, -cfg.block_size:])[:, -1].astype(np.float64)  # (B, V)
        logits /= temperature
        p = np.exp(logits - logits.max(-1, keepdims=True))
        cdf = np.cumsum(p, axis=-1)  # (B, V): inverse-CDF draws, as pylib.sample does
        u = rng.random(ids.shape[0])[:, None] * cdf[:, -1:]
        out[:, t] = np.minimum((cdf <= u).sum(-1), cfg.vocab_size - 1)
        ids = np.concatenate([ids, out[:, t:t + 1]], axis=1)
    return out


def response_logps_forward(params, cfg, prompts, responses):
    """log pi(response | prompt) summed over the response's tokens: (B,), and a cache for backward."""
    seq = np.concatenate([prompts, responses], axis=1)  # (B, P + L)
    if seq.shape[1] - 1 > cfg.block_size:
        raise ValueError(f"prompt + response is {seq.shape[1]} tokens; at most {cfg.block_size + 1} fit")
    x, y = seq[:, :-1], seq[:, 1:]  # (B, T)
    P = prompts.shape[1]
    mask = np.zeros(y.shape, dtype=np.float64)
    mask[:, P - 1:] = 1.0  # targets that are response tokens
    logits, cache = model.forward(params, cfg, x)  # (B, T, V)
    z = logits.astype(np.float64)
    z -= z.max(-1, keepdims=True)
    probs = np.exp(z)
    probs /= probs.sum(-1, keepdims=True)  # (B, T, V)
    tok = np.log(np.take_along_axis(probs, y[..., None], -1)[..., 0])  # (B, T)
    return (tok * mask).sum(-1), (cache, probs, y, mask, logits.dtype)


def response_logps_backward(dlogps, fcache):
    """Grads of sum_b dlogps[b] * logps[b]: d logp / d logits = (onehot(y) - softmax) at response targets."""
    cache, probs, y, mask, dtype = fcache
    w = (np.asarray(dlogps, dtype=np.float64)[:, None] * mask)[..., None]  # (B, T, 1)
    dlogits = -w * probs
    np.put_along_axis(dlogits, y[..., None], np.take_along_axis(dlogits, y[..., None], -1) + w, -1)
    return model.backward(dlogits.astype(dtype), cache)


def response_logps(params, cfg, prompts, responses, chunk=256):
    """log pi(response | prompt) (B,), without gradients."""
    return np.concatenate([response_logps_forward(params, cfg, prompts[i:i + chunk], responses[i:i + chunk])[0]
                           for i in range(0, len(prompts), chunk)])


# ---------------------------------------------------------------------------
# The property and the pairs


def target_id(vocab, target):
    """The target letter's token id, or ValueError if it is not one character of the vocabulary."""
    if not isinstance(target, str) or len(target) != 1 or target not in vocab.chars:
        raise ValueError("the target must be one character of the vocabulary (a letter, a space, a punctuation mark)")
    return vocab.chars.index(target)


def target_frequency(responses, target):
    """Fraction of response tokens equal to the target id: (B,) per response."""
    return (np.asarray(responses) == target).mean(-1)


def make_pairs(params, cfg, prompts, target, rng, settings=PREF):
    """Two reference samples per prompt; chosen = more target tokens; ties dropped.

    Returns {prompts (N, P), chosen (N, L), rejected (N, L)}."""
    a = sample_responses(params, cfg, prompts, settings["response_tokens"], rng, settings["temperature"])
    b = sample_responses(params, cfg, prompts, settings["response_tokens"], rng, settings["temperature"])
    ca, cb = (a == target).sum(-1), (b == target).sum(-1)  # (N,)
    keep = ca != cb
    a_wins = (ca > cb)[keep][:, None]
    return {"prompts": prompts[keep], "chosen": np.where(a_wins, a[keep], b[keep]),
            "rejected": np.where(a_wins, b[keep], a[keep])}


# ---------------------------------------------------------------------------
# The Bradley-Terry reward model


def char_counts(responses, vocab_size):
    """Bag of characters (N, V): how many times each token appears in each response."""
    r = np.asarray(responses)
    counts = np.zeros((r.shape[0], vocab_size))
    np.add.at(counts, (np.arange(r.shape[0])[:, None], r), 1.0)
    return counts


def bradley_terry_loss(w, chosen_counts, rejected_counts, l2=0.0):
    """Mean -log sigmoid(r(chosen) - r(rejected)) + l2/2 |w|^2 with r = counts @ w; returns (loss, dw)."""
    d = (chosen_counts - rejected_counts)  # (N, V)
    margin = d @ w  # (N,)
    loss = float(np.logaddexp(0.0, -margin).mean() + 0.5 * l2 * (w @ w))
    dw = -(np.exp(-np.logaddexp(0.0, margin)) @ d) / len(d) + l2 * w  # (V,)
    return loss, dw


def fit_reward_model(pairs, vocab_size, settings=REWARD):
    """Gradient descent on the Bradley-Terry loss; returns the weights w (V,)."""
    cc, rc = char_counts(pairs["chosen"], vocab_size), char_counts(pairs["rejected"], vocab_size)
    w = np.zeros(vocab_size)
    for _ in range(settings["steps"]):
        w -= settings["lr"] * bradley_terry_loss(w, cc, rc, settings["l2"])[1]
    return w


def reward(w, responses):
    """The reward model's score of each response (B,)."""
    return char_counts(responses, w.size) @ w


def pair_accuracy(w, pairs):
    """Fraction of pairs the reward model ranks as the rule does."""
    return float((reward(w, pairs["chosen"]) > reward(w, pairs["rejected"])).mean())


# ---------------------------------------------------------------------------
# Training the policy: DPO, and RL with a KL penalty


def dpo_steps(state, cfg, pairs, ref_chosen, ref_rejected, n_steps, settings=DPO, method="dpo"):
    """n_steps of DPO (or IPO, method="ipo") on random minibatches of the pairs; returns each step's
    {loss, margin, chosen, rejected}: the batch's mean h, and the mean log-ratios log pi - log pi_ref
    of its chosen and of its rejected responses, before the step."""
    loss_fn, coef = PAIR_LOSSES[method]
    records, B = [], settings["batch_size"]
    for _ in range(n_steps):
        idx = state["rng"].integers(0, len(pairs["prompts"]), size=B)
        pr = pairs["prompts"][idx]
        lc, cc = response_logps_forward(state["params"], cfg, pr, pairs["chosen"][idx])
        lr_, cr = response_logps_forward(state["params"], cfg, pr, pairs["rejected"][idx])
        loss, dc, dr = loss_fn(lc, lr_, ref_chosen[idx], ref_rejected[idx], settings[coef])
        grads = response_logps_backward(dc, cc)
        for k, g in response_logps_backward(dr, cr).items():
            grads[k] += g
        sft.apply_update(state, grads, settings["lr"], settings["grad_clip"])
        chosen, rejected = float(np.mean(lc - ref_chosen[idx])), float(np.mean(lr_ - ref_rejected[idx]))
        records.append({"step": state["step"] - 1, "loss": loss, "margin": chosen - rejected,
                        "chosen": chosen, "rejected": rejected})
    return records


def rl_steps(state, ref_params, cfg, prompts, w, n_steps, settings=RL, pref=PREF):
    """n_steps of REINFORCE on r(y) - kl_coef * (log pi(y) - log pi_ref(y)), on the policy's own samples."""
    records, B = [], settings["batch_size"]
    for _ in range(n_steps):
        idx = state["rng"].integers(0, len(prompts), size=B)
        pr = prompts[idx]
        y = sample_responses(state["params"], cfg, pr, pref["response_tokens"], state["rng"], pref["temperature"])
        logp, c = response_logps_forward(state["params"], cfg, pr, y)
        kl = logp - response_logps(ref_params, cfg, pr, y)  # (B,) per-sample log-ratio
        total = reward(w, y) - settings["kl_coef"] * kl  # (B,): the penalised reward
        advantage = total - total.mean()  # the batch mean as the baseline
        grads = response_logps_backward(-advantage / B, c)  # minimise -mean(A * log pi)
        sft.apply_update(state, grads, settings["lr"], settings["grad_clip"])
        records.append({"step": state["step"] - 1, "reward": float(reward(w, y).mean()), "kl": float(kl.mean())})
    return records


# ---------------------------------------------------------------------------
# Measurements


def measure_policy(params, ref_params, cfg, prompts, target, seed, settings=PREF):
    """{frequency, kl} over one sample per held-out prompt (a fixed sampling seed)."""
    rng = np.random.default_rng([seed, 161])
    y = sample_responses(params, cfg, prompts, settings["response_tokens"], rng, settings["temperature"])
    kl = response_logps(params, cfg, prompts, y) - response_logps(ref_params, cfg, prompts, y)
    return {"frequency": float(target_frequency(y, target).mean()), "kl": float(kl.mean()), "responses": y}
