// Bytes against bandwidth: a thin view over slow_link_race (pylib.web.slow_links_ops ->
// pylib.systems.slow_links.sync_cost, pylib.studies.target.time_to_target). Every edit asks Python again;
// a bad field is marked and explained, and the last good table stays.

import { invalidMarker, showRunError, readConfig, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const FIELDS = ["bandwidth", "latency", "step_ms", "workers"];
const NAMES = { dense: "dense", topk: "top-k + EF", quant: "quantised + EF", demo: "DeMo", diloco: "DiLoCo" };
const COLORS = { dense: "#2a5db0", topk: "#d9480f", quant: "#1b7a43", demo: "#7b3fa0", diloco: "#8a6d00" };

function seconds(s) {
  if (s == null) return "not reached";
  if (s < 1e-3) return `${(s * 1e6).toPrecision(3)} µs`;
  if (s < 1) return `${(s * 1e3).toPrecision(3)} ms`;
  if (s < 3600) return `${s.toPrecision(3)} s`;
  return `${(s / 3600).toPrecision(3)} h`;
}

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const config = readConfig(root);
  const chartEl = $('[data-role="chart"]');
  const tbody = $('[data-role="table"] tbody');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  let plot = null;
  let seq = 0;
  const size = () => { const width = Math.max(280, chartEl.clientWidth || 600); return { width, height: width < 500 ? 220 : 280 }; };

  function draw(v) {
    const names = Object.keys(v.sweep.time);
    const data = [v.sweep.mbit, ...names.map((m) => v.sweep.time[m])];
    const chosen = v.settings.bandwidth;
    if (plot) plot.destroy();
    plot = new uPlot({
      ...size(),
      scales: { x: { time: false, distr: 3 }, y: { distr: 3 } },
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false } },
      axes: [{ label: "bandwidth (Mb/s)", stroke: "#444", grid: { stroke: "#eee" } },
        { label: "time to target (s)", stroke: "#444", grid: { stroke: "#eee" }, size: 64 }],
      series: [{ label: "Mb/s" }, ...names.map((m) => ({ label: NAMES[m], stroke: COLORS[m], width: 2, points: { show: false },
        value: (u, x) => (x == null ? "–" : x.toPrecision(3)) }))],
      hooks: { draw: [(u) => {
        const ctx = u.ctx;
        const x = u.valToPos(chosen, "x", true);
        if (!Number.isFinite(x)) return;
        ctx.save();
        ctx.strokeStyle = "#444";
        ctx.setLineDash([4, 4]);
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
        ctx.restore();
      }] },
    }, data, chartEl);
  }
  if (typeof ResizeObserver !== "undefined") new ResizeObserver(() => plot && plot.setSize(size())).observe(chartEl);

  function table(v) {
    tbody.replaceChildren();
    for (const m of v.names ? Object.keys(v.names) : Object.keys(v.rows)) {
      const r = v.rows[m];
      const tr = document.createElement("tr");
      if (m === v.winner) tr.className = "sl-winner";
      tr.dataset.method = m;
      const cells = [NAMES[m] + (m === v.winner ? " (first)" : ""), r.kind === "all_reduce" ? "ring all-reduce" : "all-gather",
        Math.round(r.payload_bytes).toLocaleString("en"), Math.round(r.wire_bytes).toLocaleString("en"), seconds(r.seconds), seconds(r.time_to_target)];
      for (const text of cells) { const td = document.createElement("td"); td.textContent = text; tr.append(td); }
      tbody.append(tr);
    }
  }

  if (!(await startPython(client, setStatus, [runButton]))) return;

  async function update() {
    const mine = ++seq;
    const args = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value]));
    try {
      const v = await client.call("slow_link_race", { ...args, measured: config.measured, vocab_size: config.vocab_size });
      if (mine !== seq) return;
      markInvalid(null);
      table(v);
      draw(v);
      root.dataset.result = JSON.stringify({ settings: v.settings, winner: v.winner, rows: v.rows });
      const w = v.winner ? `${NAMES[v.winner]} reaches the target first, after ${seconds(v.rows[v.winner].time_to_target)}` : "no method reached the target";
      setStatus("done", `At ${Number(v.settings.bandwidth).toLocaleString("en", { maximumSignificantDigits: 6 })} Mb/s, ${v.settings.latency} ms a message, ${v.settings.workers} workers: ${w}.`);
    } catch (err) {
      if (mine !== seq) return;
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    }
  }

  let timer = null;
  const schedule = () => { clearTimeout(timer); timer = setTimeout(update, 120); };
  form.elements.bandwidth_log.addEventListener("input", () => {
    form.elements.bandwidth.value = String(+Math.pow(10, +form.elements.bandwidth_log.value).toPrecision(3));
  });
  form.addEventListener("input", schedule);
  form.addEventListener("submit", (event) => { event.preventDefault(); clearTimeout(timer); update(); });
  runButton.disabled = false;
  await update();
}
