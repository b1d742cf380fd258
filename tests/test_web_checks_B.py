"""Op check_args for the ops of chapters 6, 8, 9, 10 and 15 (schedule_ops, stability_ops, precision_ops,
memory_ops, job_ops): what the page asks when the reader leaves a field. Each op's check is the function
the op itself calls, so for every bad input the check's messages are exactly the ones the op refuses
with; good input gets none; and a check starts, changes and adds nothing (no run, no change of rate,
no state of any module). Ops whose arguments the reader does not type (buttons, a chosen file, chunks)
have no check and answer "not checked"."""

import json

import pytest

from pylib import web
from pylib.web import InputError, job_ops, memory_ops, precision_ops, schedule_ops, stability_ops

from test_web_checks import check

BAD = ["", "   ", "NaN", "inf", "-1", "1e400", "🙂", "<b class=injected>x</b>", None, "0x10", "1.5", "1e9", "0"]

MEMORY = {**{k: str(v) for k, v in memory_ops.presets()["course"].items()}, "precision": "mixed", "optimizer": "adamw"}

# op -> (good form values, the fields the reader types)
GOOD = {
    "schedule_curve": ({"kind": "cosine", "lr": "0.02", "warmup": "20", "steps": "400", "min_ratio": "0.1",
                        "decay_frac": "0.2"}, ["lr", "warmup", "steps", "min_ratio", "decay_frac"]),
    "schedule_sweep_start": ({"rates": "0.001, 0.01, 0.1", "seed": "0"}, ["rates", "seed"]),
    "schedule_lrchange_start": ({"lr": "0.003", "seed": "0"}, ["lr", "seed"]),
    "schedule_noise_start": ({"seed": "0", "step": "100"}, ["seed", "step"]),
    "stability_nan_demo": ({"which": "log0", "logit": "30"}, ["logit"]),
    "stability_bad_start": ({"inject_step": "150", "cure": "clip", "clip": "1", "skip_factor": "4", "lr": "0.003",
                             "seed": "0"}, ["inject_step", "clip", "lr", "seed"]),
    "stability_attn_start": ({"lr": "0.03", "seed": "0", "qk_norm": True, "z_loss": False}, ["lr", "seed"]),
    "precision_round": ({"value": "0.1"}, ["value"]),
    "precision_lost_update": ({"start": "1", "increment": "0.001", "steps": "100", "format": "bf16", "seed": "0"},
                              ["start", "increment", "steps", "seed"]),
    "precision_train_start": ({"recipe": "bf16_master", "seed": "0"}, ["seed"]),
    "precision_quantise": ({"tensor": "wte", "bits": "4", "ratio": "0.5"}, ["bits", "ratio"]),
    "memory_calc": (MEMORY, ["seq_len", "micro_batch", "n_layer", "n_embd", "n_head", "vocab_size", "ffn_hidden"]),
    "memory_timeline": ({"n_layer": "2", "batch_size": "4", "seq_len": "16"}, ["n_layer", "batch_size", "seq_len"]),
    "job_ckpt_start": ({"steps": "50", "lr": "0.003", "seed": "0", "target": ""}, ["steps", "lr", "seed", "target"]),
    "job_dash_start": ({"steps": "50", "lr": "0.003", "seed": "0", "target": "2.5"}, ["steps", "lr", "seed", "target"]),
    "job_replay_start": ({"mode": "original", "seed": "0"}, ["seed"]),
    "job_goodput": ({"delta": "1", "M": "100", "R": "1", "tau": "10"}, ["delta", "M", "R", "tau"]),
}

# what the page's chunked runs are checked through: "run:<name>" -> "<name>_start"
STARTS = ["schedule_sweep_start", "schedule_lrchange_start", "schedule_noise_start", "stability_bad_start",
          "stability_attn_start", "precision_train_start", "job_ckpt_start", "job_dash_start", "job_replay_start"]

# ops of these modules whose arguments no reader types: buttons, a chosen file, the runs' chunks and ends
UNTYPED = ["stability_bad_inject", "job_ckpt_save", "job_ckpt_load", "job_export", "memory_presets",
           "precision_bench"] + [s.replace("_start", "_chunk") for s in STARTS] + \
          [s.replace("_start", "_finish") for s in STARTS]

MODULES = (schedule_ops, stability_ops, precision_ops, memory_ops, job_ops)


@pytest.fixture(scope="module")
def session(shared_corpus):
    corpus = shared_corpus
    s = web.Session()
    s.vocab, s.train_tokens, s.val_tokens = corpus.vocab, corpus.train, corpus.val
    return s


def refusal(session, op, args):
    """The op's own answer to args, run: its InputError's messages, or {} when it takes them."""
    try:
        web.find_op(op)(session, json.loads(json.dumps(args)))
    except InputError as e:
        return e.errors
    return {}


def runs():
    """Every module's chunked-run table, as identities and keys: what a check must leave alone."""
    return [(m.__name__, {k: id(v) for k, v in m._RUNS.items()}) for m in MODULES if hasattr(m, "_RUNS")]


@pytest.mark.parametrize("op", list(GOOD))
def test_good_values_pass_and_the_op_is_checked_by_the_function_it_calls(op):
    args, _ = GOOD[op]
    assert check(op, args) == {"checked": True, "errors": {}}
    fn = web.find_op(op)
    assert fn.check.__name__.startswith("validate_")
    assert fn.check(json.loads(json.dumps(args))) is not None  # it returns the parsed values


@pytest.mark.parametrize("raw", BAD)
@pytest.mark.parametrize("op_field", [(op, f) for op, (_, fields) in GOOD.items() for f in fields],
                         ids=lambda p: f"{p[0]}-{p[1]}")
def test_a_bad_field_gets_exactly_the_message_the_op_refuses_with(session, op_field, raw):
    op, field = op_field
    args = {**GOOD[op][0], field: raw}
    expected = refusal(session, op, args)
    assert check(op, args) == {"checked": True, "errors": expected}
    if raw in ("NaN", "🙂", "<b class=injected>x</b>", "1e400"):
        assert set(expected) == {field}, (op, field, raw, expected)  # the comparison is not of two empty answers


@pytest.mark.parametrize("op,args", [
    ("schedule_curve", {"kind": "<script>"}),
    ("schedule_curve", {"warmup": "500"}),  # past the total steps
    ("schedule_sweep_start", {"rates": "1,2,3,4,5,6,7"}),
    ("schedule_sweep_start", {"rates": "x" * 300}),
    ("schedule_sweep_start", {"rates": "0.1, -1"}),
    ("schedule_noise_start", {"step": "100000"}),
    ("stability_nan_demo", {"which": "nope"}),
    ("stability_nan_demo", {"which": "overflow", "logit": "1e7"}),
    ("stability_bad_start", {"cure": "magic"}),
    ("stability_bad_start", {"inject_step": "300"}),
    ("stability_bad_start", {"cure": "skip", "skip_factor": "0.5"}),
    ("stability_bad_start", {"cure": "skip", "skip_factor": "x", "lr": "x"}),
    ("stability_attn_start", {"lr": "11"}),
    ("precision_round", {"value": "1e301"}),
    ("precision_round", {"value": None, "format": "bf16", "bits": "01"}),
    ("precision_round", {"value": None, "format": "fp99", "bits": "0" * 16}),
    ("precision_lost_update", {"format": "fp64"}),
    ("precision_lost_update", {"format": "fp64", "steps": "0"}),
    ("precision_lost_update", {"steps": "5001", "start": "2e6"}),
    ("precision_train_start", {"recipe": "<b>x</b>"}),
    ("precision_train_start", {"recipe": "fp99", "seed": "-1"}),
    ("precision_quantise", {"tensor": "h.9.nothing"}),
    ("precision_quantise", {"bits": "9", "ratio": "11"}),
    ("memory_calc", {"n_head": "5"}),  # does not divide the width
    ("memory_calc", {"arch": "<b>x</b>", "precision": "fp7", "recompute": "sometimes"}),
    ("memory_timeline", {"n_layer": "5", "seq_len": "9999"}),
    ("job_ckpt_start", {"target": "101"}),
    ("job_ckpt_start", {"target": "x", "steps": "x"}),  # the target is refused first, alone, as the op does
    ("job_dash_start", {"steps": "2001", "lr": "11", "seed": "1.5"}),
    ("job_replay_start", {"mode": "sideways"}),
    ("job_goodput", {"tau": "5000", "delta": "1", "M": "100"}),  # tau + delta above 12 M
    ("job_goodput", {"R": "5000"}),
])
def test_the_checks_across_fields_and_choices_are_the_ops(session, op, args):
    args = {**GOOD[op][0], **args}
    expected = refusal(session, op, args)
    assert expected  # each of these is refused
    assert check(op, args) == {"checked": True, "errors": expected}


def test_what_depends_on_a_run_going_is_left_to_the_op(session):
    """Whether a run is going (Apply, Continue, a replay) is not the reader's typing: the check passes
    the values and the op, when pressed, says what is missing."""
    schedule_ops._RUNS.pop("lrchange", None)
    no_run = {"new_lr": "No run is going: press Start first."}
    assert refusal(session, "schedule_lrchange_set", {"new_lr": "0.001"}) == no_run
    assert check("schedule_lrchange_set", {"new_lr": "0.001"}) == {"checked": True, "errors": {}}
    job_ops._RUNS.pop("ckpt", None)
    assert "run" in refusal(session, "job_ckpt_start", {"continue": True})
    assert check("job_ckpt_start", {"continue": True, "steps": "x"}) == {"checked": True, "errors": {}}
    job_ops._RUNS.pop("replay", None)
    assert "mode" in refusal(session, "job_replay_start", {"mode": "same", "seed": "x"})
    assert check("job_replay_start", {"mode": "same", "seed": "x"}) == {"checked": True, "errors": {}}
    # a logit the masked-row demo does not take is not checked
    assert check("stability_nan_demo", {"which": "masked_row", "logit": "x"}) == {"checked": True, "errors": {}}


@pytest.mark.parametrize("raw", BAD)
def test_a_change_of_rate_during_a_run_is_checked_as_apply_checks_it_and_changes_nothing(session, raw):
    schedule_ops.lrchange_start(session, {"lr": "0.003", "seed": "0"})
    run = schedule_ops._RUNS["lrchange"]
    cfg, state = run["cfg"], run["state"]
    got = check("schedule_lrchange_set", {"new_lr": raw})
    assert run["changes"] == [] and run["cfg"] is cfg and run["state"] is state
    expected = refusal(session, "schedule_lrchange_set", {"new_lr": raw})
    assert got == {"checked": True, "errors": expected}
    if raw in ("", "NaN", "🙂", "-1", "0", "1e9"):
        assert set(expected) == {"new_lr"}
    schedule_ops._RUNS.pop("lrchange", None)


def test_checking_starts_no_run_and_changes_no_module_state(session):
    job_ops.OPS["job_ckpt_start"](session, GOOD["job_ckpt_start"][0])  # a run a check must leave alone
    before, session_run = runs(), web.SESSION.run
    for op, (args, fields) in GOOD.items():
        check(op, args)
        check(op, {**args, fields[0]: "x"})
    check("schedule_lrchange_set", {"new_lr": "0.01"})
    check("job_ckpt_start", {"continue": True, "drop_optimizer": True})
    assert runs() == before and web.SESSION.run is session_run
    assert job_ops._RUNS["ckpt"]["state"]["step"] == 0 and "dropped_at" not in job_ops._RUNS["ckpt"]


@pytest.mark.parametrize("op", STARTS)
def test_every_chunked_run_of_these_chapters_is_checked_through_its_start_op(op):
    assert check(op, {})["checked"] is True


@pytest.mark.parametrize("op", UNTYPED)
def test_ops_without_typed_arguments_are_not_checked(op):
    assert op in web.all_ops()
    assert check(op, {}) == {"checked": False, "errors": {}}
