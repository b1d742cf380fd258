// The narrow valley: a thin view over optim_valley (pylib.web.optim_ops -> pylib.studies.quadratic), which
// validates the fields and returns the contours and both trajectories. This module only draws: at the
// width the figure is shown (text stays 12 px on a phone), colours from the theme (kit classes).

import { bindFields, calculator, readConfig, readoutMap } from "../widget-kit.js";
import { keepFocusOnRun } from "./calc-focus.js";
import { describe, fillTable, frameOf, onResize, svgCanvas, svgEl as el, svgText } from "../plot.js";

const NAMES = { sgd: "gradient descent", momentum: "momentum" };

export async function mount(root, client) {
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const svg = root.querySelector('[data-role="chart"]');
  const frame = frameOf(svg);
  let last = null;

  function draw(value) {
    const [x0, x1, y0, y1] = value.view;
    const shown = Math.round(svg.getBoundingClientRect().width) || 600;
    const { W, H } = svgCanvas(svg, Math.round((shown * (y1 - y0)) / (x1 - x0)));
    const px = (x) => ((x - x0) / (x1 - x0)) * W;
    const py = (y) => ((y1 - y) / (y1 - y0)) * H;
    const points = (xs, ys) => xs.map((x, i) => `${px(x).toFixed(2)},${py(ys[i]).toFixed(2)}`).join(" ");
    const clip = `${root.id}-clip`;
    el("rect", { x: 0, y: 0, width: W, height: H, class: "kit-frame" }, svg);
    el("rect", { x: 0, y: 0, width: W, height: H }, el("clipPath", { id: clip }, el("defs", {}, svg)));
    const inside = el("g", { "clip-path": `url(#${clip})` }, svg);
    const contours = el("g", { "data-role": "contours", class: "axis" }, inside);
    for (const c of value.contours) el("polyline", { points: points(c.xs, c.ys), class: "kit-line valley-contour" }, contours);
    [["sgd", 1], ["momentum", 2]].forEach(([name, n]) => {
      const t = value[name];
      const group = el("g", { "data-role": `path-${name}`, class: `valley-path s${n}` }, inside);
      el("polyline", { points: points(t.xs, t.ys), class: "kit-line" }, group);
      const every = Math.max(1, Math.floor(t.xs.length / 60)); // dots: at most about 60 per path
      for (let i = 0; i < t.xs.length; i += every) el("circle", { cx: px(t.xs[i]).toFixed(2), cy: py(t.ys[i]).toFixed(2), r: 2, class: "kit-dot" }, group);
      if (t.diverged_at != null) {
        const end = t.xs.length - 1;
        svgText(group, Math.min(Math.max(px(t.xs[end]), 8), W - 150).toFixed(1),
          Math.min(Math.max(py(t.ys[end]) + (name === "sgd" ? -8 : 16), 14), H - 6).toFixed(1),
          `diverged at step ${t.diverged_at}`, { cls: "kit-label valley-diverged" });
      }
    });
    el("circle", { cx: px(value.start[0]), cy: py(value.start[1]), r: 4, class: "valley-start", "data-role": "start" }, inside);
    const mx = px(0), my = py(0);
    el("path", { d: `M${mx - 5},${my - 5}L${mx + 5},${my + 5}M${mx - 5},${my + 5}L${mx + 5},${my - 5}`, class: "valley-min", "data-role": "minimum" }, inside);
  }

  const outcome = (t) => {
    if (t.diverged_at != null) return `diverged at step ${t.diverged_at}`;
    const reached = t.converged_at != null ? `; below ${config.tolerance} × start at step ${t.converged_at}` : "";
    return `f / f₀ = ${(t.final / t.f0).toExponential(1)}${reached}`;
  };

  // The text alternative: a sentence and the two trajectories' points (every step up to 100 steps, thinned beyond).
  function describeChart(value) {
    const s = value.settings;
    describe(frame, `κ = ${s.kappa}, learning rate ${s.lr}, β = ${s.momentum}, ${s.steps} steps from (${value.start.join(", ")}): ` +
      `gradient descent ${outcome(value.sgd)}; momentum ${outcome(value.momentum)}.`);
    const n = Math.max(value.sgd.xs.length, value.momentum.xs.length);
    const every = Math.max(1, Math.ceil(n / 101)); // every step of a run of up to 100
    const at = (t, i, k) => (i < t.xs.length ? [t.xs, t.ys][k][i] : null);
    const rows = [];
    for (let i = 0; i < n; i++) {
      if (i % every && i !== n - 1) continue;
      rows.push([i, at(value.sgd, i, 0), at(value.sgd, i, 1), at(value.momentum, i, 0), at(value.momentum, i, 1)]);
    }
    fillTable(frame, ["step", "gradient descent x", "gradient descent y", "momentum x", "momentum y"], rows);
  }

  const fields = bindFields(root, { onSlide: () => ready && calc.schedule() }); // redraw as a slider moves
  const calc = calculator(root, client, {
    op: "optim_valley",
    fields,
    runningText: "Drawing…",
    onResult(value) {
      last = value;
      draw(value);
      describeChart(value);
      readouts.sgd.textContent = outcome(value.sgd);
      readouts.momentum.textContent = outcome(value.momentum);
      readouts.stable.textContent = value.stable_lr.toFixed(2);
      const summary = (t) => ({ diverged_at: t.diverged_at, converged_at: t.converged_at, final: t.final, f0: t.f0, points: t.xs.length });
      const diverged = ["sgd", "momentum"].filter((n) => value[n].diverged_at != null);
      return {
        result: { settings: value.settings, sgd: summary(value.sgd), momentum: summary(value.momentum) },
        text: diverged.length
          ? `${diverged.map((n) => (n === "sgd" ? "Gradient descent" : "Momentum")).join(" and ")} diverged: the learning rate is too large for the steep direction.`
          : `Drawn: gradient descent ${outcome(value.sgd)}; ${NAMES.momentum} ${outcome(value.momentum)}. Drag a slider or type a value.`,
      };
    },
  });
  keepFocusOnRun(root);
  let ready = false;
  for (const name of ["lr", "kappa", "momentum", "steps"]) fields.input(name).addEventListener("change", () => ready && calc.schedule());
  if (!(await calc.ready())) return;
  ready = true;
  onResize(svg, () => last && draw(last));
  await calc.run();
}
