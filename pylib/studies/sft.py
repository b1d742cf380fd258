"""Supervised fine-tuning (SFT) of the course model, with the loss on the response only.

After pretraining, a model is fine-tuned on prompt/response pairs (InstructGPT's first stage,
Ouyang et al. 2022, section 3.5, on labelers' demonstrations). The loss is usually counted on the
response tokens only, the prompt being given, not predicted; this module measures that choice
against counting every token. Here the pairs come from the corpus itself, from the plays' structure
(each speech is "NAME:" followed by its lines): the prompt is one line of a speech followed by a
question, the response is the speaker's name and the end-of-document token (EOS):

    prompt   "And let thy blows, doubly redoubled,\nWho? "
    response "KING RICHARD II" + EOS

The lines come from the validation plays, which pretraining never saw; the SFT_SET["speakers"]
most frequent speakers there are the answers, and a fixed split of their lines gives a training
set and a held-out test set.

Two arms are fine-tuned from the same pretrained model on the same batches:
  - "response": the loss mask covers the response tokens only (the prompt is masked);
  - "whole":    the loss covers every token of the sequence, prompt and response.
Padding is masked in both. Evaluation is on the held-out pairs: the mean loss per response token
(`response_loss`); the prompt's loss in its two parts, the verse (`verse_loss`, the line's own
characters) and the fixed question appended to every line (`template_loss`, the characters of
SFT_SET["question"]), because a model that trains on the prompt learns the fixed question first and
a mean over both would mostly measure that; the accuracy of picking the right speaker among the
SFT_SET["speakers"] candidates by the model's log-probability of each name + EOS (`accuracy`); and
what the model writes when it samples an answer (`answer_shapes`: does it stop, in capitals, with
exactly one of the candidate names).

Legend: N pairs, B batch, T time (block_size), K candidate speakers, V vocab.
"""

import dataclasses
import numpy as np

from pylib import loss as xent, model, optim, train

# ---------------------------------------------------------------------------
# Settings (measured by experiments/ch16.py; the page re-runs them)

SFT_SET = {
    "speakers": 8,  # the answers: the most frequent speakers of the validation plays
    "question": "\nWho? ",  # appended to the line: the prompt ends here
    "min_line": 12,  # characters: shorter lines ("Ay.", "My lord?") say nothing about a speaker
    "test_pairs": 400,  # held out, fixed split
    "split_seed": 16,  # the split and the order are fixed: every seed and arm sees the same sets
}
SFT = {"steps": 200, "batch_size": 16, "lr": 3e-3, "grad_clip": 1.0, "eval_pairs": 400}
ARMS = ("response", "whole")


def pretrain_configs(vocab_size, seed, steps=None):
    """(GPTConfig, TrainConfig) of the pretraining: chapter 1's default run (optionally shorter)."""
    mcfg = dataclasses.replace(model.GPTConfig(), vocab_size=vocab_size)
    tcfg = dataclasses.replace(train.TrainConfig(), seed=seed, eval_interval=10**6, eval_windows=32)
    if steps is not None:
        tcfg = dataclasses.replace(tcfg, steps=steps)
    return mcfg, tcfg


# ---------------------------------------------------------------------------
# The prompt/response set, from the plays' structure


def speeches(text):
    """[(speaker, line)] for every line of every speech in the text (scenes as pylib.data writes them)."""
    out = []
    for doc in text.split("\u2404"):  # EOS as CharVocab.decode shows it
        speaker, previous = None, ""
        for line in doc.split("\n"):
            if previous == "" and line.endswith(":"):  # pylib.data puts a blank line before each speaker
                speaker = line[:-1]
            elif line and speaker:
                out.append((speaker, line))
            previous = line
    return out


@dataclasses.dataclass(frozen=True)
class SFTSet:
    speakers: tuple  # the K answers, most frequent first
    train: tuple  # ((speaker, line), ...)
    test: tuple


def build_sft_set(tokens, vocab, block_size, settings=SFT_SET):
    """The pairs from a token stream (the validation split): the top speakers' lines that fit with any answer."""
    pairs = speeches(vocab.decode(np.asarray(tokens).tolist()))
    counts = {}
    for s, _ in pairs:
        counts[s] = counts.get(s, 0) + 1
    speakers = tuple(sorted(counts, key=lambda s: (-counts[s], s))[:settings["speakers"]])
    chosen, longest = set(speakers), max(len(s) for s in speakers)  # every candidate must fit after every prompt
    pairs = list(dict.fromkeys(pairs))  # a line repeated by its speaker counts once: the test set stays unseen
    fits = [(s, line) for s, line in pairs if s in chosen and len(line) >= settings["min_line"]
            and len(line) + len(settings["question"]) + longest + 1 <= block_size + 1]
    if len(fits) < 2 * settings["test_pairs"]:
        raise ValueError(f"only {len(fits)} pairs fit; need at least {2 * settings['test_pairs']}")
    order = np.random.default_rng(settings["split_seed"]).permutation(len(fits))
    test = tuple(fits[i] for i in order[:settings["test_pairs"]])
    train_pairs = tuple(fits[i] for i in order[settings["test_pairs"]:])
    return SFTSet(speakers=speakers, train=train_pairs, test=test)


def prompt_text(line, settings=SFT_SET):
    return line + settings["question"]


def encode_pairs(pairs, vocab, block_size, settings=SFT_SET):
    """Pairs -> x, y (N, T) padded with EOS, prompt_mask and response_mask (N, T) over the targets y.

    A sequence is prompt + response + EOS; y[t] is token t + 1. The response mask covers the
    response's tokens and its EOS; the prompt mask the prompt's targets (its first token is never a
    target); padding is in neither."""
    N, T = len(pairs), block_size
    x = np.full((N, T), vocab.eos_id, dtype=np.int64)
    y = np.full((N, T), vocab.eos_id, dtype=np.int64)
    prompt_mask = np.zeros((N, T), dtype=np.float32)
    response_mask = np.zeros((N, T), dtype=np.float32)
    for i, (speaker, line) in enumerate(pairs):
        p = vocab.encode(prompt_text(line, settings))[0]
        r = np.r_[vocab.encode(speaker)[0], vocab.eos_id]
        ids = np.r_[p, r]
        if ids.size > T + 1:
            raise ValueError(f"pair {i} is {ids.size} tokens long; at most {T + 1} fit")
        n = ids.size - 1
        x[i, :n], y[i, :n] = ids[:-1], ids[1:]
        prompt_mask[i, :p.size - 1] = 1.0
        response_mask[i, p.size - 1:n] = 1.0
    return x, y, prompt_mask, response_mask


def split_prompt_mask(prompt_mask, question_tokens):
    """(verse_mask, template_mask) (N, T): the prompt's last question_tokens targets are the fixed
    question (the template), the targets before them are the line of verse."""
    pm = np.asarray(prompt_mask)
    from_end = np.cumsum(pm[:, ::-1], axis=1)[:, ::-1]  # (N, T): prompt targets at or after t
    template = pm * (from_end <= question_tokens)
    return pm - template, template


def loss_mask(arm, prompt_mask, response_mask):
    """The arm's loss mask: the response only, or the whole sequence (never the padding)."""
    if arm == "response":
        return response_mask
    if arm == "whole":
        return np.maximum(prompt_mask, response_mask)
    raise ValueError(f"arm must be one of {ARMS}, not {arm!r}")


# ---------------------------------------------------------------------------
# Fine-tuning: AdamW from a pretrained model, constant rate, clipping


def init_finetune(params, seed):
    """A fine-tuning state: a copy of the params, fresh AdamW moments, and a batch rng."""
    params = {k: v.copy() for k, v in params.items()}
    return {"params": params, "opt": optim.adamw_init(params), "groups": optim.param_groups(params),
            "rng": np.random.default_rng([seed, 16]), "step": 0}


def apply_update(state, grads, lr, grad_clip):
    """Clip the global gradient norm and take one AdamW step (no weight decay); returns the norm."""
    norm = optim.clip_grad_norm(grads, grad_clip)
    optim.adamw_step(state["params"], grads, state["opt"], lr, 0.9, 0.99, 1e-8, 0.0, state["groups"])
    state["step"] += 1
    return norm


def sft_steps(state, cfg, x, y, mask, n_steps, settings=SFT):
    """n_steps of SFT on random batches of the encoded pairs; returns each step's {loss, grad_norm}."""
    records = []
    for _ in range(n_steps):
        idx = state["rng"].integers(0, len(x), size=settings["batch_size"])  # (B,)
        loss, grads = model.loss_and_grads(state["params"], cfg, x[idx], y[idx], mask[idx])
        norm = apply_update(state, grads, settings["lr"], settings["grad_clip"])
        records.append({"step": state["step"] - 1, "loss": float(loss), "grad_norm": float(norm)})
    return records


# ---------------------------------------------------------------------------
# Evaluation on the held-out pairs


def masked_mean_loss(params, cfg, x, y, mask, chunk=256):
    """Mean cross-entropy over the masked-in targets (nats per counted token)."""
    return masked_mean_losses(params, cfg, x, y, [mask], chunk)[0]


def masked_mean_losses(params, cfg, x, y, masks, chunk=256):
    """masked_mean_loss for each of several masks, from one forward pass per chunk."""
    totals, counts = np.zeros(len(masks)), np.zeros(len(masks))
    for i in range(0, len(x), chunk):
        logits = model.forward_logits(params, cfg, x[i:i + chunk])
        for j, mask in enumerate(masks):
            totals[j] += xent.cross_entropy_forward(logits, y[i:i + chunk], mask[i:i + chunk], 1.0)[0]
            counts[j] += float(mask[i:i + chunk].sum())
    return [float(t / c) for t, c in zip(totals, counts)]


def candidate_logps(params, cfg, pairs, speakers, vocab, settings=SFT_SET):
    """(N, K): the log-probability of each candidate's name + EOS after each pair's prompt."""
    prompts = [line for _, line in pairs]
    rows = [(name, line) for line in prompts for name in speakers]  # N*K sequences
    x, y, _, rmask = encode_pairs(rows, vocab, cfg.block_size, settings)
    logps = np.empty(len(rows))
    for i in range(0, len(rows), 512):
        logits = model.forward_logits(params, cfg, x[i:i + 512]).astype(np.float64)  # (b, T, V)
        logits -= logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        tok = np.take_along_axis(logp, y[i:i + 512, :, None], -1)[..., 0]  # (b, T)
        logps[i:i + 512] = (tok * rmask[i:i + 512]).sum(-1)
    return logps.reshape(len(prompts), len(speakers))


def speaker_picks(params, cfg, pairs, speakers, vocab, settings=SFT_SET):
    """{accuracy, top_pick_share}: the fraction of pairs whose most probable candidate name is the
    true speaker, and the fraction that get the model's most frequent pick (1.0: one name for every line)."""
    best = candidate_logps(params, cfg, pairs, speakers, vocab, settings).argmax(-1)  # (N,)
    truth = np.array([speakers.index(s) for s, _ in pairs])
    return {"accuracy": float((best == truth).mean()),
            "top_pick_share": float(np.bincount(best, minlength=len(speakers)).max() / best.size)}


def speaker_accuracy(params, cfg, pairs, speakers, vocab, settings=SFT_SET):
    """Fraction of pairs whose most probable candidate name is the true speaker."""
    return speaker_picks(params, cfg, pairs, speakers, vocab, settings)["accuracy"]


def evaluate(params, cfg, sft_set, vocab, settings=SFT_SET):
    """{response_loss, verse_loss, template_loss, accuracy, top_pick_share} on the held-out pairs."""
    x, y, pm, rm = encode_pairs(sft_set.test, vocab, cfg.block_size, settings)
    verse, template = split_prompt_mask(pm, vocab.encode(settings["question"])[0].size)
    response_loss, verse_loss, template_loss = masked_mean_losses(params, cfg, x, y, [rm, verse, template])
    return {"response_loss": response_loss, "verse_loss": verse_loss, "template_loss": template_loss,
            **speaker_picks(params, cfg, sft_set.test, sft_set.speakers, vocab, settings)}


def sample_answers(params, cfg, lines, vocab, rng, max_new_tokens=24, settings=SFT_SET):
    """[{text, ended}] per line: an answer sampled after each line's question (temperature 1), up to
    EOS or max_new_tokens. Lines of one prompt length are sampled together (same positions)."""
    from pylib.studies.preferences import sample_responses
    prompts = [vocab.encode(prompt_text(line, settings))[0] for line in lines]
    out = [None] * len(lines)
    for n in sorted({p.size for p in prompts}):
        rows = [i for i, p in enumerate(prompts) if p.size == n]
        drawn = sample_responses(params, cfg, np.stack([prompts[i] for i in rows]), max_new_tokens, rng)  # (b, L)
        for i, ids in zip(rows, drawn.tolist()):
            ended = vocab.eos_id in ids
            out[i] = {"text": vocab.decode(ids[:ids.index(vocab.eos_id)] if ended else ids), "ended": ended}
    return out


def answer_shapes(answers, speakers):
    """{stops, capitals, candidate}: the fractions of sampled answers that end with EOS, that are
    written in capitals (at least one letter, no lower-case one), and that are exactly one of the
    candidate names followed by EOS."""
    names = set(speakers)
    caps = lambda t: any(c.isalpha() for c in t) and not any(c.islower() for c in t)  # noqa: E731
    n = len(answers)
    return {"stops": sum(a["ended"] for a in answers) / n,
            "capitals": sum(caps(a["text"]) for a in answers) / n,
            "candidate": sum(a["ended"] and a["text"] in names for a in answers) / n}


def answer(params, cfg, line, vocab, max_new_tokens=24, seed=0, settings=SFT_SET):
    """The model's sampled answer to one line's question: the text up to EOS (or max_new_tokens)."""
    from pylib import sample
    ids, _ = vocab.encode(prompt_text(line, settings))
    ids = ids[-(cfg.block_size - 1):]
    out = sample.generate(params, cfg, ids, max_new_tokens, 1.0, seed, stop_at=vocab.eos_id)[len(ids):]
    ended = bool(out) and out[-1] == vocab.eos_id
    return {"text": vocab.decode(out[:-1] if ended else out), "ended": ended}
