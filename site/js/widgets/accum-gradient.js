// Accumulating microbatches with different token counts: a thin view over pylib.web.objective_ops's
// objective_accum_grads (pylib.studies.objective.accumulation_errors). Shown with textContent only.

import { startPython, statusSetter, widgetParts } from "../widget-kit.js";

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const inputs = [...form.querySelectorAll("input")];
  const readout = (key, text) => { $(`[data-readout="${key}"]`).textContent = text; };
  let busy = false;

  const setStatus = statusSetter(root, message);

  if (!(await startPython(client, setStatus, [runButton]))) return;

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (busy) return;
    busy = true;
    runButton.disabled = true;
    delete root.dataset.result;
    for (const input of inputs) input.removeAttribute("aria-invalid");
    setStatus("running", "Computing three gradients…");
    try {
      const r = await client.call("objective_accum_grads", { counts: inputs.map((i) => i.value) });
      readout("tokens", r.tokens.map((n) => n.toLocaleString("en")).join(", "));
      readout("mean_of_means", r.mean_of_means.toExponential(2));
      readout("token_weighted", r.token_weighted.toExponential(2));
      root.dataset.result = JSON.stringify({ tokens: r.tokens, mean_of_means: r.mean_of_means, token_weighted: r.token_weighted });
      setStatus("done", "Relative error against the one-batch gradient: ‖g − g_big‖ / ‖g_big‖.");
    } catch (err) {
      for (const key of ["tokens", "mean_of_means", "token_weighted"]) readout(key, "–");
      if (err.kind === "input" && err.errors) {
        for (const input of inputs) if (err.errors[input.name]) input.setAttribute("aria-invalid", "true");
        setStatus("error", Object.values(err.errors).join("\n"));
      } else {
        setStatus("error", err.message);
      }
    } finally {
      busy = false;
      runButton.disabled = false;
    }
  });
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Compare gradients.");
}
