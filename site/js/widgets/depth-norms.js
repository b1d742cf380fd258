// Pre-LN against post-LN at initialisation: a thin view over pylib.web.init_ops's init_depth_norms op
// (pylib.studies.init_study.depth_stats), with the measured three-seed means from results.json behind.

import { invalidMarker, showRunError, readConfig, startPython, statusSetter, widgetParts } from "../widget-kit.js";
import { drawChart } from "./init-plot.js";

const COLORS = { pre: "#2a5db0", post: "#d9480f" };

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const config = readConfig(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(["depth"], (name) => form.elements[name]);

  function draw(r) {
    const L = r.depth;
    const acts = [], grads = [];
    for (const pos of ["pre", "post"]) {
      const m = config.measured[pos + L];
      if (m) {
        acts.push({ xs: m.act_std_mean.map((_, i) => i), ys: m.act_std_mean, color: COLORS[pos], dash: "5 4", width: 1, name: `measured-${pos}` });
        grads.push({ xs: m.grad_norm_mean.map((_, i) => i + 1), ys: m.grad_norm_mean, color: COLORS[pos], dash: "5 4", width: 1, name: `measured-${pos}` });
      }
      acts.push({ xs: r[pos].act_std.map((_, i) => i), ys: r[pos].act_std, color: COLORS[pos], name: pos });
      grads.push({ xs: r[pos].grad_norm.map((_, i) => i + 1), ys: r[pos].grad_norm, color: COLORS[pos], name: pos });
    }
    const tick = (n, from) => Array.from({ length: n }, (_, i) => ({ value: i + from, text: String(i + from) }));
    drawChart($('[data-role="chart-acts"]'), acts, { ylog: true, xlabel: "layer (0 = embeddings)", ylabel: "residual std", xticks: tick(L + 1, 0) });
    drawChart($('[data-role="chart-grads"]'), grads, { ylog: true, xlabel: "block", ylabel: "gradient norm", xticks: tick(L, 1) });
  }

  async function show() {
    markInvalid(null);
    delete root.dataset.result;
    setStatus("running", "Computing…");
    try {
      const r = await client.call("init_depth_norms", { depth: form.elements.depth.value });
      draw(r);
      const last = (a) => a[a.length - 1];
      root.dataset.result = JSON.stringify({ depth: r.depth, pre: r.pre, post: r.post });
      setStatus("done", `${r.depth} layer${r.depth > 1 ? "s" : ""}: the last block's output has std ${last(r.pre.act_std).toFixed(3)} pre-LN and ` +
        `${last(r.post.act_std).toFixed(3)} post-LN; block 1's gradient norm is ${r.pre.grad_norm[0].toFixed(3)} pre-LN and ${r.post.grad_norm[0].toFixed(3)} post-LN.`);
    } catch (err) {
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
