// The replay diagnosis: a thin view over run:job_replay (pylib.web.job_ops -> pylib.studies.resume).

import { showRunError, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";
import { fillLegend, lineChart, num } from "./job-kit.js";

const C = { original: "#2a5db0", same: "#d9480f", other: "#1b7a43", bad: "#868e96" };

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const replayButtons = [...root.querySelectorAll('[data-action="replay"]')];
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const seedField = form.elements.seed;
  const chartEl = $('[data-role="chart"]');
  let running = false;
  let plot = null;
  let data = null;
  let info = null; // the original run's steps: ckpt_step, end, bad_steps
  const spikes = {};
  const curves = {};

  function reset(start) {
    const n = start.end - start.ckpt_step;
    const x = Array.from({ length: n }, (_, i) => start.ckpt_step + i);
    data = [x, ...["original", "same", "other"].map(() => new Array(n).fill(null)), new Array(n).fill(null)];
    if (plot) plot.destroy();
    plot = lineChart(chartEl, [
      { label: "original", stroke: C.original, width: 2.5 },
      { label: "same batches", stroke: C.same, dash: [6, 4] },
      { label: "other batches", stroke: C.other },
      { label: "bad batch", stroke: C.bad, dots: 7 },
    ], data, { ylabel: "loss" });
    fillLegend($('[data-role="legend"]'), [["original run", C.original], ["replay, same batches", C.same, true],
      ["replay, other batches", C.other], ["a bad batch's step", C.bad]]);
  }
  const series = { original: 1, same: 2, other: 3 };

  function add(mode, records) {
    for (const r of records) {
      const i = r.step - info.ckpt_step;
      if (i < 0 || i >= data[0].length) continue;
      curves[mode][r.step] = r.loss;
      if (r.bad) {
        data[4][i] = null;
        let near = null;
        for (let j = i - 1; j >= 0 && near == null; j--) near = data[series[mode]][j];
        data[4][i] = near;
      } else {
        data[series[mode]][i] = r.loss;
      }
    }
    plot.setData(data);
  }

  const idle = () => {
    runButton.disabled = false;
    stopButton.disabled = true;
    for (const b of replayButtons) b.disabled = !spikes.hasCheckpoint;
  };

  async function go(mode) {
    if (running) return;
    running = true;
    runButton.disabled = true;
    for (const b of replayButtons) b.disabled = true;
    stopButton.disabled = false;
    delete root.dataset.result;
    seedField.removeAttribute("aria-invalid");
    setStatus("running", "Starting…");
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        if (mode === "original") {
          info = ev.info;
          reset(ev.info);
          for (const k of Object.keys(series)) { delete spikes[k]; readouts[k].textContent = "–"; }
        } else {
          data[series[mode]].fill(null);
        }
        curves[mode] = {};
      } else if (ev.kind === "chunk") {
        add(mode, ev.chunk.records);
        message.textContent = `${mode === "original" ? "Running" : "Replaying"}… step ${ev.chunk.step} of ${ev.chunk.end}.`;
      }
    };
    try {
      const value = await client.call("run:job_replay", { mode, seed: seedField.value }, { onEvent });
      const r = value.result;
      spikes.hasCheckpoint = r.has_checkpoint;
      if (!r.complete) {
        setStatus("stopped", mode === "original" ? "Stopped before the end: run it again to get a checkpoint to replay from."
          : "Stopped. Press a replay button to run it again.");
      } else {
        spikes[mode] = r.spike;
        readouts[mode].textContent = `${num(r.spike)} nats`;
        root.dataset.result = JSON.stringify({ spikes: { original: spikes.original ?? null, same: spikes.same ?? null, other: spikes.other ?? null },
          curves, ckpt_step: info.ckpt_step });
        const verdict = mode === "same" ? "The spike came back at the same step: the batches carry it."
          : mode === "other" ? "Other batches from the same checkpoint: no spike of that size. It belonged to the data."
          : `Saved a checkpoint at step ${info.ckpt_step}. Now replay from it.`;
        setStatus("done", `Spike ${num(r.spike)} nats. ${verdict}`);
      }
    } catch (err) {
      if (err.kind === "input" && err.errors && err.errors.seed) seedField.setAttribute("aria-invalid", "true");
      showRunError(err, setStatus, () => {});
    } finally {
      running = false;
      idle();
    }
  }

  form.addEventListener("submit", (event) => event.preventDefault());
  if (!(await startPython(client, setStatus, [runButton, ...replayButtons]))) return;
  wireStop(stopButton, client, message, () => running);
  form.addEventListener("submit", () => go("original"));
  for (const b of replayButtons) b.addEventListener("click", () => go(b.dataset.mode));
  idle();
  setStatus("ready", "Ready. Run the original first; it saves the checkpoint the replays start from.");
}
