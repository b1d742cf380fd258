// Save, reload, resume: a thin view over run:job_ckpt, job_ckpt_save and job_ckpt_load
// (pylib.web.job_ops, which calls pylib.checkpoint and pylib.train). It only draws what the worker sends.
// Start and Continue are one streamed run (widget-kit.js runStreamed): Continue starts it in "continue" mode.

import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";
import { b64ToBytes, bytesToB64, download, lineChart, num } from "./job-kit.js";

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const runButton = $('[data-action="run"]');
  const stopButton = $('[data-action="stop"]');
  const saveButton = $('[data-action="save"]');
  const continueButton = $('[data-action="continue"]');
  const fileInput = $('[data-role="file"]');
  const dropBox = $('[data-role="drop"]');
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const chartEl = $('[data-role="chart"]');
  const fields = bindFields(root);
  let hasRun = false; // a run exists in the worker that Continue can take on
  let plot = null;
  let losses = []; // batch loss by step, whatever part of the run it came from
  let data = null;
  let resumedAt = null;
  let mode = "start"; // what the next run does: "start" from step 0, or "continue" the run in the worker

  function reset(steps) {
    const x = Array.from({ length: steps }, (_, i) => i);
    data = [x, new Array(steps).fill(null), new Array(steps).fill(null)];
    losses = new Array(steps).fill(null);
    if (plot) plot.destroy();
    plot = lineChart(chartEl, [{ label: "batch loss, before (nats/token)", color: 1 }, { label: "after the resume", color: 2 }], { ylabel: "loss" });
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
    const done = losses.filter((v) => v != null);
    plot.describe(done.length ? `${done.length} of ${losses.length} steps: the batch loss went from ${num(done[0])} to ${num(done[done.length - 1])}` +
      (resumedAt != null ? `, resumed at step ${resumedAt}.` : ".") : "No steps yet.");
  }
  // Save, Continue and the file: not while a run goes on; Save and Continue only with a run to act on
  const idle = (busy) => {
    saveButton.disabled = busy || !hasRun;
    continueButton.disabled = busy || !hasRun;
    fileInput.disabled = busy;
  };

  const run = runStreamed(root, client, {
    op: "run:job_ckpt",
    fields,
    args: () => (mode === "continue" ? { continue: true, drop_optimizer: dropBox.checked } : fields.values()),
    announceStart: "Training started.",
    onStart() {
      if (document.activeElement === continueButton) stopButton.focus(); // Continue is about to be disabled
      idle(true);
      if (mode === "start") for (const el of Object.values(readouts)) el.textContent = "–";
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        if (!ev.info.continued) { reset(ev.info.steps); resumedAt = null; readouts.resumed.textContent = "–"; }
        if (ev.info.dropped_at != null) readouts.resumed.textContent = `${ev.info.dropped_at} (optimiser state dropped)`;
        hasRun = true;
        return null;
      }
      if (ev.kind !== "chunk") return null;
      add(ev.chunk.records, mode === "continue" ? 2 : 1);
      return `Training… step ${ev.chunk.step} of ${ev.chunk.steps}.`;
    },
    onResult(value) {
      const r = value.result;
      let out;
      if (value.stopped || r.step < r.steps) {
        out = { status: "stopped", text: `Stopped at step ${r.step} of ${r.steps}. Download its checkpoint, or press Continue.` };
      } else {
        hasRun = false;
        out = {
          status: "done",
          result: { losses, resumed_at: resumedAt, steps: r.steps, diverged: r.diverged, initial: r.initial },
          text: r.diverged ? `Diverged at step ${r.step}: the loss stopped being a finite number or passed 2 ln V.`
            : `Done: ${r.steps} steps` + (resumedAt != null ? `, resumed from step ${resumedAt}.` : "."),
        };
      }
      idle(false);
      return out;
    },
    onError() { idle(false); },
  });


  continueButton.addEventListener("click", async () => {
    if (run.running || !hasRun) return;
    if (resumedAt == null) resumedAt = losses.findIndex((v) => v == null);
    readouts.resumed.textContent = String(resumedAt);
    mode = "continue"; // until this run ends; Start (the form's submit) always starts from step 0
    try { await run.start(); } finally { mode = "start"; }
    if (document.activeElement === runButton && !continueButton.disabled) continueButton.focus(); // back where the reader was
  });

  saveButton.addEventListener("click", async () => {
    if (run.running || !hasRun) return;
    try {
      const v = await client.call("job_ckpt_save", {});
      const bytes = b64ToBytes(v.data);
      readouts.bytes.textContent = `${v.bytes.toLocaleString("en")} bytes`;
      root.dataset.saved = String(v.step);
      download(bytes, v.name, "application/octet-stream");
      run.setStatus(root.dataset.status, `Saved step ${v.step} as ${v.name}. Reload the page, load it, and press Continue.`, "now");
    } catch (err) {
      run.setStatus(root.dataset.status, err.message, "now");
    }
  });

  fileInput.addEventListener("change", async () => {
    const file = fileInput.files && fileInput.files[0];
    if (!file || run.running) return;
    const kept = () => (hasRun ? " The current run is kept." : "");
    if (file.size > config.max_bytes) { // checked before reading: a huge file is never loaded into the page
      run.setStatus("error", `The file is ${file.size.toLocaleString("en")} bytes; a checkpoint is at most ${config.max_bytes.toLocaleString("en")}. It was not read.` + kept());
      fileInput.value = "";
      return;
    }
    idle(true);
    try {
      run.setStatus("loading", "Checking the file…", false);
      const bytes = new Uint8Array(await file.arrayBuffer());
      const v = await client.call("job_ckpt_load", { data: bytesToB64(bytes), size: file.size });
      reset(v.steps);
      resumedAt = v.step;
      add(v.log, 1);
      hasRun = true;
      readouts.step.textContent = String(v.step);
      readouts.resumed.textContent = String(v.step);
      readouts.opt_t.textContent = String(v.opt_t);
      readouts.bytes.textContent = `${v.bytes.toLocaleString("en")} bytes`;
      fields.set("steps", v.settings.steps);
      fields.set("lr", v.settings.lr);
      fields.set("seed", v.settings.seed);
      fields.clearErrors();
      root.dataset.loaded = String(v.step);
      run.setStatus("ready", `Loaded a checkpoint at step ${v.step} of ${v.steps} (seed ${v.settings.seed}). Press Continue.`, "now");
    } catch (err) {
      run.setStatus("error", (err.kind === "input" && err.errors ? Object.values(err.errors).join("\n") : err.message) + kept());
    } finally {
      fileInput.value = "";
      idle(false);
    }
  });

  if (!(await run.ready(null, "Ready. Press Start, or load a checkpoint file."))) return;
  idle(false);
}
