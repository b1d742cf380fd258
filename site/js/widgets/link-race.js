// Bytes against bandwidth: a thin view over slow_link_race (pylib.web.slow_links_ops ->
// pylib.systems.slow_links.sync_cost, pylib.studies.target.time_to_target). Every edit or slider move
// asks Python again (the newest answer wins); a bad field gets its message under it, and the last good
// table and chart stay.

import { bindFields, calculator, readConfig } from "../widget-kit.js";
import { lineChart } from "./job-kit.js";

const NAMES = { dense: "dense", topk: "top-k + EF", quant: "quantised + EF", demo: "DeMo", diloco: "DiLoCo",
  quant_ar: "quantised + EF, all-reduced" };
const ORDER = ["dense", "topk", "quant", "demo", "diloco", "quant_ar"]; // series colours 1–6, as the legend
const COLLECTIVE = { all_reduce: "ring all-reduce", all_gather: "all-gather", quantised_all_reduce: "quantised ring all-reduce" };

function seconds(s) {
  if (s == null) return "not reached";
  if (s < 1e-3) return `${(s * 1e6).toPrecision(3)} µs`;
  if (s < 1) return `${(s * 1e3).toPrecision(3)} ms`;
  if (s < 3600) return `${s.toPrecision(3)} s`;
  return `${(s / 3600).toPrecision(3)} h`;
}
const mbit = (x) => Number(x).toLocaleString("en", { maximumSignificantDigits: 6 });

/** The method with the shortest time at sweep point i, or null. */
function fastest(sweep, i) {
  let best = null;
  for (const m of ORDER) {
    const t = sweep.time[m] && sweep.time[m][i];
    if (t != null && (best == null || t < sweep.time[best][i])) best = m;
  }
  return best;
}

export async function mount(root, client) {
  const config = readConfig(root);
  const tbody = root.querySelector('[data-role="table"] tbody');
  let chosen = null;
  const chart = lineChart(root.querySelector('[data-role="chart"]'),
    ORDER.map((m, i) => ({ label: `${NAMES[m]}: time to target (s)`, color: i + 1, width: 2 })),
    { xlog: true, log: true, xlabel: "bandwidth (Mb/s)", ylabel: "time to target (s)", height: 280,
      marks: () => [{ value: chosen, color: "fg", dash: [4, 4] }] });

  function table(v) {
    tbody.replaceChildren();
    for (const m of ORDER) {
      const r = v.rows[m];
      if (!r) continue;
      const tr = document.createElement("tr");
      if (m === v.winner) tr.className = "sl-winner";
      tr.dataset.method = m;
      const cells = [NAMES[m] + (m === v.winner ? " (first)" : ""), COLLECTIVE[r.kind] || r.kind,
        Math.round(r.payload_bytes).toLocaleString("en"), Math.round(r.wire_bytes).toLocaleString("en"), seconds(r.seconds), seconds(r.time_to_target)];
      cells.forEach((text, i) => {
        const td = document.createElement(i === 0 ? "th" : "td");
        if (i === 0) td.scope = "row";
        td.textContent = text;
        tr.append(td);
      });
      tbody.append(tr);
    }
  }

  function draw(v) {
    const s = v.sweep;
    chosen = v.settings.bandwidth;
    chart.setData([s.mbit, ...ORDER.map((m) => s.time[m] || s.mbit.map(() => null))]);
    const n = s.mbit.length - 1, slow = fastest(s, 0), fast = fastest(s, n);
    const at = (m, i) => `${NAMES[m]} (${seconds(s.time[m][i])})`;
    chart.describe(`At ${v.settings.latency} ms a message, ${v.settings.step_ms} ms of compute a step and ${v.settings.workers} workers, ` +
      `the first to the target at ${mbit(s.mbit[0])} Mb/s is ${slow ? at(slow, 0) : "none"} and at ${mbit(s.mbit[n])} Mb/s ` +
      `${fast ? at(fast, n) : "none"}. At the chosen ${mbit(chosen)} Mb/s: ${v.winner ? NAMES[v.winner] : "none"}.`);
  }

  const fields = bindFields(root, { onSlide: () => calc.schedule() });
  const calc = calculator(root, client, {
    op: "slow_link_race",
    fields,
    args: () => ({ ...fields.values(), measured: config.measured, vocab_size: config.vocab_size }),
    onResult(v) {
      table(v);
      draw(v);
      const w = v.winner ? `${NAMES[v.winner]} reaches the target first, after ${seconds(v.rows[v.winner].time_to_target)}` : "no method reached the target";
      return {
        result: { settings: v.settings, winner: v.winner, rows: v.rows },
        text: `At ${mbit(v.settings.bandwidth)} Mb/s, ${v.settings.latency} ms a message, ${v.settings.workers} workers: ${w}.`,
      };
    },
  });
  // typing recomputes too, once the keys pause
  fields.form.addEventListener("input", (event) => {
    if (!event.target.dataset.sliderFor) calc.soon(120);
  });

  if (!(await calc.ready())) return;
  await calc.run();
}
