// A precision recipe, live: a thin view over run:precision_train (pylib.web.precision_ops, which runs
// pylib.systems.mixed_precision.recipe_steps). It only draws what the worker sends.

import { Plot, ends, fmtCell } from "../plot.js";
import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";
import { placeholder, placeholders } from "./chart-extras.js";

// a share as a percentage that does not round a small non-zero share to "0.00%"
const pct = (v) => (v === 0 ? "0%" : 100 * v >= 0.1 ? `${(100 * v).toFixed(1)}%` : `${(100 * v).toPrecision(2)}%`);
const num = (v, d = 3) => (v == null ? "–" : Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : v.toFixed(d));
const SCALED = "fp16_dynamic"; // the one recipe that scales the loss
const SCALE_TITLE = "Loss scale s (log scale); grey points: skipped steps";
const NO_SCALE = "Loss scale s: none in this recipe (only fp16 with dynamic loss scaling scales the loss), so this chart stays empty";

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const form = $('[data-role="form"]');
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const flag = $('[data-role="flag"]');
  const scaleTitle = $('[data-role="scale-title"]');
  const els = { loss: $('[data-role="chart-loss"]'), under: $('[data-role="chart-under"]'), scale: $('[data-role="chart-scale"]') };
  const waiting = placeholders(els);
  const plots = {};
  const data = {};
  let recipe = "";
  let started = false;

  const make = (key, opts) => {
    if (plots[key]) {
      plots[key].destroy();
      placeholder(els[key], waiting[key]); // until this chart's first data
    }
    plots[key] = new Plot(els[key], { x: { label: "step" }, height: 210, ...opts });
  };

  function reset(n, name) {
    recipe = name;
    started = false;
    const x = Array.from({ length: n }, (_, i) => i);
    const nulls = () => new Array(n).fill(null);
    const band = config.bands[name];
    const spread = (arr) => { const out = nulls(); if (band) band.steps.forEach((s, i) => { if (s < n) out[s] = arr[i]; }); return out; };
    data.loss = [x, nulls(), nulls(), spread(band ? band.hi : []), spread(band ? band.lo : []), spread(band ? band.mean : [])];
    make("loss", {
      y: { label: "loss (nats/token)" },
      series: [
        { label: "batch loss", color: 1, width: 1 },
        { label: "validation (subset)", color: 2, points: true, size: 5 },
        { label: "measured + sd", color: "axis", width: 0.5, spanGaps: true, hidden: !band },
        { label: "measured − sd", color: "axis", width: 0.5, spanGaps: true, hidden: !band },
        { label: "measured mean", color: 8, width: 1, dash: [4, 3], spanGaps: true, hidden: !band },
      ],
      bands: band ? [[3, 4]] : [],
      maxRows: 80,
    });
    data.under = [x, nulls(), nulls()];
    make("under", { y: { label: "share", log: true }, series: [
      { label: "flushed to zero", color: 5, points: true, size: 3 }, { label: "updates lost", color: 4, points: true, size: 3 }] });
    data.scale = [x, nulls(), nulls()];
    make("scale", { y: { label: "s", log: true }, series: [
      { label: "loss scale", color: 1, width: 1.5 }, { label: "skipped", color: 8, points: true, size: 7 }] });
    scaleTitle.textContent = name === SCALED ? SCALE_TITLE : NO_SCALE;
    if (name !== SCALED) placeholder(els.scale, "No loss scale in this recipe: nothing to draw.");
    if (band) { // the measured band needs no run
      plots.loss.setData(data.loss);
      const m = ends(x, data.loss[5]), lo = ends(x, data.loss[4]), hi = ends(x, data.loss[3]);
      plots.loss.describe(`Measured, recipe ${name}: validation loss ${fmtCell(m.y0)} at step ${m.x0}, ${fmtCell(m.y1)} at step ${m.x1} ` +
        `(mean; ${fmtCell(lo.y1)} to ${fmtCell(hi.y1)}, mean ± sd).`);
    }
  }

  let skipped = 0;
  function describeAll() {
    const [x, loss, val] = data.loss;
    const l = ends(x, loss), v = ends(x, val);
    if (l) {
      plots.loss.describe(`Batch loss from ${fmtCell(l.y0)} at step ${l.x0} to ${fmtCell(l.y1)} at step ${l.x1}` +
        (v ? `; validation loss on the subset from ${fmtCell(v.y0)} at step ${v.x0} to ${fmtCell(v.y1)} at step ${v.x1}.` : "."));
    }
    const count = (col) => col.filter((c) => c != null).length;
    const f = count(data.under[1]), u = count(data.under[2]);
    if (f + u) plots.under.describe(`Steps with gradient elements flushed to zero: ${f}; steps with updates lost to rounding: ${u}` +
      (l ? ` (of ${l.x1 + 1}).` : "."));
    const s = ends(x, data.scale[1]);
    if (s) plots.scale.describe(`Loss scale ${fmtCell(s.y0)} at step ${s.x0}, ${fmtCell(s.y1)} at step ${s.x1}; ${skipped} steps skipped.`);
  }

  function addRecords(records) {
    const n = data.loss[0].length;
    for (const r of records) {
      if (r.step >= n || r.diverged) continue;
      data.loss[1][r.step] = r.loss;
      if (r.val != null) data.loss[2][r.step] = r.val;
      if (r.flushed != null && r.flushed > 0) data.under[1][r.step] = r.flushed;
      if (r.lost != null && r.lost > 0) data.under[2][r.step] = r.lost;
      if (r.scale != null) data.scale[1][r.step] = r.scale;
      if (r.skipped) { skipped += 1; data.scale[2][r.step] = r.scale; }
    }
    const last = records[records.length - 1];
    if (last) {
      readouts.step.textContent = String(last.step + 1);
      readouts.loss.textContent = num(last.loss);
      if (last.val != null) readouts.val.textContent = num(last.val);
      readouts.flushed.textContent = last.flushed == null ? "–" : num(last.flushed, 4);
      readouts.lost.textContent = last.lost == null ? "–" : num(last.lost, 4);
      readouts.scale.textContent = last.scale == null ? "–" : num(last.scale, 0);
    }
    readouts.skipped.textContent = String(skipped);
    if (!records.length && !started) return;
    started = true;
    plots.loss.setData(data.loss);
    if (data.under[1].some((v) => v != null) || data.under[2].some((v) => v != null)) plots.under.setData(data.under);
    else placeholder(els.under, "No gradient element flushed to zero and no update lost so far.");
    if (recipe === SCALED) plots.scale.setData(data.scale); // other recipes have no loss scale: the placeholder says so
    describeAll();
  }

  const fields = bindFields(root);
  let divergedAt = null;
  const run = runStreamed(root, client, {
    op: "run:precision_train",
    fields,
    args: () => fields.values(),
    announceStart: "Training started.",
    onClear() {
      flag.hidden = true;
      skipped = 0;
      divergedAt = null;
      for (const el of Object.values(readouts)) el.textContent = "–";
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        reset(ev.info.steps, ev.info.settings.recipe);
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      addRecords(c.records);
      if (c.diverged_at != null && divergedAt == null) {
        divergedAt = c.diverged_at;
        flag.textContent = `Diverged at step ${divergedAt}: the loss or the gradient stopped being a finite number, or passed 2 ln V. The run was stopped there.`;
        flag.hidden = false;
      }
      return `Training… step ${c.step} of ${c.steps}.`;
    },
    onResult(value) {
      const r = value.result;
      readouts.rate.textContent = r.steps_per_second == null ? "–" : r.steps_per_second.toFixed(1);
      const summary = `${r.steps} steps` + (r.final_val != null ? `, validation loss ${num(r.final_val)} on the subset` : "")
        + (r.flushed_mean != null ? `; on average ${pct(r.flushed_mean)} of non-zero gradient elements flushed to zero per step` : "")
        + (r.lost_mean != null ? `; on average ${pct(r.lost_mean)} of moved weights put back by rounding per step` : "")
        + (r.final_scale != null ? `; ${r.skipped_steps} skipped steps, final loss scale ${r.final_scale}` : "");
      if (value.stopped) return { status: "stopped", text: `Stopped after ${summary}. Press Start to run again from step 0.` };
      return { status: "done", result: r, text: r.diverged_at != null ? `Diverged at step ${r.diverged_at}: ${summary}.` : `Done: ${summary}.` };
    },
  });

  // Before a run: the measured band of the chosen recipe (no Python needed).
  const idle = () => {
    const b = config.bands[form.elements.recipe.value];
    reset(b ? b.steps[b.steps.length - 1] + 1 : 1, form.elements.recipe.value);
  };
  idle();
  form.elements.recipe.addEventListener("change", () => { if (!run.running) idle(); });
  await run.ready(null, "Ready. Choose a recipe and press Start.");
}
