"""Chapter 8's exercises: attention logits, QK-norm, global-norm clipping and a bad batch
(pylib.exercises says how checks work)."""

import copy
import dataclasses
import math

import numpy as np

from pylib import guards, model, optim, train
from pylib.exercises import Exercise, Mistake, Wrong, corpus, expect_number, near, progress
from pylib.studies import stability

# ---------------------------------------------------------------------------
# 1. Predict: how far the attention logits grow when the attention weights grow

GROWTH = 3.0  # every weight and bias of layer 0's c_attn is multiplied by this


def logit_growth():
    """The largest |attention logit| of layer 0 with c_attn scaled by GROWTH, over the unscaled one."""
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    x = np.random.default_rng(8).integers(0, cfg.vocab_size, (4, cfg.block_size))
    before = stability.attention_stats(params, cfg, x)["max_logit"][0]
    for name in ("h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias"):
        params[name] *= np.float32(GROWTH)
    return stability.attention_stats(params, cfg, x)["max_logit"][0] / before


def check_logit_growth(value, truth):
    if near(value, GROWTH, 0.03):
        raise Wrong("That is how much each query and each key grew; a logit is the dot product of a query "
                    "and a key.")
    if near(value, 2 * GROWTH, 0.03):
        raise Wrong("The query's factor and the key's factor multiply in the dot product; they do not add.")
    if near(value, GROWTH ** 3, 0.03):
        raise Wrong("The values come out of c_attn too, but they do not enter the attention logits: only "
                    "the queries and the keys do.")
    if near(value, 1.0, 0.03):
        raise Wrong("Unchanged logits are what QK-norm would give; this model has no QK-norm, so nothing "
                    "normalises the queries and keys.")


# ---------------------------------------------------------------------------
# 2. Implement: QK-norm on c_attn's output (the chapter shows its bound, not its code)

QK_STARTER = '''import numpy as np


def qk_norm(qkv, n_head, q_gain, k_gain, eps):
    """QK-norm: an RMSNorm of each head's query vector and key vector, before the dot product.

    qkv: (B, T, 3C), as c_attn makes it: C query numbers, then C key numbers, then C value
      numbers, each C = n_head * D wide with head h's D numbers side by side (h*D ... h*D + D - 1).
    q_gain, k_gain: (D,) learned gains, one per head dimension, shared by the heads.
    eps: RMSNorm's epsilon, added to the mean square.
    Returns a new (B, T, 3C) array: the queries and keys normalised, the values unchanged.
    """
    raise NotImplementedError
'''

QK_SOLUTION = '''import numpy as np


def qk_norm(qkv, n_head, q_gain, k_gain, eps):
    B, T, C3 = qkv.shape
    D = C3 // (3 * n_head)
    out = qkv.reshape(B, T, 3, n_head, D).copy()  # [:, :, 0] queries, [:, :, 1] keys, per head
    for part, gain in ((0, q_gain), (1, k_gain)):
        v = out[:, :, part]  # (B, T, H, D)
        out[:, :, part] = v / np.sqrt((v * v).mean(axis=-1, keepdims=True) + eps) * gain
    return out.reshape(B, T, C3)
'''


def _qk_reference(qkv, n_head, q_gain, k_gain, eps):
    """pylib's QK-norm (model.qk_norm_forward) on one layer's qkv."""
    C = qkv.shape[-1] // 3
    cfg = model.GPTConfig(n_head=n_head, n_embd=C, qk_norm=True, ln_eps=eps)
    p = {"h.0.attn.q_norm.weight": q_gain, "h.0.attn.k_norm.weight": k_gain}
    return model.qk_norm_forward(cfg, p, "h.0.", qkv)[0]


def _rms(v, eps):
    return np.sqrt((v * v).mean(axis=-1, keepdims=True) + eps)


def _qk_variants(qkv, n_head, gq, gk, eps):
    """What typical wrong versions give: {name: (B, T, 3C) array}."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_head
    out = {}
    a = qkv.reshape(B, T, 3, n_head, D)
    l2 = a.copy()
    l2[:, :, 0] = a[:, :, 0] / np.linalg.norm(a[:, :, 0], axis=-1, keepdims=True) * gq
    l2[:, :, 1] = a[:, :, 1] / np.linalg.norm(a[:, :, 1], axis=-1, keepdims=True) * gk
    out["l2"] = l2.reshape(B, T, C3)
    w = qkv.reshape(B, T, 3, C).copy()
    w[:, :, 0] = w[:, :, 0] / _rms(w[:, :, 0], eps) * np.tile(gq, n_head)
    w[:, :, 1] = w[:, :, 1] / _rms(w[:, :, 1], eps) * np.tile(gk, n_head)
    out["whole"] = w.reshape(B, T, C3)
    h = qkv.reshape(B, T, n_head, 3, D).copy()
    h[:, :, :, 0] = h[:, :, :, 0] / _rms(h[:, :, :, 0], eps) * gq
    h[:, :, :, 1] = h[:, :, :, 1] / _rms(h[:, :, :, 1], eps) * gk
    out["interleaved"] = h.reshape(B, T, C3)
    out["swapped"] = _qk_reference(qkv, n_head, gk, gq, eps)
    out["no_eps"] = _qk_reference(qkv, n_head, gq, gk, 0.0)
    return out


def _same(got, want, rtol=1e-9):
    return bool(np.all(np.abs(got - want) <= 1e-12 + rtol * np.abs(want)))


def _qk_case(fn, qkv, n_head, gq, gk, eps, what):
    want = _qk_reference(qkv, n_head, gq, gk, eps)
    original = qkv.copy()
    got = fn(qkv.copy(), n_head, gq.copy(), gk.copy(), eps)
    if not isinstance(got, np.ndarray):
        raise Wrong(f"qk_norm should return a NumPy array; yours returns a {type(got).__name__}.")
    if got.shape != want.shape:
        raise Wrong(f"qk_norm should return the (B, T, 3C) array {want.shape}; yours has shape {got.shape}.")
    if not np.all(np.isfinite(got)):
        raise Wrong(f"{what}: your result has values that are not finite.")
    C = qkv.shape[-1] // 3
    if _same(got, want):
        return
    variants = _qk_variants(original, n_head, gq, gk, eps)
    if _same(got, variants["interleaved"]):
        raise Wrong("You read qkv as each head's query, key and value side by side; c_attn's output is all C "
                    "query numbers first, then all the keys, then all the values (the docstring's layout).")
    if not np.array_equal(got[..., 2 * C:], original[..., 2 * C:]):
        raise Wrong("Your values changed: QK-norm normalises only the queries and the keys; the last C numbers "
                    "must come back as they went in.")
    if _same(got, variants["l2"]):
        raise Wrong(f"Your queries and keys have length |gain|, not √D·|gain|: you divide by the vector's length "
                    f"(ℓ2 normalisation, Henry et al.'s QKNorm), but RMSNorm divides by the root of the mean "
                    f"square, which is √D = {math.sqrt(C // n_head):.3g} times smaller.")
    if _same(got, variants["whole"]):
        raise Wrong("You normalise all the heads' queries (and keys) of a position together, over C numbers; "
                    "each head's query is its own D-number vector, with its own root mean square.")
    if _same(got, variants["swapped"]):
        raise Wrong("Your queries have the keys' gain and your keys the queries' gain.")
    if _same(got, variants["no_eps"]):
        raise Wrong("Off by a few parts in a million: eps belongs inside the square root, added to the mean "
                    "square (it keeps a zero vector from dividing by zero).")
    ok_q = _same(got[..., :C], want[..., :C])
    part = "keys" if ok_q else "queries"
    worst = float(np.max(np.abs(got - want)))
    raise Wrong(f"{what}: your {part} differ from pylib's QK-norm by up to {worst:.3g}.")


def check_qk_norm(fn):
    rng = np.random.default_rng(81)
    eps = model.GPTConfig().ln_eps
    H, D = 4, 6
    qkv = rng.normal(0, 1, (2, 5, 3 * H * D))
    gq, gk = rng.normal(1, 0.3, D), rng.normal(1, 0.3, D)
    _qk_case(fn, qkv, H, gq, gk, eps, f"On random qkv ({H} heads of width {D})")
    _qk_case(fn, rng.normal(0, 1, (1, 3, 3 * D)), 1, gq, gk, eps, "With one head")
    # weights grown a thousandfold: the bound of the chapter, every logit at most max|g_q| max|g_k| sqrt(D)
    big = rng.normal(0, 1000, (2, 7, 3 * H * D))
    _qk_case(fn, big, H, gq, gk, eps, "With queries and keys a thousand times larger")
    out = fn(big.copy(), H, gq.copy(), gk.copy(), eps).reshape(2, 7, 3, H, D)
    logits = np.einsum("bthd,bshd->bhts", out[:, :, 0], out[:, :, 1]) / math.sqrt(D)
    bound = np.abs(gq).max() * np.abs(gk).max() * math.sqrt(D)
    return (f"Right: it matches pylib's QK-norm with several heads, one head, and inputs a thousand times larger; "
            f"there, the largest attention logit is {np.abs(logits).max():.3g}, within the bound "
            f"max|g_q|·max|g_k|·√D = {bound:.3g}, whatever the size of the weights.")


# ---------------------------------------------------------------------------
# 3. Predict: one tensor's gradient norm after global-norm clipping

GRAD_A = (2.0, -1.0, 2.0)
GRAD_B = (0.0, -4.0)
_NA, _NB = math.hypot(*GRAD_A), math.hypot(*GRAD_B)  # the task's numbers, for the worked answer
_NG, _CLIP = math.hypot(_NA, _NB), train.TrainConfig().grad_clip


def clipped_b():
    """The norm of b's gradient after pylib clips {a, b} at the default threshold."""
    grads = {"a": np.array(GRAD_A), "b": np.array(GRAD_B)}
    optim.clip_grad_norm(grads, train.TrainConfig().grad_clip)
    return float(np.linalg.norm(grads["b"]))


def check_clipped_b(value, truth):
    c = train.TrainConfig().grad_clip
    na, nb = np.linalg.norm(GRAD_A), np.linalg.norm(GRAD_B)
    if near(value, nb, 0.03):
        raise Wrong("That is b's norm before clipping. The threshold is on the global norm, of a and b together, "
                    "and that one is above it.")
    if near(value, c, 0.03):
        raise Wrong("That would be clipping each tensor on its own. pylib (like torch.nn.utils.clip_grad_norm_) "
                    "clips the global norm: one factor for every tensor.")
    if near(value, c * nb / (na + nb), 0.03):
        raise Wrong("The global norm is not the sum of the tensors' norms: it is the norm of all their elements "
                    "taken as one vector, the square root of the sum of their squared norms.")
    if near(value, c / math.sqrt(2), 0.03):
        raise Wrong("Clipping does not share the threshold evenly between the tensors: it multiplies every "
                    "gradient by the same factor, so b keeps its share of the global norm.")


# ---------------------------------------------------------------------------
# 4. Investigate: change the clip threshold of a run with one bad batch

BAD_STEP = 40  # the bad batch, just after the warmup
AFTER = 10  # clean steps compared after it

CLIP_STARTER = '''import dataclasses


def clip_threshold(tcfg):
    """Change one condition of the run with a bad batch: the clip threshold, tcfg.grad_clip.

    tcfg is the unchanged run's TrainConfig, which does not clip (grad_clip = 0).
    Return the changed TrainConfig.
    """
    return dataclasses.replace(tcfg, grad_clip=tcfg.grad_clip)  # change this line only
'''

CLIP_SOLUTION = '''import dataclasses


def clip_threshold(tcfg):
    return dataclasses.replace(tcfg, grad_clip=3.0)  # above every clean step's norm, below the bad batch's
'''


def _clip_configs():
    vocab = corpus().vocab
    mcfg, tcfg = stability.bad_configs(vocab.size, "none")
    token = int(vocab.encode(stability.BAD["token"])[0][0])
    return mcfg, tcfg, token


def _new_state(mcfg, tcfg, token):
    state = train.init_train_state(mcfg, tcfg)
    guards.hook_batches(state, stability.bad_batch_hook({BAD_STEP}, token))
    return state


def _steps(state, mcfg, tcfg, n, label):
    """n steps of state's run: each step's record and update (the change of the flat weights)."""
    c = corpus()
    records, updates = [], []
    flat = optim.flat_buffer(state["params"])
    for i in range(n):
        if i % 10 == 0:
            progress(f"{label}: step {state['step']}")
        before = flat.copy()
        records.append(train.train_step(state, mcfg, tcfg, c.train, c.val))
        updates.append(flat - before)
    return records, updates


_BASE = {}  # the unchanged run, once per corpus: its records, updates, and its state just before the bad step


def _unchanged_run(mcfg, tcfg, token):
    key = id(corpus())
    if key not in _BASE:
        state = _new_state(mcfg, tcfg, token)
        early = _steps(state, mcfg, tcfg, BAD_STEP, "the unchanged run")
        snapshot = {"flat": optim.flat_buffer(state["params"]).copy(), "t": state["opt"]["t"],
                    "m": state["opt"]["m"].copy(), "v": state["opt"]["v"].copy(), "step": state["step"],
                    "rng": copy.deepcopy(state["batch_rng"])}
        late = _steps(state, mcfg, tcfg, AFTER + 1, "the unchanged run")
        _BASE.clear()
        _BASE[key] = (early[0] + late[0], early[1] + late[1], snapshot)
    return _BASE[key]


def _resumed(mcfg, tcfg, token, snapshot):
    """A run of tcfg that starts where the unchanged run was just before the bad step."""
    state = _new_state(mcfg, tcfg, token)
    optim.flat_buffer(state["params"])[...] = snapshot["flat"]
    state["opt"]["m"][...], state["opt"]["v"][...] = snapshot["m"], snapshot["v"]
    state["opt"]["t"], state["step"] = snapshot["t"], snapshot["step"]
    state["batch_rng"] = copy.deepcopy(snapshot["rng"])
    return state


def check_clip_threshold(fn):
    mcfg, tcfg0, token = _clip_configs()
    tcfg = fn(tcfg0)
    if not isinstance(tcfg, train.TrainConfig):
        raise Wrong(f"clip_threshold should return a TrainConfig (dataclasses.replace of tcfg); yours returns "
                    f"a {type(tcfg).__name__}.")
    others = [f.name for f in dataclasses.fields(tcfg) if f.name != "grad_clip"
              and getattr(tcfg, f.name) != getattr(tcfg0, f.name)]
    if others:
        raise Wrong(f"You changed more than the clip threshold (also {', '.join(others)}): with two conditions "
                    "changed, the comparison cannot say which one did what.")
    clip = tcfg.grad_clip
    if clip == tcfg0.grad_clip:
        raise Wrong("Your config is the unchanged run's: grad_clip is still 0, no clipping. Change it.")
    if isinstance(clip, (bool, np.bool_)) or not (isinstance(clip, (int, float, np.integer, np.floating))
                                                  and math.isfinite(clip) and clip > 0):
        raise Wrong(f"grad_clip = {clip!r} does not clip: a threshold is a positive number.")
    base, base_up, snapshot = _unchanged_run(mcfg, tcfg0, token)
    # Clipping touches a step only when its norm is above the threshold (optim.clip_grad_norm), so
    # the changed run is the unchanged one up to the first clean step whose norm is above it.
    early = next((r for r in base[:BAD_STEP] if r["grad_norm"] > clip), None)
    if early is not None:
        raise Wrong(f"Your threshold acted before the bad batch: at step {early['step']} the clean gradient's "
                    f"norm, {early['grad_norm']:.3g}, is above it, so clipping changed that step's update, and "
                    "every step after it. A guard against outliers has to sit above the clean steps' norms, "
                    "which are largest early in the run.")
    state = _resumed(mcfg, tcfg, token, snapshot)
    runs, ups = _steps(state, mcfg, tcfg, AFTER + 1, "your run")
    bad, bad0 = runs[0], base[BAD_STEP]
    if bad["loss"] != bad0["loss"] or bad["grad_norm"] != bad0["grad_norm"]:
        raise Wrong("At the bad step your run's loss or gradient norm differs from the unchanged one's: clipping "
                    "acts after the backward pass, so they should agree exactly. Did you change the model?")
    if not bad.get("clipped"):
        raise Wrong(f"Your threshold never acted: the bad batch's gradient norm, {bad0['grad_norm']:.3g}, is "
                    f"below it, so your run is the unchanged run, step for step.")
    grad_ratio = bad0["grad_norm"] / clip
    up_ratio = float(np.linalg.norm(base_up[BAD_STEP]) / np.linalg.norm(ups[0]))
    after = [r["step"] for r in runs[1:] if r.get("clipped")]
    excess = float(np.mean([b["loss"] - r["loss"] for r, b in zip(runs[1:], base[BAD_STEP + 1:])]))
    also = (f" It also clipped the clean step{'s' if len(after) > 1 else ''} {', '.join(map(str, after))} just "
            "after it: the bad batch had knocked the model off course, and their gradients were large too."
            if after else " No clean step was clipped.")
    return (f"Right: no clean step before the bad one has a norm above your threshold, so up to it the two runs "
            f"are one run, and at the bad step the loss and the gradient before clipping are the same. Clipping "
            f"divided that gradient by {grad_ratio:.3g}, but the update only by {up_ratio:.3g}: Adam divides by "
            f"√v, which the gradient's size enters too. Over the next {AFTER} clean batches your run's loss is "
            f"{excess:.3g} nats lower on average.{also}")


# ---------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        id="ch8.logit_growth", kind="predict", title="Logits that follow the weights",
        task=f"""Take the course model at initialisation, without QK-norm, and multiply every weight and bias of
layer 0's `c_attn` by {GROWTH:g}: the queries', the keys' and the values'. By what factor does the largest
|attention logit| of layer 0 grow? Commit a number; the check runs the forward pass before and after.""",
        truth=logit_growth, check=check_logit_growth, tolerance=0.02,
        solution=f"""The LayerNorm before `c_attn` does not change, so every query and every key is {GROWTH:g}
times larger. A logit $q \\cdot k / \\sqrt{{D}}$ is a product of the two, so it grows by
{GROWTH:g} × {GROWTH:g} = {GROWTH ** 2:g}; the values do not enter it. That product is why the logits
run away when the weights grow, and why QK-norm, which fixes the lengths of $q$ and $k$, stops them.""",
        hints=("Which of the three parts of `c_attn`'s output does an attention logit use, and how?",
               "Scale q and k by the same factor: what happens to their dot product?"),
        mistakes=(Mistake(repr(GROWTH), "dot product of a query and a key"),
                  Mistake(repr(2 * GROWTH), "multiply in the dot product"),
                  Mistake(repr(GROWTH ** 3), "do not enter the attention logits"),
                  Mistake("1", "what QK-norm would give")),
    ),
    Exercise(
        id="ch8.qk_norm", kind="implement", title="QK-norm",
        task="""The chapter states QK-norm's bound and tests it, but does not show its code. Write it: given
the output of `c_attn`, RMSNorm each head's query vector and each head's key vector (with their gains),
and leave the values alone. The check compares it with pylib's on several heads, on one, and on
queries and keys a thousand times larger than usual.""",
        starter=QK_STARTER, function="qk_norm", solution=QK_SOLUTION, check=check_qk_norm,
        hints=("Reshape qkv to (B, T, 3, H, D): index 0 of the third axis is the queries, 1 the keys, 2 the "
               "values, and each head's D numbers are on the last axis.",
               "RMSNorm: divide by √(mean of the squares over the D numbers + eps), then multiply by the gain.",
               "Work on a copy, so the caller's qkv is unchanged, and reshape back to (B, T, 3C) at the end."),
        mistakes=(
            Mistake(QK_SOLUTION.replace("np.sqrt((v * v).mean(axis=-1, keepdims=True) + eps)",
                                        "np.linalg.norm(v, axis=-1, keepdims=True)"), "ℓ2 normalisation"),
            Mistake(QK_SOLUTION.replace("out = qkv.reshape(B, T, 3, n_head, D).copy()",
                                        "out = qkv.reshape(B, T, 3, n_head * D).copy()").replace(
                "* gain", "* np.tile(gain, n_head)"), "all the heads' queries"),
            Mistake(QK_SOLUTION.replace("reshape(B, T, 3, n_head, D)", "reshape(B, T, n_head, 3, D)").replace(
                "out[:, :, part]", "out[:, :, :, part]"), "all C query numbers first"),
            Mistake(QK_SOLUTION.replace(" + eps)", ")"), "eps belongs inside"),
        )),
    Exercise(
        id="ch8.clipped_b", kind="predict", title="Clipping the global norm",
        task=f"""A model has two parameter tensors, with gradients a = ({', '.join(f'{v:g}' for v in GRAD_A)})
and b = ({', '.join(f'{v:g}' for v in GRAD_B)}). pylib clips them at the default threshold, a
global norm of {train.TrainConfig().grad_clip:g}. What is the norm of b's gradient after clipping?""",
        truth=clipped_b, check=check_clipped_b, tolerance=0.02,
        solution=f"""The global norm is the norm of all five numbers as one vector:
√({_NA ** 2:g} + {_NB ** 2:g}) = {_NG:g}. It is above {_CLIP:g}, so every gradient is multiplied by
{_CLIP:g}/{_NG:g} (pylib adds 10⁻⁶ to the denominator, as PyTorch does), and b's norm, {_NB:g}, becomes
{_NB:g} × {_CLIP:g}/{_NG:g} = {_NB * _CLIP / _NG:g}. The direction of the whole gradient is kept; only its
length changes, and each tensor keeps its share of it.""",
        hints=("The threshold applies to one number: the norm of every gradient element of the model taken together.",
               "If that norm is above the threshold, every tensor is multiplied by the same factor."),
        mistakes=(Mistake(repr(float(np.linalg.norm(GRAD_B))), "before clipping"),
                  Mistake("1", "each tensor on its own"),
                  Mistake(repr(float(np.linalg.norm(GRAD_B) / (np.linalg.norm(GRAD_A) + np.linalg.norm(GRAD_B)))),
                          "not the sum of the tensors' norms"),
                  Mistake("0.7071", "share the threshold evenly")),
    ),
    Exercise(
        id="ch8.clip_threshold", kind="investigate", title="One condition changed: the clip threshold",
        task=f"""The unchanged run is the chapter's bad-batch run without a cure (the default model and settings,
no clipping), with one bad batch at step {BAD_STEP}, just after the warmup, and {AFTER} clean steps after it.
Change one condition: turn clipping on, with a threshold that acts on the bad batch and leaves every
clean step before it alone. The check runs both and compares the loss, the gradient norm and the update
at the bad step and after it.""",
        starter=CLIP_STARTER, function="clip_threshold", solution=CLIP_SOLUTION, check=check_clip_threshold,
        needs_corpus=True,
        hints=("The chapter gives the bad batch's gradient norm as a multiple of the clean steps' median; the "
               "clean norms are largest early in the run, while everything is still to be learnt.",
               "The check says which step a threshold acted on, and that step's norm: move the threshold to one "
               "side of it."),
        mistakes=(
            Mistake(CLIP_STARTER, "still 0"),
            Mistake(CLIP_SOLUTION.replace("3.0", "0.5"), "acted before the bad batch"),
            Mistake(CLIP_SOLUTION.replace("3.0", "100.0"), "never acted"),
            Mistake(CLIP_SOLUTION.replace("grad_clip=3.0", "grad_clip=3.0, lr=tcfg.lr / 2"), "more than the clip"),
        )),
]
