// Nudge one weight: a thin view over pylib.web.backprop_ops (backprop_params, backprop_nudge). The
// validation, both slopes and the error-vs-h sweep are computed in Python; this file only draws.
// Everything typed by the reader is shown with textContent.

import { invalidMarker, readoutMap, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const FIELDS = ["name", "index", "h"];
const sci = (v, digits = 6) => (v == null || !Number.isFinite(v) ? "–" : v.toExponential(digits));

function makeChart(el) {
  const size = () => ({ width: Math.max(280, el.clientWidth || 600), height: 260 });
  const opts = {
    ...size(),
    scales: { x: { time: false, distr: 3 }, y: { distr: 3 } },
    axes: [
      { label: "step size h", stroke: "#444", grid: { stroke: "#eee" }, values: (u, vals) => vals.map((v) => (v == null ? "" : v.toExponential(0))) },
      { label: "relative error", stroke: "#444", grid: { stroke: "#eee" }, size: 64, values: (u, vals) => vals.map((v) => (v == null ? "" : v.toExponential(0))) },
    ],
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    series: [
      {},
      { label: "sweep", stroke: "#2a5db0", width: 2, spanGaps: true, points: { show: true, size: 4, fill: "#2a5db0" } },
      { label: "your h", stroke: "#d9480f", width: 0, paths: () => null, points: { show: true, size: 9, fill: "#d9480f" } },
    ],
  };
  const plot = new uPlot(opts, [[1e-13, 1], [null, null], [null, null]], el);
  if (typeof ResizeObserver !== "undefined") new ResizeObserver(() => plot.setSize(size())).observe(el);
  return plot;
}

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const clearReadouts = () => Object.values(readouts).forEach((el) => (el.textContent = "–"));
  const chart = makeChart($('[data-role="chart"]'));

  let info;
  if (!(await startPython(client, setStatus, [runButton], async () => { info = await client.call("backprop_params"); }))) return;
  const list = $('[data-role="names"]');
  list.replaceChildren(
    ...info.params.map((p) => {
      const option = document.createElement("option");
      option.value = p.name;
      option.textContent = `${p.name} (${p.shape.join(" × ")}: indices 0–${p.size - 1})`;
      return option;
    }),
  );

  let sequence = 0;
  async function compare() {
    const mine = ++sequence;
    const args = { name: form.elements.name.value, index: form.elements.index.value, h: form.elements.h.value };
    setStatus("running", "Nudging…");
    try {
      const r = await client.call("backprop_nudge", args);
      if (mine !== sequence) return;
      markInvalid(null);
      readouts.where.textContent = `${r.name}[${r.index.join(", ")}]`;
      for (const key of ["analytic", "numeric", "rel_error", "abs_error"]) readouts[key].textContent = sci(r[key], key.endsWith("error") ? 2 : 6);
      readouts.loss_plus.textContent = r.loss_plus.toFixed(12);
      readouts.loss_minus.textContent = r.loss_minus.toFixed(12);
      // x: the sweep's step sizes plus the reader's h, in order; the reader's point is series 2.
      const xs = [...new Set([...r.sweep.h, r.h])].sort((a, b) => a - b);
      const at = new Map(r.sweep.h.map((h, i) => [h, r.sweep.rel_error[i]]));
      chart.setData([xs, xs.map((h) => (at.has(h) ? at.get(h) : null)), xs.map((h) => (h === r.h && r.rel_error > 0 ? r.rel_error : null))]);
      root.dataset.result = JSON.stringify({ name: r.name, index: r.flat_index, h: r.h, analytic: r.analytic, numeric: r.numeric, rel_error: r.rel_error });
      setStatus("done", `Relative error ${sci(r.rel_error, 2)} at h = ${sci(r.h, 1)}.`);
    } catch (err) {
      if (mine !== sequence) return;
      delete root.dataset.result;
      clearReadouts();
      chart.setData([[1e-13, 1], [null, null], [null, null]]); // no curve for a weight that was not nudged
      markInvalid(err.errors);
      setStatus("error", err.errors ? Object.values(err.errors).join("\n") : err.message);
    }
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    compare();
  });
  runButton.disabled = false;
  await compare();
}
