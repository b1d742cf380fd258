"""torch.utils.checkpoint on the course model, beside pylib.systems.checkpointing.

Chapter 10 recomputes each block in pylib (recompute="full": a block keeps only its input h). Here
PyTorch's own engine does the same: each Block of companions.model.GPT runs through
torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False), which keeps the block's input and
runs its forward again when the backward first needs one of its saved tensors. Two things are
compared with pylib on the same weights and batch:

- the gradients, with and without checkpointing (pylib: checkpointing.step, "none" and "full");
- the bytes autograd keeps for the backward, counted two ways: with saved-tensor hooks
  (torch.autograd.graph.saved_tensors_hooks: every tensor an op saves, each storage once, so a view
  of a kept storage adds nothing, parameters left out), and with PyTorch's memory profiler on the
  CPU (every allocation and free inside the forward; what is still allocated when it returns).

`torch_saved_bytes` is the same count predicted from what each backward node saves (the SavedVariable
fields of torch/include/torch/csrc/autograd/generated/Functions.h), and `pylib_minus_torch` names, term
by term, how it differs from pylib's count (pylib.systems.memory.recompute_bytes). A test holds all
of them equal to the byte.

Legend: B batch, T time, C n_embd, H n_head, V vocab_size, L n_layer.
"""

import numpy as np
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.checkpoint import checkpoint

# ---------------------------------------------------------------------------
# The model's loss, each block checkpointed or not


def loss(net, idx, targets, checkpointed=False):
    """GPT.forward's mean cross-entropy, each block run through torch.utils.checkpoint if checkpointed."""
    pos = torch.arange(idx.size(1), device=idx.device)
    x = net.transformer.wte(idx) + net.transformer.wpe(pos)  # (B, T, C)
    for block in net.transformer.h:
        x = checkpoint(block, x, use_reentrant=False) if checkpointed else block(x)
    logits = net.lm_head(net.transformer.ln_f(x))  # (B, T, V)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# ---------------------------------------------------------------------------
# What autograd keeps: saved-tensor hooks, and the memory profiler


def saved_tensors(net, fn):
    """(fn(), [(storage address, storage bytes)] for every tensor autograd saves while fn runs, parameters left out)."""
    params = {p.untyped_storage().data_ptr() for p in net.parameters()}
    rows = []

    def pack(t):
        s = t.untyped_storage()  # a view's storage is its base's
        if s.data_ptr() not in params:
            rows.append((s.data_ptr(), s.nbytes()))
        return t  # kept as it is: saving is unchanged, only watched

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, rows


def distinct_bytes(rows):
    """Bytes of the distinct storages in rows: views of one storage count once."""
    return sum(dict(rows).values())


def saved_bytes(net, fn):
    """(fn(), bytes of the distinct storages autograd keeps for the backward)."""
    out, rows = saved_tensors(net, fn)
    return out, distinct_bytes(rows)


def profiled_bytes(fn):
    """(fn(), bytes allocated while fn ran and still allocated when it returned), by torch.profiler on the CPU."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    # Each allocation (+) and free (-) is attributed to one event (its op, or a "[memory]" event of its own).
    return out, sum(e.self_cpu_memory_usage for e in prof.events())


def rng_state_bytes():
    """Bytes of the CPU generator's state, which checkpoint keeps per call (preserve_rng_state=True)."""
    return torch.get_rng_state().untyped_storage().nbytes()


# ---------------------------------------------------------------------------
# The same count, predicted


def torch_saved_bytes(cfg, B, T, checkpointed=False, itemsize=4):
    """Bytes the saved-tensor hooks see, by part: {"per_layer", "layers", "outside", "total"}.

    From the SavedVariable fields of Functions.h. Per block: each LayerNorm its input (BTC), mean
    and rstd (BT each); each Linear its input (BTC for c_attn, c_proj, c_fc; 4BTC for mlp.c_proj);
    matmul's contiguous copies of q, k^T and v (BTC each: the heads' views of qkv cannot be batched
    without one) for the two bmm; the probabilities (B H T^2); masked_fill's causal mask (T^2 bools);
    GELU its input (4BTC). Checkpointed, a block keeps its input only (BTC). Outside the blocks: the
    token ids and the position indices (int64), ln_f as above, the head's input, log_softmax's output
    (BTV), the targets (int64) and nll_loss's total weight (one value)."""
    C, H, V, L = cfg.n_embd, cfg.n_head, cfg.vocab_size, cfg.n_layer
    btc, bt = B * T * C * itemsize, B * T * itemsize
    if checkpointed:
        per_layer = btc
    else:
        per_layer = (2 * (btc + 2 * bt)  # ln_1, ln_2: input, mean, rstd
                     + 3 * btc  # inputs of c_attn, attn.c_proj, mlp.c_fc
                     + 3 * btc  # q, k^T, v copied for bmm
                     + B * H * T * T * itemsize + T * T  # probabilities; the causal mask, one byte each
                     + 4 * btc  # GELU's input
                     + 4 * btc)  # mlp.c_proj's input, GELU's output
    outside = B * T * 8 + T * 8 + (btc + 2 * bt) + btc + B * T * V * itemsize + B * T * 8 + itemsize
    return {"per_layer": per_layer, "layers": L * per_layer, "outside": outside, "total": L * per_layer + outside}


def pylib_minus_torch(cfg, B, T, checkpointed=False, itemsize=4):
    """pylib's stored bytes less PyTorch's, term by term: {term: bytes} (negative where PyTorch keeps more)."""
    from pylib.systems import memory
    C, L = cfg.n_embd, cfg.n_layer
    btc, bt = B * T * C * itemsize, B * T * itemsize
    terms = {} if checkpointed else {
        "gelu_tanh": L * 4 * btc,  # pylib keeps tanh; PyTorch's GELU backward computes it again from the input
        "qkv": L * btc,  # pylib: qkv (3 BTC) and the scaled q (BTC); PyTorch: matmul's copies of q, k^T, v (3 BTC)
        "heads_output": L * btc if memory.heads_merge_is_copy(cfg.n_head, T) else 0,  # pylib: before and after merging
        "ln_mean": -L * 2 * bt,  # PyTorch's LayerNorm keeps mean and rstd, pylib's rstd only
        "causal_mask": -L * T * T,  # masked_fill keeps its mask (bool); pylib's attention backward needs none
    }
    terms.update({"lnf_mean": -bt,  # the final LayerNorm's mean
                  "positions": -T * 8,  # wpe's indices, torch.arange(T) (int64); pylib slices wpe[:T]
                  "total_weight": -itemsize})  # nll_loss keeps the sum of the targets' weights, one value
    return terms


def profiler_minus_hooks(cfg, B, T, checkpointed=False, itemsize=4):
    """What the profiler counts less what the hooks count, term by term: {term: bytes}."""
    return {"ids_targets": -2 * B * T * 8,  # allocated before the forward: kept, but not allocated in it
            "loss": itemsize,  # the loss itself, which no backward node saves
            "wrapped_scale": cfg.n_layer * 8,  # 1/sqrt(D): a float64 wrapped number MulBackward0 keeps unhooked
            "rng_state": cfg.n_layer * rng_state_bytes() if checkpointed else 0}  # checkpoint's CPU generator state


# ---------------------------------------------------------------------------
# The comparison


def relative_differences(ref, got):
    """{name: max |ref - got| / max |ref|} over the tensors of ref."""
    return {n: float(np.abs(ref[n] - got[n]).max() / np.abs(ref[n]).max()) for n in ref}


def compare(params, cfg, x, y, dtype=torch.float32, count=True):
    """Gradients and bytes of one step, PyTorch (checkpointed and not) against pylib, on ids x, targets y (B, T).

    Returns {"grads": {mode: {name: relative difference to pylib}}, "unequal_to_plain": elements of the
    checkpointed gradients that differ from the plain ones, and, if count, "saved", "profiled", "predicted"
    and "pylib_stored": {mode: bytes}}; modes "none" and "full", as pylib names them."""
    from companions import model as torch_gpt
    from pylib.systems import checkpointing
    np_dtype = np.float64 if dtype == torch.float64 else np.float32
    params = {k: v.astype(np_dtype) for k, v in params.items()}
    idx, targets = torch.from_numpy(x), torch.from_numpy(y)
    out = {"grads": {}, "saved": {}, "profiled": {}, "predicted": {}, "pylib_stored": {}}
    torch_grads = {}
    for mode in ("none", "full"):
        ckpt = mode == "full"
        _, ref, held = checkpointing.step(params, cfg, x, y, recompute=mode, record=count)
        net = torch_gpt.from_pylib(params, cfg, dtype)
        step_loss, out["saved"][mode] = saved_bytes(net, lambda: loss(net, idx, targets, ckpt))
        step_loss.backward()
        torch_grads[mode] = torch_gpt.named_grads(net)
        out["grads"][mode] = relative_differences(ref, torch_grads[mode])
        if count:
            end_of_forward = max(k for k, e in enumerate(held.events) if e["phase"] == "forward")
            out["pylib_stored"][mode] = held.events[end_of_forward]["held"]
            out["profiled"][mode] = profiled_bytes(lambda: loss(net, idx, targets, ckpt))[1]
            out["predicted"][mode] = torch_saved_bytes(cfg, *x.shape, ckpt, np.dtype(np_dtype).itemsize)["total"]
    out["unequal_to_plain"] = int(sum(np.count_nonzero(torch_grads["full"][n] != torch_grads["none"][n])
                                      for n in torch_grads["none"]))
    return out
