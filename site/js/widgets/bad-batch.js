// One bad batch, live: a thin view over run:stability_bad (pylib.web.stability_ops, which runs pylib.train
// with pylib.studies.stability's batch and gradient hooks). It only draws what the worker sends.

import { Plot, ends, fmtCell } from "../plot.js";
import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";
import { nth, placeholder, placeholders, setLegend } from "./chart-extras.js";

const num = (v, d = 3) => (v == null ? "–" : Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : v.toFixed(d));
const positive = (v) => (v != null && v > 0 ? v : null); // a log axis shows only values above 0
const range = (steps) => (steps.length > 1 ? `${steps[0]}–${steps[steps.length - 1]}` : String(steps[0]));

/** "name v, name v, …" of each column's last value (layers at the last step drawn). */
function lastValues(data, names) {
  const parts = names.map((name, i) => {
    const e = ends(data[0], data[i + 1]);
    return e ? [name, e.y1, e.x1] : null;
  }).filter(Boolean);
  if (!parts.length) return null;
  return { step: parts[0][2], parts };
}

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const form = $('[data-role="form"]');
  const injectButton = $('[data-action="inject"]');
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const flag = $('[data-role="flag"]');
  const els = { loss: $('[data-role="chart-loss"]'), norm: $('[data-role="chart-norm"]'), layers: $('[data-role="chart-layers"]'), weights: $('[data-role="chart-weights"]') };
  const waiting = placeholders(els);
  const plots = {};
  const data = {};
  let layers = [];
  let started = false; // a run has sent its first records: every chart has data

  const make = (key, opts) => {
    if (plots[key]) {
      plots[key].destroy();
      placeholder(els[key], waiting[key]); // until this chart's first data
    }
    plots[key] = new Plot(els[key], { x: { label: "step" }, height: 220, ...opts });
  };

  function reset(n, names, cure) {
    const x = Array.from({ length: n }, (_, i) => i);
    const nulls = () => new Array(n).fill(null);
    const band = config.bands[cure] || null;
    const fit = (a) => (a ? a.slice(0, n).concat(new Array(Math.max(0, n - a.length)).fill(null)) : nulls());
    layers = names;
    started = false;
    // loss, bad-batch markers, band upper and lower edges, measured without the bad batch, clipped, skipped
    data.loss = [x, nulls(), nulls(), fit(band && band.hi), fit(band && band.lo), fit(band && band.clean), nulls(), nulls()];
    make("loss", {
      y: { label: "loss (nats/token)" },
      series: [
        { label: "loss", color: 1, width: 1.5 },
        { label: "bad batch", color: 2, points: true, size: 7 },
        { label: "measured + sd", color: "axis", width: 0.5, hidden: !band },
        { label: "measured − sd", color: "axis", width: 0.5, hidden: !band },
        { label: "measured, no bad batch", color: 3, width: 1, dash: [4, 3], hidden: !band },
        { label: "clipped", color: 4, points: true, size: 5 },
        { label: "skipped", color: 5, points: true, size: 8 },
      ],
      bands: band ? [[3, 4]] : [],
    });
    data.norm = [x, nulls(), nulls()];
    make("norm", { y: { label: "norm", log: true }, series: [
      { label: "grad norm", color: 1, width: 1.5 }, { label: "lr × 100", color: 3, width: 1.5, dash: [5, 3] }] });
    data.layers = [x, ...names.map(() => nulls())];
    make("layers", { y: { label: "grad norm", log: true }, series: names.map((name, i) => ({ label: name, color: nth(i), width: 1.5 })) });
    data.weights = [x, ...names.map(() => nulls())];
    make("weights", { y: { label: "weight norm" }, series: names.map((name, i) => ({ label: name, color: nth(i), width: 1.5 })) });
    const legend = names.map((name, i) => [`line s${nth(i)}`, name]);
    setLegend(els.layers, legend);
    setLegend(els.weights, legend);
    if (band) { // the measured band needs no run
      plots.loss.setData(data.loss);
      const lo = ends(x, data.loss[4]), hi = ends(x, data.loss[3]), clean = ends(x, data.loss[5]);
      plots.loss.describe(`Measured, 3 seeds, cure "${cure}", bad stretch at step ${config.inject_step}: at step ${hi.x1} the loss is ` +
        `${fmtCell(lo.y1)} to ${fmtCell(hi.y1)} (mean ± sd), ${fmtCell(clean.y1)} without the bad stretch.`);
    }
  }

  const counts = { clipped: 0, skipped: 0 };
  let units = null; // MLP hidden units per layer, from the run's start
  function showDead(dead) {
    if (!dead || units == null) return;
    readouts.dead.textContent = dead.map((f) => (f == null ? "–" : `${Math.round(f * units)} of ${units}`)).join(", ");
  }

  function describeAll() {
    const [x, loss, bad] = data.loss;
    const l = ends(x, loss);
    const badSteps = x.filter((s) => bad[s] != null);
    if (l) {
      plots.loss.describe(`Batch loss from ${fmtCell(l.y0)} at step ${l.x0} to ${fmtCell(l.y1)} at step ${l.x1}` +
        (badSteps.length ? `; bad batches at steps ${range(badSteps)}` : "; no bad batch yet") +
        `; ${counts.clipped} steps clipped, ${counts.skipped} skipped.`);
    }
    const g = ends(x, data.norm[1]);
    if (g) {
      let top = g.x0;
      data.norm[1].forEach((v, s) => { if (v != null && v > data.norm[1][top]) top = s; });
      plots.norm.describe(`Gradient norm before clipping: ${fmtCell(g.y0)} at step ${g.x0}, ${fmtCell(g.y1)} at step ${g.x1}; ` +
        `the largest, ${fmtCell(data.norm[1][top])}, at step ${top}.`);
    }
    const gl = lastValues(data.layers, layers);
    if (gl) plots.layers.describe(`Gradient norm of each layer at step ${gl.step}: ${gl.parts.map(([n, v]) => `${n} ${fmtCell(v)}`).join(", ")}.`);
    const wl = lastValues(data.weights, layers);
    if (wl) plots.weights.describe(`Weight norm of each layer at step ${wl.step}: ${wl.parts.map(([n, v]) => `${n} ${fmtCell(v)}`).join(", ")}.`);
  }

  function addRecords(records) {
    const n = data.loss[0].length;
    for (const r of records) {
      if (r.step >= n) continue;
      if (r.diverged) continue; // labelled in the flag, never drawn
      if (r.bad) data.loss[2][r.step] = null; // its own loss is the corrupted text's: marked below instead
      else data.loss[1][r.step] = r.loss;
      if (r.clipped) counts.clipped += 1;
      if (r.skipped) counts.skipped += 1;
      data.norm[1][r.step] = positive(r.grad_norm);
      data.norm[2][r.step] = r.lr == null ? null : positive(r.lr * 100);
      r.layer_grad_norms.forEach((v, i) => { data.layers[i + 1][r.step] = positive(v); });
      r.layer_weight_norms.forEach((v, i) => { data.weights[i + 1][r.step] = v; });
    }
    // markers: bad steps at the loss line's recent level; clipped / skipped at their loss
    for (const r of records) {
      if (r.step >= n || r.diverged) continue;
      let near = null; // the last clean loss before this step: a bad batch's own loss is not the text's
      for (let i = r.step - 1; i >= 0 && near == null; i--) near = data.loss[1][i];
      if (near == null) near = r.loss;
      if (r.bad) data.loss[2][r.step] = near;
      if (r.clipped) data.loss[6][r.step] = r.bad ? near : r.loss;
      if (r.skipped) data.loss[7][r.step] = r.bad ? near : r.loss;
    }
    const last = records[records.length - 1];
    if (last) {
      readouts.step.textContent = String(last.step + 1);
      readouts.loss.textContent = num(last.loss);
      readouts.grad_norm.textContent = num(last.grad_norm);
      readouts.lr.textContent = num(last.lr, 4);
    }
    readouts.clipped.textContent = String(counts.clipped);
    readouts.skipped.textContent = String(counts.skipped);
    if (!records.length && !started) return;
    started = true;
    for (const key of Object.keys(plots)) plots[key].setData(data[key]);
    describeAll();
  }

  const fields = bindFields(root);
  const cure = () => form.elements.cure.value;
  let divergedAt = null;
  let injecting = null; // [first, last] step of a stretch injected with Inject now
  const injectNote = (step) => (!injecting ? ""
    : step <= injecting[1] ? ` Injecting bad batches at steps ${range(injecting)}…` : ` Bad batches injected at steps ${range(injecting)}.`);

  const run = runStreamed(root, client, {
    op: "run:stability_bad",
    fields,
    args: () => ({ ...fields.values(), cure: cure() }),
    announceStart: "Training started.",
    onStart() {
      injectButton.disabled = true;
    },
    onClear() {
      flag.hidden = true;
      counts.clipped = 0;
      counts.skipped = 0;
      divergedAt = null;
      injecting = null;
      for (const el of Object.values(readouts)) el.textContent = "–";
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        reset(ev.info.steps, ev.info.layers, ev.info.settings.cure);
        units = ev.info.mlp_units;
        showDead(ev.info.dead_units);
        injectButton.disabled = false;
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      addRecords(c.records);
      showDead(c.dead_units);
      if (c.diverged_at != null && divergedAt == null) {
        divergedAt = c.diverged_at;
        flag.textContent = `Diverged at step ${divergedAt}: the loss or the gradient stopped being a finite number, or passed 2 ln V. The run was stopped there.`;
        flag.hidden = false;
      }
      return `Training… step ${c.step} of ${c.steps}.${injectNote(c.step)}`;
    },
    onResult(value) {
      injectButton.disabled = true;
      const r = value.result;
      showDead(r.dead_units);
      const summary = `${r.clipped_steps} clipped (${(100 * r.clipped_fraction).toFixed(1)}% of steps), ${r.skipped_steps} skipped (${(100 * r.skipped_fraction).toFixed(1)}%)`
        + (r.bad_steps_taken ? `; ${r.bad_steps_taken} bad batches met, ${r.bad_skipped} of them skipped` : "; no bad batch reached")
        + (r.grad_norm_ratio != null ? `; at the first bad batch the grad norm was ${r.grad_norm_ratio.toFixed(1)}× the median of the 20 steps before` : "");
      if (value.stopped) return { status: "stopped", text: `Stopped after ${r.steps} steps: ${summary}. Press Start to run again from step 0.` };
      return { status: "done", result: r, text: r.diverged_at != null ? `Diverged at step ${r.diverged_at}: ${summary}.` : `Done: ${r.steps} steps; ${summary}.` };
    },
    onError() { injectButton.disabled = true; },
  });

  injectButton.addEventListener("click", async () => {
    if (!run.running) return;
    try {
      const v = await client.call("stability_bad_inject", {});
      if (v.bad_steps.length) {
        injecting = [v.bad_steps[0], v.bad_steps[v.bad_steps.length - 1]];
        run.setStatus("running", `Injecting bad batches at steps ${range(injecting)}…`, "now");
      }
    } catch (err) {
      run.setStatus("running", err.message, "now");
    }
  });

  // Before a run: the measured band of the chosen cure over the measured run's length (no Python needed).
  const idleView = () => {
    const band = config.bands[cure()];
    reset(band ? band.clean.length : 1, [], cure());
  };
  idleView();
  for (const radio of form.querySelectorAll('input[name="cure"]')) {
    radio.addEventListener("change", () => { if (!run.running) idleView(); });
  }
  await run.ready(null, "Ready. Press Start; press Inject now at any time during the run.");
}
