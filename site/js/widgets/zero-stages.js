// ZeRO stages: a thin view over pylib.web.parallel_ops.zero (pylib.systems.data_parallel).

import { bindFields, calculator, readoutMap } from "../widget-kit.js";

const B = (b) => `${Math.round(b).toLocaleString("en")} B`;
const cell = (tag, text) => Object.assign(document.createElement(tag), { textContent: text });

export async function mount(root, client) {
  const readouts = readoutMap(root);
  const table = root.querySelector('[data-role="table"]');
  const fields = bindFields(root);
  const calc = calculator(root, client, {
    op: "parallel_zero",
    fields,
    runningText: "Training both copies…",
    onError() { table.replaceChildren(); },
    onResult(r) {
      table.replaceChildren();
      const head = document.createElement("tr");
      for (const t of ["worker", "weights", "gradients", "AdamW moments", "total held", "sent per step"]) head.append(Object.assign(cell("th", t), { scope: "col" }));
      table.append(head);
      r.held.forEach((h, i) => {
        const tr = document.createElement("tr");
        tr.append(Object.assign(cell("th", `w${i}`), { scope: "row" }));
        for (const t of [B(h.params * r.itemsize), B(h.grads * r.itemsize), B(h.optimizer * r.itemsize),
          B((h.params + h.grads + h.optimizer) * r.itemsize), B(r.sent_bytes_per_step[i])]) tr.append(cell("td", t));
        table.append(tr);
      });
      const c = r.calculator;
      readouts.identical.textContent = r.bit_identical ? "bit-identical to stage 0 on every worker" : "DIFFERENT from stage 0";
      readouts.sent.textContent = `${B(r.sent_bytes_per_step[0])} (closed form ${B(r.closed_form_bytes)})`;
      readouts.ddp.textContent = B(r.ddp_sent_bytes_per_step[0]);
      readouts.calc.textContent = `weights ${B(c.weights)}, gradients ${B(c.gradients)}, optimizer ${B(c.optimizer)}`;
      return {
        result: r,
        text: `Stage ${r.stage} on ${r.workers} worker${r.workers > 1 ? "s" : ""}, ${r.steps} step${r.steps > 1 ? "s" : ""}: ` +
          (r.bit_identical ? "the same weights, bit for bit, as unsharded AdamW." : "the weights differ from unsharded AdamW."),
      };
    },
  });
  if (!(await calc.ready())) return;
  calc.setStatus("ready", "Ready. Choose a stage and press Train.", false);
}
