"""Export to (and import from) nanoGPT's state dict, so a model trained here loads into PyTorch.

pylib's parameter names are nanoGPT's without the "transformer." prefix, and its weights are
already in PyTorch's layout (Linear weight (out, in)), so export renames and adds the tied
output head: nanoGPT's state_dict holds lm_head.weight as a second name for transformer.wte.weight.
The keys are those of GPT.state_dict() when flash attention is available (no attn.bias buffer).
Load the result with

    model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=True)
"""

import io

import numpy as np

from pylib.model import param_shapes

# ---------------------------------------------------------------------------


def nanogpt_name(name):
    """pylib name -> nanoGPT state-dict key (e.g. 'wte' -> 'transformer.wte.weight')."""
    return f"transformer.{name}.weight" if name in ("wte", "wpe") else f"transformer.{name}"


def to_nanogpt_state_dict(params, cfg):
    """{nanoGPT key: array}, in nanoGPT's order, with lm_head.weight equal to wte."""
    sd = {}
    for name, shape in param_shapes(cfg).items():
        if params[name].shape != shape:
            raise ValueError(f"{name}: shape {params[name].shape}, config says {shape}")
        sd[nanogpt_name(name)] = np.array(params[name])  # copies: the export does not alias
    sd["lm_head.weight"] = sd["transformer.wte.weight"].copy()
    return sd


def from_nanogpt_state_dict(sd, cfg):
    """The inverse of to_nanogpt_state_dict; checks shapes and that the head is tied."""
    params = {}
    for name, shape in param_shapes(cfg).items():
        value = np.asarray(sd[nanogpt_name(name)])
        if value.shape != shape:
            raise ValueError(f"{nanogpt_name(name)}: shape {value.shape}, config says {shape}")
        params[name] = value.copy()
    if "lm_head.weight" in sd and not np.array_equal(np.asarray(sd["lm_head.weight"]), params["wte"]):
        raise ValueError("lm_head.weight differs from transformer.wte.weight: not a tied model")
    return params


def state_dict_to_npz_bytes(sd):
    """The state dict as the bytes of an .npz file (np.savez), for a download button."""
    buf = io.BytesIO()
    np.savez(buf, **sd)
    return buf.getvalue()


def npz_bytes_to_state_dict(data):
    """The inverse of state_dict_to_npz_bytes."""
    with np.load(io.BytesIO(data)) as npz:
        return {k: npz[k] for k in npz.files}
