// The alpha-beta chart: a thin view over pylib.web.parallel_ops.alpha_beta (pylib.systems.collectives);
// the gloo points come from results.json through the template.

import { onResize } from "../plot.js";
import { bindFields, calculator, readConfig, readoutMap } from "../widget-kit.js";
import { chart } from "./parallel-svg.js";

const secs = (t) => (t >= 1 ? `${t.toPrecision(3)} s` : t >= 1e-3 ? `${(t * 1e3).toPrecision(3)} ms` : `${(t * 1e6).toPrecision(3)} µs`);
const bytes = (b) => (b >= 1e9 ? `${(b / 1e9).toPrecision(3)} GB` : b >= 1e6 ? `${(b / 1e6).toPrecision(3)} MB` : b >= 1e3 ? `${(b / 1e3).toPrecision(3)} kB` : `${Math.round(b)} B`);

export async function mount(root, client) {
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const svg = root.querySelector('[data-role="chart"]');
  const gloo = [];
  for (const [key, color, name] of [["p2", 5, "2 processes"], ["p4", 8, "4 processes"]]) {
    const g = config.gloo[key];
    if (g && g.bytes) {
      gloo.push({ xs: g.bytes, ys: g.measured, color, points: true, label: `gloo, ${name}, measured` });
      gloo.push({ xs: g.bytes, ys: g.predicted, color, label: `gloo, ${name}, fitted ring model` });
    }
  }
  let last = null;
  const draw = () => {
    if (!last) return;
    const r = last, s = r.sizes, n = s.length - 1;
    chart(svg, [
      { xs: s, ys: r.times.ring, color: 1, label: "ring all-reduce (s)" },
      { xs: s, ys: r.times.tree, color: 2, label: "tree all-reduce (s)" },
      { xs: s, ys: r.times.naive, color: 3, label: "naive all-reduce (s)" },
      { xs: s, ys: r.times.halving_doubling, color: 6, label: "halving/doubling all-reduce (s)" },
      { xs: s, ys: r.times.all_gather, color: 4, label: "ring all-gather (s)" },
      ...gloo,
    ], {
      logX: true, logY: true, xLabel: "message size n (bytes)", yLabel: "seconds",
      summary: `p = ${r.workers}: at ${bytes(s[n])} the ring all-reduce takes ${secs(r.times.ring[n])}, the tree ${secs(r.times.tree[n])}, ` +
        `the naive one ${secs(r.times.naive[n])}, halving/doubling ${secs(r.times.halving_doubling[n])}, the all-gather ${secs(r.times.all_gather[n])}; at ${bytes(s[0])} the ring takes ` +
        `${secs(r.times.ring[0])} and the tree ${secs(r.times.tree[0])}. ` +
        (r.ring_beats_tree_from == null ? "The ring does not beat the tree below 1 GB." : `The ring beats the tree from ${bytes(r.ring_beats_tree_from)}.`) +
        (gloo.length ? " The gloo dots are measured; the data table has them." : ""),
    });
  };

  const fields = bindFields(root, { onSlide: () => calc.schedule() }); // redraw as a slider moves
  const calc = calculator(root, client, {
    op: "parallel_alpha_beta",
    fields,
    runningText: "Drawing…",
    onResult(r) {
      last = r;
      draw();
      readouts.crossover.textContent = r.ring_beats_tree_from == null ? "not below 1 GB" : bytes(r.ring_beats_tree_from);
      readouts.ring_gb.textContent = secs(r.times.ring[r.times.ring.length - 1]);
      return {
        result: { workers: r.workers, sizes: r.sizes, ring: r.times.ring, tree: r.times.tree, halving_doubling: r.times.halving_doubling },
        text: `p = ${r.workers}: α = ${(r.alpha * 1e6).toPrecision(3)} µs, β = ${r.beta.toExponential(2)} s/byte. ` +
          (config.gloo.p2.bytes ? "gloo: " + config.status + "." : "gloo: not measured (" + config.status + ")."),
      };
    },
  });
  onResize(svg, draw); // drawn at its shown width: its text stays 12 px
  if (!(await calc.ready())) return;
  await calc.run();
}
