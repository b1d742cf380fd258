// The rounding calculator: a thin view over precision_round (pylib.web.precision_ops, which calls
// pylib.systems.precision.decompose). It only lays out what the worker sends.

import { invalidMarker, showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";

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
  const { $, form, message, runButton } = widgetParts(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(["value"], (n) => form.elements[n]);
  const table = $('[data-role="output"]');
  const rows = $('[data-role="rows"]');
  const rowTemplate = $('template[data-role="row"]');
  const slider = form.elements.log10;
  let busy = false;
  let pending = false;

  async function round() {
    if (busy) { pending = true; return; }
    busy = true;
    markInvalid(null);
    setStatus("running", "Rounding…");
    try {
      const r = await client.call("precision_round", { value: form.elements.value.value });
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
        cell("regime").className = `prec-line regime-${f.regime}`;
        cell("max").textContent = fmt(f.max);
        cell("smallest_subnormal").textContent = fmt(f.smallest_subnormal / 2);
        rows.append(tr);
      }
      table.hidden = false;
      root.dataset.result = JSON.stringify(r);
      if (r.value !== 0 && Number.isFinite(r.value)) slider.value = String(Math.log10(Math.abs(r.value)));
      setStatus("done", `${fmt(r.value)} in each format.`);
    } catch (err) {
      table.hidden = true;
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    } finally {
      busy = false;
      if (pending) { pending = false; round(); }
    }
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); if (!runButton.disabled) round(); });
  if (!(await startPython(client, setStatus, [runButton]))) return;
  slider.addEventListener("input", () => {
    const sign = form.elements.value.value.trim().startsWith("-") ? -1 : 1;
    form.elements.value.value = String(sign * Number(Math.pow(10, Number(slider.value)).toPrecision(6)));
    round();
  });
  runButton.disabled = false;
  setStatus("ready", "Ready.");
  round();
}
