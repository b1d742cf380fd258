// ZeRO stages: a thin view over pylib.web.parallel_ops.zero (pylib.systems.data_parallel).

import { invalidMarker, readoutMap, showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const FIELDS = ["workers", "stage", "steps"];
const B = (b) => `${Math.round(b).toLocaleString("en")} B`;

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const readouts = readoutMap(root);
  const table = $('[data-role="table"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);

  if (!(await startPython(client, setStatus, [runButton]))) return;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    runButton.disabled = true;
    markInvalid(null);
    setStatus("running", "Training both copies…");
    try {
      const args = Object.fromEntries(FIELDS.map((f) => [f, form.elements[f].value]));
      const r = await client.call("parallel_zero", args);
      table.replaceChildren();
      const head = document.createElement("tr");
      for (const t of ["worker", "weights", "gradients", "AdamW moments", "total held", "sent per step"]) head.append(Object.assign(document.createElement("th"), { textContent: t }));
      table.append(head);
      r.held.forEach((h, i) => {
        const tr = document.createElement("tr");
        const cells = [`w${i}`, B(h.params * r.itemsize), B(h.grads * r.itemsize), B(h.optimizer * r.itemsize),
          B((h.params + h.grads + h.optimizer) * r.itemsize), B(r.sent_bytes_per_step[i])];
        for (const t of cells) tr.append(Object.assign(document.createElement("td"), { textContent: t }));
        table.append(tr);
      });
      const c = r.calculator;
      readouts.identical.textContent = r.bit_identical ? "bit-identical to stage 0 on every worker" : "DIFFERENT from stage 0";
      readouts.sent.textContent = `${B(r.sent_bytes_per_step[0])} (closed form ${B(r.closed_form_bytes)})`;
      readouts.ddp.textContent = B(r.ddp_sent_bytes_per_step[0]);
      readouts.calc.textContent = `weights ${B(c.weights)}, gradients ${B(c.gradients)}, optimizer ${B(c.optimizer)}`;
      root.dataset.result = JSON.stringify(r);
      setStatus("done", `Stage ${r.stage} on ${r.workers} worker${r.workers > 1 ? "s" : ""}, ${r.steps} step${r.steps > 1 ? "s" : ""}: ` +
        (r.bit_identical ? "the same weights, bit for bit, as unsharded AdamW." : "the weights differ from unsharded AdamW."));
    } catch (err) {
      delete root.dataset.result;
      table.replaceChildren();
      showRunError(err, setStatus, markInvalid);
    } finally {
      runButton.disabled = false;
    }
  });
  runButton.disabled = false;
  setStatus("ready", "Ready. Choose a stage and press Train.");
}
