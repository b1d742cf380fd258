// Training on the reader's text (pylib.web.data_ops's data_own_* ops: vocabulary from the text,
// pylib.train's loop, a sample at the end), on the kit's runStreamed. The pasted text and the sample
// are only ever textContent.

import { bindFields, readoutMap, runStreamed } from "../widget-kit.js";
import { lineChart } from "./data-svg.js";

const FIELDS = ["text", "steps", "seed"];

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const output = $('[data-role="output"]');
  const readouts = readoutMap(root);
  const chart = lineChart($('[data-role="chart"]'));
  const fields = bindFields(root);
  let loss = { xs: [], ys: [] }, val = { xs: [], ys: [] };
  let total = 1;

  const draw = () => {
    if (!loss.xs.length && !val.xs.length) return;
    const parts = [];
    const n = loss.xs.length - 1;
    if (n >= 0) parts.push(`Training loss ${loss.ys[0].toFixed(3)} at step ${loss.xs[0]}, ${loss.ys[n].toFixed(3)} at step ${loss.xs[n]}.`);
    const m = val.xs.length - 1;
    if (m >= 0) parts.push(`Validation loss ${val.ys[0].toFixed(3)} at step ${val.xs[0]}, ${val.ys[m].toFixed(3)} at step ${val.xs[m]}.`);
    chart([
      { ...loss, color: 1, points: false, label: "train loss" },
      { ...val, color: 2, dots: true, label: "validation loss" },
    ], { xlabel: "step", ylabel: "loss (nats/char)", xmin: 0, xmax: total, summary: parts.join(" ") });
  };

  const run = runStreamed(root, client, {
    op: "run:data_own",
    fields,
    args: () => Object.fromEntries(FIELDS.map((f) => [f, fields.input(f).value])),
    startText: "Building the vocabulary…",
    announceStart: "Training started.",
    onClear() {
      output.hidden = true;
      for (const el of Object.values(readouts)) el.textContent = "–";
      loss = { xs: [], ys: [] };
      val = { xs: [], ys: [] };
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        total = ev.info.config.steps;
        readouts.vocab.textContent = ev.info.vocab_size;
        readouts.params.textContent = ev.info.params.toLocaleString("en");
        readouts.train.textContent = ev.info.train_tokens.toLocaleString("en");
        return null;
      }
      if (ev.kind !== "chunk") return null;
      for (const r of ev.chunk.records) {
        if (r.loss != null) { loss.xs.push(r.step); loss.ys.push(r.loss); }
        if (r.val != null) { val.xs.push(r.step); val.ys.push(r.val); readouts.val.textContent = r.val.toFixed(3); }
      }
      const last = ev.chunk.records[ev.chunk.records.length - 1];
      if (last) {
        readouts.step.textContent = last.step + 1;
        if (last.loss != null) readouts.loss.textContent = last.loss.toFixed(3);
      }
      draw();
      return `Training… step ${ev.chunk.step} of ${ev.chunk.steps}.`;
    },
    onResult({ result: r, stopped }) {
      const result = { steps: r.steps, final_train_loss: r.final_train_loss, final_val_loss: r.final_val_loss, diverged: r.diverged, stopped };
      if (r.diverged) return { status: "error", result, text: `The run diverged at step ${r.diverged_at}; training stopped there.` };
      $('[data-role="sample"]').textContent = r.sample;
      output.hidden = false;
      const v = r.final_val_loss == null ? "" : `, validation loss ${r.final_val_loss.toFixed(3)}`;
      return {
        status: stopped ? "stopped" : "done",
        result,
        text: `${stopped ? "Stopped" : "Done"} after ${r.steps} steps: train loss ${r.final_train_loss == null ? "–" : r.final_train_loss.toFixed(3)}${v}.`,
      };
    },
  });
  await run.ready(null, "Ready. Paste some text and press Train.");
}
