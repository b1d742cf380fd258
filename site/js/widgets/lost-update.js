// The lost update: a thin view over precision_lost_update (pylib.web.precision_ops, which calls
// pylib.systems.precision.repeated_add). It only draws what the worker sends.

import { invalidMarker, readoutMap, showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const FIELDS = ["start", "increment", "steps", "format", "seed"];
const SERIES = [["exact", "exact", "#868e96", [4, 3]], ["fp32", "fp32 master weight", "#2a5db0", null],
  ["nearest", "stored, nearest", "#e03131", null], ["stochastic_one", "stored, stochastic (one copy)", "#f08c00", null],
  ["stochastic_mean", "stochastic, mean of copies", "#1b7a43", null]];
const num = (v) => (v == null ? "overflow" : Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(4) : v.toPrecision(6));

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);
  const readouts = readoutMap(root);
  const el = $('[data-role="chart"]');
  let plot = null;
  const size = () => ({ width: Math.max(280, el.clientWidth || 600), height: 220 });
  if (typeof ResizeObserver !== "undefined") new ResizeObserver(() => plot && plot.setSize(size())).observe(el);

  const legend = $('[data-role="legend"]');
  const item = $('template[data-role="legend-item"]');
  for (const [, label, color] of SERIES) {
    const li = item.content.firstElementChild.cloneNode(true);
    li.querySelector(".swatch").style.background = color;
    li.querySelector('[data-role="label"]').textContent = label;
    legend.append(li);
  }

  async function run() {
    markInvalid(null);
    runButton.disabled = true;
    setStatus("running", "Adding…");
    try {
      const args = Object.fromEntries(FIELDS.map((n) => [n, form.elements[n].value]));
      const r = await client.call("precision_lost_update", args);
      const arrays = [r.steps, ...SERIES.map(([k]) => r[k])];
      if (plot) plot.destroy();
      plot = new uPlot({
        ...size(), scales: { x: { time: false } }, legend: { show: false }, cursor: { drag: { x: false, y: false } },
        axes: [{ label: "step", stroke: "#444", grid: { stroke: "#eee" } }, { label: "weight", stroke: "#444", grid: { stroke: "#eee" }, size: 70 }],
        series: [{ label: "step" }, ...SERIES.map(([, label, color, dash]) => ({ label, stroke: color, width: 1.5, ...(dash ? { dash } : {}), points: { show: false } }))],
      }, arrays, el);
      for (const k of Object.keys(r.final)) readouts[k].textContent = num(r.final[k]);
      readouts.spacing.textContent = r.spacing_at_start == null ? "–" : num(r.spacing_at_start);
      readouts.lanes.textContent = String(r.lanes);
      root.dataset.result = JSON.stringify({ final: r.final, settings: r.settings, overflow: r.overflow, spacing_at_start: r.spacing_at_start });
      const lostAll = r.final.nearest === r.start_stored && r.settings.increment !== 0;
      setStatus("done", r.overflow ? "The stored weight overflowed the format: past its largest value it is inf (or NaN in E4M3)."
        : lostAll ? `Every one of the ${r.settings.steps} updates was lost with nearest rounding: each increment is below half the spacing of the stored weight.`
          : `Done: ${r.settings.steps} additions.`);
    } catch (err) {
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    } finally {
      runButton.disabled = false;
    }
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); if (!runButton.disabled) run(); });
  if (!(await startPython(client, setStatus, [runButton]))) return;
  runButton.disabled = false;
  setStatus("ready", "Ready.");
  run();
}
