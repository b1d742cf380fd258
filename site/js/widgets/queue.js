// Queueing and stragglers: a thin view over slow_queue (pylib.web.slow_links_ops -> pylib.systems.queueing).
// Every edit asks Python again; a bad field (ρ >= 1 is an unstable queue) is marked and explained.

import { invalidMarker, showRunError, readoutMap, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const FIELDS = ["rho", "service_ms", "workers", "step_ms", "spread_ms"];

function chart(el, old, xs, ys, point, opts) {
  const width = Math.max(260, el.clientWidth || 400);
  const pointSeries = xs.map((x) => (x === point[0] ? point[1] : null));
  const data = [xs, ys, pointSeries];
  if (!xs.includes(point[0])) { // put the simulated point at its own x
    const i = xs.findIndex((x) => x > point[0]);
    const at = i < 0 ? xs.length : i;
    data[0] = [...xs.slice(0, at), point[0], ...xs.slice(at)];
    data[1] = [...ys.slice(0, at), null, ...ys.slice(at)];
    data[2] = [...xs.slice(0, at).map(() => null), point[1], ...xs.slice(at).map(() => null)];
  }
  if (old) old.destroy();
  return new uPlot({
    width, height: 220, legend: { show: false }, cursor: { drag: { x: false, y: false } },
    scales: { x: { time: false, distr: opts.logx ? 3 : 1 }, y: { distr: opts.logy ? 3 : 1 } },
    axes: [{ label: opts.xlabel, stroke: "#444", grid: { stroke: "#eee" } }, { label: "ms", stroke: "#444", grid: { stroke: "#eee" }, size: 56 }],
    series: [{}, { stroke: "#2a5db0", width: 2, points: { show: false }, spanGaps: true },
      { stroke: "#d9480f", width: 0, points: { show: true, size: 9, fill: "#d9480f" } }],
  }, data, el);
}

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const waitEl = $('[data-role="wait-chart"]');
  const slowEl = $('[data-role="slow-chart"]');
  let waitPlot = null, slowPlot = null, seq = 0;
  const ms = (x) => `${x.toPrecision(4)} ms`;

  if (!(await startPython(client, setStatus, [runButton]))) return;

  async function update() {
    const mine = ++seq;
    const args = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value]));
    try {
      const v = await client.call("slow_queue", args);
      if (mine !== seq) return;
      markInvalid(null);
      const q = v.md1, s = v.stragglers;
      readouts.wait_sim.textContent = ms(q.mean);
      readouts.wait_ci.textContent = `${q.low.toPrecision(4)} to ${q.high.toPrecision(4)}`;
      readouts.wait_exact.textContent = ms(q.exact);
      readouts.slow_sim.textContent = ms(s.mean);
      readouts.slow_exact.textContent = ms(s.exact);
      readouts.mean_step.textContent = ms(s.mean_step);
      waitPlot = chart(waitEl, waitPlot, v.wait_curve.rho, v.wait_curve.wait, [v.settings.rho, q.mean], { xlabel: "load ρ", logy: true });
      slowPlot = chart(slowEl, slowPlot, v.slowest_curve.workers, v.slowest_curve.slowest, [v.settings.workers, s.mean], { xlabel: "workers W", logx: true });
      root.dataset.result = JSON.stringify({ settings: v.settings, md1: { mean: q.mean, low: q.low, high: q.high, exact: q.exact }, stragglers: s });
      const inside = q.low <= q.exact && q.exact <= q.high ? "inside" : "outside";
      setStatus("done", `Simulated ${v.queue_n.toLocaleString("en")} transfers (the formula is ${inside} the interval) and ${v.straggle_syncs.toLocaleString("en")} syncs of ${v.settings.workers} workers.`);
    } catch (err) {
      if (mine !== seq) return;
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    }
  }

  let timer = null;
  form.elements.rho_slider.addEventListener("input", () => { form.elements.rho.value = form.elements.rho_slider.value; });
  form.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(update, 150); });
  form.addEventListener("submit", (event) => { event.preventDefault(); clearTimeout(timer); update(); });
  runButton.disabled = false;
  await update();
}
