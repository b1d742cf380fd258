// The gradient noise scale, live: a thin view over run:schedule_noise (pylib.web.schedule_ops ->
// pylib.train and pylib.studies.noise_scale). It trains the default run to a step, estimates |G|² and
// tr(Σ) from two batch sizes, and draws E|G_B|² = |G|² + tr(Σ)/B with B_simple marked.

import { invalidMarker, readConfig, readoutMap, showRunError, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";
import { drawChart } from "./init-plot.js";

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const config = readConfig(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(["seed", "step"], (name) => form.elements[name]);
  const readouts = readoutMap(root);
  const chart = $('[data-role="chart"]');
  const fmt = (v) => (v == null || !Number.isFinite(v) ? "–" : Math.abs(v) >= 1e4 || Math.abs(v) < 1e-2 ? v.toExponential(3) : v.toPrecision(4));
  let running = false;

  function draw(r) {
    if (!r || r.b_simple == null) {
      drawChart(chart, [], { empty: r ? "|G|² came out negative: the noise swamps the signal in this estimate." : "Press Start to measure." });
      return;
    }
    const bs = [];
    for (let b = 1; b <= 256; b *= 1.25) bs.push(b);
    const curve = bs.map((b) => r.g2 + r.trace / b);
    drawChart(chart, [
      { xs: bs, ys: curve, color: "#2a5db0", points: false, name: "curve" },
      { xs: [r.b_small, r.b_big], ys: [r.g2_small, r.g2_big], color: "#2a5db0", dots: true, width: 0, name: "points" },
      { xs: [r.b_simple, r.b_simple], ys: [r.g2, 2 * r.g2], color: "#d9480f", dash: "2 3", points: false, name: "b_simple" },
    ], { xlog: true, ylog: true, xlabel: "batch size B (windows)", ylabel: "E|G_B|²", hline: { value: r.g2, text: "|G|²" } });
  }
  draw(null);

  if (!(await startPython(client, setStatus, [runButton]))) return;
  wireStop(stopButton, client, message, () => running);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    markInvalid(null);
    delete root.dataset.result;
    setStatus("running", "Starting…");
    const onEvent = (ev) => {
      if (ev.kind !== "chunk") return;
      const c = ev.chunk;
      message.textContent = c.step < c.target ? `Training… step ${c.step} of ${c.target}.`
        : `Estimating… batch ${c.batches} of ${c.batches_total}.`;
    };
    try {
      const value = await client.call("run:schedule_noise", { seed: form.elements.seed.value, step: form.elements.step.value }, { onEvent });
      const r = value.result;
      if (value.stopped || !r.complete) {
        for (const el of Object.values(readouts)) el.textContent = "–";
        draw(null);
        setStatus("stopped", `Stopped at step ${r.step}${r.step >= r.target ? ", during the estimate" : ""}. Press Start to measure again.`);
        return;
      }
      for (const k of ["g2_small", "g2_big", "g2", "trace", "b_simple"]) readouts[k].textContent = fmt(r[k]);
      const m = (config.measured[String(r.step)] || {});
      const mine = m.b_simple && m.b_simple[String(r.seed)];
      readouts.measured.textContent = mine == null ? "not measured (seeds 0–2 at the chapter's steps only)"
        : `B_simple ${fmt(mine)}, |G|² ${fmt(m.g2[String(r.seed)])}, tr(Σ) ${fmt(m.trace[String(r.seed)])}`;
      draw(r);
      root.dataset.result = JSON.stringify({ seed: r.seed, step: r.step, g2: r.g2, trace: r.trace, b_simple: r.b_simple,
        measured_b_simple: mine ?? null });
      setStatus("done", r.b_simple == null ? `At step ${r.step} the |G|² estimate is not positive: no noise scale from these batches.`
        : `At step ${r.step}, B_simple ≈ ${fmt(r.b_simple)} windows: a batch that size carries as much noise as signal.`);
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
    }
  });
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Start: the run trains in this page, then the estimate takes a few seconds more.");
}
