// The lost update: a thin view over precision_lost_update (pylib.web.precision_ops, which calls
// pylib.systems.precision.repeated_add). It only draws what the worker sends.

import { Plot } from "../plot.js";
import { bindFields, calculator, readoutMap } from "../widget-kit.js";

// [key, label, series colour, dash]: the legend in the template uses the same colours
const SERIES = [["exact", "exact", 8, [4, 3]], ["fp32", "fp32 master weight", 1, null],
  ["nearest", "stored, nearest", 2, null], ["stochastic_one", "stored, stochastic (one copy)", 4, null],
  ["stochastic_mean", "stochastic, mean of copies", 3, null]];
const num = (v) => (v == null ? "overflow" : Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(4) : v.toPrecision(6));

export async function mount(root, client) {
  const readouts = readoutMap(root);
  const plot = new Plot(root.querySelector('[data-role="chart"]'), {
    x: { label: "step" },
    y: { label: "weight", size: 70 },
    height: 240,
    series: SERIES.map(([, label, color, dash]) => ({ label, color, width: 1.5, ...(dash ? { dash } : {}) })),
  });

  const fields = bindFields(root, { onSlide: () => calc.schedule() }); // rerun as a slider moves
  const calc = calculator(root, client, {
    op: "precision_lost_update",
    fields,
    runningText: "Adding…",
    onResult(r) {
      plot.setData([r.steps, ...SERIES.map(([k]) => r[k])]);
      const s = r.settings;
      plot.describe(`After ${s.steps} additions of ${s.increment} to ${s.start}, stored in ${s.format}: ` +
        SERIES.map(([k, label]) => `${label} ${num(r.final[k])}`).join(", ") + ` (mean of ${r.lanes} copies).`);
      for (const k of Object.keys(r.final)) readouts[k].textContent = num(r.final[k]);
      readouts.spacing.textContent = r.spacing_at_start == null ? "–" : num(r.spacing_at_start);
      readouts.lanes.textContent = String(r.lanes);
      const lostAll = r.final.nearest === r.start_stored && s.increment !== 0;
      return {
        result: { final: r.final, settings: s, overflow: r.overflow, spacing_at_start: r.spacing_at_start },
        text: r.overflow ? "The stored weight overflowed the format: past its largest value it is inf (or NaN in E4M3)."
          : lostAll ? `Every one of the ${s.steps} updates was lost with nearest rounding: each increment is below half the spacing of the stored weight.`
            : `Done: ${s.steps} additions.`,
      };
    },
  });
  if (!(await calc.ready())) return;
  await calc.run();
}
