"""Step time, overlap and MFU: the backward pass against bucketed gradient all-reduces, and FLOP counts.

During the backward pass the last layer's gradients are ready first. Data-parallel engines
(PyTorch DDP: its design note, notes/ddp, "Internal Design") gather gradients into buckets in the
order they become ready and start a bucket's all-reduce as soon as all its gradients are ready, so communication runs while the
backward of earlier layers still computes. `overlap_timeline` lays this out: one compute stream,
one link that carries one all-reduce at a time (FIFO), each all-reduce costing the ring's
alpha-beta time (pylib.systems.collectives). What is left of communication after the last
backward finishes is exposed: it adds to the step time.

Model FLOPs follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", appendix A, eq. 7): per layer 24 B s h^2 + 4 B s^2 h in the forward (the
four projections, the MLP with hidden size 4h, QK^T and attention over values), 2 B s h v for the
logits, and twice the forward for the backward. MFU = model FLOPs per second / peak FLOPs per
second; HFU counts the FLOPs the hardware does, recomputation included (their eq. 8 for selective
recomputation, which charges 12 B s^2 h a layer for it).

Legend: B batch, s (T) sequence length, h (C) width, v vocab, L layers, p workers.
"""

from pylib.systems import collectives as col

# ---------------------------------------------------------------------------
# FLOPs


def layer_forward_flops(B, s, h):
    """24 B s h^2 + 4 B s^2 h: one transformer layer's matmuls in the forward (MLP of width 4h)."""
    return 24 * B * s * h * h + 4 * B * s * s * h


def model_flops_per_step(cfg, B, T):
    """Forward + backward matmul FLOPs of one step: 3 x (L layers + the logits), Korthikanti et al. eq. 7."""
    forward = cfg.n_layer * layer_forward_flops(B, T, cfg.n_embd) + 2 * B * T * cfg.n_embd * cfg.vocab_size
    return 3 * forward


def hardware_flops_per_step(cfg, B, T, recompute="none", selective_rule="eq8"):
    """FLOPs counted as done: the model's, plus what recomputation adds.

    "selective" with selective_rule "eq8" follows Korthikanti et al. eq. 8,
    72 B s L h^2 (1 + s/(3h) + V/(12 h L)), whose s/(3h) doubles eq. 7's s/(6h): it adds 12 B s^2 h
    a layer (their Table 5's HFU follows eq. 8); selective_rule "forward" adds only what a second
    forward of QK^T and attention over values performs, 4 B s^2 h a layer.
    "full" recomputes every layer's forward.
    """
    if selective_rule not in ("eq8", "forward"):
        raise ValueError(f"selective_rule must be 'eq8' or 'forward', not {selective_rule!r}")
    extra = {"none": 0,
             "selective": cfg.n_layer * (12 if selective_rule == "eq8" else 4) * B * T * T * cfg.n_embd,
             "full": cfg.n_layer * layer_forward_flops(B, T, cfg.n_embd)}[recompute]
    return model_flops_per_step(cfg, B, T) + extra


def mfu(model_flops, step_seconds, peak_flops_per_second):
    """Model FLOPs utilisation: (model FLOPs / step time) / peak FLOP/s."""
    return model_flops / step_seconds / peak_flops_per_second


# ---------------------------------------------------------------------------
# The timeline


def buckets_in_ready_order(layer_bytes, bucket_bytes):
    """[(bytes, index of the layer whose gradient completes the bucket)]: backward order, last layer first.

    A bucket is closed as soon as it holds at least bucket_bytes; the last one takes what is left.
    """
    out, size = [], 0
    n = len(layer_bytes)
    for k, layer in enumerate(reversed(range(n))):
        size += layer_bytes[layer]
        if size >= bucket_bytes or k == n - 1:
            out.append((size, layer))
            size = 0
    return out


def overlap_timeline(layer_bytes, layer_backward_seconds, bucket_bytes, p, alpha, beta, forward_seconds=0.0):
    """The backward of each layer (last first) and each bucket's ring all-reduce on one link.

    Returns {compute: [(layer, start, end)], comm: [(bucket, bytes, start, end)], backward_end,
    comm_end, exposed (seconds of communication after the backward), step (forward + backward +
    exposed), comm_total (the all-reduces' summed time), no_overlap (forward + backward + comm_total)}.
    """
    p = col.check_workers(p, 1, 1 << 20)
    if bucket_bytes <= 0:
        raise ValueError("the bucket size must be positive")
    t = forward_seconds
    ready, compute = {}, []
    for layer in reversed(range(len(layer_bytes))):
        start, t = t, t + layer_backward_seconds[layer]
        compute.append((layer, start, t))
        ready[layer] = t
    backward_end = t
    link_free, comm, total = forward_seconds, [], 0.0
    for k, (size, last_layer) in enumerate(buckets_in_ready_order(layer_bytes, bucket_bytes)):
        duration = col.ring_all_reduce_time(size, p, alpha, beta)
        start = max(link_free, ready[last_layer])
        link_free = start + duration
        comm.append((k, size, start, link_free))
        total += duration
    comm_end = max(link_free, backward_end)
    exposed = comm_end - backward_end
    return {"compute": compute, "comm": comm, "backward_end": backward_end, "comm_end": comm_end,
            "exposed": exposed, "step": comm_end, "comm_total": total,
            "no_overlap": backward_end + total}


def layer_costs(cfg, B, T, flops_per_second, itemsize=4):
    """Per block: (gradient bytes, backward seconds at flops_per_second); the embeddings and head join the first and last.

    The backward is 2x the forward's FLOPs (Korthikanti et al. appendix A). Gradient bytes are the
    block's parameters times itemsize; the tied embedding and position table count with block 0,
    whose gradient is the last to be ready, and the logits' backward with the last block.
    """
    from pylib import model
    shapes = model.param_shapes(cfg)
    L = cfg.n_layer
    per_block = [0] * L
    for name, shape in shapes.items():
        size = 1
        for d in shape:
            size *= d
        if name.startswith("h."):
            per_block[int(name.split(".")[1])] += size
        elif name == "ln_f.weight" or name == "ln_f.bias":
            per_block[L - 1] += size
        else:
            per_block[0] += size
    seconds = [2 * layer_forward_flops(B, T, cfg.n_embd) / flops_per_second for _ in range(L)]
    seconds[L - 1] += 2 * (2 * B * T * cfg.n_embd * cfg.vocab_size) / flops_per_second
    return [n * itemsize for n in per_block], seconds


# ---------------------------------------------------------------------------
# Measuring MFU on this machine (CPython or the page)


def measure_matmul_peak(sizes=(256, 512), repeats=5):
    """(best float32 matmul FLOP/s, its size): the measured peak that MFU is taken against here."""
    import time

    import numpy as np
    best, best_n = 0.0, 0
    rng = np.random.default_rng(0)
    for n in sizes:
        a = rng.standard_normal((n, n)).astype(np.float32)  # (n, n)
        b = rng.standard_normal((n, n)).astype(np.float32)
        a @ b  # warm-up
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            rate = 2 * n ** 3 / max(time.perf_counter() - t0, 1e-12)
            if rate > best:
                best, best_n = rate, n
    return best, best_n


def measure_step_seconds(cfg, tokens, batch_size, steps, warmup=3, seed=0):
    """Median seconds of a training step (batch, forward, backward, AdamW) of cfg on tokens."""
    import time

    import numpy as np

    from pylib import data, model, optim
    params = model.init_params(cfg, seed)
    opt = optim.adamw_init(params)
    rng = np.random.default_rng(seed)
    times = []
    for _ in range(steps + warmup):
        t0 = time.perf_counter()
        x, y = data.get_batch(tokens, batch_size, cfg.block_size, rng)
        _, grads = model.loss_and_grads(params, cfg, x, y)
        optim.adamw_step(params, grads, opt, 1e-3, weight_decay=0.1)
        times.append(time.perf_counter() - t0)
    return float(np.median(times[warmup:]))
