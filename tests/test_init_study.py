"""Chapter 7 on CPython: statistics at initialisation, the coordinate check, the learning-rate sweep
summary, and the page ops (pylib.web.init_ops) with the reader's input validated."""

import dataclasses
import math

import numpy as np
import pytest

from pylib import data, model, web
from pylib.studies import init_study
from pylib.web import init_ops as web_init
from pylib.web import InputError

CFG = model.GPTConfig()  # the course model: V = 65, T = 64, C = 16


@pytest.fixture(scope="module")
def corpus(shared_corpus):
    return shared_corpus


@pytest.fixture(scope="module")
def batch(corpus):
    return data.eval_windows(corpus.val, 4, CFG.block_size)


@pytest.fixture(scope="module")
def session(corpus):
    s = web.Session()
    s.vocab, s.train_tokens, s.val_tokens = corpus.vocab, corpus.train, corpus.val
    return s


# ---------------------------------------------------------------------------
# Statistics at initialisation


def test_small_init_gives_loss_ln_vocab(batch):
    x, y = batch
    stats = init_study.init_stats(dataclasses.replace(CFG, init_std=1e-4), 0, x, y)
    assert stats["loss"] == pytest.approx(math.log(CFG.vocab_size), abs=1e-3)


def test_large_init_scale_raises_loss_and_activations(batch):
    x, y = batch
    cfg = dataclasses.replace(CFG, n_layer=3)
    small, large = init_study.init_scale_sweep(cfg, [0.02, 1.0], 0, x, y)
    assert large["loss"] > small["loss"] + 1.0
    assert all(b > 10 * a for a, b in zip(small["act_std"], large["act_std"]))
    assert len(small["act_std"]) == cfg.n_layer + 1 and len(small["grad_norm"]) == cfg.n_layer


def test_post_ln_normalises_every_block_output(batch):
    x, y = batch
    post = init_study.depth_stats(CFG, [4], ("post",), 0, x, y)["post"][0]
    assert post["act_std"][0] < 0.1  # the embeddings: N(0, 0.02) token plus position rows
    assert post["act_std"][1:] == pytest.approx([1.0] * 4, abs=1e-3)  # LayerNorm, unit gain, zero bias


def test_block_grad_norms_are_the_norms_of_each_blocks_gradients(batch):
    x, y = batch
    cfg = dataclasses.replace(CFG, n_layer=2)
    params = model.init_params(cfg, 0)
    _, grads = model.loss_and_grads(params, cfg, x, y)
    norms = init_study.block_grad_norms(grads, cfg)
    by_hand = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for n, g in grads.items() if n.startswith("h.1.")))
    assert norms[1] == pytest.approx(by_hand, rel=1e-9)
    assert init_study.init_stats(cfg, 0, x, y)["grad_norm"] == pytest.approx(norms, rel=1e-6)


def test_rms_of_a_constant_is_its_absolute_value():
    assert init_study.rms(np.full((3, 4), -2.5, dtype=np.float32)) == pytest.approx(2.5)


# ---------------------------------------------------------------------------
# The coordinate check


def coord(corpus, width, mup, steps=3, lr=init_study.COORD_LR):
    mcfg, tcfg = init_study.coord_train_config(dataclasses.replace(CFG, vocab_size=corpus.vocab.size), width, mup, 0, lr)
    x = data.eval_windows(corpus.val, 2, CFG.block_size)[0]
    return init_study.coord_check(mcfg, tcfg, corpus.train, x, steps)


def test_coord_check_grows_with_width_under_sp_and_stays_flat_under_mup(corpus):
    sp16, sp64 = coord(corpus, 16, False), coord(corpus, 64, False)
    mu16, mu64 = coord(corpus, 16, True), coord(corpus, 64, True)
    assert sp64["residual"][-1] > 2.0 * sp16["residual"][-1]
    assert 0.5 < mu64["residual"][-1] / mu16["residual"][-1] < 1.5
    assert 0.5 < mu64["logits"][-1] / mu16["logits"][-1] < 1.5


def test_mup_at_its_base_width_is_standard_parameterisation(corpus):
    assert coord(corpus, init_study.COORD_BASE_WIDTH, True) == coord(corpus, init_study.COORD_BASE_WIDTH, False)


def test_coord_check_labels_a_diverged_run_and_reports_nothing_after_it(corpus):
    r = coord(corpus, 32, False, steps=4, lr=10.0)
    assert r["diverged_at"] is not None
    t = r["diverged_at"] + 1  # sizes are taken after t steps; the diverged step was not applied
    assert all(r[k][t] is None for k in init_study.COORD_KEYS)
    assert all(v is not None for k in init_study.COORD_KEYS for v in r[k][:t])


def test_lr_sweep_summary_keeps_diverged_runs_apart():
    s = init_study.lr_sweep_summary([0.1, 0.2, 0.4], [[2.0, 2.2], [1.5, None], [1.8, 1.9]])
    assert s["mean"] == [pytest.approx(2.1), None, pytest.approx(1.85)]
    assert s["diverged"] == [0, 1, 0] and s["best_lr"] == 0.4
    assert init_study.lr_sweep_summary([0.1], [[None]])["best_lr"] is None


def test_depth_train_config_is_the_measured_setting():
    mcfg, tcfg = init_study.depth_train_config(CFG, 8, "post", False, 3)
    assert (mcfg.n_layer, mcfg.norm_position, tcfg.warmup_steps, tcfg.seed) == (8, "post", 0, 3)
    assert tcfg.steps == init_study.DEPTH_TRAIN["steps"]
    assert init_study.depth_train_config(CFG, 8, "pre", True, 0)[1].warmup_steps == init_study.DEPTH_WARMUP


def test_depth_rate_grid_changes_only_the_rate_and_contains_the_pages_rate():
    # The page's band is the grid's runs at the page's rate: same config, so the same subset curve.
    page = init_study.depth_train_config(CFG, 8, "post", True, 1)[1]
    assert page.lr == init_study.DEPTH_TRAIN["lr"] and page.lr in init_study.DEPTH_LRS
    assert page.eval_windows == init_study.DEPTH_TRAIN["eval_windows"] and not page.final_eval
    other = init_study.depth_train_config(CFG, 8, "post", True, 1, lr=init_study.DEPTH_LRS[0])[1]
    assert other.lr == init_study.DEPTH_LRS[0] != page.lr
    assert dataclasses.replace(other, lr=page.lr) == page


def test_position_embedding_at_unit_std_makes_the_stream_enter_block_one_at_size_one(batch):
    x, y = batch
    cfg = dataclasses.replace(CFG, n_layer=3, norm_position="post")
    small = init_study.init_stats(cfg, 0, x, y)
    unit = init_study.init_stats(cfg, 0, x, y, wpe_std=1.0)
    assert small["act_std"][0] == pytest.approx(math.sqrt(2) * CFG.init_std, rel=0.2)
    assert unit["act_std"][0] == pytest.approx(1.0, rel=0.1)
    # the small stream's first post-LN norm divides by ~0.03: block 1's gradient is far above block 2's;
    # at unit size that excess is gone
    assert small["grad_norm"][0] > 5 * small["grad_norm"][1]
    assert unit["grad_norm"][0] < 1.5 * unit["grad_norm"][1]


# ---------------------------------------------------------------------------
# The page ops


@pytest.mark.parametrize("raw", ["", "0", "-0.02", "NaN", "inf", "1e9", "🎭", "<b>x</b>", None])
def test_init_scale_refuses_bad_init_stds(session, raw):
    with pytest.raises(InputError) as e:
        web_init.init_scale(session, {"init_std": raw, "depth": "2"})
    assert set(e.value.errors) == {"init_std"}


@pytest.mark.parametrize("raw", ["", "0", "9", "2.5", "-1", "x"])
def test_init_scale_refuses_bad_depths(session, raw):
    with pytest.raises(InputError) as e:
        web_init.init_scale(session, {"init_std": "0.02", "depth": raw})
    assert set(e.value.errors) == {"depth"}


def test_init_scale_zero_std_explains_itself(session):
    with pytest.raises(InputError) as e:
        web_init.init_scale(session, {"init_std": "0", "depth": "1"})
    assert "zero" in e.value.errors["init_std"]


def test_init_scale_op_returns_one_std_per_layer(session):
    r = web_init.init_scale(session, {"init_std": "0.02", "depth": "3"})
    assert len(r["act_std"]) == 4 and r["loss"] == pytest.approx(r["ln_vocab"], abs=0.05)


def test_depth_norms_op_returns_both_placements(session):
    r = web_init.depth_norms(session, {"depth": "5"})
    assert len(r["pre"]["grad_norm"]) == len(r["post"]["grad_norm"]) == 5


@pytest.mark.parametrize("args", [{"depth": "0", "position": "pre", "warmup": True, "seed": "0"},
                                  {"depth": "4", "position": "<script>", "warmup": True, "seed": "0"},
                                  {"depth": "4", "position": "pre", "warmup": "yes", "seed": "0"},
                                  {"depth": "4", "position": "pre", "warmup": True, "seed": "-3"}])
def test_depth_run_refuses_bad_settings(session, args):
    with pytest.raises(InputError):
        web_init.depth_start(session, args)


def test_depth_run_gets_a_band_only_for_a_measured_setting(session):
    key = init_study.depth_train_key(init_study.DEPTH_TRAIN_DEPTHS[0], "pre", True)
    curve = {"steps": [0, 50, 149], "val_mean": [4.2, 3.0, 2.8], "val_sd": [0.01, 0.02, 0.02]}
    args = {"depth": str(init_study.DEPTH_TRAIN_DEPTHS[0]), "position": "pre", "warmup": True, "seed": "0",
            "curves": {key: curve}}
    info = web_init.depth_start(session, args)
    assert info["band_key"] == key and len(info["band"]["mean"]) == info["steps"]
    chunk = web_init.depth_chunk(session, {})
    assert chunk["records"] and chunk["records"][0]["val"] is not None
    web_init.depth_finish(session, {})
    info = web_init.depth_start(session, {**args, "depth": "2"})
    assert info["band"] is None
    web_init.depth_finish(session, {})


@pytest.mark.parametrize("lr", ["", "0", "-1", "nan", "1e6", "🎭"])
def test_coord_run_refuses_bad_learning_rates(session, lr):
    with pytest.raises(InputError) as e:
        web_init.coord_start(session, {"lr": lr, "seed": "0"})
    assert set(e.value.errors) == {"lr"}


def test_coord_run_does_one_width_per_chunk(session):
    info = web_init.coord_start(session, {"lr": "0.01", "seed": "0"})
    c = web_init.coord_chunk(session, {})
    assert c["item"]["width"] == info["widths"][0] and c["item"]["param"] == "sp" and not c["done"]
    assert len(c["item"]["residual"]) == info["steps"] + 1
    r = web_init.coord_finish(session, {})
    assert len(r["items"]) == 1 and not r["complete"]
