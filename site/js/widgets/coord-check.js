// The µP coordinate check: a thin view over the chunked run:init_coord (pylib.web.init_ops ->
// pylib.studies.init_study.coord_check), one width per chunk, drawn over the measured curves.

import { bindFields, readConfig, runStreamed } from "../widget-kit.js";
import { fmtCell, onResize } from "../plot.js";
import { drawChart } from "./init-plot.js";

// this page's runs in series 1 (SP) and 2 (µP); the measured means dashed, in 6 and 4 (their light kin)
const COLORS = { sp: 1, mup: 2 };
const MEASURED = { sp: 6, mup: 4 };
const NAMES = { sp: "SP", mup: "µP" };

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const config = readConfig(root);
  const fields = bindFields(root);
  const divergedNote = $('[data-role="diverged"]');
  const chart = $('[data-role="chart"]');
  let items = [];

  function draw() {
    const key = fields.input("quantity").value;
    const t = Number(fields.input("step").value);
    const what = fields.input("quantity").selectedOptions[0].textContent;
    const series = [];
    const ends = [];
    for (const p of ["sp", "mup"]) {
      const m = config[p];
      if (m) {
        const ys = m[key].map((row) => row[t]);
        series.push({ xs: m.widths, ys, color: MEASURED[p], dash: "5 4", width: 1.5, hollow: true, name: `measured-${p}`, label: `${NAMES[p]}, measured mean` });
        ends.push(`${NAMES[p]} measured: ${fmtCell(ys[0])} at width ${m.widths[0]}, ${fmtCell(ys[ys.length - 1])} at width ${m.widths[m.widths.length - 1]}`);
      }
      const live = items.filter((it) => it.param === p);
      series.push({ xs: live.map((it) => it.width), ys: live.map((it) => it[key][t]), color: COLORS[p], name: p, label: `${NAMES[p]}, this page` });
      if (live.length) ends.push(`${NAMES[p]} in this page: ${live.map((it) => `${fmtCell(it[key][t])} at width ${it.width}`).join(", ")}`);
    }
    const widths = (config.sp && config.sp.widths) || [...new Set(items.map((it) => it.width))];
    drawChart(chart, series, {
      xlog: true, ylog: true, xlabel: "width (n_embd)", ylabel: "RMS of a coordinate",
      xticks: widths.map((w) => ({ value: w, text: String(w) })), empty: "Press Start to run the check.",
      summary: `RMS of a coordinate of the ${what} after step ${t}. ${ends.join("; ") || "No data yet"}.`,
    });
    const diverged = items.filter((it) => it.diverged_at != null);
    divergedNote.hidden = !diverged.length;
    divergedNote.textContent = diverged.map((it) => `${NAMES[it.param]}, width ${it.width}: diverged at step ${it.diverged_at}`).join("; ") +
      (diverged.length ? ". Sizes after that step are not drawn." : "");
  }
  for (const name of ["quantity", "step"]) fields.input(name).addEventListener("change", draw);

  const run = runStreamed(root, client, {
    op: "run:init_coord",
    fields,
    args: () => ({ lr: fields.values().lr, seed: fields.values().seed }),
    announceStart: "Coordinate check started.",
    onClear() {
      items = [];
      draw();
    },
    onEvent(ev) {
      if (ev.kind !== "chunk") return null;
      items.push(ev.chunk.item);
      draw();
      return `Running… ${ev.chunk.n_done} of ${ev.chunk.jobs} (${NAMES[ev.chunk.item.param]}, width ${ev.chunk.item.width} done).`;
    },
    onResult(value) {
      const r = value.result;
      items = r.items;
      draw();
      if (value.stopped) return { status: "stopped", text: `Stopped after ${r.items.length} runs; the chart shows those. Press Start to run the check again.` };
      const diverged = r.items.filter((it) => it.diverged_at != null).length;
      return {
        status: "done",
        result: { lr: r.lr, seed: r.seed, items: r.items },
        text: `Done: ${r.items.length} runs at learning rate ${r.lr}` + (diverged ? `; ${diverged} diverged (see below).` : "."),
      };
    },
  });
  if (config.sp || config.mup) draw(); // the measured check needs no Python
  onResize(chart, draw);
  await run.ready(null, "Ready. Press Start: each width trains a few steps in this page.");
}
