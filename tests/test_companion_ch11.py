"""companions/ch11_ddp.py: DDP, ZeroRedundancyOptimizer and FSDP2 against pylib's data-parallel workers.

One launch of 2 gloo processes (a few seconds: each imports torch) serves every test: DDP's
gradient on one batch, then 3 AdamW steps under each engine. With 2 ranks every all-reduced
element is a sum of two floats, which does not depend on the order of addition, so the engines must
agree bit for bit; chapter 11's 4-rank figures (built by `build.py --measure`) show where they stop
agreeing.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companions import ch11_ddp  # noqa: E402
from pylib import model  # noqa: E402
from pylib.systems import collectives as col  # noqa: E402
from test_torch_reference import F32_TOL, U32  # noqa: E402  (the float32 model bound)

CFG = model.GPTConfig()
WORLD, STEPS, BATCH = 2, 3, 4  # 3 steps: DDP rebuilds its buckets in the second, so the third is steady
HYPER = dict(lr=1e-2, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.1)
U = ch11_ddp.U32
F32_TOL_U = F32_TOL / U32  # the float32 model tolerance of tests/test_torch_reference.py, in u
STEP_TOL = 1e-3  # weights against pylib: a thousandth of the steps' size, lr * steps (rounding moves them ~1e-4)


@pytest.fixture(scope="module")
def setup():
    params = model.init_params(CFG, 0)
    rng = np.random.default_rng(0)
    batches = [tuple(rng.integers(0, CFG.vocab_size, (BATCH, CFG.block_size)) for _ in range(2)) for _ in range(STEPS)]
    ranks = ch11_ddp.run(params, CFG, batches, HYPER, WORLD)
    ref = ch11_ddp.pylib_reference(params, CFG, batches, HYPER, WORLD)
    return params, batches, ranks, ref, ch11_ddp.compare(ranks, ref, WORLD)


def test_ddp_all_reduce_equals_the_ring_within_the_float32_sum_bound(setup):
    _, _, ranks, _, cmp = setup
    assert cmp["grad.sum_max_ratio"] <= 1.0
    assert cmp["grad.sum_bit_identical"]  # two terms: a + b == b + a
    # a planted error: one rank's payload off by 4 bounds in one element is caught
    payloads = [r["buckets"][0]["payload"].copy() for r in ranks]
    i = int(np.argmax(np.abs(payloads[1])))
    payloads[1][i] += np.float32(4 * 2 * (WORLD - 1) * U * (abs(payloads[0][i]) + abs(payloads[1][i])))
    assert ch11_ddp.sum_check(ranks[0]["buckets"][0]["result"], payloads)["max_ratio"] > 1.0


def test_ddp_gradient_equals_pylib_data_parallel_to_float32_rounding(setup):
    _, batches, ranks, ref, cmp = setup
    assert cmp["grad.ranks_bit_identical"]
    assert cmp["grad.max_rel_u"] <= F32_TOL_U
    # a planted error: one rank's share alone, as if the all-reduce had been skipped
    params = model.init_params(CFG, 0)
    x, y = batches[0]
    a, b = col.chunk_bounds(BATCH, WORLD)[0]
    _, alone = model.loss_and_grads(params, CFG, x[a:b], y[a:b])
    assert ch11_ddp.max_rel_u(ranks[0]["grads"], alone) > 100 * F32_TOL_U


def test_every_engine_gives_the_same_bits_on_two_ranks(setup):
    cmp = setup[4]
    for engine in ch11_ddp.ENGINES:
        assert cmp[f"{engine}.ranks_bit_identical"], engine
        assert cmp[f"{engine}.vs_ddp_bit_identical"], engine
    assert cmp["pylib.stages_bit_identical"]


def test_engines_weights_match_pylib_zero_steps_to_a_thousandth_of_a_step(setup):
    params, batches, ranks, ref, cmp = setup
    tol = STEP_TOL * HYPER["lr"] * STEPS
    for engine in ch11_ddp.ENGINES:
        assert cmp[f"{engine}.vs_pylib_max_abs"] <= tol, engine
    # a planted error: pylib's steps at a learning rate 1% higher are caught
    off = ch11_ddp.pylib_reference(params, CFG, batches, {**HYPER, "lr": 1.01 * HYPER["lr"]}, WORLD)
    assert ch11_ddp.max_abs(ranks[0]["ddp"]["weights"], off["stages"][0]["weights"]) > tol


def test_bytes_held_per_rank_against_pylibs_zero_table(setup):
    cmp = setup[4]
    N = model.count_params(CFG)
    for part in ("params", "grads"):  # DDP and ZeRO-1 keep everything but the optimiser state
        assert cmp[f"ddp.held.{part}"] == cmp[f"pylib0.held.{part}"] == [4 * N] * WORLD
        assert cmp[f"zero1.held.{part}"] == cmp[f"pylib1.held.{part}"]
    assert cmp["ddp.held.moments"] == cmp["pylib0.held.optimizer"]
    # ZeRO-1: whole parameters per rank, together everything once; AdamW's two moments for each
    assert sum(cmp["zero1.held.updated_elements"]) == N
    assert cmp["zero1.held.moments"] == [8 * e for e in cmp["zero1.held.updated_elements"]]
    assert sum(cmp["zero1.held.moments"]) == sum(cmp["pylib1.held.optimizer"])
    # FSDP2: shards of every parameter, together everything once, each within its padded allocation
    assert sum(cmp["fsdp2.held.params"]) == sum(cmp["pylib3.held.params"]) == 4 * N
    assert sum(cmp["fsdp2.held.grads"]) == 4 * N
    assert all(p <= pad for p, pad in zip(cmp["fsdp2.held.params"], cmp["fsdp2.held.params_padded"]))
    assert cmp["fsdp2.held.moments"] == [2 * p for p in cmp["fsdp2.held.params"]]


def test_ddp_hands_the_whole_gradient_to_all_reduce_and_writes_the_rings_bytes(setup):
    cmp = setup[4]
    N = model.count_params(CFG)
    assert cmp["ddp.bucket_bytes"] == [4 * N]  # one bucket: 21 KB is far below the 25 MiB cap
    assert sum(cmp["ddp_small_buckets.bucket_bytes"]) == 4 * N and len(cmp["ddp_small_buckets.bucket_bytes"]) > 1
    ring = 2 * (WORLD - 1) / WORLD * 4 * N
    for r in range(WORLD):
        step = cmp["ddp.wire_bytes"][r][-1]
        assert step == cmp["collective.all_reduce.wire_bytes"][r]  # a DDP step writes what one all-reduce does
        assert ring <= step < ring + 4 * N / 8  # the ring's bytes plus gloo's headers
        # gloo's reduce-scatter writes as much as its all-reduce (a ring reduce-scatter would write half)
        assert cmp["collective.reduce_scatter.wire_bytes"][r] == cmp["collective.all_reduce.wire_bytes"][r]
