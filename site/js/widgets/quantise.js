// Quantising a gradient: a thin view over precision_quantise (pylib.web.precision_ops, which calls
// pylib.systems.quantise). It only draws what the worker sends.

import { invalidMarker, readoutMap, showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const FIELDS = ["tensor", "bits", "ratio"];
const C = { before: "#2a5db0", after: "#e03131", err: "#2a5db0", clip: "#f08c00", you: "#1b7a43" };
const num = (v) => (v == null ? "–" : Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : v.toPrecision(4));

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);
  const readouts = readoutMap(root);
  const els = { hist: $('[data-role="chart-hist"]'), sweep: $('[data-role="chart-sweep"]') };
  const plots = {};
  const size = (el) => ({ width: Math.max(280, el.clientWidth || 600), height: 200 });
  if (typeof ResizeObserver !== "undefined") {
    for (const [k, el] of Object.entries(els)) new ResizeObserver(() => plots[k] && plots[k].setSize(size(el))).observe(el);
  }
  const legend = $('[data-role="legend"]');
  const item = $('template[data-role="legend-item"]');
  for (const [label, color] of [["before", C.before], ["after quantisation", C.after], ["relative error", C.err], ["clipped share", C.clip], ["your full scale", C.you]]) {
    const li = item.content.firstElementChild.cloneNode(true);
    li.querySelector(".swatch").style.background = color;
    li.querySelector('[data-role="label"]').textContent = label;
    legend.append(li);
  }
  const draw = (key, opts, arrays) => {
    if (plots[key]) plots[key].destroy();
    plots[key] = new uPlot({ ...size(els[key]), legend: { show: false }, cursor: { drag: { x: false, y: false } }, ...opts }, arrays, els[key]);
  };
  let busy = false;
  let pending = false;

  async function run() {
    if (busy) { pending = true; return; }
    busy = true;
    markInvalid(null);
    setStatus("running", "Quantising…");
    try {
      const args = Object.fromEntries(FIELDS.map((n) => [n, form.elements[n].value]));
      const r = await client.call("precision_quantise", args);
      const logCounts = (a) => a.map((c) => (c > 0 ? c : null));
      draw("hist", {
        scales: { x: { time: false }, y: { distr: 3 } },
        axes: [{ label: "gradient value", stroke: "#444", grid: { stroke: "#eee" }, values: (u, v) => v.map((x) => (x == null ? "" : x.toExponential(1))) },
          { label: "elements", stroke: "#444", grid: { stroke: "#eee" } }],
        series: [{ label: "value" }, { label: "before", stroke: C.before, width: 1.5, points: { show: false }, spanGaps: false },
          { label: "after", stroke: C.after, width: 0, paths: () => null, points: { show: true, size: 5, fill: C.after, stroke: C.after } }],
      }, [r.hist_centres, logCounts(r.hist_counts), logCounts(r.hist_counts_quantised)]);
      const you = r.sweep_ratio.map(() => null);
      let best = 0;
      r.sweep_ratio.forEach((x, i) => { if (Math.abs(Math.log(x / r.settings.ratio)) < Math.abs(Math.log(r.sweep_ratio[best] / r.settings.ratio))) best = i; });
      you[best] = r.rel_error;
      draw("sweep", {
        scales: { x: { time: false, distr: 3 }, y: {} },
        axes: [{ label: "full scale / amax", stroke: "#444", grid: { stroke: "#eee" } }, { label: "share", stroke: "#444", grid: { stroke: "#eee" } }],
        series: [{ label: "ratio" }, { label: "relative error", stroke: C.err, width: 1.5, points: { show: false } },
          { label: "clipped share", stroke: C.clip, width: 1.5, dash: [5, 3], points: { show: false } },
          { label: "you", stroke: C.you, width: 0, paths: () => null, points: { show: true, size: 9, fill: C.you, stroke: C.you } }],
      }, [r.sweep_ratio, r.sweep_rel_error, r.sweep_clipped, you]);
      readouts.q_max.textContent = String(r.q_max);
      readouts.step.textContent = num(r.step);
      readouts.rel_error.textContent = num(r.rel_error);
      readouts.clipped.textContent = `${(100 * r.clipped).toFixed(2)}%`;
      readouts.max_error_in_range.textContent = `${num(r.max_error_in_range)} (${num(r.bound_in_range)})`;
      readouts.bytes.textContent = `${Math.round(r.bytes).toLocaleString("en")} (${r.bytes_fp32.toLocaleString("en")})`;
      root.dataset.result = JSON.stringify({ settings: r.settings, rel_error: r.rel_error, clipped: r.clipped, step: r.step,
        q_max: r.q_max, max_error_in_range: r.max_error_in_range, bound_in_range: r.bound_in_range, full_scale: r.full_scale });
      setStatus("done", `${r.settings.bits} bits, full scale ${num(r.full_scale)} (${r.settings.ratio} × amax): `
        + `${(100 * r.clipped).toFixed(2)}% clipped, relative error ${num(r.rel_error)}.`);
    } catch (err) {
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    } finally {
      busy = false;
      if (pending) { pending = false; run(); }
    }
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); if (!runButton.disabled) run(); });
  if (!(await startPython(client, setStatus, [runButton]))) return;
  form.elements.ratio_slider.addEventListener("input", () => {
    form.elements.ratio.value = String(Number(Math.pow(10, Number(form.elements.ratio_slider.value)).toPrecision(3)));
    run();
  });
  form.elements.tensor.addEventListener("change", run);
  runButton.disabled = false;
  setStatus("ready", "Ready.");
  run();
}
