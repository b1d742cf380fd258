// The schedule plotter: a thin view over schedule_curve (pylib.web.schedule_ops -> pylib.schedules.lr_at).
// Every keystroke asks Python for the curve again; a bad field is marked and explained, and the
// last good curve stays on the chart.

import { invalidMarker, showRunError, readoutMap, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const FIELDS = ["kind", "lr", "warmup", "steps", "min_ratio", "decay_frac"];
const KINDS = ["cosine", "wsd", "constant"];
const COLORS = { main: "#2a5db0", other: "#999" };

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const chartEl = $('[data-role="chart"]');
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  let plot = null;
  let seq = 0;

  const size = () => {
    const width = Math.max(280, chartEl.clientWidth || 600);
    return { width, height: width < 500 ? 220 : 260 };
  };
  const fmt = (u, v) => (v == null ? "–" : v.toPrecision(3));
  function draw(kind, curves) {
    const n = curves[kind].length;
    const order = [kind, ...KINDS.filter((k) => k !== kind)];
    const data = [Array.from({ length: n }, (_, i) => i), ...order.map((k) => curves[k])];
    if (plot) plot.destroy();
    plot = new uPlot({
      ...size(),
      scales: { x: { time: false }, y: { range: (u, lo, hi) => [0, hi * 1.08 || 1] } },
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      axes: [
        { label: "step", stroke: "#444", grid: { stroke: "#eee" } },
        { label: "learning rate", stroke: "#444", grid: { stroke: "#eee" }, size: 64, values: (u, vals) => vals.map((v) => +v.toPrecision(3)) },
      ],
      series: [
        { label: "step" },
        ...order.map((k, i) => ({ label: k, stroke: i === 0 ? COLORS.main : COLORS.other, width: i === 0 ? 2.5 : 1,
          dash: i === 0 ? undefined : [5, 4], points: { show: false }, value: fmt })),
      ],
    }, data, chartEl);
  }
  if (typeof ResizeObserver !== "undefined") {
    new ResizeObserver(() => plot && plot.setSize(size())).observe(chartEl);
  }

  if (!(await startPython(client, setStatus, [runButton]))) return;

  async function update() {
    const mine = ++seq;
    const args = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value]));
    try {
      const main = await client.call("schedule_curve", args);
      const curves = { [main.kind]: main.lrs };
      for (const k of KINDS.filter((k) => k !== main.kind)) {
        curves[k] = (await client.call("schedule_curve", { ...args, kind: k })).lrs;
      }
      if (mine !== seq) return; // a newer edit is on its way
      markInvalid(null);
      draw(main.kind, curves);
      readouts.peak_lr.textContent = main.peak_lr.toPrecision(3);
      readouts.peak_step.textContent = String(main.peak_step);
      readouts.first_lr.textContent = main.lrs[0].toPrecision(3);
      readouts.final_lr.textContent = main.final_lr.toPrecision(3);
      $('[data-role="legend-main"]').textContent = `${main.name}`;
      root.dataset.result = JSON.stringify({ kind: main.kind, steps: main.steps, peak_lr: main.peak_lr,
        peak_step: main.peak_step, first_lr: main.lrs[0], final_lr: main.final_lr });
      setStatus("done", `${main.name}: ${main.steps} steps, peak ${main.peak_lr.toPrecision(3)} at step ${main.peak_step}, ending at ${main.final_lr.toPrecision(3)}.`);
    } catch (err) {
      if (mine !== seq) return;
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    }
  }

  let timer = null;
  form.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(update, 120);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    update();
  });
  runButton.disabled = false;
  await update();
}
