"""Training FLOPs: where C ≈ 6ND comes from, and a count of what pylib's own step does.

A matmul of an (M, K) by a (K, N) matrix costs 2MKN FLOPs (a multiply and an add per term).
Per token, a weight matrix of n numbers costs 2n forward (x @ w.T), and 4n backward: one matmul
for the input's gradient (dout @ w) and one for the weight's (dout.T @ x). Summed over the
weights that multiply, that is 2N forward + 4N backward = 6N per token, hence C ≈ 6ND for D
tokens (Kaplan et al. 2020, section 2.1 and Table 1). Attention adds matmuls with no weights:
q @ k.T and att @ v, 2TC each per token and layer forward when the full (T, T) score matrix is
computed (pylib computes it and then masks it), twice that backward.

The course model is far from the regime where 6N dominates: its context T = 64 is four times its
width C = 16, so the attention term is a large fraction of the total (the chapter derives it).

count_matmul_flops runs any pylib function on arrays that record every matmul's shapes, so the
formula can be checked against the step itself; pylib_step_flops is the exact closed form of that
count, including what pylib does with matmuls that the textbook count leaves out (sums written as
products with a vector of ones, pylib.layers.rowsum/colsum, and the one-hot matmul of the
embedding's gradient, pylib.layers.embedding_backward).

Legend: B batch, T time, C n_embd, L n_layer, H n_head, V vocab, N parameters, D tokens.
"""

import math

import numpy as np

# ---------------------------------------------------------------------------
# The formula


def matmul_params(cfg):
    """Parameters that multiply an activation once per token: the blocks' weight matrices
    (qkv 3C², projection C², MLP 8C²) and the output head (V·C, tied to the embedding).
    Biases, norms and the position table are not in it (they add, or are looked up)."""
    C = cfg.n_embd
    return cfg.n_layer * 12 * C * C + cfg.vocab_size * C


def forward_flops_per_token(cfg, T=None):
    """{"weights": 2N, "attention": 4LTC}: one token's forward FLOPs at context T (block_size)."""
    T = cfg.block_size if T is None else T
    return {"weights": 2 * matmul_params(cfg), "attention": 4 * cfg.n_layer * T * cfg.n_embd}


def training_flops_per_token(cfg, T=None):
    """Forward + backward (twice the forward): 6N + 12LTC FLOPs per token."""
    return 3 * sum(forward_flops_per_token(cfg, T).values())


def six_nd(n_params, tokens):
    """The rule of thumb C = 6ND, in FLOPs."""
    return 6.0 * float(n_params) * float(tokens)


def shape_matmul_params(shape):
    """matmul_params of a pylib.systems.memory.TransformerShape (chapter 10's shapes, LLaMA's too):
    per layer the attention's 4C² and the MLP's 2CF (3CF gated), plus the head's V·C, tied or not."""
    C, F = shape.n_embd, shape.ffn_hidden
    mlp = (3 if shape.gated_mlp else 2) * C * F
    return shape.n_layer * (4 * C * C + mlp) + shape.vocab_size * C


def shape_flops_per_token(shape, seq_len=None):
    """Training FLOPs per token of a TransformerShape at seq_len (default its own): 6N + 12·L·s·C."""
    s = shape.seq_len if seq_len is None else seq_len
    return 6 * shape_matmul_params(shape) + 12 * shape.n_layer * s * shape.n_embd


def gpu_days(flops, peak_flops_per_s, mfu):
    """Days of one accelerator to do flops at a model-FLOPs utilisation mfu of its peak."""
    if not (peak_flops_per_s > 0 and 0 < mfu <= 1):  # also False for NaN
        raise ValueError("the peak must be > 0 and the utilisation in (0, 1]")
    return flops / (peak_flops_per_s * mfu) / 86400.0


# ---------------------------------------------------------------------------
# What pylib's step actually multiplies


def pylib_step_flops(cfg, B, T=None):
    """Exact matmul FLOPs of one pylib training step (model.loss_and_grads on a (B, T) batch), by term.

    weights and attention are the formula's terms; reductions are the sums pylib writes as
    matmuls with a vector of ones (norms, biases' gradients, softmax and loss row sums);
    embedding_grad is the (V, N) one-hot matmul that gathers the token embedding's gradient.
    Only pre- or post-norm blocks without QK-norm are counted."""
    if getattr(cfg, "qk_norm", False):
        raise ValueError("QK-norm's reductions are not in this count")
    T = cfg.block_size if T is None else T
    C, L, H, V = cfg.n_embd, cfg.n_layer, cfg.n_head, cfg.vocab_size
    fwd = forward_flops_per_token(cfg, T)
    rms = getattr(cfg, "norm", "layernorm") == "rmsnorm"
    norm_fwd = 2 * C if rms else 4 * C  # one (or two) row means
    norm_bwd = 4 * C if rms else 8 * C if cfg.bias else 6 * C  # dw colsum, row means (and db)
    bias_bwd = 2 * 9 * C * L if cfg.bias else 0  # db colsums of c_attn (3C), c_proj (C), c_fc (4C), c_proj (C)
    per_token = {
        "weights": 3 * fwd["weights"],
        "attention": 3 * fwd["attention"],
        "reductions": (2 * L + 1) * (norm_fwd + norm_bwd) + L * 2 * H * T + 2 * V + bias_bwd + L * 2 * C,
        "embedding_grad": 2 * V * C,
    }
    return {k: v * B * T for k, v in per_token.items()}


# ---------------------------------------------------------------------------
# Counting the matmuls of a real call


class _Counted(np.ndarray):
    """An array that logs the FLOPs of every matmul it takes part in (into _Counted.log)."""

    log = None  # a list while counting

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [i.view(np.ndarray) if isinstance(i, _Counted) else i for i in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, _Counted) else o for o in kwargs["out"])
        if ufunc is np.matmul and method == "__call__" and _Counted.log is not None:
            a, b = (np.shape(x) for x in plain[:2])
            a2, b2 = (a if len(a) > 1 else (1,) + a), (b if len(b) > 1 else b + (1,))
            batch = math.prod(np.broadcast_shapes(a2[:-2], b2[:-2]))
            _Counted.log.append(2 * batch * a2[-2] * a2[-1] * b2[-1])  # 2·M·K·N per product
        result = getattr(ufunc, method)(*plain, **kwargs)
        if isinstance(result, tuple):
            return tuple(r.view(_Counted) if isinstance(r, np.ndarray) else r for r in result)
        return result.view(_Counted) if isinstance(result, np.ndarray) else result


def count_matmul_flops(fn, params, *args, **kwargs):
    """(fn's result, total matmul FLOPs, number of matmuls) of fn(params, *args, **kwargs).

    The float arrays (params' values, float args, and the float arrays NumPy's constructors make
    during the call) are viewed as recording arrays, so every matmul they reach, however deep in
    pylib, is logged with its shapes; integer and boolean arrays pass unchanged. The arithmetic
    itself is NumPy's, unchanged. Not thread-safe: it swaps np.empty/zeros/ones/full during the call."""
    def wrap(a):
        return a.view(_Counted) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a

    def recording(make):  # float arrays that pylib creates inside (np.empty, np.ones...) record too
        return lambda *a, **k: wrap(make(*a, **k))

    makers = {name: getattr(np, name) for name in _MAKERS}
    _Counted.log = []
    try:
        for name, make in makers.items():
            setattr(np, name, recording(make))
        result = fn({k: wrap(v) for k, v in params.items()}, *map(wrap, args), **kwargs)
        return result, int(sum(_Counted.log)), len(_Counted.log)
    finally:
        for name, make in makers.items():
            setattr(np, name, make)
        _Counted.log = None


_MAKERS = ("empty", "zeros", "ones", "full")  # the array constructors pylib's layers and loss call
