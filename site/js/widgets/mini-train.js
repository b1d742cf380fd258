// The compact live run at the top of chapter 1 and of the index: the course model with the default
// settings, trained in the page's worker by the op "train" (the full widget's op), started only by the
// reader's Start. It draws the moving average of the training loss and the validation loss on the
// fixed windows; every number comes from pylib.web's records. As it trains it shows the newest of the
// run's live samples (pylib.web.session: a few, evenly spaced, at evaluations; the last is the finished
// run's own sample), with its step and validation loss, and once the run has ended (or was stopped) the
// reader steps through them with Earlier and Later. Text from the worker goes in with textContent.

import { Plot, ends, fmtCell } from "../plot.js";
import { readConfig, readoutMap, runStreamed } from "../widget-kit.js";

const fmt = (v) => (v == null || !Number.isFinite(v) ? "–" : v.toFixed(3));

export async function mount(root, client) {
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const chartEl = root.querySelector('[data-role="chart"]');
  const sampleBox = root.querySelector('[data-role="sample"]');
  const liveBox = root.querySelector('[data-role="sample-live"]');
  const liveAt = root.querySelector('[data-role="sample-at"]');
  const position = root.querySelector('[data-role="sample-position"]');
  const earlier = root.querySelector('[data-action="sample-earlier"]');
  const later = root.querySelector('[data-action="sample-later"]');
  const windows = `${config.eval_windows} fixed validation windows`;
  let plot = null;
  let data = null;

  // the live samples: [{step, val, text}] in step order; shown: the index on show
  let samples = [];
  let shown = -1;
  let steps = null;
  let running = false;
  const showSample = (i) => {
    shown = i;
    const s = samples[i];
    liveAt.textContent = `Step ${s.step}${steps ? ` of ${steps}` : ""}: validation loss ${fmt(s.val)} on the ${windows} (as the chart's dots)`;
    liveBox.textContent = s.text === "" ? "(nothing: the model ended the document at once)" : s.text;
    liveBox.dataset.step = String(s.step);
    position.textContent = `Sample ${i + 1} of ${samples.length}`;
    earlier.disabled = running || i === 0;
    later.disabled = running || i === samples.length - 1;
  };
  const clearSamples = (text) => {
    samples = [];
    shown = -1;
    liveAt.textContent = "No sample yet.";
    liveBox.textContent = text;
    delete liveBox.dataset.step;
    position.textContent = "–";
    earlier.disabled = later.disabled = true;
  };
  // stepping is for after the run: while it trains, the newest sample replaces the one on show
  const setRunning = (on) => {
    running = on;
    if (shown >= 0) showSample(shown);
    else earlier.disabled = later.disabled = true;
  };
  earlier.addEventListener("click", () => { if (shown > 0) showSample(shown - 1); });
  later.addEventListener("click", () => { if (shown < samples.length - 1) showSample(shown + 1); });

  const reset = (n, band) => {
    const nulls = () => new Array(n).fill(null);
    const b = band || {};
    data = [Array.from({ length: n }, (_, i) => i), nulls(), nulls(), b.hi || nulls(), b.lo || nulls()];
    if (plot) plot.destroy();
    plot = new Plot(chartEl, {
      x: { label: "step" },
      y: { label: "loss (nats/token)" },
      height: 200,
      series: [
        { label: "train loss (moving average)", color: 1, width: 2 },
        { label: `validation loss (${windows})`, color: 2, points: true, size: 6 },
        { label: "measured band, upper edge", color: "axis", width: 0.5, hidden: !band },
        { label: "measured band, lower edge", color: "axis", width: 0.5, hidden: !band },
      ],
      bands: band ? [[3, 4]] : [],
      maxRows: 45,
      xName: "step",
    });
  };

  const describe = () => {
    const [x, smooth, val] = data;
    const v = ends(x, val), s = ends(x, smooth);
    const parts = [];
    if (v) parts.push(`Validation loss (${windows}) went from ${fmtCell(v.y0)} at step ${v.x0} to ${fmtCell(v.y1)} at step ${v.x1}`);
    if (s) parts.push(`the training loss (moving average) from ${fmtCell(s.y0)} to ${fmtCell(s.y1)}`);
    plot.describe(parts.length ? `${parts.join("; ")}.` : "No run yet.");
  };

  const run = runStreamed(root, client, {
    op: "train",
    args: () => ({ settings: config.settings, curve: config.curve, live_samples: true }),
    announceStart: "Training started.",
    onStart() {
      setRunning(true);
    },
    onClear() {
      for (const el of Object.values(readouts)) el.textContent = "–";
      sampleBox.textContent = "Training: the text appears here when the run ends.";
      clearSamples("Training: the first sample appears here soon.");
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        const band = ev.info.band;
        steps = ev.info.config.steps;
        reset(Math.max(ev.info.config.steps, band ? band.mean.length : 0), band);
        const at = ev.info.sample_steps || [];
        if (at.length) liveBox.textContent = `Training: the first sample is taken at step ${at[0]}.`;
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      for (const s of c.samples || []) samples.push(s);
      if (c.samples && c.samples.length) showSample(samples.length - 1);
      const [x, smooth, val] = data;
      for (const r of c.records) {
        if (r.step >= x.length || r.diverged) continue;
        if (r.loss_smooth != null) smooth[r.step] = r.loss_smooth;
        if (r.val != null) {
          val[r.step] = r.val;
          readouts.val.textContent = fmt(r.val);
        }
      }
      readouts.step.textContent = `${c.step} of ${c.steps}`;
      plot.setData(data);
      describe();
      return `Training… step ${c.step} of ${c.steps}.`;
    },
    onResult(value) {
      setRunning(false);
      const r = value.result;
      // what the trained model writes, beside what it wrote before training (text only)
      sampleBox.textContent = r.sample || (r.diverged ? "The run diverged: no text." : "–");
      const summary = { steps: r.steps, final_val_loss: r.final_val_loss, diverged: r.diverged, outside_band: r.outside_band };
      if (r.diverged) return { status: "error", result: summary, text: `The run diverged at step ${r.diverged_at}.` };
      const val = r.final_val_loss == null ? "" : `: validation loss ${r.final_val_loss.toFixed(3)} on the ${windows}`;
      if (value.stopped) {
        return { status: "stopped", text: `Stopped at step ${r.steps}${val}. Press Start to train again from step 0.` };
      }
      const band = r.outside_band === false ? ", inside the measured band all the way"
        : r.outside_band ? ", outside the measured band (see the full widget)" : "";
      return { status: "done", result: summary, text: `Done: ${r.steps} steps${val}${band}.` };
    },
    onError() {
      setRunning(false);
    },
  });
  await run.ready(null, "Ready. Press Start to train the model here.");
}
