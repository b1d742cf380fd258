// The IsoFLOP explorer: a thin view over scaling_isoflop (pylib.web.scaling_ops -> pylib.studies.scaling).
// The measured sweep comes from the page (results.json at build time); pylib fits it; this file draws.
// The prediction's budget has a log slider: each move predicts again (the newest answer wins).

import { describe, fillTable, fmtTick, frameOf, niceTicks, onResize, svgCanvas, svgEl as el, svgText as text } from "../plot.js";
import { bindFields, calculator, readConfig, readoutMap } from "../widget-kit.js";

const H = 300, PAD = { l: 56, r: 16, t: 14, b: 40 };
const fmtInt = (v) => (v >= 1e6 ? v.toExponential(2) : Math.round(v).toLocaleString("en"));

// Points in data space -> the SVG: x on a log scale of N, y linear in loss. Drawn at the width it is
// shown at, so its 12 px labels stay legible on a phone.
function draw(svg, v, seeds) {
  const { W } = svgCanvas(svg, H);
  const xs = [...v.n, ...(v.curve ? v.curve.n : [])];
  const ys = [...v.loss, ...seeds.flat(), ...(v.curve ? v.curve.loss : [])];
  const [x0, x1] = [Math.log(Math.min(...xs)) - 0.15, Math.log(Math.max(...xs)) + 0.15];
  const [y0, y1] = [Math.min(...ys) - 0.02, Math.max(...ys) + 0.02];
  const px = (n) => PAD.l + ((Math.log(n) - x0) / (x1 - x0)) * (W - PAD.l - PAD.r);
  const py = (y) => H - PAD.b - ((y - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);
  // round losses (1, 2 or 5 × 10^k apart), each with the decimals its step needs
  const yTicks = niceTicks(y0, y1, 4);
  const decimals = yTicks.length > 1 ? Math.max(0, -Math.floor(Math.log10(yTicks[1] - yTicks[0]) + 1e-9)) : 2;
  for (const y of yTicks) {
    el("line", { class: "kit-grid", x1: PAD.l, y1: py(y), x2: W - PAD.r, y2: py(y) }, svg);
    text(svg, PAD.l - 6, py(y) + 4, y.toFixed(decimals), { anchor: "end", "data-tick": y });
  }
  el("line", { class: "kit-axis", x1: PAD.l, y1: H - PAD.b, x2: W - PAD.r, y2: H - PAD.b }, svg);
  el("line", { class: "kit-axis", x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: H - PAD.b }, svg);
  let lastLabel = -Infinity; // a size's label is left out when it would touch the previous one (narrow screens)
  for (const n of [...v.n].sort((p, q) => p - q)) {
    if (px(n) - lastLabel < 48) continue;
    text(svg, px(n), H - PAD.b + 16, fmtInt(n), { anchor: "middle" });
    lastLabel = px(n);
  }
  text(svg, (W + PAD.l) / 2, H - 6, "parameters N (log scale)", { anchor: "middle", cls: "kit-axis-title" });
  text(svg, 14, PAD.t + 8, "final val loss", { anchor: "end", cls: "kit-axis-title", transform: `rotate(-90 14 ${PAD.t + 8})` });
  // colours as the legend: each seed grey (s8), their mean blue (s1), the parabola vermillion (s2), its minimum the text colour
  const seedDots = el("g", { class: "s8" }, svg);
  seeds.forEach((row, i) => row.forEach((y) => el("circle", { class: "kit-dot seed", cx: px(v.n[i]), cy: py(y), r: 3.5 }, seedDots)));
  const fit = el("g", { class: "s2" }, svg);
  if (v.curve) {
    const d = v.curve.n.map((n, i) => `${i ? "L" : "M"}${px(n).toFixed(1)},${py(v.curve.loss[i]).toFixed(1)}`).join("");
    el("path", { class: "kit-line fit", d }, fit);
  }
  const means = el("g", { class: "s1" }, svg);
  v.loss.forEach((y, i) => el("circle", { class: "kit-dot mean", cx: px(v.n[i]), cy: py(y), r: 5 }, means));
  if (v.optimum && v.optimum.inside) {
    const x = px(v.optimum.n), opt = el("g", { class: "fg" }, svg);
    el("line", { class: "kit-line opt-line", x1: x, y1: PAD.t, x2: x, y2: H - PAD.b, "stroke-dasharray": "4 3", "stroke-width": 1.5 }, opt);
    el("circle", { class: "kit-dot opt", cx: x, cy: py(v.optimum.loss), r: 6 }, opt);
  }
}

/** The text alternative: every size's seeds and mean, and a sentence with the fit's minimum. */
function explain(svg, v, seeds) {
  const frame = frameOf(svg);
  const cols = ["parameters N", "mean loss", ...seeds[0].map((_, k) => `seed ${k + 1}`)];
  fillTable(frame, cols, v.n.map((n, i) => [fmtInt(n), v.loss[i], ...seeds[i]]));
  const best = v.loss.indexOf(Math.min(...v.loss));
  const o = v.optimum;
  describe(frame, `At ${fmtTick(v.budget)} FLOPs, ${v.n.length} sizes from ${fmtInt(Math.min(...v.n))} to ${fmtInt(Math.max(...v.n))} parameters; ` +
    `the lowest mean loss, ${v.loss[best].toFixed(3)}, is at ${fmtInt(v.n[best])}. ` +
    (o ? `The fitted parabola's minimum: ${o.loss.toFixed(3)} at N = ${fmtInt(o.n)}${o.inside ? "" : " (outside the sizes run)"}.` : "The points have no minimum."));
}

export async function mount(root, client) {
  const form = root.querySelector('[data-role="form"]');
  if (!form) return; // no measured sweep: the template says so
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const warn = root.querySelector('[data-role="warn"]');
  const svg = root.querySelector('[data-role="plot"]');
  let last = null;

  const fields = bindFields(root, { onSlide: () => calc.schedule() });
  const calc = calculator(root, client, {
    op: "scaling_isoflop",
    fields,
    runningText: "Fitting…",
    args: () => ({ series: config.series, budget_index: Number(fields.values().budget_index), custom_budget: fields.values().custom_budget }),
    onResult(v) {
      const seeds = config.series[Number(fields.values().budget_index)].loss_per_seed;
      last = [v, seeds];
      draw(svg, v, seeds);
      explain(svg, v, seeds);
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
      return { result: v, text: o ? "Fitted. Change the budget, or type another budget to predict." : "This budget's points have no minimum." };
    },
  });
  fields.input("budget_index").addEventListener("change", () => calc.run());

  if (!(await calc.ready())) return;
  onResize(svg, () => last && draw(svg, ...last));
  await calc.run(); // the last budget, before the reader can press anything
}
