// Small SVG drawings for chapter 2's widgets: a line chart and a bar chart. They only map numbers
// that pylib computed to pixels; labels are set with textContent.

const NS = "http://www.w3.org/2000/svg";

function el(name, attrs, parent) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (parent) parent.appendChild(node);
  return node;
}

function text(parent, x, y, s, anchor = "start") {
  const t = el("text", { x, y, "text-anchor": anchor }, parent);
  t.textContent = s;
  return t;
}

const fmt = (v) => (Number.isInteger(v) || Math.abs(v) >= 100 ? String(Math.round(v)) : Math.abs(v) < 0.01 ? v.toExponential(1) : v.toFixed(2));

/** series: [{xs, ys, color, dots?}]; draws axes from the data range (or opts.xmin/xmax/ymin/ymax). */
export function lineChart(svg, series, opts = {}) {
  const W = 480, H = 200, L = 44, R = 10, T = 10, B = 28;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  const xs = series.flatMap((s) => s.xs), ys = series.flatMap((s) => s.ys).filter((v) => v != null && Number.isFinite(v));
  if (!xs.length || !ys.length) return;
  const x0 = opts.xmin ?? Math.min(...xs), x1 = opts.xmax ?? Math.max(...xs);
  let y0 = opts.ymin ?? Math.min(...ys), y1 = opts.ymax ?? Math.max(...ys);
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const px = (x) => L + ((x - x0) / (x1 - x0 || 1)) * (W - L - R);
  const py = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999" }, svg);
  el("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#999" }, svg);
  text(svg, L - 4, py(y1) + 4, fmt(y1), "end");
  text(svg, L - 4, py(y0), fmt(y0), "end");
  text(svg, px(x0), H - B + 13, fmt(x0), "middle");
  text(svg, px(x1), H - B + 13, fmt(x1), "end");
  if (opts.xlabel) text(svg, (L + W - R) / 2, H - 3, opts.xlabel, "middle");
  if (opts.ylabel) text(svg, L + 4, T + 8, opts.ylabel);
  for (const s of series) {
    const pts = s.xs.map((x, i) => [x, s.ys[i]]).filter(([, y]) => y != null && Number.isFinite(y));
    if (s.dots) {
      for (const [x, y] of pts) el("circle", { cx: px(x), cy: py(y), r: 3, fill: s.color }, svg);
    } else if (pts.length) {
      el("polyline", { points: pts.map(([x, y]) => `${px(x)},${py(y)}`).join(" "), fill: "none", stroke: s.color, "stroke-width": 1.6 }, svg);
    }
  }
}

/** values: numbers per position; colors: a color per bar; one bar chart with its max on the y axis. */
export function barChart(svg, values, colors, opts = {}) {
  const W = 480, H = 120, L = 52, R = 6, T = 14, B = 18;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  const top = opts.ymax ?? Math.max(...values, 0);
  const bw = (W - L - R) / values.length;
  el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999" }, svg);
  text(svg, L - 4, T + 4, top > 0 ? fmt(top) : "0", "end");
  text(svg, L - 4, H - B, "0", "end");
  if (opts.title) text(svg, L, T - 3, opts.title);
  values.forEach((v, i) => {
    const h = top > 0 ? Math.min(v / top, 1) * (H - T - B) : 0; // a bar above ymax is clipped at the top
    el("rect", { x: L + i * bw + 0.5, y: H - B - h, width: Math.max(bw - 1, 1), height: h, fill: colors[i] }, svg);
  });
  text(svg, L, H - 4, "position 0", "start");
  text(svg, W - R, H - 4, String(values.length - 1), "end");
}

export const DOC_COLORS = ["#2a5db0", "#d9480f", "#1b7a43", "#8e44ad", "#b45f06", "#0b7285"];
