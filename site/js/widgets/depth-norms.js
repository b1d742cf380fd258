// Pre-LN against post-LN at initialisation: a thin view over pylib.web.init_ops's init_depth_norms op
// (pylib.studies.init_study.depth_stats), with the measured three-seed means from results.json behind.

import { bindFields, calculator, readConfig } from "../widget-kit.js";
import { keepFocusOnRun } from "./calc-focus.js";
import { fmtCell, onResize } from "../plot.js";
import { drawChart } from "./init-plot.js";

// this page's runs in series 1 (pre) and 2 (post); the measured means dashed, in 6 and 4 (their light kin)
const COLORS = { pre: 1, post: 2 };
const MEASURED = { pre: 6, post: 4 };
const LABEL = { pre: "pre-LN", post: "post-LN" };

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const config = readConfig(root);
  let last = null;
  let ready = false;

  function draw(r) {
    const L = r.depth;
    const acts = [], grads = [];
    for (const pos of ["pre", "post"]) {
      const m = config.measured[pos + L];
      if (m) {
        acts.push({ xs: m.act_std_mean.map((_, i) => i), ys: m.act_std_mean, color: MEASURED[pos], dash: "5 4", width: 1.5, name: `measured-${pos}`, label: `${LABEL[pos]}, measured mean` });
        grads.push({ xs: m.grad_norm_mean.map((_, i) => i + 1), ys: m.grad_norm_mean, color: MEASURED[pos], dash: "5 4", width: 1.5, name: `measured-${pos}`, label: `${LABEL[pos]}, measured mean` });
      }
      acts.push({ xs: r[pos].act_std.map((_, i) => i), ys: r[pos].act_std, color: COLORS[pos], name: pos, label: `${LABEL[pos]}, this page` });
      grads.push({ xs: r[pos].grad_norm.map((_, i) => i + 1), ys: r[pos].grad_norm, color: COLORS[pos], name: pos, label: `${LABEL[pos]}, this page` });
    }
    const tick = (n, from) => Array.from({ length: n }, (_, i) => ({ value: i + from, text: String(i + from) }));
    const end = (a) => fmtCell(a[a.length - 1]);
    drawChart($('[data-role="chart-acts"]'), acts, {
      ylog: true, xlabel: "layer (0 = embeddings)", ylabel: "residual std", xticks: tick(L + 1, 0),
      summary: `${L} layer${L > 1 ? "s" : ""}: the residual std goes from ${fmtCell(r.pre.act_std[0])} to ${end(r.pre.act_std)} pre-LN, ` +
        `and from ${fmtCell(r.post.act_std[0])} to ${end(r.post.act_std)} post-LN.`,
    });
    drawChart($('[data-role="chart-grads"]'), grads, {
      ylog: true, xlabel: "block", ylabel: "gradient norm", xticks: tick(L, 1),
      summary: `Gradient norm from block 1 to block ${L}: ${fmtCell(r.pre.grad_norm[0])} to ${end(r.pre.grad_norm)} pre-LN, ` +
        `${fmtCell(r.post.grad_norm[0])} to ${end(r.post.grad_norm)} post-LN.`,
    });
  }

  const fields = bindFields(root, { onSlide: () => ready && calc.schedule() });
  const calc = calculator(root, client, {
    op: "init_depth_norms",
    fields,
    onResult(r) {
      last = r;
      draw(r);
      const end = (a) => a[a.length - 1];
      return {
        result: { depth: r.depth, pre: r.pre, post: r.post },
        text: `${r.depth} layer${r.depth > 1 ? "s" : ""}: the last block's output has std ${end(r.pre.act_std).toFixed(3)} pre-LN and ` +
          `${end(r.post.act_std).toFixed(3)} post-LN; block 1's gradient norm is ${r.pre.grad_norm[0].toFixed(3)} pre-LN and ${r.post.grad_norm[0].toFixed(3)} post-LN.`,
      };
    },
  });
  keepFocusOnRun(root);
  if (!(await calc.ready())) return;
  ready = true;
  for (const name of ["chart-acts", "chart-grads"]) onResize($(`[data-role="${name}"]`), () => last && draw(last));
  await calc.run();
}
