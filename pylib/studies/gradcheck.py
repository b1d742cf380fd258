"""Gradient checking: pylib's backward against centred finite differences, in float64.

A gradient is the slope of the loss along one weight. Nudging that weight by +h and -h and
dividing the change in the loss by 2h estimates it with an error of order h^2 (truncation: the
cubic term of the Taylor series) plus order eps*|L|/h (rounding: the two losses agree in most of
their digits, and float64 keeps about 16). Chapter 4 plots both. cs231n's gradient-check notes
and micrograd's tests do the same; the relative error is theirs:
|analytic - numeric| / max(|analytic|, |numeric|), taken as 0 when both are exactly 0.

At initialisation every LayerNorm gain is 1 and every bias 0, and a check there cannot see a
backward that forgets a gain (multiplying by 1) or mishandles a bias (adding 0). So the check also
runs at perturbed weights (perturbed_params): the same initial weights with every LayerNorm gain
drawn away from 1 and every bias away from 0. layernorm_backward_ignoring_gain is such a bug, kept
here to show that the perturbed check finds it and the check at initialisation does not.

The batch is fixed and real (evenly spaced windows of the token stream, pylib.data.eval_windows),
so a check is a deterministic function of the params, the config and the tokens.

Legend: B batch, T time.
"""

import math

import numpy as np

from pylib import model

H_DEFAULT = 1e-5  # float64: truncation ~h^2 = 1e-10, rounding ~1e-16 / h = 1e-11
H_SWEEP = tuple(10.0 ** e for e in np.arange(-13.0, 0.5, 0.5))  # 1e-13 .. 1: the error-vs-h plot
SUBSET = 128  # elements checked per tensor in the page's full check (all of them if fewer): ~8 s in Chromium

# ---------------------------------------------------------------------------
# The two slopes and their disagreement


def relative_error(analytic, numeric):
    """|a - n| / max(|a|, |n|), elementwise; 0 where both are exactly 0."""
    a, n = np.asarray(analytic, dtype=np.float64), np.asarray(numeric, dtype=np.float64)
    scale = np.maximum(np.abs(a), np.abs(n))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, np.abs(a - n) / np.where(scale > 0, scale, 1.0), 0.0)


def centred_difference(loss_fn, p, index, h):
    """(L(p[index] + h) - L(p[index] - h)) / 2h, nudging p in place and restoring it exactly."""
    old = p[index]
    p[index] = old + h
    plus = loss_fn()
    p[index] = old - h
    minus = loss_fn()
    p[index] = old
    return (plus - minus) / (2.0 * h), plus, minus


# ---------------------------------------------------------------------------
# The model on a fixed batch


def fixed_batch(tokens, B, T):
    """B evenly spaced windows of T+1 tokens: x (B, T), y (B, T); no randomness."""
    from pylib.data import eval_windows
    return eval_windows(tokens, B, T)


def float64_params(cfg, seed):
    """The model's initial weights (pylib.model.init_params) in float64, for checking."""
    return model.init_params(cfg, seed, dtype=np.float64)


PERTURB_GAIN_SD = 0.5  # LayerNorm gains ~ N(1, 0.5^2): far enough from 1 that a missing gain shows
PERTURB_BIAS_SD = 0.1  # every bias (LayerNorm and linear) ~ N(0, 0.1^2)


def perturbed_params(cfg, seed, gain_sd=PERTURB_GAIN_SD, bias_sd=PERTURB_BIAS_SD):
    """float64_params(cfg, seed) with every LayerNorm gain drawn from N(1, gain_sd^2) and every bias
    from N(0, bias_sd^2), from their own stream (default_rng([seed, 3])); the matrices are unchanged."""
    params = float64_params(cfg, seed)
    rng = np.random.default_rng([seed, 3])
    for name, p in params.items():
        if name.endswith(".bias"):
            p[...] = rng.normal(0.0, bias_sd, p.shape)
        elif p.ndim == 1 and name.endswith(".weight"):  # a norm's gain (the only 1-D weights)
            p[...] = rng.normal(1.0, gain_sd, p.shape)
    return params


def weights_at(cfg, seed, which):
    """The weights a check runs at: "init" (float64_params) or "perturbed" (perturbed_params)."""
    if which == "init":
        return float64_params(cfg, seed)
    if which == "perturbed":
        return perturbed_params(cfg, seed)
    raise ValueError(f"unknown weights {which!r}: 'init' or 'perturbed'")


class layernorm_backward_ignoring_gain:
    """Context manager: while active, pylib.layers.layernorm_backward ignores the gain (a bug).

    The wrong backward computes dxhat = dout instead of dout * w. Only the input's gradient is
    wrong (the gain's and the bias's own gradients do not use w), and only where the gain is not
    1; at initialisation every gain is 1, so the bug is invisible there."""

    def __enter__(self):
        from pylib import layers
        self._saved = correct = layers.layernorm_backward

        def ignoring_gain(dout, cache):
            xhat, w, rstd, has_bias = cache
            return correct(dout, (xhat, np.ones_like(w), rstd, has_bias))

        layers.layernorm_backward = ignoring_gain
        return self

    def __exit__(self, *exc):
        from pylib import layers
        layers.layernorm_backward = self._saved
        return False


def model_loss_fn(params, cfg, x, y):
    """A closure: the mean cross-entropy of the model on (x, y) with the params as they are now."""
    return lambda: float(model.evaluate_loss(params, cfg, x, y))


def nudge(params, cfg, x, y, name, flat_index, h, grads=None):
    """One weight, one step size: {analytic, numeric, rel_error, loss, loss_plus, loss_minus}."""
    if grads is None:
        loss, grads = model.loss_and_grads(params, cfg, x, y)
    else:
        loss = model.evaluate_loss(params, cfg, x, y)
    p = params[name]
    index = np.unravel_index(flat_index, p.shape)
    numeric, plus, minus = centred_difference(model_loss_fn(params, cfg, x, y), p, index, h)
    analytic = float(grads[name][index])
    return {"analytic": analytic, "numeric": float(numeric),
            "rel_error": float(relative_error(analytic, numeric)),
            "loss": float(loss), "loss_plus": float(plus), "loss_minus": float(minus),
            "index": [int(i) for i in index]}


def error_vs_h(params, cfg, x, y, name, flat_index, hs=H_SWEEP, grads=None):
    """The relative error of the centred difference at each step size in hs (the U-shaped curve)."""
    if grads is None:
        grads = model.loss_and_grads(params, cfg, x, y)[1]
    p = params[name]
    index = np.unravel_index(flat_index, p.shape)
    analytic = float(grads[name][index])
    loss_fn = model_loss_fn(params, cfg, x, y)
    return [float(relative_error(analytic, centred_difference(loss_fn, p, index, h)[0])) for h in hs]


def checked_indices(size, subset, seed):
    """Flat indices to check in a tensor of `size` elements: all, or `subset` of them drawn without
    replacement by np.random.default_rng(seed), in increasing order."""
    if subset is None or size <= subset:
        return np.arange(size)
    return np.sort(np.random.default_rng(seed).choice(size, size=subset, replace=False))


def check_tensor(params, cfg, x, y, name, grads, h=H_DEFAULT, subset=None, seed=0):
    """Check one parameter tensor: {name, shape, size, checked, max, median, worst_index, scale}.

    Errors here are relative to the tensor's largest gradient, |a - n| / max_tensor |a|, as in
    tests/test_model.py: an element whose true gradient is 0 (the key biases, see the chapter)
    has an elementwise relative error of order 1 from rounding alone, which says nothing.
    """
    p = params[name]
    loss_fn = model_loss_fn(params, cfg, x, y)
    flat = checked_indices(p.size, subset, seed)
    numeric = np.empty(flat.size)
    for i, k in enumerate(flat):
        numeric[i] = centred_difference(loss_fn, p, np.unravel_index(int(k), p.shape), h)[0]
    analytic = grads[name].reshape(-1)[flat]
    scale = max(float(np.abs(grads[name]).max()), float(np.abs(numeric).max()))
    errors = np.abs(analytic - numeric) / scale if scale > 0 else np.zeros(flat.size)
    worst = int(np.argmax(errors))
    return {"name": name, "shape": list(p.shape), "size": int(p.size), "checked": int(flat.size),
            "max": float(errors.max()), "median": float(np.median(errors)), "worst_index": int(flat[worst]),
            "scale": scale}


def check_all(params, cfg, x, y, h=H_DEFAULT, subset=None, seed=0):
    """check_tensor for every parameter, in the params' order; `subset=None` checks every element."""
    grads = model.loss_and_grads(params, cfg, x, y)[1]
    return [check_tensor(params, cfg, x, y, name, grads, h, subset, seed + i) for i, name in enumerate(params)]


# ---------------------------------------------------------------------------
# A single layer: the standard upstream-gradient trick


def check_layer(forward, backward, inputs, h=H_DEFAULT, seed=0):
    """Max relative error (to the largest gradient entry) of each input's grad, via loss = sum(out * dout).

    forward(*inputs) -> (out, cache); backward(dout, cache) -> one grad per input (None: skipped).
    """
    rng = np.random.default_rng(seed)
    out, cache = forward(*inputs)
    dout = rng.standard_normal(np.shape(out))
    grads = backward(dout, cache)
    loss_fn = lambda: float((forward(*inputs)[0] * dout).sum())  # noqa: E731
    errors = []
    for x, g in zip(inputs, grads):
        if g is None:
            errors.append(None)
            continue
        numeric = np.zeros_like(x)
        for index in np.ndindex(x.shape):
            numeric[index] = centred_difference(loss_fn, x, index, h)[0]
        scale = max(np.abs(g).max(), np.abs(numeric).max(), math.ulp(1.0))
        errors.append(float(np.abs(g - numeric).max() / scale))
    return errors
