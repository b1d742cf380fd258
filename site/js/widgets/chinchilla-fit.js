// The Chinchilla fit: a thin view over scaling_chinchilla (pylib.web.scaling_ops ->
// pylib.studies.chinchilla_fit). Fit runs the fit in the page's Python; a bad field gets its message
// under it and the last good figures stay.

import { bindFields, calculator, readoutMap } from "../widget-kit.js";

const sci = (v) => (Math.abs(v) >= 1e5 ? v.toExponential(3) : String(+v.toPrecision(5)));

export async function mount(root, client) {
  const readouts = readoutMap(root);
  const fields = bindFields(root, {});
  const calc = calculator(root, client, {
    op: "scaling_chinchilla",
    fields,
    runningText: "Fitting…",
    onResult(v) {
      const c = v.constants;
      readouts.points.textContent = `${v.points} of ${v.total}`;
      readouts.E.textContent = c.E.toFixed(3);
      readouts.A.textContent = sci(c.A);
      readouts.B.textContent = sci(c.B);
      readouts.alpha.textContent = c.alpha.toFixed(4);
      readouts.beta.textContent = c.beta.toFixed(4);
      readouts.a.textContent = v.optimum.a.toFixed(3);
      readouts.n_opt.textContent = sci(v.optimum.n);
      readouts.d_opt.textContent = sci(v.optimum.d);
      readouts.tpp.textContent = v.optimum.tokens_per_param.toFixed(1);
      return { result: v, text: `Fitted ${v.points} runs.` };
    },
  });
  if (!(await calc.ready())) return;
  await calc.run();
}
