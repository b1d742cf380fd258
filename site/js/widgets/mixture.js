// A two-source mixture run (pylib.studies.mixture via pylib.web.data_ops's data_mix_* ops, chunked,
// stoppable), on the kit's runStreamed.

import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";
import { lineChart } from "./data-svg.js";

const FIELDS = ["weight", "steps", "seed"];

export async function mount(root, client) {
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const chart = lineChart(root.querySelector('[data-role="chart"]'));
  const fields = bindFields(root);
  let losses = [];
  let total = 1;

  const draw = () => {
    if (!losses.length) return;
    const n = losses.length;
    chart([{ xs: losses.map((_, i) => i), ys: losses, color: 1, points: false, label: "train loss" }], {
      xlabel: "step", ylabel: "loss (nats/token)", xmin: 0, xmax: Math.max(total, losses.length - 1),
      summary: `Training loss of the mixed batches: ${losses[0].toFixed(3)} at step 0, ${losses[n - 1].toFixed(3)} at step ${n - 1}.`,
    });
  };

  const run = runStreamed(root, client, {
    op: "run:data_mix",
    fields,
    args: () => ({ ...Object.fromEntries(FIELDS.map((f) => [f, fields.input(f).value])), spans: config.spans }),
    announceStart: "Training started.",
    onClear() {
      for (const el of Object.values(readouts)) el.textContent = "–";
      losses = [];
    },
    onEvent(ev) {
      if (ev.kind === "start") total = ev.info.steps;
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      losses.push(...c.losses);
      readouts.step.textContent = c.step;
      readouts.frac0.textContent = c.fractions[0].toFixed(3);
      readouts.frac1.textContent = c.fractions[1].toFixed(3);
      draw();
      return `Training… step ${c.step} of ${c.steps}.`;
    },
    onResult({ result: r, stopped }) {
      readouts.frac0.textContent = r.fractions[0].toFixed(3);
      readouts.frac1.textContent = r.fractions[1].toFixed(3);
      readouts.held0.textContent = r.held_out[0].toFixed(3);
      readouts.held1.textContent = r.held_out[1].toFixed(3);
      return {
        status: stopped ? "stopped" : "done",
        result: { steps: r.steps, weights: r.weights, fractions: r.fractions, held_out: r.held_out, stopped },
        text: `${stopped ? "Stopped" : "Done"} after ${r.steps} steps: ` +
          `${(100 * r.fractions[0]).toFixed(1)}% of the windows came from comedies. Held-out loss: comedies ` +
          `${r.held_out[0].toFixed(3)}, tragedies ${r.held_out[1].toFixed(3)} nats per token.`,
      };
    },
  });
  await run.ready(null, "Ready. Choose a weight and press Train.");
}
