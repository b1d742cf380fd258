"""The order of the backward pass, recorded from pylib.model.backward itself (chapter 4).

`backward_order` runs one forward and backward of the model and lists the parameter tensors twice:
in the order the forward pass uses them, and in the order the backward pass finishes their
gradients. The second order is not written down anywhere: a dict that notes each key as it is set
is handed to model.backward, which fills it as it goes.
"""

import numpy as np

from pylib import loss as xent
from pylib import model


class OrderRecorder(dict):
    """A dict that remembers the order its keys were set in (a key set twice is listed twice)."""

    def __init__(self):
        super().__init__()
        self.order = []

    def __setitem__(self, key, value):
        self.order.append(key)
        super().__setitem__(key, value)


def backward_order(params, cfg, x, y):
    """{loss, forward: [names], backward: [{name, shape, grad_norm}]} for one batch x, y (B, T).

    forward is the order of first use in the forward pass (the nanoGPT order of the parameters;
    the output head reuses wte last of all); backward is the order model.backward finishes each
    tensor's gradient, with the gradient's norm."""
    logits, cache = model.forward(params, cfg, x)
    loss, c_loss = xent.cross_entropy_forward(logits, y)
    recorder = OrderRecorder()
    grads = model.backward(xent.cross_entropy_backward(c_loss), cache, g=recorder)
    rows = [{"name": name, "shape": list(grads[name].shape),
             "grad_norm": float(np.sqrt(np.sum(np.square(grads[name], dtype=np.float64))))}
            for name in recorder.order]
    return {"loss": float(loss), "forward": list(params), "backward": rows}
