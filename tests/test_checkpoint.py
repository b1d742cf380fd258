"""Checkpoints: a resume is bit for bit the uninterrupted run; a bad file gets a clear error and
the current run is kept; resuming without the optimiser state; the replay; monitoring's export
and health checks."""

import base64
import dataclasses
import io
import json
import math
import pickle
import zipfile

import numpy as np
import pytest

from pylib import checkpoint, data, guards, model, train
from pylib.checkpoint import CheckpointError
from pylib.studies import monitoring, resume, stability

CFG = model.GPTConfig()
SHORT = train.TrainConfig(steps=40, warmup_steps=5, eval_interval=10, eval_windows=8)


@pytest.fixture(scope="module")
def corpus(shared_corpus):
    return shared_corpus


@pytest.fixture(scope="module")
def tokens(corpus):
    assert corpus.vocab.size == CFG.vocab_size
    return corpus.train, corpus.val


def strip(history):
    return [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in history]


def saved_at(tokens, k, cfg=SHORT, mcfg=CFG, log=False):
    """(state after k steps, its checkpoint bytes, the records so far)."""
    state = train.init_train_state(mcfg, cfg)
    head = train.train_steps(state, mcfg, cfg, *tokens, k)
    return state, checkpoint.checkpoint_bytes(state, mcfg, cfg, log=head if log else None), head


# ---------------------------------------------------------------------------
# Resuming bit for bit


@pytest.mark.parametrize("optimizer,extra", [("adamw", {}), ("sgd", {}), ("muon", {}), ("adamw", {"skip_factor": 1.5}),
                                             ("adamw", {"grad_accum": 2})])
def test_resume_equals_uninterrupted_run_bit_for_bit(tokens, optimizer, extra):
    cfg = dataclasses.replace(SHORT, optimizer=optimizer, **extra)
    final, full = train.train(CFG, cfg, *tokens)  # the uninterrupted run: its weights and its records
    k = 17
    _, ckpt, head = saved_at(tokens, k, cfg)
    state, mcfg, tcfg, log = checkpoint.load_checkpoint(ckpt, CFG)  # a fresh state, nothing shared
    assert (mcfg, tcfg, log) == (CFG, cfg, None)
    assert state["params"]["wte"].dtype == np.float32
    tail = train.train_steps(state, mcfg, tcfg, *tokens, 1000)
    assert strip(head + tail) == strip(full)  # every loss, grad norm, eval: identical floats
    for name in final:
        np.testing.assert_array_equal(state["params"][name], final[name])


def test_checkpoint_holds_what_a_resume_needs(tokens):
    state, ckpt, head = saved_at(tokens, 12, log=True)
    state["loss_scaler"] = {"scale": 1024.0, "good_steps": 7.0}
    data_ = checkpoint.checkpoint_bytes(state, CFG, SHORT, log=head)
    with zipfile.ZipFile(io.BytesIO(data_)) as zf:
        names = {n[:-4] for n in zf.namelist()}
    assert {"meta", "log", "opt/m", "opt/v"} <= names
    assert {f"param/{n}" for n in model.param_shapes(CFG)} <= names
    meta = json.loads(np.load(io.BytesIO(data_), allow_pickle=False)["meta"].tobytes())
    assert meta["step"] == 12 and meta["opt"]["opt/t"] == 12 and meta["data_position"]["batches_drawn"] == 12
    assert meta["model_cfg"] == dataclasses.asdict(CFG) and meta["train_cfg"] == dataclasses.asdict(SHORT)
    assert meta["rng_streams"]["batch_rng"]["bit_generator"] == "PCG64"
    loaded, _, _, log = checkpoint.load_checkpoint(data_)
    assert loaded["loss_scaler"] == {"scale": 1024.0, "good_steps": 7.0}
    assert log == head
    assert loaded["batch_rng"].bit_generator.state == state["batch_rng"].bit_generator.state


def test_a_dynamic_loss_scalers_state_is_kept(tokens):
    mixed_precision = pytest.importorskip("pylib.systems.mixed_precision")
    state, _, _ = saved_at(tokens, 4)
    scaler = mixed_precision.DynamicLossScaler()
    scaler.update(found_inf=True)
    scaler.update(found_inf=False)
    state["scaler"] = scaler
    loaded, *_ = checkpoint.load_checkpoint(checkpoint.checkpoint_bytes(state, CFG, SHORT))
    assert loaded["loss_scaler"] == {k: float(v) for k, v in scaler.state_dict().items()}
    assert loaded["loss_scaler"]["clean_steps"] == 1.0
    assert loaded["loss_scaler"]["scale"] == mixed_precision.SCALER["init_scale"] / 2


def test_every_random_stream_in_the_state_is_kept(tokens):
    state, _, _ = saved_at(tokens, 4)
    state["round_rng"] = np.random.default_rng([0, 9])  # e.g. mixed precision's stochastic rounding
    state["round_rng"].random(17)
    loaded, *_ = checkpoint.load_checkpoint(checkpoint.checkpoint_bytes(state, CFG, SHORT))
    assert loaded["round_rng"].random(5).tolist() == state["round_rng"].random(5).tolist()
    assert loaded["batch_rng"].random(5).tolist() == state["batch_rng"].random(5).tolist()


def test_save_and_load_through_a_path_and_a_file_object(tokens, tmp_path):
    state, ckpt, _ = saved_at(tokens, 5)
    path = tmp_path / "ckpt.npz"
    n = checkpoint.save_checkpoint(state, path, CFG, SHORT)
    assert n == path.stat().st_size == len(ckpt)
    for source in (path, str(path), io.BytesIO(ckpt)):
        loaded, *_ = checkpoint.load_checkpoint(source, CFG)
        assert loaded["step"] == 5


# ---------------------------------------------------------------------------
# Bad checkpoints: a clear error, nothing loaded


def entries_of(ckpt):
    with np.load(io.BytesIO(ckpt), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def npz(entries, **kw):
    buf = io.BytesIO()
    np.savez(buf, **entries, **kw)
    return buf.getvalue()


@pytest.fixture(scope="module")
def good(tokens):
    return saved_at(tokens, 8)[1]


def test_truncated_file_is_refused(good):
    for cut in (10, len(good) // 2, len(good) - 5):
        with pytest.raises(CheckpointError, match="damaged or truncated"):
            checkpoint.load_checkpoint(good[:cut])


def test_wrong_shapes_are_refused(good):
    e = entries_of(good)
    e["param/wte"] = np.zeros((3, 3), np.float32)
    with pytest.raises(CheckpointError, match=r"'param/wte' has shape \(3, 3\)"):
        checkpoint.load_checkpoint(npz(e))
    e = entries_of(good)
    e["opt/m"] = e["opt/m"][:-1]
    with pytest.raises(CheckpointError, match="'opt/m' has shape"):
        checkpoint.load_checkpoint(npz(e))


def test_another_model_config_is_refused(tokens, good):
    other = dataclasses.replace(CFG, n_embd=32)
    _, ckpt, _ = saved_at(tokens, 3, mcfg=other)
    with pytest.raises(CheckpointError, match=r"another model: n_embd 32 \(this run: 16\)"):
        checkpoint.load_checkpoint(ckpt, CFG)
    with pytest.raises(CheckpointError, match="another model: vocab_size"):
        checkpoint.load_checkpoint(good, dataclasses.replace(CFG, vocab_size=70))


def test_nan_weights_are_refused(good):
    e = entries_of(good)
    e["param/lm_head.weight" if "param/lm_head.weight" in e else "param/wte"][0, 0] = np.nan
    with pytest.raises(CheckpointError, match="NaN or infinite"):
        checkpoint.load_checkpoint(npz(e))


def test_foreign_npz_is_refused():
    with pytest.raises(CheckpointError, match="not a checkpoint of this course"):
        checkpoint.load_checkpoint(npz({"weights": np.ones(3)}))
    e = {"meta": np.frombuffer(json.dumps({"format": "other"}).encode(), np.uint8)}
    with pytest.raises(CheckpointError, match="not a checkpoint of this course"):
        checkpoint.load_checkpoint(npz(e))


class Boom:
    """Unpickling this would run code: load_checkpoint must never get that far."""

    def __reduce__(self):
        return (print, ("pwned",))


def test_a_pickle_is_refused_inside_and_outside_an_npz(good, capsys):
    e = entries_of(good)
    e["param/wte"] = np.array([Boom()], dtype=object)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:  # the same, each member written by hand
        for k, v in e.items():
            with zf.open(k + ".npy", "w") as f:
                np.lib.format.write_array(f, v, allow_pickle=True)
    for blob in (npz(e), buf.getvalue()):  # np.savez pickles an object array into its .npy
        with pytest.raises(CheckpointError, match="pickle"):
            checkpoint.load_checkpoint(blob)
    with pytest.raises(CheckpointError, match="pickle"):
        checkpoint.load_checkpoint(pickle.dumps(Boom()))
    assert "pwned" not in capsys.readouterr().out


def test_a_1gb_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "huge.npz"
    with open(path, "wb") as f:  # sparse: 1 GB on paper, no disk used
        f.truncate(2**30)
    real_open = open
    def no_read(*a, **kw):  # noqa: E306
        raise AssertionError("the file was opened for reading")
    monkeypatch.setattr("builtins.open", no_read)
    with pytest.raises(CheckpointError, match="1,073,741,824 bytes"):
        checkpoint.load_checkpoint(path)
    monkeypatch.setattr("builtins.open", real_open)

    class HugeStream(io.RawIOBase):  # a stream claiming 1 GB; read() must never be called
        def seekable(self):
            return True
        def tell(self):  # noqa: E301
            return 0
        def seek(self, offset, whence=0):  # noqa: E301
            return 2**30 if whence == 2 else 0
        def read(self, *a):  # noqa: E301
            raise AssertionError("read")
    with pytest.raises(CheckpointError, match="1,073,741,824 bytes"):
        checkpoint.load_checkpoint(HugeStream())


def test_a_zip_bomb_is_not_unpacked():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("meta.npy", "w") as f:
            np.lib.format.write_array(f, np.zeros(40 * 2**20, np.uint8))
    assert len(buf.getvalue()) < checkpoint.MAX_BYTES
    with pytest.raises(CheckpointError, match="unpacks to"):
        checkpoint.load_checkpoint(buf.getvalue())


def test_a_bad_upload_keeps_the_current_run(corpus, tokens):
    """Through the page's op: a bad file raises InputError and the run goes on exactly as before."""
    from pylib import web
    from pylib.web import job_ops
    session = web.Session()
    session.vocab = data.CharVocab(chars=corpus.vocab.chars)
    session.train_tokens, session.val_tokens = tokens
    job_ops.OPS["job_ckpt_start"](session, {"steps": "30", "lr": "0.01", "seed": "0"})
    job_ops.OPS["job_ckpt_chunk"](session, {})
    run = job_ops._RUNS["ckpt"]
    before = (run["state"]["step"], {n: p.copy() for n, p in run["state"]["params"].items()}, len(run["log"]))
    good_b64 = job_ops.OPS["job_ckpt_save"](session, {})["data"]
    raw = base64.b64decode(good_b64)
    for bad in (raw[: len(raw) // 2], b"not a checkpoint", pickle.dumps(Boom()), npz({"x": np.ones(2)})):
        with pytest.raises(web.InputError) as e:
            job_ops.OPS["job_ckpt_load"](session, {"data": base64.b64encode(bad).decode(), "size": len(bad)})
        assert e.value.errors["file"]
        assert job_ops._RUNS["ckpt"] is run
    with pytest.raises(web.InputError, match="at most"):
        job_ops.OPS["job_ckpt_load"](session, {"data": good_b64, "size": 2**30})
    assert (run["state"]["step"], len(run["log"])) == (before[0], before[2])
    for n, p in before[1].items():
        np.testing.assert_array_equal(run["state"]["params"][n], p)


# ---------------------------------------------------------------------------
# Resuming without the optimiser state; the replay


def test_resume_without_optimizer_state_takes_a_full_size_first_step(tokens):
    cfg = dataclasses.replace(SHORT, steps=120)
    _, ckpt, _ = saved_at(tokens, 100, cfg)
    sizes = resume.first_update_sizes(ckpt, CFG, *tokens)
    assert sizes["no_opt"] > 2 * sizes["proper"]
    state, tcfg = resume.restart(ckpt, CFG, with_optimizer=False)
    assert state["opt"]["t"] == 0 and not state["opt"]["m"].any() and not state["opt"]["v"].any()
    assert state["step"] == 100  # the schedule and the data go on; only the optimiser forgot


def test_replay_same_batches_brings_the_spike_back_other_batches_do_not(tokens):
    mcfg, tcfg = stability.bad_configs(CFG.vocab_size, "none", 0)
    token = 1
    bad = {150, 151, 152}
    state = train.init_train_state(mcfg, tcfg)
    guards.hook_batches(state, stability.bad_batch_hook(bad, token))
    train.train_steps(state, mcfg, tcfg, *tokens, 140)
    ckpt = checkpoint.checkpoint_bytes(state, mcfg, tcfg)
    original = train.train_steps(state, mcfg, tcfg, *tokens, 33)
    same = resume.replay(ckpt, mcfg, *tokens, 33, bad, token, same_batches=True)
    other = resume.replay(ckpt, mcfg, *tokens, 33, bad, token, same_batches=False)
    assert strip(same) == strip(original)
    assert resume.replay_spike(same, bad) > 3 * resume.replay_spike(other, bad)


# ---------------------------------------------------------------------------
# Monitoring


def test_initial_loss_check_and_overfitting_one_batch(tokens):
    _, head = train.train(CFG, dataclasses.replace(SHORT, steps=1), *tokens)
    check = monitoring.initial_loss_check(head[0]["loss"], CFG.vocab_size)
    assert check["ok"] and abs(check["expected"] - math.log(65)) < 1e-12
    assert not monitoring.initial_loss_check(math.log(65) + 0.5, 65)["ok"]
    losses = monitoring.overfit_one_batch(CFG, dataclasses.replace(SHORT, steps=150), tokens[0], 150)
    assert losses[-1] < 0.3 * losses[0]


def test_markov_entropy_rate_is_the_floor_of_the_loss():
    P, pi = monitoring.markov_source(8, 0.3, 0)
    np.testing.assert_allclose(pi @ P, pi, atol=1e-12)
    H = monitoring.entropy_rate(P, pi)
    x = monitoring.sample_markov(P, 200_000, 1).astype(np.int64)
    # the true conditional probabilities reach the entropy rate; any other predictor scores worse
    true_loss = -np.mean(np.log(P[x[:-1], x[1:]]))
    assert abs(true_loss - H) < 0.01
    Q = 0.9 * P + 0.1 / 8
    assert -np.mean(np.log(Q[x[:-1], x[1:]])) > H + 0.01
    uniform = monitoring.markov_source(4, 1e6, 0)
    assert abs(monitoring.entropy_rate(*uniform) - math.log(4)) < 1e-4


def test_export_jsonl_and_csv_round_trip():
    rows = [{"step": 0, "loss": 4.2, "weight_norms": [1.0, float("nan")], "val": 4.1},
            {"step": 1, "loss": float("inf"), "weight_norms": [1.5, 2.0], "clipped": True}]
    lines = monitoring.to_jsonl(rows).splitlines()
    assert [json.loads(x)["step"] for x in lines] == [0, 1]
    assert json.loads(lines[1])["loss"] is None and json.loads(lines[0])["weight_norms"] == [1.0, None]
    text = monitoring.to_csv(rows, ["embeddings", "block0"])
    header, first, second = text.splitlines()
    assert header == "step,loss,weight_norms.embeddings,weight_norms.block0,val,clipped"
    assert first == "0,4.2,1.0,,4.1," and second == "1,,1.5,2.0,,True"


# ---------------------------------------------------------------------------
# Steps to a target, misses censored


def test_a_miss_is_censored_not_dropped():
    from pylib.studies import target
    assert target.censored_order(250, None, 400) == "a"  # reached against never reached: a was first
    assert target.censored_order(None, 260, 400) == "b"
    assert target.censored_order(None, None, 400) == "neither"
    assert target.censored_order(250, 250, 400) == "tie"
    assert target.censored_order(240, 250, 400) == "a"
    with pytest.raises(ValueError, match="outside"):
        target.censored_order(500, None, 400)
    # Dropping the second pair (a miss) would leave one pair each way; censored, it counts for b.
    out = target.censored_sign_test([(250, 270), (None, 380), (260, 250)], 400)
    assert (out["a"], out["b"], out["tie"], out["neither"]) == (1, 2, 0, 0)
    assert out["p"] == 1.0
    assert target.censored_sign_test([(1, 2)] * 3, 400)["p"] == 0.25  # three seeds can never reach p < 0.05
    assert target.censored_sign_test([(1, 2)] * 6, 400)["p"] == pytest.approx(2 / 64)
    assert target.censored_sign_test([(None, None)], 400)["p"] is None
