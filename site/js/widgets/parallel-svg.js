// Small SVG charts for chapter 11's widgets: lines and points on linear or log axes, and a timeline.
// They only map numbers that pylib computed to pixels; every label is set with textContent.

const NS = "http://www.w3.org/2000/svg";

export function el(name, attrs = {}, parent = null, text = null) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

const tick = (v) => {
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1e4 || a < 1e-2) return v.toExponential(0).replace("e+", "e");
  return Number.isInteger(v) ? String(v) : v.toPrecision(2);
};

// series: [{xs, ys, cls, points?: bool, label}]; opts: {logX, logY, xLabel, yLabel, width, height}
export function chart(svg, series, opts = {}) {
  // Unless a width is given, the drawing is as wide as the chart on the page (400-640 units): on a
  // narrow page the labels then keep a legible size instead of shrinking with the picture.
  const shown = svg.getBoundingClientRect().width;
  const W = opts.width || Math.round(Math.max(400, Math.min(640, shown || 640)));
  const H = opts.height || 280, L = 60, R = 12, T = 24, B = 36;
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const fx = opts.logX ? Math.log10 : (v) => v, fy = opts.logY ? Math.log10 : (v) => v;
  const ok = (x, y) => Number.isFinite(fx(x)) && Number.isFinite(fy(y));
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const s of series) s.xs.forEach((x, i) => {
    const y = s.ys[i];
    if (y == null || !ok(x, y)) return;
    x0 = Math.min(x0, fx(x)); x1 = Math.max(x1, fx(x)); y0 = Math.min(y0, fy(y)); y1 = Math.max(y1, fy(y));
  });
  if (!Number.isFinite(x0)) return;
  if (opts.yMin !== undefined) y0 = Math.min(y0, fy(opts.yMin));
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  const px = (x) => L + ((fx(x) - x0) / (x1 - x0)) * (W - L - R);
  const py = (y) => H - B - ((fy(y) - y0) / (y1 - y0)) * (H - T - B);
  el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }, svg);
  el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }, svg);
  const ticks = (a, b, log) => {
    if (log) { const out = []; for (let k = Math.ceil(a); k <= Math.floor(b); k++) out.push(10 ** k); return out.length > 8 ? out.filter((_, i) => i % 2 === 0) : out; }
    const out = []; for (let i = 0; i <= 4; i++) out.push(a + ((b - a) * i) / 4); return out;
  };
  for (const v of ticks(x0, x1, opts.logX)) { const x = px(v); el("line", { x1: x, y1: T, x2: x, y2: H - B, class: "grid" }, svg); el("text", { x, y: H - B + 14, "text-anchor": "middle", class: "muted" }, svg, tick(v)); }
  for (const v of ticks(y0, y1, opts.logY)) { const y = py(v); el("line", { x1: L, y1: y, x2: W - R, y2: y, class: "grid" }, svg); el("text", { x: L - 4, y: y + 4, "text-anchor": "end", class: "muted" }, svg, tick(v)); }
  if (opts.xLabel) el("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", class: "muted" }, svg, opts.xLabel);
  if (opts.yLabel) el("text", { x: 12, y: 12, class: "muted" }, svg, opts.yLabel);
  for (const s of series) {
    const pts = s.xs.map((x, i) => [x, s.ys[i]]).filter(([x, y]) => y != null && ok(x, y));
    if (s.points) {
      for (const [x, y] of pts) el("circle", { cx: px(x), cy: py(y), r: 3.2, class: `pt ${s.cls}` }, svg);
    } else if (pts.length) {
      el("polyline", { points: pts.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" "), class: `line ${s.cls}`, "data-series": s.label || "" }, svg);
    }
  }
}
