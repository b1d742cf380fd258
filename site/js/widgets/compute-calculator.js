// The compute calculator: a thin view over scaling_calculator (pylib.web.scaling_ops). The sliders
// calculate again as they move (the newest answer wins); a bad field gets its message under it and the
// last good figures stay.

import { bindFields, calculator, readConfig, readoutMap } from "../widget-kit.js";

const sci = (v) => (v == null ? "–" : Math.abs(v) >= 1e5 ? v.toExponential(2) : String(+v.toFixed(1)));

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const { labels } = readConfig(root);
  const readouts = readoutMap(root);
  const rowTemplate = $('template[data-role="row"]');

  const fields = bindFields(root, { onSlide: () => calc.schedule() });
  const calc = calculator(root, client, {
    op: "scaling_calculator",
    fields,
    runningText: "Calculating…",
    onResult(v) {
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
      return { result: v, text: "Done. The fits are extrapolations beyond the budgets they were fitted on, as any use of them is." };
    },
  });

  if (!(await calc.ready())) return;
  await calc.run(); // the defaults, before the reader can press anything
}
