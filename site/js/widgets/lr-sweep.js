// The live learning-rate sweep: a thin view over run:schedule_sweep (pylib.web.schedule_ops, which runs
// pylib.train once per rate). It draws the measured three-seed ladder from results.json (the U-curve)
// and the final loss of each finished live rate on a log axis; a diverged rate is a labelled marker
// at the top. The slider shows where one rate falls on the measured curve while it is dragged (the two
// measured rungs around it in full colour) and, let go, trains at that rate. A second chart shows, for
// the slider's rate, the measured validation curves of the two nearest rungs (results.json's
// ch6.ladder.val_curves: mean ± sd over seeds, on the same subset of windows) and, over them, this
// page's run at that rate as it trains (its batch loss per chunk, then its final validation loss).

import { fmtTick, fillTable, describe, frameOf, onResize, svgCanvas, svgEl as el, svgText as text } from "../plot.js";
import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";

/** A rate as the reader would type it: 0.0017, 0.03, 3, 2e-5 (three significant digits at most). */
const lrText = (lr) => {
  const v = +lr.toPrecision(3);
  return v >= 1e-4 && v < 1e4 ? String(v) : v.toExponential();
};
const nSeeds = (ladder, i) => ladder.finals[i].length;

/** The measured rungs around lr: {below, above} indices into the ladder (either may be null). */
function nearestRungs(ladder, lr) {
  if (!ladder || !(lr > 0)) return { below: null, above: null };
  let below = null, above = null;
  ladder.lrs.forEach((x, i) => {
    if (x <= lr && (below == null || x > ladder.lrs[below])) below = i;
    if (x >= lr && (above == null || x < ladder.lrs[above])) above = i;
  });
  return { below, above };
}

function rungText(ladder, i) {
  const m = ladder.final_mean[i];
  return m == null
    ? `${lrText(ladder.lrs[i])} (${ladder.diverged[i]} of ${nSeeds(ladder, i)} seeds diverged)`
    : `${lrText(ladder.lrs[i])} (${m.toFixed(3)} ± ${ladder.final_sd[i].toFixed(3)})`;
}

/** The two measured rungs whose curves are drawn for lr, lower rate first: the rungs on either side of
 *  it or, when lr is a rung or lies outside the ladder, the two nearest on a log scale. */
function curveRungs(ladder, lr) {
  if (!ladder || !(lr > 0) || !ladder.lrs.length) return [];
  const { below, above } = nearestRungs(ladder, lr);
  if (below != null && above != null && below !== above) return [below, above];
  const byDistance = ladder.lrs.map((x, i) => [Math.abs(Math.log10(x / lr)), i]).sort((a, b) => a[0] - b[0]);
  return byDistance.slice(0, 2).map(([, i]) => i).sort((a, b) => a - b);
}
const RUNG_CLASSES = ["s1", "s5"]; // the two measured rungs' colours on both charts; this page's runs are s2

/** Where lr falls on the measured curve, in words. */
function whereText(ladder, lr) {
  if (!ladder) return `lr ${lrText(lr)}: no measured ladder to compare with.`;
  const { below, above } = nearestRungs(ladder, lr);
  if (below != null && below === above) return `lr ${lrText(lr)} is a measured rung: final validation loss ${rungText(ladder, below)}.`;
  if (below == null) return `lr ${lrText(lr)} is below the measured ladder; its lowest rung is ${rungText(ladder, above)}.`;
  if (above == null) return `lr ${lrText(lr)} is above the measured ladder; its highest rung is ${rungText(ladder, below)}.`;
  return `lr ${lrText(lr)} lies between the measured rungs ${rungText(ladder, below)} and ${rungText(ladder, above)}.`;
}

/** The chart: measured ladder (mean ± sd, diverged counts), the good band, the live rungs and the slider's rate. */
function drawChart(svg, cfg, live, rates, marker) {
  const { W, H } = svgCanvas(svg, 320);
  const L = 56, R = 16, T = 60, B = 40;
  const ladder = cfg.ladder;
  const lrs = [...(ladder ? ladder.lrs : []), ...rates, ...(marker ? [marker] : [])];
  if (!lrs.length) return;
  const lx0 = Math.floor(Math.log10(Math.min(...lrs)) - 0.25), lx1 = Math.ceil(Math.log10(Math.max(...lrs)) + 0.25);
  const ys = [];
  if (ladder) ladder.final_mean.forEach((m, i) => { if (m != null) ys.push(m - ladder.final_sd[i], m + ladder.final_sd[i]); });
  for (const r of live) if (r.final_val != null) ys.push(r.final_val);
  let y0 = ys.length ? Math.min(...ys) : 2, y1 = ys.length ? Math.max(...ys) : cfg.ln_vocab;
  const pad = Math.max(0.05, (y1 - y0) * 0.08);
  y0 -= pad; y1 += pad;
  const px = (lr) => L + ((Math.log10(lr) - lx0) / (lx1 - lx0)) * (W - L - R);
  const py = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  const liveRow = 16, measuredRow = 38; // the strips for diverged markers: this page's, then measured
  if (cfg.good_band && cfg.good_band[0] != null) { // the good band, behind everything
    const a = px(cfg.good_band[0] / 10 ** 0.25), b = px(cfg.good_band[1] * 10 ** 0.25);
    el("rect", { x: a, y: T, width: Math.max(b - a, 2), height: H - T - B, class: "kit-band" }, svg);
  }
  // axes, with a tick and a gridline at every decade
  for (let e = lx0; e <= lx1; e++) {
    el("line", { x1: px(10 ** e), y1: T, x2: px(10 ** e), y2: H - B, class: "kit-grid" }, svg);
    text(svg, px(10 ** e), H - B + 16, fmtTick(10 ** e), { anchor: "middle" });
  }
  for (let i = 0; i <= 4; i++) {
    const v = y0 + ((y1 - y0) * i) / 4;
    el("line", { x1: L, y1: py(v), x2: W - R, y2: py(v), class: "kit-grid" }, svg);
    text(svg, L - 6, py(v) + 4, v.toFixed(2), { anchor: "end" });
  }
  el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "kit-axis" }, svg);
  el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "kit-axis" }, svg);
  text(svg, (L + W - R) / 2, H - 6, "learning rate (log scale)", { anchor: "middle", cls: "kit-axis-title" });
  text(svg, 4, liveRow + 4, "diverged here:", { cls: "kit-label diverged-label" });
  if (ladder) text(svg, 4, measuredRow + 4, "measured, seeds diverged:");
  // the measured ladder: the U-curve through the means, each rung's ± sd; the rungs around the slider in full colour
  if (ladder) {
    const near = marker ? nearestRungs(ladder, marker) : { below: null, above: null };
    const curved = marker ? curveRungs(ladder, marker) : []; // in their curves' colours (the second chart)
    const colour = (i) => (curved.includes(i) ? " " + RUNG_CLASSES[curved.indexOf(i)] : "");
    const g = el("g", { class: "s3" }, svg);
    const pts = ladder.lrs.map((lr, i) => [lr, ladder.final_mean[i]]).filter(([, m]) => m != null);
    el("polyline", { points: pts.map(([lr, m]) => `${px(lr).toFixed(1)},${py(m).toFixed(1)}`).join(" "), class: "kit-line kit-faint", "stroke-width": 1.5 }, g);
    ladder.lrs.forEach((lr, i) => {
      const m = ladder.final_mean[i], sd = ladder.final_sd[i];
      const faint = marker && i !== near.below && i !== near.above ? " kit-faint" : "";
      if (m != null) {
        el("line", { x1: px(lr), y1: py(m - sd), x2: px(lr), y2: py(m + sd), class: "kit-line" + faint + colour(i) }, g);
        el("circle", { cx: px(lr), cy: py(m), r: faint || !marker ? 4 : 6, class: "kit-dot" + faint + colour(i), "data-rung": i }, g);
      }
      if (ladder.diverged[i] > 0) {
        el("path", { d: `M${px(lr) - 5},${measuredRow + 4} l5,-9 l5,9 z`, class: "kit-area" + faint }, g);
        text(svg, px(lr), measuredRow + 17, `${ladder.diverged[i]}/${nSeeds(ladder, i)}`, { anchor: "middle" });
      }
    });
  }
  // the slider's rate
  if (marker) {
    const x = px(marker);
    el("line", { x1: x, y1: T - 6, x2: x, y2: H - B, class: "kit-marker", "data-role": "marker" }, svg);
    const right = x < W - 90;
    text(svg, x + (right ? 5 : -5), T - 8, `lr ${lrText(marker)}`, { anchor: right ? "start" : "end", cls: "kit-marker-label" });
  }
  // this page's rungs
  const g = el("g", { class: "s2" }, svg);
  for (const r of live) {
    if (r.final_val != null) {
      el("circle", { cx: px(r.lr), cy: py(r.final_val), r: 5, class: "kit-dot" }, g);
    } else {
      el("path", { d: `M${px(r.lr) - 6},${liveRow + 5} l6,-11 l6,11 z`, class: "kit-area" }, g);
      const right = px(r.lr) < W - 150;
      text(svg, px(r.lr) + (right ? 8 : -8), liveRow + 4, `diverged at step ${r.diverged_at}`,
        { cls: "kit-label diverged-label", anchor: right ? "start" : "end" });
    }
  }
}

/** The text alternative: one row per rate, measured and live side by side, and a sentence. */
function describeChart(svg, cfg, live) {
  const frame = frameOf(svg);
  const ladder = cfg.ladder;
  const byLr = new Map();
  if (ladder) ladder.lrs.forEach((lr, i) => byLr.set(lr, { lr, m: ladder.final_mean[i], sd: ladder.final_sd[i], div: `${ladder.diverged[i]}/${nSeeds(ladder, i)}` }));
  for (const r of live) byLr.set(r.lr, { ...(byLr.get(r.lr) || { lr: r.lr }), live: r.final_val != null ? r.final_val : `diverged at step ${r.diverged_at}` });
  const rows = [...byLr.values()].sort((a, b) => a.lr - b.lr).map((r) => [lrText(r.lr), r.m, r.sd, r.div ?? "–", r.live ?? "–"]);
  fillTable(frame, ["learning rate", "measured mean", "measured sd", "seeds diverged", "this page"], rows);
  const parts = [];
  if (ladder) {
    let best = null;
    ladder.final_mean.forEach((m, i) => { if (m != null && (best == null || m < ladder.final_mean[best])) best = i; });
    const diverged = ladder.lrs.filter((lr, i) => ladder.diverged[i] > 0).map(lrText);
    if (best != null) parts.push(`Measured (${nSeeds(ladder, best)} seeds): the lowest final validation loss, ${ladder.final_mean[best].toFixed(3)}, is at lr ${lrText(ladder.lrs[best])}` +
      (diverged.length ? `; seeds diverged at lr ${diverged.join(", ")}.` : "."));
  }
  if (live.length) parts.push("This page: " + live.map((r) => (r.final_val != null ? `lr ${lrText(r.lr)} ${r.final_val.toFixed(3)}` : `lr ${lrText(r.lr)} diverged at step ${r.diverged_at}`)).join(", ") + ".");
  describe(frame, parts.join(" ") || "No measured ladder and no runs yet.");
}

// ---------------------------------------------------------------------------
// The second chart: loss against step for the slider's rate

/** What the curves chart shows for rate lr: the measured rungs' curves and this page's run at lr, if any. */
function curvesFor(cfg, lr, trace) {
  const vc = cfg.val_curves;
  const rungs = vc && lr > 0 ? curveRungs(vc, lr).map((i, k) => ({
    index: i, lr: vc.lrs[i], cls: RUNG_CLASSES[k], n_seeds: vc.n_seeds, eval_windows: vc.eval_windows,
    steps: vc.steps.slice(0, vc.mean[i].length), mean: vc.mean[i], sd: vc.sd ? vc.sd[i] : null,
    diverged_at: cfg.ladder ? cfg.ladder.diverged_at[i].filter((d) => d != null) : [],
  })) : [];
  const live = trace && trace.lr === lr ? trace : null;
  return { rungs, live };
}

/** "mean of 3 seeds, 128-window subset", with where the mean ends if a seed diverged. */
function rungNote(r) {
  const text = `measured, mean of ${r.n_seeds} seeds, ${r.eval_windows}-window subset`;
  if (!r.diverged_at.length) return text;
  return `${text}; ${r.diverged_at.length} of ${r.n_seeds} seeds diverged (at step ${r.diverged_at.join(", ")}), ` +
    `so the mean ends at step ${r.steps[r.steps.length - 1]}`;
}

function liveNote(t) {
  if (t.diverged_at != null) return `this page: diverged at step ${t.diverged_at}`;
  if (t.final_val != null) return `this page: batch loss; final validation loss ${t.final_val.toFixed(3)}`;
  return "this page: batch loss, training";
}

/** The curves chart: each measured rung's mean (dots at its evaluation steps) with a ± sd shade, and
 *  this page's run at the same rate over them. Sets svg.drawnRungs / svg.drawnLive (what is drawn). */
function drawCurves(svg, cfg, lr, trace, limit) {
  const { rungs, live } = curvesFor(cfg, lr, trace);
  svg.drawnRungs = rungs.map(({ lr, steps, mean, sd, n_seeds }) => ({ lr, steps, mean, sd, n_seeds }));
  svg.drawnLive = live && { lr: live.lr, points: live.points.map((p) => [...p]), final_val: live.final_val, diverged_at: live.diverged_at };
  if (!rungs.length && !live) {
    svg.replaceChildren();
    svg.dataset.empty = "";
    return;
  }
  delete svg.dataset.empty;
  const key = [...rungs.map((r) => [r.cls, `lr ${lrText(r.lr)}: ${rungNote(r)}`, `lr ${lrText(r.lr)}: measured, ${r.n_seeds} seeds` +
    (r.diverged_at.length ? `, ${r.diverged_at.length} diverged by step ${Math.max(...r.diverged_at)}` : "")]),
    ...(live ? [["s2", `lr ${lrText(live.lr)}: ${liveNote(live)}`, `lr ${lrText(live.lr)}: this page`]] : [])];
  const rowH = 18, L = 56, R = 16, B = 40, T = 14 + rowH * key.length;
  const { W, H } = svgCanvas(svg, 230 + T);
  const lastStep = cfg.steps - 1;
  const ys = [];
  for (const r of rungs) r.mean.forEach((m, j) => ys.push(m + (r.sd ? r.sd[j] : 0), m - (r.sd ? r.sd[j] : 0)));
  if (live) {
    for (const [, loss] of live.points) if (Number.isFinite(loss) && (limit == null || loss <= limit)) ys.push(loss);
    if (live.final_val != null) ys.push(live.final_val);
  }
  let y0 = Math.min(...ys), y1 = Math.max(...ys);
  const pad = Math.max(0.05, (y1 - y0) * 0.06);
  y0 -= pad; y1 += pad;
  const px = (step) => L + (step / lastStep) * (W - L - R);
  const py = (y) => H - B - ((Math.min(Math.max(y, y0), y1) - y0) / (y1 - y0)) * (H - T - B);
  for (let i = 0; i <= 4; i++) { // step ticks at quarters of the run, loss ticks at quarters of the range
    const step = Math.round((lastStep + 1) * i / 4), v = y0 + ((y1 - y0) * i) / 4;
    el("line", { x1: px(step), y1: T, x2: px(step), y2: H - B, class: "kit-grid" }, svg);
    text(svg, px(step), H - B + 16, String(step), { anchor: "middle" });
    el("line", { x1: L, y1: py(v), x2: W - R, y2: py(v), class: "kit-grid" }, svg);
    text(svg, L - 6, py(v) + 4, v.toFixed(2), { anchor: "end" });
  }
  el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "kit-axis" }, svg);
  el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "kit-axis" }, svg);
  text(svg, (L + W - R) / 2, H - 6, "step", { anchor: "middle", cls: "kit-axis-title" });
  key.forEach(([cls, label, short], k) => { // the key: which line is which rate (shorter on a narrow chart)
    const y = 12 + rowH * k;
    el("line", { x1: 4, y1: y - 4, x2: 26, y2: y - 4, class: `kit-line ${cls}` }, svg);
    const t = text(svg, 32, y, label);
    if (t.getComputedTextLength() > W - 36) t.textContent = short;
  });
  const path = (pts) => pts.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(" ");
  for (const r of rungs) {
    const g = el("g", { class: `${r.cls} sweep-rung`, "data-rung-lr": r.lr }, svg);
    if (r.sd && r.steps.length > 1) {
      const upper = r.steps.map((s, j) => [s, r.mean[j] + r.sd[j]]);
      const lower = r.steps.map((s, j) => [s, r.mean[j] - r.sd[j]]).reverse();
      el("polygon", { points: path([...upper, ...lower]), class: "kit-area sweep-sd" }, g);
    }
    if (r.steps.length > 1) el("polyline", { points: path(r.steps.map((s, j) => [s, r.mean[j]])), class: "kit-line" }, g);
    r.steps.forEach((s, j) => el("circle", { cx: px(s), cy: py(r.mean[j]), r: 2.5, class: "kit-dot" }, g));
  }
  if (live) {
    const g = el("g", { class: "s2 sweep-live", "data-live-lr": live.lr }, svg);
    const pts = live.points.filter(([, loss]) => Number.isFinite(loss));
    if (pts.length > 1) el("polyline", { points: path(pts), class: "kit-line sweep-live-line" }, g);
    else if (pts.length) el("circle", { cx: px(pts[0][0]), cy: py(pts[0][1]), r: 2.5, class: "kit-dot" }, g);
    if (live.final_val != null) el("circle", { cx: px(lastStep), cy: py(live.final_val), r: 5, class: "kit-dot sweep-live-final" }, g);
    if (live.diverged_at != null) {
      const x = px(Math.min(live.diverged_at, lastStep)), right = x < W - 150;
      el("path", { d: `M${x - 6},${T + 11} l6,-11 l6,11 z`, class: "kit-area" }, g);
      text(svg, x + (right ? 8 : -8), T + 10, `diverged at step ${live.diverged_at}`, { anchor: right ? "start" : "end", cls: "kit-label sweep-diverged" });
    }
  }
}

/** The curves chart's text alternative: a sentence, and one table row per step drawn. */
function describeCurves(svg, cfg, lr, trace) {
  const frame = frameOf(svg);
  const { rungs, live } = curvesFor(cfg, lr, trace);
  if (!rungs.length && !live) {
    describe(frame, cfg.val_curves ? "Drag the slider: the measured validation curves of the two rungs nearest its rate are drawn here."
      : "No measured curves (results.json has no ch6.ladder.val_curves) and no run yet.");
    fillTable(frame, ["step"], []);
    return;
  }
  const parts = [];
  if (rungs.length) {
    const r0 = rungs[0];
    parts.push(`Validation loss during training for the measured rungs nearest lr ${lrText(lr)} (mean of ${r0.n_seeds} seeds, ` +
      `the same ${r0.eval_windows} validation windows): ` + rungs.map((r) => {
      const n = r.steps.length - 1;
      return n > 0 ? `lr ${lrText(r.lr)} from ${r.mean[0].toFixed(3)} at step ${r.steps[0]} to ${r.mean[n].toFixed(3)} at step ${r.steps[n]}`
        + (r.diverged_at.length ? ` (then ${r.diverged_at.length} of ${r.n_seeds} seeds diverged)` : "")
        : `lr ${lrText(r.lr)} ${r.mean[0].toFixed(3)} at step ${r.steps[0]}, then ${r.diverged_at.length} of ${r.n_seeds} seeds diverged by step ${Math.max(...r.diverged_at)}`;
    }).join("; ") + ".");
  }
  if (live) {
    const pts = live.points.filter(([, loss]) => Number.isFinite(loss));
    const last = pts[pts.length - 1];
    parts.push(`This page's run at lr ${lrText(live.lr)}: ` + [
      last ? `batch loss ${last[1].toFixed(3)} at step ${last[0]}` : null,
      live.final_val != null ? `final validation loss ${live.final_val.toFixed(3)} on the same windows` : null,
      live.diverged_at != null ? `diverged at step ${live.diverged_at}` : null,
    ].filter(Boolean).join("; ") + ".");
  }
  describe(frame, parts.join(" "));
  const lastStep = cfg.steps - 1;
  const rows = new Map(); // step -> {cells}
  const row = (step) => { if (!rows.has(step)) rows.set(step, {}); return rows.get(step); };
  rungs.forEach((r, k) => r.steps.forEach((s, j) => Object.assign(row(s), { [`m${k}`]: r.mean[j], [`s${k}`]: r.sd ? r.sd[j] : null })));
  if (live) {
    for (const [s, loss] of live.points) row(s).batch = loss;
    if (live.final_val != null) row(lastStep).val = live.final_val;
  }
  const columns = ["step", ...rungs.flatMap((r) => [`lr ${lrText(r.lr)} measured mean`, `lr ${lrText(r.lr)} measured sd`]),
    ...(live ? [`lr ${lrText(live.lr)} this page: batch loss`, `lr ${lrText(live.lr)} this page: validation loss`] : [])];
  fillTable(frame, columns, [...rows.entries()].sort((a, b) => a[0] - b[0]).map(([s, c]) => [
    s, ...rungs.flatMap((r, k) => [c[`m${k}`], c[`s${k}`]]), ...(live ? [c.batch, c.val] : [])]));
}

export async function mount(root, client) {
  const cfg = readConfig(root);
  const svg = root.querySelector('[data-role="chart"]');
  const curvesSvg = root.querySelector('[data-role="curves"]');
  const where = root.querySelector('[data-role="where"]');
  const readouts = readoutMap(root);
  let live = [];
  let rates = [];
  let marker = null;
  let focus = null; // the rate whose measured neighbours the curves chart shows: the slider's, or the rung training
  let trace = null; // this page's latest rung: {lr, points: [[step, batch loss]], final_val, diverged_at}
  let limit = null; // the divergence threshold (2 ln V), from the run's start
  const drawCurvesNow = () => drawCurves(curvesSvg, cfg, focus, trace, limit);
  const draw = () => { drawChart(svg, cfg, live, rates, marker); drawCurvesNow(); };
  const describeCurvesNow = () => describeCurves(curvesSvg, cfg, focus, trace);
  const redraw = () => { draw(); describeChart(svg, cfg, live); describeCurvesNow(); };
  const traceOf = (lr) => {
    if (!trace || trace.lr !== lr) trace = { lr, points: [], final_val: null, diverged_at: null };
    focus = lr;
    return trace;
  };

  const fields = bindFields(root, {
    onSlide(name, lr) { // at once: where the rate falls on the measured curve, and the nearest rungs' curves
      marker = lr;
      focus = lr;
      draw();
      describeCurvesNow();
      where.textContent = whereText(cfg.ladder, lr);
      root.querySelector('[data-slider-for="rates"]').setAttribute("aria-valuetext", where.textContent);
    },
    onCommit() { // let go: train at that rate (unless a run is going, or Python is not ready yet)
      if (!run.running && !root.querySelector('[data-action="run"]').disabled) run.start();
    },
  });
  const describeRung = (r) => (r.final_val != null ? `lr ${lrText(r.lr)}: ${r.final_val.toFixed(3)}` : `lr ${lrText(r.lr)}: diverged at step ${r.diverged_at}`);

  const run = runStreamed(root, client, {
    op: "run:schedule_sweep",
    fields,
    args: () => fields.values(),
    announceStart: "Sweep started.",
    onClear() {
      for (const r of Object.values(readouts)) r.textContent = "–";
      live = [];
      trace = null;
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        rates = ev.info.rates;
        limit = ev.info.limit;
        traceOf(rates[0]);
        redraw();
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      for (const r of c.finished) Object.assign(traceOf(r.lr), { final_val: r.final_val, diverged_at: r.diverged_at });
      if (c.step != null && c.index < rates.length) { // the rung now training; its last record is step c.step - 1
        const t = traceOf(rates[c.index]);
        if (c.loss != null) t.points.push([c.step - 1, c.loss]);
      }
      if (c.finished.length) {
        live.push(...c.finished);
        redraw();
      } else {
        drawCurvesNow();
        describeCurvesNow();
      }
      const i = Math.min(c.index, rates.length - 1);
      readouts.rung.textContent = `${Math.min(c.index + 1, rates.length)} of ${rates.length}`;
      readouts.lr.textContent = lrText(rates[i]);
      readouts.step.textContent = c.step == null ? "–" : String(c.step);
      readouts.loss.textContent = c.loss == null ? "–" : c.loss.toFixed(3);
      return c.done ? "Finishing…" : `Training rate ${c.index + 1} of ${rates.length} (lr ${lrText(rates[i])})…`;
    },
    onResult(value) {
      const r = value.result;
      live = r.rungs;
      redraw();
      const summary = r.rungs.map(describeRung).join("; ");
      if (value.stopped) {
        return { status: "stopped", text: `Stopped after ${r.rungs.length} of ${r.rates.length} rates${summary ? ": " + summary : ""}. Press Start to run again.` };
      }
      return { status: "done", result: { seed: r.seed, steps: r.steps, rungs: r.rungs }, text: `Done. Final validation loss after ${r.steps} steps: ${summary}.` };
    },
  });

  redraw(); // the measured ladder and curves need no Python
  onResize(svg, draw);
  onResize(curvesSvg, drawCurvesNow);
  await run.ready();
}
