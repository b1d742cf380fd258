// One optimiser on the real model, live: a thin view over the chunked run:optim_train
// (pylib.web.optim_ops -> pylib.train). The measured band comes from results.json (the template's
// config) through pylib.web.band_series; this module only draws and reports.

import { LossChart } from "../chart.js";
import { invalidMarker, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const FIELDS = ["optimizer", "lr", "seed"];

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const measured = JSON.parse($('[data-role="measured"]').textContent);
  const config = JSON.parse($('[data-role="config"]').textContent);
  const subset = config.eval_windows ? `on the ${config.eval_windows}-window subset` : "on the trainer's fixed subset of windows";
  const readout = (key, text) => { $(`[data-readout="${key}"]`).textContent = text; };
  const note = $('[data-role="band-note"]');
  const chart = new LossChart($('[data-role="chart"]'));
  let running = false;
  let band = null;

  const withoutFlagLimits = (b) => (b ? { mean: b.mean, lo: b.lo, hi: b.hi } : null);
  const chosen = () => form.elements.optimizer.value;

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
    note.textContent = `Band: ${form.elements.optimizer.selectedOptions[0].textContent} at its measured best rate, ${measured.best_lr[name]}, validation loss ${subset}.`;
  }

  if (!(await startPython(client, setStatus, [runButton]))) return;
  wireStop(stopButton, client, message, () => running);

  form.elements.optimizer.addEventListener("change", async () => {
    if (running) return;
    const best = measured.best_lr[chosen()];
    if (best != null) form.elements.lr.value = String(best);
    await showBand();
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = true;
    form.elements.optimizer.disabled = true;
    stopButton.disabled = false;
    delete root.dataset.result;
    markInvalid(null);
    for (const key of ["step", "loss", "val", "band"]) readout(key, "–");
    setStatus("running", "Starting…");
    let divergedAt = null;
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        chart.reset(ev.info.steps, withoutFlagLimits(ev.info.band));
        band = ev.info.band;
      } else if (ev.kind === "chunk") {
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
        message.textContent = `Training… step ${c.step} of ${c.steps}.`;
      }
    };
    try {
      const curve = measured.curves[chosen()];
      const value = await client.call("run:optim_train", {
        optimizer: form.elements.optimizer.value, lr: form.elements.lr.value, seed: form.elements.seed.value, curve,
      }, { onEvent });
      const r = value.result;
      const summary = { optimizer: r.optimizer, lr: r.lr, seed: r.seed, steps: r.steps, diverged_at: r.diverged_at,
        last_val: r.last_val, last_val_step: r.last_val_step, stopped: value.stopped };
      if (!value.stopped || r.diverged) root.dataset.result = JSON.stringify(summary);
      if (r.diverged) {
        setStatus("done", `Diverged at step ${r.diverged_at}: the loss left the range a training run can be in (above 2 ln V, or not a number). Try a smaller learning rate.`);
      } else if (value.stopped) {
        setStatus("stopped", `Stopped after ${r.steps} steps; last validation loss ${r.last_val == null ? "–" : r.last_val.toFixed(3)} (step ${r.last_val_step}, ${subset}). Press Start to run again from step 0.`);
      } else {
        setStatus("done", `Done: ${r.steps} steps, final validation loss ${r.last_val.toFixed(3)} ${subset}, the band's evaluation (the chapter's tables use the whole validation split).`);
      }
      if (divergedAt != null) readout("step", `diverged at ${divergedAt}`);
    } catch (err) {
      markInvalid(err.errors);
      setStatus("error", err.errors ? Object.values(err.errors).join("\n") : err.message);
    } finally {
      running = false;
      runButton.disabled = false;
      form.elements.optimizer.disabled = false;
      stopButton.disabled = true;
    }
  });

  await showBand();
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Start.");
}
