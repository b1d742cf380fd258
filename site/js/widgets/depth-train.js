// A short training run of a chosen depth and norm placement, with or without warmup: a thin view
// over the chunked run:init_depth (pylib.web.init_ops -> pylib.train). The measured band of the same
// setting (results.json, via pylib.web.band_series) is drawn behind the live curve.

import { LossChart } from "../chart.js";
import { invalidMarker, showRunError, readConfig, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const FIELDS = ["depth", "position", "warmup", "seed"];

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const note = $('[data-role="band-note"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const set = (key, v, d = 3) => { readouts[key].textContent = v == null ? "–" : typeof v === "number" && !Number.isInteger(v) ? v.toFixed(d) : String(v); };
  let running = false;

  const d = config.derived;
  const chart = new LossChart($('[data-role="chart"]'), {
    refs: [
      { value: d.ln_vocab, label: `ln V (V = ${d.vocab_size})` },
      { value: d.unigram_loss, label: "unigram loss" },
    ],
  });

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
    note.hidden = true;
    for (const key of Object.keys(readouts)) set(key, null);
    setStatus("running", "Starting…");
    const args = {
      depth: form.elements.depth.value,
      position: form.elements.position.value,
      warmup: form.elements.warmup.value === "yes",
      seed: form.elements.seed.value,
      curves: config.curves,
    };
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        const info = ev.info;
        chart.reset(info.steps, info.band);
        set("params", info.params.toLocaleString("en"));
        note.hidden = false;
        note.textContent = info.band
          ? "Shaded: the measured band of this setting (3 seeds)."
          : `No measured band for this setting (${info.depth} layers, ${info.position}-LN, ${info.warmup ? "with" : "without"} warmup): only depth 8 was measured with three seeds.`;
      } else if (ev.kind === "chunk") {
        const c = ev.chunk;
        chart.add(c.records);
        chart.redraw();
        const last = c.records[c.records.length - 1];
        if (last) {
          set("step", last.diverged ? last.step : last.step + 1);
          if (!last.diverged) set("loss", last.loss);
        }
        for (const r of c.records) if (r.val != null) set("val", r.val);
        message.textContent = `Training… step ${c.step} of ${c.steps}.`;
      }
    };
    try {
      const value = await client.call("run:init_depth", args, { onEvent });
      const r = value.result;
      const summary = { steps: r.steps, final_val_loss: r.final_val_loss, final_train_loss: r.final_train_loss, diverged: r.diverged, diverged_at: r.diverged_at, losses: r.losses };
      if (!value.stopped) root.dataset.result = JSON.stringify(summary);
      if (r.diverged) {
        setStatus("error", `The run diverged at step ${r.diverged_at}: its loss passed 2 ln V = ${r.divergence_limit.toFixed(2)} or stopped being a number, so training stopped there.`);
      } else if (value.stopped) {
        setStatus("stopped", `Stopped at step ${r.steps}. Press Start to train again from step 0.`);
      } else {
        const val = r.final_val_loss == null ? "" : `, final validation loss ${r.final_val_loss.toFixed(3)} (on the ${d.subset_windows}-window subset)`;
        setStatus("done", `Done: ${r.steps} steps${val}.`);
      }
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
