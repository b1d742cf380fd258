"""Collectives: the ring all-reduce sums exactly as advertised and sends 2(p-1)/p of the vector."""

import math

import numpy as np
import pytest

from pylib.systems import collectives as col


def vectors(p, n, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(dtype) for _ in range(p)]


@pytest.mark.parametrize("p, n", [(2, 8), (3, 10), (4, 5376), (5, 7), (8, 5376), (8, 3)])
def test_ring_results_bit_identical_across_workers_and_equal_the_sum(p, n):
    vs = vectors(p, n, seed=p)
    results, sent = col.ring_all_reduce(vs)
    for r in results[1:]:
        assert r.tobytes() == results[0].tobytes()
    np.testing.assert_allclose(results[0], np.sum(np.stack(vs).astype(np.float64), axis=0), rtol=1e-5, atol=1e-5)
    # Integers in float32 add exactly: the ring's sum IS the sum, in any order.
    ints = [np.random.default_rng(i).integers(-1000, 1000, n).astype(np.float32) for i in range(p)]
    got, _ = col.ring_all_reduce(ints)
    assert all(np.array_equal(g, np.sum(ints, axis=0)) for g in got)


def test_ring_chunk_sums_in_ring_order():
    # Chunk c starts at worker c+1 and collects the others round the ring, ending at worker c.
    p, n = 4, 8
    vs = vectors(p, n, seed=3, dtype=np.float32)
    results, _ = col.ring_all_reduce(vs)
    for c, (a, b) in enumerate(col.chunk_bounds(n, p)):
        acc = vs[(c + 1) % p][a:b].copy()
        for k in range(2, p + 1):
            acc = acc + vs[(c + k) % p][a:b]
        assert results[0][a:b].tobytes() == acc.tobytes()


@pytest.mark.parametrize("p", [2, 3, 4, 8, 16])
def test_each_worker_sends_2_p_minus_1_over_p_of_the_vector(p):
    n = 240 * 7  # divisible by 2..8 and 16
    _, sent = col.ring_all_reduce(vectors(p, n))
    assert sent == [2 * (p - 1) * n // p] * p
    assert col.traffic("ring_all_reduce", n, p)["wire_bytes"] == 4 * sent[0]


def test_uneven_chunks_counted_element_by_element():
    p, n = 3, 10  # chunks of 4, 3, 3
    _, sent = col.ring_all_reduce(vectors(p, n))
    assert sum(sent) == 2 * (p - 1) * n  # every chunk crosses p-1 links twice
    assert col.chunk_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]


def test_ring_sends_less_than_naive_beyond_two_workers():
    n = 64
    for p in (2, 3, 4, 8):
        ring = col.ring_all_reduce(vectors(p, n))[1][0]
        naive_results, naive = col.naive_all_reduce(vectors(p, n))
        assert naive[0] == (p - 1) * n
        assert (ring < naive[0]) == (p > 2) and (ring == naive[0]) == (p == 2)
        for r in naive_results[1:]:
            assert r.tobytes() == naive_results[0].tobytes()


def test_reduce_scatter_then_all_gather_is_the_all_reduce():
    p, n = 4, 22
    vs = vectors(p, n, seed=5)
    shards, sent_rs = col.reduce_scatter(vs)
    full, sent_ag = col.all_gather(shards)
    ring, sent = col.ring_all_reduce(vs)
    assert [len(s) for s in shards] == [b - a for a, b in col.chunk_bounds(n, p)]
    for f, r in zip(full, ring):
        assert f.tobytes() == r.tobytes()
    assert [a + b for a, b in zip(sent_rs, sent_ag)] == sent


@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_all_gather_bytes_per_worker_grow_with_p(p):
    k = 50  # each worker's shard, e.g. a compressed gradient that cannot be summed
    shards = [np.full(k, i, dtype=np.float32) for i in range(p)]
    full, sent = col.all_gather(shards)
    assert sent == [(p - 1) * k] * p
    for f in full:
        assert np.array_equal(f, np.repeat(np.arange(p, dtype=np.float32), k))
    t = col.traffic("all_gather", k, p)
    assert t["payload_bytes"] == 4 * k and t["wire_bytes"] == 4 * (p - 1) * k


def test_all_gather_unequal_shards():
    shards = [np.arange(3.0), np.arange(1.0), np.arange(5.0)]
    full, sent = col.all_gather(shards)
    assert all(np.array_equal(f, np.concatenate(shards)) for f in full)
    assert sum(sent) == 2 * 9  # each shard crosses p-1 = 2 links


def test_payload_and_wire_bytes_both_counted():
    n, p = 800, 4
    ar = col.traffic("ring_all_reduce", n, p, itemsize=2)
    assert ar == {"payload_bytes": 1600, "wire_bytes": 2400}
    rs = col.traffic("reduce_scatter", n, p)
    assert rs["payload_bytes"] == 3200 and rs["wire_bytes"] == 2400
    # The step-by-step ring's running count ends at the wire bytes.
    last = list(col.ring_all_reduce_steps(vectors(p, n)))[-1]
    assert [4 * s for s in last["sent"]] == [col.traffic("ring_all_reduce", n, p, itemsize=4)["wire_bytes"]] * p


def test_steps_expose_the_ring():
    p, n = 4, 8
    steps = list(col.ring_all_reduce_steps(vectors(p, n)))
    assert [s["phase"] for s in steps] == ["reduce-scatter"] * 3 + ["all-gather"] * 3
    first = steps[0]["messages"]
    assert [(m[0], m[1]) for m in first] == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert [m[2] for m in first] == [3, 0, 1, 2]  # worker i sends chunk i-1
    after_rs = steps[p - 2]["have"]
    assert all(after_rs[i][i] == p for i in range(p))  # worker i owns the whole sum of chunk i
    assert all(all(h == p for h in row) for row in steps[-1]["have"])


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
def test_contribution_counts_follow_the_closed_form(p):
    # Chunk c's running sum starts at worker c+1 and moves one worker on per reduce-scatter step, so
    # after step k (1-based) the chunk just received holds k+1 workers' values: worker j's copy of
    # chunk c, d = (j - c - 1) mod p links from where the sum started, holds d+1 once the sum has
    # reached it (d <= k) and only its own value before. In the
    # all-gather, worker c's finished chunk moves on one worker per step: after step k every worker
    # up to k links past c holds all p.
    steps = list(col.ring_all_reduce_steps(vectors(p, 3 * p)))
    for s in steps:
        k = s["step"] + 1
        for j in range(p):
            for c in range(p):
                d = (j - c - 1) % p
                if s["phase"] == "reduce-scatter":
                    want = d + 1 if d <= k else 1
                else:
                    want = p if (j - c) % p <= k else d + 1
                assert s["have"][j][c] == want, (s["phase"], k, j, c)
        received = {(dst, c) for _, dst, c, _ in s["messages"]}
        if s["phase"] == "reduce-scatter":
            assert {s["have"][dst][c] for dst, c in received} == {k + 1}
        else:
            assert {s["have"][dst][c] for dst, c in received} == {p}


def test_one_worker_is_a_no_op():
    v = vectors(1, 5)
    results, sent = col.ring_all_reduce(v)
    assert np.array_equal(results[0], v[0]) and sent == [0]


@pytest.mark.parametrize("bad", [0, -1, 1e9, float("nan"), 2.5, "four", None, True, float("inf")])
def test_bad_worker_counts_are_refused_with_a_message(bad):
    with pytest.raises(ValueError, match="workers"):
        col.check_workers(bad, low=1, high=64)


def test_mismatched_shapes_refused():
    with pytest.raises(ValueError, match="same shape"):
        col.ring_all_reduce([np.zeros(3), np.zeros(4)])


def test_alpha_beta_costs_and_fit():
    a, b = 1e-5, 1e-9
    n = 1e6
    assert col.ring_all_reduce_time(n, 4, a, b) == pytest.approx(6 * a + 1.5 * n * b)
    assert col.tree_all_reduce_time(n, 8, a, b) == pytest.approx(6 * (a + n * b))
    assert col.naive_all_reduce_time(n, 4, a, b) == pytest.approx(3 * (a + n * b))
    assert col.ring_all_gather_time(n, 4, a, b) == pytest.approx(3 * a + 0.75 * n * b)
    # Bandwidth term of the ring tends to 2 n beta: independent of p.
    assert col.ring_all_reduce_time(n, 1024, 0, b) / (2 * n * b) == pytest.approx(1, abs=1e-3)
    sizes = np.array([1e2, 1e3, 1e4, 1e5, 1e6])
    t = np.array([col.ring_all_reduce_time(s, 3, a, b) for s in sizes])
    fa, fb = col.fit_alpha_beta(sizes, t, 3)
    assert math.isclose(fa, a, rel_tol=1e-6) and math.isclose(fb, b, rel_tol=1e-6)


# ---------------------------------------------------------------------------
# A real engine: torch.distributed's gloo all-reduce over localhost, against the ring


def _gloo_sum(rank, world, port, vectors, queue):
    import os
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.from_numpy(vectors[rank].copy())
    dist.all_reduce(t)
    queue.put((rank, t.numpy().copy()))
    dist.destroy_process_group()


def test_gloo_all_reduce_equals_the_ring_to_float32_rounding():
    pytest.importorskip("torch")
    import socket
    from pylib import model
    from pylib.systems import data_parallel as dp
    cfg = model.GPTConfig()
    params = model.init_params(cfg, 0)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, cfg.vocab_size, (8, cfg.block_size)), rng.integers(0, cfg.vocab_size, (8, cfg.block_size))
    p = 2
    grads = [g for _, _, g in dp.worker_sums(params, cfg, x, y, p)]  # the model's real gradients, float32
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from companions import launch
    ctx = launch.context()  # forked from a process that has imported torch, not spawned (1.5 s of CPU each)
    queue = ctx.Queue()
    procs = [ctx.Process(target=_gloo_sum, args=(r, p, port, grads, queue)) for r in range(p)]
    for proc in procs:
        proc.start()
    try:
        sums = dict(queue.get(timeout=120) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    ring = col.ring_all_reduce(grads)[0][0]
    bound = 2 * (p - 1) * 2.0 ** -24 * np.sum(np.abs(np.stack(grads).astype(np.float64)), axis=0)
    for r in range(p):
        assert np.all(np.abs(sums[r].astype(np.float64) - ring) <= bound)
    assert sums[0].tobytes() == sums[1].tobytes()


def _int_vectors(p, n, seed=0):
    return [np.random.default_rng(seed + i).integers(-1000, 1000, n).astype(np.float64) for i in range(p)]


@pytest.mark.parametrize("p", [1, 2, 4, 8, 16])
def test_halving_doubling_sums_in_2_log2_p_steps_sending_the_rings_bytes(p):
    for n in (16 * 3, 37):  # chunks even, and uneven
        vecs = _int_vectors(p, n, seed=n)
        out, sent, steps = col.halving_doubling_all_reduce(vecs)
        exact = np.sum(vecs, axis=0)
        assert all(np.array_equal(o, exact) for o in out)
        assert steps == 2 * int(math.log2(p))
        if n % p == 0:
            assert sent == [2 * (p - 1) * n // p] * p
        a, b = 1e-5, 1e-9  # its alpha-beta time is the slowest worker's: steps latencies, its bytes
        assert col.halving_doubling_all_reduce_time(4 * n, p, a, b) == pytest.approx(
            steps * a + 2 * (p - 1) / p * 4 * n * b)
    with pytest.raises(ValueError, match="power-of-two"):
        col.halving_doubling_all_reduce(_int_vectors(6, 12))


@pytest.mark.parametrize("p", [1, 2, 3, 5, 8])
def test_tree_all_reduce_takes_2_ceil_log2_p_steps_of_the_whole_vector(p):
    n = 24
    vecs = _int_vectors(p, n)
    out, sent, steps = col.tree_all_reduce(vecs)
    assert all(np.array_equal(o, np.sum(vecs, axis=0)) for o in out)
    assert steps == (2 * math.ceil(math.log2(p)) if p > 1 else 0)
    assert all(s % n == 0 for s in sent) and sum(sent) == 2 * (p - 1) * n  # every edge once each way
    a, b = 1e-5, 1e-9
    assert col.tree_all_reduce_time(4 * n, p, a, b) == pytest.approx(steps * (a + 4 * n * b))


@pytest.mark.parametrize("nodes,per_node", [(2, 4), (4, 2), (1, 8), (8, 1), (3, 4)])
def test_two_level_all_reduce_sends_only_a_shard_between_nodes(nodes, per_node):
    p, n = nodes * per_node, 24 * 4
    vecs = _int_vectors(p, n, seed=p)
    out, sent = col.two_level_all_reduce(vecs, per_node)
    assert all(np.array_equal(o, np.sum(vecs, axis=0)) for o in out)
    assert sent["intra"] == [2 * (per_node - 1) * n // per_node] * p
    assert sent["inter"] == [2 * (nodes - 1) * (n // per_node) // nodes] * p
    flat, flat_sent = col.ring_all_reduce(vecs)
    assert sum(sent["inter"]) <= sum(flat_sent)
    # the time: two rings inside the node, one ring of n/g across the nodes
    ia, ib, ea, eb = 2e-6, 1 / 450e9, 1e-5, 1 / 50e9
    want = (2 * (per_node - 1) * ia + 2 * (per_node - 1) / per_node * n * ib
            + col.ring_all_reduce_time(n / per_node, nodes, ea, eb))
    assert col.two_level_all_reduce_time(n, nodes, per_node, ia, ib, ea, eb) == pytest.approx(want)
    with pytest.raises(ValueError, match="do not split"):
        col.two_level_all_reduce(vecs, p + 1)
