// The alpha-beta chart: a thin view over pylib.web.parallel_ops.alpha_beta (pylib.systems.collectives);
// the gloo points come from results.json through the template.

import { invalidMarker, readConfig, readoutMap, showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";
import { chart } from "./parallel-svg.js";

const FIELDS = ["workers", "alpha_us", "bandwidth_gbs"];
const secs = (t) => (t >= 1 ? `${t.toPrecision(3)} s` : t >= 1e-3 ? `${(t * 1e3).toPrecision(3)} ms` : `${(t * 1e6).toPrecision(3)} µs`);
const bytes = (b) => (b >= 1e9 ? `${(b / 1e9).toPrecision(3)} GB` : b >= 1e6 ? `${(b / 1e6).toPrecision(3)} MB` : b >= 1e3 ? `${(b / 1e3).toPrecision(3)} kB` : `${Math.round(b)} B`);

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const svg = $('[data-role="chart"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);
  const gloo = [];
  for (const [key, cls] of [["p2", "s4"], ["p4", "s5"]]) {
    const g = config.gloo[key];
    if (g && g.bytes) {
      gloo.push({ xs: g.bytes, ys: g.measured, cls: cls.replace("s", "f"), points: true, label: `gloo ${key} measured` });
      gloo.push({ xs: g.bytes, ys: g.predicted, cls, label: `gloo ${key} fit` });
    }
  }

  if (!(await startPython(client, setStatus, [runButton]))) return;
  let sequence = 0;
  async function draw() {
    const mine = ++sequence;
    root.dataset.status = "running";
    try {
      const args = Object.fromEntries(FIELDS.map((f) => [f, form.elements[f].value]));
      const r = await client.call("parallel_alpha_beta", args);
      if (mine !== sequence) return;
      markInvalid(null);
      const s = r.sizes;
      chart(svg, [
        { xs: s, ys: r.times.ring, cls: "s0", label: "ring" },
        { xs: s, ys: r.times.tree, cls: "s1", label: "tree" },
        { xs: s, ys: r.times.naive, cls: "s2", label: "naive" },
        { xs: s, ys: r.times.all_gather, cls: "s3", label: "all-gather" },
        ...gloo,
      ], { logX: true, logY: true, xLabel: "message size n (bytes)", yLabel: "seconds" });
      readouts.crossover.textContent = r.ring_beats_tree_from == null ? "not below 1 GB" : bytes(r.ring_beats_tree_from);
      readouts.ring_gb.textContent = secs(r.times.ring[r.times.ring.length - 1]);
      root.dataset.result = JSON.stringify({ workers: r.workers, sizes: s, ring: r.times.ring, tree: r.times.tree });
      setStatus("done", `p = ${r.workers}: α = ${(r.alpha * 1e6).toPrecision(3)} µs, β = ${r.beta.toExponential(2)} s/byte. ${config.gloo.p2.bytes ? "gloo: " + config.status + "." : "gloo: not measured (" + config.status + ")."}`);
    } catch (err) {
      if (mine !== sequence) return;
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    }
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); draw(); });
  runButton.disabled = false;
  await draw();
}
