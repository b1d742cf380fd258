"""Chapter 16's experiments: after pretraining, SFT with a response-only loss, and preferences
(a Bradley-Terry reward model, RL with a KL penalty, DPO and IPO), all on the course model.

For each seed in SEEDS the course model is pretrained once with chapter 1's default recipe
(400 steps, TrainConfig() with that seed; pylib.studies.sft.pretrain_configs), and every method
below starts from that one pretrained model:

1. SFT (pylib.studies.sft): speaker questions built from the validation plays (the prompt is a
   line and "Who?", the response the speaker's name and EOS). Two arms from the same pretrained
   weights and the same batches (the batch rng depends on the seed only): the loss on the
   response only, and the loss on the whole sequence. Evaluated on the held-out pairs: the mean
   loss per response token, the mean loss per prompt token, and the accuracy of ranking the
   SFT_SET["speakers"] candidate names by log-probability; the pretrained model is scored too.
   The prompt's loss is reported in two parts: the verse (the line's characters) and the template
   (the fixed question "\nWho? " after every line), because a mean over both mostly measures how
   well the fixed question is learned. Each model also samples one answer per held-out line
   (temperature 1, up to ANSWER_TOKENS characters; the sampling rng depends on the seed only):
   the fractions that stop (EOS), that are in capitals, and that are exactly a candidate name.
2. Preferences (pylib.studies.preferences), a toy: pairs of the pretrained model's own samples
   after validation-split prompts, the one with more of PREF["target"] preferred. The reference
   (the pretrained model), RL with the KL penalty RL["kl_coef"], RL without it, and DPO at
   DPO["beta"]. Each policy is measured on held-out prompts: the target letter's frequency in one
   sample per prompt, and the KL from the reference estimated on those samples (nats per
   response). The reward model's pair accuracy is scored on pairs made the same way from the
   held-out prompts. IPO at IPO["tau"] runs beside DPO on the same pairs. On the training pairs,
   every policy's mean log-probability of the chosen and of the rejected responses, and the mean
   margin h = (log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l)): whether the chosen
   responses' likelihood falls while the margin grows (likelihood displacement); for DPO and IPO also
   at the steps in CHECKPOINTS, the run being done in segments.

No number here is a validation loss of the corpus: the SFT losses are on the held-out pairs'
response or prompt tokens, and the preference measurements are on sampled responses.

Budget (OPENBLAS_NUM_THREADS=1, idle): pretraining 3 x ~2.2 s (400 default steps, no whole-split
evaluation); SFT 3 x 2 arms x 200 steps x ~2 ms ~ 2.5 s, evaluation 3 x 3 x ~0.6 s ~ 5.5 s;
preferences per seed: pairs ~0.5 s, held-out pairs ~0.25 s, DPO 80 steps ~0.9 s, RL 2 x 80 steps
~3.5 s each, measurements 4 x ~0.15 s: ~9 s, x 3 = 27 s. Total ~42 s, under the 90 s budget.
Measured with one BLAS thread on the shared, busy 2-core machine: 44 s of CPU time (user) for the
task, 67 s and 168 s of wall time in two runs under other engineers' load. Issue 22 added the
sampled answers (3 x 3 models x 400 lines, batched by prompt length), IPO (80 steps per seed),
each policy's log-probabilities of the training pairs, and DPO's and IPO's at CHECKPOINTS: CPU time
(user) 31.7 s before, 37.4 s with all but the checkpoints, 39.9 s with them (wall 32.5 s, 38.4 s,
and 60.1 s under a load average of 4.3).
One task (no PARTS): the pretrained model is shared by every method of its seed.
"""

import dataclasses
import time

import numpy as np

from experiments.common import SEEDS, arm, is_small, paired_text, progress, scaled

from pylib.studies import preferences as pf, sft

SFT_ARMS = ("pretrained",) + sft.ARMS
SFT_METRICS = ("response_loss", "verse_loss", "template_loss", "accuracy", "top_pick_share",
               "stops", "capitals", "candidate")
ANSWER_TOKENS = 24  # characters sampled per answer, as the page's sft.answer does
PREF_METHODS = {  # name: (method, settings)
    "reference": ("reference", None),
    "rl": ("rl", pf.RL),
    "rl_nokl": ("rl", dict(pf.RL, kl_coef=0.0)),
    "dpo": ("dpo", pf.DPO),
    "ipo": ("ipo", pf.IPO),
}
LOSS_MARGIN = 0.02  # nats: differences smaller than this count as none (chosen before measuring)
ACC_MARGIN = 0.02  # accuracy: two points in a hundred
FREQ_MARGIN = 0.01  # target-letter frequency: one point in a hundred
# The notebook's reduced size (experiments.common.small_size): two seeds, a short pretraining, fewer SFT
# steps, the first test_pairs held-out pairs, fewer preference prompts, short RL runs, and batches of
# `batch` for RL, DPO and IPO (DPO and IPO keep their 80 steps: the checkpoints' keys are the chapter's).
SMALL = {"seeds": (0, 1), "pretrain_steps": 30, "sft_steps": 20, "test_pairs": 40, "pairs": 32, "eval_prompts": 16,
         "rl_steps": 4, "batch": 4}


def seeds():
    """SEEDS, or SMALL's at the reduced size."""
    return scaled(SEEDS, SMALL["seeds"])


def sft_settings():
    """pylib.studies.sft.SFT, or with SMALL's steps at the reduced size."""
    return scaled(sft.SFT, dict(sft.SFT, steps=SMALL["sft_steps"]))


def pref_settings():
    """pylib.studies.preferences.PREF, or with SMALL's numbers of prompts at the reduced size."""
    return scaled(pf.PREF, dict(pf.PREF, pairs=SMALL["pairs"], eval_prompts=SMALL["eval_prompts"]))


def pref_methods():
    """PREF_METHODS, or at the reduced size with SMALL's batches (and RL's steps)."""
    small = {"batch_size": SMALL["batch"]}
    return scaled(PREF_METHODS, {name: (method, None if settings is None else
                                        dict(settings, **small, **({"steps": SMALL["rl_steps"]} if method == "rl" else {})))
                                 for name, (method, settings) in PREF_METHODS.items()})


def sft_set_for(corpus):
    """The speaker questions every seed is fine-tuned and scored on (sft.build_sft_set on the validation
    split); at the reduced size only the first SMALL["test_pairs"] held-out pairs are scored."""
    sft_set = sft.build_sft_set(corpus.val, corpus.vocab, sft.pretrain_configs(corpus.vocab.size, 0)[0].block_size)
    if is_small():
        sft_set = dataclasses.replace(sft_set, test=sft_set.test[:SMALL["test_pairs"]])
    return sft_set


def pretrain(corpus, seed):
    """The default 400-step run of this seed: the pretrained model every method starts from."""
    from pylib import train
    mcfg, tcfg = sft.pretrain_configs(corpus.vocab.size, seed, steps=scaled(None, SMALL["pretrain_steps"]))
    params, history = train.train(mcfg, tcfg, corpus.train, corpus.val)
    return mcfg, params, history


def sft_seed(corpus, mcfg, params, seed, sft_set):
    """{arm: evaluate(...)} for the pretrained model and the two fine-tuned arms of one seed."""
    x, y, pm, rm = sft.encode_pairs(sft_set.train, corpus.vocab, mcfg.block_size)
    lines = [line for _, line in sft_set.test]

    def scores(p):
        answers = sft.sample_answers(p, mcfg, lines, corpus.vocab, np.random.default_rng([seed, 163]), ANSWER_TOKENS)
        return {**sft.evaluate(p, mcfg, sft_set, corpus.vocab), **sft.answer_shapes(answers, sft_set.speakers)}

    out = {"pretrained": scores(params)}
    for name in sft.ARMS:
        state = sft.init_finetune(params, seed)
        records = sft.sft_steps(state, mcfg, x, y, sft.loss_mask(name, pm, rm), sft_settings()["steps"])
        out[name] = scores(state["params"])
        out[name]["final_train_loss"] = records[-1]["loss"]
    return out


def preferences_seed(corpus, mcfg, params, seed):
    """The pairs, the reward model and every method's measurements for one seed."""
    P = pf.PREF["prompt_tokens"]
    target = pf.target_id(corpus.vocab, pf.PREF["target"])
    prompts = pf.prompts_from(corpus.val, pref_settings()["pairs"], P)
    held_out = pf.prompts_from(corpus.val, pref_settings()["eval_prompts"], P, offset=HELD_OUT_OFFSET)
    pairs = pf.make_pairs(params, mcfg, prompts, target, np.random.default_rng([seed, 160]))
    test_pairs = pf.make_pairs(params, mcfg, held_out, target, np.random.default_rng([seed, 162]))
    w = pf.fit_reward_model(pairs, corpus.vocab.size)
    out = {"pairs": len(pairs["prompts"]), "rm_accuracy": pf.pair_accuracy(w, test_pairs),
           "rm_target_rank": int((w > w[target]).sum()) + 1}
    ref_c = pf.response_logps(params, mcfg, pairs["prompts"], pairs["chosen"])
    ref_r = pf.response_logps(params, mcfg, pairs["prompts"], pairs["rejected"])
    for name, (method, settings) in pref_methods().items():
        state = sft.init_finetune(params, seed)
        if method in pf.PAIR_LOSSES:  # in segments (the same run: the state carries its rng), measured at each checkpoint
            done = 0
            for step in CHECKPOINTS:
                rec = pf.dpo_steps(state, mcfg, pairs, ref_c, ref_r, step - done, settings, method)[-1]
                done = step
                pc = pf.response_logps(state["params"], mcfg, pairs["prompts"], pairs["chosen"])
                pr = pf.response_logps(state["params"], mcfg, pairs["prompts"], pairs["rejected"])
                out[f"{name}.step{step}.chosen"] = float((pc - ref_c).mean())
                out[f"{name}.step{step}.margin"] = float(pf.log_ratio_margin(pc, pr, ref_c, ref_r).mean())
            assert done == settings["steps"]
            out[f"{name}.final_loss"] = rec["loss"]
        elif method == "rl":
            rec = pf.rl_steps(state, params, mcfg, prompts, w, settings["steps"], settings)[-1]
            out[f"{name}.final_reward"] = rec["reward"]
        m = pf.measure_policy(state["params"], params, mcfg, held_out, target, seed)
        out[f"{name}.frequency"], out[f"{name}.kl"] = m["frequency"], m["kl"]
        out[f"{name}.reward"] = float(pf.reward(w, m["responses"]).mean())
        pc = pf.response_logps(state["params"], mcfg, pairs["prompts"], pairs["chosen"])  # on the training pairs
        pr = pf.response_logps(state["params"], mcfg, pairs["prompts"], pairs["rejected"])
        out[f"{name}.chosen_logp"], out[f"{name}.rejected_logp"] = float(pc.mean()), float(pr.mean())
        out[f"{name}.margin"] = float(pf.log_ratio_margin(pc, pr, ref_c, ref_r).mean())
    return out


CHECKPOINTS = (10, 20, 40, 80)  # DPO's and IPO's steps at which the training pairs are measured (the last: all)
HELD_OUT_OFFSET = 1000  # tokens: the held-out prompts start this far from the pair prompts' windows


def run(corpus):
    t0 = time.perf_counter()
    sft_set = sft_set_for(corpus)
    by_seed_sft, by_seed_pref, pre_seconds = {}, {}, 0.0
    for seed in progress(seeds(), desc="seeds", unit="seed"):
        t = time.perf_counter()
        mcfg, params, _ = pretrain(corpus, seed)
        pre_seconds += time.perf_counter() - t
        by_seed_sft[seed] = sft_seed(corpus, mcfg, params, seed, sft_set)
        by_seed_pref[seed] = preferences_seed(corpus, mcfg, params, seed)
    values = {}
    for name in SFT_ARMS:
        for metric in SFT_METRICS:
            values.update(arm(f"ch16.sft.{name}.{metric}", {s: r[name][metric] for s, r in by_seed_sft.items()}))
    for name in sft.ARMS:
        values.update(arm(f"ch16.sft.{name}.final_train_loss", {s: r[name]["final_train_loss"] for s, r in by_seed_sft.items()}))
    for key in by_seed_pref[seeds()[0]]:
        values.update(arm(f"ch16.pref.{key}", {s: r[key] for s, r in by_seed_pref.items()}))
    settings = {"ch16": {"pretraining": "TrainConfig() with each seed (chapter 1's default run), no whole-split evaluation",
                         "sft_set": sft.SFT_SET, "sft": sft.SFT, "pref": pf.PREF, "reward_model": pf.REWARD,
                         "dpo": pf.DPO, "ipo": pf.IPO, "rl": pf.RL, "answer_tokens": ANSWER_TOKENS, "held_out_offset": HELD_OUT_OFFSET,
                         "speakers": list(sft_set.speakers), "sft_train_pairs": len(sft_set.train),
                         "sft_test_pairs": len(sft_set.test)}}
    if is_small():  # what the reduced size changed
        methods = pref_methods()
        settings["ch16"].update(pretraining=f"TrainConfig() with each seed, {SMALL['pretrain_steps']} steps (the notebook's "
                                            "reduced size), no whole-split evaluation",
                                pretrain_steps=SMALL["pretrain_steps"], sft=sft_settings(), pref=pref_settings(),
                                dpo=methods["dpo"][1], ipo=methods["ipo"][1], rl=methods["rl"][1])
    timings = {"ch16.total_seconds": time.perf_counter() - t0, "ch16.pretrain_seconds": pre_seconds}
    return {"values": values, "curves": {}, "settings": settings, "timings": timings}


def derived(corpus):
    """The settings the chapter and its widget quote, and the SFT set's sizes and baselines."""
    from pylib import model
    from pylib.web import posttrain_ops
    name = lambda n: " ".join(w if set(w) <= set("IVX") else w.title() for w in n.split())  # noqa: E731 (King Richard II)
    block = model.GPTConfig().block_size
    s = sft.build_sft_set(corpus.val, corpus.vocab, block)
    test_speakers = [sp for sp, _ in s.test]
    counts = {sp: test_speakers.count(sp) for sp in s.speakers}
    majority = max(counts.values()) / len(test_speakers)
    return {
        "ch16.sft_speakers": len(s.speakers),
        "ch16.sft_speaker_names": ", ".join(name(n) for n in s.speakers),
        "ch16.sft_train_pairs": len(s.train),
        "ch16.sft_test_pairs": len(s.test),
        "ch16.sft_chance": 1.0 / len(s.speakers),
        "ch16.sft_majority": majority,
        "ch16.sft_majority_speaker": name(max(s.speakers, key=lambda sp: counts[sp])),
        "ch16.sft_steps": sft.SFT["steps"],
        "ch16.sft_batch": sft.SFT["batch_size"],
        "ch16.sft_lr": sft.SFT["lr"],
        "ch16.sft_min_line": sft.SFT_SET["min_line"],
        "ch16.sft_example_line": s.test[0][1],
        "ch16.sft_example_speaker": name(s.test[0][0]),
        "ch16.pref_target": pf.PREF["target"],
        "ch16.pref_prompt_tokens": pf.PREF["prompt_tokens"],
        "ch16.pref_response_tokens": pf.PREF["response_tokens"],
        "ch16.pref_prompts": pf.PREF["pairs"],
        "ch16.pref_eval_prompts": pf.PREF["eval_prompts"],
        "ch16.dpo_beta": pf.DPO["beta"],
        "ch16.dpo_steps": pf.DPO["steps"],
        "ch16.dpo_lr": pf.DPO["lr"],
        "ch16.dpo_batch": pf.DPO["batch_size"],
        "ch16.ipo_tau": pf.IPO["tau"],
        "ch16.ipo_target": 1.0 / (2.0 * pf.IPO["tau"]),
        "ch16.ipo_steps": pf.IPO["steps"],
        **{f"ch16.checkpoint_{i + 1}": step for i, step in enumerate(CHECKPOINTS)},
        "ch16.answer_tokens": ANSWER_TOKENS,
        "ch16.sft_question_tokens": len(sft.SFT_SET["question"]),
        "ch16.sft_verse_tokens": float(np.mean([len(line) - 1 for _, line in s.test])),  # a line's targets: all but its first character
        "ch16.sft_clip": sft.SFT["grad_clip"],
        "ch16.rl_kl_coef": pf.RL["kl_coef"],
        "ch16.rl_steps": pf.RL["steps"],
        "ch16.rl_batch": pf.RL["batch_size"],
        "ch16.rm_steps": pf.REWARD["steps"],
        "ch16.pretrain_steps": sft.pretrain_configs(corpus.vocab.size, 0)[1].steps,
        "ch16.widget_pretrain_steps": posttrain_ops.PAGE["pretrain_steps"],
        "ch16.widget_sft_steps": posttrain_ops.PAGE["sft_steps"],
        "ch16.widget_dpo_steps": posttrain_ops.PAGE["dpo_steps"],
        "ch16.widget_ipo_steps": posttrain_ops.PAGE["ipo_steps"],
        "ch16.widget_beta_max": posttrain_ops.PAGE["beta_max"],
        "ch16.widget_tau_max": posttrain_ops.PAGE["tau_max"],
        "ch16.widget_pairs": posttrain_ops.PAGE["pairs"],
        "ch16.widget_line_max": posttrain_ops.PAGE["line_max"],
        "ch16.loss_margin": LOSS_MARGIN,
        "ch16.acc_margin": ACC_MARGIN,
        "ch16.freq_margin": FREQ_MARGIN,
    }


def markdown(results):
    """results.md's section for chapter 16."""
    v = results["values"]

    def pm(key, fmt=".3f"):
        return f"{v[key + '.mean']:{fmt}} ± {v[key + '.sd']:{fmt}}" if v.get(key + ".mean") is not None else "–"

    def cmp(a, b, margin, fmt="+.3f"):
        try:
            return paired_text(v, a, b, margin, fmt)
        except (KeyError, ValueError) as e:
            return f"– ({e})"

    measured = results["settings"]["ch16"]
    seed_list = sorted(map(int, v["ch16.sft.pretrained.accuracy.per_seed"]))  # the seeds the results were measured with
    pretraining = (f"a {measured['pretrain_steps']}-step run, the notebook's reduced size" if "pretrain_steps" in measured
                   else "the default 400-step run")
    lines = ["## Chapter 16: after pretraining (SFT, RLHF, DPO)", "",
             f"Seeds {', '.join(map(str, seed_list))}; mean ± sample sd over seeds; each seed pretrains the course model "
             f"once ({pretraining}) and every method starts from it. Paired comparisons: a − b, 95% "
             "t-interval.", "",
             "### SFT on speaker questions (held-out pairs)", "",
             "| model | loss per response token | loss per verse token | loss per template token | speaker accuracy | "
             "share of the top pick | answers that stop | in capitals | exactly a candidate |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in SFT_ARMS:
        lines.append(f"| {name} | " + " | ".join(pm(f"ch16.sft.{name}.{m}") for m in SFT_METRICS) + " |")
    lines += ["",
              f"- response − whole, response loss: {cmp('ch16.sft.response.response_loss', 'ch16.sft.whole.response_loss', LOSS_MARGIN)}",
              f"- whole − pretrained, verse loss: {cmp('ch16.sft.whole.verse_loss', 'ch16.sft.pretrained.verse_loss', LOSS_MARGIN)}",
              f"- whole − pretrained, template loss: {cmp('ch16.sft.whole.template_loss', 'ch16.sft.pretrained.template_loss', LOSS_MARGIN)}",
              f"- response − pretrained, verse loss: {cmp('ch16.sft.response.verse_loss', 'ch16.sft.pretrained.verse_loss', LOSS_MARGIN)}",
              f"- response − whole, verse loss: {cmp('ch16.sft.response.verse_loss', 'ch16.sft.whole.verse_loss', LOSS_MARGIN)}",
              f"- response − whole, accuracy: {cmp('ch16.sft.response.accuracy', 'ch16.sft.whole.accuracy', ACC_MARGIN)}",
              f"- response − pretrained, accuracy: {cmp('ch16.sft.response.accuracy', 'ch16.sft.pretrained.accuracy', ACC_MARGIN)}",
              "", "### Preferences, a toy (held-out prompts)", "",
              f"Pairs kept (ties dropped): {pm('ch16.pref.pairs', '.1f')}; reward model's accuracy on held-out pairs "
              f"{pm('ch16.pref.rm_accuracy')}; the target letter's rank among its weights {pm('ch16.pref.rm_target_rank', '.1f')}.", "",
              "| policy | target-letter frequency | KL from the reference (nats per response, k1) | reward-model score | "
              "log p(chosen), training pairs | log p(rejected) | margin h |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in PREF_METHODS:
        lines.append(f"| {name} | {pm(f'ch16.pref.{name}.frequency')} | {pm(f'ch16.pref.{name}.kl', '.2f')} | "
                     f"{pm(f'ch16.pref.{name}.reward', '.2f')} | {pm(f'ch16.pref.{name}.chosen_logp', '.2f')} | "
                     f"{pm(f'ch16.pref.{name}.rejected_logp', '.2f')} | {pm(f'ch16.pref.{name}.margin', '.2f')} |")
    lines += ["",
              f"- dpo − reference, frequency: {cmp('ch16.pref.dpo.frequency', 'ch16.pref.reference.frequency', FREQ_MARGIN)}",
              f"- rl − reference, frequency: {cmp('ch16.pref.rl.frequency', 'ch16.pref.reference.frequency', FREQ_MARGIN)}",
              f"- rl_nokl − rl, frequency: {cmp('ch16.pref.rl_nokl.frequency', 'ch16.pref.rl.frequency', FREQ_MARGIN)}",
              f"- dpo − rl, frequency: {cmp('ch16.pref.dpo.frequency', 'ch16.pref.rl.frequency', FREQ_MARGIN)}",
              f"- dpo − rl, KL: {cmp('ch16.pref.dpo.kl', 'ch16.pref.rl.kl', 0.5, '+.2f')}",
              f"- rl_nokl − rl, KL: {cmp('ch16.pref.rl_nokl.kl', 'ch16.pref.rl.kl', 0.5, '+.2f')}",
              f"- dpo − reference, log p(chosen): {cmp('ch16.pref.dpo.chosen_logp', 'ch16.pref.reference.chosen_logp', 0.5, '+.2f')}",
              f"- ipo − reference, log p(chosen): {cmp('ch16.pref.ipo.chosen_logp', 'ch16.pref.reference.chosen_logp', 0.5, '+.2f')}",
              f"- ipo − dpo, KL: {cmp('ch16.pref.ipo.kl', 'ch16.pref.dpo.kl', 0.5, '+.2f')}", "",
              "On the training pairs during the run: the chosen responses' mean log-ratio log pi - log pi_ref, and the "
              "mean margin h (nats per response).", "",
              "| step | DPO chosen | DPO margin | IPO chosen | IPO margin |", "| --- | --- | --- | --- | --- |"]
    for step in CHECKPOINTS:
        lines.append(f"| {step} | " + " | ".join(pm(f"ch16.pref.{m}.step{step}.{q}", ".2f")
                                                 for m in ("dpo", "ipo") for q in ("chosen", "margin")) + " |")
    lines += [""]
    return lines
