// Perplexity as a number of equally likely choices: a thin view over objective_perplexity (pylib.web.objective_ops ->
// pylib.studies.objective.tempered_unigram). Dragging the temperature asks Python again; only the latest answer is drawn.

import { invalidMarker, readoutMap, showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(["tau"], (name) => form.elements[name]);
  const readouts = readoutMap(root);
  const bars = $('[data-role="bars"]');
  const fmt = (v) => (Math.abs(v) >= 1e5 ? v.toExponential(3) : v.toPrecision(4));
  let seq = 0;

  function draw(r) {
    const top = r.probs[0] || 1;
    const children = r.probs.map((p, i) => {
      const bar = document.createElement("div");
      bar.className = "ppl-bar";
      bar.style.height = `${(100 * p) / top}%`;
      bar.title = `${JSON.stringify(r.tokens[i])}: p = ${p.toPrecision(3)}`;
      if (i < 12) {
        const label = document.createElement("span");
        label.textContent = r.tokens[i] === " " ? "␣" : r.tokens[i];
        bar.append(label);
      }
      return bar;
    });
    const band = document.createElement("div");
    band.className = "ppl-band";
    band.style.width = `${Math.min(100, (100 * r.own_ppl) / r.probs.length)}%`;
    bars.replaceChildren(...children, band);
  }

  async function show() {
    const mine = ++seq;
    try {
      const r = await client.call("objective_perplexity", { tau: form.elements.tau.value });
      if (mine !== seq) return;
      markInvalid(null);
      draw(r);
      readouts.val_loss.textContent = `${fmt(r.val_loss)} nats`;
      readouts.val_ppl.textContent = fmt(r.val_ppl);
      readouts.entropy.textContent = `${fmt(r.entropy)} nats`;
      readouts.own_ppl.textContent = fmt(r.own_ppl);
      root.dataset.result = JSON.stringify({ tau: r.tau, val_loss: r.val_loss, val_ppl: r.val_ppl, entropy: r.entropy, own_ppl: r.own_ppl });
      setStatus("done", `At temperature ${r.tau}, the model is as unsure as a uniform choice among ${fmt(r.own_ppl)} tokens, ` +
        `and on real text it scores like one among ${fmt(r.val_ppl)}` +
        (r.val_ppl > 2 * r.own_ppl ? ": it is confident and often wrong, and the wrong guesses cost it most." : "."));
    } catch (err) {
      if (mine !== seq) return;
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    }
  }

  if (!(await startPython(client, setStatus, [runButton]))) return;
  form.elements.tau_slider.addEventListener("input", () => {
    form.elements.tau.value = String(+(10 ** Number(form.elements.tau_slider.value)).toPrecision(3));
    show();
  });
  form.elements.tau.addEventListener("input", () => {
    const t = Number(form.elements.tau.value);
    if (Number.isFinite(t) && t > 0) form.elements.tau_slider.value = String(Math.log10(t));
    show();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    show();
  });
  runButton.disabled = false;
  await show();
}
