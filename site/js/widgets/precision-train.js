// A precision recipe, live: a thin view over run:precision_train (pylib.web.precision_ops, which runs
// pylib.systems.mixed_precision.recipe_steps). It only draws what the worker sends.

import { invalidMarker, readConfig, readoutMap, showRunError, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const C = { loss: "#2a5db0", val: "#d9480f", band: "rgba(27, 122, 67, 0.16)", bandEdge: "rgba(27, 122, 67, 0.55)", mean: "#868e96",
  flushed: "#c2255c", lost: "#b08a00", scale: "#2a5db0", skip: "#868e96" };
// a share as a percentage that does not round a small non-zero share to "0.00%"
const pct = (v) => (v === 0 ? "0%" : 100 * v >= 0.1 ? `${(100 * v).toFixed(1)}%` : `${(100 * v).toPrecision(2)}%`);
const num = (v, d = 3) => (v == null ? "–" : Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : v.toFixed(d));

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const flag = $('[data-role="flag"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(["seed", "recipe"], (n) => form.elements[n]);
  const els = { loss: $('[data-role="chart-loss"]'), under: $('[data-role="chart-under"]'), scale: $('[data-role="chart-scale"]') };
  const plots = {};
  const data = {};
  let running = false;
  const size = (el) => ({ width: Math.max(280, el.clientWidth || 600), height: 190 });
  if (typeof ResizeObserver !== "undefined") {
    for (const [key, el] of Object.entries(els)) new ResizeObserver(() => plots[key] && plots[key].setSize(size(el))).observe(el);
  }
  const hidden = { show: false };
  const dots = (color, s = 6) => ({ stroke: color, width: 0, paths: () => null, points: { show: true, size: s, fill: color, stroke: color } });

  function makePlot(key, series, log, label, extra = {}) {
    if (plots[key]) plots[key].destroy();
    plots[key] = new uPlot({
      ...size(els[key]), scales: { x: { time: false }, y: log ? { distr: 3 } : {} }, legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      axes: [{ label: "step", stroke: "#444", grid: { stroke: "#eee" } },
        { label, stroke: "#444", grid: { stroke: "#eee" }, size: 60, ...(log ? { values: (u, vals) => vals.map((v) => (v == null ? "" : v.toExponential(0))) } : {}) }],
      series: [{ label: "step" }, ...series], ...extra,
    }, data[key], els[key]);
  }

  function reset(n, recipe) {
    const x = Array.from({ length: n }, (_, i) => i);
    const nulls = () => new Array(n).fill(null);
    const band = config.bands[recipe];
    const spread = (arr) => { const out = nulls(); if (band) band.steps.forEach((s, i) => { if (s < n) out[s] = arr[i]; }); return out; };
    data.loss = [x, nulls(), nulls(), spread(band ? band.hi : []), spread(band ? band.lo : []), spread(band ? band.mean : [])];
    makePlot("loss", [
      { label: "batch loss", stroke: C.loss, width: 1, points: hidden },
      { label: "validation (subset)", ...dots(C.val, 5) },
      { label: "measured + sd", stroke: C.bandEdge, width: 0.5, points: hidden, spanGaps: true },
      { label: "measured − sd", stroke: C.bandEdge, width: 0.5, points: hidden, spanGaps: true },
      { label: "measured mean", stroke: C.mean, width: 1, dash: [4, 3], points: hidden, spanGaps: true },
    ], false, "loss", { bands: [{ series: [3, 4], fill: C.band }] });
    data.under = [x, nulls(), nulls()];
    makePlot("under", [{ label: "flushed", ...dots(C.flushed, 3) }, { label: "lost", ...dots(C.lost, 3) }], true, "share");
    data.scale = [x, nulls(), nulls()];
    makePlot("scale", [{ label: "loss scale", stroke: C.scale, width: 1.5, points: hidden }, { label: "skipped", ...dots(C.skip, 7) }], true, "s");
    $('[data-role="scale-title"]').textContent = recipe === "fp16_dynamic"
      ? "Loss scale s (log scale); grey points: skipped steps"
      : "Loss scale s: none in this recipe (only fp16 with dynamic loss scaling scales the loss), so this chart stays empty";
    const legend = $('[data-role="legend"]');
    legend.replaceChildren();
    const item = $('template[data-role="legend-item"]');
    for (const [label, color] of [["batch loss", C.loss], ["validation loss (subset)", C.val], ["measured mean", C.mean],
      ["flushed to zero", C.flushed], ["updates lost", C.lost], ["loss scale", C.scale], ["skipped step", C.skip]]) {
      const li = item.content.firstElementChild.cloneNode(true);
      li.querySelector(".swatch").style.background = color;
      li.querySelector('[data-role="label"]').textContent = label;
      legend.append(li);
    }
  }

  let skipped = 0;
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
    for (const key of Object.keys(plots)) plots[key].setData(data[key]);
  }

  form.addEventListener("submit", (event) => event.preventDefault());
  if (!(await startPython(client, setStatus, [runButton]))) return;
  const idle = () => { const b = config.bands[form.elements.recipe.value]; reset(b ? b.steps[b.steps.length - 1] + 1 : 1, form.elements.recipe.value); };
  idle();
  form.elements.recipe.addEventListener("change", () => { if (!running) idle(); });
  wireStop(stopButton, client, message, () => running);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    flag.hidden = true;
    delete root.dataset.result;
    markInvalid(null);
    skipped = 0;
    for (const el of Object.values(readouts)) el.textContent = "–";
    setStatus("running", "Starting…");
    let divergedAt = null;
    const onEvent = (ev) => {
      if (ev.kind === "start") reset(ev.info.steps, ev.info.settings.recipe);
      else if (ev.kind === "chunk") {
        const c = ev.chunk;
        addRecords(c.records);
        if (c.diverged_at != null && divergedAt == null) {
          divergedAt = c.diverged_at;
          flag.textContent = `Diverged at step ${divergedAt}: the loss or the gradient stopped being a finite number, or passed 2 ln V. The run was stopped there.`;
          flag.hidden = false;
        }
        message.textContent = `Training… step ${c.step} of ${c.steps}.`;
      }
    };
    try {
      const value = await client.call("run:precision_train", { recipe: form.elements.recipe.value, seed: form.elements.seed.value }, { onEvent });
      const r = value.result;
      readouts.rate.textContent = r.steps_per_second == null ? "–" : r.steps_per_second.toFixed(1);
      const summary = `${r.steps} steps` + (r.final_val != null ? `, validation loss ${num(r.final_val)} on the subset` : "")
        + (r.flushed_mean != null ? `; on average ${pct(r.flushed_mean)} of non-zero gradient elements flushed to zero per step` : "")
        + (r.lost_mean != null ? `; on average ${pct(r.lost_mean)} of moved weights put back by rounding per step` : "")
        + (r.final_scale != null ? `; ${r.skipped_steps} skipped steps, final loss scale ${r.final_scale}` : "");
      if (value.stopped) setStatus("stopped", `Stopped after ${summary}. Press Start to run again from step 0.`);
      else {
        root.dataset.result = JSON.stringify(r);
        setStatus("done", r.diverged_at != null ? `Diverged at step ${r.diverged_at}: ${summary}.` : `Done: ${summary}.`);
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
  setStatus("ready", "Ready. Choose a recipe and press Start.");
}
