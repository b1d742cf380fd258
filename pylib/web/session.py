"""The session: the corpus loaded once per page and the current chapter-1 training run.

The worker advances a run in short chunks (`Session.train_chunk`), so that a Stop message is handled
between chunks. The corpus is loaded when an op first needs it: `DataNotLoaded` names the files
(in data/) the worker fetches and loads before it runs the op again. pylib.web holds the page's one
Session, `SESSION`.
"""

import dataclasses
import json
import math
import pathlib
import time

import numpy as np

from pylib import data, model
from pylib.web.band import band_series, band_verdict
from pylib.web.inputs import DEFAULT_TEMPERATURE, LIMITS, validate_text, validate_train_settings


def sample_text(vocab, params, model_cfg, temperature=DEFAULT_TEMPERATURE, seed=0):
    """What a run's model writes: up to LIMITS["sample_tokens"] characters after an end-of-document
    token, one document at most, at this temperature and seed (a finished run's sample; the build's
    sample of the untrained model, shown beside the live run's, is the same call on fresh weights)."""
    from pylib import sample
    ids = sample.generate(params, model_cfg, [vocab.eos_id], LIMITS["sample_tokens"], temperature, seed,
                          stop_at=vocab.eos_id)  # one document at most
    ids = [int(i) for i in np.asarray(ids).ravel()]
    if ids and ids[0] == vocab.eos_id:
        ids = ids[1:]  # the prompt
    return vocab.decode(ids)


def live_sample_steps(train_cfg, n=None):
    """The steps (updates done) after which a run with live samples samples its model: n of them
    (LIMITS["live_samples"]), evenly spaced, each at one of the run's evaluations so that it comes with
    the validation loss of the same weights, the last at the run's end (the finished run's own sample)."""
    n = LIMITS["live_samples"] if n is None else n
    every, steps = train_cfg.eval_interval, train_cfg.steps
    # a mid-run evaluation comes before its step's update, at multiples of eval_interval, never at the last step
    mid = {round(i * steps / n / every) * every for i in range(1, n)}
    return sorted(s for s in mid if 0 < s < steps - 1) + [steps]


def _clean(x):
    """A JSON-safe number: NaN and infinities become None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


CORPUS_FILES = ("train.bin", "val.bin")  # uint8 token ids, as build.py writes them into data/
VOCAB_FILE = "vocab.json"


class DataNotLoaded(RuntimeError):
    """An op needs corpus files the session has not loaded yet; `files` names them (in data/)."""

    def __init__(self, files):
        self.files = list(files)
        super().__init__(f"the corpus is not loaded yet (this needs data/{', data/'.join(self.files)})")


class Session:
    """The loaded corpus and the current run; one per page (one per worker).

    train_tokens and val_tokens raise DataNotLoaded until they are loaded (or assigned)."""

    def __init__(self):
        self.vocab = None
        self._tokens = {"train": None, "val": None}
        self.run = None

    @property
    def train_tokens(self):
        return self._split("train")

    @train_tokens.setter
    def train_tokens(self, ids):
        self._tokens["train"] = ids

    @property
    def val_tokens(self):
        return self._split("val")

    @val_tokens.setter
    def val_tokens(self, ids):
        self._tokens["val"] = ids

    def _split(self, name):
        if self._tokens[name] is None:
            raise DataNotLoaded(self._missing() or CORPUS_FILES)
        return self._tokens[name]

    def _missing(self):
        """The corpus files not loaded yet, in data/: what an op that needs the corpus waits for."""
        missing = [] if self.vocab is not None else [VOCAB_FILE]
        return missing + [f"{name}.bin" for name, ids in self._tokens.items() if ids is None]

    # --- corpus

    def load_corpus(self, folder):
        """Read train.bin, val.bin (uint8 ids) and vocab.json from folder."""
        return self.load_data(folder, (VOCAB_FILE, *CORPUS_FILES))

    def load_data(self, folder, files):
        """Read the named corpus files (vocab.json, train.bin, val.bin) from folder; returns what is
        loaded so far: {vocab_size, train_tokens, val_tokens} (None for what is not)."""
        folder = pathlib.Path(folder)
        unknown = set(files) - {VOCAB_FILE, *CORPUS_FILES}
        if unknown:
            raise ValueError(f"unknown corpus files {sorted(unknown)}")
        if VOCAB_FILE in files:
            meta = json.loads((folder / VOCAB_FILE).read_text(encoding="utf-8"))
            vocab = data.CharVocab(chars=tuple(meta["chars"]))
            if vocab.size != meta["size"] or vocab.eos_id != meta["eos_id"]:
                raise ValueError(f"{VOCAB_FILE}: size {meta['size']} and eos_id {meta['eos_id']} do not match "
                                 f"its {len(meta['chars'])} characters")
            self.vocab = vocab
        for name in CORPUS_FILES:
            if name in files:
                self._tokens[name.removesuffix(".bin")] = np.fromfile(folder / name, dtype=np.uint8)
        sizes = {f"{k}_tokens": None if ids is None else int(ids.size) for k, ids in self._tokens.items()}
        return {"vocab_size": None if self.vocab is None else self.vocab.size, **sizes}

    def _need_vocab(self):
        if self.vocab is None:
            raise DataNotLoaded([VOCAB_FILE])

    def _need_corpus(self):
        """Raises DataNotLoaded unless the vocabulary and both token files are loaded; an op that
        trains or reads the corpus calls it first, before it changes any state."""
        missing = self._missing()
        if missing:
            raise DataNotLoaded(missing)

    # --- tokenizer

    def vocab_table(self):
        """[{id, char, name}] for every id, with names for the invisible ones."""
        self._need_vocab()
        names = {"\n": "newline", " ": "space", "\t": "tab"}
        rows = [{"id": i, "char": ch, "name": names.get(ch, "")} for i, ch in enumerate(self.vocab.chars)]
        rows.append({"id": self.vocab.eos_id, "char": data.EOS_DISPLAY, "name": "end of document (EOS)"})
        return rows

    def tokenize(self, text):
        """Text -> ids (first LIMITS['ids_shown']), counts, and which characters were dropped."""
        self._need_vocab()
        text = validate_text(text)
        normalised = data.normalise_text(text)  # the corpus rule: dashes to ASCII, accents stripped
        ids, n_dropped = self.vocab.encode(normalised)
        known = set(self.vocab.chars)
        dropped = []
        for ch in normalised:
            if ch not in known and ch not in dropped:
                dropped.append(ch)
        shown = ids[: LIMITS["ids_shown"]].tolist()
        return {
            "ids": shown,
            "chars": [self.vocab.chars[i] for i in shown],
            "n_tokens": int(ids.size),
            "n_chars": len(text),
            "truncated": int(ids.size) > len(shown),
            "n_dropped": int(n_dropped),
            "dropped": [{"char": ch, "codepoint": f"U+{ord(ch):04X}"} for ch in dropped[:50]],
            "n_dropped_kinds": len(dropped),
        }

    # --- training

    def start_run(self, settings, curve=None, live_samples=False):
        """Validate settings and set up a fresh run; returns the config the run uses. With live_samples,
        the run samples its model as it trains, at live_sample_steps (train_chunk's "samples")."""
        from pylib import train

        self._need_corpus()
        train_cfg, temperature = validate_train_settings(settings)
        model_cfg = dataclasses.replace(model.GPTConfig(), vocab_size=self.vocab.size)  # 65 for the course corpus
        is_default = train_cfg == train.TrainConfig()
        self.run = {
            "model_cfg": model_cfg,
            "train_cfg": train_cfg,
            "temperature": temperature,
            "state": train.init_train_state(model_cfg, train_cfg),
            "last": {},
            "last_val": None,
            "diverged_at": None,
            "outside_band": False if (is_default and curve) else None,
            "left_band": None,  # the first eval step outside the band
            "ema": 0.0,
            "ema_weight": 0.0,
            "curve": curve if is_default else None,  # the band is compared only with default runs
            "elapsed": 0.0,
            "steps_timed": 0,
            "sample_at": live_sample_steps(train_cfg) if live_samples else [],
            "final_sample": None,  # the live sample taken at the run's end: the finished run's sample
            "sample_seconds": 0.0,  # time spent on live samples (not in elapsed: steps_per_s is training's)
        }
        return {
            "config": dataclasses.asdict(train_cfg),
            "temperature": temperature,
            "is_default": is_default,
            "band_applies": bool(is_default and curve),
            "tokens_per_step": train_cfg.batch_size * model_cfg.block_size,
            "band": band_series(curve, max(train_cfg.steps, int(((curve or {}).get("steps") or [0])[-1]) + 1), "flag"),
            "sample_steps": list(self.run["sample_at"]),
        }

    def train_chunk(self, seconds=None):
        """Run steps for about `seconds` (at least one step); returns the new records and the run's state,
        and, for a run with live samples, the samples taken in this chunk: [{step, val, text}], step the
        updates done, val the validation loss of the same weights (the curves' evaluation)."""
        from pylib import train
        from pylib.web.chunks import chunk_steps

        run = self.run
        if run is None:
            raise RuntimeError("no run: start one first")
        cfg = run["train_cfg"]
        out, samples = [], []
        state = run["state"]
        done = lambda: state["step"] >= cfg.steps or state["diverged"]  # noqa: E731
        for _ in chunk_steps(done, None if seconds is None else float(seconds)):
            step = state["step"]
            # a mid-run evaluation scores the weights the step starts from: sample those, before the update
            text = self._live_sample() if step in run["sample_at"] and step < cfg.steps else None
            t_step = time.perf_counter()
            records = train.train_steps(
                run["state"], run["model_cfg"], cfg, self.train_tokens, self.val_tokens, 1
            )
            run["elapsed"] += time.perf_counter() - t_step
            run["steps_timed"] += 1
            for rec in records:
                r = self._record(rec)
                out.append(r)
                if text is not None and r.get("val") is not None and not r.get("diverged"):
                    samples.append({"step": step, "val": r["val"], "text": text})
            # the last step's evaluation comes after its update: the finished model's sample, with that loss
            if state["step"] == cfg.steps and cfg.steps in run["sample_at"] and not state["diverged"] and out \
                    and out[-1].get("val") is not None and run["final_sample"] is None:
                run["final_sample"] = self._live_sample()
                samples.append({"step": cfg.steps, "val": out[-1]["val"], "text": run["final_sample"]})
        return {
            "records": out,
            "samples": samples,
            "step": state["step"],
            "steps": cfg.steps,
            "done": done(),
            "diverged_at": run["diverged_at"],
            "outside_band": run["outside_band"],
            "left_band": run["left_band"],
            "steps_per_s": self._steps_per_s(),
        }

    def _record(self, rec):
        """A train_steps record made JSON-safe, with the band verdict at eval steps."""
        run = self.run
        r = {}
        for k, v in rec.items():
            numeric = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            r[k] = _clean(v) if numeric else v
        r["step"] = int(rec["step"])
        if r.get("loss") is not None:  # a bias-corrected moving average, as the plot's thick line
            run["ema"] = LIMITS["smoothing"] * run["ema"] + (1 - LIMITS["smoothing"]) * r["loss"]
            run["ema_weight"] = LIMITS["smoothing"] * run["ema_weight"] + (1 - LIMITS["smoothing"])
            r["loss_smooth"] = run["ema"] / run["ema_weight"]
        if rec.get("diverged") or run["state"].get("diverged"):
            r["diverged"] = True
            if run["diverged_at"] is None:
                run["diverged_at"] = r["step"]
        if r.get("val") is not None:
            run["last_val"] = r["val"]
            verdict = band_verdict(r["step"], r["val"], run["curve"])
            r["band"] = verdict
            if verdict is not None and not verdict["inside"] and not run["outside_band"]:
                run["outside_band"] = True
                run["left_band"] = {"step": r["step"], "val": r["val"], **verdict}
        run["last"] = r
        return r

    def _live_sample(self):
        """sample_text on the run's current weights, at its temperature and seed (as finish_run's), timed."""
        run = self.run
        t0 = time.perf_counter()
        text = sample_text(self.vocab, run["state"]["params"], run["model_cfg"], run["temperature"], run["train_cfg"].seed)
        run["sample_seconds"] += time.perf_counter() - t0
        return text

    def _steps_per_s(self):
        run = self.run
        return run["steps_timed"] / run["elapsed"] if run["elapsed"] > 0 else None

    def finish_run(self):
        """The final figures and a generated sample."""
        from pylib import train

        run = self.run
        if run is None:
            raise RuntimeError("no run: start one first")
        cfg, last = run["train_cfg"], run["last"]
        result = {
            "steps": run["state"]["step"],
            "final_train_loss": last.get("loss"),
            "final_val_loss": run["last_val"],
            "steps_per_s": self._steps_per_s(),
            "tokens_per_s": None,
            "diverged": run["diverged_at"] is not None,
            "diverged_at": run["diverged_at"],
            "diverged_loss": last.get("loss") if run["diverged_at"] is not None else None,
            "divergence_limit": train.divergence_threshold(run["model_cfg"].vocab_size),
            "seed": cfg.seed,
            "lr": cfg.lr,
            "batch_size": cfg.batch_size,
            "outside_band": run["outside_band"],
            "left_band": run["left_band"],
            "sample": None,
            "sample_seconds": run["sample_seconds"],
        }
        if result["steps_per_s"]:
            result["tokens_per_s"] = result["steps_per_s"] * cfg.batch_size * run["model_cfg"].block_size
        if run["final_sample"] is not None:  # taken at the run's end, on these weights: the same call
            result["sample"] = run["final_sample"]
        elif not result["diverged"]:
            result["sample"] = sample_text(self.vocab, run["state"]["params"], run["model_cfg"], run["temperature"], cfg.seed)
        return result

    def export_npz(self):
        """The current run's weights as .npz bytes with nanoGPT state_dict names."""
        from pylib import export

        if self.run is None:
            raise RuntimeError("no run: start one first")
        sd = export.to_nanogpt_state_dict(self.run["state"]["params"], self.run["model_cfg"])
        return export.state_dict_to_npz_bytes(sd)
