// Helpers shared by chapter 15's widgets (checkpoint, replay, dashboard, goodput): small uPlot
// charts, file download and base64. Not a widget itself; numerics stay in pylib.web.job_ops.

export const num = (v, d = 3) => (v == null || !Number.isFinite(v) ? "–"
  : Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : v.toFixed(d));

// A line chart on el: series [{label, stroke, dash, points, width}], data [x, ...ys]; log: y on a log scale.
export function lineChart(el, series, data, { log = false, xlog = false, ylabel = "", xlabel = "step", height = 190, yrange = null } = {}) {
  const size = () => ({ width: Math.max(280, el.clientWidth || 600), height });
  const plot = new uPlot({
    ...size(),
    scales: { x: { time: false, ...(xlog ? { distr: 3 } : {}) }, y: log ? { distr: 3 } : yrange ? { range: yrange } : {} },
    axes: [{ label: xlabel, stroke: "#444", grid: { stroke: "#eee" } }, { label: ylabel, stroke: "#444", grid: { stroke: "#eee" }, size: 60 }],
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    series: [{ label: xlabel }, ...series.map((s) => ({
      width: 1.5, ...s,
      ...(s.dots ? { paths: () => null, points: { show: true, size: s.dots, fill: s.stroke, stroke: s.stroke } } : { points: { show: false } }),
    }))],
  }, data, el);
  if (typeof ResizeObserver !== "undefined") new ResizeObserver(() => plot.setSize(size())).observe(el);
  return plot;
}

// Offer bytes (Uint8Array) or text as a file download; returns nothing.
export function download(content, name, type) {
  const blob = new Blob([content], { type });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function b64ToBytes(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function bytesToB64(bytes) {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

// A legend list from [[label, color], ...] into ul.
export function fillLegend(ul, entries) {
  ul.replaceChildren();
  for (const [label, color, dashed] of entries) {
    const li = document.createElement("li");
    const sw = document.createElement("span");
    sw.className = "swatch job-swatch" + (dashed ? " dashed" : "");
    sw.style.background = dashed ? "transparent" : color;
    sw.style.borderColor = color;
    li.append(sw, document.createTextNode(label));
    ul.append(li);
  }
}
