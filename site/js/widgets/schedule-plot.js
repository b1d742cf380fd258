// The schedule plotter: a thin view over schedule_curve (pylib.web.schedule_ops -> pylib.schedules.lr_at).
// Every edit (typed, or a slider moved) asks Python for the curves again, the latest request winning; a
// bad field is marked and explained under it, and the last good curve stays on the chart.

import { bindFields, calculator, readoutMap } from "../widget-kit.js";
import { keepFocusOnRun } from "./calc-focus.js";
import { Plot, fmtCell } from "../plot.js";

const KINDS = ["cosine", "wsd", "constant"];
const NAMES = { cosine: "cosine", wsd: "WSD", constant: "constant" };

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const readouts = readoutMap(root);
  const legend = [...root.querySelectorAll(".chart-legend li .kit-swatch")]; // in KINDS order
  let plot = null;
  let ready = false;

  // Each schedule keeps its colour (cosine 1, WSD 2, constant 3); the chosen one is drawn solid and thick.
  function draw(kind, curves) {
    const n = curves[kind].length;
    const top = Math.max(...KINDS.map((k) => Math.max(...curves[k])));
    const opts = {
      x: { label: "step" },
      y: { label: "learning rate", min: 0, max: top * 1.08 || 1 },
      series: KINDS.map((k, i) => ({ label: NAMES[k], color: i + 1, width: k === kind ? 2.5 : 1.5, dash: k === kind ? undefined : [5, 4] })),
    };
    if (plot && plot.kind === kind) {
      plot.opts.y.max = opts.y.max; // read by the scale's range at each draw
    } else {
      if (plot) plot.destroy();
      $('[data-role="chart"]').replaceChildren(); // (the placeholder, the first time)
      plot = new Plot($('[data-role="chart"]'), opts);
      plot.kind = kind;
    }
    plot.setData([Array.from({ length: n }, (_, i) => i), ...KINDS.map((k) => curves[k])]);
    legend.forEach((sw, i) => sw.classList.toggle("dash", KINDS[i] !== kind));
    const c = curves[kind];
    plot.describe(`${NAMES[kind]} (solid): ${n} steps, from ${fmtCell(c[0])} at step 0 to a peak of ${fmtCell(Math.max(...c))}, ending at ${fmtCell(c[n - 1])}. ` +
      KINDS.filter((k) => k !== kind).map((k) => `${NAMES[k]} (dashed) ends at ${fmtCell(curves[k][n - 1])}`).join("; ") + ".");
  }

  // One request is three schedule_curve calls (the chosen kind first: its errors are the reader's).
  const threeCurves = {
    start: () => client.start(),
    async call(op, args) {
      const main = await client.call(op, args);
      const curves = { [main.kind]: main.lrs };
      for (const k of KINDS.filter((k) => k !== main.kind)) curves[k] = (await client.call(op, { ...args, kind: k })).lrs;
      return { main, curves };
    },
  };

  const fields = bindFields(root, { onSlide: () => ready && calc.schedule() });
  const calc = calculator(root, threeCurves, {
    op: "schedule_curve",
    fields,
    onResult({ main, curves }) {
      draw(main.kind, curves);
      readouts.peak_lr.textContent = main.peak_lr.toPrecision(3);
      readouts.peak_step.textContent = String(main.peak_step);
      readouts.first_lr.textContent = main.lrs[0].toPrecision(3);
      readouts.final_lr.textContent = main.final_lr.toPrecision(3);
      $('[data-role="legend-main"]').textContent = `${main.name}`;
      return {
        result: { kind: main.kind, steps: main.steps, warmup: main.warmup, min_ratio: main.min_ratio, decay_frac: main.decay_frac,
          peak_lr: main.peak_lr, peak_step: main.peak_step, first_lr: main.lrs[0], final_lr: main.final_lr },
        text: `${main.name}: ${main.steps} steps, peak ${main.peak_lr.toPrecision(3)} at step ${main.peak_step}, ending at ${main.final_lr.toPrecision(3)}.`,
      };
    },
  });
  keepFocusOnRun(root);

  // typing redraws after a short pause (the slider redraws at once, above)
  $('[data-role="form"]').addEventListener("input", (event) => {
    if (ready && event.target.type !== "range") calc.soon(120);
  });
  if (!(await calc.ready())) return;
  ready = true;
  await calc.run();
}
