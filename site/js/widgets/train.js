// The live training widget: a thin view over pylib.web (validation, training chunks, band check,
// sample, export), which runs in the page's Python worker. Everything from the reader or the model
// is shown with textContent.

import { LossChart } from "../chart.js";
import { invalidMarker, showRunError, readConfig, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const FIELDS = ["lr", "steps", "batch_size", "seed", "temperature"];

function format(key, v) {
  if (v == null || Number.isNaN(v)) return "–";
  if (key === "step") return String(v);
  if (key === "lr") return v.toExponential(2);
  if (key === "steps_per_s") return v.toFixed(1);
  if (key === "tokens_per_s") return Math.round(v).toLocaleString("en");
  return v.toFixed(3);
}

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const config = readConfig(root);
  const flag = $('[data-role="band-flag"]');
  const output = $('[data-role="output"]');
  const download = $('[data-role="download"]');
  const readouts = readoutMap(root);
  let running = false;
  let weightsURL = null;

  const setStatus = statusSetter(root, message);
  const setReadout = (key, value) => {
    if (readouts[key]) readouts[key].textContent = format(key, value);
  };
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);

  const d = config.derived;
  const subset = `${config.defaults.eval_windows} fixed validation windows`;
  const chart = new LossChart($('[data-role="chart"]'), {
    refs: [
      { value: d.ln_vocab, label: `ln V (V = ${d.vocab_size})` },
      { value: d.unigram_loss, label: "unigram loss" },
    ],
  });

  const drawBand = async () => {
    if (!config.curve) return;
    const n = Math.max(config.defaults.steps, config.curve.steps[config.curve.steps.length - 1] + 1);
    chart.reset(n, await client.call("band", { curve: config.curve, n_steps: n, shade: "flag" }));
  };
  if (!(await startPython(client, setStatus, [runButton], drawBand))) return;
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Start to train in this page.");

  $('[data-action="defaults"]').addEventListener("click", () => {
    for (const name of ["lr", "steps", "batch_size", "seed"]) form.elements[name].value = config.defaults[name];
    form.elements.temperature.value = "1.0";
    markInvalid(null);
  });

  wireStop(stopButton, client, message, () => running);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    const settings = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value]));
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    output.hidden = true;
    flag.hidden = true;
    markInvalid(null);
    delete root.dataset.result;
    delete root.dataset.outsideBand;
    if (weightsURL) URL.revokeObjectURL(weightsURL);
    weightsURL = null;
    setStatus("running", "Starting…");
    for (const key of Object.keys(readouts)) setReadout(key, null);

    let tokensPerStep = 0;
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        tokensPerStep = ev.info.tokens_per_step;
        chart.reset(Math.max(ev.info.config.steps, ev.info.band ? ev.info.band.mean.length : 0), ev.info.band);
        root.dataset.outsideBand = ev.info.band_applies ? "false" : "n/a";
        if (!ev.info.band_applies && config.curve) {
          flag.hidden = false;
          flag.textContent = `The shaded band is the default run's (default settings, seed ${config.defaults.seed}); ` +
            "this run's settings differ, so the band is drawn but the run is not flagged.";
        }
      } else if (ev.kind === "chunk") {
        const c = ev.chunk;
        chart.add(c.records);
        chart.redraw();
        const last = c.records[c.records.length - 1];
        if (last) {
          setReadout("step", last.step + 1);  // records count steps from 0
          setReadout("loss", last.loss);
          setReadout("lr", last.lr);
          setReadout("grad_norm", last.grad_norm);
        }
        for (const r of c.records) if (r.val != null) setReadout("val", r.val);
        setReadout("steps_per_s", c.steps_per_s);
        setReadout("tokens_per_s", c.steps_per_s == null ? null : c.steps_per_s * tokensPerStep);
        if (c.outside_band && c.left_band) {
          root.dataset.outsideBand = "true";
          flag.hidden = false;
          const b = c.left_band;
          flag.textContent =
            `This run left the measured band at step ${b.step}: validation loss ${b.val.toFixed(3)} ` +
            `(${subset}), band ${b.mean.toFixed(3)} ± ${b.half.toFixed(3)}.`;
        }
        message.textContent = `Training… step ${c.step} of ${c.steps}.`;
      }
    };

    try {
      const value = await client.call("train", { settings, curve: config.curve }, { onEvent });
      const r = value.result;
      const summary = {
        steps: r.steps, final_train_loss: r.final_train_loss, final_val_loss: r.final_val_loss,
        steps_per_s: r.steps_per_s, tokens_per_s: r.tokens_per_s, diverged: r.diverged, diverged_at: r.diverged_at, diverged_loss: r.diverged_loss,
        seed: r.seed, lr: r.lr, batch_size: r.batch_size, outside_band: r.outside_band,
      };
      if (!value.stopped) root.dataset.result = JSON.stringify(summary);
      if (r.diverged) {
        const why = r.diverged_loss == null
          ? "its loss was not a finite number"
          : `its loss, ${r.diverged_loss.toFixed(1)}, passed the limit 2 ln V = ${r.divergence_limit.toFixed(2)}`;
        setStatus("error", `The run diverged at step ${r.diverged_at}: ${why}, so training stopped there. Try a smaller learning rate.`);
        return;
      }
      $('[data-role="sample"]').textContent = r.sample;
      weightsURL = URL.createObjectURL(new Blob([value.weights], { type: "application/octet-stream" }));
      download.href = weightsURL;
      output.hidden = false;
      const val = r.final_val_loss == null ? "" : `, last validation loss ${r.final_val_loss.toFixed(3)} (${subset})`;
      if (value.stopped) {
        setStatus("stopped", `Stopped at step ${r.steps} of ${settings.steps.trim()}: the sample and weights below are the model at that step. Press Start to train again from step 0.`);
      } else {
        setStatus("done", `Done: ${r.steps} steps, train loss ${r.final_train_loss.toFixed(3)}${val}.`);
      }
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
    }
  });
}
