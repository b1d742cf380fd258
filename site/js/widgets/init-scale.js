// Loss and activation std at initialisation: a thin view over pylib.web.init_ops's init_scale op
// (pylib.studies.init_study.init_stats). It only draws; reader input is validated in pylib.

import { bindFields, calculator, readConfig, readoutMap } from "../widget-kit.js";
import { keepFocusOnRun } from "./calc-focus.js";
import { fmtCell, onResize } from "../plot.js";
import { drawChart } from "./init-plot.js";

const num = (v, d = 3) => (v == null ? "–" : Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : v.toFixed(d));

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const set = (key, text) => { readouts[key].textContent = text; };
  let last = null;
  let ready = false;

  function draw(r) {
    const layers = r.act_std.map((_, i) => i);
    drawChart($('[data-role="chart-acts"]'), [{ xs: layers, ys: r.act_std, color: 1, name: "live", label: "residual std" }], {
      ylog: true, xlabel: "layer (0 = embeddings)", ylabel: "residual std",
      xticks: layers.map((i) => ({ value: i, text: String(i) })),
      summary: `Init std ${r.init_std}, ${r.depth} layer${r.depth > 1 ? "s" : ""}: the residual stream's std is ${fmtCell(r.act_std[0])} after the ` +
        `embeddings and ${fmtCell(r.act_std[r.act_std.length - 1])} after the last block.`,
    });
    const series = [];
    const sw = config.sweep;
    if (sw) series.push({ xs: sw.init_stds, ys: sw.loss_mean, color: "axis", dash: "5 4", width: 1.5, name: "measured", label: "measured loss (3-seed mean)" });
    series.push({ xs: [r.init_std], ys: [r.loss], color: 2, dots: true, name: "live", label: "this page's loss" });
    drawChart($('[data-role="chart-loss"]'), series, {
      xlog: true, ylog: true, xlabel: "init std", ylabel: "loss at init (nats)",
      hline: { value: r.ln_vocab, text: `ln V = ${r.ln_vocab.toFixed(3)}` },
      summary: `This page's model (init std ${r.init_std}, ${r.depth} layer${r.depth > 1 ? "s" : ""}): loss ${num(r.loss)} nats at initialisation, ` +
        `against ln V = ${num(r.ln_vocab)}.` + (sw ? ` Measured (${sw.init_stds.length} init stds, 3 seeds): from ${num(sw.loss_mean[0])} at ` +
        `${sw.init_stds[0]} to ${num(sw.loss_mean[sw.loss_mean.length - 1])} at ${sw.init_stds[sw.init_stds.length - 1]}.` : ""),
    });
  }

  const fields = bindFields(root, { onSlide: () => ready && calc.schedule() });
  const calc = calculator(root, client, {
    op: "init_scale",
    fields,
    onError() { for (const key of Object.keys(readouts)) set(key, "–"); }, // the figures above were for other input
    onResult(r) {
      last = r;
      set("loss", num(r.loss));
      set("ln_vocab", num(r.ln_vocab));
      set("act_first", num(r.act_std[0], 4));
      set("act_last", num(r.act_std[r.act_std.length - 1], 4));
      set("logit_std", num(r.logit_std));
      draw(r);
      let text = `Init std ${r.init_std}, ${r.depth} layer${r.depth > 1 ? "s" : ""}: loss at init ${num(r.loss)} nats (ln V = ${num(r.ln_vocab)}).`;
      if (r.loss == null) text += " The loss overflowed: it is not a finite number.";
      else if (r.loss > r.divergence_limit) text += ` That is above 2 ln V = ${num(r.divergence_limit, 2)}: the trainer would stop this run at step 0 as diverged.`;
      return { result: { init_std: r.init_std, depth: r.depth, loss: r.loss, act_std: r.act_std, logit_std: r.logit_std }, text };
    },
  });
  keepFocusOnRun(root);
  if (!(await calc.ready())) return;
  ready = true;
  for (const name of ["chart-acts", "chart-loss"]) onResize($(`[data-role="${name}"]`), () => last && draw(last));
  await calc.run();
}
