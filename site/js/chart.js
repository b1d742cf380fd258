// The loss-vs-step chart of the training widgets (train, depth-train, optimisers, slow-train), on
// plot.js (uPlot, theme colours, text alternative). It only draws: every number it shows comes from
// pylib.web (records, band series, reference lines).
//
// Colours (legend swatches in the templates use the same kit-swatch classes, site/css/widgets/kit.css):
//   train loss per batch  --series-6, thin     (kit-swatch line thin s6)
//   its moving average    --series-1           (kit-swatch line s1)
//   train, fixed windows  --series-4, dots     (kit-swatch dot s4)
//   val loss              --series-2, dots     (kit-swatch dot s2)
//   measured band         --band, edges and dotted flag limits --chart-axis (kit-swatch band)
//   reference lines       --chart-axis, dashed (kit-swatch line dash axis)

import { Plot, ends, fmtCell } from "./plot.js";

export class LossChart {
  /** el: the container (a chart_frame's [data-role=chart]); refs: [{value, label}] horizontal reference lines. */
  constructor(el, { refs = [] } = {}) {
    this.el = el;
    this.refs = refs;
    this.plot = null;
    this.drawn = false;
    this.reset(1, null, false);
  }

  /** Start over with x = 0..n-1 and an optional band of length n from pylib.web.band_series: {mean, lo, hi}
   *  is shaded between lo and hi; lo_k and hi_k, where given, are drawn as dotted flag limits. A band is
   *  drawn at once; otherwise the chart (or its placeholder) waits for redraw(). */
  reset(n, band, draw = true) {
    const nulls = () => new Array(n).fill(null);
    const b = band || {};
    this.data = [
      Array.from({ length: n }, (_, i) => i),
      nulls(), // 1 train loss per step
      nulls(), // 2 its moving average
      nulls(), // 3 train loss on fixed training windows, at eval steps
      nulls(), // 4 validation loss at eval steps
      b.hi || nulls(), // 5 band: upper edge
      b.lo || nulls(), // 6 band: lower edge
      b.hi_k || nulls(), // 7 flag limit above
      b.lo_k || nulls(), // 8 flag limit below
    ];
    const hasBand = Boolean(band), hasFlag = Boolean(b.hi_k);
    this.el.drawnBand = band; // what is drawn, for the browser tests (a DOM property, not markup)
    if (this.plot) this.plot.destroy();
    this.plot = new Plot(this.el, {
      x: { label: "step" },
      y: { label: "loss (nats/token)" },
      refs: this.refs,
      series: [
        { label: "train loss", color: 6, width: 1 },
        { label: "train (moving avg)", color: 1, width: 2 },
        { label: "train (fixed windows)", color: 4, points: true },
        { label: "val loss", color: 2, points: true, size: 7 },
        { label: "band upper edge", color: "axis", width: 0.5, hidden: !hasBand },
        { label: "band lower edge", color: "axis", width: 0.5, hidden: !hasBand },
        { label: "flag limit", color: "axis", width: 1, dash: [2, 3], hidden: !hasFlag },
        { label: "flag limit (low)", color: "axis", width: 1, dash: [2, 3], hidden: !hasFlag },
      ],
      bands: hasBand ? [[5, 6]] : [],
    });
    if (draw && (hasBand || this.drawn)) this.redraw();
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
    this.drawn = true;
    this.plot.setData(this.data);
    this.plot.describe(this.summary());
  }

  /** One sentence for the text alternative, from the data drawn. */
  summary() {
    const [x, , smooth, , val, hi, lo] = this.data;
    const v = ends(x, val), s = ends(x, smooth);
    const parts = [];
    if (v) parts.push(`Validation loss went from ${fmtCell(v.y0)} at step ${v.x0} to ${fmtCell(v.y1)} at step ${v.x1}`);
    if (s) parts.push(`the training loss (moving average) from ${fmtCell(s.y0)} to ${fmtCell(s.y1)} over ${s.x1 + 1} steps`);
    const b = ends(x, hi), l = ends(x, lo);
    const band = b && l ? ` The measured band ends at ${fmtCell(l.y1)} to ${fmtCell(b.y1)} at step ${b.x1}.` : "";
    if (!parts.length) return `No run yet.${band}`;
    return `${parts.join("; ")}.${band}`;
  }
}
