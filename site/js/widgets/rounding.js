// The rounding calculator: a thin view over precision_round (pylib.web.precision_ops, which calls
// pylib.systems.precision.decompose). It only lays out what the worker sends. The slider is the kit's
// log-scale slider over |value| (1e-45 to 1e39); it keeps the sign of the value typed, and rounds as it moves.

import { bindFields, calculator } from "../widget-kit.js";

const fmt = (v) => {
  if (v == null) return "–";
  if (typeof v === "string") return v;
  if (v === 0) return Object.is(v, -0) ? "-0" : "0";
  const a = Math.abs(v);
  return a >= 1e5 || a < 1e-3 ? v.toExponential(5) : v.toPrecision(8).replace(/\.?0+$/, "");
};
const pct = (v) => (v == null ? "–" : v === 0 ? "0" : v.toExponential(2));
const REGIME = { normal: "normal", subnormal: "subnormal (fewer bits)", zero: "zero", underflow: "underflow → 0", overflow: "overflow", inf: "inf", nan: "nan" };

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const table = $('[data-role="output"]');
  const rows = $('[data-role="rows"]');
  const rowTemplate = $('template[data-role="row"]');
  const slider = $('[data-slider-for="value"]');
  let negative = false; // the sign of the value typed: the slider moves |value| and keeps it

  const fields = bindFields(root, {
    onSlide(name, v) {
      if (negative) {
        fields.input("value").value = String(-v);
        slider.setAttribute("aria-valuetext", fields.input("value").value);
      }
      calc.schedule();
    },
  });
  const input = fields.input("value");
  // a negative value typed: the slider goes to its magnitude (the kit's sync leaves it for values ≤ 0)
  input.addEventListener("input", () => {
    const v = Number(input.value.trim() || NaN);
    negative = input.value.trim().startsWith("-");
    if (Number.isFinite(v) && v < 0) {
      const lo = Math.log10(Number(slider.dataset.min)), hi = Math.log10(Number(slider.dataset.max)), n = Number(slider.max);
      slider.value = String(Math.round(((Math.log10(-v) - lo) / (hi - lo)) * n));
    }
  });

  const calc = calculator(root, client, {
    op: "precision_round",
    fields,
    runningText: "Rounding…",
    onError() { table.hidden = true; },
    onResult(r) {
      rows.replaceChildren();
      for (const f of r.formats) {
        const tr = rowTemplate.content.firstElementChild.cloneNode(true);
        tr.dataset.format = f.format;
        const cell = (k) => tr.querySelector(`[data-cell="${k}"]`);
        cell("name").textContent = `${f.name} (1+${f.exponent_bits}+${f.mantissa_bits})`;
        cell("sign").textContent = f.sign;
        cell("exponent").textContent = f.exponent;
        cell("mantissa").textContent = f.mantissa;
        cell("stored").textContent = fmt(f.stored);
        cell("abs_error").textContent = fmt(f.abs_error);
        cell("rel_error").textContent = pct(f.rel_error);
        cell("below").textContent = fmt(f.below);
        cell("above").textContent = fmt(f.above);
        cell("regime").textContent = REGIME[f.regime] || f.regime;
        cell("regime").className = `prec-line prec-wraps regime-${f.regime}`;
        cell("max").textContent = fmt(f.max);
        cell("smallest_subnormal").textContent = fmt(f.smallest_subnormal / 2);
        rows.append(tr);
      }
      table.hidden = false;
      return { result: r, text: `${fmt(r.value)} in each format.` };
    },
  });
  if (!(await calc.ready())) return;
  await calc.run();
}
