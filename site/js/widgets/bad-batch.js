// One bad batch, live: a thin view over run:stability_bad (pylib.web.stability_ops, which runs pylib.train
// with pylib.studies.stability's batch and gradient hooks). It only draws what the worker sends.

import { invalidMarker, showRunError, readConfig, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const FIELDS = ["inject_step", "clip", "skip_factor", "lr", "seed"];
const LAYER_COLORS = ["#2a5db0", "#d9480f", "#1b7a43", "#7b3fb0", "#b08a00", "#0b7285", "#c2255c", "#495057"];
const C = { loss: "#2a5db0", bad: "#e03131", clip: "#f08c00", skip: "#868e96", clean: "#868e96", band: "rgba(27, 122, 67, 0.16)", bandEdge: "rgba(27, 122, 67, 0.55)", lr: "#1b7a43" };
const num = (v, d = 3) => (v == null ? "–" : Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : v.toFixed(d));

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const injectButton = $('[data-action="inject"]');
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const flag = $('[data-role="flag"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);
  let running = false;
  let plots = {};
  let data = {};

  const els = { loss: $('[data-role="chart-loss"]'), norm: $('[data-role="chart-norm"]'), layers: $('[data-role="chart-layers"]'), weights: $('[data-role="chart-weights"]') };
  const size = (el) => ({ width: Math.max(280, el.clientWidth || 600), height: 200 });
  const axes = (label, log) => [
    { label: "step", stroke: "#444", grid: { stroke: "#eee" } },
    { label, stroke: "#444", grid: { stroke: "#eee" }, size: 60, ...(log ? { values: (u, vals) => vals.map((v) => (v == null ? "" : v.toExponential(0))) } : {}) },
  ];
  const hidden = { show: false };
  const dots = (color, size = 6) => ({ stroke: color, width: 0, paths: () => null, points: { show: true, size, fill: color, stroke: color } });

  function makePlot(key, series, arrays, log, label) {
    if (plots[key]) plots[key].destroy();
    plots[key] = new uPlot({
      ...size(els[key]),
      scales: { x: { time: false }, y: log ? { distr: 3 } : {} },
      axes: axes(label, log),
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      series: [{ label: "step" }, ...series],
      ...(key === "loss" ? { bands: [{ series: [3, 4], fill: C.band }] } : {}),
    }, arrays, els[key]);
  }

  function reset(n, layers, cure) {
    const x = Array.from({ length: n }, (_, i) => i);
    const nulls = () => new Array(n).fill(null);
    const band = config.bands[cure] || null;
    const fit = (a) => (a ? a.slice(0, n).concat(new Array(Math.max(0, n - a.length)).fill(null)) : nulls());
    data.loss = [x, nulls(), nulls(), fit(band && band.hi), fit(band && band.lo), fit(band && band.clean), nulls(), nulls()];
    makePlot("loss", [
      { label: "loss", stroke: C.loss, width: 1.5, points: hidden },
      { label: "bad batch", ...dots(C.bad, 7) },
      { label: "measured + sd", stroke: C.bandEdge, width: 0.5, points: hidden },
      { label: "measured − sd", stroke: C.bandEdge, width: 0.5, points: hidden },
      { label: "measured, no bad batch", stroke: C.clean, width: 1, dash: [4, 3], points: hidden },
      { label: "clipped", ...dots(C.clip, 5) },
      { label: "skipped", ...dots(C.skip, 8) },
    ], data.loss, false, "loss");
    data.norm = [x, nulls(), nulls()];
    makePlot("norm", [
      { label: "grad norm", stroke: C.loss, width: 1.5, points: hidden },
      { label: "lr × 100", stroke: C.lr, width: 1.5, dash: [5, 3], points: hidden },
    ], data.norm, true, "norm");
    data.layers = [x, ...layers.map(() => nulls())];
    makePlot("layers", layers.map((name, i) => ({ label: name, stroke: LAYER_COLORS[i % LAYER_COLORS.length], width: 1.5, points: hidden })),
      data.layers, true, "norm");
    data.weights = [x, ...layers.map(() => nulls())];
    makePlot("weights", layers.map((name, i) => ({ label: name, stroke: LAYER_COLORS[i % LAYER_COLORS.length], width: 1.5, points: hidden })),
      data.weights, false, "weight norm");
    const legend = $('[data-role="legend"]');
    legend.replaceChildren();
    const item = $('template[data-role="legend-item"]');
    const entries = [["this run's loss", C.loss], ["bad batch", C.bad], ["clipped step", C.clip], ["skipped step", C.skip], ["learning rate × 100", C.lr],
      ...layers.map((name, i) => [name, LAYER_COLORS[i % LAYER_COLORS.length]])];
    for (const [label, color] of entries) {
      const li = item.content.firstElementChild.cloneNode(true);
      li.querySelector(".swatch").style.background = color;
      li.querySelector('[data-role="label"]').textContent = label;
      legend.append(li);
    }
  }
  if (typeof ResizeObserver !== "undefined") {
    for (const [key, el] of Object.entries(els)) new ResizeObserver(() => plots[key] && plots[key].setSize(size(el))).observe(el);
  }

  const counts = { clipped: 0, skipped: 0 };
  let units = null; // MLP hidden units per layer, from the run's start
  function showDead(dead) {
    if (!dead || units == null) return;
    readouts.dead.textContent = dead.map((f) => (f == null ? "–" : `${Math.round(f * units)} of ${units}`)).join(", ");
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
      data.norm[1][r.step] = r.grad_norm;
      data.norm[2][r.step] = r.lr == null ? null : r.lr * 100;
      r.layer_grad_norms.forEach((v, i) => { data.layers[i + 1][r.step] = v; });
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
    for (const key of Object.keys(plots)) plots[key].setData(data[key]);
  }

  form.addEventListener("submit", (event) => event.preventDefault()); // never reload the page, even before Python is up
  if (!(await startPython(client, setStatus, [runButton]))) return;
  // Before a run: the measured band of the chosen cure over the measured run's length.
  const idleView = () => {
    const band = config.bands[form.elements.cure.value];
    reset(band ? band.clean.length : 1, [], form.elements.cure.value);
  };
  idleView();
  for (const radio of form.querySelectorAll('input[name="cure"]')) {
    radio.addEventListener("change", () => { if (!running) idleView(); });
  }

  wireStop(stopButton, client, message, () => running);
  injectButton.addEventListener("click", async () => {
    if (!running) return;
    try {
      const v = await client.call("stability_bad_inject", {});
      if (v.bad_steps.length) message.textContent = `Injecting bad batches at steps ${v.bad_steps[0]}–${v.bad_steps[v.bad_steps.length - 1]}…`;
    } catch (err) {
      message.textContent = err.message;
    }
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    injectButton.disabled = true;
    flag.hidden = true;
    delete root.dataset.result;
    markInvalid(null);
    counts.clipped = 0;
    counts.skipped = 0;
    for (const el of Object.values(readouts)) el.textContent = "–";
    setStatus("running", "Starting…");
    const args = Object.fromEntries(FIELDS.map((n) => [n, form.elements[n].value]));
    args.cure = form.elements.cure.value;
    let divergedAt = null;
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        reset(ev.info.steps, ev.info.layers, ev.info.settings.cure);
        units = ev.info.mlp_units;
        showDead(ev.info.dead_units);
        injectButton.disabled = false;
      } else if (ev.kind === "chunk") {
        const c = ev.chunk;
        addRecords(c.records);
        showDead(c.dead_units);
        if (c.diverged_at != null && divergedAt == null) {
          divergedAt = c.diverged_at;
          flag.textContent = `Diverged at step ${divergedAt}: the loss or the gradient stopped being a finite number, or passed 2 ln V. The run was stopped there.`;
          flag.hidden = false;
        }
        message.textContent = `Training… step ${c.step} of ${c.steps}.`;
      }
    };
    try {
      const value = await client.call("run:stability_bad", args, { onEvent });
      const r = value.result;
      showDead(r.dead_units);
      const summary = `${r.clipped_steps} clipped (${(100 * r.clipped_fraction).toFixed(1)}% of steps), ${r.skipped_steps} skipped (${(100 * r.skipped_fraction).toFixed(1)}%)`
        + (r.bad_steps_taken ? `; ${r.bad_steps_taken} bad batches met, ${r.bad_skipped} of them skipped` : "; no bad batch reached")
        + (r.grad_norm_ratio != null ? `; at the first bad batch the grad norm was ${r.grad_norm_ratio.toFixed(1)}× the median of the 20 steps before` : "");
      if (value.stopped) {
        setStatus("stopped", `Stopped after ${r.steps} steps: ${summary}. Press Start to run again from step 0.`);
      } else {
        root.dataset.result = JSON.stringify(r);
        setStatus("done", r.diverged_at != null ? `Diverged at step ${r.diverged_at}: ${summary}.` : `Done: ${r.steps} steps; ${summary}.`);
      }
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
      injectButton.disabled = true;
    }
  });
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Start; press Inject now at any time during the run.");
}
