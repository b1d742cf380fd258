// Save, reload, resume: a thin view over run:job_ckpt, job_ckpt_save and job_ckpt_load
// (pylib.web.job_ops, which calls pylib.checkpoint and pylib.train). It only draws what the worker sends.

import { invalidMarker, showRunError, readConfig, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";
import { b64ToBytes, bytesToB64, download, fillLegend, lineChart, num } from "./job-kit.js";

const FIELDS = ["steps", "lr", "seed"];
const C = { before: "#2a5db0", after: "#d9480f" };

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const saveButton = $('[data-action="save"]');
  const continueButton = $('[data-action="continue"]');
  const fileInput = $('[data-role="file"]');
  const dropBox = $('[data-role="drop"]');
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);
  const chartEl = $('[data-role="chart"]');
  let running = false;
  let hasRun = false; // a run exists in the worker that Continue can take on
  let plot = null;
  let losses = []; // batch loss by step, whatever part of the run it came from
  let data = null;
  let resumedAt = null;

  function reset(steps) {
    const x = Array.from({ length: steps }, (_, i) => i);
    data = [x, new Array(steps).fill(null), new Array(steps).fill(null)];
    losses = new Array(steps).fill(null);
    if (plot) plot.destroy();
    plot = lineChart(chartEl, [{ label: "before", stroke: C.before }, { label: "after the resume", stroke: C.after }], data, { ylabel: "loss" });
    fillLegend($('[data-role="legend"]'), [["batch loss, before the checkpoint", C.before], ["batch loss, after the resume", C.after]]);
  }
  function add(records, part) {
    for (const r of records) {
      if (r.step >= losses.length) continue;
      losses[r.step] = r.loss;
      data[part][r.step] = r.loss;
      if (part === 2 && r.step > 0 && data[2][r.step - 1] == null) data[2][r.step - 1] = data[1][r.step - 1]; // join the lines
    }
    const last = records[records.length - 1];
    if (last) {
      readouts.step.textContent = String(last.step + 1);
      readouts.loss.textContent = num(last.loss);
    }
    plot.setData(data);
  }
  const buttons = (busy) => {
    runButton.disabled = busy;
    stopButton.disabled = !busy;
    saveButton.disabled = busy || !hasRun;
    continueButton.disabled = busy || !hasRun;
    fileInput.disabled = busy;
  };

  async function go(args, part) {
    running = true;
    buttons(true);
    delete root.dataset.result;
    setStatus("running", "Starting…");
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        if (!ev.info.continued) { reset(ev.info.steps); resumedAt = null; readouts.resumed.textContent = "–"; }
        if (ev.info.dropped_at != null) readouts.resumed.textContent = `${ev.info.dropped_at} (optimiser state dropped)`;
        hasRun = true;
      } else if (ev.kind === "chunk") {
        add(ev.chunk.records, part);
        message.textContent = `Training… step ${ev.chunk.step} of ${ev.chunk.steps}.`;
      }
    };
    try {
      const value = await client.call("run:job_ckpt", args, { onEvent });
      const r = value.result;
      if (value.stopped || r.step < r.steps) {
        setStatus("stopped", `Stopped at step ${r.step} of ${r.steps}. Download its checkpoint, or press Continue.`);
      } else {
        hasRun = false;
        root.dataset.result = JSON.stringify({ losses, resumed_at: resumedAt, steps: r.steps, diverged: r.diverged,
          initial: r.initial });
        setStatus("done", r.diverged ? `Diverged at step ${r.step}: the loss stopped being a finite number or passed 2 ln V.`
          : `Done: ${r.steps} steps` + (resumedAt != null ? `, resumed from step ${resumedAt}.` : "."));
      }
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
    } finally {
      running = false;
      buttons(false);
    }
  }

  form.addEventListener("submit", (event) => event.preventDefault());
  if (!(await startPython(client, setStatus, [runButton, saveButton, continueButton]))) return;
  reset(1);
  wireStop(stopButton, client, message, () => running);

  form.addEventListener("submit", async () => {
    if (running) return;
    markInvalid(null);
    for (const el of Object.values(readouts)) el.textContent = "–";
    await go(Object.fromEntries(FIELDS.map((n) => [n, form.elements[n].value])), 1);
  });

  continueButton.addEventListener("click", async () => {
    if (running || !hasRun) return;
    if (resumedAt == null) resumedAt = losses.findIndex((v) => v == null);
    readouts.resumed.textContent = String(resumedAt);
    await go({ continue: true, drop_optimizer: dropBox.checked }, 2);
  });

  saveButton.addEventListener("click", async () => {
    if (running || !hasRun) return;
    try {
      const v = await client.call("job_ckpt_save", {});
      const bytes = b64ToBytes(v.data);
      readouts.bytes.textContent = `${v.bytes.toLocaleString("en")} bytes`;
      root.dataset.saved = String(v.step);
      download(bytes, v.name, "application/octet-stream");
      message.textContent = `Saved step ${v.step} as ${v.name}. Reload the page, load it, and press Continue.`;
    } catch (err) {
      message.textContent = err.message;
    }
  });

  fileInput.addEventListener("change", async () => {
    const file = fileInput.files && fileInput.files[0];
    if (!file || running) return;
    if (file.size > config.max_bytes) { // checked before reading: a huge file is never loaded into the page
      setStatus("error", `The file is ${file.size.toLocaleString("en")} bytes; a checkpoint is at most ${config.max_bytes.toLocaleString("en")}. It was not read.` + (hasRun ? " The current run is kept." : ""));
      fileInput.value = "";
      return;
    }
    try {
      setStatus("loading", "Checking the file…");
      const bytes = new Uint8Array(await file.arrayBuffer());
      const v = await client.call("job_ckpt_load", { data: bytesToB64(bytes), size: file.size });
      reset(v.steps);
      add(v.log, 1);
      resumedAt = v.step;
      hasRun = true;
      readouts.step.textContent = String(v.step);
      readouts.resumed.textContent = String(v.step);
      readouts.opt_t.textContent = String(v.opt_t);
      readouts.bytes.textContent = `${v.bytes.toLocaleString("en")} bytes`;
      form.elements.steps.value = v.settings.steps;
      form.elements.lr.value = v.settings.lr;
      form.elements.seed.value = v.settings.seed;
      root.dataset.loaded = String(v.step);
      setStatus("ready", `Loaded a checkpoint at step ${v.step} of ${v.steps} (seed ${v.settings.seed}). Press Continue.`);
    } catch (err) {
      setStatus("error", (err.kind === "input" && err.errors ? Object.values(err.errors).join("\n") : err.message)
        + (hasRun ? " The current run is kept." : ""));
    } finally {
      fileInput.value = "";
      buttons(false);
    }
  });

  buttons(false);
  setStatus("ready", "Ready. Press Start, or load a checkpoint file.");
}
