// Batch x 4 against accumulation 4, step by step: a thin view over the chunked run:objective_accum
// (pylib.web.objective_ops, which calls pylib.train for both runs), on the kit's runStreamed, drawn by
// plot.js's Plot. It only draws.

import { Plot, frameOf } from "../plot.js";
import { tableFocusable } from "./data-svg.js";
import { bindFields, runStreamed } from "../widget-kit.js";

const f4 = (v) => (v == null ? "–" : v.toFixed(4));

export async function mount(root, client) {
  const readout = (key, text) => { root.querySelector(`[data-readout="${key}"]`).textContent = text; };
  const fields = bindFields(root);
  const chartEl = root.querySelector('[data-role="chart"]');
  tableFocusable(frameOf(chartEl));
  const plot = new Plot(chartEl, {
    x: { label: "step" },
    y: { label: "loss (nats/token)" },
    series: [
      { label: "batch × 4", color: 1, width: 3 },
      { label: "accumulation", color: 2, width: 1.5, dash: [5, 4] },
    ],
  });
  let data = [[], [], []];
  let last = -1;

  const describeRun = (maxDiff) => {
    if (last < 0) return;
    plot.describe(`After ${last + 1} steps the batch × 4 run's loss is ${f4(data[1][last])} and the accumulated run's ${f4(data[2][last])}` +
      (maxDiff == null ? "." : `; the largest difference between them so far is ${maxDiff.toExponential(1)} nats.`));
  };

  const run = runStreamed(root, client, {
    op: "run:objective_accum",
    fields,
    args: () => ({ seed: fields.input("seed").value }),
    announceStart: "Both runs started.",
    onClear() {
      for (const key of ["step", "loss_big", "loss_accum", "max_diff"]) readout(key, "–");
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        const n = ev.info.steps;
        data = [Array.from({ length: n }, (_, i) => i), new Array(n).fill(null), new Array(n).fill(null)];
        last = -1;
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      for (const r of c.records) {
        if (r.step >= data[0].length) continue;
        data[1][r.step] = r.loss_big;
        data[2][r.step] = r.loss_accum;
        last = Math.max(last, r.step);
      }
      plot.setData(data);
      describeRun(c.max_diff);
      const rec = c.records[c.records.length - 1];
      if (rec) {
        readout("step", String(rec.step + 1));
        readout("loss_big", f4(rec.loss_big));
        readout("loss_accum", f4(rec.loss_accum));
      }
      readout("max_diff", c.max_diff.toExponential(1));
      return `Training both… step ${c.step} of ${c.steps}.`;
    },
    onResult({ result: r, stopped }) {
      describeRun(r.max_abs_dloss);
      if (stopped) {
        return { status: "stopped", text: `Stopped after ${r.steps} steps; largest |Δ loss| so far ${r.max_abs_dloss.toExponential(1)}. Press Start to run again from step 0.` };
      }
      return {
        status: "done",
        result: { steps: r.steps, max_abs_dloss: r.max_abs_dloss },
        text: `Done: ${r.steps} steps; the largest |Δ loss| between the two runs was ${r.max_abs_dloss.toExponential(1)} nats.`,
      };
    },
  });
  await run.ready();
}
