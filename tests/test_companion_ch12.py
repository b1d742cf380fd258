"""Chapter 12's companions: torch.distributed.pipelining's schedules and DTensor's column/row split against pylib.

One launch of 2 gloo processes (companions/launch.py) runs Schedule1F1B on a 2-layer model cut into
2 stages and DTensor on seed 000's FFN, on the model's MLPs and on its MLPs and attention split by
heads; one launch of 4 processes runs ScheduleInterleaved1F1B with 2 chunks per rank (8 virtual
stages) on an 8-layer model, at 8 and at 4 micro-batches. Every test reads their results.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companions import ch12_pipeline, launch  # noqa: E402
from pylib import model  # noqa: E402
from pylib.systems import pipeline, tensor_parallel  # noqa: E402
from test_torch_reference import F32_TOL, U32  # noqa: E402  (the float32 model bound)

CFG = model.GPTConfig(n_layer=2, block_size=16)
DEEP_CFG = model.GPTConfig(n_layer=8, block_size=16)  # 4 ranks x 2 chunks: a block per virtual stage
MICROBATCHES = 4
# tests/test_torch_reference.py holds the companion model to pylib within 32 u per tensor (relative to
# its largest entry); the pipeline adds m micro-batch gradients in another order (m u more), the
# tensor-parallel MLP one all-reduce of two partial sums each way (2 u more)
PIPELINE_TOL = F32_TOL + MICROBATCHES * U32  # the model's bound, plus one u per microbatch summed
TP_TOL = F32_TOL + 2 * U32  # the model's bound, plus the two devices' partial sums
# attention split by heads too: a block's four all-reduces (two forward, two backward), one u each;
# the block outputs (forward only, fewer roundings) are held to the same bound
TP_BLOCK_TOL = F32_TOL + 4 * U32


def _rel(a, b):
    return max(float(np.abs(a[k] - b[k]).max() / np.abs(b[k]).max()) for k in b)


@pytest.fixture(scope="module")
def run():
    params = model.init_params(CFG, 0, np.float32)
    rng = np.random.default_rng(0)
    x = rng.integers(0, CFG.vocab_size, (MICROBATCHES, CFG.block_size))
    y = rng.integers(0, CFG.vocab_size, (MICROBATCHES, CFG.block_size))
    ranks = launch.run(ch12_pipeline.worker, 2, params, CFG, x, y, [("1f1b", MICROBATCHES, 1)], True)
    return params, x, y, ranks


@pytest.fixture(scope="module")
def run4():
    """ScheduleInterleaved1F1B on 4 ranks, 2 chunks each, at m = 8 and at m = p = 4, in one launch."""
    params = model.init_params(DEEP_CFG, 0, np.float32)
    rng = np.random.default_rng(1)
    x = rng.integers(0, DEEP_CFG.vocab_size, (8, DEEP_CFG.block_size))
    y = rng.integers(0, DEEP_CFG.vocab_size, (8, DEEP_CFG.block_size))
    ranks = launch.run(ch12_pipeline.worker, 4, params, DEEP_CFG, x, y, [("interleaved", 8, 2), ("interleaved", 4, 2)])
    return params, x, y, ranks


def _warmup(order):
    return next(i for i, a in enumerate(order) if a[0] == "B")


def test_torch_1f1b_runs_pylibs_order_action_by_action(run):
    ranks = run[3]
    for s, r in enumerate(ranks):
        order = [tuple(a) for a in r["pipeline"][0]["order"]]
        assert order == pipeline.device_order("1f1b", s, 2, MICROBATCHES)
        assert order != pipeline.device_order("gpipe", s, 2, MICROBATCHES)  # a planted wrong order differs
    # torch's own plan of the last stage labels every forward one micro-batch late (F1 ... F4)
    plan = ranks[1]["pipeline"][0]["plan"]
    assert [a for a in plan if a[0] == "F"] == [("F", mb + 1, 0) for mb in range(MICROBATCHES)]


def test_torch_pipeline_gives_the_unsplit_loss_and_gradients(run):
    params, x, y, ranks = run
    loss, grads = model.loss_and_grads(params, CFG, x, y)
    tgrads = {k: g for r in ranks for k, g in r["pipeline"][0]["grads"].items()}
    assert sorted(tgrads) == sorted(grads)  # the tied matrix once: its two copies' gradients summed
    assert abs(ranks[1]["pipeline"][0]["loss"] - loss) <= MICROBATCHES * U32 * loss
    assert _rel(tgrads, grads) <= PIPELINE_TOL
    _, short = model.loss_and_grads(params, CFG, x[1:], y[1:])  # planted: one micro-batch dropped
    assert _rel(short, grads) > PIPELINE_TOL


def test_dtensor_splits_seed_ffn_as_pylib_does(run):
    ex = tensor_parallel.worked_example()
    for d, r in enumerate(run[3]):
        ffn = r["tp"]["ffn"]
        assert ffn["y"] == ex["y"] == [9.0, 6.0] and ffn["dx"] == ex["dx"]
        assert ffn["h"] == [ex["devices"][d]["h"]]
        assert ffn["partial_y"] == ex["devices"][d]["partial_y"]  # before the forward all-reduce
        assert [row[0] for row in ffn["w1_local"]] == ex["devices"][d]["w1_column"]
        assert ffn["w2_local"][0] == ex["devices"][d]["w2_row"]


def test_dtensor_mlp_split_gives_the_unsplit_gradients(run):
    params, x, y, ranks = run
    loss, grads = model.loss_and_grads(params, CFG, x, y)
    for r in ranks:
        assert abs(r["tp"]["mlp_loss"] - loss) <= TP_TOL * loss
        assert _rel(r["tp"]["mlp_grads"], grads) <= TP_TOL
    wrong = dict(ranks[0]["tp"]["mlp_grads"])
    wrong["h.0.mlp.c_fc.weight"] = wrong["h.0.mlp.c_fc.weight"] * (1 + 64 * U32)  # planted: off by 64 u
    assert _rel(wrong, grads) > TP_TOL


def test_torch_interleaved_on_4_ranks_runs_pylibs_order_action_by_action(run4):
    ranks = run4[3]
    for s, r in enumerate(ranks):
        order = [tuple(a) for a in r["pipeline"][0]["order"]]
        mine = pipeline.device_order("interleaved", s, 4, 8, 2)
        assert order == mine
        assert len(order) == 2 * 8 * 2  # a forward and a backward per micro-batch and chunk
        k = next(i for i in range(len(mine) - 1) if mine[i][0] != mine[i + 1][0])
        wrong = mine[:k] + [mine[k + 1], mine[k]] + mine[k + 2:]  # planted: the first F/B pair swapped
        assert order != wrong
        assert [tuple(a) for a in r["pipeline"][0]["plan"]] == order  # its own plan, executed as planned


def test_torch_interleaved_at_m_equal_p_warms_up_by_its_formula_not_megatrons(run4):
    # at m = p pylib (Megatron-LM's 2022 code) runs every forward first; torch warms up with
    # w = min((v-1) p + 2 (p-1-s), v m) forwards (_get_warmup_ops in torch/distributed/pipelining/
    # schedules.py), and its steady phase opens with one more forward: so ranks 2 and 3 differ
    p, m, v = 4, 4, 2
    for s, r in enumerate(run4[3]):
        order = [tuple(a) for a in r["pipeline"][1]["order"]]
        mine = pipeline.device_order("interleaved", s, p, m, v)
        assert _warmup(mine) == v * m
        w = min((v - 1) * p + 2 * (p - 1 - s), v * m)
        assert _warmup(order) == min(w + 1, v * m)
        assert (order == mine) == (s in (0, 1))
        assert sorted(order) == sorted(mine)  # the same actions, in another order


def test_torch_interleaved_on_4_ranks_gives_the_unsplit_loss_and_gradients(run4):
    params, x, y, ranks = run4
    loss, grads = model.loss_and_grads(params, DEEP_CFG, x, y)
    for i, m in enumerate((8, 4)):
        tol = F32_TOL + m * U32  # the model's bound, plus one u per microbatch summed
        tgrads = {k: g for r in ranks for k, g in r["pipeline"][i]["grads"].items()}
        assert sorted(tgrads) == sorted(grads)  # the tied matrix once: ranks 0 and 3's copies summed
        assert abs(ranks[3]["pipeline"][i]["loss"] - loss) <= m * U32 * loss  # the last stage is on rank 3
        assert _rel(tgrads, grads) <= tol
        wrong = dict(tgrads)
        wrong["h.5.attn.c_proj.weight"] = 0 * wrong["h.5.attn.c_proj.weight"]  # planted: a chunk's gradient lost
        assert _rel(wrong, grads) > tol


def _pylib_tp_blocks(params, x):
    h = params["wte"][x] + params["wpe"][:x.shape[1]]
    out = []
    for l in range(CFG.n_layer):
        h, _ = tensor_parallel.tp_block_forward(CFG, params, f"h.{l}.", h, 2, [])
        out.append(h)
    return out


def test_dtensor_attention_split_by_heads_gives_pylibs_shards_outputs_and_gradients(run):
    params, x, y, ranks = run
    loss, grads = model.loss_and_grads(params, CFG, x, y)
    ploss, pgrads, _ = tensor_parallel.tp_loss_and_grads(params, CFG, x, y, 2)
    blocks = _pylib_tp_blocks(params, x)
    shards = tensor_parallel.shard_block(CFG, params, "h.0.", 2)
    for d, r in enumerate(ranks):
        attn = r["tp"]["attn"]
        for name, local in attn["shards"].items():  # each rank's q, k, v rows of its heads, and c_proj's columns
            assert np.array_equal(local, shards[d][name])
        assert abs(attn["loss"] - loss) <= TP_BLOCK_TOL * loss
        assert abs(attn["loss"] - ploss) <= TP_BLOCK_TOL * ploss
        assert _rel(attn["grads"], grads) <= TP_BLOCK_TOL
        assert _rel(attn["grads"], pgrads) <= TP_BLOCK_TOL
        assert len(attn["outputs"]) == CFG.n_layer
        for a, b in zip(attn["outputs"], blocks):
            assert np.abs(a - b).max() <= TP_BLOCK_TOL * np.abs(b).max()


def test_dtensor_colwise_on_packed_qkv_splits_wrongly(run):
    # planted: ColwiseParallel straight on c_attn's packed rows gives rank 0 the queries and half the keys
    params, x, y, ranks = run
    loss, grads = model.loss_and_grads(params, CFG, x, y)
    shards = tensor_parallel.shard_block(CFG, params, "h.0.", 2)
    C = CFG.n_embd
    for d, r in enumerate(ranks):
        packed = r["tp"]["attn_packed"]
        assert np.array_equal(packed["shards"]["attn.c_attn.weight"],
                              params["h.0.attn.c_attn.weight"][d * 3 * C // 2:(d + 1) * 3 * C // 2])
        assert not np.array_equal(packed["shards"]["attn.c_attn.weight"], shards[d]["attn.c_attn.weight"])
        assert abs(packed["loss"] - loss) > TP_BLOCK_TOL * loss
        assert _rel(packed["grads"], grads) > TP_BLOCK_TOL
