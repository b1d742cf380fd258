// Attention-logit growth, live: a thin view over run:stability_attn (pylib.web.stability_ops, which runs
// pylib.train and reads pylib.studies.stability.attention_stats). It only draws what the worker sends.

import { Plot, ends, fmtCell, seriesColor, withAlpha } from "../plot.js";
import { bindFields, readConfig, readoutMap, runStreamed } from "../widget-kit.js";
import { placeholder, placeholders } from "./chart-extras.js";

const num = (v, d = 3) => (v == null ? "–" : typeof v === "string" ? v : Math.abs(v) >= 1e4 ? v.toExponential(2) : v.toFixed(d));
const finite = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);
const positive = (v) => (typeof v === "number" && v > 0 ? v : null); // a log axis cannot show 0 or less

/** A Plot whose bands take their series' colour (layer 0's band blue, layer 1's vermillion, as the
 *  legend's "band s1" / "band s2" swatches), and whose y range may be a function. */
class LayerPlot extends Plot {
  uplotOptions() {
    const o = super.uplotOptions();
    o.bands = (this.opts.bands || []).map((series, i) => ({ series, fill: withAlpha(seriesColor(this.opts.bandColors[i]), 0.16) }));
    if (this.opts.yRange) o.scales.y.range = this.opts.yRange;
    return o;
  }
}

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const form = $('[data-role="form"]');
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const flag = $('[data-role="flag"]');
  const els = { logit: $('[data-role="chart-logit"]'), entropy: $('[data-role="chart-entropy"]') };
  const waiting = placeholders(els);
  const plots = {};
  const data = {};
  let band = null;

  // x: the step of every statistics point (0, interval, ...) and the end; bands at the measured steps
  function reset(steps, interval, setting) {
    const x = [];
    for (let s = 0; s < steps; s += interval) x.push(s);
    if (x[x.length - 1] !== steps) x.push(steps);
    band = config.bands[setting] || null;
    const at = (arr) => x.map((s) => (band && arr ? arr[band.steps.indexOf(s)] ?? null : null));
    for (const [key, log] of [["logit", true], ["entropy", false]]) {
      const stat = key === "logit" ? "max_logit" : "entropy";
      const pick = (l, side) => (band ? at(band[stat][l][side]).map(log ? positive : (v) => v) : x.map(() => null));
      data[key] = [x, x.map(() => null), x.map(() => null), pick(0, 0), pick(0, 1), pick(1, 0), pick(1, 1)];
      const edge = (l, side) => ({ label: `layer ${l} measured ${side}`, color: l + 1, alpha: 0.5, width: 0.5, hidden: !band });
      if (plots[key]) {
        plots[key].destroy();
        placeholder(els[key], waiting[key]); // until this chart's first data
      }
      plots[key] = new LayerPlot(els[key], {
        x: { label: "step" },
        y: log ? { label: "|logit|", log: true } : { label: "nats" },
        height: 220,
        series: [
          { label: "layer 0", color: 1, points: true, size: 4 },
          { label: "layer 1", color: 2, points: true, size: 4 },
          edge(0, "− sd"), edge(0, "+ sd"), edge(1, "− sd"), edge(1, "+ sd"),
        ],
        bands: band ? [[4, 3], [6, 5]] : [],
        bandColors: [1, 2],
        ...(log ? {} : {
          refs: [{ value: config.uniform_entropy, label: "uniform" }],
          yRange: (u, lo, hi) => [0, Math.max(hi ?? 0, config.uniform_entropy) * 1.05],
        }),
      });
      if (band) plots[key].setData(data[key]);
    }
    describeAll();
  }

  function describeAll() {
    for (const [key, what, d] of [["logit", "Largest |attention logit|", 1], ["entropy", "Mean attention entropy", 3]]) {
      const [x, l0, l1, lo0, hi0, lo1, hi1] = data[key];
      const a = ends(x, l0), b = ends(x, l1);
      const parts = [];
      if (a && b) parts.push(`${what} at step ${a.x1}: layer 0 ${num(a.y1, d)}, layer 1 ${num(b.y1, d)} (at step ${a.x0}: ${num(a.y0, d)} and ${num(b.y0, d)}).`);
      const m0 = ends(x, lo0), M0 = ends(x, hi0), m1 = ends(x, lo1), M1 = ends(x, hi1);
      if (band && M0 && M1) {
        parts.push(`Measured band at step ${M0.x1}: layer 0 ${m0 ? fmtCell(m0.y1) : "–"} to ${fmtCell(M0.y1)}, layer 1 ${m1 ? fmtCell(m1.y1) : "–"} to ${fmtCell(M1.y1)}.`);
      }
      if (key === "entropy" && parts.length) parts.push(`Attention spread evenly: ${fmtCell(config.uniform_entropy)} nats.`);
      plots[key].describe(parts.join(" "));
    }
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
    if (!points.length) return;
    plots.logit.setData(data.logit);
    plots.entropy.setData(data.entropy);
    describeAll();
  }

  const fields = bindFields(root);
  const boxes = [form.elements.qk_norm, form.elements.z_loss];
  const settingOf = (qk, z) => (qk ? (z ? "qk_norm_z_loss" : "qk_norm") : (z ? "z_loss" : "baseline"));
  let setting = "baseline";
  let received = []; // every statistics point, as the worker sent it

  const run = runStreamed(root, client, {
    op: "run:stability_attn",
    fields,
    args: () => {
      const args = { ...fields.values(), qk_norm: boxes[0].checked, z_loss: boxes[1].checked };
      setting = settingOf(args.qk_norm, args.z_loss);
      return args;
    },
    announceStart: "Training started.",
    onClear() {
      flag.hidden = true;
      received = [];
      for (const el of Object.values(readouts)) el.textContent = "–";
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        reset(ev.info.steps, ev.info.stats_interval, setting);
        return null;
      }
      if (ev.kind !== "chunk") return null;
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
      return `Training… step ${c.step} of ${c.steps}.`;
    },
    onResult(value) {
      const r = value.result;
      const last = r.last;
      const stats = last ? `largest |logit| ${num(last.max_logit[0], 1)} and ${num(last.max_logit[1], 1)}, entropy ${num(last.entropy[0])} and ${num(last.entropy[1])} nats (layers 0 and 1) at step ${last.step}` : "no statistics yet";
      if (value.stopped) return { status: "stopped", text: `Stopped after ${r.steps} steps: ${stats}. Press Start to run again from step 0.` };
      return {
        status: "done",
        result: { steps: r.steps, diverged_at: r.diverged_at, last, points: received },
        text: r.diverged_at != null ? `Diverged at step ${r.diverged_at}; ${stats}.` : `Done: ${r.steps} steps; ${stats}.`,
      };
    },
  });

  // Before a run: the measured band of the ticked setting (no Python needed).
  const idleView = () => reset(config.steps, config.interval, settingOf(boxes[0].checked, boxes[1].checked));
  idleView();
  for (const box of boxes) box.addEventListener("change", () => { if (!run.running) idleView(); });
  await run.ready();
}
