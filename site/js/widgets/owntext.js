// Training on the reader's text (pylib.web.data_ops's data_own_* ops: vocabulary from the text,
// pylib.train's loop, a sample at the end). The pasted text and the sample are only ever textContent.

import { invalidMarker, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";
import { lineChart } from "./data-svg.js";

const FIELDS = ["text", "steps", "seed"];

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const chart = $('[data-role="chart"]');
  const output = $('[data-role="output"]');
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  let running = false;

  if (!(await startPython(client, setStatus, [runButton]))) return;
  runButton.disabled = false;
  setStatus("ready", "Ready. Paste some text and press Train.");
  wireStop(stopButton, client, message, () => running);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    output.hidden = true;
    markInvalid(null);
    delete root.dataset.result;
    for (const el of Object.values(readouts)) el.textContent = "–";
    const loss = { xs: [], ys: [] }, val = { xs: [], ys: [] };
    let total = 1;
    setStatus("running", "Building the vocabulary…");
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        total = ev.info.config.steps;
        readouts.vocab.textContent = ev.info.vocab_size;
        readouts.params.textContent = ev.info.params.toLocaleString("en");
        readouts.train.textContent = ev.info.train_tokens.toLocaleString("en");
        return;
      }
      if (ev.kind !== "chunk") return;
      for (const r of ev.chunk.records) {
        if (r.loss != null) { loss.xs.push(r.step); loss.ys.push(r.loss); }
        if (r.val != null) { val.xs.push(r.step); val.ys.push(r.val); readouts.val.textContent = r.val.toFixed(3); }
      }
      const last = ev.chunk.records[ev.chunk.records.length - 1];
      if (last) {
        readouts.step.textContent = last.step + 1;
        if (last.loss != null) readouts.loss.textContent = last.loss.toFixed(3);
      }
      lineChart(chart, [{ ...loss, color: "#2a5db0" }, { ...val, color: "#d9480f", dots: true }], { xmin: 0, xmax: total, xlabel: "step", ylabel: "loss (nats per character)" });
      message.textContent = `Training… step ${ev.chunk.step} of ${ev.chunk.steps}.`;
    };
    try {
      const settings = Object.fromEntries(FIELDS.map((f) => [f, form.elements[f].value]));
      const { result: r, stopped } = await client.call("run:data_own", settings, { onEvent });
      root.dataset.result = JSON.stringify({ steps: r.steps, final_train_loss: r.final_train_loss, final_val_loss: r.final_val_loss, diverged: r.diverged, stopped });
      if (r.diverged) {
        setStatus("error", `The run diverged at step ${r.diverged_at}; training stopped there.`);
        return;
      }
      $('[data-role="sample"]').textContent = r.sample;
      output.hidden = false;
      const v = r.final_val_loss == null ? "" : `, validation loss ${r.final_val_loss.toFixed(3)}`;
      setStatus(stopped ? "stopped" : "done", `${stopped ? "Stopped" : "Done"} after ${r.steps} steps: train loss ${r.final_train_loss == null ? "–" : r.final_train_loss.toFixed(3)}${v}.`);
    } catch (err) {
      markInvalid(err.errors);
      setStatus("error", err.message);
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
    }
  });
}
