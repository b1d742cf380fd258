// Nudge one weight: a thin view over pylib.web.backprop_ops (backprop_params, backprop_nudge). The
// validation, both slopes and the error-vs-h sweep are computed in Python; this file only draws.
// Everything typed by the reader is shown with textContent.

import { bindFields, calculator, readoutMap } from "../widget-kit.js";
import { keepFocusOnRun } from "./calc-focus.js";
import { Plot, describe, fillTable, frameOf } from "../plot.js";

const sci = (v, digits = 6) => (v == null || !Number.isFinite(v) ? "–" : v.toExponential(digits));
const hText = (h) => (h >= 0.001 && h <= 1000 ? String(h) : h.toExponential()); // 1e-5, 1.23e-4, 0.01

function makePlot(el) {
  return new Plot(el, {
    x: { label: "step size h", log: true },
    y: { label: "relative error", log: true },
    xName: "h",
    series: [
      // undefined (an h only the reader's point has) is joined over; null (an exact match) is a gap
      { label: "relative error (sweep)", color: 1, line: true, points: true, size: 4, spanGaps: false },
      { label: "your h", color: 2, points: true, size: 9 },
    ],
  });
}

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const readouts = readoutMap(root);
  const chartEl = $('[data-role="chart"]');
  const placeholder = chartEl.querySelector('[data-role="placeholder"]');
  let plot = makePlot(chartEl);

  // No curve for a weight that was not nudged: back to the placeholder, with an empty table.
  function clearChart() {
    plot.destroy();
    placeholder.textContent = "No curve: the input above has an error.";
    chartEl.replaceChildren(placeholder);
    plot = makePlot(chartEl);
    describe(frameOf(chartEl), "No curve: the input above has an error.");
    fillTable(frameOf(chartEl), ["h"], []);
  }

  function draw(r) {
    // x: the sweep's step sizes plus the reader's h, in order; the reader's point is series 2.
    const xs = [...new Set([...r.sweep.h, r.h])].sort((a, b) => a - b);
    const at = new Map(r.sweep.h.map((h, i) => [h, r.sweep.rel_error[i]]));
    plot.setData([xs, xs.map((h) => (at.has(h) ? at.get(h) : undefined)), xs.map((h) => (h === r.h && r.rel_error > 0 ? r.rel_error : null))]);
    let best = null;
    r.sweep.h.forEach((h, i) => {
      const e = r.sweep.rel_error[i];
      if (e != null && (best == null || e < r.sweep.rel_error[best])) best = i;
    });
    const exact = r.sweep.rel_error.filter((e) => e == null).length;
    plot.describe(
      (best == null ? "Every step size of the sweep gave an exact match." :
        `Over step sizes from ${hText(r.sweep.h[0])} to ${hText(r.sweep.h[r.sweep.h.length - 1])}, the relative error is ` +
        `smallest, ${sci(r.sweep.rel_error[best], 1)}, at h = ${hText(r.sweep.h[best])}; it is ${sci(r.sweep.rel_error[0], 1)} at the ` +
        `smallest h and ${sci(r.sweep.rel_error[r.sweep.rel_error.length - 1], 1)} at the largest.`) +
      (exact ? ` ${exact} step size${exact > 1 ? "s" : ""} matched exactly (not drawn on the log axis).` : "") +
      ` Your h = ${hText(r.h)}: ${r.rel_error > 0 ? sci(r.rel_error, 2) : "an exact match"}.`);
  }

  let ready = false; // the slider works before Python is ready; it computes only after
  const fields = bindFields(root, { onCommit: () => ready && calc.schedule() });
  const calc = calculator(root, client, {
    op: "backprop_nudge",
    fields,
    runningText: "Nudging…",
    onError() {
      for (const el of Object.values(readouts)) el.textContent = "–";
      clearChart();
    },
    onResult(r) {
      readouts.where.textContent = `${r.name}[${r.index.join(", ")}]`;
      for (const key of ["analytic", "numeric", "rel_error", "abs_error"]) readouts[key].textContent = sci(r[key], key.endsWith("error") ? 2 : 6);
      readouts.loss_plus.textContent = r.loss_plus.toFixed(12);
      readouts.loss_minus.textContent = r.loss_minus.toFixed(12);
      draw(r);
      return {
        result: { name: r.name, index: r.flat_index, h: r.h, analytic: r.analytic, numeric: r.numeric, rel_error: r.rel_error },
        text: `Relative error ${sci(r.rel_error, 2)} at h = ${sci(r.h, 1)}.`,
      };
    },
  });
  keepFocusOnRun(root);

  const filled = await calc.ready(async () => {
    const info = await client.call("backprop_params");
    $('[data-role="names"]').replaceChildren(...info.params.map((p) => {
      const option = document.createElement("option");
      option.value = p.name;
      option.textContent = `${p.name} (${p.shape.join(" × ")}: indices 0–${p.size - 1})`;
      return option;
    }));
  });
  if (!filled) return;
  ready = true;
  await calc.run();
}
