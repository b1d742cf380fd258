// The replay diagnosis: a thin view over run:job_replay (pylib.web.job_ops -> pylib.studies.resume).
// The original run and the two replays are one streamed run (widget-kit.js runStreamed) in three modes.

import { bindFields, readoutMap, runStreamed } from "../widget-kit.js";
import { lineChart, num } from "./job-kit.js";

const SERIES = { original: 1, same: 2, other: 3 }; // data columns; colours as the legend: s1, dashed s2, s3
const NAMES = { original: "the original run", same: "the replay on the same batches", other: "the replay on other batches" };

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const runButton = $('[data-action="run"]');
  const stopButton = $('[data-action="stop"]');
  const replayButtons = [...root.querySelectorAll('[data-action="replay"]')];
  const readouts = readoutMap(root);
  const chartEl = $('[data-role="chart"]');
  const fields = bindFields(root);
  let plot = null;
  let data = null;
  let info = null; // the original run's steps: ckpt_step, end, bad_steps
  let mode = "original";
  let hasCheckpoint = false;
  const spikes = {};
  const curves = {};

  function reset(start) {
    const n = start.end - start.ckpt_step;
    const x = Array.from({ length: n }, (_, i) => start.ckpt_step + i);
    data = [x, ...["original", "same", "other"].map(() => new Array(n).fill(null)), new Array(n).fill(null)];
    if (plot) plot.destroy();
    plot = lineChart(chartEl, [
      { label: "original (nats/token)", color: 1, width: 2.5 },
      { label: "same batches", color: 2, dash: [6, 4] },
      { label: "other batches", color: 3 },
      { label: "bad batch", color: 8, dots: 7 },
    ], { ylabel: "loss" });
  }

  function add(records) {
    for (const r of records) {
      const i = r.step - info.ckpt_step;
      if (i < 0 || i >= data[0].length) continue;
      curves[mode][r.step] = r.loss;
      if (r.bad) {
        let near = null;
        for (let j = i - 1; j >= 0 && near == null; j--) near = data[SERIES[mode]][j];
        data[4][i] = near;
      } else {
        data[SERIES[mode]][i] = r.loss;
      }
    }
    plot.setData(data);
    const told = Object.keys(SERIES).filter((k) => spikes[k] != null).map((k) => `${NAMES[k]} ${num(spikes[k])} nats`);
    plot.describe(`Batch loss from the checkpoint at step ${info.ckpt_step} to step ${info.end}; the bad batches are at steps ` +
      `${info.bad_steps[0]}–${info.bad_steps[info.bad_steps.length - 1]}.` + (told.length ? ` Spikes: ${told.join(", ")}.` : ""));
  }
  const idle = (busy) => { for (const b of replayButtons) b.disabled = busy || !hasCheckpoint; };

  const run = runStreamed(root, client, {
    op: "run:job_replay",
    fields,
    args: () => ({ mode, seed: fields.values().seed }),
    announceStart: "Run started.",
    onStart() {
      if (replayButtons.includes(document.activeElement)) stopButton.focus(); // the pressed button is about to be disabled
      idle(true);
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        if (mode === "original") {
          info = ev.info;
          reset(ev.info);
          for (const k of Object.keys(SERIES)) { delete spikes[k]; readouts[k].textContent = "–"; }
        } else {
          data[SERIES[mode]].fill(null);
        }
        curves[mode] = {};
        return null;
      }
      if (ev.kind !== "chunk") return null;
      add(ev.chunk.records);
      return `${mode === "original" ? "Running" : "Replaying"}… step ${ev.chunk.step} of ${ev.chunk.end}.`;
    },
    onResult(value) {
      const r = value.result;
      hasCheckpoint = r.has_checkpoint;
      idle(false);
      if (!r.complete) {
        return { status: "stopped", text: mode === "original" ? "Stopped before the end: run it again to get a checkpoint to replay from."
          : "Stopped. Press a replay button to run it again." };
      }
      spikes[mode] = r.spike;
      readouts[mode].textContent = `${num(r.spike)} nats`;
      add([]);
      const verdict = mode === "same" ? "The spike came back at the same step: the batches carry it."
        : mode === "other" ? "Other batches from the same checkpoint: no spike of that size. It belonged to the data."
          : `Saved a checkpoint at step ${info.ckpt_step}. Now replay from it.`;
      return {
        status: "done",
        result: { spikes: { original: spikes.original ?? null, same: spikes.same ?? null, other: spikes.other ?? null }, curves, ckpt_step: info.ckpt_step },
        text: `Spike ${num(r.spike)} nats. ${verdict}`,
      };
    },
    onError() { idle(false); },
  });

  for (const b of replayButtons) {
    b.addEventListener("click", async () => {
      if (run.running) return;
      mode = b.dataset.mode; // until this run ends; the form's submit always runs the original
      try { await run.start(); } finally { mode = "original"; }
      if (document.activeElement === runButton && !b.disabled) b.focus(); // back on the button the reader pressed
    });
  }
  if (!(await run.ready(null, "Ready. Run the original first; it saves the checkpoint the replays start from."))) return;
  idle(false);
}
