"""companions/ch10_checkpoint.py: torch.utils.checkpoint per block against pylib's full and selective recomputation.

Gradients: recomputed (fully, or selectively with AttentionCorePolicy) equals plain element for element,
and all equal pylib's to rounding. Bytes: what the saved-tensor hooks (and the policy) count equals the
companion's prediction to the byte, full checkpointing lowers it by exactly the blocks' caches less their
inputs, the differences from pylib's count and from the memory profiler's are the named terms, counting
a view's storage twice is caught, and so is a policy that saves the softmax.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companions import ch10_checkpoint as ckpt  # noqa: E402
from companions import model as torch_gpt  # noqa: E402
from pylib import model  # noqa: E402
from pylib.systems import checkpointing, memory  # noqa: E402
from test_torch_reference import F32_TOL, U32, trained_like_params  # noqa: E402  (the reference test's weights and bound)

CFG = model.GPTConfig(n_layer=2, block_size=16)  # two blocks: one checkpoint's input is the other's output
B, T = 2, 8
F64_TOL = 1e-12  # float64's u is 1.1e-16: 1e-12 leaves room for ~10^4 roundings, and catches any real error


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def batch(cfg, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, cfg.vocab_size, (B, T)), rng.integers(0, cfg.vocab_size, (B, T))


@pytest.fixture(scope="module")
def float32_run():
    return ckpt.compare(trained_like_params(CFG, 0), CFG, *batch(CFG), torch.float32)


# ---------------------------------------------------------------------------
# Gradients


def test_checkpointed_gradients_equal_plain_and_pylib_in_float64():
    r = ckpt.compare(trained_like_params(CFG, 0), CFG, *batch(CFG), torch.float64, count=False)
    assert r["unequal_to_plain"] == {"selective": 0, "full": 0}  # recomputation: the same kernels on the same inputs
    for mode in ckpt.MODES:
        worst = max(r["grads"][mode].items(), key=lambda kv: kv[1])
        assert worst[1] <= F64_TOL, (mode, worst)


def test_checkpointed_gradients_equal_plain_and_pylib_in_float32(float32_run):
    assert float32_run["unequal_to_plain"] == {"selective": 0, "full": 0}
    for mode in ckpt.MODES:
        worst = max(float32_run["grads"][mode].items(), key=lambda kv: kv[1])
        assert worst[1] <= F32_TOL, f"{mode}: {worst[0]} differs by {worst[1] / U32:.1f} u"


def test_gradient_comparison_catches_a_block_that_is_not_recomputed_faithfully():
    params = trained_like_params(CFG, 0)
    x, y = batch(CFG)
    net = torch_gpt.from_pylib(params, CFG, torch.float64)
    block = net.transformer.h[0]
    forward = block.forward
    calls = []

    def drifting(h):  # a planted error: the recomputation sees its input nudged by one part in a million
        calls.append(1)
        return forward(h if len(calls) == 1 else h * (1 + 1e-6))

    block.forward = drifting
    ckpt.loss(net, torch.from_numpy(x), torch.from_numpy(y), "full").backward()
    assert len(calls) == 2  # the forward, then its recomputation in the backward
    _, ref, _ = checkpointing.step(params, CFG, x, y, "full")
    worst = max(ckpt.relative_differences(ref, torch_gpt.named_grads(net)).values())
    assert worst > 1e4 * F64_TOL  # about 1e-6


# ---------------------------------------------------------------------------
# Bytes


def test_saved_bytes_equal_the_prediction_with_and_without_checkpointing(float32_run):
    for mode in ckpt.MODES:
        predicted = ckpt.torch_saved_bytes(CFG, B, T, mode)["total"]
        assert float32_run["saved"][mode] == predicted == float32_run["predicted"][mode], mode


def test_checkpointing_saves_every_block_cache_but_its_input(float32_run):
    plain = ckpt.torch_saved_bytes(CFG, B, T)
    lower = float32_run["saved"]["none"] - float32_run["saved"]["full"]
    assert lower == CFG.n_layer * (plain["per_layer"] - B * T * CFG.n_embd * 4) > 0


def test_differences_from_pylibs_count_are_the_named_terms(float32_run):
    for mode in ckpt.MODES:
        pylib_count = memory.recompute_bytes(CFG, B, T, mode)["stored"]
        assert float32_run["pylib_stored"][mode] == pylib_count  # pylib's step, counted, equals its formula
        assert pylib_count - float32_run["saved"][mode] == sum(ckpt.pylib_minus_torch(CFG, B, T, mode).values()), mode


def test_profiler_counts_the_hooks_bytes_and_the_named_extras(float32_run):
    for mode in ckpt.MODES:
        extra = ckpt.profiler_minus_hooks(CFG, B, T, mode)
        assert float32_run["profiled"][mode] - float32_run["saved"][mode] == sum(extra.values()), mode
    assert ckpt.rng_state_bytes() > 0


def test_counting_views_twice_is_caught():
    params = trained_like_params(CFG, 0)
    x, y = (torch.from_numpy(a) for a in batch(CFG))
    net = torch_gpt.from_pylib(params, CFG, torch.float32)
    _, rows = ckpt.saved_tensors(net, lambda: ckpt.loss(net, x, y))
    predicted = ckpt.torch_saved_bytes(CFG, B, T)["total"]
    assert ckpt.distinct_bytes(rows) == predicted
    # A planted error: every saved tensor's storage counted, views of one storage as many times as saved
    # (the probabilities are saved by softmax and again, as a view, by the bmm that reads them).
    assert sum(nbytes for _, nbytes in rows) > predicted


# ---------------------------------------------------------------------------
# Selective recomputation: the policy


class SavesTheSoftmax(ckpt.AttentionCorePolicy):
    """A planted error: the probabilities are saved, not recomputed (the one tensor selective is for)."""

    def save(self, op, outputs):
        return op == torch.ops.aten._softmax.default or super().save(op, outputs)


def test_selective_drops_the_attention_core_and_keeps_the_projections_outputs(float32_run):
    # Per block, selective drops what autograd keeps of the core: matmul's copies of q, k^T and v (3BTC), the
    # probabilities (B H T^2 floats) and the mask (T^2 bools). It keeps qkv (3BTC) and, since a policy saves
    # operations' outputs, not what backward needs, both projections' outputs (2BTC).
    H, btc = CFG.n_head, B * T * CFG.n_embd * 4
    core = 3 * btc + B * H * T * T * 4 + T * T
    assert float32_run["saved"]["none"] - float32_run["saved"]["selective"] == CFG.n_layer * (core - 3 * btc - 2 * btc)


def test_a_policy_that_saves_the_softmax_fails_the_bytes_count(float32_run):
    good = float32_run
    bad = ckpt.compare(trained_like_params(CFG, 0), CFG, *batch(CFG), torch.float32, policy=SavesTheSoftmax)
    probs = CFG.n_layer * B * CFG.n_head * T * T * 4  # one float32 (B, H, T, T) per block
    predicted = ckpt.torch_saved_bytes(CFG, B, T, "selective")["total"]
    assert good["saved"]["selective"] == predicted
    assert bad["saved"]["selective"] - predicted == probs  # the bytes test's equality fails by the probabilities
    assert bad["profiled"]["selective"] - good["profiled"]["selective"] == probs  # the profiler sees them too
    assert bad["unequal_to_plain"]["selective"] == 0  # and the gradients cannot tell: only the bytes catch it


def test_selective_policy_refuses_shapes_where_the_core_is_not_distinct():
    with pytest.raises(ValueError, match="not distinct"):
        ckpt.AttentionCorePolicy(model.GPTConfig(n_head=1), B, T)  # one head: (B*H, T, D) is (B, T, C)



def test_the_profiler_window_starts_after_a_collection_and_has_none_inside():
    # CI once counted 5,056 bytes fewer for one step: an earlier graph, in a reference cycle, held
    # checkpoint's stashed RNG state (5,056 bytes) and the cycle collector freed it inside the
    # profiling window. So the window opens after a collection, and none can run inside it.
    import gc
    import weakref

    class Cycle:
        pass

    held = Cycle()
    held.me, held.t = held, torch.get_rng_state()
    dropped = weakref.ref(held)
    del held  # garbage now, but only the collector frees it
    seen = {}

    def step():
        seen["garbage left"], seen["collector on"] = dropped() is not None, gc.isenabled()
        return torch.ones(10)

    assert gc.isenabled()
    _, counted = ckpt.profiled_bytes(step)
    assert seen == {"garbage left": False, "collector on": False}
    assert gc.isenabled()  # and it is back on afterwards
    assert counted == 10 * 4
