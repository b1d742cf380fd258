// The IsoFLOP explorer: a thin view over scaling_isoflop (pylib.web.scaling_ops -> pylib.studies.scaling).
// The measured sweep comes from the page (results.json at build time); pylib fits it; this file draws
// Hoffmann et al. 2022's figure 3 for this toy: left, every budget's IsoFLOP profile (its points, the
// parabola fitted through them and its minimum); right, the minima against compute in log-log with the
// power law fitted through them and the reader's prediction on it. Everything updates live: the budget's
// select, the prediction's log slider and typing each ask again (the newest answer wins).

import { decadeTicks, describe, fillTable, fmtTick, frameOf, niceTicks, onResize, svgCanvas, svgEl as el, svgText as text } from "../plot.js";
import { bindFields, calculator, readConfig, readoutMap } from "../widget-kit.js";

const H = 300, PAD = { l: 56, r: 16, t: 14, b: 40 };
const fmtInt = (v) => (v >= 1e6 ? v.toExponential(2) : Math.round(v).toLocaleString("en"));
/** A budget as the select shows it: 3e9, 1.2e10. */
export function fmtBudget(c) {
  const e = Math.floor(Math.log10(c) + 1e-9);
  return `${+(c / 10 ** e).toPrecision(2)}e${e}`;
}
// The budgets' ordered ramp (scaling.css: --iso-lo for the smallest budget, --iso-hi for the largest),
// so a budget's shade says where it stands; its label says which it is.
const rampColour = (rank, count) =>
  `color-mix(in oklab, var(--iso-hi) ${count > 1 ? Math.round((100 * rank) / (count - 1)) : 100}%, var(--iso-lo))`;

/** The plot area of a chart W wide; x and y map data to pixels through the given [lo, hi] ranges. */
function frame(W, [x0, x1], [y0, y1], logX, logY) {
  const fx = logX ? Math.log : (v) => v, fy = logY ? Math.log : (v) => v;
  return {
    px: (v) => PAD.l + ((fx(v) - x0) / (x1 - x0)) * (W - PAD.l - PAD.r),
    py: (v) => H - PAD.b - ((fy(v) - y0) / (y1 - y0)) * (H - PAD.t - PAD.b),
  };
}

/** The axes' lines and titles. */
function axes(svg, W, xTitle, yTitle) {
  el("line", { class: "kit-axis", x1: PAD.l, y1: H - PAD.b, x2: W - PAD.r, y2: H - PAD.b }, svg);
  el("line", { class: "kit-axis", x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: H - PAD.b }, svg);
  text(svg, (W + PAD.l) / 2, H - 6, xTitle, { anchor: "middle", cls: "kit-axis-title" });
  text(svg, 14, PAD.t + 8, yTitle, { anchor: "end", cls: "kit-axis-title", transform: `rotate(-90 14 ${PAD.t + 8})` });
}

/** Log-axis ticks (decades, or 1-2-5 inside one), every k-th so that neighbours are gap px apart. */
function thinned(ticks, pos, gap) {
  const out = [];
  let last = -Infinity;
  for (const v of ticks) if (Math.abs(pos(v) - last) >= gap) { out.push(v); last = pos(v); }
  return out;
}

/** Ticks for a log axis from lo to hi: decades, or 1-2-5 steps inside one, or, where even those give
 *  fewer than two, round values (1, 2 or 5 × 10^k apart) placed on the log scale. */
function logTicks(lo, hi) {
  const ticks = decadeTicks(lo, hi);
  return ticks.length >= 2 ? ticks : niceTicks(lo, hi, 3).filter((v) => v > 0);
}

/** A path through points (xs, ys) already in pixels. */
const pathOf = (xs, ys) => xs.map((x, i) => `${i ? "L" : "M"}${x.toFixed(1)},${ys[i].toFixed(1)}`).join("");

// ---------------------------------------------------------------------------
// Left: the family of IsoFLOP profiles, loss against N (log), one parabola per budget

/** Where a name of width w wants to sit at (x, y) (its baseline), moved down a line at a time until it
 *  touches none of the names placed before it (on a phone two parabolas can end side by side). */
function placeName(placed, x, y, w) {
  const clash = (b) => x < b.x + b.w + 6 && b.x < x + w + 6 && Math.abs(y - b.y) < NAME_LINE_PX;
  for (let tries = 0; tries < 8 && placed.some(clash); tries++) y += NAME_LINE_PX;
  placed.push({ x, y, w });
  return [x, y];
}
const NAME_CHAR_PX = 7, NAME_LINE_PX = 14; // a 12 px label's width per character (about) and its line
const NAME_ROOM = 44; // px right of the plot for the last parabola's name (2.4e10)

function drawFamily(svg, v, seeds) {
  const { W: shown } = svgCanvas(svg, H);
  const W = shown - NAME_ROOM; // the plot ends NAME_ROOM px short of the chart's edge
  const fam = v.family;
  const xs = fam.flatMap((f) => f.n);
  const ys = [...fam.flatMap((f) => [...f.loss, ...(f.curve ? f.curve.loss : [])]), ...seeds.flat()];
  const xr = [Math.log(Math.min(...xs)) - 0.15, Math.log(Math.max(...xs)) + 0.15];
  const yr = [Math.min(...ys) - 0.02, Math.max(...ys) + 0.02];
  const { px, py } = frame(W, xr, yr, true, false);
  // round losses (1, 2 or 5 × 10^k apart), each with the decimals its step needs
  const yTicks = niceTicks(yr[0], yr[1], 4);
  const decimals = yTicks.length > 1 ? Math.max(0, -Math.floor(Math.log10(yTicks[1] - yTicks[0]) + 1e-9)) : 2;
  for (const y of yTicks) {
    el("line", { class: "kit-grid", x1: PAD.l, y1: py(y), x2: W - PAD.r, y2: py(y) }, svg);
    text(svg, PAD.l - 6, py(y) + 4, y.toFixed(decimals), { anchor: "end", "data-tick": y });
  }
  const sizes = [...new Set(xs)].sort((p, q) => p - q);
  let lastLabel = -Infinity; // a size's label is left out when it would touch the previous one (narrow screens)
  for (const n of sizes) {
    if (px(n) - lastLabel < 48) continue;
    text(svg, px(n), H - PAD.b + 16, fmtInt(n), { anchor: "middle" });
    lastLabel = px(n);
  }
  axes(svg, W, "parameters N (log scale)", "final val loss");
  const order = fam.map((f) => f.budget).sort((p, q) => p - q);
  // the chosen budget last, so it lies on top
  const drawOrder = fam.map((_, i) => i).filter((i) => i !== v.index).concat([v.index]);
  const placed = []; // the names' boxes so far
  for (const i of drawOrder) {
    const f = fam[i], chosen = i === v.index;
    const g = el("g", { class: `iso-budget${chosen ? " chosen" : ""}`, "data-budget": f.budget }, svg);
    g.style.setProperty("--c", rampColour(order.indexOf(f.budget), order.length));
    if (chosen) seeds.forEach((row, k) => row.forEach((y) => el("circle", { class: "kit-dot hollow seed", cx: px(f.n[k]), cy: py(y), r: 3 }, g)));
    if (f.curve) el("path", { class: "kit-line fit", d: pathOf(f.curve.n.map(px), f.curve.loss.map(py)), "stroke-width": chosen ? 3 : 1.5 }, g);
    f.loss.forEach((y, k) => el("circle", { class: "kit-dot mean", cx: px(f.n[k]), cy: py(y), r: chosen ? 5 : 3.5 }, g));
    const o = f.optimum;
    if (o && o.inside) {
      const x = px(o.n), y = py(o.loss);
      if (chosen) el("line", { class: "kit-marker", x1: x, y1: PAD.t, x2: x, y2: H - PAD.b }, g);
      el("circle", { class: "iso-min", cx: x, cy: y, r: chosen ? 7 : 5.5 }, g);
    }
    if (f.curve) { // the budget's name at its parabola's right end: which curve is which without the colour
      const k = f.curve.n.length - 1, name = fmtBudget(f.budget);
      const [x, y] = placeName(placed, px(f.curve.n[k]) + 5, py(f.curve.loss[k]) + 4, name.length * NAME_CHAR_PX);
      text(g, x, y, name, { cls: `kit-label iso-name${chosen ? " chosen" : ""}` });
    }
  }
}

function explainFamily(svg, v, seeds) {
  const fam = v.family, f = fam[v.index], frameEl = frameOf(svg);
  const seedCols = seeds[0].map((_, k) => `seed ${k + 1}`);
  const rows = fam.flatMap((g, i) => g.n.map((n, k) => [fmtBudget(g.budget) + (i === v.index ? " (chosen)" : ""), fmtInt(n), g.loss[k],
    ...(i === v.index ? seeds[k] : seedCols.map(() => "–"))]));
  fillTable(frameEl, ["budget (FLOPs)", "parameters N", "mean loss", ...seedCols], rows);
  const found = fam.filter((g) => g.optimum && g.optimum.inside);
  const o = f.optimum;
  const best = f.loss.indexOf(Math.min(...f.loss));
  describe(frameEl, `${fam.length} budgets, from ${fmtBudget(fam[0].budget)} to ${fmtBudget(fam[fam.length - 1].budget)} FLOPs, each with its points and a parabola in ln N; ` +
    (found.length ? `their minima go from N = ${fmtInt(found[0].optimum.n)} (loss ${found[0].optimum.loss.toFixed(3)}) at ${fmtBudget(found[0].budget)} ` +
      `to N = ${fmtInt(found[found.length - 1].optimum.n)} (loss ${found[found.length - 1].optimum.loss.toFixed(3)}) at ${fmtBudget(found[found.length - 1].budget)}. ` : "none has a minimum inside its sizes. ") +
    `The chosen budget, ${fmtBudget(f.budget)}, is drawn thicker with each seed: its lowest mean loss, ${f.loss[best].toFixed(3)}, is at N = ${fmtInt(f.n[best])}; ` +
    (o ? `its parabola's minimum is ${o.loss.toFixed(3)} at N = ${fmtInt(o.n)}${o.inside ? "" : " (outside the sizes run)"}.` : "its points have no minimum."));
}

// ---------------------------------------------------------------------------
// Right: the minima against compute, log-log, with the fitted power law and the prediction

function drawLaws(svg, v) {
  const { W } = svgCanvas(svg, H);
  const laws = v.laws, p = v.prediction;
  if (!laws) {
    text(svg, W / 2, H / 2, "Fewer than two budgets have a minimum: no power law.", { anchor: "middle" });
    return;
  }
  const cs = [...laws.budgets, ...(p ? [p.budget] : [])];
  const ns = [...laws.optima_n, ...laws.line.n, ...(p ? [p.n] : [])];
  const pad = (lo, hi) => { const m = Math.max(0.08 * (hi - lo), 0.15); return [lo - m, hi + m]; };
  const xr = pad(Math.log(Math.min(...cs)), Math.log(Math.max(...cs)));
  const yr = pad(Math.log(Math.min(...ns)), Math.log(Math.max(...ns)));
  const { px, py } = frame(W, xr, yr, true, true);
  const xTicks = thinned(logTicks(Math.exp(xr[0]), Math.exp(xr[1])), px, 44);
  const yTicks = thinned(logTicks(Math.exp(yr[0]), Math.exp(yr[1])), (n) => -py(n), 22);
  for (const c of xTicks) {
    el("line", { class: "kit-grid", x1: px(c), y1: PAD.t, x2: px(c), y2: H - PAD.b }, svg);
    const decade = Math.abs(Math.log10(c) - Math.round(Math.log10(c))) < 1e-9;
    text(svg, px(c), H - PAD.b + 16, decade ? fmtTick(c) : fmtBudget(c), { anchor: "middle" }); // 10¹², or 2e10 inside a decade
  }
  for (const n of yTicks) {
    el("line", { class: "kit-grid", x1: PAD.l, y1: py(n), x2: W - PAD.r, y2: py(n) }, svg);
    text(svg, PAD.l - 6, py(n) + 4, fmtTick(n), { anchor: "end" });
  }
  axes(svg, W, "compute C, FLOPs (log scale)", "optimal N (log)");
  const law = el("g", { class: "s2" }, svg);
  el("path", { class: "kit-line law", d: pathOf(laws.line.c.map(px), laws.line.n.map(py)) }, law);
  if (p && p.extension) {
    el("path", { class: "kit-line law-extension", d: pathOf(p.extension.c.map(px), p.extension.n.map(py)), "stroke-dasharray": "6 4", "stroke-width": 2 }, law);
  }
  const order = [...laws.budgets].sort((a, b) => a - b);
  laws.budgets.forEach((c, i) => {
    const dot = el("circle", { class: "kit-dot optimum", cx: px(c), cy: py(laws.optima_n[i]), r: 5, "data-c": c, "data-n": laws.optima_n[i] }, svg);
    dot.style.setProperty("--c", rampColour(order.indexOf(c), order.length));
  });
  if (p) {
    const x = px(p.budget), y = py(p.n), out = p.extrapolated;
    const g = el("g", { class: `fg iso-prediction${out ? " extrapolated" : ""}` }, svg);
    el("path", { class: out ? "kit-dot hollow" : "kit-dot", d: `M${x},${y - 8}L${x + 8},${y}L${x},${y + 8}L${x - 8},${y}Z`, "stroke-width": 2 }, g);
    const right = x < (PAD.l + W - PAD.r) / 2; // the label on the side with room
    const label = text(g, x + (right ? 12 : -12), y + (y < PAD.t + 30 ? 20 : -10), out ? "extrapolation" : "your budget",
      { anchor: right ? "start" : "end", cls: "kit-marker-label iso-prediction-label" });
    label.dataset.extrapolated = String(out);
  }
}

function explainLaws(svg, v) {
  const frameEl = frameOf(svg), laws = v.laws, p = v.prediction;
  if (!laws) {
    fillTable(frameEl, ["budget (FLOPs)"], v.family.map((f) => [fmtBudget(f.budget)]));
    describe(frameEl, "Fewer than two budgets have a minimum, so no power law is fitted.");
    return;
  }
  const rows = v.family.filter((f) => f.optimum).map((f) => [fmtBudget(f.budget), fmtInt(f.optimum.n), fmtInt(f.optimum.d), f.optimum.loss, "measured budget's minimum"]);
  if (p) rows.push([p.budget.toExponential(2), fmtInt(p.n), fmtInt(p.d), "–", p.extrapolated ? "prediction (extrapolated)" : "prediction"]);
  fillTable(frameEl, ["budget C (FLOPs)", "optimal N", "optimal D", "loss at the minimum", "what"], rows);
  describe(frameEl, `The ${laws.budgets.length} minima against compute in log-log, and the straight line fitted through them: ` +
    `N_opt ∝ C^${laws.a.toFixed(2)}, drawn from ${fmtBudget(laws.budgets[0])} to ${fmtBudget(laws.budgets[laws.budgets.length - 1])} FLOPs. ` +
    (p ? `At your budget, ${p.budget.toExponential(2)} FLOPs, the line gives N ≈ ${fmtInt(p.n)}` +
      (p.extrapolated ? `, ${p.decades_out.toFixed(1)} decades outside the measured budgets (dashed: an extrapolation).` : ", inside the measured budgets.") : ""));
}

// ---------------------------------------------------------------------------

export async function mount(root, client) {
  const form = root.querySelector('[data-role="form"]');
  if (!form) return; // no measured sweep: the template says so
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const warn = root.querySelector('[data-role="warn"]');
  const family = root.querySelector('[data-role="plot"]');
  const lawsSvg = root.querySelector('[data-role="laws"]');
  let last = null;

  const draw = () => {
    const [v, seeds] = last;
    drawFamily(family, v, seeds);
    drawLaws(lawsSvg, v);
  };
  const fields = bindFields(root, { onSlide: () => calc.schedule() });
  const calc = calculator(root, client, {
    op: "scaling_isoflop",
    fields,
    runningText: "Fitting…",
    args: () => ({ series: config.series, budget_index: Number(fields.values().budget_index), custom_budget: fields.values().custom_budget }),
    onResult(v) {
      const seeds = config.series[v.index].loss_per_seed;
      last = [v, seeds];
      draw();
      explainFamily(family, v, seeds);
      explainLaws(lawsSvg, v);
      const o = v.optimum;
      readouts.n_opt.textContent = o ? fmtInt(o.n) + (o.inside ? "" : " (outside the sizes run)") : "no minimum";
      readouts.d_opt.textContent = o ? fmtInt(o.d) : "–";
      readouts.loss_opt.textContent = o ? o.loss.toFixed(3) : "–";
      readouts.exponents.textContent = v.laws ? `N ∝ C^${v.laws.a.toFixed(2)}, D ∝ C^${v.laws.b.toFixed(2)}` : "–";
      const p = v.prediction;
      readouts.prediction.textContent = p ? `N ≈ ${fmtInt(p.n)}, D ≈ ${fmtInt(p.d)}` : "–";
      warn.hidden = !(p && p.extrapolated);
      if (p && p.extrapolated) {
        warn.textContent = `Extrapolation: ${p.budget.toExponential(2)} FLOPs is ${p.decades_out.toFixed(1)} decades outside the measured budgets. The power law is a straight line through ${v.laws.budgets.length} points; nothing in this toy says it stays straight.`;
      }
      return { result: v, text: o ? `Fitted ${v.family.length} budgets; ${fmtBudget(v.budget)} is the chosen one.` : "This budget's points have no minimum." };
    },
  });
  fields.input("budget_index").addEventListener("change", () => calc.schedule());
  // typing predicts again once the keys pause (the slider's moves at once, through onSlide)
  fields.input("custom_budget").addEventListener("input", () => calc.soon(250));

  if (!(await calc.ready())) return;
  onResize(family, () => last && drawFamily(family, ...last));
  onResize(lawsSvg, () => last && drawLaws(lawsSvg, last[0]));
  await calc.run(); // the largest budget and the default prediction, before the reader can change anything
}
