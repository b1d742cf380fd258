// Adam's first steps: a thin view over optim_adam_steps (pylib.web.optim_ops -> pylib.studies.adam_trace, which
// runs pylib.optim.adamw_step). It fills the table; the bars are each step's size relative to the largest shown.

import { invalidMarker, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const FIELDS = ["grads", "beta1", "beta2"];

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const rowTemplate = $('template[data-role="row"]');
  const body = $('[data-role="rows"]');
  const num = (v) => (Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : v.toFixed(4));

  async function show() {
    runButton.disabled = true;
    try {
      const value = await client.call("optim_adam_steps", Object.fromEntries(FIELDS.map((f) => [f, form.elements[f].value])));
      markInvalid(null);
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
      root.dataset.result = JSON.stringify({ n: value.rows.length, first_step: first.step, first_step_uncorrected: first.step_uncorrected,
        steps: value.rows.map((r) => r.step), steps_uncorrected: value.rows.map((r) => r.step_uncorrected) });
      setStatus("done", `First step: ${first.step.toFixed(4)} × lr with the correction, ${first.step_uncorrected.toFixed(4)} × lr without.`);
    } catch (err) {
      delete root.dataset.result;
      body.replaceChildren();
      markInvalid(err.errors);
      setStatus("error", err.errors ? Object.values(err.errors).join("\n") : err.message);
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
