// Loss and activation std at initialisation: a thin view over pylib.web.init_ops's init_scale op
// (pylib.studies.init_study.init_stats). It only draws; reader input is validated in pylib.

import { invalidMarker, showRunError, readConfig, readoutMap, startPython, statusSetter, widgetParts } from "../widget-kit.js";
import { drawChart } from "./init-plot.js";

const FIELDS = ["init_std", "depth"];
const num = (v, d = 3) => (v == null ? "–" : Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : v.toFixed(d));

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const set = (key, text) => { readouts[key].textContent = text; };

  function draw(r) {
    const layers = r.act_std.map((_, i) => i);
    drawChart($('[data-role="chart-acts"]'), [{ xs: layers, ys: r.act_std, color: "#2a5db0", name: "live" }], {
      ylog: true, xlabel: "layer (0 = embeddings)", ylabel: "residual std",
      xticks: layers.map((i) => ({ value: i, text: String(i) })),
    });
    const series = [];
    const sw = config.sweep;
    if (sw) series.push({ xs: sw.init_stds, ys: sw.loss_mean, color: "#777", dash: "5 4", width: 1.5, name: "measured" });
    series.push({ xs: [r.init_std], ys: [r.loss], color: "#d9480f", dots: true, name: "live" });
    drawChart($('[data-role="chart-loss"]'), series, {
      xlog: true, ylog: true, xlabel: "init std", ylabel: "loss at init (nats)",
      hline: { value: r.ln_vocab, text: `ln V = ${r.ln_vocab.toFixed(3)}` },
    });
  }

  async function show() {
    const args = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value]));
    markInvalid(null);
    delete root.dataset.result;
    setStatus("running", "Computing…");
    try {
      const r = await client.call("init_scale", args);
      set("loss", num(r.loss));
      set("ln_vocab", num(r.ln_vocab));
      set("act_first", num(r.act_std[0], 4));
      set("act_last", num(r.act_std[r.act_std.length - 1], 4));
      set("logit_std", num(r.logit_std));
      draw(r);
      root.dataset.result = JSON.stringify({ init_std: r.init_std, depth: r.depth, loss: r.loss, act_std: r.act_std, logit_std: r.logit_std });
      let text = `Init std ${r.init_std}, ${r.depth} layer${r.depth > 1 ? "s" : ""}: loss at init ${num(r.loss)} nats (ln V = ${num(r.ln_vocab)}).`;
      if (r.loss == null) text += " The loss overflowed: it is not a finite number.";
      else if (r.loss > r.divergence_limit) text += ` That is above 2 ln V = ${num(r.divergence_limit, 2)}: the trainer would stop this run at step 0 as diverged.`;
      setStatus("done", text);
    } catch (err) {
      for (const key of Object.keys(readouts)) set(key, "–");  // the figures above were for other input
      showRunError(err, setStatus, markInvalid);
    }
  }

  if (!(await startPython(client, setStatus, [runButton]))) return;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    runButton.disabled = true;
    try { await show(); } finally { runButton.disabled = false; }
  });
  await show();
  runButton.disabled = false;
}
