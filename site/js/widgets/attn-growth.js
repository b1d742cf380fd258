// Attention-logit growth, live: a thin view over run:stability_attn (pylib.web.stability_ops, which runs
// pylib.train and reads pylib.studies.stability.attention_stats). It only draws what the worker sends.

import { invalidMarker, showRunError, readConfig, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const FIELDS = ["lr", "seed"];
const LAYER = ["#2a5db0", "#d9480f"];
const BAND = ["rgba(42, 93, 176, 0.14)", "rgba(217, 72, 15, 0.14)"];
const num = (v, d = 3) => (v == null ? "–" : typeof v === "string" ? v : Math.abs(v) >= 1e4 ? v.toExponential(2) : v.toFixed(d));
const finite = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);
const positive = (v) => (typeof v === "number" && v > 0 ? v : null); // a log axis cannot show 0 or less

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const flag = $('[data-role="flag"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);
  const els = { logit: $('[data-role="chart-logit"]'), entropy: $('[data-role="chart-entropy"]') };
  let running = false;
  const plots = {};
  const data = {};

  const size = (el) => ({ width: Math.max(280, el.clientWidth || 600), height: 210 });
  const hidden = { show: false };

  // x: the step of every statistics point (0, interval, ...) and the end; bands at the measured steps
  function reset(steps, interval, setting) {
    const x = [];
    for (let s = 0; s < steps; s += interval) x.push(s);
    if (x[x.length - 1] !== steps) x.push(steps);
    const band = config.bands[setting];
    const at = (arr) => x.map((s) => (band && arr ? arr[band.steps.indexOf(s)] ?? null : null));
    for (const [key, log] of [["logit", true], ["entropy", false]]) {
      const stat = key === "logit" ? "max_logit" : "entropy";
      const pick = (l, side) => (band ? at(band[stat][l][side]).map(log ? positive : (v) => v) : x.map(() => null));
      const arrays = [x, x.map(() => null), x.map(() => null), pick(0, 0), pick(0, 1), pick(1, 0), pick(1, 1)];
      if (key === "entropy") arrays.push(x.map(() => config.uniform_entropy));
      data[key] = arrays;
      const series = [
        { label: "step" },
        { label: "layer 0", stroke: LAYER[0], width: 2, points: { show: true, size: 4 } },
        { label: "layer 1", stroke: LAYER[1], width: 2, points: { show: true, size: 4 } },
        { label: "band 0 lo", stroke: BAND[0], width: 0.5, points: hidden },
        { label: "band 0 hi", stroke: BAND[0], width: 0.5, points: hidden },
        { label: "band 1 lo", stroke: BAND[1], width: 0.5, points: hidden },
        { label: "band 1 hi", stroke: BAND[1], width: 0.5, points: hidden },
      ];
      if (key === "entropy") series.push({ label: "uniform", stroke: "#6b6b6b", width: 1, dash: [6, 4], points: hidden });
      if (plots[key]) plots[key].destroy();
      plots[key] = new uPlot({
        ...size(els[key]),
        scales: { x: { time: false }, y: log ? { distr: 3 } : { range: (u, lo, hi) => [0, Math.max(hi, config.uniform_entropy) * 1.05] } },
        axes: [{ label: "step", stroke: "#444", grid: { stroke: "#eee" } },
          { label: log ? "|logit|" : "nats", stroke: "#444", grid: { stroke: "#eee" }, size: 60 }],
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        series,
        bands: [{ series: [4, 3], fill: BAND[0] }, { series: [6, 5], fill: BAND[1] }],
      }, arrays, els[key]);
    }
  }
  if (typeof ResizeObserver !== "undefined") {
    for (const [key, el] of Object.entries(els)) new ResizeObserver(() => plots[key] && plots[key].setSize(size(el))).observe(el);
  }

  function addPoints(points) {
    for (const p of points) {
      const i = data.logit[0].indexOf(p.step);
      if (i < 0) continue;
      for (let l = 0; l < 2; l++) {
        data.logit[l + 1][i] = positive(finite(p.max_logit[l]));
        data.entropy[l + 1][i] = finite(p.entropy[l]);
      }
    }
    const last = points[points.length - 1];
    if (last) {
      for (let l = 0; l < 2; l++) {
        readouts[`max_logit_${l}`].textContent = num(last.max_logit[l], 1);
        readouts[`entropy_${l}`].textContent = num(last.entropy[l]);
      }
    }
    plots.logit.setData(data.logit);
    plots.entropy.setData(data.entropy);
  }

  form.addEventListener("submit", (event) => event.preventDefault()); // never reload the page, even before Python is up
  if (!(await startPython(client, setStatus, [runButton]))) return;
  const settingOf = (qk, z) => (qk ? (z ? "qk_norm_z_loss" : "qk_norm") : (z ? "z_loss" : "baseline"));
  // Before a run: the measured band of the ticked setting.
  const idleView = () => reset(config.steps, config.interval, settingOf(form.elements.qk_norm.checked, form.elements.z_loss.checked));
  idleView();
  for (const box of [form.elements.qk_norm, form.elements.z_loss]) box.addEventListener("change", () => { if (!running) idleView(); });
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
    for (const el of Object.values(readouts)) el.textContent = "–";
    setStatus("running", "Starting…");
    const args = { lr: form.elements.lr.value, seed: form.elements.seed.value, qk_norm: form.elements.qk_norm.checked, z_loss: form.elements.z_loss.checked };
    const setting = settingOf(args.qk_norm, args.z_loss);
    const received = []; // every statistics point, as the worker sent it
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        reset(ev.info.steps, ev.info.stats_interval, setting);
      } else if (ev.kind === "chunk") {
        const c = ev.chunk;
        received.push(...c.points);
        addPoints(c.points);
        const lastLoss = c.losses.filter((r) => r.loss != null).pop();
        readouts.step.textContent = String(c.step);
        if (lastLoss) readouts.loss.textContent = num(lastLoss.loss);
        if (c.diverged_at != null) {
          flag.textContent = `Diverged at step ${c.diverged_at}: the loss or the gradient stopped being a finite number, or passed 2 ln V. The run was stopped there.`;
          flag.hidden = false;
        }
        message.textContent = `Training… step ${c.step} of ${c.steps}.`;
      }
    };
    try {
      const value = await client.call("run:stability_attn", args, { onEvent });
      const r = value.result;
      const last = r.last;
      const stats = last ? `largest |logit| ${num(last.max_logit[0], 1)} and ${num(last.max_logit[1], 1)}, entropy ${num(last.entropy[0])} and ${num(last.entropy[1])} nats (layers 0 and 1) at step ${last.step}` : "no statistics yet";
      if (value.stopped) {
        setStatus("stopped", `Stopped after ${r.steps} steps: ${stats}. Press Start to run again from step 0.`);
      } else {
        root.dataset.result = JSON.stringify({ steps: r.steps, diverged_at: r.diverged_at, last, points: received });
        setStatus("done", r.diverged_at != null ? `Diverged at step ${r.diverged_at}; ${stats}.` : `Done: ${r.steps} steps; ${stats}.`);
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
  setStatus("ready", "Ready. Press Start.");
}
