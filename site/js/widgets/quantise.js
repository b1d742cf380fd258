// Quantising a gradient: a thin view over precision_quantise (pylib.web.precision_ops, which calls
// pylib.systems.quantise). It only draws what the worker sends.

import { Plot, fmtCell } from "../plot.js";
import { bindFields, calculator, readoutMap } from "../widget-kit.js";

const num = (v) => (v == null ? "–" : Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : v.toPrecision(4));

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const readouts = readoutMap(root);
  const hist = new Plot($('[data-role="chart-hist"]'), {
    x: { label: "gradient value", format: (v) => (v === 0 ? "0" : v.toExponential(1)) },
    y: { label: "elements", log: true },
    height: 220,
    series: [{ label: "before", color: 1, width: 1.5, spanGaps: false }, { label: "after", color: 2, points: true, size: 5 }],
    xName: "bin centre",
  });
  const sweep = new Plot($('[data-role="chart-sweep"]'), {
    x: { label: "full scale / amax", log: true },
    y: { label: "share" },
    height: 220,
    series: [{ label: "relative error", color: 1, width: 1.5 }, { label: "clipped share", color: 4, width: 1.5, dash: [5, 3] },
      { label: "yours", color: 3, points: true, size: 9 }],
  });

  const fields = bindFields(root, { onSlide: () => calc.schedule() }); // quantise again as a slider moves
  const calc = calculator(root, client, {
    op: "precision_quantise",
    fields,
    runningText: "Quantising…",
    onResult(r) {
      const logCounts = (a) => a.map((c) => (c > 0 ? c : null));
      hist.setData([r.hist_centres, logCounts(r.hist_counts), logCounts(r.hist_counts_quantised)]);
      const levels = r.hist_counts_quantised.filter((c) => c > 0).length;
      hist.describe(`${r.elements.toLocaleString("en")} elements between ±${num(r.amax)} (amax); after quantisation to ${r.settings.bits} bits ` +
        `they fall in ${levels} of the ${r.hist_counts.length} bins, ${(100 * r.clipped).toFixed(2)}% clipped to ±${num(r.full_scale)}.`);
      const you = r.sweep_ratio.map(() => null);
      let best = 0;
      r.sweep_ratio.forEach((x, i) => { if (Math.abs(Math.log(x / r.settings.ratio)) < Math.abs(Math.log(r.sweep_ratio[best] / r.settings.ratio))) best = i; });
      you[best] = r.rel_error;
      sweep.setData([r.sweep_ratio, r.sweep_rel_error, r.sweep_clipped, you]);
      let low = 0;
      r.sweep_rel_error.forEach((e, i) => { if (e < r.sweep_rel_error[low]) low = i; });
      sweep.describe(`At ${r.settings.bits} bits the relative error is lowest, ${fmtCell(r.sweep_rel_error[low])}, at a full scale of ` +
        `${fmtCell(r.sweep_ratio[low])} × amax, where ${(100 * r.sweep_clipped[low]).toFixed(2)}% of the elements are clipped; ` +
        `yours, ${r.settings.ratio} × amax, gives ${fmtCell(r.rel_error)}.`);
      readouts.q_max.textContent = String(r.q_max);
      readouts.step.textContent = num(r.step);
      readouts.rel_error.textContent = num(r.rel_error);
      readouts.clipped.textContent = `${(100 * r.clipped).toFixed(2)}%`;
      readouts.max_error_in_range.textContent = `${num(r.max_error_in_range)} (${num(r.bound_in_range)})`;
      readouts.bytes.textContent = `${Math.round(r.bytes).toLocaleString("en")} (${r.bytes_fp32.toLocaleString("en")})`;
      return {
        result: { settings: r.settings, rel_error: r.rel_error, clipped: r.clipped, step: r.step,
          q_max: r.q_max, max_error_in_range: r.max_error_in_range, bound_in_range: r.bound_in_range, full_scale: r.full_scale },
        text: `${r.settings.bits} bits, full scale ${num(r.full_scale)} (${r.settings.ratio} × amax): `
          + `${(100 * r.clipped).toFixed(2)}% clipped, relative error ${num(r.rel_error)}.`,
      };
    },
  });
  if (!(await calc.ready())) return;
  fields.input("tensor").addEventListener("change", () => calc.run()); // a tensor chosen: quantise it at once
  await calc.run();
}
