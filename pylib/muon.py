"""Muon: momentum, then an approximate orthogonalisation of each hidden matrix's update.

Jordan et al. (2024), "Muon: An optimizer for hidden layers in neural networks" (Keller Jordan's
blog post). For a 2-D weight W with gradient G, Muon keeps a momentum buffer M of G and steps W
by an orthogonalised M: the matrix U V^T of M's singular value decomposition M = U S V^T, so every
direction the update touches moves by the same amount. The SVD is replaced by five iterations of
a quintic Newton-Schulz map with the post's coefficients (3.4445, -4.7750, 2.0315); it pushes
every singular value into a band around 1 instead of onto 1 exactly (tests/test_muon.py states
the band).

Choices, as the post and Liu et al. (2025), "Muon is Scalable for LLM Training" (Moonshot AI),
section 2, make them:
  - Muon updates the hidden matrices only (attention and MLP weights: pylib.model.is_hidden_matrix).
    The embeddings wte and wpe (wte is also the tied output head), biases and norm gains go to
    AdamW, as in the post. An embedding row is a lookup, not a linear map of a hidden vector:
    orthogonalising its update has no meaning there.
  - Update scale: Moonshot's RMS matching, 0.2 * sqrt(max(rows, cols)) times the orthogonalised
    matrix, so that its RMS (about 0.2) is like AdamW's and one learning rate serves both parts.
  - Nesterov momentum 0.95 in the post's form (buf = lerp(buf, g, 1 - beta); use lerp(g, buf, beta)).
  - Decoupled weight decay on the Muon matrices too (Moonshot, section 2.2): p *= 1 - lr * wd.

Shapes: a hidden matrix is (out, in), PyTorch's layout, e.g. (3C, C) for attn.c_attn.weight.
c_attn holds the query, key and value projections in one tensor, and it is orthogonalised as ONE
3C x C matrix: a choice (splitting it into three C x C blocks is the alternative). KellerJordan/Muon's
muon_update orthogonalises each 2-D parameter it is given as one matrix, so there too it depends on
how the model stores Q, K and V.
Updates are in place, like pylib.optim.
"""

import numpy as np

from pylib import model, optim

NS_COEFFS = (3.4445, -4.7750, 2.0315)  # Jordan et al. 2024: the quintic's a, b, c
NS_STEPS = 5
MOMENTUM = 0.95
RMS_MATCH = 0.2  # Liu et al. 2025: the update RMS that matches AdamW's

# ---------------------------------------------------------------------------
# Newton-Schulz orthogonalisation


def newton_schulz(G, steps=NS_STEPS, eps=1e-7):
    """Approximately U V^T for G = U S V^T (G: (m, n)), by the quintic Newton-Schulz iteration."""
    a, b, c = NS_COEFFS
    X = G / (np.linalg.norm(G) + eps)  # Frobenius norm <= 1, so every singular value is <= 1
    tall = X.shape[0] > X.shape[1]
    if tall:
        X = X.T  # (n, m): the Gram matrix below is the smaller side's
    for _ in range(steps):
        A = X @ X.T  # (k, k), k = min(m, n)
        B = b * A + c * (A @ A)
        X = a * X + B @ X  # each singular value s -> a s + b s^3 + c s^5
    return X.T if tall else X


def ns_scalar(s, steps=NS_STEPS):
    """What the iteration does to one singular value s (of the normalised matrix): the quintic, steps times."""
    a, b, c = NS_COEFFS
    for _ in range(steps):
        s = a * s + b * s**3 + c * s**5
    return s


def ns_singular_value_band(s_min, steps=NS_STEPS, points=200_001):
    """(lowest, highest) output singular value for inputs in [s_min, 1] (after normalisation)."""
    out = ns_scalar(np.geomspace(s_min, 1.0, points), steps)
    return float(out.min()), float(out.max())


def update_scale(shape):
    """Moonshot's RMS matching: 0.2 * sqrt(max(rows, cols))."""
    return RMS_MATCH * float(np.sqrt(max(shape)))


# ---------------------------------------------------------------------------
# The optimiser: Muon on hidden matrices, AdamW on the rest


def muon_split(params):
    """(names Muon updates: the hidden matrices, names AdamW updates: everything else)."""
    matrices = [n for n in params if model.is_hidden_matrix(n) and params[n].ndim == 2]
    rest = [n for n in params if n not in set(matrices)]
    return matrices, rest


def muon_init(params):
    """One momentum buffer per hidden matrix, AdamW's two moments for the other params."""
    matrices, rest = muon_split(params)
    return {"t": 0, "matrices": matrices, "rest": rest,
            "buf": {n: np.zeros_like(params[n]) for n in matrices},
            "adam": optim.adamw_init({n: params[n] for n in rest})}


def muon_step(params, grads, state, lr, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.0, groups=None,
              momentum=MOMENTUM):
    """One step: Muon on state["matrices"], AdamW (beta1, beta2, eps; decay group) on state["rest"]."""
    state["t"] += 1
    for n in state["matrices"]:
        p, g, buf = params[n], grads[n], state["buf"][n]
        buf += (1.0 - momentum) * (g - buf)  # buf = lerp(buf, g, 1 - momentum)
        update = g + momentum * (buf - g)  # Nesterov: lerp(g, buf, momentum)
        if weight_decay:
            p *= 1.0 - lr * weight_decay
        p -= (lr * update_scale(p.shape)) * newton_schulz(update).astype(p.dtype)
    rest = {n: params[n] for n in state["rest"]}
    decay = [n for n in (groups or optim.param_groups(params))["decay"] if n in rest]
    optim.adamw_step(rest, {n: grads[n] for n in rest}, state["adam"], lr, beta1, beta2, eps, weight_decay,
                     {"decay": decay, "no_decay": [n for n in rest if n not in decay]})


def state_floats(state):
    """Floats of optimiser state Muon keeps: the momentum buffers plus AdamW's m and v."""
    return sum(b.size for b in state["buf"].values()) + state["adam"]["m"].size + state["adam"]["v"].size
