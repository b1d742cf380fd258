// Helpers shared by chapter 15's widgets (checkpoint, replay, dashboard, goodput), and used by chapter
// 13's link race: line charts on plot.js (theme colours, text alternative, nothing drawn before the first
// data), vertical marker lines, legends built from data, file download and base64. Not a widget itself;
// numerics stay in pylib.web.job_ops. The widgets' runs go through widget-kit.js's runStreamed.

import { Plot, cssColor, seriesColor } from "../plot.js";

export const num = (v, d = 3) => (v == null || !Number.isFinite(v) ? "–"
  : Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : v.toFixed(d));

/** A colour by role: a series number (1–8), "fg" (the text colour) or "axis"; read when drawn. */
const colorOf = (c) => (typeof c === "number" ? seriesColor(c) : cssColor(c === "fg" ? "--fg" : "--chart-axis"));

/**
 * A uPlot draw hook: vertical lines at x = value over the plot area, marks = [{value, color: n | "fg" |
 * "axis", dash?: [4, 4], width?: 1.5}] or a function returning them (read at every draw, so the lines
 * follow the data and the theme). Values outside the x range or not finite are skipped.
 */
export function verticalLines(marks) {
  return (u) => {
    const list = typeof marks === "function" ? marks() : marks;
    const ctx = u.ctx, dpr = window.devicePixelRatio || 1;
    for (const m of list || []) {
      if (m.value == null || !Number.isFinite(m.value)) continue;
      const x = u.valToPos(m.value, "x", true);
      if (!Number.isFinite(x) || x < u.bbox.left - 1 || x > u.bbox.left + u.bbox.width + 1) continue;
      ctx.save();
      ctx.strokeStyle = colorOf(m.color ?? "fg");
      ctx.lineWidth = (m.width ?? 1.5) * dpr;
      ctx.setLineDash((m.dash || []).map((d) => d * dpr));
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      ctx.restore();
    }
  };
}

/**
 * A line chart in el (a chart_frame's [data-role=…] container) on plot.js: series [{label, color: n,
 * dash, width, dots: size (points only), spanGaps}], then .setData([x, ...ys]) and .describe(text).
 * opts: log (y), xlog, xlabel, ylabel, height, yrange [lo, hi], refs [{value, label}] (dashed horizontal
 * lines), marks (verticalLines' argument), maxRows (the data table's rows).
 */
export function lineChart(el, series, { log = false, xlog = false, ylabel = "", xlabel = "step", height = 200, yrange = null,
  refs = [], marks = null, maxRows = 60 } = {}) {
  return new Plot(el, {
    x: { label: xlabel, log: xlog },
    y: { label: ylabel, log, ...(yrange ? { min: yrange[0], max: yrange[1] } : {}) },
    series: series.map((s) => ({
      label: s.label, color: s.color, dash: s.dash, width: s.width ?? 1.5,
      ...(s.dots ? { points: true, size: s.dots } : {}), ...(s.spanGaps != null ? { spanGaps: s.spanGaps } : {}),
    })),
    refs, height, maxRows, xName: xlabel,
    ...(marks ? { hooks: { draw: [verticalLines(marks)] } } : {}),
  });
}

/** A legend from data: entries [[swatch classes (kit.css: "line s3", "dot s2", "line dash axis"), text]]. */
export function fillLegend(ul, entries) {
  ul.replaceChildren();
  for (const [swatch, text] of entries) {
    const li = document.createElement("li");
    const sw = document.createElement("span");
    sw.className = `kit-swatch ${swatch}`;
    sw.setAttribute("aria-hidden", "true");
    li.append(sw, document.createTextNode(text));
    ul.append(li);
  }
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
