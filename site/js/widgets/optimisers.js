// One optimiser on the real model, live: a thin view over the chunked run:optim_train
// (pylib.web.optim_ops -> pylib.train). The measured band comes from results.json (the template's
// config) through pylib.web.band_series; this module only draws and reports.

import { LossChart } from "../chart.js";
import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const measured = JSON.parse($('[data-role="measured"]').textContent);
  const config = readConfig(root);
  const subset = config.eval_windows ? `on the ${config.eval_windows}-window subset` : "on the trainer's fixed subset of windows";
  const readouts = readoutMap(root);
  const readout = (key, text) => { readouts[key].textContent = text; };
  const note = $('[data-role="band-note"]');
  const chart = new LossChart($('[data-role="chart"]'));
  const fields = bindFields(root);
  const optimizer = fields.input("optimizer");
  let band = null;
  let divergedAt = null;

  const withoutFlagLimits = (b) => (b ? { mean: b.mean, lo: b.lo, hi: b.hi } : null);
  const chosen = () => optimizer.value;

  async function showBand() {
    const name = chosen();
    const curve = measured.curves[name];
    if (!curve) {
      band = null;
      chart.reset(1, null);
      note.textContent = "No measured band for this optimiser: results.json has no curve (run python build.py --measure).";
      return;
    }
    const n = curve.steps[curve.steps.length - 1] + 1;
    band = await client.call("band", { curve, n_steps: n });
    chart.reset(n, withoutFlagLimits(band));
    note.textContent = `Band: ${optimizer.selectedOptions[0].textContent} at its measured best rate, ${measured.best_lr[name]}, validation loss ${subset}.`;
  }

  const run = runStreamed(root, client, {
    op: "run:optim_train",
    fields,
    args: () => ({ ...fields.values(), curve: measured.curves[chosen()] }),
    announceStart: "Training started.",
    onStart() {
      optimizer.disabled = true;
    },
    onClear() {
      divergedAt = null;
      for (const key of Object.keys(readouts)) readout(key, "–");
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        chart.reset(ev.info.steps, withoutFlagLimits(ev.info.band));
        band = ev.info.band;
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      chart.add(c.records);
      chart.redraw();
      for (const r of c.records) {
        if (r.diverged) continue;
        readout("step", String(r.step + 1));
        if (r.loss != null) readout("loss", r.loss.toFixed(3));
        if (r.val != null) {
          readout("val", r.val.toFixed(3));
          const inBand = band && band.mean[r.step] != null;
          readout("band", inBand ? `${band.mean[r.step].toFixed(3)} ± ${(band.hi[r.step] - band.mean[r.step]).toFixed(3)}` : "–");
        }
      }
      if (c.diverged_at != null) divergedAt = c.diverged_at;
      return `Training… step ${c.step} of ${c.steps}.`;
    },
    onResult(value) {
      optimizer.disabled = false;
      const r = value.result;
      const summary = { optimizer: r.optimizer, lr: r.lr, seed: r.seed, steps: r.steps, diverged_at: r.diverged_at,
        last_val: r.last_val, last_val_step: r.last_val_step, stopped: value.stopped };
      const result = !value.stopped || r.diverged ? summary : undefined;
      if (divergedAt != null) readout("step", `diverged at ${divergedAt}`);
      if (r.diverged) {
        return { status: "done", result, text: `Diverged at step ${r.diverged_at}: the loss left the range a training run can be in (above 2 ln V, or not a number). Try a smaller learning rate.` };
      }
      if (value.stopped) {
        return { status: "stopped", text: `Stopped after ${r.steps} steps; last validation loss ${r.last_val == null ? "–" : r.last_val.toFixed(3)} (step ${r.last_val_step}, ${subset}). Press Start to run again from step 0.` };
      }
      return { status: "done", result, text: `Done: ${r.steps} steps, final validation loss ${r.last_val.toFixed(3)} ${subset}, the band's evaluation (the chapter's tables use the whole validation split).` };
    },
    onError() { optimizer.disabled = false; },
  });

  optimizer.addEventListener("change", async () => {
    if (run.running) return;
    const best = measured.best_lr[chosen()];
    if (best != null) fields.set("lr", best);
    await showBand();
  });

  await run.ready(showBand);
}
