// Goodput against the checkpoint interval: a thin view over job_goodput (pylib.web.job_ops ->
// pylib.systems.goodput). The log sliders only set the fields (and simulate again as they move); pylib
// validates and simulates. A bad field gets its message under it; the last good result stays, greyed.

import { fmtCell } from "../plot.js";
import { bindFields, calculator, readoutMap } from "../widget-kit.js";
import { lineChart, num } from "./job-kit.js";

export async function mount(root, client) {
  const youngButton = root.querySelector('[data-action="young"]');
  const readouts = readoutMap(root);
  let last = null;
  // minutes as typed: up to 4 significant digits, no trailing zeros ("45 min", "3,160 min", "0.125 min")
  const minutes = (t) => `${Number(t.toPrecision(4)).toLocaleString("en", { maximumFractionDigits: 6 })} min`;

  // vertical lines, as the legend: Young (s4), Daly (dashed s3), the exact optimum (dotted s5), your τ (the text colour)
  const plot = lineChart(root.querySelector('[data-role="chart"]'), [
    { label: "simulated", color: 2, dots: 6 },
    { label: "expected (exact)", color: 1, spanGaps: true },
  ], { xlog: true, xlabel: "checkpoint interval τ (min)", ylabel: "goodput", height: 240, marks: () => (last ? [
    { value: last.young, color: 4 }, { value: last.daly, color: 3, dash: [5, 4] },
    { value: last.optimum, color: 5, dash: [2, 3] }, { value: last.chosen.tau, color: "fg", width: 3 },
  ] : []) });

  const fields = bindFields(root, { onSlide: () => calc.schedule() });
  const calc = calculator(root, client, {
    op: "job_goodput",
    fields,
    busy: [youngButton],
    runningText: "Simulating…",
    onResult(v) {
      last = v;
      plot.setData([v.tau, v.simulated, v.expected]);
      plot.describe(`Over intervals from ${minutes(v.tau[0])} to ${minutes(v.tau[v.tau.length - 1])} the expected goodput peaks at ` +
        `${fmtCell(v.expected_at.optimum)} at the exact optimum, ${minutes(v.optimum)}; Young's interval is ${minutes(v.young)}` +
        (v.daly == null ? "" : `, Daly's ${minutes(v.daly)}`) + `. At your τ = ${minutes(v.chosen.tau)}: ${fmtCell(v.chosen.simulated)} simulated, ` +
        `${fmtCell(v.chosen.expected)} expected.`);
      readouts.sim.textContent = num(v.chosen.simulated, 4);
      readouts.expected.textContent = num(v.chosen.expected, 4);
      readouts.young.textContent = num(v.young, 3);
      readouts.daly.textContent = v.daly == null ? "δ ≥ 2M: not given" : num(v.daly, 3);
      readouts.optimum.textContent = num(v.optimum, 3);
      readouts.best.textContent = num(v.expected_at.optimum, 4);
      root.classList.remove("job-stale");
      return {
        result: { chosen: v.chosen, young: v.young, daly: v.daly, optimum: v.optimum },
        text: `At τ = ${minutes(v.chosen.tau)}: ${(100 * v.chosen.simulated).toFixed(1)}% of the time is useful work `
          + `(expected ${(100 * v.chosen.expected).toFixed(1)}%). The best interval gives ${(100 * v.expected_at.optimum).toFixed(1)}%.`,
      };
    },
    onError() {
      if (!last) return;
      // the last good result stays, greyed, and says so: added to the message once the kit has written it
      root.classList.add("job-stale");
      const tau = minutes(last.chosen.tau);
      queueMicrotask(() => {
        const message = root.querySelector('[data-role="message"]');
        message.textContent += `\nThe readouts and the chart still show the last valid settings (τ = ${tau}).`;
      });
    },
  });

  youngButton.addEventListener("click", () => {
    if (!last) return;
    fields.set("tau", String(Number(last.young.toPrecision(4))));
    calc.run();
  });
  if (!(await calc.ready())) return;
  await calc.run();
}
