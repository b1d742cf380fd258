// Side-by-side data-parallel runs: a thin view over the chunked run:parallel_dp
// (pylib.web.parallel_ops -> pylib.systems.data_parallel -> pylib.train).

import { invalidMarker, showRunError, startPython, statusSetter, widgetParts, wireStop, readoutMap } from "../widget-kit.js";
import { chart } from "./parallel-svg.js";

const FIELDS = ["workers", "steps"];
const COLOURS = ["#2a5db0", "#b3261e", "#1b7a43", "#8a5a00"];

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const readouts = readoutMap(root);
  const svg = $('[data-role="chart"]'), table = $('[data-role="table"]'), legend = $('[data-role="legend"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);
  let running = false, runs = null, order = [];

  const redraw = () => {
    chart(svg, order.map((w, i) => ({ xs: runs[w].steps, ys: runs[w].losses, cls: `s${i} lw${i}`, label: `W=${w}` })),
      { xLabel: "step", yLabel: "train loss (nats)" });
  };
  const drawTable = () => {
    table.replaceChildren();
    const head = document.createElement("tr");
    for (const t of ["workers", "last loss", "all-reduce bytes each worker sends per step"]) head.append(Object.assign(document.createElement("th"), { textContent: t }));
    table.append(head);
    for (const w of order) {
      const r = runs[w], tr = document.createElement("tr");
      const last = r.losses[r.losses.length - 1];
      for (const t of [String(w), last == null ? "–" : last.toFixed(6), r.bytes.toLocaleString("en") + " B"]) tr.append(Object.assign(document.createElement("td"), { textContent: t }));
      table.append(tr);
    }
  };

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
      if (ev.kind === "start") {
        order = ev.info.workers;
        runs = Object.fromEntries(order.map((w) => [w, { steps: [], losses: [], bytes: 0 }]));
        legend.replaceChildren();
        order.forEach((w, i) => {
          const li = document.createElement("li");
          const sw = Object.assign(document.createElement("span"), { className: "sw" });
          sw.style.background = COLOURS[i];
          li.append(sw, document.createTextNode(`${w} worker${w > 1 ? "s" : ""}`));
          legend.append(li);
        });
      } else if (ev.kind === "chunk") {
        for (const rec of ev.chunk.records) {
          const r = runs[rec.workers];
          r.steps.push(rec.step);
          r.losses.push(rec.loss);
          r.bytes = rec.bytes;
        }
        readouts.step.textContent = `${ev.chunk.step} of ${ev.chunk.steps}`;
        redraw();
        drawTable();
        message.textContent = `Training… step ${ev.chunk.step} of ${ev.chunk.steps} (every run).`;
      }
    };
    try {
      const t0 = performance.now();
      const value = await client.call("run:parallel_dp", { workers: form.elements.workers.value, steps: form.elements.steps.value }, { onEvent });
      const r = value.result;
      const diffs = Object.entries(r.max_diff_from_first).filter(([w]) => Number(w) !== r.first).map(([, d]) => d).filter((d) => d != null);
      const worst = diffs.length ? Math.max(...diffs) : 0;
      readouts.diff.textContent = diffs.length ? worst.toExponential(2) : "–";
      root.dataset.seconds = String((performance.now() - t0) / 1000);
      if (!value.stopped) root.dataset.result = JSON.stringify({ losses: r.losses, max_diff_from_first: r.max_diff_from_first, steps: r.steps });
      if (value.stopped) setStatus("stopped", `Stopped at step ${r.steps}. Press Start to train again from step 0.`);
      else setStatus("done", `Done: ${r.steps} steps. The curves lie on top of each other: the largest difference between any run's loss and the ${r.first}-worker run's is ${worst.toExponential(2)} nats, float32 rounding from adding the same numbers in another order.`);
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
    }
  });
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Start to train in this page.");
}
