// The compute calculator: a thin view over scaling_calculator (pylib.web.scaling_ops).

import { readConfig, readoutMap, showRunError, startPython, statusSetter, widgetParts, invalidMarker } from "../widget-kit.js";

const sci = (v) => (v == null ? "–" : Math.abs(v) >= 1e5 ? v.toExponential(2) : String(+v.toFixed(1)));

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const { labels } = readConfig(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const fields = ["compute", "mfu_percent", "tokens"];
  const markInvalid = invalidMarker(fields, (name) => form.elements[name]);
  const rowTemplate = $('template[data-role="row"]');
  let busy = false;

  async function calculate() {
    if (busy) return;
    busy = true;
    markInvalid(null);
    setStatus("running", "Calculating…");
    try {
      const args = Object.fromEntries(fields.map((f) => [f, form.elements[f].value]));
      const v = await client.call("scaling_calculator", args);
      const body = $('[data-role="fits"]');
      body.replaceChildren();
      for (const [name, f] of Object.entries(v.fits)) {
        const tr = rowTemplate.content.firstElementChild.cloneNode(true);
        tr.querySelector('[data-cell="label"]').textContent = labels[name] || name;
        tr.querySelector('[data-cell="n"]').textContent = sci(f.n);
        tr.querySelector('[data-cell="d"]').textContent = sci(f.d);
        tr.querySelector('[data-cell="tpp"]').textContent = sci(f.tokens_per_param);
        tr.querySelector('[data-cell="loss"]').textContent = f.loss == null ? "–" : f.loss.toFixed(3);
        body.append(tr);
      }
      const l = v.llama;
      readouts.params.textContent = sci(l.params);
      readouts.per_token.textContent = sci(l.flops_per_token);
      readouts.flops.textContent = sci(l.flops);
      readouts.six_nd.textContent = sci(l.six_nd);
      readouts.gpu_days.textContent = sci(l.gpu_days);
      readouts.tpp.textContent = sci(l.tokens_per_param);
      readouts.memory.textContent = `${(l.memory_bytes / 1e9).toFixed(1)} GB`;
      $('[data-role="output"]').hidden = false;
      root.dataset.result = JSON.stringify(v);
      setStatus("done", "Done. The fits are extrapolations beyond the budgets they were fitted on, as any use of them is.");
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
    } finally {
      busy = false;
    }
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); calculate(); });
  if (!(await startPython(client, setStatus, [runButton]))) return;
  await calculate(); // the defaults, before the reader can press anything
  runButton.addEventListener("click", calculate);
  runButton.disabled = false;
}
