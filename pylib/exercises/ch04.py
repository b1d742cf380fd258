"""Chapter 4's exercises: backward passes by hand, checked against pylib's and against the definition
(pylib.exercises says how checks work)."""

import math

import numpy as np

from pylib import data, layers, model, optim
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_array, kept, max_error, near, progress

# ---------------------------------------------------------------------------
# 1. Implement: softmax's backward on its own (attention_backward does it inline, with the dy . y shortcut)

SOFTMAX_STARTER = '''import numpy as np


def softmax_backward(probs, dprobs):
    """The backward of p = softmax(s), taken over the last axis.

    probs: (..., T) the probabilities p, each row summing to 1 (masked entries are exactly 0).
    dprobs: (..., T) the gradient of the loss with respect to p.
    Returns (..., T): the gradient of the loss with respect to the scores s.
    """
    raise NotImplementedError
'''

SOFTMAX_SOLUTION = '''import numpy as np


def softmax_backward(probs, dprobs):
    inner = (probs * dprobs).sum(axis=-1, keepdims=True)  # sum_j p_j dp_j, one number per row
    return probs * (dprobs - inner)
'''


def _softmax(s):
    z = np.exp(s - s.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _softmax_cases():
    """Random rows; causal rows (masked entries 0); a row that is one-hot; dp the same along a row."""
    rng = np.random.default_rng(4)
    s = rng.normal(0, 2, (3, 7))
    p = _softmax(s)
    dp = rng.normal(0, 1, (3, 7))
    T = 6
    sc = rng.normal(0, 1.5, (2, 2, T, T)) + np.triu(np.full((T, T), -np.inf), 1)  # (B, H, T, T), causal
    pc = _softmax(sc)
    dpc = rng.normal(0, 1, (2, 2, T, T))
    hot = np.zeros((1, 5))
    hot[0, 2] = 1.0  # a saturated softmax: every score's gradient is 0
    flat = np.full((2, 5), 3.0)  # the same dp for every entry: a shift of all scores, which softmax ignores
    return (p, dp), (pc, dpc), (hot, rng.normal(0, 1, (1, 5))), (p[:2, :5] / p[:2, :5].sum(1, keepdims=True), flat)


def _softmax_ref(p, dp):
    return p * (dp - (p * dp).sum(axis=-1, keepdims=True))


def check_softmax_backward(fn):
    (p, dp), (pc, dpc), (hot, dph), (pf, flat) = _softmax_cases()
    got = expect_array(fn(p.copy(), dp.copy()), p.shape, "softmax_backward's result on (3, 7) rows")
    want = _softmax_ref(p, dp)
    if not close(got, want, 1e-9, 1e-12):
        if close(got, p * dp, 1e-9, 1e-12):
            raise Wrong("You multiply by p but leave out the term that every score in a row shares: each p_j depends "
                        "on every score of its row through the normalising sum, and that gives a subtracted "
                        "row-sum term.")
        if close(got, p * (dp - dp.sum(axis=-1, keepdims=True)), 1e-9, 1e-12):
            raise Wrong("The subtracted row term is a plain sum of dp; in the derivation each dp_j is weighted by "
                        "its probability p_j.")
        if close(got, p * (dp - (p * dp).sum(axis=0, keepdims=True)), 1e-9, 1e-12):
            raise Wrong("Your row sums are taken or broadcast along the wrong axis: each row (the last axis) is its "
                        "own softmax, so sum over the last axis and keep it (keepdims=True) to subtract per row.")
        if close(got, -want, 1e-9, 1e-12):
            raise Wrong("Your gradient has the wrong sign.")
        raise Wrong(f"On random rows of 7 probabilities your gradient is off by up to {max_error(got, want):.3g}.")
    got = expect_array(fn(pc.copy(), dpc.copy()), pc.shape, "softmax_backward's result on (B, H, T, T) attention rows")
    want = _softmax_ref(pc, dpc)
    if not close(got, want, 1e-9, 1e-12):
        raise Wrong("Right on a 2-D array of rows but not on attention's (B, H, T, T) causal rows: work along the "
                    "last axis whatever the number of leading axes.")
    if np.any(got[..., np.triu_indices(pc.shape[-1], 1)[0], np.triu_indices(pc.shape[-1], 1)[1]] != 0):
        raise Wrong("Masked entries (probability exactly 0) must get a gradient of exactly 0.")
    got = expect_array(fn(hot.copy(), dph.copy()), hot.shape, "softmax_backward's result on a one-hot row")
    if not close(got, 0 * hot, 0, 1e-12):
        raise Wrong("A row whose probability is all on one entry is saturated: every score's gradient is 0, and "
                    "yours is not.")
    got = expect_array(fn(pf.copy(), flat.copy()), pf.shape, "softmax_backward's result when dp is constant")
    if not close(got, 0 * pf, 0, 1e-12):
        raise Wrong("When dp is the same for every entry of a row, the gradient should be 0 (adding a constant to "
                    "every probability's gradient is what a shift of all scores would do, and softmax ignores "
                    "shifts); yours is not.")
    # And in attention: with this softmax backward, dqkv is attention_backward's
    rng = np.random.default_rng(5)
    qkv = rng.normal(0, 1, (2, 5, 3 * 8))
    y, cache = layers.attention_forward(qkv, 2)
    dy = rng.normal(0, 1, y.shape)
    q, k, v, att, yh, scale = cache
    B, H, T, D = q.shape
    dyh = dy.reshape(B, T, H, D).transpose(0, 2, 1, 3)
    ds = expect_array(fn(att.copy(), dyh @ v.transpose(0, 1, 3, 2)), att.shape, "softmax_backward's result")
    dq, dk, dv = (ds @ k) * scale, ds.transpose(0, 1, 3, 2) @ q, att.transpose(0, 1, 3, 2) @ dyh
    mine = np.stack([a.transpose(0, 2, 1, 3) for a in (dq, dk, dv)], axis=2).reshape(B, T, 3 * H * D)
    err = max_error(mine, layers.attention_backward(dy, cache))
    return ("Right: it matches p ⊙ (dp − Σ p·dp) on random rows, on causal (B, H, T, T) rows with masked entries "
            "at exactly 0, on a saturated row and when dp is constant; and attention's gradient built on it matches "
            f"layers.attention_backward, with its dy · y shortcut, to {err:.1e}.")


# ---------------------------------------------------------------------------
# 2. Implement: the token embedding's backward (the chapter calls it but does not show it)

EMBED_STARTER = '''import numpy as np


def embedding_backward(dout, ids, V):
    """The backward of the lookup out = W[ids], for W of shape (V, C).

    dout: (..., C) the gradient of the loss with respect to out, one row per position.
    ids: (...) integer token ids, the rows of W that were looked up (ids repeat: text does).
    V: the number of rows of W.
    Returns dW, (V, C).
    """
    raise NotImplementedError
'''

EMBED_SOLUTION = '''import numpy as np


def embedding_backward(dout, ids, V):
    C = dout.shape[-1]
    dW = np.zeros((V, C), dtype=dout.dtype)
    np.add.at(dW, ids.reshape(-1), dout.reshape(-1, C))  # unbuffered: a repeated id adds every time
    return dW
'''


def _embed_ref(dout, ids, V):
    return layers.embedding_backward(dout, (ids, (V, dout.shape[-1])))


def check_embedding_backward(fn):
    rng = np.random.default_rng(6)
    V, C = 65, 16
    # ids as intp, the index type (int32 in Pyodide, whose np.bincount refuses int64)
    ids = rng.integers(0, 20, (4, 9)).astype(np.intp)  # 36 positions over 20 ids: repeats, and ids 20..64 never appear
    dout = rng.normal(0, 1, (4, 9, C))
    got = fn(dout.copy(), ids.copy(), V)
    got = expect_array(got, (V, C), "dW")
    want = _embed_ref(dout, ids, V)
    if not close(got, want, 1e-12, 1e-12):
        flat, d2 = ids.reshape(-1), dout.reshape(-1, C)
        last = np.zeros((V, C))
        last[flat] = d2  # fancy-index assignment: the last occurrence wins
        counts = np.bincount(flat, minlength=V)[:, None]
        if close(got, last, 1e-12, 1e-12):
            raise Wrong("Each id's row holds one position's gradient only: with repeated ids, `dW[ids] = ...` (and "
                        "`dW[ids] += ...`) writes once per distinct id, the last write winning. A row looked up k "
                        "times must get the sum of its k gradients.")
        if close(got, want / np.maximum(counts, 1), 1e-12, 1e-12):
            raise Wrong("You average each id's gradients: a row used k times gets the sum of its k gradients, as a "
                        "weight used twice gets the sum of both.")
        if close(got[counts[:, 0] > 0], want[counts[:, 0] > 0], 1e-12, 1e-12):
            raise Wrong("The rows of ids that appear are right, but rows of ids that never appear must be 0.")
        raise Wrong(f"On a (4, 9) batch of ids with repeats your dW is off by up to {max_error(got, want):.3g}.")
    same = np.full((2, 3), 7, dtype=np.intp)
    d_same = rng.normal(0, 1, (2, 3, C))
    got = expect_array(fn(d_same.copy(), same.copy(), V), (V, C), "dW")
    if not close(got, _embed_ref(d_same, same, V), 1e-12, 1e-12):
        raise Wrong("Wrong when every position is the same id: its row must get all six gradients summed.")
    one = np.array([V - 1], dtype=np.intp)
    d_one = rng.normal(0, 1, (1, C))
    got = expect_array(fn(d_one.copy(), one.copy(), V), (V, C), "dW")
    if not close(got, _embed_ref(d_one, one, V), 1e-12, 1e-12):
        raise Wrong("Wrong for a single position with the last id, V − 1: check the indexing at the table's end.")
    # On the model: wte's gradient is the head's plus the lookup's (they are tied)
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0, np.float64)
    x = rng.integers(0, cfg.vocab_size, (2, cfg.block_size)).astype(np.intp)
    tgt = rng.integers(0, cfg.vocab_size, (2, cfg.block_size))
    real = layers.embedding_backward
    layers.embedding_backward = lambda d, cache: fn(d, cache[0], cache[1][0])
    try:
        _, grads = model.loss_and_grads(params, cfg, x, tgt)
    finally:
        layers.embedding_backward = real
    _, grads0 = model.loss_and_grads(params, cfg, x, tgt)
    err = max_error(grads["wte"], grads0["wte"])
    if err > 1e-12:
        raise Wrong(f"Inside the model's backward, wte's gradient with yours differs from pylib's by {err:.3g}.")
    return ("Right: every row gets the sum of its positions' gradients, rows of unseen ids are 0, and inside "
            f"model.backward the tied wte's gradient matches pylib's (largest difference {err:.1e}).")


# ---------------------------------------------------------------------------
# 3. Predict: the bytes the caches keep, for a deeper model than the chapter's table

ACT_PRESET, ACT_B, ACT_T = "decoder-4x64", 8, 64


def activation_total():
    """Bytes the forward's and the loss's caches keep (counted, not the formula) for the preset."""
    from pylib.systems import memory
    cfg = model.GPTConfig.preset(ACT_PRESET)
    params = model.init_params(cfg, 0)
    rng = np.random.default_rng(0)
    x = rng.integers(0, cfg.vocab_size, (ACT_B, ACT_T))
    y = rng.integers(0, cfg.vocab_size, (ACT_B, ACT_T))
    return sum(r["bytes"] for r in memory.measure_activations(params, cfg, x, y))


def _activation_formula():
    """The chapter's formula at this shape (pylib.systems.memory.activation_bytes), and the shape."""
    from pylib.systems import memory
    cfg = model.GPTConfig.preset(ACT_PRESET)
    return memory.activation_bytes(cfg, ACT_B, ACT_T), cfg


def check_activation_total(value, truth):
    parts, cfg = _activation_formula()
    probs = 4 * cfg.n_layer * ACT_B * cfg.n_head * ACT_T ** 2
    if near(value, truth / 4, 0.03):
        raise Wrong("That is the number of values, not bytes: each float32 value takes 4 bytes.")
    if near(value, truth / 2, 0.03):
        raise Wrong("That counts 2 bytes per value, as in 16-bit; this run keeps float32 activations.")
    if near(value, truth - probs, 0.03):
        raise Wrong("Close to the count without the attention probabilities: each layer also keeps B·H·T² of them.")
    if near(value, truth - (cfg.n_layer - 1) * parts["per_layer"], 0.03):
        raise Wrong(f"That is about one block's worth: the model has {cfg.n_layer} blocks, and each keeps its own "
                    "caches.")


def _activation_solution():
    parts, cfg = _activation_formula()
    B, T, C, H, V = ACT_B, ACT_T, cfg.n_embd, cfg.n_head, cfg.vocab_size
    return f"""Use the chapter's count, in values of 4 bytes: per layer 22·BTC + 2·BT + B·H·T² (the merged heads'
copy is there, since H > 1 and T > 1), times {cfg.n_layer} layers; plus 2·BTC + BT for the final LayerNorm and the
head's input, and B·T·V for the loss's probabilities; then the int64 ids and targets, 8 bytes a position each.
Here BTC = {B * T * C:,} and B·H·T² = {B * H * T * T:,}, so a layer keeps {parts["per_layer"]:,} bytes, of which the
attention probabilities are {4 * B * H * T * T / parts["per_layer"]:.0%}; in all {parts["total"]:,} bytes, which
is what the counted caches hold, to the byte."""


# ---------------------------------------------------------------------------
# 4. Investigate: remove one residual connection and compare the gradients with the unchanged model

NOSKIP_BLOCK = "h.1."

NOSKIP_STARTER = '''from pylib import model


def no_skip_backward(cfg, g, n, dh, cache):
    """The backward of a pre-LN block whose MLP has lost its skip connection.

    The check runs block h.1 of the decoder-4x64 preset with this forward (the last line changed):
        a = ln_1(h);  h = h + attn(a)
        m = ln_2(h);  h = mlp(m)          # was: h = h + mlp(m)
    and your function as its backward. Below is pre_ln_block_backward, unchanged; change one line.
    """
    c_ln1, c_attn, c_ln2, c_mlp = cache
    dm = model.mlp_backward(g, n, dh, c_mlp)
    dm = model.norm_backward(cfg, g, n + "ln_2", dm, c_ln2)
    dh = dh + dm  # the residual: h reaches the loss through the branch and through the skip
    da = model.attn_backward(cfg, g, n, dh, c_attn)
    da = model.norm_backward(cfg, g, n + "ln_1", da, c_ln1)
    dh = dh + da
    return dh
'''

NOSKIP_SOLUTION = NOSKIP_STARTER.replace(
    "    dh = dh + dm  # the residual: h reaches the loss through the branch and through the skip",
    "    dh = dm  # no skip: h reaches the loss only through the MLP branch")


def _no_skip_forward(cfg, p, n, h, extra_mask):
    a, c_ln1 = model.norm_forward(cfg, p, n + "ln_1", h)
    y, c_attn = model.attn_forward(cfg, p, n, a, extra_mask)
    h = h + y
    m, c_ln2 = model.norm_forward(cfg, p, n + "ln_2", h)
    m, c_mlp = model.mlp_forward(p, n, m)
    return m, (c_ln1, c_attn, c_ln2, c_mlp)


def _no_skip_variant(kind):
    """The right backward of _no_skip_forward ("right"), and the typical wrong ones, for diagnosis."""
    def backward(cfg, g, n, dh, cache):
        c_ln1, c_attn, c_ln2, c_mlp = cache
        dm = model.mlp_backward(g, n, dh, c_mlp)
        dm = model.norm_backward(cfg, g, n + "ln_2", dm, c_ln2)
        dh = {"right": dm, "unchanged": dh + dm, "branch dropped": dh, "attn": dh + dm}[kind]
        da = model.attn_backward(cfg, g, n, dh, c_attn)
        da = model.norm_backward(cfg, g, n + "ln_1", da, c_ln1)
        return da if kind == "attn" else dh + da
    return backward


def _run_with(block_bwd, params, cfg, x, y, skip=False):
    """loss_and_grads with block NOSKIP_BLOCK's MLP skip removed (unless skip) and block_bwd as its backward."""
    real_f, real_b = model.block_forward, model.block_backward
    model.block_forward = lambda c, p, n, h, m: (_no_skip_forward if n == NOSKIP_BLOCK and not skip else real_f)(
        c, p, n, h, m)
    model.block_backward = lambda c, g, n, dh, cache: (block_bwd if n == NOSKIP_BLOCK else real_b)(c, g, n, dh, cache)
    try:
        return model.loss_and_grads(params, cfg, x, y)
    finally:
        model.block_forward, model.block_backward = real_f, real_b


def _group_norms(grads):
    out = {}
    for name, g in grads.items():
        key = "embeddings" if name in ("wte", "wpe") else ("ln_f" if name.startswith("ln_f") else name[:3])
        out[key] = out.get(key, 0.0) + float((g ** 2).sum())
    return {k: v ** 0.5 for k, v in out.items()}


def _worst(grads, ref):
    """(largest error relative to each tensor's largest gradient, that tensor's name)."""
    errs = {k: max_error(grads[k], ref[k]) / (float(np.abs(ref[k]).max()) or 1.0) for k in ref}
    k = max(errs, key=errs.get)
    return errs[k], k


def check_no_skip(fn):
    cfg = model.GPTConfig.preset("decoder-4x64")
    params = model.init_params(cfg, 0, np.float64)
    x, y = data.get_batch(corpus().train, 4, cfg.block_size, np.random.default_rng(3))
    calls = []

    def counted(c, g, n, dh, cache):
        calls.append(1)
        out = fn(c, g, n, dh, cache)
        expect_array(out, dh.shape, "no_skip_backward's result, the gradient of the block's input h,")
        return out

    progress("Your backward, on the model without h.1's MLP skip…")
    loss, grads = _run_with(counted, params, cfg, x, y)
    if not calls:
        raise Wrong("Your function was not called as block h.1's backward.")
    loss_r, ref = kept("ch4.no_skip.right", lambda: _run_with(_no_skip_variant("right"), params, cfg, x, y))
    tol = 1e-9  # two exact backwards agree to rounding; the chapter's finite differences reach ~1e-9 relative
    worst, where = _worst(grads, ref)
    if worst > tol:
        for kind, message in (
                ("unchanged", "Your backward still adds the gradient that arrives along the MLP's skip (dh + dm), "
                              "but the forward no longer has that skip: the gradients are the old block's, not this "
                              "one's. Change the line where the skip's gradient is added."),
                ("branch dropped", "You dropped the MLP branch's gradient and kept the skip's: without the skip, h "
                                   "reaches the loss only through the MLP and its LayerNorm."),
                ("attn", "You removed the attention's skip in the backward, but the forward removed the MLP's: the "
                         "attention's skip is still there.")):
            if _worst(grads, kept(f"ch4.no_skip.{kind}", lambda: _run_with(_no_skip_variant(kind), params, cfg, x, y))[1])[0] <= tol:
                raise Wrong(message)
        above = [k for k in ref if k.startswith(("h.2", "h.3", "ln_f")) or k == NOSKIP_BLOCK + "mlp.c_proj.weight"]
        raise Wrong(f"Your gradients differ from those of the block without the skip by up to {worst:.3g} "
                    f"(relative to the tensor's largest gradient), worst in {where}"
                    + (" (the blocks above h.1 are right, so the error is in h.1's backward)."
                       if _worst({k: grads[k] for k in above}, {k: ref[k] for k in above})[0] <= tol else "."))
    progress("Centred differences, and the unchanged model…")
    # Against the definition: a centred difference on the largest gradient of the first block and of wte
    from pylib.studies import gradcheck

    def loss_fn():
        real_f = model.block_forward
        model.block_forward = lambda c, p, n, h, m: (_no_skip_forward if n == NOSKIP_BLOCK else real_f)(c, p, n, h, m)
        try:
            return model.evaluate_loss(params, cfg, x, y)
        finally:
            model.block_forward = real_f
    fd_err = 0.0
    for name in ("h.0.mlp.c_fc.weight", "wte"):
        i = np.unravel_index(int(np.abs(grads[name]).argmax()), grads[name].shape)
        num = gradcheck.centred_difference(loss_fn, params[name], i, 1e-5)[0]
        fd_err = max(fd_err, float(gradcheck.relative_error(grads[name][i], num)))
    # The unchanged model, and one AdamW step from each
    loss0, grads0 = _run_with(model.pre_ln_block_backward, params, cfg, x, y, skip=True)
    n0, n1 = _group_norms(grads0), _group_norms(grads)
    steps = []
    for g in (grads0, grads):
        p = {k: v.copy() for k, v in params.items()}
        optim.adamw_step(p, g, optim.adamw_init(p), 1e-2)
        steps.append({k: p[k] - params[k] for k in p})

    def rms(step, prefix):
        return math.sqrt(np.mean(np.concatenate([v.ravel() for k, v in step.items() if k.startswith(prefix)]) ** 2))
    ratios = ", ".join(f"{k} ×{n1[k] / n0[k]:.2f}" for k in ("embeddings", "h.0", "h.1", "h.2", "h.3"))
    return (f"Right: your gradients match the block without its skip (worst relative difference {worst:.1e}) and a "
            f"centred difference agrees to {fd_err:.1e}. Against the unchanged model on the same batch: the loss "
            f"went from {loss0:.4f} to {loss:.4f}; the gradient norms changed by {ratios}. The first block and the "
            "embeddings now receive gradient only through h.1's MLP and its LayerNorm, and the blocks above read a "
            "stream that is no longer the sum of everything before it. One AdamW step from each gradient moves h.0's "
            f"weights by an RMS of {rms(steps[1], 'h.0'):.2e} against {rms(steps[0], 'h.0'):.2e} unchanged: Adam's "
            "first step has the size of the learning rate whatever the gradient's, as chapter 5 shows.")


_ACT, _ACT_CFG = _activation_formula()

EXERCISES = [
    Exercise(
        id="ch4.softmax_backward", kind="implement", title="Softmax's backward, on its own",
        task="""`attention_backward` does softmax's backward inline, with the shortcut Σ p·dp = dy · y that only
works after a product with V. Write it for a softmax on its own: rows of probabilities along the last axis (any
number of leading axes, masked entries exactly 0) and the gradient reaching them.""",
        starter=SOFTMAX_STARTER, function="softmax_backward", solution=SOFTMAX_SOLUTION,
        check=check_softmax_backward,
        hints=("Start from the Jacobian ∂p_j/∂s_i = p_j(δ_ij − p_i) and sum over j: you need no (T, T) matrix.",
               "One number per row is subtracted from every dp of that row: compute it with "
               "`.sum(axis=-1, keepdims=True)` so that it broadcasts back along the row."),
        mistakes=(
            Mistake(SOFTMAX_SOLUTION.replace("return probs * (dprobs - inner)", "return probs * dprobs"),
                    "leave out the term that every score in a row shares"),
            Mistake(SOFTMAX_SOLUTION.replace("(probs * dprobs).sum(", "dprobs.sum("), "plain sum of dp"),
            Mistake(SOFTMAX_SOLUTION.replace("axis=-1, keepdims=True", "axis=0, keepdims=True"),
                    "wrong axis"),
        )),
    Exercise(
        id="ch4.embedding_backward", kind="implement", title="The embedding's backward",
        task="""`model.backward` ends with `layers.embedding_backward`, which the chapter does not show. Write it: the
forward looked rows of W up by token id, `out = W[ids]`; return the gradient of W. Ids repeat, as they do in text.""",
        starter=EMBED_STARTER, function="embedding_backward", solution=EMBED_SOLUTION,
        check=check_embedding_backward,
        hints=("A row of W that was looked up at k positions is a weight used k times: by the chapter's rule it gets "
               "the sum of the k gradients.",
               "`dW[ids] += dout` looks right and is not: NumPy's fancy-index assignment writes each distinct index "
               "once. `np.add.at` is the unbuffered version."),
        mistakes=(
            Mistake(EMBED_SOLUTION.replace("np.add.at(dW, ids.reshape(-1), dout.reshape(-1, C))",
                                           "dW[ids.reshape(-1)] += dout.reshape(-1, C)"), "last write winning"),
            Mistake(EMBED_SOLUTION.replace("    return dW",
                                           "    counts = np.bincount(ids.reshape(-1), minlength=V)\n"
                                           "    return dW / np.maximum(counts, 1)[:, None]"), "You average"),
            Mistake(EMBED_SOLUTION.replace("dW = np.zeros((V, C), dtype=dout.dtype)",
                                           "dW = np.ones((V, C), dtype=dout.dtype)\n"
                                           "    dW[ids.reshape(-1)] = 0.0"), "never appear must be 0"),
        )),
    Exercise(
        id="ch4.activation_total", kind="predict", title="What the caches keep",
        task=f"""Take the `{ACT_PRESET}` preset (L = {_ACT_CFG.n_layer} blocks, C = {_ACT_CFG.n_embd},
H = {_ACT_CFG.n_head} heads, V = {_ACT_CFG.vocab_size}) and a batch of B = {ACT_B} windows of T = {ACT_T} tokens,
in float32. How many bytes do the forward's and the loss's caches keep in all, counted as `pylib.systems.memory`
counts them? Commit a number; the check runs the forward and counts.""",
        truth=activation_total, check=check_activation_total, unit="bytes", tolerance=0.02,
        solution=_activation_solution(),
        hints=(f"The chapter's formula is per layer and in values; this model has {_ACT_CFG.n_layer} layers, and a "
               "float32 value is 4 bytes.",
               "Don't forget the parts outside the blocks: the final LayerNorm, the head's input, the loss's "
               "probabilities (B·T·V) and the ids and targets (int64)."),
        mistakes=(Mistake(str(_ACT["total"] // 4), "number of values"),
                  Mistake(str(_ACT["total"] // 2), "2 bytes per value"),
                  Mistake(str(_ACT["total"] - 4 * _ACT_CFG.n_layer * ACT_B * _ACT_CFG.n_head * ACT_T ** 2),
                          "attention probabilities"),
                  Mistake(str(_ACT["total"] - (_ACT_CFG.n_layer - 1) * _ACT["per_layer"]), "one block's worth")),
    ),
    Exercise(
        id="ch4.no_skip", kind="investigate", title="One condition changed: a residual connection removed",
        task="""Change one condition of the model: in block h.1 of the `decoder-4x64` preset, the MLP loses its skip
connection. The check runs that forward; give it its backward, by changing one line of `pre_ln_block_backward`.
The check compares your gradients with the right ones and with a centred difference, then compares the loss, each
block's gradient norm and an AdamW step with the unchanged model's.""",
        starter=NOSKIP_STARTER, function="no_skip_backward", solution=NOSKIP_SOLUTION, check=check_no_skip,
        needs_corpus=True,
        hints=("In the unchanged block, `dh = dh + dm` is the chain rule's sum over the two readers of h: the skip "
               "and the branch. Which of them is gone?",
               "The attention half of the block still has its skip, so the last addition stays."),
        mistakes=(
            Mistake(NOSKIP_STARTER, "still adds the gradient that arrives along the MLP's skip"),
            Mistake(NOSKIP_STARTER.replace("    dh = dh + dm  # the residual", "    dh = dh  # the residual"),
                    "dropped the MLP branch's gradient"),
            Mistake(NOSKIP_STARTER.replace("    dh = dh + da\n", "    dh = da\n"), "removed the attention's skip"),
        )),
]
