// Small SVG charts for chapters 11 and 12's widgets: lines and points on linear or log axes, drawn at the
// width they are shown at (so their 12 px text stays 12 px on a phone), coloured through the kit's classes
// (kit-line / kit-dot with sN: var(--series-N), site/css/widgets/kit.css), with their text alternative
// (the chart frame's sentence and data table) when they sit in a chart_frame (site/templates/macros.html).
// They only map numbers that pylib computed to pixels; every label is set with textContent.

import { decadeTicks, describe, fillTable, fmtCell, fmtTick, frameOf, svgCanvas } from "../plot.js";

const NS = "http://www.w3.org/2000/svg";

/** An SVG element with attributes (and text), appended to parent. Colour it with classes, never fill or stroke. */
export function el(name, attrs = {}, parent = null, text = null) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) if (v != null) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

/** Linear ticks: round numbers (1, 2, 2.5 or 5 × a power of ten apart), about five between a and b.
 *  Log ticks (a, b in log10 units): each decade, or every other one when there are more than eight. */
function ticks(a, b, log) {
  if (log) {
    const out = decadeTicks(10 ** a, 10 ** b);
    return out.length > 8 ? out.filter((_, i) => i % 2 === 0) : out;
  }
  const raw = (b - a) / 4, mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw * (1 - 1e-9));
  const out = [];
  for (let v = Math.ceil(a / step - 1e-9) * step; v <= b + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

/**
 * chart(svg, series, opts): a line chart in svg.
 *   series: [{xs, ys, label, color?: 1–8 (its var(--series-N)), cls?: extra classes (e.g. "lw0"), points?: dots
 *            instead of a line}]; a point with y null, or not finite on a log axis, is left out.
 *   opts:   {logX, logY, xLabel, yLabel, height (280), yMin, width (the shown width), summary (the sentence
 *            under the chart), table (true: fill the frame's data table, one row per x), xName (its first header)}
 * Each line is one <polyline data-series=label>, each point a <circle>.
 */
export function chart(svg, series, opts = {}) {
  const H = opts.height || 280, L = 64, R = 14, T = 26, B = 40;
  const { W } = opts.width ? { W: opts.width } : svgCanvas(svg, H);
  if (opts.width) { svg.replaceChildren(); svg.setAttribute("viewBox", `0 0 ${W} ${H}`); svg.classList.add("kit-svg"); }
  const fx = opts.logX ? Math.log10 : (v) => v, fy = opts.logY ? Math.log10 : (v) => v;
  const ok = (x, y) => Number.isFinite(fx(x)) && Number.isFinite(fy(y));
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const s of series) s.xs.forEach((x, i) => {
    const y = s.ys[i];
    if (y == null || !ok(x, y)) return;
    x0 = Math.min(x0, fx(x)); x1 = Math.max(x1, fx(x)); y0 = Math.min(y0, fy(y)); y1 = Math.max(y1, fy(y));
  });
  const frame = frameOf(svg);
  if (!Number.isFinite(x0)) return;
  if (opts.yMin !== undefined) y0 = Math.min(y0, fy(opts.yMin));
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  const px = (x) => L + ((fx(x) - x0) / (x1 - x0)) * (W - L - R);
  const py = (y) => H - B - ((fy(y) - y0) / (y1 - y0)) * (H - T - B);
  for (const v of ticks(x0, x1, opts.logX)) {
    const x = px(v);
    el("line", { x1: x, y1: T, x2: x, y2: H - B, class: "kit-grid" }, svg);
    el("text", { x, y: H - B + 16, "text-anchor": "middle", class: "kit-label" }, svg, fmtTick(v));
  }
  for (const v of ticks(y0, y1, opts.logY)) {
    const y = py(v);
    el("line", { x1: L, y1: y, x2: W - R, y2: y, class: "kit-grid" }, svg);
    el("text", { x: L - 5, y: y + 4, "text-anchor": "end", class: "kit-label" }, svg, fmtTick(v));
  }
  el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "kit-axis" }, svg);
  el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "kit-axis" }, svg);
  if (opts.xLabel) el("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", class: "kit-axis-title" }, svg, opts.xLabel);
  if (opts.yLabel) el("text", { x: 4, y: 14, class: "kit-axis-title" }, svg, opts.yLabel);
  for (const s of series) {
    const colour = s.color ? ` s${s.color}` : "";
    const extra = s.cls ? ` ${s.cls}` : "";
    const pts = s.xs.map((x, i) => [x, s.ys[i]]).filter(([x, y]) => y != null && ok(x, y));
    if (s.points) {
      for (const [x, y] of pts) el("circle", { cx: px(x), cy: py(y), r: 3.5, class: `kit-dot${colour}${extra}` }, svg);
    } else if (pts.length) {
      el("polyline", { points: pts.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" "),
        class: `kit-line${colour}${extra}`, "data-series": s.label || "" }, svg);
    }
  }
  if (frame && opts.table !== false) tableOf(frame, series, opts.xName || opts.xLabel || "x");
  if (frame && opts.summary) describe(frame, opts.summary);
}

/** The frame's data table: one row per x of any series (in order), one column per series. */
export function tableOf(frame, series, xName) {
  const xs = [...new Set(series.flatMap((s) => s.xs))].sort((a, b) => a - b);
  const at = series.map((s) => new Map(s.xs.map((x, i) => [x, s.ys[i]])));
  fillTable(frame, [xName, ...series.map((s) => s.label || "")], xs.map((x) => [x, ...at.map((m) => (m.has(x) ? m.get(x) : null))]), fmtCell);
}
