// Queueing and stragglers: a thin view over slow_queue (pylib.web.slow_links_ops -> pylib.systems.queueing).
// Every edit or slider move asks Python again (the newest answer wins); a bad field (ρ ≥ 1 is an unstable
// queue) gets its message under it.

import { Plot, fmtCell } from "../plot.js";
import { bindFields, calculator, readoutMap } from "../widget-kit.js";

/** The curve (xs, ys) and the simulated point, as aligned columns: the point at its own x. */
function columns(xs, ys, point) {
  if (xs.includes(point[0])) return [xs, ys, xs.map((x) => (x === point[0] ? point[1] : null))];
  const i = xs.findIndex((x) => x > point[0]);
  const at = i < 0 ? xs.length : i;
  return [
    [...xs.slice(0, at), point[0], ...xs.slice(at)],
    [...ys.slice(0, at), null, ...ys.slice(at)],
    [...xs.slice(0, at).map(() => null), point[1], ...xs.slice(at).map(() => null)],
  ];
}

const chart = (el, x, y, xName) => new Plot(el, {
  x, y: { label: "ms", ...y }, height: 220, xName,
  series: [{ label: "formula (ms)", color: 1 }, { label: "this simulation (ms)", color: 2, points: true, size: 9 }],
});

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const readouts = readoutMap(root);
  const waitPlot = chart($('[data-role="wait-chart"]'), { label: "load ρ" }, { log: true }, "load ρ");
  const slowPlot = chart($('[data-role="slow-chart"]'), { label: "workers W", log: true }, {}, "workers W");
  const ms = (x) => `${x.toPrecision(4)} ms`;

  const fields = bindFields(root, { onSlide: () => calc.schedule() });
  const calc = calculator(root, client, {
    op: "slow_queue",
    fields,
    onResult(v) {
      const q = v.md1, s = v.stragglers, set = v.settings;
      readouts.wait_sim.textContent = ms(q.mean);
      readouts.wait_ci.textContent = `${q.low.toPrecision(4)} to ${q.high.toPrecision(4)}`;
      readouts.wait_exact.textContent = ms(q.exact);
      readouts.slow_sim.textContent = ms(s.mean);
      readouts.slow_exact.textContent = ms(s.exact);
      readouts.mean_step.textContent = ms(s.mean_step);
      const w = v.wait_curve, c = v.slowest_curve;
      waitPlot.setData(columns(w.rho, w.wait, [set.rho, q.mean]));
      waitPlot.describe(`The formula's mean wait rises from ${fmtCell(w.wait[0])} ms at ρ = ${fmtCell(w.rho[0])} to ` +
        `${fmtCell(w.wait[w.wait.length - 1])} ms at ρ = ${fmtCell(w.rho[w.rho.length - 1])}; at your ρ = ${set.rho} the ` +
        `simulation waits ${fmtCell(q.mean)} ms (exact ${fmtCell(q.exact)} ms).`);
      slowPlot.setData(columns(c.workers, c.slowest, [set.workers, s.mean]));
      slowPlot.describe(`The expected slowest step grows from ${fmtCell(c.slowest[0])} ms at W = ${c.workers[0]} to ` +
        `${fmtCell(c.slowest[c.slowest.length - 1])} ms at W = ${c.workers[c.workers.length - 1]}; at your W = ${set.workers} ` +
        `the simulation's slowest averages ${fmtCell(s.mean)} ms (exact ${fmtCell(s.exact)} ms).`);
      const inside = q.low <= q.exact && q.exact <= q.high ? "inside" : "outside";
      return {
        result: { settings: set, md1: { mean: q.mean, low: q.low, high: q.high, exact: q.exact }, stragglers: s },
        text: `Simulated ${v.queue_n.toLocaleString("en")} transfers (the formula is ${inside} the interval) and ` +
          `${v.straggle_syncs.toLocaleString("en")} syncs of ${set.workers} workers.`,
      };
    },
  });
  // typing simulates again once the keys pause
  fields.form.addEventListener("input", (event) => {
    if (!event.target.dataset.sliderFor) calc.soon(150);
  });

  if (!(await calc.ready())) return;
  await calc.run();
}
