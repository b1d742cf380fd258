// A run's dashboard: a thin view over run:job_dash and job_export (pylib.web.job_ops, which calls
// pylib.train, pylib.studies.monitoring and pylib.studies.target). It only draws what the worker sends.

import { invalidMarker, showRunError, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";
import { download, fillLegend, lineChart, num } from "./job-kit.js";

const FIELDS = ["steps", "lr", "seed", "target"];
const LAYER_COLORS = ["#2a5db0", "#d9480f", "#1b7a43", "#7b3fb0", "#b08a00", "#0b7285"];
const C = { loss: "#2a5db0", val: "#d9480f", target: "#868e96" };

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const exportButtons = [...root.querySelectorAll('[data-action="export"]')];
  const readouts = readoutMap(root);
  const checks = $('[data-role="checks"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);
  const keys = ["loss", "grad_norm", "lr", "weight_norm", "clipped_fraction", "tokens_per_s"];
  const els = Object.fromEntries(keys.map((k) => [k, $(`[data-role="chart-${k}"]`)]));
  let plots = {};
  let data = {};
  let running = false;
  let logged = 0;
  let target = null;

  function reset(n, layers) {
    const x = Array.from({ length: n }, (_, i) => i);
    const nulls = () => new Array(n).fill(null);
    for (const p of Object.values(plots)) p.destroy();
    data = {
      loss: [x, nulls(), nulls(), new Array(n).fill(target)],
      grad_norm: [x, nulls()], lr: [x, nulls()], clipped_fraction: [x, nulls()], tokens_per_s: [x, nulls()],
      weight_norm: [x, ...layers.map(() => nulls())],
    };
    plots = {
      loss: lineChart(els.loss, [{ label: "batch loss", stroke: C.loss }, { label: "val (subset)", stroke: C.val, dots: 6 },
        { label: "target", stroke: C.target, dash: [4, 4] }], data.loss, { ylabel: "loss" }),
      grad_norm: lineChart(els.grad_norm, [{ label: "grad norm", stroke: C.loss }], data.grad_norm, { log: true, ylabel: "norm" }),
      lr: lineChart(els.lr, [{ label: "lr", stroke: C.loss }], data.lr, { ylabel: "lr" }),
      weight_norm: lineChart(els.weight_norm, layers.map((name, i) => ({ label: name, stroke: LAYER_COLORS[i % LAYER_COLORS.length] })),
        data.weight_norm, { ylabel: "norm" }),
      clipped_fraction: lineChart(els.clipped_fraction, [{ label: "clipped", stroke: C.loss }], data.clipped_fraction, { ylabel: "fraction", yrange: [0, 1] }),
      tokens_per_s: lineChart(els.tokens_per_s, [{ label: "tokens/s", stroke: C.loss }], data.tokens_per_s, { ylabel: "tokens/s" }),
    };
    // one legend under each chart with more than one line (the same colours mean different things in different charts)
    fillLegend($('[data-role="legend-loss"]'), [["batch loss", C.loss], ["validation loss (subset)", C.val], ["target", C.target, true]]);
    fillLegend($('[data-role="legend-weight_norm"]'), layers.map((name, i) => [name, LAYER_COLORS[i % LAYER_COLORS.length]]));
  }

  function add(rows) {
    const n = data.loss[0].length;
    for (const r of rows) {
      if (r.step >= n) continue;
      data.loss[1][r.step] = r.loss;
      if (r.val != null) data.loss[2][r.step] = r.val;
      data.grad_norm[1][r.step] = r.grad_norm;
      data.lr[1][r.step] = r.lr;
      data.clipped_fraction[1][r.step] = r.clipped_fraction;
      data.tokens_per_s[1][r.step] = r.tokens_per_s ?? null;
      r.weight_norms.forEach((v, i) => { if (data.weight_norm[i + 1]) data.weight_norm[i + 1][r.step] = v; });
      logged += 1;
    }
    const last = rows[rows.length - 1];
    if (last) {
      readouts.step.textContent = String(last.step + 1);
      readouts.loss.textContent = num(last.loss);
      readouts.grad_norm.textContent = num(last.grad_norm);
      readouts.tokens_per_s.textContent = last.tokens_per_s == null ? "–" : Math.round(last.tokens_per_s).toLocaleString("en");
    }
    for (const k of keys) plots[k].setData(data[k]);
  }

  // ok: true (pass), false (fail), or null for a plain outcome that is not a health check (the target)
  function check(text, ok, label = null) {
    const li = document.createElement("li");
    const tag = document.createElement("span");
    tag.className = ok === null ? "info" : ok ? "ok" : "bad";
    tag.textContent = label ?? (ok ? "pass" : "fail");
    li.append(tag, document.createTextNode(" " + text));
    checks.append(li);
  }

  form.addEventListener("submit", (event) => event.preventDefault());
  if (!(await startPython(client, setStatus, [runButton]))) return;
  reset(1, []);
  wireStop(stopButton, client, message, () => running);

  form.addEventListener("submit", async () => {
    if (running) return;
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    for (const b of exportButtons) b.disabled = true;
    delete root.dataset.result;
    markInvalid(null);
    checks.replaceChildren();
    for (const el of Object.values(readouts)) el.textContent = "–";
    logged = 0;
    setStatus("running", "Starting…");
    const args = Object.fromEntries(FIELDS.map((n) => [n, form.elements[n].value]));
    let reach = { step: null, seconds: null };
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        target = args.target.trim() === "" ? null : Number(args.target);
        reset(ev.info.steps, ev.info.layers);
      } else if (ev.kind === "chunk") {
        const c = ev.chunk;
        add(c.records);
        if (c.target_step != null && reach.step == null) {
          reach = { step: c.target_step, seconds: c.target_seconds };
          readouts.target_step.textContent = String(c.target_step);
          readouts.target_seconds.textContent = num(c.target_seconds, 2);
        }
        message.textContent = `Training… step ${c.step} of ${c.steps}.`;
      }
    };
    try {
      const value = await client.call("run:job_dash", args, { onEvent });
      const r = value.result;
      if (r.initial) check(`initial loss ${num(r.initial.loss)} against ln V = ${num(r.initial.expected)} (within ${r.initial.tolerance} nats)`, r.initial.ok);
      if (target != null) check(reach.step == null ? `${target} not reached in ${r.step} steps${value.stopped ? " (stopped)" : ""}`
        : `${target} reached at step ${reach.step}, after ${num(reach.seconds, 2)} s of training`, null, "target");
      root.dataset.result = JSON.stringify({ step: r.step, target_step: reach.step, initial: r.initial, rows: logged,
        clipped_fraction: r.clipped_fraction });
      if (value.stopped) setStatus("stopped", `Stopped at step ${r.step}. Export what was logged, or press Start again.`);
      else setStatus("done", r.diverged ? `Diverged at step ${r.step}.` : `Done: ${r.step} steps; ${(100 * r.clipped_fraction).toFixed(1)}% of them clipped.`);
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
      for (const b of exportButtons) b.disabled = logged === 0;
    }
  });

  for (const b of exportButtons) {
    b.addEventListener("click", async () => {
      if (running) return;
      try {
        const v = await client.call("job_export", { slot: "dash", format: b.dataset.format });
        download(v.text, v.name, b.dataset.format === "csv" ? "text/csv" : "application/x-ndjson");
        root.dataset.exported = JSON.stringify({ format: b.dataset.format, rows: v.rows });
        message.textContent = `Exported ${v.rows} rows as ${v.name}.`;
      } catch (err) {
        message.textContent = err.message;
      }
    });
  }
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Start.");
}
