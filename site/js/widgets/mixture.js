// A two-source mixture run (pylib.studies.mixture via pylib.web.data_ops's data_mix_* ops, chunked, stoppable).

import { invalidMarker, readConfig, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";
import { lineChart } from "./data-svg.js";

const FIELDS = ["weight", "steps", "seed"];

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const config = readConfig(root);
  const chart = $('[data-role="chart"]');
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  let running = false;

  form.elements.slider.addEventListener("input", () => { form.elements.weight.value = form.elements.slider.value; });
  if (!(await startPython(client, setStatus, [runButton]))) return;
  runButton.disabled = false;
  setStatus("ready", "Ready. Choose a weight and press Train.");
  wireStop(stopButton, client, message, () => running);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    markInvalid(null);
    delete root.dataset.result;
    for (const el of Object.values(readouts)) el.textContent = "–";
    const losses = [];
    let total = 1;
    setStatus("running", "Starting…");
    const onEvent = (ev) => {
      if (ev.kind === "start") total = ev.info.steps;
      if (ev.kind !== "chunk") return;
      const c = ev.chunk;
      losses.push(...c.losses);
      readouts.step.textContent = c.step;
      readouts.frac0.textContent = c.fractions[0].toFixed(3);
      readouts.frac1.textContent = c.fractions[1].toFixed(3);
      lineChart(chart, [{ xs: losses.map((_, i) => i), ys: losses, color: "#2a5db0" }], { xmin: 0, xmax: total, xlabel: "step", ylabel: "train loss (mixed batches)" });
      message.textContent = `Training… step ${c.step} of ${c.steps}.`;
    };
    try {
      const settings = Object.fromEntries(FIELDS.map((f) => [f, form.elements[f].value]));
      const { result: r, stopped } = await client.call("run:data_mix", { ...settings, spans: config.spans }, { onEvent });
      readouts.frac0.textContent = r.fractions[0].toFixed(3);
      readouts.frac1.textContent = r.fractions[1].toFixed(3);
      readouts.held0.textContent = r.held_out[0].toFixed(3);
      readouts.held1.textContent = r.held_out[1].toFixed(3);
      root.dataset.result = JSON.stringify({ steps: r.steps, weights: r.weights, fractions: r.fractions, held_out: r.held_out, stopped });
      setStatus(stopped ? "stopped" : "done", `${stopped ? "Stopped" : "Done"} after ${r.steps} steps: ` +
        `${(100 * r.fractions[0]).toFixed(1)}% of the windows came from comedies. Held-out loss: comedies ` +
        `${r.held_out[0].toFixed(3)}, tragedies ${r.held_out[1].toFixed(3)} nats per token.`);
    } catch (err) {
      markInvalid(err.errors);
      setStatus("error", err.message);
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
    }
  });
}
