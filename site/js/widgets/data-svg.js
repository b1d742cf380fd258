// Shared helpers of chapters 2 and 3's widgets: their SVG charts (a line chart and a bar chart per
// position, drawn at their shown width), the colour class of a document,
// and keepFocus for calculator widgets. They only map numbers that pylib computed to pixels; every
// label is set with textContent. Colours come from classes (kit.css: sN → var(--series-N)), so the
// charts follow the theme; text is 12 px at any width (plot.js's svgCanvas draws at the shown width).

import { describe, fillTable, fmtCell, fmtTick, frameOf, niceTicks, onResize, svgCanvas, svgEl as el, svgText as text } from "../plot.js";

/** The series colour class of document d (0-based): s1, s2, s3, then round again. Only these three
 *  keep 3:1 against the page in both themes; documents are contiguous in a window, so neighbours
 *  always differ (and the data tables give each document's number). s8 (grey) is the changed position. */
export const DOC_COLORS = 3;
export const docClass = (d) => `s${(d % DOC_COLORS) + 1}`;

/** Legend entries ([swatch classes, text]) for the documents among docIds (0-based, as the window
 *  numbers them): one per colour in use, naming every document in the window that has it
 *  ("documents 1 and 4"), and no document that is not there. */
export function docLegend(docIds) {
  const byColour = new Map();
  for (const d of [...new Set(docIds)].sort((a, b) => a - b)) {
    const c = docClass(d);
    byColour.set(c, [...(byColour.get(c) || []), d + 1]);
  }
  const names = (ns) => (ns.length === 1 ? `document ${ns[0]}` : `documents ${ns.slice(0, -1).join(", ")} and ${ns[ns.length - 1]}`);
  return [...byColour].map(([c, ns]) => [`area ${c}`, names(ns)]);
}

/** The chart frame's data table scrolls (kit.css: .kit-table-scroll, max-height 18rem): a scrolling
 *  region must be reachable by the keyboard (axe: scrollable-region-focusable), so it takes the focus
 *  and is named. (Belongs in macros.html's chart_frame.) Returns frame. */
export function tableFocusable(frame) {
  const box = frame && frame.querySelector(".kit-table-scroll");
  if (box && !box.hasAttribute("tabindex")) {
    box.tabIndex = 0;
    box.setAttribute("role", "region");
    const label = frame.querySelector('[role="img"]')?.getAttribute("aria-label");
    box.setAttribute("aria-label", label ? `data table: ${label}` : "data table");
  }
  return frame;
}

/** An empty chart svg is not displayed (data.css: svg.kit-svg:empty), so that before its data there is
 *  no empty box; give it a child so that it is laid out, and measured at its real width. */
function shown(svg) {
  if (!svg.firstChild) el("g", {}, svg);
}

/** Rows for the data table: one per x of any series, each series' y there, thinned to maxRows. */
function tableRows(series, maxRows = 60) {
  const xs = [...new Set(series.flatMap((s) => s.xs))].sort((a, b) => a - b);
  const maps = series.map((s) => new Map(s.xs.map((x, i) => [x, s.ys[i]])));
  const every = Math.max(1, Math.ceil(xs.length / maxRows));
  return xs.filter((x, i) => i % every === 0 || i === xs.length - 1).map((x) => [x, ...maps.map((m) => m.get(x))]);
}

/**
 * lineChart(svg): a line chart for svg (in a chart_frame), drawn at its shown width and redrawn when
 * that changes. Returns draw(series, opts):
 *   series: [{xs, ys, color: 1–8 | "fg" | "axis", dots?: true (dots only), dash?: "6 4", width?: 2, label}]
 *   opts: {xlabel, ylabel, xmin, xmax, ymin, ymax (a given end is exact; a free one is padded),
 *          summary: the sentence under the chart, table: false to leave the data table alone, maxRows}
 * The frame's data table is filled only while it is open (or when it is opened), so a chart redrawn
 * at every chunk of a run costs no table work.
 */
export function lineChart(svg) {
  const frame = tableFocusable(frameOf(svg));
  const details = frame && frame.querySelector(".kit-chart-data");
  let last = null, tableDirty = false;
  const table = () => {
    if (!last || !details || !details.open || !tableDirty || last[1].table === false) return;
    tableDirty = false;
    const [series, opts] = last;
    const named = series.filter((s) => s.xs.length);
    fillTable(frame, [opts.xlabel || "x", ...named.map((s, i) => s.label || `series ${i + 1}`)], tableRows(named, opts.maxRows));
  };
  if (details) details.addEventListener("toggle", table);
  const render = (series, opts) => {
    shown(svg);
    const { W, H } = svgCanvas(svg, opts.height || 230);
    const L = 58, R = 14, T = 12, B = 42;
    const ok = (v) => v != null && Number.isFinite(v);
    const pts = series.map((s) => s.xs.map((x, i) => [x, s.ys[i]]).filter(([x, y]) => ok(x) && ok(y)));
    const xs = pts.flat().map((p) => p[0]), ys = pts.flat().map((p) => p[1]);
    if (!xs.length) return;
    let x0 = opts.xmin ?? Math.min(...xs), x1 = opts.xmax ?? Math.max(...xs);
    let y0 = opts.ymin ?? Math.min(...ys), y1 = opts.ymax ?? Math.max(...ys);
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    const pad = (y1 - y0) * 0.06 || Math.abs(y0) * 0.1 || 0.5;
    if (opts.ymin == null) y0 -= pad;
    if (opts.ymax == null) y1 += pad;
    const px = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
    const py = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
    for (const v of niceTicks(y0, y1, 4)) {
      el("line", { x1: L, y1: py(v), x2: W - R, y2: py(v), class: "kit-grid" }, svg);
      text(svg, L - 6, py(v) + 4, fmtTick(v), { anchor: "end" });
    }
    for (const v of niceTicks(x0, x1, Math.max(2, Math.min(8, Math.floor((W - L - R) / 80))))) {
      el("line", { x1: px(v), y1: T, x2: px(v), y2: H - B, class: "kit-grid" }, svg);
      text(svg, px(v), H - B + 16, fmtTick(v), { anchor: "middle" });
    }
    el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "kit-axis" }, svg);
    el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "kit-axis" }, svg);
    if (opts.xlabel) text(svg, (L + W - R) / 2, H - 6, opts.xlabel, { anchor: "middle", cls: "kit-axis-title" });
    if (opts.ylabel) text(svg, 0, 0, opts.ylabel, { anchor: "middle", cls: "kit-axis-title", transform: `translate(14 ${(T + H - B) / 2}) rotate(-90)` });
    let auto = 0;
    series.forEach((s, i) => {
      const n = typeof s.color === "number" ? s.color : s.color == null ? ++auto : null;
      const g = el("g", { class: n != null ? `s${n}` : s.color, "data-series": s.label || String(i) }, svg);
      const p = pts[i].filter(([x]) => x >= x0 && x <= x1);
      if (s.dots) {
        for (const [x, y] of p) el("circle", { cx: px(x).toFixed(1), cy: py(y).toFixed(1), r: 4, class: "kit-dot" }, g);
      } else if (p.length) {
        el("polyline", { points: p.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" "), class: "kit-line",
          "stroke-width": s.width ?? 2, "stroke-dasharray": s.dash || null }, g);
      }
    });
  };
  const draw = (series, opts = {}) => {
    last = [series, opts];
    render(series, opts);
    if (opts.summary) describe(frame, opts.summary);
    tableDirty = true;
    table();
  };
  onResize(frame || svg, () => last && render(...last));
  return draw;
}

/**
 * barChart(svg, values, classes, opts): one bar per position (classes[i]: its colour class, e.g.
 * docClass(d) or "axis"), y from 0 to opts.ymax (a taller bar is clipped at the top), drawn at the
 * svg's shown width. opts: {title, ylabel, summary, columns: table headers, rows: table rows}.
 * Exactly one <rect> per value (no frame rect).
 */
export function barChart(svg, values, classes, opts = {}) {
  const frame = tableFocusable(frameOf(svg));
  shown(svg);
  const { W, H } = svgCanvas(svg, 150);
  const L = 64, R = 8, T = 22, B = 24;
  const top = opts.ymax ?? Math.max(...values, 0);
  const bw = (W - L - R) / values.length;
  el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "kit-axis" }, svg);
  el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "kit-axis" }, svg);
  el("line", { x1: L, y1: T, x2: W - R, y2: T, class: "kit-grid" }, svg);
  text(svg, L - 5, T + 4, top > 0 ? fmtCell(top) : "0", { anchor: "end" });
  text(svg, L - 5, H - B + 4, "0", { anchor: "end" });
  if (opts.title) text(svg, L, T - 7, opts.title, { cls: "kit-label kit-title" });
  values.forEach((v, i) => {
    const h = top > 0 ? Math.min(Math.max(v, 0) / top, 1) * (H - T - B) : 0; // above ymax: clipped at the top
    el("rect", { x: (L + i * bw + 0.5).toFixed(1), y: (H - B - h).toFixed(1), width: Math.max(bw - 1, 1).toFixed(1),
      height: h.toFixed(1), class: `kit-area ${classes[i]}`, "data-position": i }, svg);
  });
  text(svg, L, H - 6, "position 0", { anchor: "start" });
  text(svg, W - R, H - 6, String(values.length - 1), { anchor: "end" });
  if (opts.summary) describe(frame, opts.summary);
  if (opts.columns) fillTable(frame, opts.columns, opts.rows || []);
}

/** Redraw fn() when svg's width changes (for barChart). */
export const redrawOnResize = (svg, fn) => onResize(frameOf(svg) || svg, fn);

/**
 * keepFocus(root): the kit's calculator() disables its buttons while a call runs, and a focused
 * button that is disabled drops the keyboard focus to <body>. This gives it back: the button the
 * reader pressed (or that submitted the form) is focused again once data-status leaves "running",
 * if the focus is still nowhere. (Belongs in widget-kit.js's calculator.)
 */
export function keepFocus(root) {
  let pressed = null;
  const remember = (b) => { if (b && b.tagName === "BUTTON") pressed = b; };
  root.addEventListener("click", (e) => remember(e.target.closest && e.target.closest("button")), true);
  root.addEventListener("submit", (e) => remember(e.submitter), true);
  new MutationObserver(() => {
    if (!pressed || root.dataset.status === "running" || root.dataset.status === "loading") return;
    const b = pressed;
    pressed = null;
    setTimeout(() => { // after the calculator has enabled its buttons again
      const a = document.activeElement;
      if ((!a || a === document.body) && b.isConnected && !b.disabled) b.focus();
    }, 0);
  }).observe(root, { attributes: true, attributeFilter: ["data-status"] });
}
