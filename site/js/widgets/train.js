// The live training widget: a thin view over pylib.web (validation, training chunks, band check,
// sample, export), which runs in the page's Python worker. Everything from the reader or the model
// is shown with textContent.

import { LossChart } from "../chart.js";
import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";

function format(key, v) {
  if (v == null || Number.isNaN(v)) return "–";
  if (key === "step") return String(v);
  if (key === "lr") return v.toExponential(2);
  if (key === "steps_per_s") return v.toFixed(1);
  if (key === "tokens_per_s") return Math.round(v).toLocaleString("en");
  return v.toFixed(3);
}

// How long a run takes, in words ("about 4 h 10 min"), for the estimate before and during a long run.
function duration(seconds) {
  if (seconds < 90) return `about ${Math.max(1, Math.round(seconds))} s`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) return `about ${minutes} min`;
  const h = Math.floor(minutes / 60), m = minutes % 60;
  return `about ${h} h${m ? ` ${m} min` : ""}`;
}

// The pace this browser trained at (tokens per second, measured by the worker over a run: the
// chunks' steps_per_s × tokens per step), kept across pages and visits, so that a run that would take
// more than LONG_RUN_S, and is larger than the default run, says so before it starts. Storage may be
// off (a private window): then the estimate comes from the run's first chunk instead.
const PACE_KEY = "course-train-pace";
const LONG_RUN_S = 60;
const readPace = () => {
  try {
    const v = Number(localStorage.getItem(PACE_KEY));
    return v > 0 && Number.isFinite(v) ? v : null;
  } catch { return null; }
};
const savePace = (v) => {
  try { if (v > 0 && Number.isFinite(v)) localStorage.setItem(PACE_KEY, String(v)); } catch { /* storage off */ }
};

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const config = readConfig(root);
  const flag = $('[data-role="band-flag"]');
  const output = $('[data-role="output"]');
  const download = $('[data-role="download"]');
  const readouts = readoutMap(root);
  const fields = bindFields(root);
  let weightsURL = null;
  let tokensPerStep = 0;
  let requestedSteps = "";

  const setReadout = (key, value) => {
    if (readouts[key]) readouts[key].textContent = format(key, value);
  };

  const d = config.derived;
  const subset = `${config.defaults.eval_windows} fixed validation windows`;
  const chart = new LossChart($('[data-role="chart"]'), {
    refs: [
      { value: d.ln_vocab, label: `ln V (V = ${d.vocab_size})` },
      { value: d.unigram_loss, label: "unigram loss" },
    ],
  });

  const run = runStreamed(root, client, {
    op: "train",
    fields,
    args: () => {
      const settings = fields.values();
      requestedSteps = settings.steps.trim();
      return { settings, curve: config.curve };
    },
    announceStart: "Training started.",
    confirm({ settings }) {
      // steps and batch as the worker will read them (pylib.web.inputs checks them); not a whole number: no estimate
      const steps = Number(settings.steps), batch = Number(settings.batch_size), pace = readPace();
      if (!pace || !Number.isInteger(steps) || !Number.isInteger(batch) || steps < 1 || batch < 1) return null;
      // out of bounds: no estimate, the worker's message says why at once
      if (steps > config.limits.steps_max || batch > config.limits.batch_max) return null;
      // the course's default run is the chapter's invitation: it, and anything smaller, starts at once
      if (steps * batch <= config.defaults.steps * config.defaults.batch_size) return null;
      const seconds = (steps * batch * config.model.block_size) / pace;
      if (seconds <= LONG_RUN_S) return null;
      return `This run would take ${duration(seconds)} in this page: ${steps.toLocaleString("en")} steps × ` +
        `${(batch * config.model.block_size).toLocaleString("en")} tokens at the ${Math.round(pace).toLocaleString("en")} ` +
        "tokens/s your browser trained at last time.";
    },
    onClear() {
      output.hidden = true;
      flag.hidden = true;
      delete root.dataset.outsideBand;
      if (weightsURL) URL.revokeObjectURL(weightsURL);
      weightsURL = null;
      for (const key of Object.keys(readouts)) setReadout(key, null);
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        tokensPerStep = ev.info.tokens_per_step;
        chart.reset(Math.max(ev.info.config.steps, ev.info.band ? ev.info.band.mean.length : 0), ev.info.band);
        root.dataset.outsideBand = ev.info.band_applies ? "false" : "n/a";
        if (!ev.info.band_applies && config.curve) {
          flag.hidden = false;
          flag.textContent = `The shaded band is the default run's (default settings, seed ${config.defaults.seed}); ` +
            "this run's settings differ, so the band is drawn but the run is not flagged.";
        }
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      chart.add(c.records);
      chart.redraw();
      const last = c.records[c.records.length - 1];
      if (last) {
        setReadout("step", last.step + 1); // records count steps from 0
        setReadout("loss", last.loss);
        setReadout("lr", last.lr);
        setReadout("grad_norm", last.grad_norm);
      }
      for (const r of c.records) if (r.val != null) setReadout("val", r.val);
      setReadout("steps_per_s", c.steps_per_s);
      setReadout("tokens_per_s", c.steps_per_s == null ? null : c.steps_per_s * tokensPerStep);
      if (c.outside_band && c.left_band) {
        root.dataset.outsideBand = "true";
        flag.hidden = false;
        const b = c.left_band;
        flag.textContent =
          `This run left the measured band at step ${b.step}: validation loss ${b.val.toFixed(3)} ` +
          `(${subset}), band ${b.mean.toFixed(3)} ± ${b.half.toFixed(3)}.`;
      }
      const loss = last && last.loss_smooth != null ? `, train loss ${last.loss_smooth.toFixed(3)}` : "";
      let left = "";
      if (c.steps_per_s) {
        savePace(c.steps_per_s * tokensPerStep);
        const seconds = c.steps / c.steps_per_s;
        if (seconds > LONG_RUN_S) left = ` The whole run takes ${duration(seconds)} at this pace; ${duration((c.steps - c.step) / c.steps_per_s)} left.`;
      }
      return `Training… step ${c.step} of ${c.steps}${loss}.${left}`;
    },
    onResult(value) {
      const r = value.result;
      const summary = {
        steps: r.steps, final_train_loss: r.final_train_loss, final_val_loss: r.final_val_loss,
        steps_per_s: r.steps_per_s, tokens_per_s: r.tokens_per_s, diverged: r.diverged, diverged_at: r.diverged_at, diverged_loss: r.diverged_loss,
        seed: r.seed, lr: r.lr, batch_size: r.batch_size, outside_band: r.outside_band,
      };
      const result = value.stopped ? undefined : summary;
      if (r.diverged) {
        const why = r.diverged_loss == null
          ? "its loss was not a finite number"
          : `its loss, ${r.diverged_loss.toFixed(1)}, passed the limit 2 ln V = ${r.divergence_limit.toFixed(2)}`;
        return { status: "error", result, text: `The run diverged at step ${r.diverged_at}: ${why}, so training stopped there. Try a smaller learning rate.` };
      }
      $('[data-role="sample"]').textContent = r.sample;
      weightsURL = URL.createObjectURL(new Blob([value.weights], { type: "application/octet-stream" }));
      download.href = weightsURL;
      output.hidden = false;
      if (value.stopped) {
        return { status: "stopped", text: `Stopped at step ${r.steps} of ${requestedSteps}: the sample and weights below are the model at that step. Press Start to train again from step 0.` };
      }
      const val = r.final_val_loss == null ? "" : `, last validation loss ${r.final_val_loss.toFixed(3)} (${subset})`;
      return { status: "done", result, text: `Done: ${r.steps} steps, train loss ${r.final_train_loss.toFixed(3)}${val}.` };
    },
  });

  const drawBand = async () => {
    if (!config.curve) return;
    const n = Math.max(config.defaults.steps, config.curve.steps[config.curve.steps.length - 1] + 1);
    chart.reset(n, await client.call("band", { curve: config.curve, n_steps: n, shade: "flag" }));
  };
  await run.ready(drawBand, "Ready. Press Start to train in this page.");
}
