// Perplexity as a number of equally likely choices: a thin view over objective_perplexity (pylib.web.objective_ops ->
// pylib.studies.objective.tempered_unigram), through the kit's calculator. Dragging the temperature (a log slider) or
// typing it asks Python again; only the latest answer is drawn. The bars are HTML in a chart frame, with
// its summary sentence and data table.

import { describe, fillTable, frameOf, onResize } from "../plot.js";
import { bindFields, calculator, readoutMap } from "../widget-kit.js";
import { keepFocus, tableFocusable } from "./data-svg.js";

export async function mount(root, client) {
  const readouts = readoutMap(root);
  const bars = root.querySelector('[data-role="bars"]');
  const frame = tableFocusable(frameOf(bars));
  const fmt = (v) => (Math.abs(v) >= 1e5 ? v.toExponential(3) : v.toPrecision(4));
  const shown = (t) => (t === " " ? "␣" : t === "\n" ? "↵" : t);

  let last = null;
  function draw(r) {
    last = r;
    const top = r.probs[0] || 1;
    // a 12 px label under the first bars; on a narrow page under every step-th of them, so they never overlap
    const width = (bars.getBoundingClientRect().width || 600) / r.probs.length;
    const step = Math.max(1, Math.ceil(14 / width));
    const children = r.probs.map((p, i) => {
      const bar = document.createElement("div");
      bar.className = "ppl-bar";
      bar.style.height = `${(100 * p) / top}%`;
      bar.title = `${JSON.stringify(r.tokens[i])}: p = ${p.toPrecision(3)}`;
      if (i < 12 * step && i % step === 0) {
        const label = document.createElement("span");
        label.textContent = shown(r.tokens[i]);
        bar.append(label);
      }
      return bar;
    });
    const band = document.createElement("div");
    band.className = "ppl-band";
    band.style.width = `${Math.min(100, (100 * r.own_ppl) / r.probs.length)}%`;
    bars.classList.add("ppl-bars");
    bars.replaceChildren(...children, band); // the placeholder goes
    fillTable(frame, ["rank", "token", "p", "within the first e^H"],
      r.probs.map((p, i) => [i + 1, shown(r.tokens[i]), p, i + 1 <= r.own_ppl ? "yes" : "no"]));
    describe(frame, `At temperature ${r.tau}, the most likely token “${shown(r.tokens[0])}” has p = ${r.probs[0].toPrecision(3)} and ` +
      `the least likely “${shown(r.tokens[r.tokens.length - 1])}” p = ${r.probs[r.probs.length - 1].toPrecision(3)}; ` +
      `e^H = ${fmt(r.own_ppl)} of the ${r.probs.length} tokens are shaded.`);
  }

  const fields = bindFields(root, { onSlide: () => calc.schedule() });
  const calc = calculator(root, client, {
    op: "objective_perplexity",
    fields,
    args: () => ({ tau: fields.input("tau").value }),
    onResult(r) {
      draw(r);
      readouts.val_loss.textContent = `${fmt(r.val_loss)} nats`;
      readouts.val_ppl.textContent = fmt(r.val_ppl);
      readouts.entropy.textContent = `${fmt(r.entropy)} nats`;
      readouts.own_ppl.textContent = fmt(r.own_ppl);
      return {
        result: { tau: r.tau, val_loss: r.val_loss, val_ppl: r.val_ppl, entropy: r.entropy, own_ppl: r.own_ppl },
        text: `At temperature ${r.tau}, the model is as unsure as a uniform choice among ${fmt(r.own_ppl)} tokens, ` +
          `and on real text it scores like one among ${fmt(r.val_ppl)}` +
          (r.val_ppl > 2 * r.own_ppl ? ": it is confident and often wrong, and the wrong guesses cost it most." : "."),
      };
    },
  });
  keepFocus(root);

  onResize(bars, () => last && draw(last));
  if (!(await calc.ready())) return;
  fields.input("tau").addEventListener("input", () => calc.schedule());
  await calc.run();
}
