// A small wrapper around uPlot (vendored, loaded as the global `uPlot`) for the loss-vs-step chart.
// It only draws: every number it shows comes from pylib.web (records, band series, reference lines).

const COLORS = {
  train: "rgba(42, 93, 176, 0.35)",
  smooth: "#2a5db0",
  val: "#d9480f",
  band: "rgba(27, 122, 67, 0.16)",
  bandEdge: "rgba(27, 122, 67, 0.55)",
  ref: "#6b6b6b",
};

function fmt(v, digits = 3) {
  return v == null ? "–" : v.toFixed(digits);
}

export class LossChart {
  /** el: the container; refs: [{value, label}] horizontal reference lines. */
  constructor(el, { refs = [] } = {}) {
    this.el = el;
    this.refs = refs;
    this.plot = null;
    this.reset(1, null);
    if (typeof ResizeObserver !== "undefined") {
      this.resize = new ResizeObserver(() => this.plot && this.plot.setSize(this.size()));
      this.resize.observe(el);
    }
  }

  size() {
    const width = Math.max(280, this.el.clientWidth || 600);
    return { width, height: width < 500 ? 240 : 300 };
  }

  /** Start over with x = 0..n-1 and an optional band of length n from pylib.web.band_series: {mean, lo, hi}
   *  is shaded between lo and hi; lo_k and hi_k, where given, are drawn as dotted flag limits. */
  reset(n, band) {
    const nulls = () => new Array(n).fill(null);
    const x = Array.from({ length: n }, (_, i) => i);
    const b = band || {};
    this.data = [
      x,
      nulls(), // 1 train loss per step
      nulls(), // 2 its moving average
      nulls(), // 3 train loss on fixed training windows, at eval steps
      nulls(), // 4 validation loss at eval steps
      b.hi || nulls(), // 5 band: upper edge
      b.lo || nulls(), // 6 band: lower edge
      b.hi_k || nulls(), // 7 flag limit above
      b.lo_k || nulls(), // 8 flag limit below
      ...this.refs.map((r) => new Array(n).fill(r.value)), // 9.. reference lines
    ];
    this.hasBand = Boolean(band);
    this.el.drawnBand = band; // what is drawn, for the browser tests (a DOM property, not markup)
    if (this.plot) this.plot.destroy();
    this.plot = new uPlot(this.options(), this.data, this.el);
  }

  options() {
    const refs = this.refs;
    const points = (size, color) => ({ show: true, size, fill: color, stroke: color });
    const hidden = { show: false };
    return {
      ...this.size(),
      scales: { x: { time: false } },
      axes: [
        { label: "step", stroke: "#444", grid: { stroke: "#eee" } },
        { label: "loss (nats/token)", stroke: "#444", grid: { stroke: "#eee" }, size: 56 },
      ],
      legend: { show: false }, // the legend is HTML, in the widget template
      cursor: { drag: { x: false, y: false } },
      series: [
        { label: "step" },
        { label: "train loss", stroke: COLORS.train, width: 1, points: hidden, value: (u, v) => fmt(v) },
        { label: "train (moving avg)", stroke: COLORS.smooth, width: 2, points: hidden, value: (u, v) => fmt(v) },
        { label: "train (eval windows)", stroke: COLORS.smooth, width: 0, paths: () => null, points: points(6, COLORS.smooth), value: (u, v) => fmt(v) },
        { label: "val loss", stroke: COLORS.val, width: 0, paths: () => null, points: points(7, COLORS.val), value: (u, v) => fmt(v) },
        { label: "measured band, upper edge", stroke: COLORS.bandEdge, width: 0.5, points: hidden, show: this.hasBand, value: (u, v) => fmt(v) },
        { label: "measured band, lower edge", stroke: COLORS.bandEdge, width: 0.5, points: hidden, show: this.hasBand, value: (u, v) => fmt(v) },
        { label: "flag limit", stroke: COLORS.bandEdge, width: 1, dash: [2, 3], points: hidden, show: this.hasBand, value: (u, v) => fmt(v) },
        { label: "flag limit (low)", stroke: COLORS.bandEdge, width: 1, dash: [2, 3], points: hidden, show: this.hasBand, value: (u, v) => fmt(v) },
        ...refs.map((r) => ({ label: r.label, stroke: COLORS.ref, width: 1, dash: [6, 4], points: hidden, value: (u, v) => fmt(v) })),
      ],
      bands: [{ series: [5, 6], fill: COLORS.band }],
      hooks: {
        draw: [
          (u) => {
            const ctx = u.ctx;
            const dpr = window.devicePixelRatio || 1;
            ctx.save();
            ctx.font = `${11 * dpr}px system-ui, sans-serif`;
            ctx.fillStyle = COLORS.ref;
            ctx.textAlign = "right";
            for (const r of refs) {
              const y = u.valToPos(r.value, "y", true);
              if (y < u.bbox.top || y > u.bbox.top + u.bbox.height) continue;
              ctx.fillText(`${r.label} ${r.value.toFixed(3)}`, u.bbox.left + u.bbox.width - 6 * dpr, y - 4 * dpr);
            }
            ctx.restore();
          },
        ],
      },
    };
  }

  /** Add records from pylib.train (via pylib.web): {step, loss, loss_smooth, train_eval?, val?}. */
  add(records) {
    const [x, train, smooth, trainEval, val] = this.data;
    for (const r of records) {
      if (r.step >= x.length || r.diverged) continue; // the readouts show it; plotted, it would flatten the curve
      if (r.loss != null) train[r.step] = r.loss;
      if (r.loss_smooth != null) smooth[r.step] = r.loss_smooth;
      if (r.train_eval != null) trainEval[r.step] = r.train_eval;
      if (r.val != null) val[r.step] = r.val;
    }
  }

  redraw() {
    this.plot.setData(this.data);
  }
}
