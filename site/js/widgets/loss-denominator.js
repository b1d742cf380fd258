// The loss-denominator table: a thin view over pylib.web.objective_ops's objective_denominators
// (validation and both reductions in pylib.studies.objective). Inputs are read as strings and sent as typed.

import { startPython, statusSetter, widgetParts } from "../widget-kit.js";

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const tbody = $('[data-role="rows"]');
  const addButton = $('[data-action="add"]');
  const rowTemplate = $('template[data-role="row"]');
  const readout = (key, text) => { $(`[data-readout="${key}"]`).textContent = text; };
  const rowsMax = Number(root.dataset.rowsMax);
  let examples = null;

  const setStatus = statusSetter(root, message);
  const rows = () => [...tbody.querySelectorAll("tr")];
  const renumber = () => {
    rows().forEach((tr, i) => { tr.querySelector(".ld-name").textContent = String(i + 1); });
    addButton.disabled = rows().length >= rowsMax;
  };
  const clearOutputs = () => {
    for (const key of ["token_weighted", "mean_of_means", "total_tokens"]) readout(key, "–");
    for (const tr of rows()) for (const c of [".ld-mean", ".ld-w1", ".ld-w2"]) tr.querySelector(c).textContent = "–";
  };
  function addRow(count = "", loss = "") {
    if (rows().length >= rowsMax) return;
    const tr = rowTemplate.content.firstElementChild.cloneNode(true);
    tr.querySelector('input[name="count"]').value = String(count);
    tr.querySelector('input[name="loss"]').value = String(loss);
    tr.querySelector('[data-action="remove"]').addEventListener("click", () => {
      tr.remove();
      renumber();
      compute();
    });
    tbody.append(tr);
    renumber();
  }
  const load = (example) => {
    tbody.replaceChildren();
    for (const r of example) addRow(r.count, r.loss);
  };

  if (!(await startPython(client, setStatus, [runButton], async () => { examples = await client.call("objective_worked_examples"); }))) return;

  let sequence = 0;
  async function compute() {
    const mine = ++sequence;
    const typed = rows().map((tr) => ({
      count: tr.querySelector('input[name="count"]').value,
      loss: tr.querySelector('input[name="loss"]').value,
    }));
    root.dataset.status = "running";
    try {
      const r = await client.call("objective_denominators", { rows: typed });
      if (mine !== sequence) return;
      for (const input of root.querySelectorAll("input")) input.removeAttribute("aria-invalid");
      readout("token_weighted", r.token_weighted.toFixed(4));
      readout("mean_of_means", r.mean_of_means.toFixed(4));
      readout("total_tokens", r.total_tokens.toLocaleString("en"));
      rows().forEach((tr, i) => {
        const mean = r.sequence_means[i];
        tr.querySelector(".ld-mean").textContent = mean == null ? "(none counted)" : mean.toFixed(4);
        tr.querySelector(".ld-w1").textContent = r.counts[i] ? r.token_weights[i].token_weighted.toPrecision(3) : "–";
        tr.querySelector(".ld-w2").textContent = r.counts[i] ? r.token_weights[i].mean_of_means.toPrecision(3) : "–";
      });
      root.dataset.result = JSON.stringify({ token_weighted: r.token_weighted, mean_of_means: r.mean_of_means,
        total_tokens: r.total_tokens, counts: r.counts });
      const same = Math.abs(r.token_weighted - r.mean_of_means) <= 1e-12 * Math.max(1, r.token_weighted);
      setStatus("done", same ? "The two reductions agree: every sequence counts the same number of tokens, or only one is counted."
        : "The two reductions differ: the same losses, weighted differently.");
    } catch (err) {
      if (mine !== sequence) return;
      clearOutputs();
      delete root.dataset.result;
      const errors = err.errors || {};
      for (const input of root.querySelectorAll("input")) input.removeAttribute("aria-invalid");
      for (const key of Object.keys(errors)) {
        const [name, index] = key.split(".");
        const tr = rows()[Number(index)];
        const input = tr && tr.querySelector(`input[name="${name}"]`);
        if (input) input.setAttribute("aria-invalid", "true");
      }
      setStatus("error", err.kind === "input" && err.errors ? Object.values(errors).join("\n") : err.message);
    }
  }

  let timer = null;
  tbody.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(compute, 200);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    compute();
  });
  addButton.addEventListener("click", () => { addRow("1", "1"); compute(); });
  $('[data-action="example-a"]').addEventListener("click", () => { load(examples.a); compute(); });
  $('[data-action="example-b"]').addEventListener("click", () => { load(examples.b); compute(); });
  load(examples.a);
  runButton.disabled = false;
  await compute();
}
