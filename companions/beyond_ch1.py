"""Beyond the toy, chapter 1: chapter 1's training run on wider members of the course's model family.

The family is the course model with its width changed (one layer, two heads, context 64, as chapter 14's
sweep has it; n_layer can be raised), trained by companions.beyond: pylib's initialisation, chapter 1's
loop in PyTorch (AdamW, warmup then cosine, clipping, random windows of the training split), the same
steps, batch and learning rate for every width. Each run's final loss is the mean cross-entropy on
eval_windows fixed, evenly spaced windows of the validation split (companions.beyond.evaluate), the same
windows for every width: a subset, not the whole split the chapter scores on. The largest model then
writes a sample with chapter 1's sampler (pylib.sample.generate, on the trained weights brought back
into pylib's layout by pylib.export).

SIZES holds three: "cuda" (widths 16 to 512, 2,000 steps of 64 windows), "cpu" (widths 16 to 128, 1,000
steps of chapter 1's 16 windows: about a minute of one CPU thread) and "small" (the notebooks' tests).

    from companions import beyond_ch1
    runs = beyond_ch1.family_runs(corpus, **beyond_ch1.SIZES["cpu"])
    beyond_ch1.table(runs); beyond_ch1.sample(runs[-1], corpus)
"""

from companions import beyond

SIZES = {
    "cuda": {"widths": (16, 64, 128, 256, 512), "steps": 2000, "batch_size": 64, "eval_windows": 1024},
    "cpu": {"widths": (16, 32, 64, 128), "steps": 1000, "batch_size": 16, "eval_windows": 512},
    "small": {"widths": (16, 32), "steps": 20, "batch_size": 16, "eval_windows": 32},
}
PROMPT = "ROMEO:\n"  # chapter 1's sample prompt, temperature and length (experiments.ch1)
TEMPERATURE = 0.8


def size_of(width, n_layer=1):
    """The family's member of this width (and depth): the course model's two heads and context 64."""
    return beyond.Size(n_embd=int(width), n_layer=int(n_layer), n_head=2, block_size=64)


def family_runs(corpus, widths, steps, batch_size=16, eval_windows=512, n_layer=1, lr=1e-2, seed=0, dev=None,
                progress=None):
    """One run per width, in order: companions.beyond.train's results (with "net", the trained model)."""
    loop = progress(widths, desc=f"widths, {beyond.device(dev)}", unit="width") if progress else widths
    return [beyond.train(corpus, size_of(w, n_layer), steps=steps, batch_size=batch_size, lr=lr, seed=seed, dev=dev,
                         eval_windows=eval_windows) for w in loop]


def table(runs):
    """Markdown lines: each width's parameters, final loss on the fixed windows, and time."""
    first = runs[0]
    lines = [f"Device {first['device']}; {first['steps']} steps of {first['tokens'] // first['steps']:,} tokens, "
             f"lr {first['lr']}; final loss on {first['eval']}.", "",
             "| width | layers | parameters | final loss (nats/token) | seconds |", "| --- | --- | --- | --- | --- |"]
    for r in runs:
        loss = "diverged" if r["val"] is None else f"{r['val']:.4f}"
        lines.append(f"| {r['size'].n_embd} | {r['size'].n_layer} | {r['params']:,} | {loss} | {r['seconds']:.1f} |")
    return lines


def sample(run, corpus, n_tokens=200, prompt=PROMPT, temperature=TEMPERATURE, seed=0):
    """Text from a run's trained model: chapter 1's sampler (pylib.sample.generate) on its weights."""
    from pylib import export, sample as psample
    cfg = beyond.model_config(run["size"], corpus.vocab.size)
    params = export.from_nanogpt_state_dict({k: v.detach().float().cpu().numpy() for k, v in run["net"].state_dict().items()},
                                            cfg)
    ids, _ = corpus.vocab.encode(prompt)
    return corpus.vocab.decode(psample.generate(params, cfg, list(ids), n_tokens, temperature=temperature, seed=seed))
