// Goodput against the checkpoint interval: a thin view over job_goodput (pylib.web.job_ops ->
// pylib.systems.goodput). The sliders only set the text fields; pylib validates and simulates.

import { invalidMarker, showRunError, readoutMap, startPython, statusSetter, widgetParts } from "../widget-kit.js";
import { fillLegend, lineChart, num } from "./job-kit.js";

const FIELDS = ["delta", "M", "R", "tau"];
const C = { sim: "#2a5db0", exp: "#2a5db0", young: "#d9480f", daly: "#1b7a43", opt: "#7b3fb0", tau: "#868e96" };

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const youngButton = $('[data-action="young"]');
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);
  const chartEl = $('[data-role="chart"]');
  let plot = null;
  let busy = false;
  let pending = false;
  let last = null;
  // minutes as typed: up to 4 significant digits, no trailing zeros ("45 min", "3,160 min", "0.125 min")
  const minutes = (t) => `${Number(t.toPrecision(4)).toLocaleString("en", { maximumFractionDigits: 6 })} min`;

  const ranges = [...root.querySelectorAll("[data-range]")];
  const toValue = (r) => {
    const lo = Math.log10(Number(r.dataset.lo)), hi = Math.log10(Number(r.dataset.hi));
    return Number((10 ** (lo + (hi - lo) * Number(r.value) / 1000)).toPrecision(3));
  };
  const toPosition = (r, v) => {
    const lo = Math.log10(Number(r.dataset.lo)), hi = Math.log10(Number(r.dataset.hi));
    if (!(v > 0) || !Number.isFinite(v)) return;
    r.value = String(Math.round(Math.min(1000, Math.max(0, 1000 * (Math.log10(v) - lo) / (hi - lo)))));
  };
  for (const r of ranges) {
    const field = form.elements[r.dataset.range];
    toPosition(r, Number(field.value));
    r.addEventListener("input", () => { field.value = String(toValue(r)); schedule(); });
    field.addEventListener("change", () => toPosition(r, Number(field.value)));
  }

  function draw(v) {
    const xs = v.tau;
    const marks = [["young", v.young], ["daly", v.daly], ["opt", v.optimum], ["tau", v.chosen.tau]];
    const lo = Math.min(...v.simulated, ...v.expected), hi = Math.max(...v.simulated, ...v.expected);
    // each marker is a vertical line: two points at x = its tau, spread over the y range
    const a = (t) => t * (1 - 1e-6), b = (t) => t * (1 + 1e-6); // a vertical line: two x's just apart
    const x = [...xs, ...marks.flatMap(([, t]) => (t > 0 ? [a(t), b(t)] : []))].sort((p, q) => p - q);
    const at = (arr) => x.map((t) => { const i = xs.indexOf(t); return i >= 0 ? arr[i] : null; });
    const line = (t) => x.map((u) => (t > 0 && u === a(t) ? lo : t > 0 && u === b(t) ? hi : null));
    const data = [x, at(v.simulated), at(v.expected), ...marks.map(([, t]) => line(t))];
    if (plot) plot.destroy();
    plot = lineChart(chartEl, [
      { label: "simulated", stroke: C.sim, dots: 6 },
      { label: "expected", stroke: C.exp, spanGaps: true },
      { label: "Young", stroke: C.young, spanGaps: true },
      { label: "Daly", stroke: C.daly, spanGaps: true, dash: [5, 4] },
      { label: "optimum", stroke: C.opt, spanGaps: true, dash: [2, 3] },
      { label: "τ", stroke: C.tau, spanGaps: true, width: 3 },
    ], data, { xlog: true, xlabel: "checkpoint interval τ (min)", ylabel: "goodput" });
    fillLegend($('[data-role="legend"]'), [["simulated", C.sim], ["expected (exact)", C.exp], ["Young √(2δM)", C.young],
      ["Daly", C.daly, true], ["exact optimum", C.opt, true], ["your τ", C.tau]]);
  }

  async function simulate() {
    if (busy) { pending = true; return; }
    busy = true;
    markInvalid(null);
    setStatus("running", "Simulating…");
    try {
      const args = Object.fromEntries(FIELDS.map((n) => [n, form.elements[n].value]));
      const v = await client.call("job_goodput", args);
      last = v;
      draw(v);
      readouts.sim.textContent = num(v.chosen.simulated, 4);
      readouts.expected.textContent = num(v.chosen.expected, 4);
      readouts.young.textContent = num(v.young, 3);
      readouts.daly.textContent = v.daly == null ? "δ ≥ 2M: not given" : num(v.daly, 3);
      readouts.optimum.textContent = num(v.optimum, 3);
      readouts.best.textContent = num(v.expected_at.optimum, 4);
      root.dataset.result = JSON.stringify({ chosen: v.chosen, young: v.young, daly: v.daly, optimum: v.optimum });
      root.classList.remove("job-stale");
      setStatus("done", `At τ = ${minutes(v.chosen.tau)}: ${(100 * v.chosen.simulated).toFixed(1)}% of the time is useful work `
        + `(expected ${(100 * v.chosen.expected).toFixed(1)}%). The best interval gives ${(100 * v.expected_at.optimum).toFixed(1)}%.`);
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
      if (last) {  // the last good result stays, greyed, and says so
        root.classList.add("job-stale");
        message.textContent += `\nThe readouts and the chart still show the last valid settings (τ = ${minutes(last.chosen.tau)}).`;
      }
    } finally {
      busy = false;
      if (pending) { pending = false; simulate(); }
    }
  }
  let timer = null;
  const schedule = () => { clearTimeout(timer); timer = setTimeout(simulate, 150); };

  form.addEventListener("submit", (event) => event.preventDefault());
  if (!(await startPython(client, setStatus, [runButton, youngButton]))) return;
  form.addEventListener("submit", () => simulate());
  youngButton.addEventListener("click", () => {
    if (!last) return;
    form.elements.tau.value = String(Number(last.young.toPrecision(4)));
    toPosition(ranges.find((r) => r.dataset.range === "tau"), Number(form.elements.tau.value));
    simulate();
  });
  runButton.disabled = false;
  youngButton.disabled = false;
  await simulate();
}
