// A short training run of a chosen depth and norm placement, with or without warmup: a thin view
// over the chunked run:init_depth (pylib.web.init_ops -> pylib.train). The measured band of the same
// setting (results.json, via pylib.web.band_series) is drawn behind the live curve.

import { LossChart } from "../chart.js";
import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const note = $('[data-role="band-note"]');
  const set = (key, v, d = 3) => { readouts[key].textContent = v == null ? "–" : typeof v === "number" && !Number.isInteger(v) ? v.toFixed(d) : String(v); };
  const fields = bindFields(root);

  const d = config.derived;
  const chart = new LossChart($('[data-role="chart"]'), {
    refs: [
      { value: d.ln_vocab, label: `ln V (V = ${d.vocab_size})` },
      { value: d.unigram_loss, label: "unigram loss" },
    ],
  });

  const run = runStreamed(root, client, {
    op: "run:init_depth",
    fields,
    args: () => {
      const v = fields.values();
      return { depth: v.depth, position: v.position, warmup: v.warmup === "yes", seed: v.seed, curves: config.curves };
    },
    announceStart: "Training started.",
    onClear() {
      note.hidden = true;
      for (const key of Object.keys(readouts)) set(key, null);
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        const info = ev.info;
        chart.reset(info.steps, info.band);
        set("params", info.params.toLocaleString("en"));
        note.hidden = false;
        note.textContent = info.band
          ? "Shaded: the measured band of this setting (3 seeds)."
          : `No measured band for this setting (${info.depth} layers, ${info.position}-LN, ${info.warmup ? "with" : "without"} warmup): only depth 8 was measured with three seeds.`;
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      chart.add(c.records);
      chart.redraw();
      const last = c.records[c.records.length - 1];
      if (last) {
        set("step", last.diverged ? last.step : last.step + 1);
        if (!last.diverged) set("loss", last.loss);
      }
      for (const r of c.records) if (r.val != null) set("val", r.val);
      return `Training… step ${c.step} of ${c.steps}.`;
    },
    onResult(value) {
      const r = value.result;
      const summary = { steps: r.steps, final_val_loss: r.final_val_loss, final_train_loss: r.final_train_loss, diverged: r.diverged, diverged_at: r.diverged_at, losses: r.losses };
      const result = value.stopped ? undefined : summary;
      if (r.diverged) {
        return { status: "error", result, text: `The run diverged at step ${r.diverged_at}: its loss passed 2 ln V = ${r.divergence_limit.toFixed(2)} or stopped being a number, so training stopped there.` };
      }
      if (value.stopped) return { status: "stopped", text: `Stopped at step ${r.steps}. Press Start to train again from step 0.` };
      const val = r.final_val_loss == null ? "" : `, final validation loss ${r.final_val_loss.toFixed(3)} (on the ${d.subset_windows}-window subset)`;
      return { status: "done", result, text: `Done: ${r.steps} steps${val}.` };
    },
  });
  await run.ready(null, "Ready. Press Start to train in this page.");
}
