"""Chapter 2's experiments: BPE compression, char vs BPE loss per character, packing, dedup,
a quality heuristic, and mixtures.

- BPE is learnt on a fixed subset of the training stream (BPE_TRAIN_TOKENS ids, CharVocab ids with
  EOS as a stop symbol), without pre-tokenisation (merges may cross word boundaries) and with
  GPT-2-style pre-tokens (pylib.bpe, split=True); compression is measured on the whole
  validation stream.
- Char vs BPE: the default model and TrainConfig(final_eval=True) on each tokenisation, three
  seeds. Each model's final loss is its whole-validation-split loss (pylib.evaluation) on its own
  tokenisation of the validation plays, in nats per token; it is turned into nats per character
  with the characters that the scored target tokens stand for (EOS counts as a character).
- Packing: the useful-token fraction of packing and padding at the model's window length.
- Deduplication: exact and MinHash near-duplicates among scenes and among speeches, and the exact
  duplicate speeches that sit in both a training and a validation play.
- Quality: the duplicated word 5-gram fraction of each scene, and what a threshold on it drops.
- Mixtures: comedies against tragedies at several weights (pylib.studies.mixture), three seeds;
  each final loss is the whole held-out play of each genre (pylib.evaluation.full_loss).

PARTS run as separate tasks (measure.py); every final loss is stored as an arm (every seed).
"""

import dataclasses
import time

import numpy as np

from experiments.common import (SEEDS, arm, final_val, is_small, paired_text, progress, rounded, run_parts, scaled,
                                 val_tokens)

BPE_TRAIN_TOKENS = 500_000  # the first 500,000 ids of the training stream (about an eighth)
BPE_VOCABS = (128, 256)  # the BPE vocabularies the model is trained on
SPLIT_VOCABS = (128,)  # ... and with pre-tokenisation (split=True)
COMPRESSION_AT = (65, 80, 96, 128, 160, 192, 224, 256)  # vocab sizes reported in results.md
MIX_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)  # weight of comedies (tragedies get 1 - w)
NEAR_DUP = dict(threshold=0.5, k=5, n_hashes=64, bands=16, seed=0)
SPEECH_MIN_CHARS = 200  # near-duplicate search among speeches at least this long
QUALITY_N = 5  # word n-grams for the duplicated-n-gram fraction
# Gopher's cut on its duplicate 5-gram character fraction: 0.15 (Rae et al. 2021, arXiv 2112.11446,
# Table A1), as transcribed in huggingface/datatrove, src/datatrove/pipeline/filters/gopher_repetition_filter.py
# (the paper itself was not at hand). Its fraction counts an n-gram's repeats only, not its first
# occurrence as pylib.studies.dedup.duplicated_ngram_fraction does, so on the same text this one is larger.
QUALITY_THRESHOLD = 0.15
MARGIN = 0.02  # nats: the smallest difference that matters for a null result (chosen in advance)
# The notebook's reduced size (experiments.common.small_size): BPE learnt on fewer ids; the models and the
# mixtures two seeds of `steps` steps (the subset curves, which this chapter does not use, only at the first
# and last step, on eval_windows windows), on the first train_tokens of the training stream, scored on the
# first val_tokens of the validation stream (and of each held-out play); the weights the chapter and its
# paired comparisons name; the near-duplicate searches on the first near_dup_scenes scenes and
# near_dup_speeches speeches, the quality heuristic on the first quality_scenes scenes (the exact checks
# still see every scene and speech).
SMALL = {"bpe_train_tokens": 50_000, "seeds": (0, 1), "steps": 30, "eval_windows": 32, "train_tokens": 131_072,
         "val_tokens": 16_384, "mix_weights": (0.0, 0.25, 0.5, 1.0), "near_dup_scenes": 40, "near_dup_speeches": 1_500,
         "quality_scenes": 100}


def train_split(corpus):
    """The training stream: the whole of it, or its start at the reduced size."""
    return corpus.train[:scaled(None, SMALL["train_tokens"])]


def val_split(tokens):
    """A validation stream (the split, or a held-out play): all of it, or its start at the reduced size."""
    return val_tokens(tokens, SMALL["val_tokens"])


def scored_on(full, what):
    """What a loss is scored on, in results.md's words: full, or at the reduced size the first
    SMALL["val_tokens"] tokens of what."""
    return f"the first {SMALL['val_tokens']:,} tokens of {what}" if is_small() else full


def train_config():
    """TrainConfig(), or at the reduced size SMALL's steps, evaluating the subsets at the first and last step."""
    from pylib import train
    tc = train.TrainConfig()
    return dataclasses.replace(tc, steps=scaled(tc.steps, SMALL["steps"]),
                               eval_interval=scaled(tc.eval_interval, SMALL["steps"]),
                               eval_windows=scaled(tc.eval_windows, SMALL["eval_windows"]))


def learn_bpe(corpus, vocab_size, split=False):
    """BPE on the fixed training subset, base = the corpus's 65 ids, EOS never merged."""
    from pylib import bpe
    base = list(corpus.vocab.chars) + ["\u2404"]
    n_ids = scaled(BPE_TRAIN_TOKENS, SMALL["bpe_train_tokens"])
    return bpe.train_bpe(corpus.train[:n_ids], base, vocab_size - corpus.vocab.size,
                         stop_id=corpus.vocab.eos_id, split=split)[0]


def compression(corpus, tok):
    """Characters per token on the validation stream after each merge: (vocab sizes, ratios)."""
    from pylib import bpe
    val = val_split(corpus.val)
    ids = val.astype(np.int64)
    starts = tok.starts(ids)
    sizes, ratios = [len(tok.base)], [1.0]
    for i, (a, b) in enumerate(tok.merges):
        ids, starts = bpe.merge_split(ids, starts, a, b, len(tok.base) + i)
        sizes.append(len(tok.base) + i + 1)
        ratios.append(val.size / ids.size)
    return sizes, ratios


def scored_chars_per_token(tok, ids, block_size):
    """Characters per token over the targets that pylib.evaluation scores (every non-overlapping window)."""
    from pylib import evaluation
    lengths = np.array([len(s) for s in tok.token_strings()])
    _, y = evaluation.full_windows(ids, block_size)
    return float(lengths[y].sum() / y.size)


def arm_name(V, split):
    return f"ch2.loss_v{V}" + ("split" if split else "")


def char_vs_bpe(corpus, toks, values, timings, runs=None):
    """Default model and TrainConfig on char ids and on BPE ids (first V - 65 merges), 3 seeds.

    runs: [(V, split)], default characters, BPE_VOCABS and SPLIT_VOCABS with pre-tokens."""
    from pylib import model, train
    tc = dataclasses.replace(train_config(), final_eval=True)
    seeds, train_tokens, val_tokens = scaled(SEEDS, SMALL["seeds"]), train_split(corpus), val_split(corpus.val)
    runs = runs or [(corpus.vocab.size, False)] + [(V, False) for V in BPE_VOCABS] + [(V, True) for V in SPLIT_VOCABS]
    for V, split in progress(runs, desc="tokenisations", unit="vocabulary"):
        tok, n = toks[split], V - corpus.vocab.size
        key = arm_name(V, split)
        t0 = time.perf_counter()
        tr = tok.encode_ids(train_tokens, n) if n else train_tokens.astype(np.int64)
        va = tok.encode_ids(val_tokens, n) if n else val_tokens.astype(np.int64)
        timings[f"{key}.encode_seconds"] = time.perf_counter() - t0
        cfg = dataclasses.replace(model.GPTConfig(), vocab_size=V)
        cpt = scored_chars_per_token(tok, va, cfg.block_size) if n else 1.0
        per_token = {}
        for seed in seeds:
            _, hist = train.train(cfg, dataclasses.replace(tc, seed=seed), tr, va)
            per_token[seed] = final_val(hist)
        per_char = {s: (None if v is None else v / cpt) for s, v in per_token.items()}
        values.update(arm(f"{key}.per_token", per_token))
        values.update(arm(f"{key}.per_char", per_char))
        values[f"{key}.chars_per_token"] = cpt
        values[f"{key}.params"] = model.count_params(cfg)


def speeches(scene):
    """A scene's speeches: blocks separated by blank lines (each starts with 'NAME:')."""
    return [s.strip() for s in scene.split("\n\n") if s.strip()]


def short(text, n=160):
    text = " / ".join(line for line in text.splitlines() if line)
    return text if len(text) <= n else text[:n] + "…"


def scenes_by_play():
    """[(normalised scene text, play slug, split)] over every play, in slug order."""
    from pylib import data
    out = []
    for i, play in enumerate(data.read_plays()):
        split = "val" if data.is_validation_play(i) else "train"
        out += [(data.normalise_text(s), play.slug, split) for s in data.play_to_scenes(play.markdown)]
    return out


def dedup_values(values):
    from pylib import data
    from pylib.studies import dedup
    scene_rows = scenes_by_play()
    scenes = [s for s, _, _ in scene_rows]
    values["ch2.dedup.scenes"] = len(scenes)
    values["ch2.dedup.scene_exact_groups"] = len(dedup.exact_duplicate_groups(scenes))
    scene_pairs = dedup.near_duplicate_pairs(scenes[:scaled(None, SMALL["near_dup_scenes"])], **NEAR_DUP)
    values["ch2.dedup.scene_near_pairs"] = len(scene_pairs)
    sp = [(x, slug, split) for s, slug, split in scene_rows for x in speeches(s)]
    speech_texts = [x for x, _, _ in sp]
    values["ch2.dedup.speeches"] = len(speech_texts)
    T = 64  # the model's block_size; packing with speeches (not scenes) as the documents
    values["ch2.packing.speech_padded_useful"] = data.packing_useful_fraction([len(x) for x in speech_texts], T)["padded"]
    values["ch2.packing.median_speech_chars"] = int(np.median([len(x) for x in speech_texts]))
    groups = dedup.exact_duplicate_groups(speech_texts)
    values["ch2.dedup.speech_exact_groups"] = len(groups)
    values["ch2.dedup.speech_exact_removable"] = sum(len(g) - 1 for g in groups)
    removable_chars = sum(len(speech_texts[i]) for g in groups for i in g[1:])
    values["ch2.dedup.speech_exact_char_fraction"] = removable_chars / sum(map(len, speech_texts))
    top = max(groups, key=lambda g: (len(g), -g[0]))
    values["ch2.dedup.speech_exact_top"] = short(speech_texts[top[0]])
    values["ch2.dedup.speech_exact_top_count"] = len(top)
    longest = max(groups, key=lambda g: (len(speech_texts[g[0]]), -g[0]))
    values["ch2.dedup.speech_exact_longest"] = short(speech_texts[longest[0]], 240)
    values["ch2.dedup.speech_exact_longest_plays"] = ", ".join(sorted({sp[i][1] for i in longest}))
    # exact duplicates on both sides of the train/validation split
    cross = [g for g in groups if {sp[i][2] for i in g} == {"train", "val"}]
    values["ch2.dedup.cross_split_groups"] = len(cross)
    values["ch2.dedup.cross_split_chars"] = sum(len(speech_texts[g[0]]) for g in cross)
    for n, g in enumerate(sorted(cross, key=lambda g: g[0])):
        values[f"ch2.dedup.cross_split.{n}.text"] = short(speech_texts[g[0]], 240)
        values[f"ch2.dedup.cross_split.{n}.train_plays"] = ", ".join(sorted({sp[i][1] for i in g if sp[i][2] == "train"}))
        values[f"ch2.dedup.cross_split.{n}.val_plays"] = ", ".join(sorted({sp[i][1] for i in g if sp[i][2] == "val"}))
    searched = speech_texts[:scaled(None, SMALL["near_dup_speeches"])]  # every speech, or the first few
    near = dedup.near_duplicate_pairs(searched, min_chars=SPEECH_MIN_CHARS, **NEAR_DUP)
    near = [p for p in near if dedup.normalise_for_dedup(speech_texts[p[0]]) != dedup.normalise_for_dedup(speech_texts[p[1]])]
    values["ch2.dedup.speech_near_pairs"] = len(near)
    values["ch2.dedup.speech_long"] = sum(len(dedup.normalise_for_dedup(x)) >= SPEECH_MIN_CHARS for x in searched)
    if near:
        i, j, est, exact = max(near, key=lambda p: (p[3], -p[0], -p[1]))
        values["ch2.dedup.speech_near_example_a"] = short(speech_texts[i], 240)
        values["ch2.dedup.speech_near_example_b"] = short(speech_texts[j], 240)
        values["ch2.dedup.speech_near_example_plays"] = f"{sp[i][1]}, {sp[j][1]}"
        values["ch2.dedup.speech_near_example_est"] = est
        values["ch2.dedup.speech_near_example_exact"] = exact
    # a quality heuristic: the duplicated word n-gram fraction of each scene
    rated = scenes[:scaled(None, SMALL["quality_scenes"])]  # every scene, or the first few
    frac = np.array([dedup.duplicated_ngram_fraction(s, QUALITY_N) for s in rated])
    flagged = np.flatnonzero(frac > QUALITY_THRESHOLD)
    chars = np.array([len(s) for s in rated])
    values["ch2.quality.median"] = float(np.median(frac))
    values["ch2.quality.flagged"] = int(flagged.size)
    values["ch2.quality.flagged_char_fraction"] = float(chars[flagged].sum() / chars.sum())
    worst = int(np.argmax(frac))
    values["ch2.quality.max"] = float(frac[worst])
    values["ch2.quality.max_play"] = scene_rows[worst][1]
    values["ch2.quality.flagged_plays"] = ", ".join(sorted({scene_rows[i][1] for i in flagged}))


def mixture_values(corpus, values, curves):
    from pylib import data, model
    from pylib.studies import mixture
    spans = data.play_spans(data.read_plays(), corpus.vocab)
    sources = mixture.genre_sources(corpus.train, spans)
    srcs = [(sources[g][0], val_split(sources[g][1])) for g in mixture.GENRES]
    tc, cfg = train_config(), model.GPTConfig()
    weights, seeds = scaled(MIX_WEIGHTS, SMALL["mix_weights"]), scaled(SEEDS, SMALL["seeds"])
    held = {g: [] for g in mixture.GENRES}
    for w in progress(weights, desc=f"mixtures, {tc.steps} steps", unit="weight"):
        losses = {g: {} for g in mixture.GENRES}
        for seed in seeds:
            t = dataclasses.replace(tc, seed=seed)
            state = mixture.init_mixture_run(cfg, t, srcs, [w, 1 - w])
            mixture.mixture_steps(state, cfg, t, t.steps)
            for g, loss in zip(mixture.GENRES, mixture.held_out_losses(state, cfg)):
                losses[g][seed] = None if state["diverged"] else loss
        for g in mixture.GENRES:
            a = arm(f"ch2.mix.w{int(w * 100)}.{g}", losses[g])
            values.update(a)
            held[g].append(a[f"ch2.mix.w{int(w * 100)}.{g}.mean"])
    curves["ch2.mix"] = {"weights": list(weights), **{g: rounded(held[g]) for g in mixture.GENRES}}
    for g in mixture.GENRES:
        values[f"ch2.mix.{g}.train_tokens"] = int(sources[g][0].size)
        values[f"ch2.mix.{g}.held_out_tokens"] = int(sources[g][1].size)
        values[f"ch2.mix.{g}.held_out_play"] = [s for s in spans if s["genre"] == g and s["split"] == "train"][-1]["slug"]


PARTS = ["part_tokenise", "part_models", "part_cleaning", "part_mixture"]  # independent tasks


def part_tokenise(corpus):
    """BPE without and with pre-tokens: compression curves, first merges, tokens that cross words."""
    from pylib import bpe
    values, curves, timings = {}, {}, {}
    for split, suffix in progress(((False, ""), (True, "_split")), desc="BPE", unit="tokeniser"):
        t0 = time.perf_counter()
        tok = learn_bpe(corpus, max(BPE_VOCABS), split)
        timings[f"ch2.bpe{suffix}.train_seconds"] = time.perf_counter() - t0
        sizes, ratios = compression(corpus, tok)
        curves[f"ch2.bpe_compression{suffix}"] = {"vocab_size": sizes, "chars_per_token": rounded(ratios, 4)}
        for V in COMPRESSION_AT:
            values[f"ch2.bpe{suffix}.chars_per_token.v{V}"] = ratios[sizes.index(V)]
        strings = tok.token_strings()[len(tok.base):]
        values[f"ch2.bpe{suffix}.first_merges"] = " ".join(repr(s) for s in strings[:10])
        values[f"ch2.bpe{suffix}.longest_token"] = repr(max(strings, key=lambda s: (len(s), s)))
        crossing = [s for s in strings if bpe.crosses_pretokens(s)]
        values[f"ch2.bpe{suffix}.crossing_tokens"] = len(crossing)
        values[f"ch2.bpe{suffix}.learnt_tokens"] = len(strings)
        values[f"ch2.bpe{suffix}.crossing_examples"] = " ".join(repr(s) for s in sorted(crossing, key=lambda s: (-len(s), s))[:8])
    return {"values": values, "curves": curves, "timings": timings,
            "settings": {"ch2.bpe": {"bpe_train_tokens": scaled(BPE_TRAIN_TOKENS, SMALL["bpe_train_tokens"]),
                                     "pretoken_pattern": bpe.PRETOKEN_PATTERN}}}


def part_models(corpus):
    """The default model on characters, BPE-128, BPE-256 and BPE-128 with pre-tokens."""
    values, timings = {}, {}
    toks = {False: learn_bpe(corpus, max(BPE_VOCABS)), True: learn_bpe(corpus, max(SPLIT_VOCABS), split=True)}
    t0 = time.perf_counter()
    char_vs_bpe(corpus, toks, values, timings)
    timings["ch2.char_vs_bpe.seconds"] = time.perf_counter() - t0
    return {"values": values, "timings": timings,
            "settings": {"ch2.models": {"bpe_vocabs": list(BPE_VOCABS), "split_vocabs": list(SPLIT_VOCABS),
                                        "seeds": list(scaled(SEEDS, SMALL["seeds"])), "final_loss": "whole validation split"}}}


def part_cleaning(corpus):
    """Packing fractions, exact and near duplicates, duplicates across the split, the quality heuristic."""
    from pylib import data, model
    values, timings = {}, {}
    T = model.GPTConfig().block_size
    lengths = data.doc_lengths(corpus.train, corpus.vocab.eos_id)
    frac = data.packing_useful_fraction(lengths, T)
    values["ch2.packing.packed_useful"] = frac["packed"]
    values["ch2.packing.padded_useful"] = frac["padded"]
    values["ch2.packing.median_doc_tokens"] = int(np.median(lengths))
    t0 = time.perf_counter()
    dedup_values(values)
    timings["ch2.dedup.seconds"] = time.perf_counter() - t0
    return {"values": values, "timings": timings,
            "settings": {"ch2.cleaning": {"near_dup": NEAR_DUP, "speech_min_chars": SPEECH_MIN_CHARS,
                                          "quality_n": QUALITY_N, "quality_threshold": QUALITY_THRESHOLD}}}


def part_mixture(corpus):
    values, curves = {}, {}
    t0 = time.perf_counter()
    mixture_values(corpus, values, curves)
    return {"values": values, "curves": curves, "timings": {"ch2.mix.seconds": time.perf_counter() - t0},
            "settings": {"ch2.mix": {"mix_weights": list(scaled(MIX_WEIGHTS, SMALL["mix_weights"])),
                                     "seeds": list(scaled(SEEDS, SMALL["seeds"])),
                                     "final_loss": "each genre's whole held-out play"}}}


def run(corpus):
    """Every part, one after the other (measure.py runs the PARTS as separate tasks instead)."""
    return run_parts(globals(), PARTS, corpus)


def derived(corpus):
    """Parameter counts per vocabulary, tokens per parameter of the default run, the play spans,
    the LSH settings and their candidate probability at the threshold."""
    from pylib import data, model, train
    from pylib.studies import dedup
    cfg, tc = model.GPTConfig(), train.TrainConfig()
    out = {f"ch2.params_v{V}": model.count_params(dataclasses.replace(cfg, vocab_size=V))
           for V in (corpus.vocab.size,) + BPE_VOCABS}
    out["ch2.embedding_params_per_token"] = cfg.n_embd
    out["ch2.bpe_train_tokens"] = BPE_TRAIN_TOKENS
    tokens = tc.steps * tc.batch_size * tc.grad_accum * cfg.block_size
    out["ch2.tokens_seen"] = tokens
    out["ch2.tokens_per_param"] = tokens / model.count_params(cfg)
    out["ch2.epochs"] = tokens / corpus.train.size
    out["ch2.play_spans"] = data.play_spans(data.read_plays(), corpus.vocab)
    from pylib.web import data_ops as web_data  # the page's limits, shown in the widgets' hints
    out.update({f"ch2.{k}": v for k, v in web_data.DATA_LIMITS.items()})
    out["ch2.own_min_chars"] = web_data.own_min_chars()
    out["ch2.shingle_k"] = NEAR_DUP["k"]
    out["ch2.near_dup_threshold"] = NEAR_DUP["threshold"]
    out["ch2.n_hashes"] = NEAR_DUP["n_hashes"]
    out["ch2.lsh_bands"] = NEAR_DUP["bands"]
    out["ch2.lsh_rows"] = NEAR_DUP["n_hashes"] // NEAR_DUP["bands"]
    out["ch2.lsh_recall_at_threshold"] = dedup.lsh_candidate_probability(
        NEAR_DUP["threshold"], NEAR_DUP["bands"], NEAR_DUP["n_hashes"] // NEAR_DUP["bands"])
    out["ch2.speech_min_chars"] = SPEECH_MIN_CHARS
    out["ch2.quality_n"] = QUALITY_N
    out["ch2.quality_threshold"] = QUALITY_THRESHOLD
    out["ch2.margin"] = MARGIN
    return out


def markdown(results):
    """results.md's section for chapter 2."""
    v, settings = results["values"], results["settings"]
    model_seeds, mix_seeds = len(settings["ch2.models"]["seeds"]), len(settings["ch2.mix"]["seeds"])
    held_out = scored_on("each genre's whole held-out play", "each genre's held-out play")
    lines = ["## Chapter 2: data and tokenisation", "",
             f"BPE learnt on the first {settings['ch2.bpe']['bpe_train_tokens']:,} ids of the training stream, without "
             "and with GPT-2-style pre-tokens; compression on "
             f"{scored_on('the validation stream', 'the validation stream')} (characters per token, EOS "
             "counted as a character).", "",
             "| vocabulary size | chars per token | with pre-tokens |", "| --- | --- | --- |"]
    lines += [f"| {V} | {v[f'ch2.bpe.chars_per_token.v{V}']:.3f} | {v[f'ch2.bpe_split.chars_per_token.v{V}']:.3f} |"
              for V in COMPRESSION_AT]
    for suffix, name in (("", "without pre-tokens"), ("_split", "with pre-tokens")):
        lines += ["", f"{name}: first merges {v[f'ch2.bpe{suffix}.first_merges']}; longest token "
                  f"{v[f'ch2.bpe{suffix}.longest_token']}; {v[f'ch2.bpe{suffix}.crossing_tokens']} of "
                  f"{v[f'ch2.bpe{suffix}.learnt_tokens']} learnt tokens cross a pre-token boundary."]
    lines += ["", f"Default model and TrainConfig() per tokenisation, {model_seeds} seeds (mean ± sd); final loss on "
              f"{scored_on('the whole validation split', 'the validation split')} in each model's own tokenisation:", "",
              "| model | params | chars/token (scored) | val nats/token | val nats/char |", "| --- | --- | --- | --- | --- |"]
    runs = [(65, False)] + [(V, False) for V in BPE_VOCABS] + [(V, True) for V in SPLIT_VOCABS]
    for V, split in runs:
        k = arm_name(V, split)
        lines.append(f"| {k.split('.')[-1]} | {v[k + '.params']:,} | {v[k + '.chars_per_token']:.3f} | "
                     f"{v[k + '.per_token.mean']:.4f} ± {v[k + '.per_token.sd']:.4f} | "
                     f"{v[k + '.per_char.mean']:.4f} ± {v[k + '.per_char.sd']:.4f} |")
    lines += ["", "Paired by seed, nats per character (margin ±0.02 for a null result):", ""]
    for a, b in (("ch2.loss_v128", "ch2.loss_v65"), ("ch2.loss_v256", "ch2.loss_v65"),
                 ("ch2.loss_v256", "ch2.loss_v128"), ("ch2.loss_v128split", "ch2.loss_v128")):
        lines.append(f"- {a.split('.')[-1]} − {b.split('.')[-1]}: "
                     f"{paired_text(v, a + '.per_char', b + '.per_char', MARGIN)}")
    lines += ["", f"Packing: useful tokens {v['ch2.packing.packed_useful']:.4f} packed, "
              f"{v['ch2.packing.padded_useful']:.4f} padded (median document {v['ch2.packing.median_doc_tokens']} tokens).",
              "", f"Dedup: {v['ch2.dedup.scenes']} scenes, {v['ch2.dedup.scene_exact_groups']} exact groups, "
              f"{v['ch2.dedup.scene_near_pairs']} near pairs (MinHash ≥ {NEAR_DUP['threshold']}); "
              f"{v['ch2.dedup.speeches']} speeches, {v['ch2.dedup.speech_exact_groups']} exact groups "
              f"({v['ch2.dedup.speech_exact_removable']} removable, {v['ch2.dedup.speech_exact_char_fraction']:.4f} of characters), "
              f"{v['ch2.dedup.speech_near_pairs']} near pairs among {v['ch2.dedup.speech_long']} speeches ≥ {SPEECH_MIN_CHARS} chars; "
              f"{v['ch2.dedup.cross_split_groups']} exact duplicate speeches in both a training and a validation play:"]
    for n in range(v["ch2.dedup.cross_split_groups"]):
        lines.append(f"- \"{v[f'ch2.dedup.cross_split.{n}.text']}\" (train: {v[f'ch2.dedup.cross_split.{n}.train_plays']}; "
                     f"validation: {v[f'ch2.dedup.cross_split.{n}.val_plays']})")
    if is_small():
        lines += ["", f"(The reduced size: near-duplicates searched among the first {SMALL['near_dup_scenes']} scenes and "
                  f"the first {SMALL['near_dup_speeches']:,} speeches; the quality heuristic below rates the first "
                  f"{SMALL['quality_scenes']} scenes.)"]
    lines += ["", f"Quality heuristic (duplicated word {QUALITY_N}-gram fraction per scene): median "
              f"{v['ch2.quality.median']:.4f}, max {v['ch2.quality.max']:.4f} ({v['ch2.quality.max_play']}); "
              f"{v['ch2.quality.flagged']} scenes above {QUALITY_THRESHOLD} "
              f"({v['ch2.quality.flagged_char_fraction']:.4f} of characters).",
              "", f"Mixtures (loss on {held_out}, nats per token, {mix_seeds} seeds):", "",
              "| comedies weight | comedies | tragedies |", "| --- | --- | --- |"]
    for w in settings["ch2.mix"]["mix_weights"]:
        k = f"ch2.mix.w{int(w * 100)}"
        lines.append(f"| {w} | {v[k + '.comedies.mean']:.4f} ± {v[k + '.comedies.sd']:.4f} | "
                     f"{v[k + '.tragedies.mean']:.4f} ± {v[k + '.tragedies.sd']:.4f} |")
    lines += ["", "Paired by seed (margin ±0.02):", "",
              f"- comedies, weight 1 − weight 0: {paired_text(v, 'ch2.mix.w100.comedies', 'ch2.mix.w0.comedies', MARGIN)}",
              f"- tragedies, weight 0 − weight 1: {paired_text(v, 'ch2.mix.w0.tragedies', 'ch2.mix.w100.tragedies', MARGIN)}",
              f"- comedies, weight 0.5 − weight 1: {paired_text(v, 'ch2.mix.w50.comedies', 'ch2.mix.w100.comedies', MARGIN)}",
              f"- tragedies, weight 0.5 − weight 0: {paired_text(v, 'ch2.mix.w50.tragedies', 'ch2.mix.w0.tragedies', MARGIN)}"]
    return lines + [""]
