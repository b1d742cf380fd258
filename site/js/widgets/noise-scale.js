// The gradient noise scale, live: a thin view over run:schedule_noise (pylib.web.schedule_ops ->
// pylib.train and pylib.studies.noise_scale). It trains the default run to a step, estimates |G|² and
// tr(Σ) from two batch sizes, and draws E|G_B|² = |G|² + tr(Σ)/B with B_simple marked.

import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";
import { describe, fillTable, frameOf, onResize } from "../plot.js";
import { drawChart } from "./init-plot.js";

export async function mount(root, client) {
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const chart = root.querySelector('[data-role="chart"]');
  const fields = bindFields(root);
  const fmt = (v) => (v == null || !Number.isFinite(v) ? "–" : Math.abs(v) >= 1e4 || Math.abs(v) < 1e-2 ? v.toExponential(3) : v.toPrecision(4));
  let last = null;

  function draw(r) {
    last = r;
    if (!r || r.b_simple == null) { // nothing to draw: the frame says why
      chart.replaceChildren();
      chart.removeAttribute("viewBox");
      describe(frameOf(chart), r ? "Nothing drawn: |G|² came out negative, the noise swamps the signal in this estimate." : "Nothing drawn yet: press Start to measure.");
      fillTable(frameOf(chart), ["batch size B (windows)"], []);
      return;
    }
    const bs = [];
    for (let b = 1; b <= 256; b *= 1.25) bs.push(b);
    const curve = bs.map((b) => r.g2 + r.trace / b);
    drawChart(chart, [
      { xs: bs, ys: curve, color: 1, points: false, name: "curve", label: "E|G_B|² = |G|² + tr(Σ)/B" },
      { xs: [r.b_small, r.b_big], ys: [r.g2_small, r.g2_big], color: "fg", dots: true, width: 0, name: "points", label: "measured average |G_B|²" },
      { xs: [r.b_simple, r.b_simple], ys: [r.g2, 2 * r.g2], color: 2, dash: "2 3", points: false, name: "b_simple", label: "B_simple" },
    ], {
      xlog: true, ylog: true, xlabel: "batch size B (windows)", ylabel: "E|G_B|²", hline: { value: r.g2, text: "|G|²" }, maxRows: 40,
      summary: `At step ${r.step} (seed ${r.seed}): mean |G_B|² ${fmt(r.g2_small)} over batches of ${r.b_small} windows and ${fmt(r.g2_big)} over ` +
        `batches of ${r.b_big}; the curve through them levels off at |G|² = ${fmt(r.g2)}, and reaches twice that at B_simple = ${fmt(r.b_simple)} windows.`,
    });
  }

  const run = runStreamed(root, client, {
    op: "run:schedule_noise",
    fields,
    args: () => fields.values(),
    announceStart: "Training to the step started.",
    onEvent(ev) {
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      return c.step < c.target ? `Training… step ${c.step} of ${c.target}.` : `Estimating… batch ${c.batches} of ${c.batches_total}.`;
    },
    onResult(value) {
      const r = value.result;
      if (value.stopped || !r.complete) {
        for (const el of Object.values(readouts)) el.textContent = "–";
        draw(null);
        return { status: "stopped", text: `Stopped at step ${r.step}${r.step >= r.target ? ", during the estimate" : ""}. Press Start to measure again.` };
      }
      for (const k of ["g2_small", "g2_big", "g2", "trace", "b_simple"]) readouts[k].textContent = fmt(r[k]);
      const m = (config.measured[String(r.step)] || {});
      const mine = m.b_simple && m.b_simple[String(r.seed)];
      readouts.measured.textContent = mine == null ? "not measured (seeds 0–2 at the chapter's steps only)"
        : `B_simple ${fmt(mine)}, |G|² ${fmt(m.g2[String(r.seed)])}, tr(Σ) ${fmt(m.trace[String(r.seed)])}`;
      draw(r);
      return {
        status: "done",
        result: { seed: r.seed, step: r.step, g2: r.g2, trace: r.trace, b_simple: r.b_simple, measured_b_simple: mine ?? null },
        text: r.b_simple == null ? `At step ${r.step} the |G|² estimate is not positive: no noise scale from these batches.`
          : `At step ${r.step}, B_simple ≈ ${fmt(r.b_simple)} windows: a batch that size carries as much noise as signal.`,
      };
    },
  });
  onResize(chart, () => last && last.b_simple != null && draw(last));
  await run.ready(null, "Ready. Press Start: the run trains in this page, then the estimate takes a few seconds more.");
}
