// Accumulating microbatches with different token counts: a thin view over pylib.web.objective_ops's
// objective_accum_grads (pylib.studies.objective.accumulation_errors), through the kit's calculator.
// Shown with textContent only.

import { bindFields, calculator } from "../widget-kit.js";
import { keepFocus } from "./data-svg.js";

export async function mount(root, client) {
  const readout = (key, text) => { root.querySelector(`[data-readout="${key}"]`).textContent = text; };
  const fields = bindFields(root, { onCommit: () => calc.schedule() }); // let go of a slider: compare again
  const names = Object.keys(fields.values()).sort(); // count.0 … count.3
  const calc = calculator(root, client, {
    op: "objective_accum_grads",
    fields,
    runningText: "Computing three gradients…",
    args: () => ({ counts: names.map((n) => fields.input(n).value) }),
    onError: () => { for (const key of ["tokens", "mean_of_means", "token_weighted"]) readout(key, "–"); },
    onResult(r) {
      readout("tokens", r.tokens.map((n) => n.toLocaleString("en")).join(", "));
      readout("mean_of_means", r.mean_of_means.toExponential(2));
      readout("token_weighted", r.token_weighted.toExponential(2));
      return {
        result: { tokens: r.tokens, mean_of_means: r.mean_of_means, token_weighted: r.token_weighted },
        text: `Relative error against the one-batch gradient, ‖g − g_big‖ / ‖g_big‖: ${r.mean_of_means.toExponential(2)} ` +
          `for the mean of means, ${r.token_weighted.toExponential(2)} when dividing by the total count.`,
      };
    },
  });
  keepFocus(root);
  if (!(await calc.ready())) return;
  calc.setStatus("ready", "Ready. Press Compare gradients.", false);
}
