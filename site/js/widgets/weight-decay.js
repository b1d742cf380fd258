// Weight decay, decoupled or inside Adam: a thin view over optim_decay_paths (pylib.web.optim_ops ->
// pylib.studies.adam_trace.decay_paths). It draws each weight's decay-caused shrinkage against step.

import { invalidMarker, readoutMap, showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";
import { drawChart } from "./init-plot.js";

const FIELDS = ["grad_a", "grad_b", "lr", "wd", "steps"];

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const readouts = readoutMap(root);
  const chart = $('[data-role="chart"]');
  const num = (v) => (v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e4) ? v.toExponential(2) : v.toFixed(4));
  const ratio = (b, a) => (a > 0 ? `${(b / a).toPrecision(3)}×` : "–");

  async function show() {
    runButton.disabled = true;
    try {
      const r = await client.call("optim_decay_paths", Object.fromEntries(FIELDS.map((f) => [f, form.elements[f].value])));
      markInvalid(null);
      const steps = r.adamw.map((_, t) => t);
      const col = (rows, i) => rows.map((row) => row[i]);
      drawChart(chart, [
        { xs: steps, ys: col(r.adamw, 0), color: "#2a5db0", points: false, name: "adamw-a" },
        { xs: steps, ys: col(r.adamw, 1), color: "#2a5db0", dash: "6 4", points: false, name: "adamw-b" },
        { xs: steps, ys: col(r.adam_l2, 0), color: "#d9480f", points: false, name: "l2-a" },
        { xs: steps, ys: col(r.adam_l2, 1), color: "#d9480f", dash: "6 4", points: false, name: "l2-b" },
      ], { xlabel: "step", ylabel: "shrinkage from the decay" });
      const [wa, wb] = r.adamw[r.adamw.length - 1];
      const [la, lb] = r.adam_l2[r.adam_l2.length - 1];
      readouts.adamw.textContent = `${num(wa)}, ${num(wb)}`;
      readouts.adam_l2.textContent = `${num(la)}, ${num(lb)}`;
      readouts.ratio_adamw.textContent = ratio(wb, wa);
      readouts.ratio_l2.textContent = ratio(lb, la);
      root.dataset.result = JSON.stringify({ adamw: [wa, wb], adam_l2: [la, lb], steps: r.settings.steps });
      setStatus("done", `After ${r.settings.steps} steps AdamW has decayed the two weights by ${num(wa)} and ${num(wb)}; ` +
        `Adam with L2 by ${num(la)} (A, gradients ${r.settings.grad_a}) and ${num(lb)} (B, gradients ${r.settings.grad_b}).`);
    } catch (err) {
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    } finally {
      runButton.disabled = false;
    }
  }

  if (!(await startPython(client, setStatus, [runButton]))) return;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    show();
  });
  await show();
}
