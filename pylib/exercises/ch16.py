"""Chapter 16's exercises: SFT's response-only loss, DPO's gradient at its first step, a DPO variant
the chapter does not show, and β changed on the live preference model (pylib.exercises says how
checks work)."""

import math

import numpy as np

from pylib import model
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_array, expect_number, kept, max_error, near
from pylib.loss import cross_entropy_forward
from pylib.studies import preferences, sft

DPO = preferences.DPO

# ---------------------------------------------------------------------------
# 1. Implement: SFT's loss on the response only, from the packed sequences

RESPONSE_STARTER = '''import numpy as np

from pylib.loss import cross_entropy_forward


def response_loss(logits, tokens, prompt_lens, eos_id):
    """SFT's loss: the mean cross-entropy over the response's targets only.

    tokens: (N, T + 1) integers, one packed sequence per row: the prompt's tokens, then the
        response's, then one EOS, then EOS again as padding to the end of the row.
        Neither the prompt nor the response contains EOS.
    logits: (N, T, V) floats, the model's scores for the inputs tokens[:, :-1]; the target at
        position t is tokens[:, t + 1].
    prompt_lens: (N,) integers, the number of prompt tokens in each row.
    Returns one float: the mean over every response target of the batch (the response's tokens
    and its EOS) of -log softmax(logits)[target]. Prompt targets and padding do not count.
    """
    raise NotImplementedError
'''

RESPONSE_SOLUTION = '''import numpy as np

from pylib.loss import cross_entropy_forward


def response_loss(logits, tokens, prompt_lens, eos_id):
    N, L = tokens.shape  # L = T + 1 tokens per row
    prompt = np.asarray(prompt_lens)[:, None]  # (N, 1)
    after_prompt = np.arange(L)[None, :] >= prompt  # (N, L): the response, its EOS, the padding
    end = np.argmax((tokens == eos_id) & after_prompt, axis=1)[:, None]  # (N, 1): the response's EOS
    t = np.arange(L - 1)[None, :]  # target positions: target t is token t + 1
    mask = (t + 1 >= prompt) & (t + 1 <= end)  # targets from the first response token to its EOS
    return cross_entropy_forward(logits, tokens[:, 1:], mask)[0]
'''


def _packed_batch(seed=16):
    """A batch of packed rows with uneven prompts and responses, one row full to its last token."""
    rng = np.random.default_rng(seed)
    V, L, eos = 12, 17, 11  # L = T + 1 tokens a row
    layout = [(5, 3), (1, 6), (9, 1), (4, 12), (7, 2)]  # (prompt tokens, response tokens); row 3 fills the row
    tokens = np.full((len(layout), L), eos, dtype=np.int64)
    for i, (p, r) in enumerate(layout):
        tokens[i, :p + r] = rng.integers(0, eos, p + r)  # no EOS inside prompt or response
    prompts = np.array([p for p, _ in layout])
    logits = rng.normal(0, 2, (len(layout), L - 1, V))
    return logits, tokens, prompts, eos, layout


def _masked(logits, tokens, mask, denom=None):
    return cross_entropy_forward(logits, tokens[:, 1:], mask.astype(float), denom)[0]


def _response_variants(logits, tokens, prompts, eos, layout):
    """The right loss and the usual wrong ones: {name: loss}."""
    N, L = tokens.shape
    t = np.arange(L - 1)[None, :]
    p = prompts[:, None]
    end = np.array([a + b for a, b in layout])[:, None]  # index of the response's EOS in the row
    right = (t >= p - 1) & (t <= end - 1)
    out = {"right": _masked(logits, tokens, right),
           "late": _masked(logits, tokens, (t >= p) & (t <= end - 1)),
           "early": _masked(logits, tokens, (t >= p - 2) & (t <= end - 1)),
           "no_eos": _masked(logits, tokens, (t >= p - 1) & (t <= end - 2)),
           "padding": _masked(logits, tokens, t >= p - 1),
           "prompt": _masked(logits, tokens, t <= end - 1),
           "everything": cross_entropy_forward(logits, tokens[:, 1:])[0],
           "all_positions": _masked(logits, tokens, right, right.size)}
    per_row = [_masked(logits[i:i + 1], tokens[i:i + 1], right[i:i + 1]) for i in range(N)]
    out["per_sequence"] = float(np.mean(per_row))
    return out


def check_response_loss(fn):
    logits, tokens, prompts, eos, layout = _packed_batch()
    v = _response_variants(logits, tokens, prompts, eos, layout)
    got = expect_number(fn(logits.copy(), tokens.copy(), prompts.copy(), eos), "response_loss's result")
    if not math.isfinite(got):
        raise Wrong("On ordinary logits (values around ±2) your loss is not finite.")
    if not close(got, v["right"], 1e-9):
        messages = {
            "late": "Your mask starts one position late: it leaves out the first response token. Target t is "
                    "token t + 1, so which position's target is the response's first token?",
            "early": "Your mask starts one position early: it counts the prompt's last token as if it were "
                     "part of the response.",
            "no_eos": "Your mask leaves out the end token: the response's EOS is a target too, and the one that "
                      "teaches the model to stop.",
            "padding": "Your loss counts the padding: every EOS after the response's own is padding, not a target.",
            "prompt": "Your loss counts the prompt's targets: that is the whole-sequence loss, not the response-only one.",
            "everything": "You average over every position of the window (prompt, response and padding): "
                          "nothing is masked.",
            "all_positions": "Your masked sum is right, but you divide it by all N × T positions: the mean is over "
                             "the counted targets only.",
            "per_sequence": "You average per sequence, not per token: a mean of each row's mean weights a short "
                            "response as much as a long one.",
        }
        for name, message in messages.items():
            if close(got, v[name], 1e-9):
                raise Wrong(message)
        if close(got, -v["right"], 1e-9):
            raise Wrong("Your loss is negative: it is minus the log-probability of each target.")
        raise Wrong(f"On a batch of five rows with uneven prompts and responses your loss is off by "
                    f"{abs(got - v['right']):.3g} nats.")
    one = fn(logits[3:4].copy(), tokens[3:4].copy(), prompts[3:4].copy(), eos)
    want_one = _response_variants(logits[3:4], tokens[3:4], prompts[3:4], eos, layout[3:4])["right"]
    if not close(expect_number(one, "response_loss's result"), want_one, 1e-9):
        raise Wrong("Right for the batch but not for one row that fills its window to the last token (no "
                    "padding at all): where does your code look for the response's end?")
    big = logits.copy()
    big[0, 1, 2] = 1000.0  # a prompt target's position (masked out)
    big[1, 3, 4] = -1000.0  # a response target's position
    want_big = _response_variants(big, tokens, prompts, eos, layout)["right"]
    got_big = expect_number(fn(big, tokens.copy(), prompts.copy(), eos), "response_loss's result")
    if not math.isfinite(got_big):
        raise Wrong("With a logit of 1000 at one position your loss is not finite: exp(1000) overflows, and "
                    "0 × inf is nan even at a masked position. Shift each row by its maximum before exp.")
    if not close(got_big, want_big, 1e-9):
        raise Wrong("Finite, but wrong when one logit is ±1000: does your shift by the maximum reach every "
                    "logit of the row?")
    return ("Right: it matches the response-only loss on uneven prompts and responses, on a row with no "
            "padding, and with logits of ±1000.")


# ---------------------------------------------------------------------------
# 2. Predict: the pull of DPO's first step on one chosen response


def first_step_gradient():
    """d loss / d log pi(y_w) for one pair at DPO's first step: the policy is its reference, so every
    pair's four log-probabilities come from the same model (the course model at its initial weights)."""
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0, np.float64)
    rng = np.random.default_rng(16)
    B, P, L = DPO["batch_size"], preferences.PREF["prompt_tokens"], preferences.PREF["response_tokens"]
    prompts = rng.integers(0, cfg.vocab_size, (B, P))
    chosen, rejected = rng.integers(0, cfg.vocab_size, (2, B, L))
    lc = preferences.response_logps(params, cfg, prompts, chosen)
    lr = preferences.response_logps(params, cfg, prompts, rejected)
    return float(preferences.dpo_loss(lc, lr, lc, lr, DPO["beta"])[1][0])


def check_first_step_gradient(value, truth):
    beta, B = DPO["beta"], DPO["batch_size"]
    if near(value, -truth, 0.03):
        raise Wrong("Your sign is the wrong way round: the loss falls when the chosen response's "
                    "log-probability rises, so its derivative is negative.")
    if near(value, truth * B, 0.03) or near(value, -truth * B, 0.03):
        raise Wrong(f"That is one pair's loss differentiated on its own; the batch's loss is the mean over its "
                    f"{B} pairs.")
    if near(abs(value), 2 * abs(truth), 0.03):
        raise Wrong("The sigmoid at the first step is not 1: what is z when the policy is its reference?")
    if near(abs(value), abs(truth) / beta, 0.03):
        raise Wrong(f"β = {beta} multiplies the margin inside the sigmoid, and so the gradient too.")
    if near(value, math.log(2), 0.03):
        raise Wrong("That is the loss at the first step, not its derivative.")


# ---------------------------------------------------------------------------
# 3. Implement: conservative DPO (label smoothing), a variant the chapter does not show

CDPO_STARTER = '''import numpy as np


def cdpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta,
              label_smoothing):
    """Conservative DPO: DPO's loss when each pair's label may be wrong with probability eps.

    The four arrays are (N,) log-probabilities of whole responses; beta > 0; 0 <= eps < 1 is
    label_smoothing. With z = beta * ((pc - rc) - (pr - rr)) for each pair, the loss is the mean
    over the N pairs of  (1 - eps) * (-log sigmoid(z)) + eps * (-log sigmoid(-z)).
    Returns (loss, d_policy_chosen (N,), d_policy_rejected (N,)): the loss and its gradients with
    respect to the policy's two log-probabilities. It must stay finite for any finite z.
    """
    raise NotImplementedError
'''

CDPO_SOLUTION = '''import numpy as np


def cdpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta,
              label_smoothing):
    eps = label_smoothing
    h = (policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps)  # (N,)
    z = beta * h
    # -log sigmoid(z) = log(1 + e^-z), and -log sigmoid(-z) = log(1 + e^z): logaddexp never overflows
    losses = (1 - eps) * np.logaddexp(0.0, -z) + eps * np.logaddexp(0.0, z)
    sig_minus = np.exp(-np.logaddexp(0.0, z))  # sigmoid(-z), without overflow
    sig_plus = np.exp(-np.logaddexp(0.0, -z))  # sigmoid(z)
    dz = (-(1 - eps) * sig_minus + eps * sig_plus) / z.size  # d mean / dz
    return float(losses.mean()), beta * dz, -beta * dz
'''


def _cdpo_reference(pc, pr, rc, rr, beta, eps):
    """From pylib: (1 - eps) DPO on the pair as labelled plus eps DPO on the pair with its label flipped."""
    loss1, dc1, dr1 = preferences.dpo_loss(pc, pr, rc, rr, beta)
    loss2, dr2, dc2 = preferences.dpo_loss(pr, pc, rr, rc, beta)  # chosen and rejected swapped
    return (1 - eps) * loss1 + eps * loss2, (1 - eps) * dc1 + eps * dc2, (1 - eps) * dr1 + eps * dr2


def _cdpo_call(fn, args):
    out = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    if not (isinstance(out, tuple) and len(out) == 3):
        raise Wrong("cdpo_loss should return three things: (loss, d_policy_chosen, d_policy_rejected).")
    n = args[0].shape
    loss = expect_number(out[0], "The loss")
    return loss, np.asarray(out[1], dtype=float), np.asarray(out[2], dtype=float), n


def check_cdpo_loss(fn):
    rng = np.random.default_rng(7)
    N = 16
    rc, rr = rng.normal(-60, 8, N), rng.normal(-60, 8, N)
    pc, pr = rc + rng.normal(0, 4, N), rr + rng.normal(0, 4, N)  # margins of a few nats
    beta, eps = 0.1, 0.2
    args = (pc, pr, rc, rr, beta, eps)
    want, wc, wr = _cdpo_reference(*args)
    loss, dc, dr, n = _cdpo_call(fn, args)
    if not math.isfinite(loss):
        raise Wrong("On ordinary inputs (margins of a few nats, β = 0.1) your loss is not finite.")
    if not close(loss, want, 1e-9):
        if close(loss, want * N, 1e-9):
            raise Wrong("You sum the pairs' losses: the loss is the mean over the N pairs.")
        if close(loss, _cdpo_reference(pc, pr, rc, rr, beta, 1 - eps)[0], 1e-9):
            raise Wrong("Your weights are the wrong way round: 1 − eps goes with the label as given, eps with "
                        "the label flipped (at eps = 0 it is plain DPO).")
        if close(loss, _cdpo_reference(pc, pr, rc, rr, 1.0, eps)[0], 1e-9):
            raise Wrong("β is missing from your loss: it scales the margin inside the sigmoid, z = β·h.")
        if close(loss, preferences.dpo_loss(pc, pr, rc, rr, beta)[0], 1e-9):
            raise Wrong("Your loss is plain DPO's: the eps term, the pair with its label flipped, is missing.")
        raise Wrong(f"On random margins (N = {N}, β = {beta}, eps = {eps}) your loss is off by {abs(loss - want):.3g}.")
    for d, w, which in ((dc, wc, "chosen"), (dr, wr, "rejected")):
        expect_array(d, n, f"d_policy_{which}")
        if close(d, w, 1e-8):
            continue
        if close(d, -w, 1e-8):
            raise Wrong(f"Your gradient for the {which} log-probabilities has the wrong sign.")
        if close(d, w * N, 1e-8):
            raise Wrong("Your gradients are N times too large: the loss is a mean over the pairs, so each "
                        "pair's derivative is divided by N.")
        if close(d, w / beta, 1e-8):
            raise Wrong("Your gradients are missing a factor β: z = β·h, and dh/d(log-probability) is ±1.")
        plain = preferences.dpo_loss(pc, pr, rc, rr, beta)[1 if which == "chosen" else 2]
        if close(d, plain, 1e-8) or close(d, (1 - eps) * plain, 1e-8):
            raise Wrong("Your loss is right but your gradient leaves out the eps term: the flipped pair's "
                        "−log σ(−z) pulls the other way, and its derivative belongs in the gradient too.")
        raise Wrong(f"Your gradient for the {which} log-probabilities is off by up to "
                    f"{float(np.abs(d - w).max()):.3g}.")
    # eps = 0 is DPO itself; and a one-pair batch
    loss0, dc0, dr0, _ = _cdpo_call(fn, (pc, pr, rc, rr, beta, 0.0))
    if not (close(loss0, preferences.dpo_loss(pc, pr, rc, rr, beta)[0], 1e-9)
            and close(dc0, preferences.dpo_loss(pc, pr, rc, rr, beta)[1], 1e-8)):
        raise Wrong("At eps = 0 your function should give DPO's loss and gradient (pylib's dpo_loss), and it does not.")
    # large margins: -log sigmoid must not overflow
    big_c = rc.copy()
    big_c[:4] += np.array([3000.0, -3000.0, 800.0, -800.0])
    for b in (1.0, 1e4):  # z up to ±3000 with beta 1; a large beta on ordinary margins
        args = (big_c, pr, rc, rr, b, eps)
        want, wc, wr = _cdpo_reference(*args)
        loss, dc, dr, _ = _cdpo_call(fn, args)
        if not (math.isfinite(loss) and np.all(np.isfinite(dc)) and np.all(np.isfinite(dr))):
            raise Wrong(f"At large margins (|z| in the thousands, β = {b:g}) your loss "
                        "or gradient is not finite: −log σ(z) is about |z| there, but σ rounds to 0 in float64 "
                        "and its log is −inf. Compute the log-sigmoid without forming σ first; the chapter's "
                        "dpo_loss shows a form that cannot overflow.")
        if not (close(loss, want, 1e-9) and close(dc, wc, 1e-8, 1e-12) and close(dr, wr, 1e-8, 1e-12)):
            raise Wrong(f"Finite but wrong at large margins (β = {b:g}): off by {abs(loss - want):.3g} in the loss, "
                        f"{max_error(dc, wc):.3g} in the gradient. Is σ(z) computed in a form that keeps its "
                        "precision for large |z| of either sign?")
    # a tiny beta: the loss is ln 2 whatever the margins, and the gradient tiny but exact
    args = (pc, pr, rc, rr, 1e-9, eps)
    want, wc, wr = _cdpo_reference(*args)
    loss, dc, dr, _ = _cdpo_call(fn, args)
    if not (close(loss, want, 1e-9) and close(dc, wc, 1e-7, 1e-20)):
        raise Wrong("Right at β = 0.1 but not at β = 1e-9, where every z is almost 0: the loss should be "
                    "ln 2 and the gradient proportional to β.")
    # one pair
    args = (pc[:1], pr[:1], rc[:1], rr[:1], beta, eps)
    want, wc, wr = _cdpo_reference(*args)
    loss, dc, dr, _ = _cdpo_call(fn, args)
    if not (close(loss, want, 1e-9) and close(dc, wc, 1e-8)):
        raise Wrong("Right for 16 pairs but not for one (N = 1): check your axes and your mean.")
    return ("Right: loss and gradients match (1 − eps)·DPO + eps·DPO-with-the-label-flipped from pylib's "
            "dpo_loss on random margins, at eps = 0, at margins of ±3000, at β = 10⁴ and 10⁻⁹, and for one pair.")


# ---------------------------------------------------------------------------
# 4. Investigate: change β on the live preference model

BETA_STARTER = '''from pylib.studies import preferences


def dpo_with_beta(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps):
    """Change one condition of a DPO step: beta. Return preferences.dpo_loss(...) at your beta.

    The unchanged step uses beta = preferences.DPO["beta"]; the check runs both steps on the same
    pairs, from the same model, and compares what comes out.
    """
    beta = preferences.DPO["beta"]  # change this line only
    return preferences.dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps,
                                ref_rejected_logps, beta)
'''

BETA_SOLUTION = '''from pylib.studies import preferences


def dpo_with_beta(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps):
    beta = 2 * preferences.DPO["beta"]  # twice the chapter's
    return preferences.dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps,
                                ref_rejected_logps, beta)
'''

STRONG = 1e-6  # a gradient entry this far above AdamW's eps (1e-8): eps changes its first step by < 1 %


def _live_pairs():
    """The preference toy on the live model: the course model at its initial weights is the reference
    (and the policy at step 0); it samples two responses to prompts of the validation split, and the
    one with more target letters is chosen."""
    c = corpus()
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0, np.float64)
    prompts = preferences.prompts_from(c.val, 64, preferences.PREF["prompt_tokens"])
    target = preferences.target_id(c.vocab, preferences.PREF["target"])
    pairs = preferences.make_pairs(params, cfg, prompts, target, np.random.default_rng([16, 4]))
    ref_c = preferences.response_logps(params, cfg, pairs["prompts"], pairs["chosen"])
    ref_r = preferences.response_logps(params, cfg, pairs["prompts"], pairs["rejected"])
    return cfg, params, pairs, ref_c, ref_r


def _dpo_run(loss_fn, cfg, params, pairs, ref_c, ref_r, steps=2):
    """steps of DPO on all the pairs with loss_fn, as preferences.dpo_steps does them; each step's
    (loss, grads before clipping, update, the clipping's factor)."""
    state = sft.init_finetune(params, 0)
    out = []
    for _ in range(steps):
        lc, cc = preferences.response_logps_forward(state["params"], cfg, pairs["prompts"], pairs["chosen"])
        lr, cr = preferences.response_logps_forward(state["params"], cfg, pairs["prompts"], pairs["rejected"])
        result = loss_fn(lc, lr, ref_c.copy(), ref_r.copy())
        if not (isinstance(result, tuple) and len(result) == 3):
            raise Wrong("dpo_with_beta should return what preferences.dpo_loss returns: (loss, d_chosen, d_rejected).")
        loss = expect_number(result[0], "The loss")
        dc = expect_array(np.asarray(result[1], dtype=float), lc.shape, "d_chosen")
        dr = expect_array(np.asarray(result[2], dtype=float), lr.shape, "d_rejected")
        grads = preferences.response_logps_backward(dc, cc)
        for k, g in preferences.response_logps_backward(dr, cr).items():
            grads[k] += g
        raw = {k: g.copy() for k, g in grads.items()}
        before = {k: v.copy() for k, v in state["params"].items()}
        norm = sft.apply_update(state, grads, DPO["lr"], DPO["grad_clip"])
        clipped = min(1.0, DPO["grad_clip"] / norm) if norm > 0 else 1.0
        out.append((loss, raw, {k: state["params"][k] - before[k] for k in before}, clipped))
    return out


def _unchanged_run():
    """The live pairs and two DPO steps with the chapter's β: the same for every answer."""
    cfg, params, pairs, ref_c, ref_r = _live_pairs()
    beta0 = DPO["beta"]
    return (cfg, params, pairs, ref_c, ref_r), _dpo_run(lambda *a: preferences.dpo_loss(*a, beta0), cfg, params, pairs, ref_c, ref_r)


def check_dpo_with_beta(fn):
    _seen.pop("beta", None)
    (cfg, params, pairs, ref_c, ref_r), base = kept("ch16.dpo_with_beta", _unchanged_run)
    beta0 = DPO["beta"]
    changed = _dpo_run(fn, cfg, params, pairs, ref_c, ref_r)
    beta1 = _seen.pop("beta")
    ratio = beta1 / beta0
    (l0, g0, u0, c0), (l1, g1, u1, c1) = base[0], changed[0]
    if not close(l1, l0, 1e-12):
        raise Wrong(f"Your first step's loss differs from the unchanged one by {abs(l1 - l0):.3g}: at the first "
                    "step the policy is its reference, so what is z, whatever β is?")
    worst = max(float(np.abs(g1[k] - ratio * g0[k]).max() / (np.abs(ratio * g0[k]).max() or 1.0)) for k in g0)
    if worst > 1e-9:
        raise Wrong(f"Your first step's gradients are not the unchanged ones times β'/β = {ratio:.4g} (worst "
                    f"relative difference {worst:.3g}): the chapter's gradient is ∓β·σ(−z).")
    strong = {k: np.minimum(np.abs(g0[k]) * c0, np.abs(g1[k]) * c1) > STRONG for k in g0}  # as AdamW sees them
    n_strong = sum(int(s.sum()) for s in strong.values())
    n_all = sum(s.size for s in strong.values())
    if n_strong < n_all // 4:
        raise Wrong(f"With β' = {beta1:g} most gradient entries fall near AdamW's eps (1e-8), and the update "
                    "is no longer comparable: choose a β' within a factor of 10 of the chapter's β.")
    lr = DPO["lr"]
    moved = max(float(np.abs(u1[k] - u0[k])[strong[k]].max(initial=0.0)) for k in u0) / lr
    rest = max(float(np.abs(u1[k] - u0[k]).max()) for k in u0) / lr
    if moved > 0.02:
        raise Wrong(f"Where the gradient is well above AdamW's eps, your first update differs from the unchanged "
                    f"one by up to {moved:.3g} × lr; AdamW's first step divides by the gradient's own size, so "
                    "it should agree to about 1 %. Did you change anything besides β?")
    (m0, _, v0, _), (m1, _, v1, _) = base[1], changed[1]
    second = max(float(np.abs(v1[k] - v0[k]).max()) for k in v0) / lr
    return (f"Right: β' = {beta1:g} against β = {beta0:g} on {len(ref_c)} live pairs. At the first step the "
            f"policy is its reference, so z = 0 for every β: the loss is ln 2 in both runs, every gradient is "
            f"scaled by exactly β'/β = {ratio:.4g} (worst relative difference {worst:.1e}), and AdamW's first "
            f"update is the same where the gradient is well above eps ({n_strong} of {n_all} entries, largest "
            f"difference {moved:.1e} × lr; {rest:.2f} × lr at most on the others, whose gradients are near eps). "
            f"β acts once the policy has moved: at the second step the losses are {m0:.4f} (β) and "
            f"{m1:.4f} (β'), and the updates differ by up to {second:.2f} × lr.")


_seen = {}


def _beta_spy(fn):
    """Refuse an answer that does not call preferences.dpo_loss with a changed beta on the inputs it got."""
    real = preferences.dpo_loss

    def spy(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta):
        args = (policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)
        _seen["calls"].append((args, beta))
        return real(*args, beta)

    def wrapped(pc, pr, rc, rr):
        _seen["calls"] = []
        preferences.dpo_loss = spy
        try:
            out = fn(pc, pr, rc, rr)
        finally:
            preferences.dpo_loss = real
        calls = _seen["calls"]
        if len(calls) != 1:
            raise Wrong("Your function should call preferences.dpo_loss once, as the starter does"
                        + (" (it did not call it)." if not calls else f" (it called it {len(calls)} times)."))
        (args, beta), = calls
        if any(not np.array_equal(np.asarray(a), b) for a, b in zip(args, (pc, pr, rc, rr))):
            raise Wrong("You changed the log-probabilities given to dpo_loss: change β, and nothing else.")
        same = np.isscalar(beta) and beta == DPO["beta"]
        if same:
            real_out = real(pc, pr, rc, rr, beta)
            if not (isinstance(out, tuple) and len(out) == 3 and all(
                    np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(out, real_out))):
                raise Wrong("Your β is the chapter's, but you changed what dpo_loss returned: change β itself, "
                            "the argument, so the loss computes with it.")
            raise Wrong("Your function did not change β: it still calls dpo_loss with preferences.DPO[\"beta\"].")
        _seen["beta"] = float(beta)
        return out

    return check_dpo_with_beta(wrapped)


# ---------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        id="ch16.response_loss", kind="implement", title="SFT's loss on the response only",
        task="""The chapter's `encode_pairs` builds the masks as it packs the pairs. Here the packing is done and
the masks are gone: from the packed rows alone (prompt, response, one EOS, then EOS as padding) and each
row's prompt length, compute SFT's response-only loss, the mean cross-entropy per response target over
the batch. `pylib.loss.cross_entropy_forward` takes a mask, if you want it.""",
        starter=RESPONSE_STARTER, function="response_loss", solution=RESPONSE_SOLUTION, check=check_response_loss,
        hints=("Target t is token t + 1. The first response token is token P (P = prompt_lens), so it is the "
               "target at position P − 1.",
               "The response's own EOS is the first EOS at or after position P; every EOS after it is padding. "
               "`np.argmax` over a boolean row gives the first True.",
               "The mean is over all the batch's counted targets together, not a mean of each row's mean."),
        mistakes=(
            Mistake(RESPONSE_SOLUTION.replace("(t + 1 >= prompt)", "(t >= prompt)"), "starts one position late"),
            Mistake(RESPONSE_SOLUTION.replace("(t + 1 <= end)", "(t + 1 < L)"), "counts the padding"),
            Mistake(RESPONSE_SOLUTION.replace(
                "    return cross_entropy_forward(logits, tokens[:, 1:], mask)[0]",
                "    return float(np.mean([cross_entropy_forward(logits[i], tokens[i, 1:], mask[i])[0]\n"
                "                          for i in range(N)]))"), "per sequence, not per token"),
            Mistake(RESPONSE_SOLUTION.replace("tokens[:, 1:], mask)[0]", "tokens[:, 1:], mask, mask.size)[0]"),
                    "divide it by all N × T positions"),
        )),
    Exercise(
        id="ch16.dpo_at_init", kind="predict", title="The pull of DPO's first step",
        task=f"""DPO's first step starts from the reference itself: the policy *is* π_ref. With the chapter's
β = {DPO['beta']} and a batch of {DPO['batch_size']} pairs, what is the derivative of the batch's DPO loss
with respect to one pair's policy log-probability of its chosen response, log π_θ(y_w | x)? Commit a
number, sign included; the check computes it from the course model's log-probabilities.""",
        truth=first_step_gradient, check=check_first_step_gradient, tolerance=0.05,
        solution=f"""With the policy equal to the reference, every log-ratio is 0, so z = 0 and σ(−z) = 1/2. One
pair's loss has derivative −β·σ(−z) = −β/2 with respect to its chosen log-probability, and the batch's
loss is the mean over its {DPO['batch_size']} pairs, so the derivative is −β/(2 × {DPO['batch_size']}) =
{-DPO['beta'] / (2 * DPO['batch_size']):.4g}: the same for every pair, whatever its responses, because at the
first step no pair is ranked yet.""",
        hints=("What is z when the policy is its reference? And σ at that z?",
               "The chapter gives one pair's gradient, ∓β·σ(−z); the batch's loss is a mean over its pairs.",
               "Raising the chosen response's log-probability lowers the loss: mind the sign."),
        mistakes=(Mistake(repr(DPO["beta"] / (2 * DPO["batch_size"])), "sign is the wrong way round"),
                  Mistake(repr(-DPO["beta"] / 2), "mean over its"),
                  Mistake(repr(-DPO["beta"] / DPO["batch_size"]), "sigmoid at the first step is not 1"),
                  Mistake(repr(math.log(2)), "the loss at the first step")),
    ),
    Exercise(
        id="ch16.cdpo_loss", kind="implement", title="Conservative DPO: labels that may be wrong",
        task="""The chapter shows DPO's loss and IPO's. Besides IPO, the DPO authors' `preference_loss` has one
more option, `label_smoothing` (conservative DPO), for preferences that are sometimes wrong: each pair's
label is assumed flipped with probability ε, and the loss mixes DPO on the pair as labelled with DPO on
the pair reversed,

$$
\\mathcal{L} = (1-\\varepsilon)\\,\\bigl(-\\log \\sigma(z)\\bigr) + \\varepsilon\\,\\bigl(-\\log \\sigma(-z)\\bigr),
\\qquad z = \\beta h,
$$

$h$ being the chapter's margin. Write it, averaged over the pairs, with its gradients with respect to
the policy's two log-probabilities. It must stay finite when a margin is in the thousands.""",
        starter=CDPO_STARTER, function="cdpo_loss", solution=CDPO_SOLUTION, check=check_cdpo_loss,
        hints=("d(−log σ(z))/dz = −σ(−z), and d(−log σ(−z))/dz = σ(z). Then dz/d(policy chosen) = β and "
               "dz/d(policy rejected) = −β.",
               "−log σ(z) = log(1 + e^(−z)); `np.logaddexp(0, −z)` computes it without overflow. σ(z) itself "
               "can be had as exp(−log(1 + e^(−z))).",
               "The loss is a mean over the pairs: every pair's derivative is divided by N."),
        mistakes=(
            Mistake(CDPO_SOLUTION.replace(
                "losses = (1 - eps) * np.logaddexp(0.0, -z) + eps * np.logaddexp(0.0, z)",
                "losses = -(1 - eps) * np.log(1 / (1 + np.exp(-z))) - eps * np.log(1 / (1 + np.exp(z)))"),
                "not finite: −log σ(z) is about |z|"),
            Mistake(CDPO_SOLUTION.replace("float(losses.mean())", "float(losses.sum())"), "You sum the pairs"),
            Mistake(CDPO_SOLUTION.replace("dz = (-(1 - eps) * sig_minus + eps * sig_plus) / z.size",
                                          "dz = -(1 - eps) * sig_minus / z.size"), "leaves out the eps term"),
            Mistake(CDPO_SOLUTION.replace("return float(losses.mean()), beta * dz, -beta * dz",
                                          "return float(losses.mean()), -beta * dz, beta * dz"), "wrong sign"),
        )),
    Exercise(
        id="ch16.beta_change", kind="investigate", title="One condition changed: DPO's β",
        task="""Take DPO's first two steps on the live preference toy (the course model at its initial weights as
reference and policy, pairs it sampled from the validation split, judged by the letter rule), then change
one condition: β. Edit the one line, run the check, and read what changed against the unchanged run:
the loss, every gradient, and the AdamW update, at the first step and at the second.""",
        starter=BETA_STARTER, function="dpo_with_beta", solution=BETA_SOLUTION, check=_beta_spy,
        needs_corpus=True,
        hints=("`beta = 2 * preferences.DPO[\"beta\"]` is one change; any positive β within a factor of 10 of "
               "the chapter's will do.",
               "Before you run it: at the first step, what is z? What does that make the loss, and how does the "
               "gradient ∓β·σ(−z) scale with β? What does AdamW's first step do with a gradient scaled by a constant?"),
        mistakes=(
            Mistake(BETA_STARTER, "did not change β"),
            Mistake(BETA_STARTER.replace(
                "    return preferences.dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps,\n"
                "                                ref_rejected_logps, beta)",
                "    loss, dc, dr = preferences.dpo_loss(policy_chosen_logps, policy_rejected_logps,\n"
                "                                        ref_chosen_logps, ref_rejected_logps, beta)\n"
                "    return loss, 2 * dc, 2 * dr"), "changed what dpo_loss returned"),
            Mistake(BETA_STARTER.replace(
                "    return preferences.dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps,\n"
                "                                ref_rejected_logps, beta)",
                "    return preferences.dpo_loss(2 * policy_chosen_logps, 2 * policy_rejected_logps,\n"
                "                                2 * ref_chosen_logps, 2 * ref_rejected_logps, beta)"),
                    "changed the log-probabilities"),
            Mistake(BETA_STARTER.replace('beta = preferences.DPO["beta"]', 'beta = 1e-7'),
                    "choose a β' within a factor of 10"),
        )),
]
