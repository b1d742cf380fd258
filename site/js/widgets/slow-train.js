// One method of the four-worker toy, live: a thin view over run:slow_train (pylib.web.slow_links_ops ->
// pylib.systems.slow_links). The measured band of the same method (results.json) is drawn behind it.

import { LossChart } from "../chart.js";
import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";

const NAMES = { dense: "dense", topk: "top-k + error feedback", quant: "quantised + error feedback", demo: "DeMo", diloco: "DiLoCo" };

export async function mount(root, client) {
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const note = root.querySelector('[data-role="band-note"]');
  const set = (key, v, d = 3) => {
    readouts[key].textContent = v == null ? "–" : typeof v === "number" && !Number.isInteger(v) ? v.toFixed(d) : typeof v === "number" ? v.toLocaleString("en") : String(v);
  };
  const chart = new LossChart(root.querySelector('[data-role="chart"]'), { refs: [{ value: config.target, label: "target" }] });
  const fields = bindFields(root);
  let method = null, ema = null;

  const run = runStreamed(root, client, {
    op: "run:slow_train",
    fields,
    args() {
      method = fields.values().method;
      return { method, seed: fields.values().seed, steps: config.steps, eval_interval: config.eval_interval,
        target: config.target, curves: config.curves };
    },
    announceStart: "Training started.",
    onClear() {
      note.hidden = true;
      ema = null;
      for (const key of Object.keys(readouts)) set(key, null);
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        const info = ev.info;
        chart.reset(info.steps + 1, info.band);
        set("bytes_per_sync", info.bytes_per_sync);
        set("syncs_per_step", info.syncs_per_step, 2);
        note.hidden = false;
        note.textContent = info.band ? `Shaded: the measured band of ${NAMES[method]} (3 seeds). Each sync ${info.kind === "all_reduce" ? "all-reduces the dense vector on a ring" : `all-gathers ${info.payload_bytes.toLocaleString("en")}-byte payloads`}.`
          : `No measured band for ${NAMES[method]} in this build (run build.py --measure --only ch13).`;
        return null;
      }
      if (ev.kind !== "chunk") return null;
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
      return `Training… step ${c.step} of ${c.steps}.`;
    },
    onResult(value) {
      const r = value.result;
      const result = { method, stopped: value.stopped, steps: r.steps, bytes: r.bytes, syncs: r.syncs, losses: r.losses, vals: r.vals,
        steps_to_target: r.steps_to_target, bytes_to_target: r.bytes_to_target };
      const reached = r.steps_to_target == null ? `did not reach the target (${config.target} nats) in ${r.steps} steps`
        : `reached the target at step ${r.steps_to_target}, after ${r.bytes_to_target.toLocaleString("en")} bytes per worker`;
      if (r.diverged) {
        return { status: "error", result, text: `The run diverged at step ${r.steps}: its loss passed 2 ln V or stopped being a number, so training stopped there.` };
      }
      if (value.stopped) return { status: "stopped", result, text: `Stopped at step ${r.steps}. Press Start to train again from step 0.` };
      return { status: "done", result, text: `Done: ${r.steps} steps; ${NAMES[method]} ${reached}.` };
    },
  });
  await run.ready(null, "Ready. Press Start to train four workers in this page.");
}
