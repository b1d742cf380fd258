// A small SVG line chart (chapters 7, 10 and others), with optional log axes. It only maps numbers
// that pylib computed (or results.json holds) to pixels; every label is set with textContent.
// Colours come from classes (site/css/widgets/kit.css): a series' color is a series number 1–8
// (var(--series-N)), "fg" or "axis"; a series without one takes the next number in order. Inside a
// chart_frame macro (site/templates/macros.html) it also fills the frame's data table, and
// opts.summary, the sentence under the chart.

import { decadeTicks, describe, fillTable, fmtTick as logTick, frameOf } from "../plot.js";

const NS = "http://www.w3.org/2000/svg";

function el(name, attrs, parent) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (parent) parent.appendChild(node);
  return node;
}

function label(parent, x, y, s, anchor = "start", cls = "ip-label") {
  const t = el("text", { x, y, "text-anchor": anchor, class: cls }, parent);
  t.textContent = s;
  return t;
}

export const fmtTick = (v) => {
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1000 || a < 0.01) return v.toExponential(0).replace("e+", "e");
  if (Number.isInteger(v)) return String(v);
  return a >= 10 ? v.toFixed(0) : a >= 1 ? v.toFixed(1) : v.toPrecision(2);
};

const usable = (v, log) => v != null && Number.isFinite(v) && (!log || v > 0);

/** Round ticks (1, 2 or 5 × 10^k apart, four to six of them) inside [lo, hi]: {values, step}. */
function niceTicks(lo, hi) {
  const raw = (hi - lo) / 5 || Math.abs(lo) || 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const values = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) values.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return { values, step };
}

/** A linear tick's text, with as many decimals as the step needs (0.05 → 2): no float noise, no ragged widths. */
function linearText(v, step) {
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(1).replace("e+", "e");
  return v.toFixed(Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9))));
}

/** [{value, text}]: on a log axis every decade (plot.js's decadeTicks and its labels: 0.01, 10⁻⁴);
 *  where the data span less than two ticks of those, round steps inside the range; linear: round steps. */
function ticks(lo, hi, log) {
  if (log) {
    const out = decadeTicks(lo, hi);
    if (out.length >= 2) return out.map((v) => ({ value: v, text: logTick(v) }));
    const { values, step } = niceTicks(lo, hi);
    const inside = values.filter((v) => v > 0);
    return (inside.length >= 2 ? inside : [lo, hi]).map((v) => ({ value: v, text: inside.length >= 2 ? linearText(v, step) : fmtTick(v) }));
  }
  const { values, step } = niceTicks(lo, hi);
  return values.map((v) => ({ value: v, text: linearText(v, step) }));
}

/**
 * series: [{xs, ys, color?: 1–8 | "fg" | "axis", dash?, dots?, points?, width?, name?, label?}] (points: false
 * draws the line alone; label names the series in the data table, else name);
 * opts: {xlog, ylog, xlabel, ylabel,
 * xticks: [{value, text}] (categorical labels), ymin, ymax, hline: {value, text}, summary: the sentence
 * under the chart, maxRows: the data table's row budget (60)}.
 * Points that are null, non-finite or (on a log axis) not positive are left out, never drawn.
 */
export function drawChart(svg, series, opts = {}) {
  // Drawn at the width it is shown at (never scaled down), so its text stays 12 px on a phone.
  const shown = Math.round(svg.getBoundingClientRect().width);
  const W = shown >= 200 ? shown : 520, H = 250, L = 56, R = 14, T = 12, B = 40;
  svg.classList.add("kit-svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  fillFrame(svg, series, opts);
  const pts = series.map((s) => s.xs.map((x, i) => [x, s.ys[i]]).filter(([x, y]) => usable(x, opts.xlog) && usable(y, opts.ylog)));
  const xs = pts.flat().map((p) => p[0]);
  const ys = pts.flat().map((p) => p[1]);
  if (opts.hline && usable(opts.hline.value, opts.ylog)) ys.push(opts.hline.value);
  if (!xs.length || !ys.length) {
    label(svg, W / 2, H / 2, opts.empty || "nothing to draw", "middle");
    return;
  }
  const tx = (v) => (opts.xlog ? Math.log10(v) : v);
  const ty = (v) => (opts.ylog ? Math.log10(v) : v);
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  let y0 = opts.ymin ?? Math.min(...ys), y1 = opts.ymax ?? Math.max(...ys);
  if (opts.ylog) { y0 /= 1.3; y1 *= 1.3; } else { const pad = (y1 - y0) * 0.08 || Math.abs(y0) * 0.1 || 0.5; y0 -= pad; y1 += pad; }
  if (x1 === x0) { x0 = opts.xlog ? x0 / 2 : x0 - 1; x1 = opts.xlog ? x1 * 2 : x1 + 1; }
  const px = (x) => L + ((tx(x) - tx(x0)) / (tx(x1) - tx(x0))) * (W - L - R);
  const py = (y) => H - B - ((ty(y) - ty(y0)) / (ty(y1) - ty(y0))) * (H - T - B);
  el("rect", { x: L, y: T, width: W - L - R, height: H - T - B, class: "ip-frame" }, svg);
  for (const t of ticks(y0, y1, opts.ylog)) {
    const y = py(t.value);
    el("line", { x1: L, y1: y, x2: W - R, y2: y, class: "ip-grid" }, svg);
    label(svg, L - 5, y + 4, t.text, "end");
  }
  const xt = opts.xticks || ticks(x0, x1, opts.xlog);
  for (const t of xt) {
    const x = px(t.value);
    el("line", { x1: x, y1: T, x2: x, y2: H - B, class: "ip-grid" }, svg);
    label(svg, x, H - B + 14, t.text, "middle");
  }
  if (opts.xlabel) label(svg, (L + W - R) / 2, H - 6, opts.xlabel, "middle", "ip-axis");
  if (opts.ylabel) {
    const t = label(svg, 0, 0, opts.ylabel, "middle", "ip-axis");
    t.setAttribute("transform", `translate(13 ${(T + H - B) / 2}) rotate(-90)`);
  }
  if (opts.hline && usable(opts.hline.value, opts.ylog)) {
    const y = py(opts.hline.value);
    el("line", { x1: L, y1: y, x2: W - R, y2: y, class: "ip-ref" }, svg);
    label(svg, W - R - 4, y - 4, opts.hline.text, "end", "ip-ref-label");
  }
  let auto = 0;
  series.forEach((s, i) => {
    const p = pts[i];
    const n = typeof s.color === "number" ? s.color : s.color == null ? ++auto : null;
    if (!p.length) return;
    // a colour class (theme colours) or, from a widget not yet converted, a colour attribute
    const cls = n != null ? `s${n}` : s.color === "fg" || s.color === "axis" ? s.color : null;
    const g = el("g", { "data-series": s.name || String(i), ...(cls ? { class: cls } : {}) }, svg);
    if (!s.dots || s.line) {
      el("polyline", {
        points: p.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" "),
        ...(cls ? { class: "kit-line" } : { fill: "none", stroke: s.color }),
        "stroke-width": s.width ?? 2, "stroke-dasharray": s.dash || "none",
      }, g);
    }
    for (const [x, y] of s.points === false ? [] : p) {
      el("circle", {
        cx: px(x).toFixed(1), cy: py(y).toFixed(1), r: s.dots ? 4 : 2.5, "stroke-width": 1.5,
        ...(cls ? { class: s.hollow ? "kit-dot hollow" : "kit-dot" } : { fill: s.hollow ? "#fff" : s.color, stroke: s.color }),
      }, g);
    }
  });
}

/** The chart's text alternative, when svg sits in a chart_frame: one row per x value (every series'
 *  y at that x), thinned to maxRows, and opts.summary as the sentence. */
function fillFrame(svg, series, opts) {
  const frame = frameOf(svg);
  if (!frame) return;
  if (opts.summary) describe(frame, opts.summary);
  const named = series.filter((s) => s.xs.length);
  const xs = [...new Set(named.flatMap((s) => s.xs))].sort((a, b) => a - b);
  const maps = named.map((s) => new Map(s.xs.map((x, i) => [x, s.ys[i]])));
  const every = Math.max(1, Math.ceil(xs.length / (opts.maxRows || 60)));
  const rows = xs.filter((x, i) => i % every === 0 || i === xs.length - 1).map((x) => [x, ...maps.map((m) => m.get(x))]);
  fillTable(frame, [opts.xlabel || "x", ...named.map((s, i) => s.label || s.name || `series ${i + 1}`)], rows);
}
