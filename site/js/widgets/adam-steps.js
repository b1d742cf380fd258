// Adam's first steps: a thin view over optim_adam_steps (pylib.web.optim_ops -> pylib.studies.adam_trace, which
// runs pylib.optim.adamw_step). It fills the table; the bars are each step's size relative to the largest shown.

import { bindFields, calculator } from "../widget-kit.js";
import { keepFocusOnRun } from "./calc-focus.js";

export async function mount(root, client) {
  const rowTemplate = root.querySelector('template[data-role="row"]');
  const body = root.querySelector('[data-role="rows"]');
  const num = (v) => (Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : v.toFixed(4));
  let ready = false;

  const fields = bindFields(root, { onSlide: () => ready && calc.schedule() });
  const calc = calculator(root, client, {
    op: "optim_adam_steps",
    fields,
    onError: () => body.replaceChildren(),
    onResult(value) {
      const biggest = Math.max(...value.rows.flatMap((r) => [Math.abs(r.step), Math.abs(r.step_uncorrected)]), 1e-300);
      body.replaceChildren(...value.rows.map((r) => {
        const tr = rowTemplate.content.firstElementChild.cloneNode(true);
        for (const cell of tr.querySelectorAll("[data-col]")) {
          const key = cell.dataset.col;
          cell.textContent = key === "t" ? String(r.t) : num(r[key]);
        }
        for (const bar of tr.querySelectorAll("[data-bar]")) bar.style.width = `${(100 * Math.abs(r[bar.dataset.bar])) / biggest}%`;
        return tr;
      }));
      const first = value.rows[0];
      return {
        result: { n: value.rows.length, first_step: first.step, first_step_uncorrected: first.step_uncorrected,
          steps: value.rows.map((r) => r.step), steps_uncorrected: value.rows.map((r) => r.step_uncorrected) },
        text: `First step: ${first.step.toFixed(4)} × lr with the correction, ${first.step_uncorrected.toFixed(4)} × lr without.`,
      };
    },
  });
  keepFocusOnRun(root);
  if (!(await calc.ready())) return;
  ready = true;
  await calc.run();
}
