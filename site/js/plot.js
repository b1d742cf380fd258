// The one chart helper. Canvas charts: Plot, over uPlot (vendored, the global `uPlot`). Hand-written SVG
// charts: svgCanvas / svgEl / svgText. Both take their colours from the CSS custom properties of the
// theme (--series-1 … --series-8, --band, --chart-text, --chart-axis, --chart-grid), redraw on the
// "themechange" event and on resize, keep axis text at 12 CSS px at any width, label log axes by decade,
// and give the chart a text alternative: the sentence under it and a "Data table" the reader can open,
// filled with DOM methods and textContent only (never markup from data).
//
// The chart's frame comes from the chart_frame macro (site/templates/macros.html):
//   <figure class="fig-chart kit-chart"> <div data-role="chart">placeholder</div> … <figcaption>
//   <p data-role="chart-summary"> <details data-role="chart-data"><table>…</table></details> </figure>
// Until the first data arrives the frame shows the placeholder text, not empty axes.
//
//   const plot = new Plot(el, { x: { label: "step" }, y: { label: "loss", log: false },
//                               series: [{ label: "val loss", points: true }, …], bands: [[2, 3]] });
//   plot.setData([xs, ys1, ys2, …]);            // uPlot's aligned columns; nulls are gaps
//   plot.describe("Loss fell from 4.17 to 2.51 over 300 steps.");
// Series get --series-1, --series-2, … in order unless they name one (color: 4) or a role
// (color: "band" | "axis" | "grid" | "text"), so no two series of one chart share a colour.

const FALLBACK = {
  "--series-1": "#0072B2", "--series-2": "#D55E00", "--series-3": "#009E73", "--series-4": "#E69F00",
  "--series-5": "#CC79A7", "--series-6": "#56B4E9", "--series-7": "#F0E442", "--series-8": "#7f7f7f",
  "--band": "rgba(0, 114, 178, 0.14)", "--chart-text": "#333333", "--chart-axis": "#6b6b6b",
  "--chart-grid": "#e6e6e6", "--bg": "#ffffff",
};

export const AXIS_FONT_PX = 12; // ≥ 11 CSS px at any width (uPlot scales it by devicePixelRatio itself)
const FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', Roboto, Arial, sans-serif";

/** A theme colour: the computed value of a CSS custom property ("--series-2"), or its fallback. */
export function cssColor(name) {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || FALLBACK[name] || "#777";
}

/** Series colour n (1-based, wraps after 8). */
export const seriesColor = (n) => cssColor(`--series-${((n - 1) % 8) + 1}`);

/** color with opacity a (hex #rgb/#rrggbb or rgb()/rgba()); anything else is returned as it is. */
export function withAlpha(color, a) {
  let m = /^#([0-9a-f]{3})$/i.exec(color);
  if (m) color = "#" + [...m[1]].map((c) => c + c).join("");
  m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color);
  if (m) return `rgba(${parseInt(m[1], 16)}, ${parseInt(m[2], 16)}, ${parseInt(m[3], 16)}, ${a})`;
  m = /^rgba?\(([^,]+),([^,]+),([^,)]+)/i.exec(color);
  if (m) return `rgba(${m[1].trim()}, ${m[2].trim()}, ${m[3].trim()}, ${a})`;
  return color;
}

const SUPERSCRIPT = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };

/** A tick label: decades of a log axis as 0.001 … 1000 or 10⁻⁴, 10⁵; other values short and plain. */
export function fmtTick(v) {
  if (v == null || !Number.isFinite(v)) return "";
  if (v === 0) return "0";
  const a = Math.abs(v);
  const e = Math.round(Math.log10(a));
  if (Math.abs(a / 10 ** e - 1) < 1e-9) { // a power of ten
    if (e >= -3 && e <= 4) return (v < 0 ? "−" : "") + (e >= 0 ? String(10 ** e) : (10 ** e).toFixed(-e));
    return (v < 0 ? "−" : "") + "10" + [...String(e)].map((c) => SUPERSCRIPT[c]).join("");
  }
  if (a >= 1e5 || a < 1e-3) return v.toExponential(1).replace("e+", "e");
  return String(+v.toPrecision(4));
}

/** About n round tick values (1, 2 or 5 × 10^k apart) from lo to hi. */
export function niceTicks(lo, hi, n = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n, mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw * 0.7);
  const out = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : +v.toPrecision(12));
  return out;
}

/** Decades between lo and hi (both > 0); where fewer than two fit, 1-2-5 steps instead. */
export function decadeTicks(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const v = e >= 0 ? m * 10 ** e : m / 10 ** -e;
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push({ v, m });
    }
  }
  const decades = out.filter((t) => t.m === 1).map((t) => t.v);
  return decades.length >= 2 ? decades : out.map((t) => t.v);
}

// ---------------------------------------------------------------------------
// The text alternative: summary sentence and data table in the chart's frame

/** The chart_frame <figure> around el (or el itself), or null. */
export const frameOf = (el) => (el ? el.closest(".kit-chart") : null);

/** Set the sentence under the chart (textContent). */
export function describe(frame, text) {
  const p = frame && frame.querySelector('[data-role$="summary"]');
  if (p) p.textContent = text;
}

/** Fill the frame's data table: columns are header strings, rows arrays of cells (numbers or strings). */
export function fillTable(frame, columns, rows, format = fmtCell) {
  const table = frame && frame.querySelector(".kit-chart-data table");
  if (!table) return;
  const head = document.createElement("thead");
  const tr = document.createElement("tr");
  for (const c of columns) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = c;
    tr.appendChild(th);
  }
  head.appendChild(tr);
  const body = document.createElement("tbody");
  for (const row of rows) {
    const r = document.createElement("tr");
    row.forEach((cell, i) => {
      const td = document.createElement(i === 0 ? "th" : "td");
      if (i === 0) td.scope = "row";
      td.textContent = format(cell);
      r.appendChild(td);
    });
    body.appendChild(r);
  }
  table.replaceChildren(head, body);
}

export function fmtCell(v) {
  if (v == null || (typeof v === "number" && !Number.isFinite(v))) return "–";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(3) : String(+v.toPrecision(4));
}

/** Rows of an aligned data set for the table: every x where a point series (sparse) has a value,
 *  plus evenly spaced rows up to maxRows, plus the last x with data. */
export function tableRows(data, series, maxRows = 60) {
  const xs = data[0] || [];
  const has = (i) => data.slice(1).some((col, k) => series[k] && !series[k].hidden && col[i] != null);
  const idx = [];
  for (let i = 0; i < xs.length; i++) if (has(i)) idx.push(i);
  if (!idx.length) return [];
  const keep = new Set();
  const sparse = series.map((s, k) => (s && s.points && !s.line ? k + 1 : null)).filter((k) => k != null);
  for (const i of idx) if (sparse.some((k) => data[k][i] != null)) keep.add(i);
  const every = Math.max(1, Math.ceil(idx.length / Math.max(1, maxRows - keep.size)));
  idx.forEach((i, n) => { if (n % every === 0) keep.add(i); });
  keep.add(idx[idx.length - 1]);
  series.forEach((s, k) => { // the last point of each series
    if (!s || s.hidden) return;
    for (let i = xs.length - 1; i >= 0; i--) if (data[k + 1][i] != null) { keep.add(i); break; }
  });
  return [...keep].sort((a, b) => a - b).map((i) => [xs[i], ...data.slice(1).filter((_, k) => series[k] && !series[k].hidden).map((col) => col[i])]);
}

// ---------------------------------------------------------------------------
// Canvas charts over uPlot

const liveCharts = new Set();
let listening = false;
function listen() {
  if (listening) return;
  listening = true;
  document.addEventListener("themechange", () => { for (const p of liveCharts) p.rebuild(); });
}

/**
 * new Plot(el, opts): a uPlot chart in el (a chart_frame's [data-role=chart] container).
 * opts.x, opts.y: {label, log, min, max, format(v) → tick text}; opts.x.time is always false.
 * opts.series: [{label, color?: n | "band" | "axis" | "text" | css colour, alpha?, width?: 2, dash?: [6, 4],
 *   line?: true, points?: false (true: dots only, unless line: true), hidden?: false (not drawn, not tabled),
 *   format?: (v) → text}] — one entry per y column.
 * opts.bands: [[upperSeries, lowerSeries], …] (1-based series numbers, as uPlot's), filled with --band.
 * opts.refs: [{value, label}] horizontal dashed reference lines labelled on the chart.
 * opts.height: px (default 300, 240 below 500 px wide); opts.table: false to leave the data table alone;
 * opts.maxRows: the data table's row budget (default 60); opts.xName: the table's first column header.
 * opts.hooks: extra uPlot hooks.
 */
export class Plot {
  constructor(el, opts = {}) {
    this.el = el;
    this.opts = opts;
    this.frame = frameOf(el);
    this.data = null;
    this.u = null;
    this.tableDirty = false;
    this.details = this.frame && this.frame.querySelector(".kit-chart-data");
    this.onToggle = () => this.details.open && this.updateTable(true);
    if (this.details) this.details.addEventListener("toggle", this.onToggle);
    if (typeof ResizeObserver !== "undefined") {
      let lastWidth = 0;
      this.resize = new ResizeObserver(() => {
        const w = this.el.clientWidth;
        if (this.u && w && w !== lastWidth) { lastWidth = w; this.u.setSize(this.size()); }
      });
      this.resize.observe(el);
    }
    listen();
  }

  size() {
    const width = Math.max(240, this.el.clientWidth || 600);
    return { width, height: this.opts.height || (width < 500 ? 240 : 300) };
  }

  colorOf(s, n) {
    const c = s.color ?? n;
    let color;
    if (typeof c === "number") color = seriesColor(c);
    else if (c === "band" || c === "axis" || c === "grid" || c === "text") color = cssColor(c === "band" ? "--band" : `--chart-${c}`);
    else color = c;
    return s.alpha != null ? withAlpha(color, s.alpha) : color;
  }

  uplotOptions() {
    const o = this.opts;
    const fitAxis = (u, values, i, cycle) => {
      const ax = u.axes[i];
      if (cycle > 1 && ax._size) return ax._size; // uPlot asks again as the ticks settle: keep the first answer
      u.ctx.save();
      u.ctx.font = `${AXIS_FONT_PX}px ${FONT_FAMILY}`;
      const widest = Math.max(0, ...(values || []).map((v) => u.ctx.measureText(String(v)).width));
      u.ctx.restore();
      return Math.ceil(widest) + 4 + 10; // the ticks' 4 px and a 10 px gap
    };
    const text = cssColor("--chart-text"), axisColor = cssColor("--chart-axis"), grid = cssColor("--chart-grid");
    const font = `${AXIS_FONT_PX}px ${FONT_FAMILY}`;
    const axis = (a = {}, side) => ({
      label: a.label || "", stroke: text, font, labelFont: font, labelSize: 20,
      grid: { stroke: grid, width: 1 }, ticks: { stroke: axisColor, width: 1, size: 4 },
      // the y axis as wide as its widest tick label (plus the ticks and a gap), so that its title sits
      // beside the numbers, not a fixed 60 px away on a phone where they read "3" or "2.5"
      size: side === "y" ? (a.size || fitAxis) : 44,
      ...(a.log ? { splits: (u, i, lo, hi) => decadeTicks(lo, hi) } : {}),
      values: (u, splits) => splits.map((v) => (a.format ? a.format(v) : fmtTick(v))),
    });
    const scale = (a = {}) => ({ ...(a.log ? { distr: 3, log: 10 } : {}), ...(a.min != null || a.max != null
      ? { range: (u, lo, hi) => [a.min ?? lo, a.max ?? hi] } : {}) });
    let auto = 0;
    const series = [{ label: (o.x && o.x.label) || "x" }];
    for (const s of o.series || []) {
      const n = typeof s.color === "number" ? s.color : (s.color == null ? ++auto : null);
      const color = this.colorOf(s, n);
      const dotsOnly = s.points && !s.line;
      series.push({
        label: s.label, stroke: color, width: dotsOnly ? 0 : (s.width ?? 2), dash: s.dash, show: !s.hidden,
        ...(dotsOnly ? { paths: () => null } : {}),
        points: s.points ? { show: true, size: s.size || 6, fill: color, stroke: color } : { show: false },
        spanGaps: s.spanGaps ?? !dotsOnly,
        value: (u, v) => fmtCell(v),
      });
    }
    for (const r of o.refs || []) series.push({ label: r.label, stroke: axisColor, width: 1, dash: [6, 4], points: { show: false }, value: (u, v) => fmtCell(v) });
    const refs = o.refs || [];
    return {
      ...this.size(),
      scales: { x: { time: false, ...scale(o.x) }, y: scale(o.y) },
      axes: [axis(o.x, "x"), axis(o.y, "y")],
      legend: { show: false }, // the legend is HTML, in the chart frame
      cursor: { drag: { x: false, y: false } },
      series,
      bands: (o.bands || []).map((b) => ({ series: b, fill: cssColor("--band") })),
      hooks: {
        ...(o.hooks || {}),
        draw: [
          ...((o.hooks && o.hooks.draw) || []),
          (u) => { this.el.dataset.yAxisPx = String(Math.round(u.axes[1]._size)); }, // what the tests read
          (u) => {
            if (!refs.length) return;
            const ctx = u.ctx, dpr = window.devicePixelRatio || 1;
            ctx.save();
            ctx.font = `${AXIS_FONT_PX * dpr}px ${FONT_FAMILY}`;
            ctx.fillStyle = text;
            ctx.textAlign = "right";
            for (const r of refs) {
              const y = u.valToPos(r.value, "y", true);
              if (y < u.bbox.top || y > u.bbox.top + u.bbox.height) continue;
              ctx.fillText(`${r.label} ${fmtCell(r.value)}`, u.bbox.left + u.bbox.width - 6 * dpr, y - 4 * dpr);
            }
            ctx.restore();
          },
        ],
      },
    };
  }

  /** The full data, reference lines appended (uPlot draws them as series). */
  fullData(data) {
    const n = data[0].length;
    return [...data, ...(this.opts.refs || []).map((r) => new Array(n).fill(r.value))];
  }

  /** Draw data ([xs, ys1, ys2, …], uPlot's aligned columns; null is a gap). The first call replaces
   *  the placeholder with the chart. */
  setData(data) {
    this.data = data;
    if (!this.u) this.rebuild();
    else this.u.setData(this.fullData(data));
    this.tableDirty = true;
    this.updateTable();
  }

  /** Recreate the uPlot (after a theme change, or a change of series). */
  rebuild() {
    if (!this.data) return;
    if (this.u) this.u.destroy();
    else this.el.querySelector('[data-role="placeholder"]')?.remove();
    this.u = new uPlot(this.uplotOptions(), this.fullData(this.data), this.el);
    liveCharts.add(this);
  }

  /** Set the sentence under the chart. */
  describe(text) {
    describe(this.frame, text);
  }

  /** Rebuild the data table if it is open (at most once a second while data streams), or if forced. */
  updateTable(force = false) {
    if (!this.details || !this.data || this.opts.table === false) return;
    if (!this.tableDirty && !force) return;
    if (!this.details.open && !force) return;
    const now = performance.now();
    if (!force && this.lastTable && now - this.lastTable < 1000) {
      clearTimeout(this.tableTimer);
      this.tableTimer = setTimeout(() => this.updateTable(true), 1000);
      return;
    }
    this.lastTable = now;
    this.tableDirty = false;
    const series = this.opts.series || [];
    const columns = [this.opts.xName || (this.opts.x && this.opts.x.label) || "x", ...series.filter((s) => !s.hidden).map((s) => s.label)];
    fillTable(this.frame, columns, tableRows(this.data, series, this.opts.maxRows || 60));
  }

  destroy() {
    if (this.u) this.u.destroy();
    this.u = null;
    liveCharts.delete(this);
    clearTimeout(this.tableTimer);
    if (this.resize) this.resize.disconnect();
    if (this.details) this.details.removeEventListener("toggle", this.onToggle);
  }
}

/** first and last non-null (x, y) of a column: {x0, y0, x1, y1} or null; for summary sentences. */
export function ends(xs, ys) {
  let a = -1, b = -1;
  for (let i = 0; i < ys.length; i++) if (ys[i] != null && Number.isFinite(ys[i])) { if (a < 0) a = i; b = i; }
  return a < 0 ? null : { x0: xs[a], y0: ys[a], x1: xs[b], y1: ys[b] };
}

// ---------------------------------------------------------------------------
// Hand-written SVG charts

const NS = "http://www.w3.org/2000/svg";

/** An SVG element with attributes, appended to parent. Colour it with classes, not attributes:
 *  class "kit-line s3" (stroke), "kit-dot s3" / "kit-area s3" (fill); see site/css/widgets/kit.css. */
export function svgEl(name, attrs, parent) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) if (v != null) node.setAttribute(k, String(v));
  if (parent) parent.appendChild(node);
  return node;
}

/** SVG text (textContent; class "kit-label" by default: 12 px, --chart-text). */
export function svgText(parent, x, y, s, { anchor = "start", cls = "kit-label", ...attrs } = {}) {
  const t = svgEl("text", { x, y, "text-anchor": anchor, class: cls, ...attrs }, parent);
  t.textContent = s;
  return t;
}

/** Clears svg and sizes its viewBox to the width it is shown at (never scaled down, so its text stays
 *  12 px on a phone). Returns {W, H}. Call again on redraw; onResize(svg, fn) redraws on resize and theme. */
export function svgCanvas(svg, height = 260, fallbackWidth = 600) {
  const shown = Math.round(svg.getBoundingClientRect().width);
  const W = shown >= 200 ? shown : fallbackWidth;
  svg.classList.add("kit-svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${height}`);
  svg.replaceChildren();
  return { W, H: height };
}

/** Calls redraw() when el's width changes (SVG charts drawn at their shown width). */
export function onResize(el, redraw) {
  if (typeof ResizeObserver === "undefined") return;
  let last = Math.round(el.getBoundingClientRect().width);
  new ResizeObserver(() => {
    const w = Math.round(el.getBoundingClientRect().width);
    if (w && w !== last) { last = w; redraw(); }
  }).observe(el);
}
