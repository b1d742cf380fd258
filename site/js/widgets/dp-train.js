// Side-by-side data-parallel runs: a thin view over the chunked run:parallel_dp
// (pylib.web.parallel_ops -> pylib.systems.data_parallel -> pylib.train).

import { fmtCell, onResize } from "../plot.js";
import { bindFields, readoutMap, runStreamed } from "../widget-kit.js";
import { setLegend } from "./chart-extras.js";
import { chart } from "./parallel-svg.js";

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const readouts = readoutMap(root);
  const svg = $('[data-role="chart"]'), table = $('[data-role="table"]');
  let runs = null, order = [];
  let t0 = 0;

  const redraw = () => {
    if (!runs) return;
    const lasts = order.map((w) => [w, runs[w].losses[runs[w].losses.length - 1]]).filter(([, l]) => l != null);
    chart(svg, order.map((w, i) => ({ xs: runs[w].steps, ys: runs[w].losses, color: i + 1, cls: `lw${i}`, label: `W=${w}` })), {
      xLabel: "step", yLabel: "train loss (nats)", xName: "step",
      summary: lasts.length ? `Training loss at step ${runs[order[0]].steps[runs[order[0]].steps.length - 1]}: ` +
        lasts.map(([w, l]) => `${w} worker${w > 1 ? "s" : ""} ${fmtCell(l)}`).join(", ") + "." : "",
    });
  };
  const cell = (tag, text) => Object.assign(document.createElement(tag), { textContent: text });
  const drawTable = () => {
    table.replaceChildren();
    const head = document.createElement("tr");
    for (const t of ["workers", "last loss", "all-reduce bytes each worker sends per step"]) head.append(Object.assign(cell("th", t), { scope: "col" }));
    table.append(head);
    for (const w of order) {
      const r = runs[w], tr = document.createElement("tr");
      const last = r.losses[r.losses.length - 1];
      for (const t of [String(w), last == null ? "–" : last.toFixed(6), r.bytes.toLocaleString("en") + " B"]) tr.append(cell("td", t));
      table.append(tr);
    }
  };

  const fields = bindFields(root);
  const run = runStreamed(root, client, {
    op: "run:parallel_dp",
    fields,
    args: () => fields.values(),
    announceStart: "Training started.",
    onStart() {
      t0 = performance.now();
    },
    onClear() {
      for (const el of Object.values(readouts)) el.textContent = "–";
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        order = ev.info.workers;
        runs = Object.fromEntries(order.map((w) => [w, { steps: [], losses: [], bytes: 0 }]));
        setLegend(svg, order.map((w, i) => [`line s${i + 1}`, `${w} worker${w > 1 ? "s" : ""}`]));
        return null;
      }
      if (ev.kind !== "chunk") return null;
      for (const rec of ev.chunk.records) {
        const r = runs[rec.workers];
        r.steps.push(rec.step);
        r.losses.push(rec.loss);
        r.bytes = rec.bytes;
      }
      readouts.step.textContent = `${ev.chunk.step} of ${ev.chunk.steps}`;
      redraw();
      drawTable();
      return `Training… step ${ev.chunk.step} of ${ev.chunk.steps} (every run).`;
    },
    onResult(value) {
      const r = value.result;
      const diffs = Object.entries(r.max_diff_from_first).filter(([w]) => Number(w) !== r.first).map(([, d]) => d).filter((d) => d != null);
      const worst = diffs.length ? Math.max(...diffs) : 0;
      readouts.diff.textContent = diffs.length ? worst.toExponential(2) : "–";
      root.dataset.seconds = String((performance.now() - t0) / 1000);
      if (value.stopped) return { status: "stopped", text: `Stopped at step ${r.steps}. Press Start to train again from step 0.` };
      return {
        status: "done",
        result: { losses: r.losses, max_diff_from_first: r.max_diff_from_first, steps: r.steps },
        text: `Done: ${r.steps} steps. The curves lie on top of each other: the largest difference between any run's loss and the ${r.first}-worker run's is ${worst.toExponential(2)} nats, float32 rounding from adding the same numbers in another order.`,
      };
    },
  });
  onResize(svg, redraw); // drawn at its shown width: its text stays 12 px
  await run.ready(null, "Ready. Press Start to train in this page.");
}
