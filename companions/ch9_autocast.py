"""Chapter 9 in PyTorch's own engine: one step under torch.autocast, and torch.amp.GradScaler.

pylib's recipes (pylib.systems.mixed_precision) emulate mixed precision by rounding: bf16_master
rounds every matrix product's inputs and the gradients to bfloat16 and computes everything else in
float32. PyTorch's autocast decides per operator instead. On the CPU (ATen's autocast_mode.cpp,
TORCH_LIBRARY_IMPL(aten, AutocastCPU, m)) the matrix products (linear, addmm, mm, bmm, matmul) run in
the lower precision and the losses (cross_entropy_loss, nll_loss, ...) in float32; every other op
runs in the dtype of its inputs, so softmax and GELU, whose inputs are a product's bfloat16 output,
run in bfloat16, and a product's OUTPUT is bfloat16 too, where pylib keeps it in float32.

    autocast_step        one step of the course model, forward under autocast, float32 master weights, AdamW
    one_step_runs        that step and pylib's fp32 and bf16_master steps from the same weights and batch
    compare_runs         relative errors of logits, loss, gradients and update between two runs
    autocast_census      each aten op's dtypes under autocast, and the bytes autograd saves for backward by dtype
    scaler_trajectory_*  torch.amp.GradScaler and pylib's DynamicLossScaler driven by one sequence of gradients
    fp16_scaled_step     one step of the fp16 AMP recipe: autocast(float16), GradScaler, clipping, AdamW
    fp16_run_*           a few dozen such steps of the course model, and pylib's fp16_dynamic recipe, on the same batches

Legend: B batch, T time, V vocab; s the loss scale.
"""

import collections

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from companions import model as torch_gpt

# ---------------------------------------------------------------------------
# One step


def autocast_step(net, x, y, lr, tcfg, dtype=torch.bfloat16):
    """One AdamW step as PyTorch's AMP recipe takes it: forward under autocast (dtype None: none), backward outside."""
    decay = [p for p in net.parameters() if p.dim() >= 2]
    no_decay = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tcfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(tcfg.beta1, tcfg.beta2), eps=tcfg.eps)
    with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        logits, loss = net(x, y)  # the weights stay float32; autocast casts them per op (and caches the casts)
    loss.backward()  # outside autocast: each op's backward runs in the dtype its forward ran in
    torch.nn.utils.clip_grad_norm_(net.parameters(), tcfg.grad_clip)
    opt.step()
    return logits, loss


def torch_run(params, cfg, tcfg, x, y, lr, dtype):
    """autocast_step from pylib's params: {"logits", "loss", "grads" (pylib names, before clipping), "update"}."""
    net = torch_gpt.from_pylib(params, cfg, torch.float32)
    grads = {}
    for name, p in net.named_parameters():  # the gradients as backward left them, before clip_grad_norm_ scales them
        n = torch_gpt.pylib_name(name)
        p.register_post_accumulate_grad_hook(lambda p, n=n: grads.__setitem__(n, p.grad.clone()))
    before = torch_gpt.named_weights(net)
    logits, loss = autocast_step(net, _ids(x), _ids(y), lr, tcfg, dtype)
    after = torch_gpt.named_weights(net)
    return {"logits": logits.detach().float().numpy(), "loss": float(loss.detach()),
            "grads": {k: v.numpy() for k, v in grads.items()}, "update": {k: after[k] - before[k] for k in before}}


def _ids(a):
    return torch.from_numpy(np.ascontiguousarray(a))  # eval_windows' targets are a strided view


def pylib_run(params, cfg, tcfg, x, y, lr, rec_name):
    """pylib's one step in recipe rec_name, as mixed_precision.one_step_comparison takes it."""
    from pylib import model, optim
    from pylib.systems import mixed_precision as mp
    params = {k: v.copy() for k, v in params.items()}
    rec = mp.recipe(rec_name)
    with mp.matmul_rounding(rec):
        logits = model.forward(params, cfg, x)[0]
    loss, grads = mp.loss_and_grads(params, cfg, x, y, rec)
    raw = {k: v.copy() for k, v in grads.items()}
    before = {k: v.copy() for k, v in params.items()}
    optim.clip_grad_norm(grads, tcfg.grad_clip)
    optim.adamw_step(params, grads, optim.adamw_init(params), lr, tcfg.beta1, tcfg.beta2, tcfg.eps,
                     tcfg.weight_decay, optim.param_groups(params))
    return {"logits": logits, "loss": float(loss), "grads": raw, "update": {k: params[k] - before[k] for k in before}}


def one_step_runs(cfg, tcfg, x, y):
    """The same weights (pylib's init for tcfg.seed) and batch, one step each: pylib fp32 and bf16_master, torch
    float32 and autocast bfloat16."""
    from pylib import train
    from pylib.schedules import lr_at
    params = train.init_train_state(cfg, tcfg)["params"]
    lr = lr_at(tcfg.schedule, 0, tcfg.lr, tcfg.warmup_steps, tcfg.steps, tcfg.min_lr, tcfg.decay_frac)
    return {"pylib_fp32": pylib_run(params, cfg, tcfg, x, y, lr, "fp32"),
            "pylib_bf16": pylib_run(params, cfg, tcfg, x, y, lr, "bf16_master"),
            "torch_fp32": torch_run(params, cfg, tcfg, x, y, lr, None),
            "torch_autocast": torch_run(params, cfg, tcfg, x, y, lr, torch.bfloat16)}


def compare_runs(a, b, cfg, rec_name="bf16_master"):
    """Run a against run b (the reference), as one_step_comparison measures, with its checks at rec_name's tolerances."""
    from pylib.systems import mixed_precision as mp
    names = list(b["grads"])
    flat = lambda run, part: np.concatenate([run[part][k].ravel() for k in names]).astype(np.float64)  # noqa: E731
    ga, gb, ua, ub = flat(a, "grads"), flat(b, "grads"), flat(a, "update"), flat(b, "update")
    flipped = np.sign(ua) != np.sign(ub)
    unresolved = np.abs(gb) <= np.abs(ga - gb)  # as one_step_comparison: a's rounding could have flipped the sign
    out = {"logits_rel": mp.rel_error(a["logits"], b["logits"]), "loss_abs": abs(a["loss"] - b["loss"]),
           "grads_rel_all": mp.rel_error(ga, gb), "update_rel": mp.rel_error(ua, ub),
           "update_sign_differs": float(np.mean(flipped)), "unresolved_fraction": float(np.mean(unresolved)),
           "flips_resolved": int(np.count_nonzero(flipped & ~unresolved))}
    out.update(mp.one_step_tolerances(cfg, mp.recipe(rec_name)))
    out.update(mp.one_step_checks(out))
    return out


# ---------------------------------------------------------------------------
# What runs in which dtype, and what autograd keeps

LAYOUT_OPS = {"view", "_unsafe_view", "t", "transpose", "expand", "split", "permute", "slice", "select",  # views
              "unsqueeze", "squeeze", "alias", "detach", "lift_fresh", "as_strided", "clone", "_to_copy", "copy_"}


class _OpRecorder(TorchDispatchMode):
    """Records every aten op below autocast (so after its casts): name, input and output dtypes; and which
    op last wrote each storage, and which storages are casts of the parameters."""

    def __init__(self, param_storages):
        super().__init__()
        self.ops, self.producer, self.weight_casts, self.params = [], {}, set(), param_storages

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        ins = [a for a in args if isinstance(a, torch.Tensor)]
        outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
        self.ops.append((name, tuple(_dt(a) for a in ins), tuple(_dt(o) for o in outs)))
        in_ptrs = {_ptr(a) for a in ins}
        for o in outs:
            if _ptr(o) in in_ptrs:
                continue  # a view: the storage keeps its producer
            self.producer[_ptr(o)] = name
            if name == "_to_copy" and ins and _ptr(ins[0]) in self.params:
                self.weight_casts.add(_ptr(o))
        return out


def _dt(t):
    return str(t.dtype).removeprefix("torch.")


def _ptr(t):
    return t.untyped_storage().data_ptr()


def autocast_census(net, x, y, dtype=torch.bfloat16):
    """The forward pass of net on (x, y) under CPU autocast (dtype None: without), recorded.

    Returns {"ops": Counter of (op, input dtypes, output dtypes)}, and "saved": one row per distinct storage
    autograd keeps for backward (saved_tensors_hooks), {"kind": parameter | weight cast | activation,
    "producer": the op that wrote it, "dtype", "shape", "bytes"}.
    """
    params = {_ptr(p) for p in net.parameters()}
    saved = {}

    def pack(t):
        saved[_ptr(t)] = (t.dtype, tuple(t.shape), t.untyped_storage().nbytes())
        return t

    rec = _OpRecorder(params)
    with rec, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            net(_ids(x), _ids(y))
    rows = []
    for ptr, (dt, shape, nbytes) in saved.items():
        kind = "parameter" if ptr in params else "weight cast" if ptr in rec.weight_casts else "activation"
        rows.append({"kind": kind, "producer": rec.producer.get(ptr, "input"), "dtype": str(dt).removeprefix("torch."),
                     "shape": list(shape), "bytes": int(nbytes)})
    return {"ops": collections.Counter(rec.ops), "saved": rows}


def compute_ops_by_dtype(ops):
    """{output dtype: sorted names of the floating-point ops (views, copies and casts left out) that wrote it}."""
    out = collections.defaultdict(set)
    for name, _, outs in ops:
        if name in LAYOUT_OPS:
            continue
        for d in outs:
            if d in ("float32", "bfloat16", "float16"):
                out[d].add(name)
    return {d: sorted(names) for d, names in out.items()}


def saved_bytes(rows, kind="activation"):
    """{dtype: bytes} of the saved storages of one kind."""
    out = collections.Counter()
    for r in rows:
        if r["kind"] == kind:
            out[r["dtype"]] += r["bytes"]
    return dict(out)


def op_dtype_under_autocast(op, input_dtype, dtype=torch.bfloat16):
    """The output dtype of op (a function of one tensor) on a (4, 8) input of input_dtype, under CPU autocast."""
    with torch.autocast("cpu", dtype=dtype):
        return _dt(op(torch.ones(4, 8, dtype=input_dtype)))


PROBES = {"layer_norm": lambda t: F.layer_norm(t, (8,)), "softmax": lambda t: F.softmax(t, dim=-1),
          "gelu": lambda t: F.gelu(t, approximate="tanh"),
          "linear": lambda t: F.linear(t, torch.ones(3, 8)),
          "cross_entropy": lambda t: F.cross_entropy(t, torch.zeros(4, dtype=torch.long))}


# ---------------------------------------------------------------------------
# Loss scaling: torch.amp.GradScaler and pylib's DynamicLossScaler on one sequence of gradients


def gradient_sequence(n_steps, n, seed, nan_steps=(), spike_steps=()):
    """n_steps float32 gradients of n elements: normal, each step's size 10^e with e uniform in [-5, -1];
    spike_steps have e = 0.5 (an overflow in fp16 at any s >= 2^15); nan_steps hold one NaN."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n_steps):
        e = 0.5 if t in spike_steps else rng.uniform(-5.0, -1.0)
        g = (rng.standard_normal(n) * 10.0 ** e).astype(np.float32)
        if t in nan_steps:
            g[t % n] = np.nan
        out.append(g)
    return out


def scaler_trajectory_torch(grads, init_scale, growth_factor, backoff_factor, growth_interval):
    """torch.amp.GradScaler("cpu") over the gradients: per step the scale used, whether the step was skipped,
    and the unscaled gradient it stepped with. The loss is sum(p * g) through a float16 cast of p, so the scaled
    gradient s * g reaches the float32 master p as float16 would (inf beyond 65504)."""
    p = torch.zeros(len(grads[0]), requires_grad=True)
    opt = torch.optim.SGD([p], lr=1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_factor=growth_factor,
                                  backoff_factor=backoff_factor, growth_interval=growth_interval)
    scales, skipped, unscaled = [], [], []
    for g in grads:
        opt.zero_grad()
        loss = (p.half().float() * torch.from_numpy(g)).sum()  # backward: s * g rounded to float16, back to float32
        scales.append(scaler.get_scale())
        scaler.scale(loss).backward()
        before = p.detach().clone()
        scaler.step(opt)  # unscales, checks for inf/NaN, steps only if there is none
        skipped.append(bool(torch.equal(p.detach(), before)))
        unscaled.append(p.grad.detach().numpy().copy())
        scaler.update()
    return {"scale": scales, "skipped": skipped, "unscaled": unscaled}


def scaler_trajectory_pylib(grads, init_scale, growth_factor, backoff_factor, growth_interval):
    """pylib's DynamicLossScaler over the same gradients, each scaled gradient rounded to float16."""
    from pylib.systems import mixed_precision as mp, precision
    scaler = mp.DynamicLossScaler(init_scale, growth_factor, backoff_factor, growth_interval)
    scales, skipped, unscaled = [], [], []
    for g in grads:
        scales.append(scaler.scale)
        with np.errstate(all="ignore"):
            scaled = {"p": precision.round_to(np.float32(scaler.scale) * g, "fp16")}
            finite = scaler.unscale_(scaled)
        skipped.append(not finite)
        unscaled.append(scaled["p"])
        scaler.update(not finite)
    return {"scale": scales, "skipped": skipped, "unscaled": unscaled}


def trajectory_differences(a, b):
    """Steps where two trajectories differ: in the scale, in skipping, or (on steps both took) in a gradient bit."""
    diff = {"scale": [t for t, (x, y) in enumerate(zip(a["scale"], b["scale"])) if x != y],
            "skipped": [t for t, (x, y) in enumerate(zip(a["skipped"], b["skipped"])) if x != y]}
    diff["gradient"] = [t for t in range(len(a["scale"])) if not (a["skipped"][t] or b["skipped"][t])
                        and not np.array_equal(a["unscaled"][t].view(np.uint32), b["unscaled"][t].view(np.uint32))]
    return diff


# ---------------------------------------------------------------------------
# fp16 on the course model: torch.autocast(float16) and GradScaler against pylib's fp16_dynamic recipe


def fp16_scaled_step(net, opt, scaler, x, y, grad_clip):
    """One step of PyTorch's fp16 AMP recipe: forward under autocast(float16), backward of the scaled loss,
    unscale, clip, step (skipped if any gradient is inf or NaN), update the scale. Returns the loss."""
    with torch.autocast("cpu", dtype=torch.float16):
        _, loss = net(x, y)  # the products in float16, the loss in float32
    scaler.scale(loss).backward()  # every gradient s times larger: the small ones lifted out of float16's underflow
    scaler.unscale_(opt)  # divided by s BEFORE clipping, so that the clip sees the true norm
    torch.nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
    scaler.step(opt)  # AdamW's step, or nothing if unscale_ found an inf or NaN
    scaler.update()  # s halved after a skipped step, doubled after growth_interval clean ones
    return loss


def adamw_as_pylib(net, tcfg):
    """torch.optim.AdamW with pylib's groups (decay on the matrices, none on vectors) and settings."""
    decay = [p for p in net.parameters() if p.dim() >= 2]
    no_decay = [p for p in net.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": tcfg.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=tcfg.lr, betas=(tcfg.beta1, tcfg.beta2), eps=tcfg.eps)


def _adam_steps(opt):
    """How many steps AdamW has taken (its per-parameter count, which a skipped step leaves alone)."""
    p = opt.param_groups[0]["params"][0]
    return int(opt.state[p]["step"]) if p in opt.state else 0


def fp16_run_torch(params, cfg, tcfg, batches, scaler_kw, amp=True, step=fp16_scaled_step,
                   scaler_cls=torch.amp.GradScaler):
    """step over the batches from pylib's params, with pylib's learning-rate schedule: per step the scale used,
    whether it was skipped, the loss; and the weights after (pylib names). amp False: the float32 step instead."""
    from pylib.schedules import lr_at
    net = torch_gpt.from_pylib(params, cfg, torch.float32)
    opt = adamw_as_pylib(net, tcfg)
    scaler = scaler_cls("cpu", **scaler_kw, enabled=amp)
    out = {"scale": [], "skipped": [], "loss": []}
    for t, (x, y) in enumerate(batches):
        for group in opt.param_groups:
            group["lr"] = lr_at(tcfg.schedule, t, tcfg.lr, tcfg.warmup_steps, tcfg.steps, tcfg.min_lr, tcfg.decay_frac)
        opt.zero_grad(set_to_none=True)
        taken = _adam_steps(opt)
        out["scale"].append(scaler.get_scale() if amp else 1.0)
        if amp:
            loss = step(net, opt, scaler, _ids(x), _ids(y), tcfg.grad_clip)
        else:
            loss = _plain_step(net, opt, _ids(x), _ids(y), tcfg.grad_clip)
        out["skipped"].append(_adam_steps(opt) == taken)
        out["loss"].append(float(loss.detach()))
    out["weights"] = torch_gpt.named_weights(net)
    return out


def _plain_step(net, opt, x, y, grad_clip):
    """The float32 step: forward, backward, clip, AdamW."""
    _, loss = net(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
    opt.step()
    return loss


def fp16_run_pylib(cfg, tcfg, train_tokens, val_tokens, n_steps, scaler_kw, rec_name="fp16_dynamic"):
    """pylib's recipe rec_name (mixed_precision.recipe_steps) for n_steps, its scaler set by scaler_kw: the initial
    weights, the batches it drew, per step the scale, whether it was skipped, the loss; and the weights after."""
    import copy
    import dataclasses
    from pylib import data
    from pylib.systems import mixed_precision as mp
    tcfg = dataclasses.replace(tcfg, eval_interval=tcfg.steps, final_eval=False)  # evaluations change nothing here
    state = mp.init_state(cfg, tcfg, rec_name)
    if state["scaler"] is not None:
        state["scaler"] = mp.DynamicLossScaler(**scaler_kw)
    params0 = {k: v.copy() for k, v in state["params"].items()}
    rng = copy.deepcopy(state["batch_rng"])  # the same stream: recipe_steps draws one batch a step from it
    batches = [data.get_batch(train_tokens, tcfg.batch_size, cfg.block_size, rng) for _ in range(n_steps)]
    records = mp.recipe_steps(state, cfg, tcfg, train_tokens, val_tokens, n_steps)
    return {"params0": params0, "batches": batches, "scale": [r.get("scale", 1.0) for r in records],
            "skipped": [bool(r.get("skipped")) for r in records], "loss": [r["loss"] for r in records],
            "weights": {k: v.copy() for k, v in state["params"].items()}}


def fp32_run_skipping(params0, cfg, tcfg, batches, skipped):
    """pylib's float32 steps over the batches, skipping the steps another run skipped: what that run would have done
    without rounding (the same weights, batches, learning rates and skipped updates)."""
    from pylib import model, optim
    from pylib.schedules import lr_at
    params = {k: v.copy() for k, v in params0.items()}
    opt, groups = optim.adamw_init(params), optim.param_groups(params)
    losses = []
    for t, (x, y) in enumerate(batches):
        loss, grads = model.loss_and_grads(params, cfg, x, y)
        losses.append(float(loss))
        if skipped[t]:
            continue
        optim.clip_grad_norm(grads, tcfg.grad_clip)
        lr = lr_at(tcfg.schedule, t, tcfg.lr, tcfg.warmup_steps, tcfg.steps, tcfg.min_lr, tcfg.decay_frac)
        optim.adamw_step(params, grads, opt, lr, tcfg.beta1, tcfg.beta2, tcfg.eps, tcfg.weight_decay, groups)
    return {"scale": [None] * len(batches), "skipped": list(skipped), "loss": losses, "weights": params}


def fp16_run_differences(a, b, params0):
    """Run a against run b: the steps where the scale or the skip differs, the loss's largest difference and
    at step 0, and the weights after: ||a - b|| / ||b - params0|| (against how far b moved them)."""
    names = list(params0)
    flat = lambda w: np.concatenate([np.asarray(w[k], np.float64).ravel() for k in names])  # noqa: E731
    wa, wb, w0 = flat(a["weights"]), flat(b["weights"]), flat(params0)
    loss = np.abs(np.array(a["loss"], np.float64) - np.array(b["loss"], np.float64))
    return {"scale": [t for t, (x, y) in enumerate(zip(a["scale"], b["scale"])) if x != y],
            "skipped": [t for t, (x, y) in enumerate(zip(a["skipped"], b["skipped"])) if x != y],
            "loss_max_abs": float(loss.max()), "loss_step0_abs": float(loss[0]),
            "weights_rel_moved": float(np.linalg.norm(wa - wb) / np.linalg.norm(wb - w0)),
            "weights_rel": float(np.linalg.norm(wa - wb) / np.linalg.norm(wb))}
