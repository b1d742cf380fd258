// Batch x 4 against accumulation 4, step by step: a thin view over the chunked
// run:objective_accum (pylib.web.objective_ops, which calls pylib.train for both runs). It only draws.

import { startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const COLORS = { big: "#2a5db0", accum: "#d9480f" };

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const chartEl = $('[data-role="chart"]');
  const readout = (key, text) => { $(`[data-readout="${key}"]`).textContent = text; };
  let running = false;
  let plot = null;
  let data = [[], [], []];

  const setStatus = statusSetter(root, message);
  const size = () => {
    const width = Math.max(280, chartEl.clientWidth || 600);
    return { width, height: width < 500 ? 220 : 280 };
  };
  const fmt = (u, v) => (v == null ? "–" : v.toFixed(4));
  function reset(n) {
    data = [Array.from({ length: n }, (_, i) => i), new Array(n).fill(null), new Array(n).fill(null)];
    if (plot) plot.destroy();
    plot = new uPlot({
      ...size(),
      scales: { x: { time: false } },
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      axes: [
        { label: "step", stroke: "#444", grid: { stroke: "#eee" } },
        { label: "loss (nats/token)", stroke: "#444", grid: { stroke: "#eee" }, size: 56 },
      ],
      series: [
        { label: "step" },
        { label: "batch × 4", stroke: COLORS.big, width: 3, points: { show: false }, value: fmt },
        { label: "accumulation", stroke: COLORS.accum, width: 1.5, dash: [5, 4], points: { show: false }, value: fmt },
      ],
    }, data, chartEl);
  }
  if (typeof ResizeObserver !== "undefined") {
    new ResizeObserver(() => plot && plot.setSize(size())).observe(chartEl);
  }

  if (!(await startPython(client, setStatus, [runButton]))) return;
  reset(1);

  wireStop(stopButton, client, message, () => running);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    delete root.dataset.result;
    form.elements.seed.removeAttribute("aria-invalid");
    for (const key of ["step", "loss_big", "loss_accum", "max_diff"]) readout(key, "–");
    setStatus("running", "Starting…");
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        reset(ev.info.steps);
      } else if (ev.kind === "chunk") {
        const c = ev.chunk;
        for (const r of c.records) {
          if (r.step >= data[0].length) continue;
          data[1][r.step] = r.loss_big;
          data[2][r.step] = r.loss_accum;
        }
        plot.setData(data);
        const last = c.records[c.records.length - 1];
        if (last) {
          readout("step", String(last.step + 1));
          readout("loss_big", last.loss_big == null ? "–" : last.loss_big.toFixed(4));
          readout("loss_accum", last.loss_accum == null ? "–" : last.loss_accum.toFixed(4));
        }
        readout("max_diff", c.max_diff.toExponential(1));
        message.textContent = `Training both… step ${c.step} of ${c.steps}.`;
      }
    };
    try {
      const value = await client.call("run:objective_accum", { seed: form.elements.seed.value }, { onEvent });
      const r = value.result;
      if (value.stopped) {
        setStatus("stopped", `Stopped after ${r.steps} steps; largest |Δ loss| so far ${r.max_abs_dloss.toExponential(1)}. Press Start to run again from step 0.`);
      } else {
        root.dataset.result = JSON.stringify({ steps: r.steps, max_abs_dloss: r.max_abs_dloss });
        setStatus("done", `Done: ${r.steps} steps; the largest |Δ loss| between the two runs was ${r.max_abs_dloss.toExponential(1)} nats.`);
      }
    } catch (err) {
      if (err.kind === "input" && err.errors) {
        form.elements.seed.setAttribute("aria-invalid", "true");
        setStatus("error", Object.values(err.errors).join("\n"));
      } else {
        setStatus("error", err.message);
      }
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
    }
  });
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Start.");
}
