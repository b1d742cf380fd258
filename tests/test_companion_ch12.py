"""Chapter 12's companions: torch.distributed.pipelining's 1F1B and DTensor's column/row split against pylib.

One launch of 2 gloo processes (companions/launch.py) runs Schedule1F1B on a 2-layer model cut into
2 stages and DTensor on seed 000's FFN and on the model's MLPs; every test reads its results.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companions import ch12_pipeline, launch  # noqa: E402
from pylib import model  # noqa: E402
from pylib.systems import pipeline, tensor_parallel  # noqa: E402
from test_torch_reference import F32_TOL, U32  # noqa: E402  (the float32 model bound)

CFG = model.GPTConfig(n_layer=2, block_size=16)
MICROBATCHES = 4
# tests/test_torch_reference.py holds the companion model to pylib within 32 u per tensor (relative to
# its largest entry); the pipeline adds m micro-batch gradients in another order (m u more), the
# tensor-parallel MLP one all-reduce of two partial sums each way (2 u more)
PIPELINE_TOL = F32_TOL + MICROBATCHES * U32  # the model's bound, plus one u per microbatch summed
TP_TOL = F32_TOL + 2 * U32  # the model's bound, plus the two devices' partial sums


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
