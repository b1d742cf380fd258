"""Chapter 2's experiments: BPE compression, char vs BPE loss per character, packing, dedup, mixtures.

- BPE is learnt on a fixed subset of the training stream (BPE_TRAIN_TOKENS ids, CharVocab ids with
  EOS as a stop symbol) and evaluated on the whole validation stream.
- Char vs BPE: the default model and TrainConfig() on each tokenisation, three seeds; the
  validation loss per token is turned into nats per character with the validation stream's
  tokens / characters ratio (EOS counts as a character).
- Packing: the useful-token fraction of packing and padding at the model's window length.
- Deduplication: exact and MinHash near-duplicates among scenes and among speeches.
- Mixtures: comedies against tragedies at several weights (pylib.studies.mixture), three seeds.
"""

import dataclasses
import time

import numpy as np

from experiments.common import SEEDS, mean_sd, rounded

BPE_TRAIN_TOKENS = 500_000  # the first 500,000 ids of the training stream (about an eighth)
BPE_VOCABS = (128, 256)  # the BPE vocabularies the model is trained on
COMPRESSION_AT = (65, 80, 96, 128, 160, 192, 224, 256)  # vocab sizes reported in results.md
MIX_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)  # weight of comedies (tragedies get 1 - w)
NEAR_DUP = dict(threshold=0.5, k=5, n_hashes=64, bands=16, seed=0)
SPEECH_MIN_CHARS = 200  # near-duplicate search among speeches at least this long


def learn_bpe(corpus, vocab_size):
    """BPE on the fixed training subset, base = the corpus's 65 ids, EOS never merged."""
    from pylib import bpe
    base = list(corpus.vocab.chars) + ["\u2404"]
    return bpe.train_bpe(corpus.train[:BPE_TRAIN_TOKENS], base, vocab_size - corpus.vocab.size,
                         stop_id=corpus.vocab.eos_id)[0]


def compression(corpus, tok):
    """Characters per token on the validation stream after each merge: (vocab sizes, ratios)."""
    from pylib import bpe
    ids = corpus.val.astype(np.int64)
    sizes, ratios = [len(tok.base)], [1.0]
    for i, (a, b) in enumerate(tok.merges):
        ids = bpe.merge(ids, a, b, len(tok.base) + i)
        sizes.append(len(tok.base) + i + 1)
        ratios.append(corpus.val.size / ids.size)
    return sizes, ratios


def char_vs_bpe(corpus, tok, values, timings):
    """Default model and TrainConfig on char ids and on BPE ids (first V - 65 merges), 3 seeds."""
    from pylib import model, train
    tc = train.TrainConfig()
    for V in (corpus.vocab.size,) + BPE_VOCABS:
        n = V - corpus.vocab.size
        t0 = time.perf_counter()
        tr = tok.encode_ids(corpus.train, n) if n else corpus.train.astype(np.int64)
        va = tok.encode_ids(corpus.val, n) if n else corpus.val.astype(np.int64)
        timings[f"ch2.bpe{V}.encode_seconds"] = time.perf_counter() - t0
        ratio = va.size / corpus.val.size  # tokens per character
        cfg = dataclasses.replace(model.GPTConfig(), vocab_size=V)
        per_token, per_char = [], []
        for seed in SEEDS:
            _, hist = train.train(cfg, dataclasses.replace(tc, seed=seed), tr, va)
            per_token.append(hist[-1]["val"])
            per_char.append(hist[-1]["val"] * ratio)
        values[f"ch2.loss_v{V}.per_token.mean"], values[f"ch2.loss_v{V}.per_token.sd"] = mean_sd(per_token)
        values[f"ch2.loss_v{V}.per_char.mean"], values[f"ch2.loss_v{V}.per_char.sd"] = mean_sd(per_char)
        values[f"ch2.loss_v{V}.chars_per_token"] = 1.0 / ratio
        values[f"ch2.loss_v{V}.params"] = model.count_params(cfg)


def speeches(scene):
    """A scene's speeches: blocks separated by blank lines (each starts with 'NAME:')."""
    return [s.strip() for s in scene.split("\n\n") if s.strip()]


def short(text, n=160):
    text = " / ".join(line for line in text.splitlines() if line)
    return text if len(text) <= n else text[:n] + "…"


def dedup_values(values, timings):
    from pylib import data
    from pylib.studies import dedup
    t0 = time.perf_counter()
    scenes, where = [], []
    for play in data.read_plays():
        for s in data.play_to_scenes(play.markdown):
            scenes.append(data.normalise_text(s))
            where.append(play.slug)
    sp = [(x, where[i]) for i, s in enumerate(scenes) for x in speeches(s)]
    speech_texts = [x for x, _ in sp]
    values["ch2.dedup.scenes"] = len(scenes)
    values["ch2.dedup.scene_exact_groups"] = len(dedup.exact_duplicate_groups(scenes))
    scene_pairs = dedup.near_duplicate_pairs(scenes, **NEAR_DUP)
    values["ch2.dedup.scene_near_pairs"] = len(scene_pairs)
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
    near = dedup.near_duplicate_pairs(speech_texts, min_chars=SPEECH_MIN_CHARS, **NEAR_DUP)
    near = [p for p in near if dedup.normalise_for_dedup(speech_texts[p[0]]) != dedup.normalise_for_dedup(speech_texts[p[1]])]
    values["ch2.dedup.speech_near_pairs"] = len(near)
    values["ch2.dedup.speech_long"] = sum(len(dedup.normalise_for_dedup(x)) >= SPEECH_MIN_CHARS for x in speech_texts)
    if near:
        i, j, est, exact = max(near, key=lambda p: (p[3], -p[0], -p[1]))
        values["ch2.dedup.speech_near_example_a"] = short(speech_texts[i], 240)
        values["ch2.dedup.speech_near_example_b"] = short(speech_texts[j], 240)
        values["ch2.dedup.speech_near_example_plays"] = f"{sp[i][1]}, {sp[j][1]}"
        values["ch2.dedup.speech_near_example_est"] = est
        values["ch2.dedup.speech_near_example_exact"] = exact
    timings["ch2.dedup.seconds"] = time.perf_counter() - t0


def mixture_values(corpus, values, curves):
    from pylib import data, model, train
    from pylib.studies import mixture
    spans = data.play_spans(data.read_plays(), corpus.vocab)
    sources = mixture.genre_sources(corpus.train, spans)
    srcs = [sources[g] for g in mixture.GENRES]
    tc, cfg = train.TrainConfig(), model.GPTConfig()
    held = {g: [] for g in mixture.GENRES}
    for w in MIX_WEIGHTS:
        losses = {g: [] for g in mixture.GENRES}
        for seed in SEEDS:
            t = dataclasses.replace(tc, seed=seed)
            state = mixture.init_mixture_run(cfg, t, srcs, [w, 1 - w])
            mixture.mixture_steps(state, cfg, t, t.steps)
            for g, l in zip(mixture.GENRES, mixture.held_out_losses(state, cfg, t)):
                losses[g].append(l)
        for g in mixture.GENRES:
            m, s = mean_sd(losses[g])
            values[f"ch2.mix.w{int(w * 100)}.{g}.mean"], values[f"ch2.mix.w{int(w * 100)}.{g}.sd"] = m, s
            held[g].append(m)
    curves["ch2.mix"] = {"weights": list(MIX_WEIGHTS), **{g: rounded(held[g]) for g in mixture.GENRES}}
    for g in mixture.GENRES:
        values[f"ch2.mix.{g}.train_tokens"] = int(sources[g][0].size)
        values[f"ch2.mix.{g}.held_out_play"] = [s for s in spans if s["genre"] == g and s["split"] == "train"][-1]["slug"]


def run(corpus):
    from pylib import data, model
    values, curves, timings = {}, {}, {}
    t0 = time.perf_counter()
    tok = learn_bpe(corpus, max(BPE_VOCABS))
    timings["ch2.bpe.train_seconds"] = time.perf_counter() - t0
    sizes, ratios = compression(corpus, tok)
    curves["ch2.bpe_compression"] = {"vocab_size": sizes, "chars_per_token": rounded(ratios, 4)}
    for V in COMPRESSION_AT:
        values[f"ch2.bpe.chars_per_token.v{V}"] = ratios[sizes.index(V)]
    strings = tok.token_strings()
    values["ch2.bpe.first_merges"] = " ".join(repr(strings[len(tok.base) + i]) for i in range(10))
    values["ch2.bpe.longest_token"] = repr(max(strings, key=lambda s: (len(s), s)))
    t0 = time.perf_counter()
    char_vs_bpe(corpus, tok, values, timings)
    timings["ch2.char_vs_bpe.seconds"] = time.perf_counter() - t0
    T = model.GPTConfig().block_size
    frac = data.packing_useful_fraction(data.doc_lengths(corpus.train, corpus.vocab.eos_id), T)
    values["ch2.packing.packed_useful"] = frac["packed"]
    values["ch2.packing.padded_useful"] = frac["padded"]
    lengths = data.doc_lengths(corpus.train, corpus.vocab.eos_id)
    values["ch2.packing.median_doc_tokens"] = int(np.median(lengths))
    dedup_values(values, timings)
    t0 = time.perf_counter()
    mixture_values(corpus, values, curves)
    timings["ch2.mix.seconds"] = time.perf_counter() - t0
    settings = {"ch2": {"bpe_train_tokens": BPE_TRAIN_TOKENS, "bpe_vocabs": list(BPE_VOCABS),
                        "mix_weights": list(MIX_WEIGHTS), "near_dup": NEAR_DUP,
                        "speech_min_chars": SPEECH_MIN_CHARS}}
    return {"values": values, "curves": curves, "settings": settings, "timings": timings}


def derived(corpus):
    """Parameter counts per vocabulary, tokens per parameter of the default run, the play spans."""
    from pylib import data, model, train
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
    out["ch2.speech_min_chars"] = SPEECH_MIN_CHARS
    return out


def markdown(results):
    """results.md's section for chapter 2."""
    v = results["values"]
    lines = ["## Chapter 2: data and tokenisation", "",
             f"BPE learnt on the first {BPE_TRAIN_TOKENS:,} ids of the training stream; compression on the "
             "validation stream (characters per token, EOS counted as a character).", "",
             "| vocabulary size | chars per token |", "| --- | --- |"]
    lines += [f"| {V} | {v[f'ch2.bpe.chars_per_token.v{V}']:.3f} |" for V in COMPRESSION_AT]
    lines += ["", f"First merges: {v['ch2.bpe.first_merges']}; longest token {v['ch2.bpe.longest_token']}.", "",
              "Default model and TrainConfig() per tokenisation, 3 seeds (mean ± sd):", "",
              "| V | params | chars/token | val nats/token | val nats/char |", "| --- | --- | --- | --- | --- |"]
    for V in (65,) + BPE_VOCABS:
        k = f"ch2.loss_v{V}"
        lines.append(f"| {V} | {v[k + '.params']:,} | {v[k + '.chars_per_token']:.3f} | "
                     f"{v[k + '.per_token.mean']:.4f} ± {v[k + '.per_token.sd']:.4f} | "
                     f"{v[k + '.per_char.mean']:.4f} ± {v[k + '.per_char.sd']:.4f} |")
    lines += ["", f"Packing: useful tokens {v['ch2.packing.packed_useful']:.4f} packed, "
              f"{v['ch2.packing.padded_useful']:.4f} padded (median document {v['ch2.packing.median_doc_tokens']} tokens).",
              "", f"Dedup: {v['ch2.dedup.scenes']} scenes, {v['ch2.dedup.scene_exact_groups']} exact groups, "
              f"{v['ch2.dedup.scene_near_pairs']} near pairs (MinHash ≥ {NEAR_DUP['threshold']}); "
              f"{v['ch2.dedup.speeches']} speeches, {v['ch2.dedup.speech_exact_groups']} exact groups "
              f"({v['ch2.dedup.speech_exact_removable']} removable, {v['ch2.dedup.speech_exact_char_fraction']:.4f} of characters), "
              f"{v['ch2.dedup.speech_near_pairs']} near pairs among {v['ch2.dedup.speech_long']} speeches ≥ {SPEECH_MIN_CHARS} chars.",
              "", "Mixtures (held-out loss per genre, 3 seeds):", "",
              "| comedies weight | comedies | tragedies |", "| --- | --- | --- |"]
    for w in MIX_WEIGHTS:
        k = f"ch2.mix.w{int(w * 100)}"
        lines.append(f"| {w} | {v[k + '.comedies.mean']:.4f} ± {v[k + '.comedies.sd']:.4f} | "
                     f"{v[k + '.tragedies.mean']:.4f} ± {v[k + '.tragedies.sd']:.4f} |")
    return lines + [""]
