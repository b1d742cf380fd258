"""Pipeline parallelism: a schedule simulator, and the course model run stage by stage in its order.

A model's layers are cut into p stages, one per device; a batch is cut into m microbatches that
flow through the stages. Four schedules:

- "gpipe" (Huang et al. 2019): every microbatch's forward, then every backward; a device holds
  the activations of all m microbatches at once.
- "1f1b" (PipeDream-Flush, Narayanan et al. 2021, section 2.2.1): after a warm-up of p - s - 1
  forwards, device s alternates one forward with one backward, so it holds at most p - s.
- "interleaved" (Narayanan et al. 2021, section 2.2.2): each device holds v chunks (virtual
  stages) of layers, device s holding virtual stages s, s + p, s + 2p, ...; the order is
  Megatron-LM's `forward_backward_pipelining_with_interleaving` (groups of p microbatches per
  chunk); it needs m to be a multiple of p.
- "zb-h1" (Qi et al. 2024, Zero Bubble Pipeline Parallelism, section 2.1, "ZB-H1"): the backward
  is split into B, the gradient of the stage's input (the previous stage waits for it), and W,
  the gradient of its weights (nobody waits for it). The order is 1F1B's with B for the backward;
  device s holds back its first s W passes and runs them after its last B, so they fill the
  drain. The order is PyTorch's `_get_1f1b_rank_ops` with `enable_zero_bubble=True` and one
  chunk (torch/distributed/pipelining/schedules.py, ScheduleInterleavedZeroBubble).

The simulator is a list schedule: each device runs its own fixed order of operations, and each
operation starts when its device is free and its input has arrived (communication is free here).
Bubble, two ways, both returned (Narayanan et al. 2021, section 2.2, give the first):

    bubble_over_ideal = (makespan - ideal) / ideal  = (p - 1) / (v m)      "of the work"
    bubble_fraction   = idle / (p * makespan)       = (p - 1) / (v m + p - 1)  "of the total time"

with ideal = m (t_f + t_b), the time one device computes. Those formulas are for the first three.
For zb-h1, with t_b = t_B + t_W, the bubble is (p - 1)(t_f + t_B - t_W) against 1F1B's
(p - 1)(t_f + t_B + t_W) when m >= p and t_W <= t_B (the tests check it); at t_f = t_B = t_W it is
a third of 1F1B's, the authors' "(p-1)/3m" (sail-sg/zero-bubble-pipeline-parallelism, README.md).

Legend: p stages (devices), m microbatches, v chunks per device, s stage, c chunk, j virtual stage
(j = c p + s), B batch, T time, C n_embd.
"""

import numpy as np

from pylib import layers, loss as xent, model

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
SPLIT_BACKWARD = ("zb-h1",)  # schedules whose backward is B (input gradient) then W (weight gradient)

# ---------------------------------------------------------------------------
# Each device's order of operations: (kind, microbatch, chunk)


def device_order(schedule, stage, stages, microbatches, chunks=1):
    """The operations device `stage` runs, in order: a list of ("F", "B" or "W", microbatch, chunk)."""
    p, m, v, s = stages, microbatches, chunks, stage
    if schedule == "gpipe":
        fwd = [("F", mb, c) for c in range(v) for mb in range(m)]
        return fwd + [("B", mb, c) for c in reversed(range(v)) for mb in range(m)]
    if schedule == "1f1b":
        if v != 1:
            raise ValueError("1f1b runs one chunk per device; use 'interleaved' for chunks > 1")
        warm = min(p - s - 1, m)
        order = [("F", mb, 0) for mb in range(warm)]
        for i in range(m - warm):
            order += [("F", warm + i, 0), ("B", i, 0)]
        return order + [("B", mb, 0) for mb in range(m - warm, m)]
    if schedule == "interleaved":
        total = m * v

        def unit(k, forward):  # Megatron's get_model_chunk_id and the microbatch of virtual step k
            c = (k // p) % v
            return (k // (p * v)) * p + k % p, (c if forward else v - 1 - c)

        warm = total if m == p else min((p - s - 1) * 2 + (v - 1) * p, total)
        order = [("F", *unit(k, True)) for k in range(warm)]
        for i in range(total - warm):
            order += [("F", *unit(warm + i, True)), ("B", *unit(i, False))]
        return order + [("B", *unit(k, False)) for k in range(total - warm, total)]
    if schedule == "zb-h1":
        if v != 1:
            raise ValueError("zb-h1 runs one chunk per device")
        warm = min(p - s - 1, m)
        order, waiting = [("F", mb, 0) for mb in range(warm)], []
        for i in range(m):  # the i-th B; 1F1B's F before it while forwards remain
            if warm + i < m:
                order.append(("F", warm + i, 0))
            order.append(("B", i, 0))
            waiting.append(("W", i, 0))
            if i >= s:  # device s keeps s W passes back for the drain
                order.append(waiting.pop(0))
        return order + waiting
    raise ValueError(f"unknown schedule {schedule!r}; one of {SCHEDULES}")


def check_pipeline_args(schedule, stages, microbatches, chunks):
    """Raise ValueError with a reader-facing sentence if the combination cannot be scheduled."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; one of {', '.join(SCHEDULES)}")
    for name, value in (("stages", stages), ("microbatches", microbatches), ("chunks", chunks)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")
    if schedule != "interleaved" and chunks != 1:
        raise ValueError(f"{schedule} runs one chunk per device; virtual chunks need the interleaved schedule")
    if schedule == "interleaved" and microbatches % stages:
        raise ValueError(f"the interleaved schedule needs the microbatches ({microbatches}) to be a multiple "
                         f"of the stages ({stages}), as Megatron-LM requires")


# ---------------------------------------------------------------------------
# The simulator


def backward_split(t_backward, t_b_input=None, t_b_weight=None):
    """(t_B, t_W): the backward cut into its input-gradient and weight-gradient parts; half each
    unless given. Given both, they must add up to t_backward."""
    if t_b_input is None and t_b_weight is None:
        t_b_input = t_b_weight = t_backward / 2
    elif t_b_weight is None:
        t_b_weight = t_backward - t_b_input
    elif t_b_input is None:
        t_b_input = t_backward - t_b_weight
    elif abs(t_b_input + t_b_weight - t_backward) > 2 ** -50 * t_backward:  # a few roundings of float64
        raise ValueError(f"t_b_input + t_b_weight ({t_b_input:g} + {t_b_weight:g}) must equal t_backward ({t_backward:g})")
    if not (t_b_input > 0 and t_b_weight > 0):
        raise ValueError("t_b_input and t_b_weight must both be positive and add up to t_backward")
    return t_b_input, t_b_weight


def simulate_pipeline(schedule, stages, microbatches, chunks=1, t_forward=1.0, t_backward=2.0,
                      t_b_input=None, t_b_weight=None):
    """Run each device's order against the dependencies -> dict (events, makespan, bubble, memory).

    t_forward, t_backward: one microbatch through one whole stage (a chunk takes 1/v of it);
    zb-h1 runs the backward as B (t_b_input) and W (t_b_weight), half each unless given.
    events: (stage, kind, microbatch, chunk, start, end), sorted by start then stage.
    peak_in_flight[s]: most (microbatch, chunk) activations device s holds at once (forward done,
    backward not yet; for zb-h1, W not yet, since W reads the stage's saved inputs);
    peak_activations[s] is that in units of one microbatch's whole-stage activations (a chunk
    holds 1/v of the stage's layers).
    """
    check_pipeline_args(schedule, stages, microbatches, chunks)
    if not (t_forward > 0 and t_backward > 0 and np.isfinite(t_forward) and np.isfinite(t_backward)):
        raise ValueError("t_forward and t_backward must be finite and positive")
    p, m, v = stages, microbatches, chunks
    split = schedule in SPLIT_BACKWARD
    t_in, t_w = backward_split(t_backward, t_b_input, t_b_weight) if split else (t_backward, 0.0)
    seconds = {"F": t_forward / v, "B": t_in / v, "W": t_w / v}  # one chunk
    last = p * v - 1  # the last virtual stage
    orders = [device_order(schedule, s, p, m, v) for s in range(p)]
    done = {}  # (kind, virtual stage, microbatch) -> end time
    free = [0.0] * p
    nxt = [0] * p
    events = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while nxt[s] < len(orders[s]):
                kind, mb, c = orders[s][nxt[s]]
                j = c * p + s
                if kind == "F":
                    dep = ("F", j - 1, mb) if j > 0 else None
                elif kind == "B":  # a full backward, or zb-h1's B: waits for the next stage's B only
                    dep = ("B", j + 1, mb) if j < last else ("F", j, mb)
                else:  # W: its own B (which computed the output's gradient it needs)
                    dep = ("B", j, mb)
                if dep is not None and dep not in done:
                    break  # waits for another device
                start = max(free[s], done[dep] if dep else 0.0)
                end = start + seconds[kind]
                done[(kind, j, mb)] = end
                free[s] = end
                events.append((s, kind, mb, c, start, end))
                nxt[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # every device waits on another: the order itself is wrong
            raise RuntimeError(f"{schedule}: the device orders deadlock")
    events.sort(key=lambda e: (e[4], e[0]))
    makespan = max(e[5] for e in events)
    busy = m * (t_forward + t_backward)  # per device: the ideal compute time
    frees = "W" if split else "B"  # the last pass that reads a microbatch's saved activations
    peak = []
    for s in range(p):
        held, most = 0, 0
        for e in sorted((e for e in events if e[0] == s), key=lambda e: e[4]):
            held += 1 if e[1] == "F" else -1 if e[1] == frees else 0
            most = max(most, held)
        peak.append(most)
    return {
        "schedule": schedule, "stages": p, "microbatches": m, "chunks": v,
        "t_forward": t_forward, "t_backward": t_backward,
        "t_b_input": t_in if split else None, "t_b_weight": t_w if split else None,
        "events": events,
        "makespan": makespan,
        "ideal": busy,
        "bubble_fraction": 1.0 - busy * p / (p * makespan),  # of the total device time
        "bubble_over_ideal": (makespan - busy) / busy,  # of the work: the paper's (p-1)/(vm)
        "peak_in_flight": peak,
        "peak_activations": [n / v for n in peak],
    }


def bubble_formula(stages, microbatches, chunks=1):
    """Narayanan et al. 2021's bubble, (p-1)/(v m) of the ideal compute, and the same bubble as a
    share of the total time, (p-1)/(v m + p - 1)."""
    p, m, v = stages, microbatches, chunks
    return {"over_ideal": (p - 1) / (v * m), "of_total": (p - 1) / (v * m + p - 1)}


def zb_h1_bubble(stages, microbatches, t_forward=1.0, t_b_input=1.0, t_b_weight=1.0):
    """ZB-H1's bubble, (p-1)(t_f + t_B - t_W) of time, over the ideal m (t_f + t_B + t_W) and as a
    share of the total time; None where this order does not reach it (m < p, or t_W > t_B)."""
    p, m = stages, microbatches
    if m < p or t_b_weight > t_b_input:
        return None
    bubble, ideal = (p - 1) * (t_forward + t_b_input - t_b_weight), m * (t_forward + t_b_input + t_b_weight)
    return {"over_ideal": bubble / ideal, "of_total": bubble / (ideal + bubble)}


# ---------------------------------------------------------------------------
# The course model, cut into stages


def stage_layers(n_layer, stages):
    """Blocks per stage, as even as possible: [range of block indices] for each stage."""
    if not 1 <= stages <= n_layer:
        raise ValueError(f"stages must be between 1 and n_layer ({n_layer}); got {stages}")
    cuts = [round(i * n_layer / stages) for i in range(stages + 1)]
    return [range(cuts[i], cuts[i + 1]) for i in range(stages)]


def stage_forward(params, cfg, s, blocks, stages, inp, y=None, denom=None):
    """Stage s: token ids (first stage) or the residual stream (B, T, C) in -> (out, cache).

    The first stage adds the embeddings; the last applies the final norm, the tied head and the
    loss (summed over counted targets and divided by the global denom), and returns the loss."""
    p = params
    h, extra = inp, {}
    if s == 0:
        T = inp.shape[1]
        tok, extra["tok"] = layers.embedding_forward(inp, p["wte"])  # (B, T, C)
        h = tok + p["wpe"][:T]
    caches = []
    for l in blocks:
        h, c = model.block_forward(cfg, p, f"h.{l}.", h, None)
        caches.append((l, c))
    if s == stages - 1:
        f, extra["lnf"] = model.norm_forward(cfg, p, "ln_f", h)
        logits, extra["head"] = layers.linear_forward(f, p["wte"], None)  # (B, T, V)
        logits = model.mup_output(cfg, logits)
        h, extra["loss"] = xent.cross_entropy_forward(logits, y, None, denom)
    return h, (caches, extra, inp.shape)


def stage_backward(cfg, s, stages, dout, cache, grads):
    """Backward of stage s: adds its parameters' grads into grads; returns d(input) (None for stage 0)."""
    caches, extra, in_shape = cache
    g = {}
    dh = dout
    if s == stages - 1:
        dlogits = model.mup_output(cfg, xent.cross_entropy_backward(extra["loss"]))
        df, g["wte"], _ = layers.linear_backward(dlogits, extra["head"])
        dh = model.norm_backward(cfg, g, "ln_f", df, extra["lnf"])
    for l, c in reversed(caches):
        dh = model.block_backward(cfg, g, f"h.{l}.", dh, c)
    if s == 0:
        T = in_shape[1]
        dwpe = np.zeros_like(grads["wpe"])
        dwpe[:T] = dh.reshape(-1, T, dh.shape[-1]).sum(axis=0)
        g["wpe"] = dwpe
        dwte = layers.embedding_backward(dh, extra["tok"])
        g["wte"] = g["wte"] + dwte if "wte" in g else dwte  # one stage: both uses of the tied matrix
        dh = None
    for name, value in g.items():
        grads[name] += value  # over microbatches; wte from the first and last stage (the tied copy)
    return dh


def pipeline_loss_and_grads(params, cfg, x, y, stages, microbatches, schedule="1f1b", chunks=1):
    """The course model, its blocks cut into stages, run in the schedule's order -> (loss, grads, order).

    x, y (B, T) are cut into microbatches along the batch; the loss is the mean over all B*T
    targets (every microbatch divides by the global count), so grads equal model.loss_and_grads on
    the whole batch. order: the (stage, kind, microbatch, chunk) sequence that was executed.
    """
    B = x.shape[0]
    if schedule in SPLIT_BACKWARD:  # stage_backward computes both gradients at once
        raise ValueError(f"{schedule} needs the backward split into B and W; the course model's stages run it whole")
    if microbatches < 1 or B % microbatches:
        raise ValueError(f"the batch ({B}) must split evenly into {microbatches} microbatches")
    v = chunks
    virtual = stage_layers(cfg.n_layer, stages * v)  # virtual stage j = c * p + s
    sim = simulate_pipeline(schedule, stages, microbatches, chunks)
    xs, ys = np.split(x, microbatches), np.split(y, microbatches)
    denom = xent.count_targets(y)
    grads = {name: np.zeros_like(w) for name, w in params.items()}
    acts, caches, dins, loss, order = {}, {}, {}, 0.0, []
    for s, kind, mb, c, _start, _end in sim["events"]:  # in time order; ties never depend on each other
        j = c * stages + s
        if kind == "F":
            inp = xs[mb] if j == 0 else acts.pop((j - 1, mb))  # "sent" by the previous stage
            out, caches[(j, mb)] = stage_forward(params, cfg, j, virtual[j], stages * v, inp, ys[mb], denom)
            if j == stages * v - 1:
                loss += out
            else:
                acts[(j, mb)] = out
        else:
            dout = None if j == stages * v - 1 else dins.pop((j + 1, mb))
            din = stage_backward(cfg, j, stages * v, dout, caches.pop((j, mb)), grads)
            if j > 0:
                dins[(j, mb)] = din
        order.append((s, kind, mb, c))
    assert not caches and not acts and not dins  # every activation was consumed
    return loss, grads, order
