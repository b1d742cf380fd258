"""Four simulated workers train the course model over a slow link: dense data parallelism and four ways to send less.

Every method runs W workers in one process. Each worker draws its own batch of B / W windows
(its own rng), so one synced step uses the tokens of one default step; the methods differ only
in what crosses the link and what the workers do with it:

  dense   each worker's gradient is averaged by a ring all-reduce every step, then one AdamW
          step (the baseline: data parallelism as chapter 11 built it);
  topk    each worker adds its residual, sends its top-k entries (error feedback) by
          all-gather, and AdamW steps on the mean of what arrived (pylib.systems.compress);
  quant   the same with each tensor quantised to `quant_bits` bits at its own amax;
  demo    DeMo (Peng, Quesnelle & Kingma 2024): each worker keeps its own momentum
          delta = decay * delta + lr * grad, takes the DCT of each chunk of each tensor, sends
          the top coefficients of every chunk and removes what it sent from delta (the rest is
          kept for later); the gathered coefficients are averaged position by position,
          decoded, and the sign of the result is the step (sign-SGD). This follows the
          reference optimizer, github.com/bloc97/DeMo, file demo.py (class DeMo, step(),
          TransformDCT, CompressDCT, _get_smaller_split), with its defaults
          compression_decay 0.999, compression_topk 32, compression_chunk 64;
  diloco  DiLoCo (Douillard et al. 2023): each worker takes H AdamW steps on its own copy of
          the weights; then the pseudo-gradient, the global weights minus the workers' mean,
          is all-reduced and the global weights take one outer step of SGD with Nesterov
          momentum; the workers restart from the global weights, keeping their AdamW state.

Bytes are each worker's wire bytes (compress.sync_wire_bytes): a ring all-reduce for dense
vectors of one layout (dense, diloco), an all-gather for payloads that differ per worker
(topk, quant, demo). Quantised vectors could also be all-reduced, requantised at every hop
(compress.quantised_ring_all_reduce, INTELLECT-1's int8 all-reduce); `sync_cost(...,
quant_all_reduce=True)` prices the quant arm that way, as a second option (the run itself
all-gathers, so its numerics are the all-gather's). Every step records the norm of the global
weights' change, ||theta_after - theta_before|| (`update_norm`). Evaluations use the trainer's 128-window validation subset on the global
weights (for diloco, those of the last sync: eval_interval is a multiple of H).

Legend: W workers, n parameters, B windows per synced step (B / W per worker), H inner steps.
"""

import math
from dataclasses import dataclass, replace

import numpy as np

from pylib import data, model, optim
from pylib.schedules import lr_at
from pylib.systems import compress

METHODS = {
    "dense": "dense data parallelism (ring all-reduce every step)",
    "topk": "top-k with error feedback (all-gather)",
    "quant": "quantised gradients with error feedback (all-gather)",
    "demo": "DeMo: DCT top coefficients of local momentum, sign step (all-gather)",
    "diloco": "DiLoCo: H local AdamW steps, outer Nesterov step (all-reduce every H)",
}


@dataclass(frozen=True)
class SlowConfig:
    """One four-worker run. Defaults: the course's default AdamW run, split over W workers."""

    method: str = "dense"
    workers: int = 4
    steps: int = 300  # synced steps (each uses B windows in all, B / W per worker)
    batch_size: int = 16  # B: windows per synced step, over all workers
    lr: float = 1e-2  # AdamW's peak rate (dense, topk, quant, diloco's inner steps)
    warmup_steps: int = 20
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_interval: int = 10
    eval_windows: int = 128
    seed: int = 0
    topk_fraction: float = 1 / 32  # k = round(n * fraction), at least 1
    quant_bits: int = 4
    demo_lr: float = 3e-3  # the sign step's peak rate (same schedule as the others)
    demo_decay: float = 0.999  # demo.py: compression_decay
    demo_topk: int = 32  # demo.py: compression_topk, per chunk
    demo_chunk: int = 64  # demo.py: compression_chunk, the target chunk side
    diloco_h: int = 10  # inner steps between syncs (the paper's H is 500: a toy's runs are short)
    outer_lr: float = 0.7  # DiLoCo's outer SGD-Nesterov rate and momentum (see the chapter's citation)
    outer_momentum: float = 0.9

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; one of {', '.join(METHODS)}")
        if not 1 <= self.workers <= 64:
            raise ValueError(f"workers must be from 1 to 64, got {self.workers}")
        if self.batch_size % self.workers:
            raise ValueError(f"the batch ({self.batch_size}) must split evenly over {self.workers} workers")
        if self.steps < 1 or self.eval_interval < 1 or self.diloco_h < 1:
            raise ValueError("steps, eval_interval and diloco_h must be >= 1")
        if self.method == "diloco" and self.eval_interval % self.diloco_h:
            raise ValueError("for diloco, eval_interval must be a multiple of H (the global weights change at syncs)")


# ---------------------------------------------------------------------------
# The DCT of DeMo's chunks (orthonormal DCT-II, as demo.py's _dct(norm="ortho"))


def dct_matrix(n):
    """The orthonormal DCT-II matrix D (n, n): coefficients c = D @ x, and x = D.T @ c."""
    k = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    d = np.cos(np.pi * (2 * j + 1) * k / (2 * n)) * np.sqrt(2.0 / n)
    d[0] /= np.sqrt(2.0)
    return d


def smaller_split(n, close_to):
    """The largest divisor of n that is at most close_to (demo.py's _get_smaller_split, for close_to >= 1)."""
    return max(d for d in range(1, min(n, close_to) + 1) if n % d == 0)


class ChunkDCT:
    """Encode a tensor into DCT chunks (rows of coefficients) and decode back, for fixed shapes."""

    def __init__(self, shapes, chunk):
        self.shapes = dict(shapes)
        self.sides = {name: tuple(smaller_split(s, chunk) for s in shape) for name, shape in self.shapes.items()}
        self.mats = {m: dct_matrix(m) for sides in self.sides.values() for m in sides}

    def encode(self, name, x):
        """(chunks, coefficients per chunk): 2-D tensors in n1 x n2 blocks (2-D DCT), 1-D in runs of n1."""
        sides = self.sides[name]
        if len(sides) == 2:
            (a, b), (n1, n2) = x.shape, sides
            blocks = x.reshape(a // n1, n1, b // n2, n2).transpose(0, 2, 1, 3)  # (a/n1, b/n2, n1, n2)
            c = self.mats[n1] @ blocks @ self.mats[n2].T
            return c.reshape(-1, n1 * n2)
        (n1,) = sides
        return x.reshape(-1, n1) @ self.mats[n1].T  # (a/n1, n1)

    def decode(self, name, c):
        """The tensor whose encode is c."""
        sides, shape = self.sides[name], self.shapes[name]
        if len(sides) == 2:
            (a, b), (n1, n2) = shape, sides
            blocks = self.mats[n1].T @ c.reshape(a // n1, b // n2, n1, n2) @ self.mats[n2]
            return blocks.transpose(0, 2, 1, 3).reshape(a, b)
        (n1,) = sides
        return (c @ self.mats[n1]).reshape(shape)


def chunk_topk(c, k):
    """The k largest |coefficients| of every chunk (row): (idx (rows, k), values (rows, k))."""
    k = min(k, c.shape[1])
    idx = np.argpartition(-np.abs(c), k - 1, axis=1)[:, :k]
    return idx, np.take_along_axis(c, idx, axis=1)


def chunk_mean_decompress(shape, sparse):
    """Dense chunks from several workers' (idx, values): each position is the mean of the workers
    that sent it, zero where none did (demo.py: scatter_reduce "mean", include_self=False)."""
    total, count = np.zeros(shape), np.zeros(shape)
    rows = np.arange(shape[0])[:, None]
    for idx, vals in sparse:
        np.add.at(total, (rows, idx), vals)
        np.add.at(count, (rows, idx), 1.0)
    return np.where(count > 0, total / np.maximum(count, 1.0), 0.0)


# ---------------------------------------------------------------------------
# The run


def model_config(vocab_size):
    """The course's default model for this vocabulary."""
    return model.GPTConfig(vocab_size=vocab_size)


def _lr(cfg, step, peak):
    return lr_at("cosine", step, peak, cfg.warmup_steps, cfg.steps, peak * cfg.min_lr_ratio)


def _as_dict(flat, shapes):
    """Named views (by shape) of a flat vector, in the model's order."""
    out, offset = {}, 0
    for name, shape in shapes.items():
        size = math.prod(shape)
        out[name] = flat[offset:offset + size].reshape(shape)
        offset += size
    return out


def _flat(grads, shapes):
    return np.concatenate([grads[name].ravel() for name in shapes]).astype(np.float32)


def init_run(cfg, train_tokens, val_tokens, vocab_size):
    """The state of a fresh run: global weights, per-worker state and rngs, byte counters."""
    mcfg = model_config(vocab_size)
    params = model.init_params(mcfg, cfg.seed)
    shapes = {name: p.shape for name, p in params.items()}
    n = model.count_params(mcfg)
    state = {
        "cfg": cfg, "model_cfg": mcfg, "shapes": shapes, "n": n, "params": params,
        "opt": optim.adamw_init(params), "groups": optim.param_groups(params),
        "rngs": [np.random.default_rng([cfg.seed, 1, w]) for w in range(cfg.workers)],
        "train": train_tokens, "val_x": None, "step": 0, "bytes": 0, "syncs": 0, "diverged": False,
    }
    state["val_x"], state["val_y"] = data.eval_windows(val_tokens, cfg.eval_windows, mcfg.block_size)
    state["limit"] = 2.0 * math.log(vocab_size)
    if cfg.method in ("topk", "quant"):
        state["residuals"] = [np.zeros(n, np.float32) for _ in range(cfg.workers)]
        state["k"] = max(1, round(n * cfg.topk_fraction))
    if cfg.method == "demo":
        state["dct"] = ChunkDCT(shapes, cfg.demo_chunk)
        state["deltas"] = [{name: np.zeros(s) for name, s in shapes.items()} for _ in range(cfg.workers)]
    if cfg.method == "diloco":
        state["workers"] = []
        for _ in range(cfg.workers):
            wp = model.pack_params({k: v.copy() for k, v in params.items()})
            state["workers"].append({"params": wp, "opt": optim.adamw_init(wp), "groups": optim.param_groups(wp)})
        state["outer_buf"] = np.zeros(n)
    return state


def payload_bytes_for(cfg, shapes):
    """What one worker puts on the link per sync (before the collective's forwarding), by cfg.method."""
    n = sum(math.prod(s) for s in shapes.values())
    if cfg.method in ("dense", "diloco"):
        return compress.dense_bytes(n)
    if cfg.method == "topk":
        return compress.topk_bytes(max(1, round(n * cfg.topk_fraction)))
    if cfg.method == "quant":
        return sum(compress.quantise_bytes(math.prod(s), cfg.quant_bits) for s in shapes.values())
    kept = 0  # demo: the top coefficients of every chunk of every tensor
    for shape in shapes.values():
        side = math.prod(smaller_split(s, cfg.demo_chunk) for s in shape)
        kept += (math.prod(shape) // side) * min(cfg.demo_topk, side)
    return compress.topk_bytes(kept)


def sync_kind(method):
    """The collective a method's sync uses: a ring all-reduce for one shared layout, else an all-gather."""
    return "all_reduce" if method in ("dense", "diloco") else "all_gather"


def sync_cost(cfg, shapes, workers, alpha=0.0, beta=0.0, quant_all_reduce=False):
    """One sync of cfg.method over `workers` workers: {kind, payload_bytes, wire_bytes (per worker),
    seconds (alpha-beta: alpha s per message, beta s per byte)}. quant_all_reduce (quant only): the
    quantised ring all-reduce, 2 (W - 1) messages of n / W codes and a scale, instead of the all-gather."""
    n = sum(math.prod(s) for s in shapes.values())
    if quant_all_reduce:
        if cfg.method != "quant":
            raise ValueError("only the quantised method has a quantised all-reduce")
        w = compress.collectives.check_workers(workers, low=2)
        wire = compress.quantised_all_reduce_bytes(n, w, cfg.quant_bits)
        return {"kind": "quantised_all_reduce", "payload_bytes": compress.quantise_bytes(n, cfg.quant_bits),
                "wire_bytes": wire, "seconds": 2 * (w - 1) * alpha + wire * beta}
    kind, payload = sync_kind(cfg.method), payload_bytes_for(cfg, shapes)
    return {"kind": kind, "payload_bytes": payload,
            "wire_bytes": compress.sync_wire_bytes(kind, n, workers, payload),
            "seconds": compress.sync_seconds(kind, n, workers, alpha, beta, payload)}


def payload_bytes(state):
    """payload_bytes_for the run's config and shapes."""
    return payload_bytes_for(state["cfg"], state["shapes"])


def sync_wire_bytes(state):
    """Each worker's wire bytes per sync: all-reduce for dense and diloco, all-gather for the rest."""
    return sync_cost(state["cfg"], state["shapes"], state["cfg"].workers)["wire_bytes"]


def syncs_per_step(cfg):
    """Syncs per synced step: 1, or 1 / H for diloco."""
    return 1.0 / cfg.diloco_h if cfg.method == "diloco" else 1.0


def _worker_grads(state, params):
    """Each worker's (loss, flat gradient) on its own batch of B / W windows."""
    cfg, mcfg = state["cfg"], state["model_cfg"]
    out = []
    for w in range(cfg.workers):
        p = params[w] if isinstance(params, list) else params
        x, y = data.get_batch(state["train"], cfg.batch_size // cfg.workers, mcfg.block_size, state["rngs"][w])
        loss, grads = model.loss_and_grads(p, mcfg, x, y)
        out.append((float(loss), grads))
    return out


def _adamw(state, params, opt, groups, grads, lr):
    cfg = state["cfg"]
    optim.clip_grad_norm(grads, cfg.grad_clip)
    optim.adamw_step(params, grads, opt, lr, 0.9, 0.99, 1e-8, cfg.weight_decay, groups)  # TrainConfig's betas


def _step_compressed(state, lr):
    """dense, topk or quant: average what the workers sent, one AdamW step on the global weights."""
    cfg, shapes = state["cfg"], state["shapes"]
    results = _worker_grads(state, state["params"])
    sent = []
    for w, (_, grads) in enumerate(results):
        g = _flat(grads, shapes)  # (n,)
        if cfg.method == "dense":
            sent.append(g)
            continue
        if cfg.method == "topk":
            comp = compress.topk_compressor(state["k"])
        else:
            bits = cfg.quant_bits
            comp = lambda v: np.concatenate([compress.quantise_compress(t.ravel(), bits)  # noqa: E731
                                             for t in _as_dict(v, shapes).values()])
        s, state["residuals"][w] = compress.error_feedback_step(g, state["residuals"][w], comp)
        sent.append(s)
    mean = np.mean(sent, axis=0, dtype=np.float64).astype(np.float32)
    _adamw(state, state["params"], state["opt"], state["groups"], _as_dict(mean, shapes), lr)
    state["bytes"] += sync_wire_bytes(state)
    state["syncs"] += 1
    return [r[0] for r in results]


def _step_demo(state, lr):
    """DeMo: local momentum, DCT top-k per chunk (the rest kept), mean of the gathered, sign step."""
    cfg, dct = state["cfg"], state["dct"]
    results = _worker_grads(state, state["params"])
    for name in state["shapes"]:
        sparse = []
        for w, (_, grads) in enumerate(results):
            delta = state["deltas"][w][name]
            delta *= cfg.demo_decay
            delta += lr * grads[name]
            c = dct.encode(name, delta)
            idx, vals = chunk_topk(c, cfg.demo_topk)
            delta -= dct.decode(name, chunk_mean_decompress(c.shape, [(idx, vals)]))  # what was sent leaves delta
            sparse.append((idx, vals))
        new_grad = dct.decode(name, chunk_mean_decompress(c.shape, sparse))
        state["params"][name] -= (lr * np.sign(new_grad)).astype(np.float32)
    state["bytes"] += sync_wire_bytes(state)
    state["syncs"] += 1
    return [r[0] for r in results]


def outer_nesterov_step(glob, worker_weights, buf, lr, momentum):
    """DiLoCo's outer step, in place on glob (n,) and buf (n,): the pseudo-gradient
    delta = glob - mean(worker weights), buf = momentum * buf + delta, and
    glob -= lr * (delta + momentum * buf) (SGD with Nesterov momentum, as torch.optim.SGD)."""
    delta = glob - np.mean(worker_weights, axis=0, dtype=np.float64)  # (n,) the outer gradient
    buf *= momentum
    buf += delta
    glob -= (lr * (delta + momentum * buf)).astype(glob.dtype)
    return delta


def _step_diloco(state, lr):
    """DiLoCo: every worker one inner AdamW step; every H steps the outer Nesterov step and a restart."""
    cfg = state["cfg"]
    workers = state["workers"]
    results = _worker_grads(state, [wk["params"] for wk in workers])
    for wk, (_, grads) in zip(workers, results):
        _adamw(state, wk["params"], wk["opt"], wk["groups"], grads, lr)
    if (state["step"] + 1) % cfg.diloco_h == 0:
        glob = optim.flat_buffer(state["params"])
        outer_nesterov_step(glob, [optim.flat_buffer(wk["params"]) for wk in workers], state["outer_buf"],
                            cfg.outer_lr, cfg.outer_momentum)
        for wk in workers:
            optim.flat_buffer(wk["params"])[:] = glob
        state["bytes"] += sync_wire_bytes(state)
        state["syncs"] += 1
    return [r[0] for r in results]


STEPS = {"dense": _step_compressed, "topk": _step_compressed, "quant": _step_compressed,
         "demo": _step_demo, "diloco": _step_diloco}


def evaluate(state):
    """The global weights' loss on the 128-window validation subset (None if not finite)."""
    with np.errstate(all="ignore"):
        v = float(model.evaluate_loss(state["params"], state["model_cfg"], state["val_x"], state["val_y"]))
    return v if math.isfinite(v) else None


def run_steps(state, n_steps):
    """Up to n_steps more synced steps; records {step (steps done), loss, bytes (cumulative per worker),
    syncs, and val at step 0 and every eval_interval steps}. A non-finite or > 2 ln V loss ends the run."""
    cfg = state["cfg"]
    records = []
    if state["step"] == 0 and not state.get("started"):
        state["started"] = True
        records.append({"step": 0, "bytes": 0, "syncs": 0, "val": evaluate(state)})
    peak = cfg.demo_lr if cfg.method == "demo" else cfg.lr
    for _ in range(n_steps):
        if state["diverged"] or state["step"] >= cfg.steps:
            break
        before = optim.flat_buffer(state["params"]).copy()  # (n,) the global weights
        with np.errstate(all="ignore"):
            losses = STEPS[cfg.method](state, _lr(cfg, state["step"], peak))
            moved = float(np.linalg.norm(optim.flat_buffer(state["params"]) - before, ord=2))
        state["step"] += 1
        loss = float(np.mean(losses))
        rec = {"step": state["step"], "loss": loss if math.isfinite(loss) else None,
               "bytes": state["bytes"], "syncs": state["syncs"],
               "update_norm": moved if math.isfinite(moved) else None}
        if not math.isfinite(loss) or loss > state["limit"]:
            rec["diverged"] = state["diverged"] = True
        elif state["step"] % cfg.eval_interval == 0 or state["step"] == cfg.steps:
            rec["val"] = evaluate(state)
        records.append(rec)
    return records


def run(cfg, train_tokens, val_tokens, vocab_size):
    """A whole run: its records."""
    state = init_run(cfg, train_tokens, val_tokens, vocab_size)
    return run_steps(state, cfg.steps)


def configured(method, seed=0, **changes):
    """The SlowConfig of one method and seed (the chapter's settings, with changes)."""
    return replace(SlowConfig(method=method, seed=seed), **changes)
