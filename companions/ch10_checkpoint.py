"""torch.utils.checkpoint on the course model, beside pylib.systems.checkpointing.

Chapter 10 recomputes each block in pylib (recompute="full": a block keeps only its input h;
"selective": a block drops only the attention core, Korthikanti et al. 2022, section 5). Here
PyTorch's own engine does the same: each Block of companions.model.GPT runs through
torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False), which keeps the block's input and
runs its forward again when the backward first needs one of its saved tensors; for "selective", with
a policy (AttentionCorePolicy, through create_selective_checkpoint_contexts) that saves every
operation's output but the attention core's, so that only the core is run again. Two things are
compared with pylib on the same weights and batch:

- the gradients, in each mode (pylib: checkpointing.step, "none", "selective" and "full");
- the bytes autograd keeps for the backward, counted two ways: with saved-tensor hooks
  (torch.autograd.graph.saved_tensors_hooks: every tensor an op saves, each storage once, so a view
  of a kept storage adds nothing, parameters left out; with a policy, the outputs it saves too), and
  with PyTorch's memory profiler on the CPU (every allocation and free inside the forward; what is
  still allocated when it returns).

`torch_saved_bytes` is the same count predicted from what each backward node saves (the SavedVariable
fields of torch/include/torch/csrc/autograd/generated/Functions.h), and `pylib_minus_torch` names, term
by term, how it differs from pylib's count (pylib.systems.memory.recompute_bytes). A test holds all
of them equal to the byte.

Legend: B batch, T time, C n_embd, H n_head, V vocab_size, L n_layer.
"""

import functools
import gc

import numpy as np
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils._pytree import tree_leaves
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

MODES = ("none", "selective", "full")  # as pylib.systems.checkpointing names them

# ---------------------------------------------------------------------------
# The model's loss, each block recomputed or not


def loss(net, idx, targets, recompute="none", policy=None):
    """GPT.forward's mean cross-entropy; "full": each block through torch.utils.checkpoint, "selective":
    the same with a policy (an AttentionCorePolicy by default) that saves all but the attention core."""
    pos = torch.arange(idx.size(1), device=idx.device)
    x = net.transformer.wte(idx) + net.transformer.wpe(pos)  # (B, T, C)
    if recompute == "selective":
        policy = policy or AttentionCorePolicy(net.cfg, *idx.shape)
        selective = functools.partial(create_selective_checkpoint_contexts, policy)
    for block in net.transformer.h:
        if recompute == "none":
            x = block(x)
        elif recompute == "full":
            x = checkpoint(block, x, use_reentrant=False)
        else:
            x = checkpoint(block, x, use_reentrant=False, context_fn=selective)
    logits = net.lm_head(net.transformer.ln_f(x))  # (B, T, V)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class AttentionCorePolicy:
    """Selective checkpointing's policy: recompute what pylib's "selective" drops, save everything else.

    Called once per operation of a checkpointed block's forward. The attention core is every tensor
    that attention lays out per head, (B, H, ., .) or (B*H, ., .): the contiguous copies of q, k^T and v
    for the batched products, the scores, scaled and masked, the probabilities and the heads' output;
    and the causal mask (T, T). Any other new tensor is saved. A view is saved only if its base is,
    since a saved view keeps its base alive. `kept` is {storage address: bytes} of what it saved."""

    def __init__(self, cfg, B, T):
        C, H = cfg.n_embd, cfg.n_head
        D = C // H
        self.core = {(B, H, T, D), (B, H, D, T), (B, H, T, T), (B * H, T, D), (B * H, D, T), (B * H, T, T), (T, T)}
        rest = {(B, T, C), (B, T, 1), (B * T, C), (B * T, 3 * C), (B, T, 3 * C), (B * T, 4 * C), (B, T, 4 * C),
                (B, T, H, D)}  # every other shape a block makes: the core is told apart by its shape
        if H == 1 or T == 1 or self.core & rest:
            raise ValueError(f"the attention core's shapes are not distinct at B={B}, T={T}, C={C}, H={H}")
        self.kept = {}

    def save(self, op, outputs):
        """True if op's new outputs are saved: they are not the core's."""
        return not any(tuple(t.shape) in self.core for t in outputs)

    def __call__(self, ctx, op, *args, **kwargs):
        outputs = [t for t in tree_leaves(ctx.op_output) if isinstance(t, torch.Tensor)]
        bases = {t.untyped_storage().data_ptr() for t in outputs}
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        if bases <= inputs:  # a view (or an in-place op): saved only if its base is
            keep = bases <= self.kept.keys()
        else:
            keep = self.save(op, outputs)
            if keep:
                self.kept.update({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in outputs})
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.MUST_RECOMPUTE


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


def saved_bytes(net, fn, policy=None):
    """(fn(), bytes of the distinct storages autograd keeps for the backward, and a selective policy saved)."""
    out, rows = saved_tensors(net, fn)
    return out, distinct_bytes(rows + list(policy.kept.items() if policy else []))


def profiled_bytes(fn):
    """(fn(), bytes allocated while fn ran and still allocated when it returned), by torch.profiler on the CPU.

    Python's cycle collector is run before the window and paused inside it: an earlier step's graph
    (a loss tensor in a reference cycle, with its saved tensors and checkpoint's stashed RNG state)
    is freed only when the collector runs, and a free inside the window would be counted against fn."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            out = fn()
    finally:
        if was_enabled:
            gc.enable()
    # Each allocation (+) and free (-) is attributed to one event (its op, or a "[memory]" event of its own).
    return out, sum(e.self_cpu_memory_usage for e in prof.events())


def rng_state_bytes():
    """Bytes of the CPU generator's state, which checkpoint keeps per call (preserve_rng_state=True)."""
    return torch.get_rng_state().untyped_storage().nbytes()


# ---------------------------------------------------------------------------
# The same count, predicted


def torch_saved_bytes(cfg, B, T, recompute="none", itemsize=4):
    """Bytes the saved-tensor hooks (and a selective policy) see, by part: {"per_layer", "layers", "outside", "total"}.

    From the SavedVariable fields of Functions.h. Per block: each LayerNorm its input (BTC), mean
    and rstd (BT each); each Linear its input (BTC for c_attn, c_proj, c_fc; 4BTC for mlp.c_proj);
    matmul's contiguous copies of q, k^T and v (BTC each: the heads' views of qkv cannot be batched
    without one) for the two bmm; the probabilities (B H T^2); masked_fill's causal mask (T^2 bools);
    GELU its input (4BTC). Full, a block keeps its input only (BTC). Selective, it keeps its input and
    the output of every operation but the core's (AttentionCorePolicy), the block's output being the next
    one's input: ln_1's output, mean and rstd, qkv (3BTC), the heads merged, c_proj's output, the residual
    sum, ln_2's three outputs, c_fc's (4BTC), GELU's (4BTC) and mlp.c_proj's. Outside the blocks: the
    token ids and the position indices (int64), ln_f as above, the head's input, log_softmax's output
    (BTV), the targets (int64) and nll_loss's total weight (one value)."""
    C, H, V, L = cfg.n_embd, cfg.n_head, cfg.vocab_size, cfg.n_layer
    btc, bt = B * T * C * itemsize, B * T * itemsize
    if recompute == "full":
        per_layer = btc
    elif recompute == "selective":
        per_layer = (btc  # the block's input
                     + 2 * (btc + 2 * bt)  # ln_1, ln_2: output, mean, rstd
                     + 3 * btc + btc  # qkv; the heads' output merged (c_proj's input)
                     + 2 * btc  # attn.c_proj's output; the residual sum (ln_2's input)
                     + 4 * btc + 4 * btc + btc)  # c_fc's output (GELU's input), GELU's output, mlp.c_proj's output
    else:
        per_layer = (2 * (btc + 2 * bt)  # ln_1, ln_2: input, mean, rstd
                     + 3 * btc  # inputs of c_attn, attn.c_proj, mlp.c_fc
                     + 3 * btc  # q, k^T, v copied for bmm
                     + B * H * T * T * itemsize + T * T  # probabilities; the causal mask, one byte each
                     + 4 * btc  # GELU's input
                     + 4 * btc)  # mlp.c_proj's input, GELU's output
    outside = B * T * 8 + T * 8 + (btc + 2 * bt) + btc + B * T * V * itemsize + B * T * 8 + itemsize
    return {"per_layer": per_layer, "layers": L * per_layer, "outside": outside, "total": L * per_layer + outside}


def pylib_minus_torch(cfg, B, T, recompute="none", itemsize=4):
    """pylib's stored bytes less PyTorch's, term by term: {term: bytes} (negative where PyTorch keeps more)."""
    from pylib.systems import memory
    C, L = cfg.n_embd, cfg.n_layer
    btc, bt = B * T * C * itemsize, B * T * itemsize
    if recompute == "none":
        terms = {
            "gelu_tanh": L * 4 * btc,  # pylib keeps tanh; PyTorch's GELU backward computes it again from the input
            "qkv": L * btc,  # pylib: qkv (3 BTC) and the scaled q (BTC); PyTorch: matmul's copies of q, k^T, v (3 BTC)
            # pylib keeps the heads' output before and after merging
            "heads_output": L * btc if memory.heads_merge_is_copy(cfg.n_head, T) else 0,
            "ln_mean": -L * 2 * bt,  # PyTorch's LayerNorm keeps mean and rstd, pylib's rstd only
            "causal_mask": -L * T * T,  # masked_fill keeps its mask (bool); pylib's attention backward needs none
        }
    elif recompute == "selective":  # both keep qkv and the merged heads and drop the rest of the core
        terms = {
            "gelu_tanh": L * 4 * btc,
            "ln_mean": -L * 2 * bt,
            "proj_outputs": -L * 2 * btc,  # the policy saves both c_proj's outputs, which no backward needs
        }
    else:
        terms = {}
    terms.update({"lnf_mean": -bt,  # the final LayerNorm's mean
                  "positions": -T * 8,  # wpe's indices, torch.arange(T) (int64); pylib slices wpe[:T]
                  "total_weight": -itemsize})  # nll_loss keeps the sum of the targets' weights, one value
    return terms


def profiler_minus_hooks(cfg, B, T, recompute="none", itemsize=4):
    """What the profiler counts less what the hooks count, term by term: {term: bytes}."""
    return {"ids_targets": -2 * B * T * 8,  # allocated before the forward: kept, but not allocated in it
            "loss": itemsize,  # the loss itself, which no backward node saves
            "wrapped_scale": cfg.n_layer * 8,  # 1/sqrt(D): a float64 wrapped number MulBackward0 keeps unhooked
            "rng_state": cfg.n_layer * rng_state_bytes() if recompute != "none" else 0}  # checkpoint's CPU RNG state


# ---------------------------------------------------------------------------
# The comparison


def relative_differences(ref, got):
    """{name: max |ref - got| / max |ref|} over the tensors of ref."""
    return {n: float(np.abs(ref[n] - got[n]).max() / np.abs(ref[n]).max()) for n in ref}


def compare(params, cfg, x, y, dtype=torch.float32, count=True, policy=AttentionCorePolicy):
    """Gradients and bytes of one step, PyTorch against pylib in each of MODES, on ids x, targets y (B, T).

    Returns {"grads": {mode: {name: relative difference to pylib}}, "unequal_to_plain": {mode: elements of
    its gradients that differ from the plain ones} for "selective" and "full", and, if count, "saved",
    "profiled", "predicted" and "pylib_stored": {mode: bytes}}. policy: the selective mode's policy class."""
    from companions import model as torch_gpt
    from pylib.systems import checkpointing
    np_dtype = np.float64 if dtype == torch.float64 else np.float32
    params = {k: v.astype(np_dtype) for k, v in params.items()}
    idx, targets = torch.from_numpy(x), torch.from_numpy(y)
    out = {"grads": {}, "saved": {}, "profiled": {}, "predicted": {}, "pylib_stored": {}}
    torch_grads = {}
    for mode in MODES:
        _, ref, held = checkpointing.step(params, cfg, x, y, recompute=mode, record=count)
        net = torch_gpt.from_pylib(params, cfg, dtype)
        sac = policy(cfg, *x.shape) if mode == "selective" else None
        step_loss, out["saved"][mode] = saved_bytes(net, lambda: loss(net, idx, targets, mode, sac), sac)
        step_loss.backward()
        torch_grads[mode] = torch_gpt.named_grads(net)
        out["grads"][mode] = relative_differences(ref, torch_grads[mode])
        if count:
            end_of_forward = max(k for k, e in enumerate(held.events) if e["phase"] == "forward")
            out["pylib_stored"][mode] = held.events[end_of_forward]["held"]
            sac = policy(cfg, *x.shape) if mode == "selective" else None
            out["profiled"][mode] = profiled_bytes(lambda: loss(net, idx, targets, mode, sac))[1]
            out["predicted"][mode] = torch_saved_bytes(cfg, *x.shape, mode, np.dtype(np_dtype).itemsize)["total"]
    out["unequal_to_plain"] = {mode: int(sum(np.count_nonzero(torch_grads[mode][n] != torch_grads["none"][n])
                                             for n in torch_grads["none"])) for mode in ("selective", "full")}
    return out
