"""Op check_args for chapters 11-14 and 16's ops (parallel_ops, model_parallel_ops, slow_links_ops,
posttrain_ops, scaling_ops): each op that takes what the reader typed is checked by the function it calls
itself, so the check's verdict is the op's: the same messages for the same bad input, none for good input,
and no state changed (no run set up, no model replaced)."""

import copy
import json

import pytest

from pylib import web
from pylib.systems import planner, slow_links as sl
from pylib.web import model_parallel_ops, parallel_ops, posttrain_ops, scaling_ops, slow_links_ops

from test_web_checks import call, check
from test_scaling import TRUE, synthetic_sweep

BAD = ["", "   ", "NaN", "inf", "-1", "0", "1e400", "🙂", "<b>x</b>", None, "0x10", "1.5", "1e9", "1_000"]


@pytest.fixture(scope="module")
def session(shared_corpus, tmp_path_factory):
    """The page's session with the corpus loaded, as the page has it once a widget has asked for it."""
    folder = tmp_path_factory.mktemp("site-data")
    (folder / "train.bin").write_bytes(shared_corpus.train.tobytes())
    (folder / "val.bin").write_bytes(shared_corpus.val.tobytes())
    (folder / "vocab.json").write_text(json.dumps(shared_corpus.vocab.to_json()))
    web.SESSION.load_corpus(folder)
    return web.SESSION


def _planner_args():
    run = planner.published_runs()[0]
    lay = run["layout"]
    return {"run": run["name"], "gpus": str(run["cluster"].gpus), "dp": str(lay.dp), "tp": str(lay.tp), "pp": str(lay.pp),
            "cp": str(lay.cp), "global_batch": str(lay.global_batch), "micro_batch": str(lay.micro_batch),
            "chunks": str(lay.chunks), "recompute": lay.recompute, "sequence_parallel": lay.sequence_parallel}


def _series():
    return [{"budget": c, "n": [p["n"] for p in pts], "d": [p["d"] for p in pts], "loss_mean": [p["loss"] for p in pts]}
            for c, pts in ((c, list(synthetic_sweep(TRUE, [c]))) for c in (1e10, 3e10, 1e11))]


# op checked -> (its module, its check, good args, the fields the reader types, extra bad values of its own)
CASES = {
    "parallel_ring": (parallel_ops, "validate_ring", {"workers": "4"}, ["workers"], ["1", "9"]),
    "parallel_alpha_beta": (parallel_ops, "validate_alpha_beta", {"workers": "8", "alpha_us": "5", "bandwidth_gbs": "100"},
                            ["workers", "alpha_us", "bandwidth_gbs"], ["1e6"]),
    "parallel_dp_start": (parallel_ops, "validate_dp", {"workers": "1 2 4", "steps": "50"}, ["workers", "steps"],
                          ["1 2 4 8 16", "1,2,,9", "401"]),
    "parallel_zero": (parallel_ops, "validate_zero", {"workers": "4", "stage": "2", "steps": "3"}, ["workers", "stage", "steps"],
                      ["4", "11"]),
    "parallel_overlap": (parallel_ops, "validate_overlap",
                         {"bucket_kb": "1000", "bandwidth_gbs": "50", "alpha_us": "5", "workers": "8", "gflops": "1000",
                          "peak_gflops": "2000", "layers": "4", "width": "64"},
                         ["bucket_kb", "bandwidth_gbs", "alpha_us", "workers", "gflops", "peak_gflops", "layers", "width"],
                         ["63", "2048", "49"]),
    "pipeline_schedule": (model_parallel_ops, "validate_pipeline",
                          {"schedule": "interleaved", "stages": "4", "microbatches": "8", "chunks": "2", "ratio": "2"},
                          ["schedule", "stages", "microbatches", "chunks", "ratio"], ["3", "17", "0.2", "9", "gpipe"]),
    "planner_plan": (model_parallel_ops, "validate_planner_plan", _planner_args(),
                     ["gpus", "dp", "tp", "pp", "cp", "global_batch", "micro_batch", "chunks", "recompute"],
                     ["3", "7", "auto", "65", "full"]),
    "slow_train_start": (slow_links_ops, "validate_train",
                         {"method": next(iter(sl.METHODS)), "seed": "0", "steps": "100", "eval_interval": "10"},
                         ["method", "seed", "steps", "eval_interval"], ["101", "7"]),
    "slow_link_race": (slow_links_ops, "validate_link_race",
                       {"bandwidth": "100", "latency": "10", "step_ms": "50", "workers": "4", "vocab_size": 65},
                       ["bandwidth", "latency", "step_ms", "workers"], ["1e10"]),
    "slow_queue": (slow_links_ops, "validate_queue",
                   {"rho": "0.5", "service_ms": "10", "workers": "8", "step_ms": "100", "spread_ms": "10"},
                   ["rho", "service_ms", "workers", "step_ms", "spread_ms"], ["1", "0.999", "1e7"]),
    "posttrain_pretrain_start": (posttrain_ops, "validate_pretrain", {"seed": "0", "steps": "400"}, ["seed", "steps"],
                                 ["2001"]),
    "posttrain_sft_start": (posttrain_ops, "validate_sft", {"seed": "0", "steps": "100", "arm": "response"},
                            ["seed", "steps", "arm"], ["1001", "whole"]),
    "posttrain_dpo_start": (posttrain_ops, "validate_dpo_start", {"seed": "0", "steps": "50", "beta": "0.1", "target": "e"},
                            ["seed", "steps", "beta", "target"], ["101", "ee", "7", "\n"]),
    "posttrain_ipo_start": (posttrain_ops, "validate_ipo_start", {"seed": "0", "steps": "50", "tau": "0.1", "target": "e"},
                            ["seed", "steps", "tau", "target"], ["11", "é"]),
    "posttrain_ask": (posttrain_ops, "validate_ask", {"line": "To be, or not to be", "seed": "0"}, ["line", "seed"],
                      ["x" * 200, "\n\n"]),
    "scaling_isoflop": (scaling_ops, "validate_isoflop", {"series": _series(), "budget_index": 1, "custom_budget": "1e12"},
                        ["custom_budget", "budget_index"], ["1e31", 3, 0]),
    "scaling_chinchilla": (scaling_ops, "validate_chinchilla",
                           {"loss": "huber", "drop_highest": "0", "min_tokens_per_param": "0", "compute": "1e24"},
                           ["loss", "drop_highest", "min_tokens_per_param", "compute"], ["245", "241", "1e5", "likelihood"]),
}

PARAMS = [(op, field, raw) for op, (_, _, _, fields, extra) in CASES.items() for field in fields for raw in BAD + extra]


def state():
    """Everything an op of these modules keeps between calls, copied."""
    return copy.copy(parallel_ops._RUNS), copy.copy(slow_links_ops._RUNS), copy.copy(posttrain_ops._STATE), web.SESSION.run


@pytest.mark.parametrize("op", list(CASES))
def test_good_input_passes_the_check(session, op):
    assert check(op, CASES[op][2]) == {"checked": True, "errors": {}}


@pytest.mark.parametrize("op,field,raw", PARAMS)
def test_bad_input_gets_exactly_the_message_the_op_gives(session, op, field, raw):
    """Where the op's own check refuses the value, running the op refuses it with the same messages
    (the op stops there: it runs nothing); where it is accepted, the check says nothing."""
    module, name, good, _, _ = CASES[op]
    args = {**good, field: raw}
    try:
        getattr(module, name)(copy.deepcopy(args))
        expected = {}
    except web.InputError as e:
        expected = e.errors
    got = check(op, args)
    assert got == {"checked": True, "errors": expected}
    if expected:
        run = call(op, args)
        assert not run["ok"] and run["kind"] == "input" and run["errors"] == expected
    if (raw in ("", None) and field != "custom_budget") or (raw in ("NaN", "🙂") and field != "line"):
        # (a line of text may say NaN; no custom_budget asks for no prediction)
        assert field in expected


@pytest.mark.parametrize("op", list(CASES))
def test_the_op_is_checked_by_the_function_it_calls(session, op, monkeypatch):
    """check_args finds the op's own check, and the op runs that same function on its args: a planted
    refusal in it is what the op answers (so a check that drifted from the op would be caught)."""
    module, name, good, _, _ = CASES[op]
    assert web.find_op(op).check is getattr(module, name)
    planted = {"planted": f"refused by {name}"}

    def refuse(*a, **k):
        raise web.InputError(planted)

    # IPO's check is DPO's with method "ipo", which the op calls through DPO's op; the IsoFLOP op calls its
    # check's two parts (the budget only once the sweep has a power law): each is planted in turn
    parts = {"posttrain_ipo_start": ["validate_dpo_start"], "scaling_isoflop": ["_isoflop_choice", "_custom_budget"]}
    for part in parts.get(op, [name]):
        with monkeypatch.context() as m:
            m.setattr(module, part, refuse)
            run = call(op, good)
        assert not run["ok"] and run["errors"] == planted, part


def test_checking_changes_no_state(session):
    """Checks of good and bad args set up no run and replace no model; the runs' ops stay where they were."""
    before = state()
    for op, (_, _, good, fields, _) in CASES.items():
        check(op, good)
        for field in fields:
            check(op, {**good, field: "🙂"})
    after = state()
    assert all(a == b for a, b in zip(after, before)) and after[3] is before[3]
    assert posttrain_ops._STATE["run"] is None and "dp" not in parallel_ops._RUNS and "train" not in slow_links_ops._RUNS


def test_a_preference_run_checked_before_the_vocabulary_is_loaded_asks_for_it(monkeypatch):
    """DPO's target is checked against the page's vocabulary: without it the check asks the worker to load
    vocab.json (as an op does), and afterwards checks the target."""
    monkeypatch.setattr(web, "SESSION", web.Session())
    out = call("check_args", {"op": "posttrain_dpo_start", "args": CASES["posttrain_dpo_start"][2]})
    assert not out["ok"] and out["kind"] == "data" and out["files"] == [web.VOCAB_FILE]


@pytest.mark.parametrize("op", ["parallel_mfu", "tp_check", "tp_example", "planner_runs", "posttrain_dpo_loss",
                                "parallel_dp_chunk", "slow_train_finish", "posttrain_sft_chunk"])
def test_ops_the_reader_types_nothing_for_are_not_checked(op):
    assert check(op, {}) == {"checked": False, "errors": {}}
