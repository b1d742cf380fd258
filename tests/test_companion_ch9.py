"""Chapter 9's companion: PyTorch's autocast and GradScaler against pylib's bf16 recipe and loss scaler.

Small sizes (a batch of 4 windows of the course model); the chapter-scale comparison runs in
`build.py --measure --only ch9` (experiments/ch9.py, part_torch). The fp16 run is the chapter's own
(experiments/ch9.py, part_torch_fp16's fp16_runs), a hundred steps, a few seconds.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from companions import ch9_autocast as c9  # noqa: E402
from companions import model as torch_gpt  # noqa: E402
from experiments import ch9 as ch9_experiments  # noqa: E402
from experiments.ch9 import FP16_RUN, SCALER_RUN, fp16_run_scaler_kw  # noqa: E402
from pylib import model, train  # noqa: E402
from pylib.schedules import lr_at  # noqa: E402
from pylib.systems import mixed_precision as mp  # noqa: E402

CFG = model.GPTConfig()
TCFG = train.TrainConfig(batch_size=4)
B, T, C, V, L = TCFG.batch_size, CFG.block_size, CFG.n_embd, CFG.vocab_size, CFG.n_layer


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(9)
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


@pytest.fixture(scope="module")
def runs(batch):
    return c9.one_step_runs(CFG, TCFG, *batch)


# ---------------------------------------------------------------------------
# One step


def test_companions_pylib_step_is_the_chapters_one_step_comparison(runs, batch):
    ours = c9.compare_runs(runs["pylib_bf16"], runs["pylib_fp32"], CFG)
    chapter = mp.one_step_comparison(CFG, TCFG, *batch, "bf16_master")
    for field in ("logits_rel", "loss_abs", "grads_rel_all", "update_rel", "update_sign_differs", "flips_resolved"):
        assert ours[field] == chapter[field], field


def test_autocast_step_is_within_the_chapters_bf16_tolerances_of_float32(runs):
    out = c9.compare_runs(runs["torch_autocast"], runs["pylib_fp32"], CFG)
    assert out["all_ok"], out
    # ... and it really is a bfloat16 step: further from float32 than float32 rounding (u = 2^-24) could put it
    assert out["logits_rel"] > 2 ** -9 / 4 and out["grads_rel_all"] > 2 ** -9 / 4


def test_one_step_checks_fail_on_a_planted_fp8_forward(runs, batch):
    params = train.init_train_state(CFG, TCFG)["params"]
    lr = lr_at(TCFG.schedule, 0, TCFG.lr, TCFG.warmup_steps, TCFG.steps, TCFG.min_lr, TCFG.decay_frac)
    fp8 = c9.pylib_run(params, CFG, TCFG, *batch, lr, "fp8")
    out = c9.compare_runs(fp8, runs["pylib_fp32"], CFG)  # judged at bf16's tolerances
    assert not out["logits_ok"] and not out["all_ok"]


def test_torch_float32_step_matches_pylib_to_float32_rounding(runs):
    """Without autocast the engine's step is pylib's to float32 rounding (test_torch_reference's 32 u): the same
    weights, batch, learning rate and AdamW groups, the gradients named as pylib names them."""
    out = c9.compare_runs(runs["torch_fp32"], runs["pylib_fp32"], CFG)
    assert out["logits_rel"] < 32 * 2.0 ** -24 and out["grads_rel_all"] < 32 * 2.0 ** -24, out
    assert out["flips_resolved"] == 0


# ---------------------------------------------------------------------------
# What autocast runs in which dtype, and what it stores


def test_cpu_autocast_lowers_products_and_raises_only_the_loss():
    """CPU autocast's lists (ATen autocast_mode.cpp, AutocastCPU): linear lowered, cross_entropy_loss in float32;
    softmax, layer_norm and GELU are on neither, so they follow their input (CUDA's list has softmax and layer_norm)."""
    got = {name: (c9.op_dtype_under_autocast(op, torch.bfloat16), c9.op_dtype_under_autocast(op, torch.float32))
           for name, op in c9.PROBES.items()}
    assert got == {"linear": ("bfloat16", "bfloat16"), "cross_entropy": ("float32", "float32"),
                   "softmax": ("bfloat16", "float32"), "layer_norm": ("bfloat16", "float32"),
                   "gelu": ("bfloat16", "float32")}


def test_autocast_census_of_the_course_model(batch):
    net = torch_gpt.from_pylib(train.init_train_state(CFG, TCFG)["params"], CFG)
    census = c9.autocast_census(net, *batch)
    ops = c9.compute_ops_by_dtype(census["ops"])
    assert ops["float32"] == ["_log_softmax", "add", "embedding", "native_layer_norm", "nll_loss_forward"]
    assert ops["bfloat16"] == ["_softmax", "addmm", "bmm", "gelu", "masked_fill", "mm", "mul"]
    saved = c9.saved_bytes(census["saved"])
    norms = 2 * L + 1
    # float32 kept for backward: each norm's input (the residual stream), mean and rstd; the log-probabilities; the loss
    assert saved["float32"] == norms * (B * T * C + 2 * B * T) * 4 + B * T * V * 4 + 4
    probs = [r for r in census["saved"] if r["producer"] == "_softmax"]
    assert [r["dtype"] for r in probs] == ["bfloat16"] * L and probs[0]["bytes"] == B * CFG.n_head * T * T * 2
    # the bfloat16 copies autocast makes of the weights, kept too: each matrix once (c_attn, c_proj, c_fc, c_proj; lm_head)
    casts = c9.saved_bytes(census["saved"], "weight cast")
    assert casts == {"bfloat16": 2 * (L * 12 * C * C + V * C)}
    assert c9.saved_bytes(c9.autocast_census(net, *batch, None)["saved"]).get("bfloat16") is None


def test_cpu_autocast_puts_the_same_ops_in_float16_as_in_bfloat16(batch):
    """CPU autocast has one lower-precision list for both 16-bit types: in float16 the course model's ops split as
    they do in bfloat16 (the fp16 run's engine rounds where the one-step comparison's does)."""
    net = torch_gpt.from_pylib(train.init_train_state(CFG, TCFG)["params"], CFG)
    bf16 = c9.compute_ops_by_dtype(c9.autocast_census(net, *batch)["ops"])
    fp16 = c9.compute_ops_by_dtype(c9.autocast_census(net, *batch, torch.float16)["ops"])
    assert fp16 == {"float16": bf16["bfloat16"], "float32": bf16["float32"]}


# ---------------------------------------------------------------------------
# Loss scaling

SCALER_KW = {**{k: mp.SCALER[k] for k in ("init_scale", "growth_factor", "backoff_factor")},
             "growth_interval": SCALER_RUN["growth_interval"]}


@pytest.fixture(scope="module")
def scaler_grads():
    r = SCALER_RUN
    return c9.gradient_sequence(r["steps"], r["elements"], r["seed"], r["nan_steps"], r["spike_steps"])


@pytest.fixture(scope="module")
def pylib_trajectory(scaler_grads):
    return c9.scaler_trajectory_pylib(scaler_grads, **SCALER_KW)


def test_grad_scaler_trajectory_equals_dynamic_loss_scaler(scaler_grads, pylib_trajectory):
    ours = c9.scaler_trajectory_torch(scaler_grads, **SCALER_KW)
    assert c9.trajectory_differences(ours, pylib_trajectory) == {"scale": [], "skipped": [], "gradient": []}
    skipped = [t for t, s in enumerate(ours["skipped"]) if s]
    assert set(SCALER_RUN["nan_steps"]) | set(SCALER_RUN["spike_steps"]) < set(skipped)  # and overflows of its own
    assert sum(b > a for a, b in zip(ours["scale"], ours["scale"][1:])) >= 2  # the scale grew, more than once


@pytest.mark.parametrize("planted", [{"backoff_factor": 0.25}, {"growth_interval": SCALER_RUN["growth_interval"] + 1},
                                     {"init_scale": 2.0 ** 15}], ids=["backoff", "interval", "init_scale"])
def test_scaler_comparison_detects_a_planted_setting(scaler_grads, pylib_trajectory, planted):
    ours = c9.scaler_trajectory_torch(scaler_grads, **{**SCALER_KW, **planted})
    assert c9.trajectory_differences(ours, pylib_trajectory)["scale"]


# ---------------------------------------------------------------------------
# fp16 on the course model: autocast(float16) and GradScaler against pylib's fp16_dynamic recipe


@pytest.fixture(scope="module")
def fp16_runs(shared_corpus):
    """The chapter's fp16 run (experiments.ch9.FP16_RUN), each way part_torch_fp16 runs it."""
    return ch9_experiments.fp16_runs(shared_corpus)


@pytest.fixture(scope="module")
def fp16_setup(shared_corpus, fp16_runs):
    cfg = model.GPTConfig(vocab_size=shared_corpus.vocab.size)
    tcfg = train.TrainConfig(seed=FP16_RUN["seed"], final_eval=False)
    p = fp16_runs["pylib_fp16"]
    return cfg, tcfg, p["params0"], p["batches"]


def _differences(runs, a, b):
    return c9.fp16_run_differences(runs[a], runs[b], runs["pylib_fp16"]["params0"])


def test_fp16_engine_skips_halves_and_grows_at_the_emulations_steps(fp16_runs):
    """GradScaler over autocast(float16) and DynamicLossScaler over the emulation take the same decisions at every
    step: the same steps skipped, the same scale after each. The run shows all three: skips from the start (the
    scale too large), a halving after each, and a growth after growth_interval clean steps."""
    torch_run, pylib_run = fp16_runs["torch_fp16"], fp16_runs["pylib_fp16"]
    assert torch_run["skipped"] == pylib_run["skipped"] and torch_run["scale"] == pylib_run["scale"]
    scale = torch_run["scale"]
    assert torch_run["skipped"][0] and scale[1] == scale[0] * mp.SCALER["backoff_factor"]
    assert any(b == a * mp.SCALER["growth_factor"] for a, b in zip(scale, scale[1:]))
    assert sum(b < a for a, b in zip(scale, scale[1:])) == sum(torch_run["skipped"][:-1])  # a halving per skip


def test_fp16_engine_is_as_near_the_emulation_as_float16_moves_either(fp16_runs):
    """The engine rounds in other places than the emulation (products' outputs, softmax and GELU in float16; the
    norms' and embeddings' gradients in float32), so the two drift apart as float16 moves each away from float32.
    Two runs with independent rounding errors of size E end about sqrt(2) E apart; the tolerance is 2 E, E being
    float16's effect on the emulated run (against float32 with the same steps skipped), in the weights after the run
    (relative to how far they moved) and in each step's loss."""
    ours = _differences(fp16_runs, "torch_fp16", "pylib_fp16")
    own = _differences(fp16_runs, "pylib_fp16", "fp32_same_skips")
    assert ours["weights_rel_moved"] <= 2 * own["weights_rel_moved"], (ours, own)
    assert ours["loss_max_abs"] <= 2 * own["loss_max_abs"], (ours, own)
    assert own["weights_rel_moved"] > 2 ** -11  # and float16 did move the emulated run: more than its unit roundoff


def test_fp16_run_harness_matches_pylib_in_float32(fp16_runs):
    """Without autocast and scaler the engine follows pylib's float32 run over the same batches, learning rates and
    AdamW steps: the first loss to float32 rounding (test_torch_reference's 32 u), and the weights after the run
    far nearer than float16 moves them (float32's u = 2^-24 is 2^13 times finer than float16's; 10x is the margin)."""
    floor = _differences(fp16_runs, "torch_fp32", "pylib_fp32")
    assert floor["loss_step0_abs"] <= 32 * 2.0 ** -24 * fp16_runs["pylib_fp32"]["loss"][0]
    own = _differences(fp16_runs, "pylib_fp16", "fp32_same_skips")
    assert floor["weights_rel_moved"] < own["weights_rel_moved"] / 10, (floor, own)


def _step_without_unscale(net, opt, scaler, x, y, grad_clip):
    """Planted: fp16_scaled_step with scaler.unscale_ left out, so clip_grad_norm_ clips the SCALED gradients."""
    with torch.autocast("cpu", dtype=torch.float16):
        _, loss = net(x, y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
    scaler.step(opt)
    scaler.update()
    return loss


class _NeverBacksOff(torch.amp.GradScaler):
    """Planted: a GradScaler that skips an overflowing step but keeps its scale."""

    def update(self, new_scale=None):
        before = self.get_scale()
        super().update(new_scale)
        if self.get_scale() < before:
            super().update(before)


def test_fp16_comparison_fails_when_unscale_comes_after_clipping(fp16_runs, fp16_setup):
    cfg, tcfg, params0, batches = fp16_setup
    bad = c9.fp16_run_torch(params0, cfg, tcfg, batches, fp16_run_scaler_kw(), step=_step_without_unscale)
    ours = c9.fp16_run_differences(bad, fp16_runs["pylib_fp16"], params0)
    own = _differences(fp16_runs, "pylib_fp16", "fp32_same_skips")
    assert ours["weights_rel_moved"] > 2 * own["weights_rel_moved"], (ours, own)


def test_fp16_comparison_fails_for_a_scaler_that_never_backs_off(fp16_runs, fp16_setup):
    cfg, tcfg, params0, batches = fp16_setup
    n = 10  # the first steps skip: enough to see the scale stay where it overflowed
    bad = c9.fp16_run_torch(params0, cfg, tcfg, batches[:n], fp16_run_scaler_kw(), scaler_cls=_NeverBacksOff)
    assert bad["scale"] != fp16_runs["pylib_fp16"]["scale"][:n] and all(bad["skipped"])
