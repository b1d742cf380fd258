// The attention mask of a packed window and the live leak test: a view over pylib.web.data_ops's
// data_pack_window (masks computed by pylib.layers) and data_leak (logits from pylib.model).

import { startPython, statusSetter, widgetParts } from "../widget-kit.js";
import { barChart, DOC_COLORS } from "./data-svg.js";

const SHOWN = { "\n": "↵\n", "␄": "[EOS]" };

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const leakForm = $('[data-role="leak-form"]');
  const leakMessage = $('[data-role="leak-message"]');
  const canvas = $('[data-role="grid"]');
  const textBox = $('[data-role="text"]');
  const spanTemplate = $('template[data-role="span"]');
  const leakButton = $('[data-action="leak"]');
  let win = null;
  const setStatus = statusSetter(root, message);
  const color = (d) => DOC_COLORS[d % DOC_COLORS.length];

  const drawGrid = () => {
    if (!win) return;
    const mask = win[form.elements.mask.value];
    const ctx = canvas.getContext("2d");
    const T = mask.length;
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, T, T);
    for (let t = 0; t < T; t++) {
      for (let s = 0; s < T; s++) {
        if (!mask[t][s]) continue;
        ctx.fillStyle = win.doc_ids[t] === win.doc_ids[s] ? color(win.doc_ids[t]) : "#9a9a9a";
        ctx.fillRect(s, t, 1, 1);
      }
    }
  };

  const show = async () => {
    form.elements.start.removeAttribute("aria-invalid");
    try {
      win = await client.call("data_pack_window", { start: form.elements.start.value.trim() || null });
      if (form.elements.start.value.trim() === "auto") form.elements.start.value = String(win.start);
      drawGrid();
      textBox.replaceChildren(...win.chars.map((ch, t) => {
        const span = spanTemplate.content.firstElementChild.cloneNode(true);
        span.textContent = SHOWN[ch] ?? ch;
        span.style.color = color(win.doc_ids[t]);
        return span;
      }));
      const allowed = (m) => m.flat().reduce((a, b) => a + b, 0);
      root.dataset.result = JSON.stringify({ start: win.start, n_docs: win.n_docs, allowed_causal: allowed(win.causal), allowed_doc_mask: allowed(win.doc_mask) });
      setStatus("done", `Window at ${win.start.toLocaleString("en")}: ${win.n_docs} document${win.n_docs === 1 ? "" : "s"}. ` +
        `Grey cells (causal only) are attention across a document boundary.`);
    } catch (err) {
      if (err.kind === "input") form.elements.start.setAttribute("aria-invalid", "true");
      setStatus("error", err.message);
    }
  };

  const leak = async () => {
    leakForm.elements.position.removeAttribute("aria-invalid");
    delete root.dataset.leak;
    if (!win) await show();
    if (!win) return;
    try {
      const r = await client.call("data_leak", { start: win.start, position: leakForm.elements.position.value });
      const colors = r.doc_ids.map((d, t) => (t === r.position ? "#bbb" : color(d)));
      // The changed position itself moves most; the scale is set by the others (its grey bar is clipped).
      const others = (v) => v.filter((_, t) => t !== r.position);
      const top = Math.max(...others(r.masked), ...others(r.unmasked));
      barChart($('[data-role="bars-masked"]'), r.masked, colors, { ymax: top, title: "with the document mask" });
      barChart($('[data-role="bars-unmasked"]'), r.unmasked, colors, { ymax: top, title: "causal mask only" });
      root.dataset.leak = JSON.stringify({ position: r.position, max_other_masked: r.max_other_masked, max_other_unmasked: r.max_other_unmasked });
      root.dataset.status = "done";
      leakMessage.classList.remove("error");
      leakMessage.textContent = `Changed “${r.changed_from}” to “${r.changed_to}” at position ${r.position}. ` +
        `Largest |Δ logit| in the other documents: ${r.max_other_masked.toExponential(2)} with the mask, ` +
        `${r.max_other_unmasked.toExponential(2)} without.`;
    } catch (err) {
      if (err.kind === "input") leakForm.elements.position.setAttribute("aria-invalid", "true");
      leakMessage.classList.add("error");
      leakMessage.textContent = err.message;
    }
  };

  if (!(await startPython(client, setStatus, [runButton, leakButton]))) return;
  form.addEventListener("submit", (e) => { e.preventDefault(); show(); });
  form.elements.mask.addEventListener("change", drawGrid);
  leakForm.addEventListener("submit", (e) => { e.preventDefault(); leak(); });
  await show();
  runButton.disabled = leakButton.disabled = false;
}
