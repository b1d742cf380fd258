"""Chapter 16's page ops (after pretraining): validation of what the reader typed, and thin calls
into pylib.train, pylib.studies.sft and pylib.studies.preferences. No numerics of its own.

Ops (see pylib.web.all_ops):
  run:posttrain_pretrain   the course model's default pretraining run (chapter 1's recipe), chunked
                           and stoppable; the result is kept as the page's pretrained model;
  run:posttrain_sft        SFT from the pretrained model on the speaker questions, the loss on the
                           response only or on the whole sequence; before/after answers and the
                           held-out response loss and speaker accuracy (PAGE["eval_pairs"] pairs);
  run:posttrain_dpo        DPO from the pretrained model on rule-made pairs (more of a target letter
                           preferred); before/after samples, the target frequency and the KL from
                           the reference on PAGE["eval_prompts"] held-out prompts, and the mean
                           margin h on the training pairs;
  run:posttrain_ipo        the same with IPO's loss (pylib.studies.preferences.ipo_loss), whose
                           margin is regressed to its target 1/(2 tau);
  posttrain_ask            the pretrained and the fine-tuned model's answer to a line the reader types.
The pretrained and the fine-tuned models live in this module (one page, one worker).
"""

import dataclasses
import math

import numpy as np

from pylib import train
from pylib.studies import preferences as pf, sft
from pylib.web import LIMITS as WEB_LIMITS, InputError, collect_fields, parse_field, parse_int, parse_number
from pylib.web.check_ops import checked_by
from pylib.web.chunks import chunk_steps

PAGE = {
    "pretrain_steps": 400,  # chapter 1's default run, the measured recipe
    "pretrain_steps_max": 2000,
    "sft_steps": sft.SFT["steps"],
    "dpo_steps": pf.DPO["steps"],
    "steps_max": 1000,
    "pairs": 128,  # prompts for DPO pairs in the page (the measurements use PREF["pairs"])
    "eval_pairs": 100,  # held-out SFT pairs scored in the page
    "eval_prompts": 64,  # held-out prompts for the frequency and KL in the page
    "shown": 3,  # answers or samples shown before and after
    "beta_max": 100.0,
    "ipo_steps": pf.IPO["steps"],
    "tau_max": 10.0,  # IPO's target margin 1/(2 tau) is then 0.05 nats, next to the reference's 0
    "line_max": 64 - len(sft.SFT_SET["question"]) - 16,  # characters of a reader's line that fit with an answer
}

_STATE = {"pretrained": None, "tuned": None, "sft_set": None, "run": None}


def _need_pretrained():
    if _STATE["pretrained"] is None:
        raise InputError({"pretrained": "Pretrain the model first (press Pretrain), then fine-tune it."})
    return _STATE["pretrained"]


def _sft_set(session):
    if _STATE["sft_set"] is None:
        _STATE["sft_set"] = sft.build_sft_set(session.val_tokens, session.vocab, sft.pretrain_configs(session.vocab.size, 0)[0].block_size)
    return _STATE["sft_set"]


def _clean(x):
    x = float(x)
    return x if math.isfinite(x) else None


def _seed(args):
    return ("seed", lambda: parse_field(parse_int, "seed", "Seed", args.get("seed"), 0, WEB_LIMITS["seed_max"]))


def _steps(args, hi):
    return ("steps", lambda: parse_field(parse_int, "steps", "Steps", args.get("steps"), 1, hi))


# ---------------------------------------------------------------------------
# Pretraining in the page


def validate_pretrain(args):
    """Pretraining's {seed, steps} -> checked values, or InputError (also op check_args's check of
    run:posttrain_pretrain, through posttrain_pretrain_start)."""
    args = args or {}
    return collect_fields([_seed(args), _steps(args, PAGE["pretrain_steps_max"])])


@checked_by(validate_pretrain)
def pretrain_start(session, args):
    session._need_corpus()
    s = validate_pretrain(args)
    mcfg, tcfg = sft.pretrain_configs(session.vocab.size, s["seed"], s["steps"])
    _STATE["run"] = {"kind": "pretrain", "mcfg": mcfg, "cfg": tcfg, "state": train.init_train_state(mcfg, tcfg),
                     "last": None, "settings": s}
    _STATE["pretrained"] = None  # a new pretraining replaces the old model ...
    _STATE["tuned"] = None  # ... and whatever was fine-tuned from it
    return {"settings": s, "steps": tcfg.steps}


def pretrain_chunk(session, args):
    run = _STATE["run"]
    state, cfg = run["state"], run["cfg"]
    losses = []
    done = lambda: state["step"] >= cfg.steps or state["diverged"]
    for _ in chunk_steps(done):
        for rec in train.train_steps(state, run["mcfg"], cfg, session.train_tokens, session.val_tokens, 1):
            losses.append({"step": rec["step"], "loss": rec.get("loss")})
            run["last"] = rec
    return {"done": done(), "step": state["step"], "steps": cfg.steps,
            "losses": losses, "diverged": bool(state["diverged"])}


def pretrain_finish(session, args):
    run = _STATE.pop("run")
    _STATE["run"] = None
    state = run["state"]
    complete = state["step"] >= run["cfg"].steps and not state["diverged"]
    out = {"steps": state["step"], "complete": complete, "diverged": bool(state["diverged"]),
           "final_loss": None if run["last"] is None else run["last"].get("loss"),
           "val_subset": None if run["last"] is None else run["last"].get("val")}
    if complete:
        _STATE["pretrained"] = {"mcfg": run["mcfg"], "params": state["params"], "seed": run["settings"]["seed"],
                                "steps": state["step"]}
        out["answers"] = _answers(session, state["params"], run["mcfg"], run["settings"]["seed"])
    return out


def _answers(session, params, mcfg, seed):
    """The model's sampled answers to the first PAGE['shown'] held-out questions."""
    s = _sft_set(session)
    return [{"line": line, "truth": speaker, **sft.answer(params, mcfg, line, session.vocab, seed=seed)}
            for speaker, line in s.test[:PAGE["shown"]]]


# ---------------------------------------------------------------------------
# SFT in the page


def validate_sft(args):
    """SFT's {seed, steps, arm} -> ({seed, steps}, arm), or InputError (also op check_args's check of
    run:posttrain_sft, through posttrain_sft_start; whether a pretrained model exists is the run's question)."""
    args = args or {}
    arm = args.get("arm")
    parsers = [_seed(args), _steps(args, PAGE["steps_max"])]
    s = collect_fields(parsers)
    if arm not in sft.ARMS:
        raise InputError({"arm": "Choose where the loss counts: the response only, or the whole sequence."})
    return s, arm


@checked_by(validate_sft)
def sft_start(session, args):
    session._need_corpus()
    s, arm = validate_sft(args)
    pre = _need_pretrained()
    sft_set = _sft_set(session)
    x, y, pm, rm = sft.encode_pairs(sft_set.train, session.vocab, pre["mcfg"].block_size)
    _STATE["tuned"] = None
    _STATE["run"] = {"kind": "sft", "arm": arm, "settings": s, "state": sft.init_finetune(pre["params"], s["seed"]),
                     "data": (x, y, sft.loss_mask(arm, pm, rm)), "steps": s["steps"]}
    return {"settings": {**s, "arm": arm}, "steps": s["steps"], "train_pairs": len(sft_set.train)}


def sft_chunk(session, args):
    run, pre = _STATE["run"], _STATE["pretrained"]
    state, (x, y, mask) = run["state"], run["data"]
    records = []
    done = lambda: state["step"] >= run["steps"]
    for _ in chunk_steps(done):
        records += sft.sft_steps(state, pre["mcfg"], x, y, mask, 1)
    return {"done": done(), "step": state["step"], "steps": run["steps"],
            "records": [{"step": r["step"], "loss": _clean(r["loss"])} for r in records]}


def _sft_scores(session, params, mcfg):
    s = _sft_set(session)
    small = dataclasses.replace(s, test=s.test[:PAGE["eval_pairs"]])
    return {k: _clean(v) for k, v in sft.evaluate(params, mcfg, small, session.vocab).items()}


def sft_finish(session, args):
    run, pre = _STATE.pop("run"), _STATE["pretrained"]
    _STATE["run"] = None
    params, mcfg, seed = run["state"]["params"], pre["mcfg"], run["settings"]["seed"]
    _STATE["tuned"] = {"params": params, "kind": "sft", "arm": run["arm"], "steps": run["state"]["step"]}
    return {"steps": run["state"]["step"], "arm": run["arm"], "eval_pairs": PAGE["eval_pairs"],
            "speakers": len(_sft_set(session).speakers),  # the candidates: chance accuracy is 1 in this many
            "before": {"scores": _sft_scores(session, pre["params"], mcfg), "answers": _answers(session, pre["params"], mcfg, seed)},
            "after": {"scores": _sft_scores(session, params, mcfg), "answers": _answers(session, params, mcfg, seed)}}


def validate_line(raw):
    """A reader's line for the speaker question: non-empty text of at most PAGE['line_max'] characters."""
    if raw is None or not isinstance(raw, str) or not raw.strip():
        raise InputError({"line": "The line is empty: type a line of verse, for example one from the plays."})
    line = " ".join(raw.split())  # one line: newlines and runs of spaces become one space
    if len(line) > PAGE["line_max"]:
        raise InputError({"line": f"The line is {len(line):,} characters long; at most {PAGE['line_max']} fit "
                                  "in the model's context with the question and an answer."})
    return line


def validate_ask(args):
    """The question's {line, seed} -> checked values, or InputError (also op check_args's check; whether the
    line has a character the model knows is asked with the model's vocabulary when the op runs)."""
    args = args or {}
    return collect_fields({"line": lambda: validate_line(args.get("line")), **dict([_seed(args)])})


@checked_by(validate_ask)
def ask(session, args):
    """{line, seed} -> the pretrained and the fine-tuned model's answers, and the characters dropped."""
    from pylib import data
    session._need_corpus()
    s = validate_ask(args)
    pre = _need_pretrained()
    line = data.normalise_text(s["line"])
    ids, dropped = session.vocab.encode(line)
    if ids.size == 0:
        raise InputError({"line": "None of the line's characters is in the model's vocabulary (letters and "
                                  "punctuation are; digits and emoji are not): type letters and punctuation."})
    kept = " ".join(session.vocab.decode(ids.tolist()).split())  # a dropped character leaves no double space
    out = {"line": kept, "dropped": int(dropped),
           "pretrained": sft.answer(pre["params"], pre["mcfg"], kept, session.vocab, seed=s["seed"])}
    tuned = _STATE["tuned"]
    out["tuned_kind"] = None if tuned is None else tuned["kind"]  # a DPO or IPO copy is not asked: it learned no answers
    if tuned is not None and tuned["kind"] == "sft":
        out["tuned"] = sft.answer(tuned["params"], pre["mcfg"], kept, session.vocab, seed=s["seed"])
        out["arm"] = tuned["arm"]
    return out


# ---------------------------------------------------------------------------
# DPO and IPO in the page

PAIR_METHODS = {"dpo": ("beta", "β", "beta_max", "dpo_steps"), "ipo": ("tau", "τ", "tau_max", "ipo_steps")}
# method: (its coefficient's field, label, PAGE's bound on it, PAGE's default steps)


def validate_dpo_settings(args, vocab, method="dpo"):
    key, label, bound, _ = PAIR_METHODS[method]

    def coefficient():
        value = parse_field(parse_number, key, label, args.get(key))
        if not 0 < value <= PAGE[bound]:
            raise InputError({key: f"{label} must be greater than 0 and at most {PAGE[bound]:g}; got {value:g}."})
        return value

    def target():
        raw = args.get("target")
        if not isinstance(raw, str) or len(raw) != 1 or raw not in vocab.chars or raw in "\n":
            raise InputError({"target": "The target must be one character the model knows: a letter or a "
                                        "punctuation mark (no digits, no emoji)."})
        return raw

    return collect_fields([(key, coefficient), ("target", target), _seed(args), _steps(args, PAGE["steps_max"])])


def ipo_target(tau):
    """IPO's target margin 1/(2 tau) (Azar et al. 2023, equation 17), nats."""
    return 1.0 / (2.0 * tau)


def _page_vocab():
    """The page's vocabulary (loaded as Python starts; DataNotLoaded asks the worker for it otherwise)."""
    from pylib.web import SESSION
    SESSION._need_vocab()
    return SESSION.vocab


def validate_dpo_start(args, vocab=None, method="dpo"):
    """DPO's (or IPO's) form -> validate_dpo_settings' values with vocab (by default the page's), or
    InputError (also op check_args's check of run:posttrain_dpo, through posttrain_dpo_start)."""
    return validate_dpo_settings(args or {}, _page_vocab() if vocab is None else vocab, method)


def validate_ipo_start(args, vocab=None):
    """IPO's form: validate_dpo_start with method "ipo" (op check_args's check of run:posttrain_ipo)."""
    return validate_dpo_start(args, vocab, "ipo")


@checked_by(validate_dpo_start)
def dpo_start(session, args, method="dpo"):
    session._need_corpus()
    args = args or {}
    s = validate_dpo_start(args, session.vocab, method)
    pre = _need_pretrained()
    mcfg, params = pre["mcfg"], pre["params"]
    target = pf.target_id(session.vocab, s["target"])
    P = pf.PREF["prompt_tokens"]
    prompts = pf.prompts_from(session.val_tokens, PAGE["pairs"], P)
    held_out = pf.prompts_from(session.val_tokens, PAGE["eval_prompts"], P, offset=1000)
    pairs = pf.make_pairs(params, mcfg, prompts, target, np.random.default_rng([s["seed"], 160]))
    if len(pairs["prompts"]) < 2:
        raise InputError({"target": f"Fewer than two pairs differ in {s['target']!r}: the model almost never "
                                    "writes it. Choose a commoner character."})
    ref_c = pf.response_logps(params, mcfg, pairs["prompts"], pairs["chosen"])
    ref_r = pf.response_logps(params, mcfg, pairs["prompts"], pairs["rejected"])
    _STATE["tuned"] = None
    settings = dict(pf.DPO, beta=s["beta"]) if method == "dpo" else dict(pf.IPO, tau=s["tau"])
    _STATE["run"] = {"kind": method, "settings": s, "state": sft.init_finetune(params, s["seed"]),
                     "pairs": pairs, "ref": (ref_c, ref_r), "target": target, "held_out": held_out,
                     "dpo": settings, "steps": s["steps"]}
    shown = [{"chosen": session.vocab.decode(pairs["chosen"][i].tolist()),
              "rejected": session.vocab.decode(pairs["rejected"][i].tolist())} for i in range(min(2, len(pairs["prompts"])))]
    return {"settings": s, "steps": s["steps"], "pairs": len(pairs["prompts"]), "example_pairs": shown,
            "method": method, "target_margin": ipo_target(s["tau"]) if method == "ipo" else None}


@checked_by(validate_ipo_start)
def ipo_start(session, args):
    return dpo_start(session, args, "ipo")


def dpo_chunk(session, args):
    run, pre = _STATE["run"], _STATE["pretrained"]
    state = run["state"]
    records = []
    done = lambda: state["step"] >= run["steps"]
    for _ in chunk_steps(done):
        records += pf.dpo_steps(state, pre["mcfg"], run["pairs"], *run["ref"], 1, run["dpo"], run["kind"])
    return {"done": done(), "step": state["step"], "steps": run["steps"],
            "records": [{"step": r["step"], "loss": _clean(r["loss"]), "margin": _clean(r["margin"])} for r in records]}


def _policy_view(session, params, pre, run):
    m = pf.measure_policy(params, pre["params"], pre["mcfg"], run["held_out"], run["target"], run["settings"]["seed"])
    prompts = run["held_out"][:PAGE["shown"]]
    return {"frequency": _clean(m["frequency"]), "kl": _clean(m["kl"]),
            "samples": [{"prompt": session.vocab.decode(p.tolist()), "response": session.vocab.decode(r.tolist())}
                        for p, r in zip(prompts, m["responses"][:PAGE["shown"]])]}


def _pairs_margin(params, mcfg, run):
    """The mean margin h over all the run's training pairs (the chapter's measure), nats."""
    pairs = run["pairs"]
    pc = pf.response_logps(params, mcfg, pairs["prompts"], pairs["chosen"])
    pr = pf.response_logps(params, mcfg, pairs["prompts"], pairs["rejected"])
    return _clean(pf.log_ratio_margin(pc, pr, *run["ref"]).mean())


def dpo_finish(session, args):
    run, pre = _STATE.pop("run"), _STATE["pretrained"]
    _STATE["run"] = None
    params = run["state"]["params"]
    _STATE["tuned"] = {"params": params, "kind": run["kind"], "steps": run["state"]["step"]}
    target = ipo_target(run["settings"]["tau"]) if run["kind"] == "ipo" else None
    return {"steps": run["state"]["step"], "settings": run["settings"], "eval_prompts": PAGE["eval_prompts"],
            "method": run["kind"], "pairs_margin": _pairs_margin(params, pre["mcfg"], run), "target_margin": target,
            "before": _policy_view(session, pre["params"], pre, run), "after": _policy_view(session, params, pre, run)}


def dpo_loss_op(session, args):
    """The DPO loss and its gradients on four lists the reader (or a test) gives; beta validated."""
    args = args or {}
    try:
        loss, dc, dr = pf.dpo_loss(args.get("policy_chosen"), args.get("policy_rejected"), args.get("ref_chosen"),
                                   args.get("ref_rejected"), args.get("beta"))
    except (ValueError, TypeError) as e:
        raise InputError({"dpo": str(e)}) from None
    return {"loss": loss, "d_policy_chosen": dc.tolist(), "d_policy_rejected": dr.tolist()}


# ---------------------------------------------------------------------------

OPS = {
    "posttrain_pretrain_start": pretrain_start,
    "posttrain_pretrain_chunk": pretrain_chunk,
    "posttrain_pretrain_finish": pretrain_finish,
    "posttrain_sft_start": sft_start,
    "posttrain_sft_chunk": sft_chunk,
    "posttrain_sft_finish": sft_finish,
    "posttrain_dpo_start": dpo_start,
    "posttrain_dpo_chunk": dpo_chunk,
    "posttrain_dpo_finish": dpo_finish,
    "posttrain_ipo_start": ipo_start,
    "posttrain_ipo_chunk": dpo_chunk,  # the run knows its loss
    "posttrain_ipo_finish": dpo_finish,
    "posttrain_ask": ask,
    "posttrain_dpo_loss": dpo_loss_op,
}
