// A small SVG line chart for chapter 7's widgets, with optional log axes. It only maps numbers
// that pylib computed (or results.json holds) to pixels; every label is set with textContent.

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

function ticks(lo, hi, log) {
  if (log) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      const v = 10 ** e;
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
    }
    return out.length >= 2 ? out : [lo, hi];
  }
  const step = (hi - lo) / 4;
  return [0, 1, 2, 3, 4].map((i) => lo + i * step);
}

/**
 * series: [{xs, ys, color, dash?, dots?, points?, width?, name?}] (points: false draws the line alone);
 * opts: {xlog, ylog, xlabel, ylabel,
 * xticks: [{value, text}] (categorical labels), ymin, ymax, hline: {value, text}}.
 * Points that are null, non-finite or (on a log axis) not positive are left out, never drawn.
 */
export function drawChart(svg, series, opts = {}) {
  // Drawn at the width it is shown at (never scaled down), so its text stays 11 px on a phone.
  const shown = Math.round(svg.getBoundingClientRect().width);
  const W = shown >= 200 ? shown : 520, H = 250, L = 56, R = 14, T = 12, B = 40;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
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
  for (const v of ticks(y0, y1, opts.ylog)) {
    const y = py(v);
    el("line", { x1: L, y1: y, x2: W - R, y2: y, class: "ip-grid" }, svg);
    label(svg, L - 5, y + 4, fmtTick(v), "end");
  }
  const xt = opts.xticks || ticks(x0, x1, opts.xlog).map((v) => ({ value: v, text: fmtTick(v) }));
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
  series.forEach((s, i) => {
    const p = pts[i];
    if (!p.length) return;
    const g = el("g", { "data-series": s.name || String(i) }, svg);
    if (!s.dots || s.line) {
      el("polyline", {
        points: p.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" "),
        fill: "none", stroke: s.color, "stroke-width": s.width ?? 2, "stroke-dasharray": s.dash || "none",
      }, g);
    }
    for (const [x, y] of s.points === false ? [] : p) {
      el("circle", { cx: px(x).toFixed(1), cy: py(y).toFixed(1), r: s.dots ? 4 : 2.5, fill: s.hollow ? "#fff" : s.color, stroke: s.color, "stroke-width": 1.5 }, g);
    }
  });
}
