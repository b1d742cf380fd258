// The compact live run at the top of chapter 1 and of the index: the course model with the default
// settings, trained in the page's worker by the op "train" (the full widget's op), started only by the
// reader's Start. It draws the moving average of the training loss and the validation loss on the
// fixed windows; every number comes from pylib.web's records. Text from the worker goes in with textContent.

import { Plot, ends, fmtCell } from "../plot.js";
import { readConfig, readoutMap, runStreamed } from "../widget-kit.js";

const fmt = (v) => (v == null || !Number.isFinite(v) ? "–" : v.toFixed(3));

export async function mount(root, client) {
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const chartEl = root.querySelector('[data-role="chart"]');
  const sampleBox = root.querySelector('[data-role="sample"]');
  const windows = `${config.eval_windows} fixed validation windows`;
  let plot = null;
  let data = null;

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
    args: () => ({ settings: config.settings, curve: config.curve }),
    announceStart: "Training started.",
    onClear() {
      for (const el of Object.values(readouts)) el.textContent = "–";
      sampleBox.textContent = "Training: the text appears here when the run ends.";
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        const band = ev.info.band;
        reset(Math.max(ev.info.config.steps, band ? band.mean.length : 0), band);
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
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
  });
  await run.ready(null, "Ready. Press Start to train the model here.");
}
