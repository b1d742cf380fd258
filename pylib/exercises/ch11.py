"""Chapter 11's exercises: data parallelism, the ring and ZeRO (pylib.exercises says how checks work)."""

import dataclasses
import math

import numpy as np

from pylib import data, model, optim
from pylib import loss as xent
from pylib.exercises import Exercise, Mistake, Wrong, close, corpus, expect_number, near
from pylib.systems import collectives, data_parallel, memory

GB = 1e9

# ---------------------------------------------------------------------------
# 1. Investigate: change the worker count, compare with one worker

WORKERS_STARTER = '''from pylib.systems import data_parallel


def more_workers(params, cfg, x, y, mask):
    """Change one condition: the number of data-parallel workers (the unchanged step has 1).

    Return (loss, grads) from data_parallel.data_parallel_loss_and_grads for the changed step.
    The batch has 8 windows, and the mask counts a different number of tokens in each.
    """
    return data_parallel.data_parallel_loss_and_grads(params, cfg, x, y, 1, mask)  # change this line only
'''

WORKERS_SOLUTION = '''from pylib.systems import data_parallel


def more_workers(params, cfg, x, y, mask):
    return data_parallel.data_parallel_loss_and_grads(params, cfg, x, y, 3, mask)  # any count from 2 to 8
'''

WORKERS_B = 8


def _workers_setup():
    """The course model in float64 (seed 0) on 8 training windows whose masks count very different numbers of tokens."""
    c = corpus()
    cfg = dataclasses.replace(model.GPTConfig(), vocab_size=c.vocab.size)
    params = model.init_params(cfg, 0, np.float64)
    x, y = data.get_batch(c.train, WORKERS_B, cfg.block_size, np.random.default_rng(11))
    T = cfg.block_size
    counted = np.array([T, 3, 40, 1, T, 17, 8, 60])  # counted tokens per window, as after a prompt of T - k tokens
    mask = (np.arange(T)[None, :] >= T - counted[:, None]).astype(np.float64)
    return cfg, params, x, y, mask


def _rel_worst(grads, grads0):
    return max(float(np.abs(np.asarray(grads[k], dtype=float) - grads0[k]).max() / (np.abs(grads0[k]).max() or 1.0))
               if np.shape(grads[k]) == grads0[k].shape else math.inf for k in grads0)


def _adamw_update(params, grads):
    p = model.pack_params({k: v.copy() for k, v in params.items()})
    before = {k: v.copy() for k, v in p.items()}
    optim.adamw_step(p, grads, optim.adamw_init(p), 1e-2, weight_decay=0.1)
    return {k: p[k] - before[k] for k in p}


def check_more_workers(fn):
    cfg, params, x, y, mask = _workers_setup()
    seen = []
    real = data_parallel.split_batch

    def spy(x, y, mask, n_workers):
        shares = real(x, y, mask, n_workers)
        seen.append([xent.count_targets(yi, mi) for _, yi, mi in shares])
        return shares

    data_parallel.split_batch = spy
    try:
        out = fn({k: v.copy() for k, v in params.items()}, cfg, x.copy(), y.copy(), mask.copy())
    finally:
        data_parallel.split_batch = real
    if not seen:
        raise Wrong("Your function did not deal the batch out to workers (data_parallel.split_batch was never "
                    "called): call data_parallel_loss_and_grads with another worker count.")
    counts = seen[-1]
    if len(counts) == 1:
        raise Wrong("Your function still runs one worker: that is the unchanged step. Change the worker count, "
                    f"to anything from 2 to {WORKERS_B}.")
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict)):
        raise Wrong("more_workers should return (loss, grads), as data_parallel_loss_and_grads does.")
    loss, grads = expect_number(out[0], "The loss"), out[1]
    loss0, grads0 = data_parallel.data_parallel_loss_and_grads(params, cfg, x, y, 1, mask)
    if set(grads) != set(grads0):
        raise Wrong("Your grads do not have the model's parameter names.")
    worst = _rel_worst(grads, grads0)
    if close(loss, loss0, 1e-12) and worst <= 1e-12:
        up, up0 = _adamw_update(params, grads), _adamw_update(params, grads0)
        moved = max(float(np.abs(up[k] - up0[k]).max()) for k in up0)
        return (f"Right: {len(counts)} workers whose shares count {counts} tokens give the one-worker loss to "
                f"{abs(loss - loss0):.1e} nats and every gradient to {worst:.1e} (relative), and the AdamW updates "
                f"differ by at most {moved:.1e}: the same numbers added in another order. The split changes where "
                "the work happens, not the answer.")
    W = len(counts)
    try:
        mom_loss, _ = data_parallel.mean_of_worker_means(params, cfg, x, y, W, mask)
    except ValueError:
        mom_loss = None
    if mom_loss is not None and close(loss, mom_loss, 1e-12):
        raise Wrong(f"Your loss is the mean of the {W} workers' own means, {abs(loss - loss0):.3g} nats away from "
                    f"the one-worker loss: with shares counting {counts} tokens, each worker's tokens are weighted "
                    "by 1 over its own count. Divide the summed gradient by the global count.")
    unmasked, _ = model.loss_and_grads(params, cfg, x, y)
    if close(loss, unmasked, 1e-12):
        raise Wrong("Your loss is the batch's without its mask: every position counts in yours. Keep the mask; "
                    "change the worker count only.")
    raise Wrong(f"Your loss differs from the one-worker loss by {abs(loss - loss0):.3g} nats and the gradients by up "
                f"to {worst:.3g} (relative), far more than rounding: did you change more than the worker count?")


# ---------------------------------------------------------------------------
# 2. Predict: the bytes a ring all-reduce sends


def ring_gb():
    """Wire bytes per worker, in GB, of a flat ring all-reduce of LLaMA 7B's 16-bit gradient over 8 workers."""
    n = memory.param_count(memory.LLAMA_7B)
    return collectives.traffic("ring_all_reduce", n, 8, itemsize=2)["wire_bytes"] / GB


def check_ring_gb(value, truth):
    p = 8
    per = 2 * (p - 1) / p  # the ring's wire bytes per payload byte
    if near(value, truth / per * 2):
        raise Wrong("2n is the limit as the number of workers grows; with 8 workers each sends 2(p − 1)/p of the "
                    "vector, a little less.")
    if near(value, truth / per):
        raise Wrong("That is the payload, one gradient; the wire carries more, because every chunk is passed on "
                    "in both phases.")
    if near(value, truth / per * (p - 1)):
        raise Wrong("That is the naive all-reduce, where every worker sends its whole vector to every other worker; "
                    "the ring sends far less.")
    if near(value, truth / 2):
        raise Wrong("That is only the reduce-scatter half; the all-gather then sends as much again.")
    if near(value, truth * 2):
        raise Wrong("That counts 4 bytes per number; the gradient here is 16-bit, 2 bytes each.")


# ---------------------------------------------------------------------------
# 3. Implement: a ring reduce-scatter that passes to the left

LEFT_STARTER = '''import numpy as np

from pylib.systems.collectives import chunk_bounds


def reduce_scatter_left(vectors):
    """A ring reduce-scatter whose messages go LEFT: worker i sends to worker (i - 1) mod p.

    vectors: a list of p arrays of one shape, one per worker; flatten them, and do not modify them.
    Cut each flat vector into p chunks with chunk_bounds(n, p). In each of p - 1 steps every worker
    sends one chunk to its left-hand neighbour, who adds the running sum that arrives to its own copy
    of that chunk (new = arrived + own), and passes it on in the next step. All send at once.
    At the end worker i must hold the complete sum of chunk i.
    Returns (shards, sent): shards[i] is worker i's summed chunk i (1-D, the input dtype), and
    sent[i] the number of elements worker i sent.
    """
    raise NotImplementedError
'''

LEFT_SOLUTION = '''import numpy as np

from pylib.systems.collectives import chunk_bounds


def reduce_scatter_left(vectors):
    bufs = [np.array(v, copy=True).reshape(-1) for v in vectors]
    p, n = len(bufs), bufs[0].size
    bounds = chunk_bounds(n, p)
    sent = [0] * p
    for s in range(p - 1):
        # worker i sends chunk (i + s + 1) mod p, so the last step brings chunk i to worker i
        outgoing = []
        for i in range(p):
            a, b = bounds[(i + s + 1) % p]
            outgoing.append(((i - 1) % p, a, b, bufs[i][a:b].copy()))
            sent[i] += b - a
        for dst, a, b, arrived in outgoing:
            bufs[dst][a:b] = arrived + bufs[dst][a:b]
    return [bufs[i][a:b].copy() for i, (a, b) in enumerate(bounds)], sent
'''


def _left_reference(vectors):
    """The left-passing ring, as LEFT_SOLUTION: the order of additions a left ring makes."""
    bufs = [np.array(v, copy=True).reshape(-1) for v in vectors]
    p = len(bufs)
    bounds = collectives.chunk_bounds(bufs[0].size, p)
    for s in range(p - 1):
        outgoing = [((i - 1) % p, *bounds[(i + s + 1) % p], bufs[i][slice(*bounds[(i + s + 1) % p])].copy())
                    for i in range(p)]
        for dst, a, b, arrived in outgoing:
            bufs[dst][a:b] = arrived + bufs[dst][a:b]
    return [bufs[i][a:b].copy() for i, (a, b) in enumerate(bounds)]


def _call_left(fn, vectors, what):
    originals = [v.copy() for v in vectors]
    out = fn([v for v in vectors])
    if any(not np.array_equal(v, o) for v, o in zip(vectors, originals)):
        raise Wrong("Your function changed the workers' input arrays in place: work on copies, as pylib's "
                    "collectives do.")
    if not (isinstance(out, tuple) and len(out) == 2):
        raise Wrong("reduce_scatter_left should return a pair (shards, sent).")
    shards, sent = out
    p = len(vectors)
    if len(shards) != p or len(sent) != p:
        raise Wrong(f"With {p} workers, shards and sent should each have {p} entries; yours have "
                    f"{len(shards)} and {len(sent)}.")
    shards = [np.asarray(s) for s in shards]
    if any(s.ndim != 1 for s in shards):
        raise Wrong(f"Each shard should be a 1-D array ({what}); flatten the vectors first.")
    sent = [expect_number(s, "Each entry of sent") for s in sent]
    return shards, [int(s) if s == int(s) else s for s in sent]


def _digits(values, p):
    """Each value as base-3 digits over p workers: how many times each worker's term was added."""
    out = []
    for v in values:
        v, row = int(round(v)), []
        for _ in range(p):
            v, d = divmod(v, 3)
            row.append(d)
        out.append(row)
    return np.array(out)


def check_reduce_scatter_left(fn):
    # 1. Which workers' values each chunk holds: worker j's vector is 3^j (k + 1) at element k, so each
    #    element, divided by k + 1, spells in base 3 how often each worker's term was added.
    for p, n in ((4, 10), (3, 9), (5, 3)):
        what = f"{p} workers, vectors of {n}"
        bounds = collectives.chunk_bounds(n, p)
        vectors = [3.0 ** j * np.arange(1, n + 1) for j in range(p)]
        shards, sent = _call_left(fn, vectors, what)
        want_sizes = [b - a for a, b in bounds]
        sizes = [s.size for s in shards]
        if sizes != want_sizes:
            raise Wrong(f"With {what}, your shards have {sizes} elements; chunk_bounds cuts {want_sizes}: the first "
                        "n mod p chunks are one element longer, and a chunk can be empty when n < p.")
        full = sum(vectors)
        for i, (a, b) in enumerate(bounds):
            if np.array_equal(shards[i], full[a:b]):
                continue
            others = [c for c, (a2, b2) in enumerate(bounds) if b2 - a2 == b - a and c != i
                      and b > a and np.array_equal(shards[i], full[a2:b2])]
            if others:
                raise Wrong(f"With {what}, worker {i} ends with the sum of chunk {others[0]}, not chunk {i}: check "
                            "which chunk a worker sends at each step, so that the last step brings chunk i to worker i.")
            digits = _digits(shards[i] / np.arange(a + 1, b + 1), p)
            if (digits >= 2).any() or not np.allclose(shards[i] / np.arange(a + 1, b + 1),
                                                     np.round(shards[i] / np.arange(a + 1, b + 1))):
                raise Wrong(f"With {what}, worker {i}'s chunk adds some worker's values twice: a reduce-scatter "
                            "takes p − 1 steps, and each running sum passes each worker once.")
            missing = sorted(set(np.nonzero(digits == 0)[1].tolist()))
            raise Wrong(f"With {what}, worker {i}'s chunk {i} lacks the values of worker(s) {missing}: its running "
                        "sum did not pass every worker. Check which chunk each worker sends at step s, and that the "
                        "receiver adds the one that arrives.")
        want_sent = [n - size for size in want_sizes]  # each worker sends every chunk but its own, once
        if sent != want_sent:
            if sent == [(p - 1) * n] * p:
                raise Wrong("Your sent counts the whole vector at every step; a message is one chunk.")
            if sent == [p - 1] * p:
                raise Wrong("Your sent counts messages; it should count the elements in them.")
            if all(got > want for got, want in zip(sent, want_sent)):
                raise Wrong(f"With {what}, your workers sent {sent} elements, more than a reduce-scatter needs: each "
                            "sends every chunk but its own, once, in p − 1 steps. Does your loop run once too often?")
            raise Wrong(f"With {what}, your workers sent {sent} elements; in a reduce-scatter each sends every "
                        "chunk but its own, once.")
    # 2. One worker: nothing to send, its vector is its shard.
    one = np.arange(5.0)
    shards, sent = _call_left(fn, [one], "one worker")
    if sent != [0] or not np.array_equal(shards[0], one):
        raise Wrong("With one worker, the reduce-scatter sends nothing and the worker's shard is its whole vector.")
    # 3. Multi-dimensional arrays, flattened.
    rng = np.random.default_rng(0)
    mats = [rng.integers(-9, 9, (3, 4)).astype(np.float64) for _ in range(3)]
    shards, _ = _call_left(fn, mats, "3 workers with (3, 4) arrays")
    if not all(np.array_equal(s, w) for s, w in zip(shards, collectives.reduce_scatter(mats)[0])):
        raise Wrong("With (3, 4) arrays your shards are wrong: flatten each worker's array first.")
    # 4. The direction: a left ring adds in another order than the chapter's right ring, and float32 shows it.
    vecs = [rng.normal(0, 1, 1003).astype(np.float32) for _ in range(5)]
    shards, _ = _call_left(fn, vecs, "5 workers, 1,003 float32 numbers")
    if any(s.dtype != np.float32 for s in shards):
        raise Wrong("Your shards are not float32 like the workers' vectors: keep the input dtype (a real collective "
                    "adds in the gradient's own precision).")
    left, right = _left_reference(vecs), collectives.reduce_scatter(vecs)[0]
    if all(np.array_equal(s, r) for s, r in zip(shards, right)) and not all(
            np.array_equal(s, r) for s, r in zip(shards, left)):
        raise Wrong("Your sums are the chapter's ring's to the bit: your messages go right, worker i to worker i + 1. "
                    "This ring passes left, to worker i − 1; the chunk each sends has to change with it.")
    if not all(np.array_equal(s, r) for s, r in zip(shards, left)):
        worst = max(float(np.abs(s - r).max()) for s, r in zip(shards, left))
        raise Wrong(f"Your sums are right to {worst:.1e} but not in a left ring's order of additions: each running "
                    "sum should start at worker i − 1 for chunk i, travel left, and be added as arrived + own.")
    return ("Right: every worker ends with the sum of its own chunk, for uneven chunks, empty ones and one worker; "
            "each sends every chunk but its own, once; and the float32 sums are a left ring's to the bit (they "
            "differ from the chapter's right ring's in the last bits, because the additions come in another order).")


# ---------------------------------------------------------------------------
# 4. Implement: what one worker keeps under each ZeRO stage

ZERO_STARTER = '''def zero_state_bytes(n_params, precision, zero_stage, dp):
    """Bytes of model states that ONE of dp data-parallel workers keeps between steps, under ZeRO.

    n_params: the model's parameter count. precision: "mixed" (16-bit weights and gradients, an fp32
    master copy) or "fp32" (4-byte weights and gradients, no master copy); the optimiser is AdamW,
    two fp32 moments. zero_stage: 0 (plain data parallelism), 1, 2 or 3. dp: the number of workers.
    A shard is n_params / dp parameters (a fraction is fine).
    Returns {"weights", "gradients", "optimizer", "total"} in bytes; "optimizer" is the moments and
    the master copy together.
    """
    raise NotImplementedError
'''

ZERO_SOLUTION = '''def zero_state_bytes(n_params, precision, zero_stage, dp):
    weight, grad, master = {"mixed": (2, 2, 4), "fp32": (4, 4, 0)}[precision]
    share = lambda stage: n_params / dp if zero_stage >= stage else n_params  # stages are cumulative
    out = {"weights": weight * share(3), "gradients": grad * share(2), "optimizer": (8 + master) * share(1)}
    out["total"] = out["weights"] + out["gradients"] + out["optimizer"]
    return out
'''

ZERO_PARTS = ("weights", "gradients", "optimizer", "total")
ZERO_SHARDED_FROM = {"optimizer": 1, "gradients": 2, "weights": 3}
ZERO_NAMES = {"optimizer": "optimizer state is", "gradients": "gradients are", "weights": "weights are"}


def _zero_want(shape, precision, stage, dp):
    t = memory.training_memory(shape, precision=precision, optimizer="adamw", zero_stage=stage, dp=dp)
    return {"weights": t["weights"], "gradients": t["gradients"], "optimizer": t["optimizer"],
            "total": t["model_states"]}, t


def _zero_got(fn, n, precision, stage, dp):
    out = fn(n, precision, stage, dp)
    if not isinstance(out, dict):
        raise Wrong(f"zero_state_bytes should return a dict with keys {', '.join(ZERO_PARTS)}; yours returns a "
                    f"{type(out).__name__}.")
    missing = [k for k in ZERO_PARTS if k not in out]
    if missing:
        raise Wrong(f"Your dict has no {', '.join(repr(k) for k in missing)}: it needs {', '.join(ZERO_PARTS)}.")
    return {k: expect_number(out[k], repr(k)) for k in ZERO_PARTS}


def check_zero_state_bytes(fn):
    cases = [(memory.LLAMA_7B, 64), (memory.COURSE_MODEL, 4), (memory.COURSE_MODEL, 1), (memory.LLAMA_7B, 3)]
    for precision in ("mixed", "fp32"):
        for shape, dp in cases:
            n = memory.param_count(shape)
            for stage in range(4):
                want, t = _zero_want(shape, precision, stage, dp)
                got = _zero_got(fn, n, precision, stage, dp)
                where = f"stage {stage}, {precision}, {dp} worker{'s' if dp > 1 else ''}"
                for part in ZERO_PARTS[:-1]:
                    if abs(got[part] - want[part]) <= 16 + 1e-12 * want[part]:  # a shard rounded up is fine
                        continue
                    are = ZERO_NAMES[part]
                    unsharded = want[part] * (dp if stage >= ZERO_SHARDED_FROM[part] else 1)
                    sharded = unsharded / dp
                    if dp == 1:
                        raise Wrong(f"With one worker ({where}) there is nothing to shard over, yet your {are} not "
                                    "what a single device keeps.")
                    if part == "optimizer" and stage >= 1 and close(got[part], 8 * n / dp + t["master"] * dp):
                        raise Wrong(f"At {where} you shard Adam's moments but not the fp32 master copy: ZeRO counts the "
                                    "master copy as optimiser state, and stage 1 shards it too.")
                    if stage == 0 and close(got[part], sharded):
                        raise Wrong(f"Stage 0 is plain data parallelism: every worker keeps a full copy of everything, "
                                    f"but your {are} divided by dp.")
                    if close(got[part], unsharded) and stage > ZERO_SHARDED_FROM[part]:
                        raise Wrong(f"At {where} your {are} not sharded, though stage "
                                    f"{ZERO_SHARDED_FROM[part]} sharded {'it' if part == 'optimizer' else 'them'}: each stage shards everything the one "
                                    "before it did, and one more kind of state.")
                    if close(got[part], sharded) and stage < ZERO_SHARDED_FROM[part]:
                        raise Wrong(f"At {where} your {are} sharded, but ZeRO shards {'it' if part == 'optimizer' else 'them'} only from stage "
                                    f"{ZERO_SHARDED_FROM[part]}: the optimiser state first, then the gradients, then "
                                    "the weights.")
                    raise Wrong(f"At {where}, your count for the {part} is {got[part] / n:.4g} bytes per parameter "
                                "of the model; "
                                "count what that part takes per parameter, then what share of it one worker keeps.")
                if abs(got["total"] - sum(got[k] for k in ZERO_PARTS[:-1])) > 1e-9 * max(1.0, got["total"]):
                    raise Wrong("Your parts are right but 'total' is not their sum.")
    llama = [_zero_want(memory.LLAMA_7B, "mixed", s, 64)[0]["total"] / GB for s in range(4)]
    return ("Right: your counts match pylib's calculator (training_memory) for every stage, both precisions, and "
            "1, 3, 4 and 64 workers. For LLaMA 7B over 64 workers in mixed precision a worker keeps "
            + ", ".join(f"{v:.1f}" for v in llama[:3]) + f" and {llama[3]:.2f} GB at stages 0 to 3.")


EXERCISES = [
    Exercise(
        id="ch11.worker_count", kind="investigate", title="One condition changed: the number of workers",
        task="""Take one data-parallel step of the course model (in float64) on 8 windows whose masks count very
different numbers of tokens, and change one condition: the number of workers, from 1 to anything up to 8.
The check compares your loss, every gradient and the AdamW update with the one-worker step's, and says
what each worker's share counted.""",
        starter=WORKERS_STARTER, function="more_workers", solution=WORKERS_SOLUTION, check=check_more_workers,
        needs_corpus=True,
        hints=("The worker count is `data_parallel_loss_and_grads`'s fifth argument.",
               "How close should the result be to one worker's? The chapter's test says, for float64."),
        mistakes=(
            Mistake(WORKERS_STARTER, "still runs one worker"),
            Mistake(WORKERS_SOLUTION.replace("data_parallel.data_parallel_loss_and_grads(params, cfg, x, y, 3, mask)",
                                             "data_parallel.mean_of_worker_means(params, cfg, x, y, 3, mask)"),
                    "mean of the 3 workers' own means"),
            Mistake(WORKERS_SOLUTION.replace("(params, cfg, x, y, 3, mask)", "(params, cfg, x, y, 4)"),
                    "without its mask"),
        )),
    Exercise(
        id="ch11.ring_bytes", kind="predict", title="What a ring all-reduce sends",
        task="""Eight workers all-reduce a 16-bit gradient the size of LLaMA 7B's (one number per parameter, as the
chapter counts them) in one flat ring. How many **GB** (10⁹ bytes) does each worker send during the
all-reduce, forwarding included?""",
        truth=ring_gb, check=check_ring_gb, unit="GB",
        solution="""The gradient is n = 6.74 billion numbers at 2 bytes, 13.5 GB of payload. The ring sends
2(p − 1)/p of it per worker: with p = 8, 1.75 × 13.5 GB, about 23.6 GB, half in the reduce-scatter and
half in the all-gather. The naive all-reduce would send (p − 1) n, 94 GB each.""",
        hints=("Each of the 2(p − 1) steps sends one chunk of n/p numbers.",
               "n is the parameter count; each number is 2 bytes."),
        mistakes=(Mistake("26.95", "limit as the number of workers grows"), Mistake("13.48", "payload"),
                  Mistake("94.3", "naive all-reduce"), Mistake("11.79", "reduce-scatter half")),
    ),
    Exercise(
        id="ch11.reduce_scatter", kind="implement", title="A ring that passes to the left",
        task="""The chapter's ring sends to the right. Write the reduce-scatter of a ring whose messages go the other
way, worker i to worker i − 1, so that worker i still ends with the whole sum of chunk i. The check runs
it on uneven chunks, empty ones, one worker and float32 vectors, against `collectives.reduce_scatter`,
and can tell which way the running sums travelled.""",
        starter=LEFT_STARTER, function="reduce_scatter_left", solution=LEFT_SOLUTION,
        check=check_reduce_scatter_left,
        hints=("Work backwards from the end: at the last step, s = p − 2, worker i + 1 must send chunk i to worker i. "
               "Which chunk does a worker send at step s, then?",
               "Read every outgoing chunk before any receiver writes, as the chapter's ring does, and count each "
               "message's elements, b − a.",
               "With p = 1 there are no steps: the loop runs p − 1 times."),
        mistakes=(
            Mistake(LEFT_SOLUTION.replace("(i + s + 1) % p", "(i - s - 1) % p").replace("((i - 1) % p,", "((i + 1) % p,"),
                    "your messages go right"),
            Mistake(LEFT_SOLUTION.replace("(i + s + 1) % p", "(i + s) % p"), "lacks the values"),
            Mistake(LEFT_SOLUTION.replace("for s in range(p - 1):", "for s in range(p):"), "more than a reduce-scatter needs"),
            Mistake(LEFT_SOLUTION.replace("bounds = chunk_bounds(n, p)",
                                          "bounds = [(c * (n // p), n if c == p - 1 else (c + 1) * (n // p)) "
                                          "for c in range(p)]"),
                    "one element longer"),
        )),
    Exercise(
        id="ch11.zero_bytes", kind="implement", title="What a worker keeps under ZeRO",
        task="""Write the bytes of model states one data-parallel worker keeps between steps under each ZeRO stage,
for a parameter count, a precision and a number of workers. The check compares yours with chapter 10's
calculator, `memory.training_memory(..., zero_stage=, dp=)`, for LLaMA 7B and the course model, every stage,
both precisions and 1 to 64 workers.""",
        starter=ZERO_STARTER, function="zero_state_bytes", solution=ZERO_SOLUTION, check=check_zero_state_bytes,
        hints=("Start from chapter 10's bytes per parameter: weights, gradients, and the optimiser state (two fp32 "
               "moments, plus the fp32 master copy in mixed precision).",
               "Stage 1 shards the optimiser state, stage 2 also the gradients, stage 3 also the weights: a sharded "
               "part is divided by dp, the others stay whole."),
        mistakes=(
            Mistake(ZERO_SOLUTION.replace('"optimizer": (8 + master) * share(1)',
                                          '"optimizer": 8 * share(1) + master * n_params'), "not the fp32 master copy"),
            Mistake(ZERO_SOLUTION.replace("if zero_stage >= stage else", "if zero_stage == stage else"),
                    "everything the one before it did"),
            Mistake(ZERO_SOLUTION.replace("n_params / dp if zero_stage >= stage else n_params", "n_params / dp"),
                    "Stage 0 is plain data parallelism"),
            Mistake(ZERO_SOLUTION.replace("weight * share(3)", "weight * share(2)").replace("grad * share(2)",
                                                                                            "grad * share(3)"),
                    "only from stage"),
        )),
]
