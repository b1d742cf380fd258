// Weight decay, decoupled or inside Adam: a thin view over optim_decay_paths (pylib.web.optim_ops ->
// pylib.studies.adam_trace.decay_paths). It draws each weight's decay-caused shrinkage against step.

import { bindFields, calculator, readoutMap } from "../widget-kit.js";
import { keepFocusOnRun } from "./calc-focus.js";
import { onResize } from "../plot.js";
import { drawChart } from "./init-plot.js";

export async function mount(root, client) {
  const readouts = readoutMap(root);
  const chart = root.querySelector('[data-role="chart"]');
  const num = (v) => (v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e4) ? v.toExponential(2) : v.toFixed(4));
  const ratio = (b, a) => (a > 0 ? `${(b / a).toPrecision(3)}×` : "–");
  let last = null;
  let ready = false;

  function draw(r) {
    const steps = r.adamw.map((_, t) => t);
    const col = (rows, i) => rows.map((row) => row[i]);
    const [wa, wb] = r.adamw[r.adamw.length - 1];
    const [la, lb] = r.adam_l2[r.adam_l2.length - 1];
    // four series, four colours: AdamW in the blues, Adam + L2 in the oranges; weight B dashed
    drawChart(chart, [
      { xs: steps, ys: col(r.adamw, 0), color: 1, points: false, name: "adamw-a", label: "AdamW, weight A" },
      { xs: steps, ys: col(r.adamw, 1), color: 6, dash: "6 4", points: false, name: "adamw-b", label: "AdamW, weight B" },
      { xs: steps, ys: col(r.adam_l2, 0), color: 2, points: false, name: "l2-a", label: "Adam + L2, weight A" },
      { xs: steps, ys: col(r.adam_l2, 1), color: 4, dash: "6 4", points: false, name: "l2-b", label: "Adam + L2, weight B" },
    ], {
      xlabel: "step", ylabel: "shrinkage from the decay",
      summary: `After ${r.settings.steps} steps the decay has pulled weight A in by ${num(wa)} and weight B by ${num(wb)} under AdamW ` +
        `(B over A: ${ratio(wb, wa)}), and by ${num(la)} and ${num(lb)} under Adam with L2 (${ratio(lb, la)}).`,
    });
  }

  const fields = bindFields(root, { onSlide: () => ready && calc.schedule() });
  const calc = calculator(root, client, {
    op: "optim_decay_paths",
    fields,
    onResult(r) {
      last = r;
      draw(r);
      const [wa, wb] = r.adamw[r.adamw.length - 1];
      const [la, lb] = r.adam_l2[r.adam_l2.length - 1];
      readouts.adamw.textContent = `${num(wa)}, ${num(wb)}`;
      readouts.adam_l2.textContent = `${num(la)}, ${num(lb)}`;
      readouts.ratio_adamw.textContent = ratio(wb, wa);
      readouts.ratio_l2.textContent = ratio(lb, la);
      return {
        result: { adamw: [wa, wb], adam_l2: [la, lb], steps: r.settings.steps },
        text: `After ${r.settings.steps} steps AdamW has decayed the two weights by ${num(wa)} and ${num(wb)}; ` +
          `Adam with L2 by ${num(la)} (A, gradients ${r.settings.grad_a}) and ${num(lb)} (B, gradients ${r.settings.grad_b}).`,
      };
    },
  });
  keepFocusOnRun(root);
  if (!(await calc.ready())) return;
  ready = true;
  onResize(chart, () => last && draw(last));
  await calc.run();
}
