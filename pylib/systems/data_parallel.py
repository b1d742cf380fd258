"""Data parallelism and ZeRO on the course model: simulated workers that run the real backward.

Every worker holds the whole model and its own share of the batch. Each runs pylib.model's
forward and backward on its share, the gradients (of the SUMMED loss) are added with the ring
all-reduce of pylib.systems.collectives, and the sum is divided by the GLOBAL count of valid
tokens, so the step is the one-worker step on the whole batch, whatever the split (chapter 3's
token-weighted mean, across workers instead of microbatches). `mean_of_worker_means` is the
common mistake beside it: each worker divides by its own count and the results are averaged.

ZeRO (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models") shards across the W data-parallel workers, stage by stage:
  stage 1 (P_os):     the AdamW moments m and v; each worker updates only its shard of the
                      weights, and the updated shards are all-gathered;
  stage 2 (P_os+g):   also the gradients: a reduce-scatter leaves each worker only the summed
                      gradient of its own shard;
  stage 3 (P_os+g+p): also the weights: each worker keeps one shard and all-gathers the whole
                      model before the forward, frees it, and all-gathers it again before the
                      backward (PyTorch FSDP's FULL_SHARD, torch/distributed/fsdp/api.py).
Stage 0 is plain data parallelism (every worker all-reduces and runs AdamW on everything).
The shards are the ring's chunks, and AdamW is pylib.optim.adamw_step run on a shard: its
arithmetic is elementwise, so every stage gives the same bits as stage 0.

Legend: W workers, B batch, T time, N parameters (one flat vector, pylib.model.pack_params order).
"""

import numpy as np

from pylib import loss as xent
from pylib import guards, model, optim
from pylib.systems import collectives as col

# ---------------------------------------------------------------------------
# Splitting the batch


def split_batch(x, y, mask, n_workers):
    """[(x_i, y_i, mask_i)]: the batch's rows dealt out in W contiguous blocks (np.array_split's sizes)."""
    B = x.shape[0]
    W = col.check_workers(n_workers, 1, max(1, B))
    bounds = col.chunk_bounds(B, W)
    return [(x[a:b], y[a:b], None if mask is None else mask[a:b]) for a, b in bounds]


def flatten(grads):
    """The grads dict as one flat vector, in the params' order."""
    return np.concatenate([g.ravel() for g in grads.values()])


def unflatten(flat, like):
    """A flat vector back into a dict shaped like `like` (views into flat)."""
    out, offset = {}, 0
    for name, v in like.items():
        out[name] = flat[offset:offset + v.size].reshape(v.shape)
        offset += v.size
    return out


# ---------------------------------------------------------------------------
# Data parallelism


def worker_sums(params, cfg, x, y, n_workers, mask=None):
    """Each worker's (summed loss, counted tokens, flat grad of the summed loss) on its share."""
    out = []
    for xi, yi, mi in split_batch(x, y, mask, n_workers):
        loss_sum, count, grads = model.loss_sum_and_grads(params, cfg, xi, yi, mi)
        out.append((loss_sum, count, flatten(grads)))
    return out


def data_parallel_loss_and_grads(params, cfg, x, y, n_workers, mask=None, info=None):
    """(mean loss, grads) of the whole batch, computed by W workers and a ring all-reduce.

    Divides the ring's sum by the global count of valid tokens, so it equals
    model.loss_and_grads(params, cfg, x, y, mask) up to the order of additions.
    info, optional dict: filled with per-worker counts and elements sent.
    """
    parts = worker_sums(params, cfg, x, y, n_workers, mask)
    sums, sent = col.ring_all_reduce([g for _, _, g in parts])  # the gradient, in the params' dtype
    scalars, sent_scalars = col.ring_all_reduce([np.array([l, c], dtype=np.float64) for l, c, _ in parts])
    loss_sum, count = scalars[0]
    if count <= 0:
        raise ValueError("no valid tokens in the whole batch: the mean is undefined")
    grads = unflatten(sums[0] / sums[0].dtype.type(count), params)
    if info is not None:
        info.update(counts=[c for _, c, _ in parts], sent=sent, sent_scalars=sent_scalars,
                    itemsize=sums[0].itemsize)
    return float(loss_sum) / count, grads


def mean_of_worker_means(params, cfg, x, y, n_workers, mask=None):
    """The mistake: each worker's own mean loss and grads, all-reduced and divided by W."""
    parts = []
    for xi, yi, mi in split_batch(x, y, mask, n_workers):
        if xent.count_targets(yi, mi) == 0:
            raise ValueError("a worker has no valid tokens: its own mean is undefined")
        loss, grads = model.loss_and_grads(params, cfg, xi, yi, mi)
        parts.append(np.concatenate([flatten(grads), [loss]]).astype(np.float64))
    sums, _ = col.ring_all_reduce(parts)
    W = len(parts)
    return float(sums[0][-1]) / W, unflatten((sums[0][:-1] / W).astype(next(iter(params.values())).dtype), params)


# ---------------------------------------------------------------------------
# ZeRO 0-3, simulated


def _adamw_on_shard(p_shard, g_shard, state, decay_mask, lr, **hyper):
    """pylib.optim.adamw_step on one flat shard; the decay mask is the shard's slice of the full one."""
    shard = {"shard": p_shard}
    state["decay_key"], state["decay_mask"] = ("shard",), decay_mask
    optim.adamw_step(shard, {"shard": g_shard}, state, lr, groups={"decay": ["shard"], "no_decay": []}, **hyper)


def zero_init(params, n_workers, stage):
    """The W workers' state for a ZeRO stage (0 = plain DP): what each worker keeps between steps."""
    W = col.check_workers(n_workers, 1, 64)
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage!r}")
    flat = np.concatenate([v.ravel() for v in params.values()])  # (N,)
    N, dtype = flat.size, flat.dtype
    bounds = col.chunk_bounds(N, W)
    mask = optim.decay_mask(params, optim.param_groups(params), {"m": flat})  # (N,) 1 on decayed tensors
    workers = []
    for i, (a, b) in enumerate(bounds):
        own = slice(a, b) if stage >= 1 else slice(0, N)
        w = {"opt": {"t": 0, "m": np.zeros(own.stop - own.start, dtype), "v": np.zeros(own.stop - own.start, dtype)},
             "decay_mask": mask[own].copy()}
        w["params"] = flat[a:b].copy() if stage == 3 else flat.copy()  # stage 3 keeps one shard only
        workers.append(w)
    return {"stage": stage, "W": W, "N": N, "bounds": bounds, "like": params, "workers": workers,
            "sent": [0] * W, "steps": 0}


def _gather_params(state):
    """Stage 3: all-gather the weight shards into a full flat vector per worker (elements sent counted)."""
    full, sent = col.all_gather([w["params"] for w in state["workers"]])
    state["sent"] = [s + t for s, t in zip(state["sent"], sent)]
    return full


def zero_step(state, cfg, x, y, lr, mask=None, **hyper):
    """One training step of every worker under the state's ZeRO stage; returns the mean loss.

    hyper: AdamW's beta1, beta2, eps, weight_decay (pylib.optim.adamw_step).
    """
    stage, W, bounds, like = state["stage"], state["W"], state["bounds"], state["like"]
    full = _gather_params(state) if stage == 3 else [w["params"] for w in state["workers"]]
    shares = split_batch(x, y, mask, W)
    caches, flat_grads, scalars = [], [], []
    for i, (xi, yi, mi) in enumerate(shares):
        p_i = unflatten(full[i], like)
        logits, cache = model.forward(p_i, cfg, xi)
        loss_sum, c_loss = xent.cross_entropy_forward(logits, yi, mi, denom=1.0)
        caches.append((cache, c_loss))
        scalars.append(np.array([loss_sum, xent.count_targets(yi, mi)], dtype=np.float64))
    if stage == 3:  # FSDP frees the gathered weights after the forward and gathers them again for the backward
        for f in full:
            f[...] = 0.0  # the backward's cached weights are views of these buffers: it sees only what is re-gathered
        again = _gather_params(state)
        for f, g in zip(full, again):
            f[...] = g
    for cache, c_loss in caches:
        flat_grads.append(flatten(model.backward(xent.cross_entropy_backward(c_loss), cache)))
    totals, sent_s = col.ring_all_reduce(scalars)  # loss and count: 2 numbers, not counted as traffic
    loss_sum, count = totals[0]
    if count <= 0:
        raise ValueError("no valid tokens in the whole batch")
    if stage == 0:
        summed, sent = col.ring_all_reduce(flat_grads)
    else:
        summed, sent = col.reduce_scatter(flat_grads)  # worker i gets the sum of shard i only
    state["sent"] = [s + t for s, t in zip(state["sent"], sent)]
    for i, w in enumerate(state["workers"]):
        g = summed[i] / summed[i].dtype.type(count)
        if stage == 0:
            _adamw_on_shard(w["params"], g, w["opt"], w["decay_mask"], lr, **hyper)
        elif stage in (1, 2):
            a, b = bounds[i]
            _adamw_on_shard(w["params"][a:b], g, w["opt"], w["decay_mask"], lr, **hyper)
        else:
            _adamw_on_shard(w["params"], g, w["opt"], w["decay_mask"], lr, **hyper)
    if stage in (1, 2):  # everyone needs every updated weight for the next forward
        gathered, sent = col.all_gather([w["params"][a:b] for w, (a, b) in zip(state["workers"], bounds)])
        for w, g in zip(state["workers"], gathered):
            w["params"][...] = g
        state["sent"] = [s + t for s, t in zip(state["sent"], sent)]
    state["steps"] += 1
    return float(loss_sum) / count


def zero_params(state, worker=0):
    """The full parameters as a dict (stage 3: gathered without counting the traffic)."""
    if state["stage"] == 3:
        flat = np.concatenate([w["params"] for w in state["workers"]])
    else:
        flat = state["workers"][worker]["params"]
    return model.pack_params(unflatten(flat, state["like"]))


def held_elements(state, worker=0):
    """Elements a worker keeps between steps: {params, grads, optimizer} (gradients: what the step leaves it).

    Stage 0 and 1 keep a full gradient buffer (the all-reduce / the backward's output); stage 2
    and 3 keep only their shard of the summed gradient after the reduce-scatter.
    """
    stage, N = state["stage"], state["N"]
    a, b = state["bounds"][worker]
    w = state["workers"][worker]
    return {"params": w["params"].size, "grads": N if stage <= 1 else b - a,
            "optimizer": w["opt"]["m"].size + w["opt"]["v"].size}


def zero_traffic_per_step(N, W, stage):
    """Elements each worker sends per step under a ZeRO stage, from the ring's closed forms (W dividing N).

    Stage 0: all-reduce, 2(W-1)/W N. Stages 1 and 2: reduce-scatter of the gradient plus
    all-gather of the updated weights, the same 2(W-1)/W N. Stage 3: two all-gathers of the
    weights (forward and backward) and a reduce-scatter, 3(W-1)/W N: 1.5 times plain DP.
    """
    per = (W - 1) / W * N
    return {0: 2 * per, 1: 2 * per, 2: 2 * per, 3: 3 * per}[stage]


# ---------------------------------------------------------------------------
# Training with W workers: pylib.train's loop, its step made data-parallel


def data_parallel_train_state(model_cfg, train_cfg, n_workers):
    """pylib.train's state whose steps take their gradient from W simulated workers and the ring.

    The loop draws the batch as usual; a batch hook keeps it and a grad hook replaces the loop's
    gradient, in place, with data_parallel_loss_and_grads on that batch (so the loop's own
    backward is computed too and thrown away: this costs about twice a plain step). Each record
    gets allreduce_bytes, what one worker sent in the step's ring all-reduce.
    """
    from pylib import train
    W = col.check_workers(n_workers, 1, train_cfg.batch_size)
    if train_cfg.grad_accum != 1 or train_cfg.z_loss:
        raise ValueError("the data-parallel step supports grad_accum = 1 and no z-loss")
    state = train.init_train_state(model_cfg, train_cfg)
    held = {}

    def keep_batch(step, x, y):
        held["x"], held["y"] = x, y
        return x, y

    def replace_grads(record, grads):
        info = {}
        _, dp_grads = data_parallel_loss_and_grads(state["params"], model_cfg, held["x"], held["y"], W, info=info)
        for name in grads:
            grads[name][...] = dp_grads[name]
        record["allreduce_bytes"] = max(info["sent"]) * info["itemsize"]

    guards.hook_batches(state, keep_batch)
    guards.hook_grads(state, replace_grads)
    return state
