"""pylib.studies.backprop_order: the backward pass finishes gradients in the reverse of the forward's order."""

import numpy as np

from pylib import model
from pylib.studies import backprop_order


def batch(cfg, B=2, seed=0):
    x = np.random.default_rng(seed).integers(0, cfg.vocab_size, (B, cfg.block_size))
    return x, np.roll(x, -1, axis=1)


def test_backward_finishes_gradients_in_reverse_forward_order_tied_embedding_last():
    cfg = model.GPTConfig(n_layer=2)
    params = model.init_params(cfg, 0, np.float64)
    r = backprop_order.backward_order(params, cfg, *batch(cfg))
    order = [row["name"] for row in r["backward"]]
    assert sorted(order) == sorted(params) and len(order) == len(params)  # each finished exactly once
    # The output head reuses wte, so wte's gradient is complete only at the very end; the rest is
    # the forward order of the operations reversed (an operation's weight and bias come together).
    assert order[-1] == "wte"

    def ops(names):
        out = []
        for n in names:
            op = n.removesuffix(".weight").removesuffix(".bias")
            if op not in out:
                out.append(op)
        return out
    assert ops(order[:-1]) == ops([n for n in reversed(r["forward"]) if n != "wte"])
    assert order.index("h.1.mlp.c_proj.weight") < order.index("h.0.mlp.c_proj.weight")


def test_recorded_gradients_are_the_models():
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 1, np.float64)
    x, y = batch(cfg, seed=1)
    r = backprop_order.backward_order(params, cfg, x, y)
    loss, grads = model.loss_and_grads(params, cfg, x, y)
    assert r["loss"] == float(loss)
    for row in r["backward"]:
        assert row["grad_norm"] == float(np.sqrt(np.sum(np.square(grads[row["name"]]))))
