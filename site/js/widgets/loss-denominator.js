// The loss-denominator table: a thin view over pylib.web.objective_ops's objective_denominators
// (validation and both reductions in pylib.studies.objective), through the kit's calculator. Each
// cell's input is named as pylib's error keys (count.i, loss.i), so a bad cell's message sits under it;
// inputs are read as strings and sent as typed.

import { bindFields, calculator } from "../widget-kit.js";
import { keepFocus } from "./data-svg.js";

const LABELS = { count: "counted tokens", loss: "summed loss" };

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const tbody = $('[data-role="rows"]');
  const addButton = $('[data-action="add"]');
  const exampleButtons = [$('[data-action="example-a"]'), $('[data-action="example-b"]')];
  const rowTemplate = $('template[data-role="row"]');
  const readout = (key, text) => { $(`[data-readout="${key}"]`).textContent = text; };
  const rowsMax = Number(root.dataset.rowsMax);
  let examples = null;

  const rows = () => [...tbody.querySelectorAll("tr")];
  // names, ids, labels and error slots follow the row's place: pylib's errors say count.i / loss.i
  const renumber = () => {
    rows().forEach((tr, i) => {
      tr.querySelector(".ld-name").textContent = String(i + 1);
      for (const key of ["count", "loss"]) {
        const id = `${root.id}-${key}-${i}`;
        const input = tr.querySelector(`input[data-name="${key}"]`);
        input.name = `${key}.${i}`;
        input.id = id;
        input.setAttribute("aria-describedby", `${id}-error`);
        const label = tr.querySelector(`label[data-for="${key}"]`);
        label.htmlFor = id;
        label.textContent = `Sequence ${i + 1}: ${LABELS[key]}`;
        const slot = tr.querySelector(`[data-error-slot="${key}"]`);
        slot.id = `${id}-error`;
        slot.dataset.errorFor = `${key}.${i}`;
      }
      tr.querySelector('[data-action="remove"]').setAttribute("aria-label", `Remove sequence ${i + 1}`);
    });
    addButton.disabled = rows().length >= rowsMax;
  };
  const clearOutputs = () => {
    for (const key of ["token_weighted", "mean_of_means", "total_tokens"]) readout(key, "–");
    for (const tr of rows()) for (const c of [".ld-mean", ".ld-w1", ".ld-w2"]) tr.querySelector(c).textContent = "–";
  };

  const fields = bindFields(root);
  const calc = calculator(root, client, {
    op: "objective_denominators",
    fields,
    busy: exampleButtons,
    args: () => ({ rows: rows().map((tr) => ({
      count: tr.querySelector('input[data-name="count"]').value,
      loss: tr.querySelector('input[data-name="loss"]').value,
    })) }),
    onError: clearOutputs,
    onResult(r) {
      readout("token_weighted", r.token_weighted.toFixed(4));
      readout("mean_of_means", r.mean_of_means.toFixed(4));
      readout("total_tokens", r.total_tokens.toLocaleString("en"));
      rows().forEach((tr, i) => {
        const mean = r.sequence_means[i];
        tr.querySelector(".ld-mean").textContent = mean == null ? "(none counted)" : mean.toFixed(4);
        tr.querySelector(".ld-w1").textContent = r.counts[i] ? r.token_weights[i].token_weighted.toPrecision(3) : "–";
        tr.querySelector(".ld-w2").textContent = r.counts[i] ? r.token_weights[i].mean_of_means.toPrecision(3) : "–";
      });
      const same = Math.abs(r.token_weighted - r.mean_of_means) <= 1e-12 * Math.max(1, r.token_weighted);
      return {
        result: { token_weighted: r.token_weighted, mean_of_means: r.mean_of_means, total_tokens: r.total_tokens, counts: r.counts },
        text: (same ? "The two reductions agree: every sequence counts the same number of tokens, or only one is counted."
          : "The two reductions differ: the same losses, weighted differently.") +
          ` Token-weighted ${r.token_weighted.toFixed(4)}, mean of means ${r.mean_of_means.toFixed(4)}.`,
      };
    },
  });
  keepFocus(root);

  function addRow(count = "", loss = "") {
    if (rows().length >= rowsMax) return;
    const tr = rowTemplate.content.firstElementChild.cloneNode(true);
    tr.querySelector('input[data-name="count"]').value = String(count);
    tr.querySelector('input[data-name="loss"]').value = String(loss);
    tr.querySelector('[data-action="remove"]').addEventListener("click", () => {
      const next = tr.nextElementSibling || tr.previousElementSibling;
      tr.remove();
      renumber();
      // the pressed button is gone: focus the next row's Remove (or Add) rather than <body>
      (next ? next.querySelector('[data-action="remove"]') : addButton).focus();
      calc.schedule();
    });
    tbody.append(tr);
    renumber();
  }
  const load = (example) => {
    tbody.replaceChildren();
    for (const r of example) addRow(r.count, r.loss);
  };

  if (!(await calc.ready(async () => { examples = await client.call("objective_worked_examples"); }))) return;

  tbody.addEventListener("input", () => calc.soon(200));
  addButton.addEventListener("click", () => {
    addRow("1", "1");
    if (addButton.disabled) rows().at(-1).querySelector("input").focus(); // the table is full: Add can no longer hold the focus
    calc.schedule();
  });
  exampleButtons[0].addEventListener("click", () => { load(examples.a); calc.run(); });
  exampleButtons[1].addEventListener("click", () => { load(examples.b); calc.run(); });
  load(examples.a);
  await calc.run();
}
