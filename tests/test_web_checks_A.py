"""Op check_args for the ops of pylib.web's core (tokenize), backprop_ops, data_ops, init_ops,
objective_ops and optim_ops: each op that takes typed fields is checked, without running, by the same
validate function it calls. For bad input the check gives exactly the op's own messages (the op is run
through pylib.web.handle beside it), for good input none, and checking changes no state."""

import functools
import json

import numpy as np
import pytest

from pylib import data, model, web
from pylib.web import backprop_ops, data_ops, init_ops, objective_ops, optim_ops

from test_web_checks import call, check

BAD = ["", "   ", "NaN", "inf", "-1", "1e400", "🙂", "<b>x</b>", None, "0x10", "1.5", "1e9", "1_0"]


@pytest.fixture(scope="module", autouse=True)
def page_session(shared_corpus):
    """The page's session (pylib.web.SESSION, the one check_args and handle use) with the corpus loaded,
    as in a page where the widget has drawn; restored afterwards."""
    s = web.SESSION
    saved = s.vocab, dict(s._tokens)
    s.vocab, s.train_tokens, s.val_tokens = shared_corpus.vocab, shared_corpus.train, shared_corpus.val
    yield s
    s.vocab, s._tokens = saved


def val_window_with_eos():
    """(start, position) of a validation window whose position holds an EOS, and one that does not."""
    T = model.GPTConfig().block_size
    val = web.SESSION.val_tokens
    eos = int(np.flatnonzero(val == web.SESSION.vocab.eos_id)[0])
    start = max(0, eos - T // 2)
    pos = eos - start
    other = next(p for p in range(T) if val[start + p] != web.SESSION.vocab.eos_id)
    return str(start), str(pos), str(other)


@functools.cache
def spans():
    return data.play_spans(data.read_plays(), web.SESSION.vocab)


# op -> (good args, the fields the reader types, whether the op may be run in the test when the check passes)
GOOD = {
    "tokenize": ({"text": "To be, or not to be"}, ["text"], True),
    "backprop_nudge": ({"name": "wpe", "index": "5", "h": "1e-3"}, ["name", "index", "h"], True),
    "backprop_order": ({"weights": "init"}, ["weights"], True),
    "backprop_check_start": ({"weights": "perturbed"}, ["weights"], True),
    "data_window": ({"start": "100", "split": "train"}, ["start"], True),
    "data_excerpt": ({"start": "0", "n_chars": "500"}, ["start", "n_chars"], True),
    "data_bpe_start": ({"text": "aaabdaaabac", "vocab_size": "100", "split": False}, ["text", "vocab_size"], True),
    "data_pack_window": ({"start": "200"}, ["start"], True),
    "data_leak": ({"start": "0", "position": "10"}, ["start", "position"], True),
    "data_mix_start": ({"weight": "0.5", "steps": "5", "seed": "0"}, ["weight", "steps", "seed"], False),
    "data_own_start": ({"text": "It is a truth universally acknowledged. " * 40, "steps": "3", "seed": "1"},
                       ["text", "steps", "seed"], True),
    "data_dedup_pair": ({"text_a": "to be or not to be", "text_b": "to be, or not to be", "k": "3",
                         "n_hashes": "64", "bands": "16", "threshold": "0.5"},
                        ["text_a", "text_b", "k", "n_hashes", "bands", "threshold"], True),
    "objective_perplexity": ({"tau": "1"}, ["tau"], True),
    "objective_logit_grad": ({"model": "untrained", "window": "0", "position": "5", "k": "5"},
                             ["window", "position", "k"], True),
    "objective_accum_grads": ({"counts": ["64", "10", "0", "3"]}, [], True),
    "objective_accum_start": ({"seed": "0"}, ["seed"], True),
    "objective_denominators": ({"rows": [{"count": "2", "loss": "4"}, {"count": "6", "loss": "6"}]}, [], True),
    "init_scale": ({"init_std": "0.02", "depth": "2"}, ["init_std", "depth"], True),
    "init_depth_norms": ({"depth": "2"}, ["depth"], True),
    "init_depth_start": ({"depth": "2", "position": "pre", "warmup": True, "seed": "0"}, ["depth", "seed"], True),
    "init_coord_start": ({"lr": "0.01", "seed": "0"}, ["lr", "seed"], True),
    "optim_valley": ({"lr": "0.1", "kappa": "10", "momentum": "0.9", "steps": "50"},
                     ["lr", "kappa", "momentum", "steps"], True),
    "optim_adam_steps": ({"grads": "1, -2, 0.5", "beta1": "0.9", "beta2": "0.999"}, ["grads", "beta1", "beta2"], True),
    "optim_decay_paths": ({"grad_a": "1", "grad_b": "0.01", "lr": "0.01", "wd": "0.1", "steps": "100"},
                          ["grad_a", "grad_b", "lr", "wd", "steps"], True),
    "optim_train_start": ({"optimizer": "adamw", "lr": "3e-3", "seed": "0"}, ["lr", "seed"], True),
}

# fields that are lists of typed cells: (op, the list's key, the cell's field name prefix, a good list)
TABLE_CELLS = [("objective_accum_grads", "counts"), ("objective_denominators", "rows")]


def args_of(op, **overrides):
    args = {**GOOD[op][0], **overrides}
    if op == "data_mix_start":
        args["spans"] = spans()
    return args


def compare(op, args, runnable):
    """The check's verdict on args equals what the op does with them: its InputError's messages, or none."""
    got = check(op, args)
    assert got["checked"] is True
    if got["errors"]:
        run = call(op, args)
        assert not run["ok"] and run["kind"] == "input", run
        assert got["errors"] == run["errors"]
    elif runnable:
        run = call(op, args)
        assert run["ok"], run
    return got["errors"]


def state():
    """What checking must not change: the page's run and data, and every chunked run and cache of the modules."""
    s = web.SESSION
    stores = {"backprop": backprop_ops._state, "data": data_ops._RUNS, "init": init_ops._RUNS,
              "objective_runs": objective_ops._RUNS, "objective_trained": objective_ops._TRAINED,
              "optim": optim_ops._RUNS}
    return ({k: {key: id(v) for key, v in d.items()} for k, d in stores.items()},
            id(s.run), id(s.vocab), id(s.train_tokens), id(s.val_tokens))


@pytest.mark.parametrize("op", sorted(GOOD))
def test_good_input_passes_the_check_and_the_op_runs(op):
    args = args_of(op)
    assert check(op, args) == {"checked": True, "errors": {}}
    if op == "data_mix_start":  # a mixture run starts (the spans are the page's build-time data)
        assert call(op, args)["ok"]
        return
    assert call(op, args)["ok"], op


@pytest.mark.parametrize("raw", BAD + ["0", "1e31", "x" * 30_000])
@pytest.mark.parametrize("op_field", [(op, f) for op in sorted(GOOD) for f in GOOD[op][1]],
                         ids=lambda p: f"{p[0]}.{p[1]}")
def test_a_bad_field_gets_exactly_the_ops_own_message(op_field, raw):
    op, field = op_field
    errors = compare(op, args_of(op, **{field: raw}), GOOD[op][2])
    if raw in ("", "NaN", "🙂", "<b>x</b>", "x" * 30_000) and field not in ("text", "text_a", "text_b"):
        assert set(errors) == {field}, errors


@pytest.mark.parametrize("raw", BAD + ["0", "65", "-0"])
@pytest.mark.parametrize("op_key", TABLE_CELLS, ids=lambda p: p[0])
@pytest.mark.parametrize("cell", [0, 2])
def test_a_bad_cell_of_a_table_gets_the_ops_own_message(op_key, cell, raw):
    op, key = op_key
    rows = json.loads(json.dumps(GOOD[op][0][key]))
    if key == "rows":
        rows = rows + [{"count": "1", "loss": "1"}]
        rows[cell]["count"] = raw
    else:
        rows[cell] = raw
    compare(op, args_of(op, **{key: rows}), True)


@pytest.mark.parametrize("op,args,field,message", [
    ("tokenize", {"text": "x" * 20_001}, "text", "Text is 20,001 characters long; the limit is 20,000. Paste less."),
    ("backprop_nudge", {"name": "nope", "index": "0", "h": "1e-3"}, "name",
     "There is no parameter called 'nope': pick one from the list."),
    ("backprop_nudge", {"name": "ln_f.weight", "index": "16", "h": "1e-3"}, "index", "Index must be between 0 and 15; got '16'."),
    ("backprop_nudge", {"name": "wpe", "index": "0", "h": "2"}, "h", "Step size h must be greater than 0 and at most 1; got 2."),
    ("backprop_order", {"weights": "<b>w</b>"}, "weights",
     "Weights must be the initial or the perturbed ones; got '<b>w</b>'."),
    ("data_mix_start", {"weight": "1.5", "steps": "5"}, "weight", "Weight must be between 0 and 1; got 1.5."),
    ("objective_perplexity", {"tau": "0.01"}, "tau", "Temperature must be between 0.05 and 100; got 0.01."),
    ("objective_logit_grad", {"model": "untrained", "window": "64", "position": "0", "k": "1"}, "window",
     "Window must be between 0 and 63; got '64'."),
    ("init_scale", {"init_std": "0", "depth": "2"}, "init_std",
     "Init std must be greater than 0 and at most 10 (0 gives every weight the same value (zero), so nothing can "
     "be learnt); got 0."),
    ("optim_valley", {"lr": "0.1", "kappa": "0.5", "momentum": "0", "steps": "5"}, "kappa",
     "Condition number must be in [1, 10000]; got 0.5."),
])
def test_known_messages(op, args, field, message):
    assert check(op, args_of(op, **args))["errors"][field] == message


def test_a_leak_position_that_holds_an_eos_gets_the_ops_message():
    start, eos_pos, other = val_window_with_eos()
    errors = compare("data_leak", args_of("data_leak", start=start, position=eos_pos), True)
    assert errors == {"position": "That position holds an EOS; pick a character inside a document."}
    assert compare("data_leak", args_of("data_leak", start=start, position=other), True) == {}


def test_every_bad_field_of_a_form_is_reported_at_once():
    got = check("optim_decay_paths", args_of("optim_decay_paths", grad_a="0", lr="x", steps="-2"))
    assert set(got["errors"]) == {"grad_a", "lr", "steps"}
    got = check("data_dedup_pair", args_of("data_dedup_pair", text_a="", k="0", threshold="2"))
    assert set(got["errors"]) == {"text_a", "k", "threshold"}


def test_the_nudge_check_knows_the_page_models_parameters_without_making_them():
    """The check reads the page model's shapes (param_shapes at the page's vocabulary); the op checks
    against the weights it made. They are the same names and sizes."""
    shapes = backprop_ops._page_params()
    made = backprop_ops._setup(web.SESSION)["params"]
    assert {n: int(np.prod(s)) for n, s in shapes.items()} == {n: p.size for n, p in made.items()}


@pytest.mark.parametrize("op", sorted(GOOD))
def test_checking_changes_no_state(op):
    """A check, of good or bad input, starts no run, makes no model and loads nothing."""
    before = state()
    check(op, args_of(op))
    for field in GOOD[op][1]:
        check(op, args_of(op, **{field: "nonsense"}))
    assert state() == before


def test_a_chunked_run_is_checked_through_its_start_op():
    """The page checks run:<name> through <name>_start: each chunked run of these modules has one, and
    its chunk and finish ops (which take no typed fields) have none."""
    ops = web.all_ops()
    for name in ["backprop_check", "data_bpe", "data_mix", "data_own", "init_depth", "init_coord",
                 "objective_accum", "optim_train"]:
        assert getattr(ops[f"{name}_start"], "check", None) is not None, name
        assert getattr(ops[f"{name}_chunk"], "check", None) is None
    # objective_pretrain's start takes no fields: nothing to check
    assert check("objective_pretrain_start", {}) == {"checked": False, "errors": {}}


@pytest.mark.parametrize("op,check_fn", [
    ("tokenize", web.validate_tokenize), ("backprop_nudge", backprop_ops.validate_nudge),
    ("backprop_order", backprop_ops.validate_weights), ("backprop_check_start", backprop_ops.validate_weights),
    ("data_window", data_ops.validate_window), ("data_excerpt", data_ops.validate_excerpt),
    ("data_bpe_start", data_ops.validate_bpe_start), ("data_pack_window", data_ops.validate_pack_window),
    ("data_leak", data_ops.validate_leak), ("data_mix_start", data_ops.validate_mix_start),
    ("data_own_start", data_ops.validate_own_start), ("data_dedup_pair", data_ops.validate_dedup_pair),
    ("objective_perplexity", objective_ops.validate_perplexity),
    ("objective_logit_grad", objective_ops.validate_logit_grad),
    ("objective_accum_grads", objective_ops.validate_accum_grads),
    ("objective_accum_start", objective_ops.validate_accum_start),
    ("objective_denominators", objective_ops.validate_denominators),
    ("init_scale", init_ops.validate_init_scale), ("init_depth_norms", init_ops.validate_depth_norms),
    ("init_depth_start", init_ops.parse_depth_run), ("init_coord_start", init_ops.validate_coord_start),
    ("optim_valley", optim_ops.validate_valley), ("optim_adam_steps", optim_ops.validate_adam_steps),
    ("optim_decay_paths", optim_ops.validate_decay_paths), ("optim_train_start", optim_ops.train_settings),
])
def test_each_op_is_checked_by_the_function_it_calls(op, check_fn):
    assert web.find_op(op).check is check_fn
