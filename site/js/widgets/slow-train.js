// One method of the four-worker toy, live: a thin view over run:slow_train (pylib.web.slow_links_ops ->
// pylib.systems.slow_links). The measured band of the same method (results.json) is drawn behind it.

import { LossChart } from "../chart.js";
import { invalidMarker, showRunError, readConfig, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const FIELDS = ["method", "seed"];
const NAMES = { dense: "dense", topk: "top-k + error feedback", quant: "quantised + error feedback", demo: "DeMo", diloco: "DiLoCo" };

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const note = $('[data-role="band-note"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const set = (key, v, d = 3) => {
    readouts[key].textContent = v == null ? "–" : typeof v === "number" && !Number.isInteger(v) ? v.toFixed(d) : typeof v === "number" ? v.toLocaleString("en") : String(v);
  };
  let running = false;
  const chart = new LossChart($('[data-role="chart"]'), { refs: [{ value: config.target, label: "target" }] });

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
    const method = form.elements.method.value;
    const args = { method, seed: form.elements.seed.value, steps: config.steps, eval_interval: config.eval_interval,
      target: config.target, curves: config.curves };
    let ema = null;
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        const info = ev.info;
        chart.reset(info.steps + 1, info.band);
        set("bytes_per_sync", info.bytes_per_sync);
        set("syncs_per_step", info.syncs_per_step, 2);
        note.hidden = false;
        note.textContent = info.band ? `Shaded: the measured band of ${NAMES[method]} (3 seeds). Each sync ${info.kind === "all_reduce" ? "all-reduces the dense vector on a ring" : `all-gathers ${info.payload_bytes.toLocaleString("en")}-byte payloads`}.`
          : `No measured band for ${NAMES[method]} in this build (run build.py --measure --only ch13).`;
      } else if (ev.kind === "chunk") {
        const c = ev.chunk;
        for (const r of c.records) {
          if (r.loss != null) { ema = ema == null ? r.loss : 0.9 * ema + 0.1 * r.loss; r.loss_smooth = ema; }
        }
        chart.add(c.records);
        chart.redraw();
        const last = c.records[c.records.length - 1];
        if (last) {
          set("step", last.step);
          if (last.loss != null) set("loss", last.loss);
          set("bytes", last.bytes);
        }
        for (const r of c.records) if (r.val != null) set("val", r.val);
        if (c.reached) { set("steps_to_target", c.reached.step); set("bytes_to_target", c.reached.bytes); }
        message.textContent = `Training… step ${c.step} of ${c.steps}.`;
      }
    };
    try {
      const value = await client.call("run:slow_train", args, { onEvent });
      const r = value.result;
      root.dataset.result = JSON.stringify({ method, stopped: value.stopped, steps: r.steps, bytes: r.bytes, syncs: r.syncs, losses: r.losses, vals: r.vals, steps_to_target: r.steps_to_target, bytes_to_target: r.bytes_to_target });
      const reached = r.steps_to_target == null ? `did not reach the target (${config.target} nats) in ${r.steps} steps` : `reached the target at step ${r.steps_to_target}, after ${r.bytes_to_target.toLocaleString("en")} bytes per worker`;
      if (r.diverged) {
        setStatus("error", `The run diverged at step ${r.steps}: its loss passed 2 ln V or stopped being a number, so training stopped there.`);
      } else if (value.stopped) {
        setStatus("stopped", `Stopped at step ${r.steps}. Press Start to train again from step 0.`);
      } else {
        setStatus("done", `Done: ${r.steps} steps; ${NAMES[method]} ${reached}.`);
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
  setStatus("ready", "Ready. Press Start to train four workers in this page.");
}
