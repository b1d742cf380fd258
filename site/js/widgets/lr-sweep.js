// The live learning-rate sweep: a thin view over run:schedule_sweep (pylib.web.schedule_ops, which runs
// pylib.train once per rate). It draws the final loss of each finished rate on a log axis, over the
// measured three-seed ladder from results.json; a diverged rate is a labelled marker at the top.

import { readConfig, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const NS = "http://www.w3.org/2000/svg";
const COLORS = { live: "#d9480f", measured: "#1b7a43", band: "rgba(27, 122, 67, 0.14)", diverged: "#b3261e", axis: "#999" };

function el(name, attrs, parent) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  parent.appendChild(node);
  return node;
}

function text(parent, x, y, s, attrs = {}) {
  const t = el("text", { x, y, ...attrs }, parent);
  t.textContent = s;
  return t;
}

const lrText = (lr) => (lr >= 0.01 && lr < 1000 ? String(+lr.toPrecision(3)) : lr.toExponential(0));

/** The chart: measured ladder (mean ± sd, diverged counts), the good band, and the live rungs. */
function drawChart(svg, cfg, live, rates) {
  const W = 640, H = 320, L = 52, R = 16, T = 60, B = 36;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  const ladder = cfg.ladder;
  const lrs = [...(ladder ? ladder.lrs : []), ...rates];
  if (!lrs.length) return;
  const lx0 = Math.floor(Math.log10(Math.min(...lrs)) - 0.25), lx1 = Math.ceil(Math.log10(Math.max(...lrs)) + 0.25);
  const ys = [];
  if (ladder) ladder.final_mean.forEach((m, i) => { if (m != null) ys.push(m - ladder.final_sd[i], m + ladder.final_sd[i]); });
  for (const r of live) if (r.final_val != null) ys.push(r.final_val);
  let y0 = ys.length ? Math.min(...ys) : 2, y1 = ys.length ? Math.max(...ys) : cfg.ln_vocab;
  const pad = Math.max(0.05, (y1 - y0) * 0.08);
  y0 -= pad; y1 += pad;
  const px = (lr) => L + ((Math.log10(lr) - lx0) / (lx1 - lx0)) * (W - L - R);
  const py = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  const liveRow = 16, measuredRow = 36; // the strips for diverged markers: this page's, then measured
  // the good band, behind everything
  if (cfg.good_band && cfg.good_band[0] != null) {
    const a = px(cfg.good_band[0] / 10 ** 0.25), b = px(cfg.good_band[1] * 10 ** 0.25);
    el("rect", { x: a, y: T, width: Math.max(b - a, 2), height: H - T - B, fill: COLORS.band }, svg);
  }
  // axes and ticks at powers of ten
  el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: COLORS.axis }, svg);
  el("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: COLORS.axis }, svg);
  for (let e = lx0; e <= lx1; e++) {
    el("line", { x1: px(10 ** e), y1: H - B, x2: px(10 ** e), y2: H - B + 4, stroke: COLORS.axis }, svg);
    text(svg, px(10 ** e), H - B + 15, lrText(10 ** e), { "text-anchor": "middle" });
  }
  text(svg, (L + W - R) / 2, H - 4, "learning rate (log scale)", { "text-anchor": "middle" });
  for (let i = 0; i <= 4; i++) {
    const v = y0 + ((y1 - y0) * i) / 4;
    el("line", { x1: L - 4, y1: py(v), x2: L, y2: py(v), stroke: COLORS.axis }, svg);
    text(svg, L - 6, py(v) + 4, v.toFixed(2), { "text-anchor": "end" });
  }
  text(svg, 4, liveRow + 4, "diverged here:", { class: "diverged-label" });
  if (ladder) text(svg, 4, measuredRow + 4, "measured, seeds diverged:", {});
  // the measured ladder
  if (ladder) {
    ladder.lrs.forEach((lr, i) => {
      const m = ladder.final_mean[i], sd = ladder.final_sd[i];
      if (m != null) {
        el("line", { x1: px(lr), y1: py(m - sd), x2: px(lr), y2: py(m + sd), stroke: COLORS.measured, "stroke-width": 2, opacity: 0.6 }, svg);
        el("circle", { cx: px(lr), cy: py(m), r: 4, fill: COLORS.measured, opacity: 0.6 }, svg);
      }
      if (ladder.diverged[i] > 0) {
        el("path", { d: `M${px(lr) - 5},${measuredRow + 4} l5,-9 l5,9 z`, fill: COLORS.measured, opacity: 0.6 }, svg);
        text(svg, px(lr) + 8, measuredRow + 4, `${ladder.diverged[i]}/3`, {});
      }
    });
  }
  // this page's rungs
  for (const r of live) {
    if (r.final_val != null) {
      el("circle", { cx: px(r.lr), cy: py(r.final_val), r: 5, fill: COLORS.live }, svg);
    } else {
      el("path", { d: `M${px(r.lr) - 6},${liveRow + 5} l6,-11 l6,11 z`, fill: COLORS.diverged }, svg);
      const right = px(r.lr) < W - 150;
      text(svg, px(r.lr) + (right ? 8 : -8), liveRow + 4, `diverged at step ${r.diverged_at}`,
        { class: "diverged-label", "text-anchor": right ? "start" : "end" });
    }
  }
}

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const cfg = readConfig(root);
  const svg = $('[data-role="chart"]');
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  let running = false;
  let live = [];
  let rates = [];

  drawChart(svg, cfg, live, rates);
  if (!(await startPython(client, setStatus, [runButton]))) return;
  wireStop(stopButton, client, message, () => running);

  const describe = (r) => (r.final_val != null ? `lr ${lrText(r.lr)}: ${r.final_val.toFixed(3)}` : `lr ${lrText(r.lr)}: diverged at step ${r.diverged_at}`);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    delete root.dataset.result;
    for (const name of ["rates", "seed"]) form.elements[name].removeAttribute("aria-invalid");
    for (const el of Object.values(readouts)) el.textContent = "–";
    live = [];
    setStatus("running", "Starting…");
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        rates = ev.info.rates;
        drawChart(svg, cfg, live, rates);
      } else if (ev.kind === "chunk") {
        const c = ev.chunk;
        if (c.finished.length) {
          live.push(...c.finished);
          drawChart(svg, cfg, live, rates);
        }
        const i = Math.min(c.index, rates.length - 1);
        readouts.rung.textContent = `${Math.min(c.index + 1, rates.length)} of ${rates.length}`;
        readouts.lr.textContent = lrText(rates[i]);
        readouts.step.textContent = c.step == null ? "–" : String(c.step);
        readouts.loss.textContent = c.loss == null ? "–" : c.loss.toFixed(3);
        message.textContent = c.done ? "Finishing…" : `Training rate ${c.index + 1} of ${rates.length} (lr ${lrText(rates[i])})…`;
      }
    };
    try {
      const value = await client.call("run:schedule_sweep", { rates: form.elements.rates.value, seed: form.elements.seed.value }, { onEvent });
      const r = value.result;
      live = r.rungs;
      drawChart(svg, cfg, live, rates);
      const summary = r.rungs.map(describe).join("; ");
      if (value.stopped) {
        setStatus("stopped", `Stopped after ${r.rungs.length} of ${r.rates.length} rates${summary ? ": " + summary : ""}. Press Start to run again.`);
      } else {
        root.dataset.result = JSON.stringify({ seed: r.seed, steps: r.steps, rungs: r.rungs });
        setStatus("done", `Done. Final validation loss after ${r.steps} steps: ${summary}.`);
      }
    } catch (err) {
      if (err.kind === "input" && err.errors) {
        for (const name of Object.keys(err.errors)) form.elements[name]?.setAttribute("aria-invalid", "true");
        setStatus("error", Object.values(err.errors).join("\n"));
      } else {
        setStatus("error", err.message);
      }
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
    }
  });
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Start.");
}
