// A run's dashboard: a thin view over run:job_dash and job_export (pylib.web.job_ops, which calls
// pylib.train, pylib.studies.monitoring and pylib.studies.target). It only draws what the worker sends.

import { fmtCell } from "../plot.js";
import { bindFields, readoutMap, runStreamed } from "../widget-kit.js";
import { download, fillLegend, lineChart, num } from "./job-kit.js";

const KEYS = ["loss", "grad_norm", "lr", "weight_norm", "clipped_fraction", "tokens_per_s"];
const LAYER_SERIES = [1, 2, 3, 5, 4, 6]; // one colour per layer group (its legend is built from the run's groups)

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const exportButtons = [...root.querySelectorAll('[data-action="export"]')];
  const readouts = readoutMap(root);
  const checks = $('[data-role="checks"]');
  const els = Object.fromEntries(KEYS.map((k) => [k, $(`[data-role="chart-${k}"]`)]));
  const fields = bindFields(root);
  let plots = {};
  let data = {};
  let logged = 0;
  let target = null;
  let reach = { step: null, seconds: null };
  let args = null;

  // the weight norms' legend: one entry per layer group of the run, under its chart
  const layerLegend = document.createElement("ul");
  layerLegend.className = "chart-legend";
  layerLegend.dataset.role = "legend-weight_norm";
  layerLegend.setAttribute("aria-label", "legend");
  els.weight_norm.after(layerLegend);

  function reset(n, layers) {
    // x runs to n, the step count: the last validation point measures the final weights, after n steps
    const x = Array.from({ length: n + 1 }, (_, i) => i);
    const nulls = () => new Array(n + 1).fill(null);
    for (const p of Object.values(plots)) p.destroy();
    data = {
      loss: [x, nulls(), nulls()],
      grad_norm: [x, nulls()], lr: [x, nulls()], clipped_fraction: [x, nulls()], tokens_per_s: [x, nulls()],
      weight_norm: [x, ...layers.map(() => nulls())],
    };
    const one = (label) => [{ label, color: 1 }];
    plots = {
      loss: lineChart(els.loss, [{ label: "batch loss (nats/token)", color: 1 }, { label: "val (subset)", color: 2, dots: 6 }],
        { ylabel: "loss", refs: target == null ? [] : [{ value: target, label: "target" }] }),
      grad_norm: lineChart(els.grad_norm, one("grad norm"), { log: true, ylabel: "norm" }),
      lr: lineChart(els.lr, one("lr"), { ylabel: "lr" }),
      weight_norm: lineChart(els.weight_norm, layers.map((name, i) => ({ label: name, color: LAYER_SERIES[i % LAYER_SERIES.length] })),
        { ylabel: "norm" }),
      clipped_fraction: lineChart(els.clipped_fraction, one("clipped"), { ylabel: "fraction", yrange: [0, 1] }),
      tokens_per_s: lineChart(els.tokens_per_s, one("tokens/s"), { ylabel: "tokens/s" }),
    };
    fillLegend(layerLegend, layers.map((name, i) => [`line s${LAYER_SERIES[i % LAYER_SERIES.length]}`, name]));
  }

  /** Each chart's sentence: its first and last logged value. */
  function describeAll(last) {
    const first = (col) => col.find((v) => v != null);
    const span = (col) => `from ${fmtCell(first(col))} at step 0 to ${fmtCell(col[last])} at step ${last}`;
    plots.loss.describe(`The batch loss went ${span(data.loss[1])}` +
      (reach.step != null ? `; the target ${target} was reached at step ${reach.step}.` : target != null ? `; the target ${target} is not reached yet.` : "."));
    plots.grad_norm.describe(`The gradient norm went ${span(data.grad_norm[1])}.`);
    plots.lr.describe(`The learning rate went ${span(data.lr[1])}.`);
    plots.weight_norm.describe(`Weight norms at step ${last}: ` +
      plots.weight_norm.opts.series.map((s, i) => `${s.label} ${fmtCell(data.weight_norm[i + 1][last])}`).join(", ") + ".");
    plots.clipped_fraction.describe(`${(100 * (data.clipped_fraction[1][last] ?? 0)).toFixed(1)}% of the steps so far were clipped.`);
    const tps = data.tokens_per_s[1][last];
    plots.tokens_per_s.describe(tps == null ? "No tokens-per-second figure yet." : `At step ${last}: ${Math.round(tps).toLocaleString("en")} tokens per second.`);
  }

  function add(rows) {
    const n = data.loss[0].length - 1;
    for (const r of rows) {
      if (r.step >= n) continue;
      data.loss[1][r.step] = r.loss;
      if (r.val != null) data.loss[2][r.val_step ?? r.step] = r.val;  // drawn at the steps done on the weights it measured
      data.grad_norm[1][r.step] = r.grad_norm;
      data.lr[1][r.step] = r.lr;
      data.clipped_fraction[1][r.step] = r.clipped_fraction;
      data.tokens_per_s[1][r.step] = r.tokens_per_s ?? null;
      r.weight_norms.forEach((v, i) => { if (data.weight_norm[i + 1]) data.weight_norm[i + 1][r.step] = v; });
      logged += 1;
    }
    const last = rows[rows.length - 1];
    if (!last) return;
    readouts.step.textContent = String(last.step + 1);
    readouts.loss.textContent = num(last.loss);
    readouts.grad_norm.textContent = num(last.grad_norm);
    readouts.tokens_per_s.textContent = last.tokens_per_s == null ? "–" : Math.round(last.tokens_per_s).toLocaleString("en");
    for (const k of KEYS) plots[k].setData(data[k]);
    describeAll(Math.min(last.step, n - 1));
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

  const run = runStreamed(root, client, {
    op: "run:job_dash",
    fields,
    args: () => { args = fields.values(); return args; },
    announceStart: "Training started.",
    onStart() {
      for (const b of exportButtons) b.disabled = true;
    },
    onClear() {
      checks.replaceChildren();
      for (const el of Object.values(readouts)) el.textContent = "–";
      logged = 0;
      reach = { step: null, seconds: null };
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        target = args.target.trim() === "" ? null : Number(args.target);
        reset(ev.info.steps, ev.info.layers);
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      if (c.target_step != null && reach.step == null) {
        reach = { step: c.target_step, seconds: c.target_seconds };
        readouts.target_step.textContent = String(c.target_step);
        readouts.target_seconds.textContent = num(c.target_seconds, 2);
      }
      add(c.records);
      return `Training… step ${c.step} of ${c.steps}.`;
    },
    onResult(value) {
      const r = value.result;
      if (r.initial) check(`initial loss ${num(r.initial.loss)} against ln V = ${num(r.initial.expected)} (within ${r.initial.tolerance} nats)`, r.initial.ok);
      if (target != null) check(reach.step == null ? `${target} not reached in ${r.step} steps${value.stopped ? " (stopped)" : ""}`
        : `${target} reached at step ${reach.step}, after ${num(reach.seconds, 2)} s of training`, null, "target");
      for (const b of exportButtons) b.disabled = logged === 0;
      const result = { step: r.step, target_step: reach.step, initial: r.initial, rows: logged, clipped_fraction: r.clipped_fraction };
      if (value.stopped) return { status: "stopped", result, text: `Stopped at step ${r.step}. Export what was logged, or press Start again.` };
      return { status: "done", result, text: r.diverged ? `Diverged at step ${r.step}.` : `Done: ${r.step} steps; ${(100 * r.clipped_fraction).toFixed(1)}% of them clipped.` };
    },
    onError() { for (const b of exportButtons) b.disabled = logged === 0; },
  });

  for (const b of exportButtons) {
    b.addEventListener("click", async () => {
      if (run.running) return;
      try {
        const v = await client.call("job_export", { slot: "dash", format: b.dataset.format });
        download(v.text, v.name, b.dataset.format === "csv" ? "text/csv" : "application/x-ndjson");
        root.dataset.exported = JSON.stringify({ format: b.dataset.format, rows: v.rows });
        run.setStatus(root.dataset.status, `Exported ${v.rows} rows as ${v.name}.`, "now");
      } catch (err) {
        run.setStatus(root.dataset.status, err.message, "now");
      }
    });
  }
  await run.ready(null, "Ready. Press Start.");
}
