// The pipeline Gantt charts: a thin view over pipeline_schedule (pylib.web.model_parallel_ops ->
// pylib.systems.pipeline.simulate_pipeline), which returns the reader's schedule and, as "reference", GPipe on
// the same stages, microbatches and ratio, from one call. The two charts share one time scale (so their idle
// gaps compare by eye) and one scale for the bar of each stage's peak activations (so the memory compares by
// eye). Every slider drag, keystroke or schedule change asks Python again; the newest answer wins. A bad
// field gets its message under it; the last good charts, their titles and the readouts stay, and a line says
// they show the last good settings.

import { describe, fillTable, frameOf, niceTicks, onResize, svgCanvas, svgEl as el, svgText as text } from "../plot.js";
import { bindFields, calculator, readoutMap } from "../widget-kit.js";

const pct = (x) => `${(100 * x).toFixed(1)}%`;
const SERIES = { F: "s1", B: "s2", W: "s3" }; // forward; backward (ZB-H1: its input-gradient half); weight gradient
// Not by colour alone: a backward (or B) box is hatched with diagonal lines, a W box with level ones; a forward is plain
const HATCH = { B: { angle: 45 }, W: { angle: 0 } };
const units = (x) => String(+x.toFixed(x < 10 ? 2 : 1));
const held = (x) => String(+x.toFixed(3)); // peak activations, in microbatches (a chunk's is 1/v)
const SHORT = { gpipe: "GPipe", "1f1b": "1F1B", interleaved: "interleaved", "zb-h1": "ZB-H1" };
const WIDE = 520; // from this width the memory bars sit at the end of each row; below it, under the chart

/** The settings a result was computed for, in words (the charts' titles and the stale line). */
function settings(r) {
  return `${r.stages} stages × ${r.microbatches} microbatches` + (r.chunks > 1 ? ` × ${r.chunks} chunks` : "") +
    `, backward ${+r.ratio.toFixed(3)}× forward`;
}

/** One schedule, drawn at the width it is shown at (12 px text on any screen): a row per stage on the
 *  time scale tmax (shared by both charts), and each stage's peak activations as a bar on the scale
 *  peakMax (shared too), at the end of its row when wide, under the chart when narrow. */
function draw(svg, r, tmax, peakMax) {
  const p = r.stages, v = r.chunks;
  const rowH = Math.max(18, Math.min(30, 240 / p)), head = 18, axisH = 24;
  const shown = Math.round(svg.getBoundingClientRect().width);
  const wide = (shown >= 200 ? shown : 600) >= WIDE; // the width svgCanvas draws at
  const barRow = 16, below = wide ? 0 : 22 + p * barRow; // the bars' block under the axis on a phone
  const { W } = svgCanvas(svg, head + p * rowH + axisH + below);
  const left = 60, right = 10, barsW = wide ? 130 : 0;
  const ganttR = W - right - barsW; // the Gantt's right edge
  const scale = (ganttR - left) / tmax;
  const barMax = (wide ? barsW - 50 : W - left - right - 44); // longest bar, px; room after it for the number
  const barX = wide ? ganttR + 14 : left;
  text(svg, left, 13, "time →", { cls: "kit-label mp-axis-title" });
  if (wide) text(svg, barX, 13, "peak held", { cls: "kit-label mp-axis-title" });
  const top = head;
  const ids = {};
  const defs = el("defs", {}, svg);
  for (const [kind, { angle }] of Object.entries(HATCH)) {
    ids[kind] = `${svg.id || (svg.closest("[id]")?.id ?? "gantt")}-${svg.dataset.role}-hatch-${kind}`;
    const pattern = el("pattern", { id: ids[kind], width: 5, height: 5, patternUnits: "userSpaceOnUse",
      patternTransform: `rotate(${angle})` }, defs);
    el("line", { x1: 0, y1: 0.5, x2: 5, y2: 0.5, class: "mp-hatch-line" }, pattern);
  }
  for (let s = 0; s < p; s++) {
    el("rect", { class: "mp-idle", x: left, y: top + s * rowH + 1, width: r.makespan * scale, height: rowH - 2 }, svg);
    text(svg, 4, top + s * rowH + rowH / 2 + 4, `stage ${s + 1}`);
  }
  for (let i = 0; i < r.start.length; i++) {
    const x = left + r.start[i] * scale, w = (r.end[i] - r.start[i]) * scale, y = top + r.stage[i] * rowH + 1;
    // paler for later chunks: the box's fill opacity, its edge in the full series colour
    const shade = v > 1 ? 0.6 - (0.35 * r.chunk[i]) / (v - 1) : 0.6;
    el("rect", {
      x, y, width: Math.max(w - 0.6, 0.4), height: rowH - 2, "fill-opacity": shade.toFixed(2),
      class: `kit-area mp-box ${SERIES[r.kind[i]]}`, "data-kind": r.kind[i],
    }, svg);
    if (HATCH[r.kind[i]]) el("rect", { x, y, width: Math.max(w - 0.6, 0.4), height: rowH - 2, fill: `url(#${ids[r.kind[i]]})`, class: "mp-hatch" }, svg);
    const label = String(r.mb[i] + 1);
    if (w >= 8 * label.length + 4) text(svg, x + w / 2, y + rowH / 2 + 3, label, { anchor: "middle", cls: "kit-label mp-box-label" });
  }
  // round times (1, 2 or 5 × 10^k apart) from 0 to the longer schedule's end, one about every 70 px
  const axisY = top + p * rowH + 16;
  const ticks = niceTicks(0, tmax, Math.max(2, Math.min(8, Math.floor((ganttR - left) / 70))));
  ticks.forEach((tv, k) => {
    const x = left + tv * scale, atEnd = k === ticks.length - 1 && x > ganttR - 20;
    text(svg, x, axisY, String(tv), { anchor: k === 0 ? "start" : atEnd ? "end" : "middle", "data-tick": tv });
  });
  // the memory bars: wide, at the end of each stage's row; narrow, one short row each under the axis
  if (!wide) text(svg, 4, axisY + 22, "peak activations held (microbatches)", { cls: "kit-label mp-axis-title" });
  for (let s = 0; s < p; s++) {
    const value = r.peak_activations[s];
    const cy = wide ? top + s * rowH + rowH / 2 : axisY + 22 + (s + 1) * barRow - barRow / 2 + 3;
    const h = wide ? Math.min(rowH - 6, 14) : barRow - 4;
    const len = Math.max((value / peakMax) * barMax, 1);
    if (!wide) text(svg, 4, cy + 4, `stage ${s + 1}`);
    el("rect", { class: "kit-area mp-mem s5", x: barX, y: cy - h / 2, width: len, height: h,
      "data-stage": s, "data-value": value }, svg);
    text(svg, barX + len + 4, cy + 4, held(value), { cls: "kit-label mp-mem-label", "data-stage": s });
  }
}

/** The text alternative of one chart: a sentence and, per stage, its busy and idle time and its peak activations. */
function explain(svg, r, sentence) {
  const frame = frameOf(svg);
  const rows = [];
  for (let s = 0; s < r.stages; s++) {
    let busy = 0;
    const count = { F: 0, B: 0, W: 0 };
    r.start.forEach((t, i) => {
      if (r.stage[i] !== s) return;
      busy += r.end[i] - t;
      count[r.kind[i]] += 1;
    });
    rows.push([`stage ${s + 1}`, count.F, count.B, count.W, +busy.toFixed(4), +(r.makespan - busy).toFixed(4),
      +r.peak_activations[s].toFixed(3)]);
  }
  fillTable(frame, ["stage", "forward boxes", "backward (or B) boxes", "W boxes", "busy time", "idle time",
    "peak activations (microbatches)"], rows);
  describe(frame, sentence);
  svg.setAttribute("aria-label", `${r.name}, ${settings(r)}: one row per stage, time to the right, each stage's peak activations beside it`);
}

/** A formula readout: its label (the dt before it) and its value, or the reason it has none. */
function formula(dd, label, value, note) {
  dd.previousElementSibling.textContent = label;
  dd.textContent = value === null ? `– (${note})` : pct(value);
}

export async function mount(root, client) {
  const svg = root.querySelector('[data-role="chart"]');
  const refSvg = root.querySelector('[data-role="reference"]');
  const title = root.querySelector('[data-role="chart-title"]');
  const refTitle = root.querySelector('[data-role="reference-title"]');
  const stale = root.querySelector('[data-role="stale"]');
  const readouts = readoutMap(root);
  const label = (name, s) => { readouts[name].previousElementSibling.textContent = s; };
  let t0 = 0, last = null;

  function drawBoth() {
    const g = last.reference;
    const tmax = Math.max(last.makespan, g.makespan);
    const peakMax = Math.max(...last.peak_activations, ...g.peak_activations);
    draw(svg, last, tmax, peakMax);
    draw(refSvg, g, tmax, peakMax);
  }

  const fields = bindFields(root, { onSlide: () => calc.schedule() });
  const calc = calculator(root, client, {
    op: "pipeline_schedule",
    fields,
    args() { t0 = performance.now(); return fields.values(); },
    checkArgs: () => fields.values(), // a check must not restart the update's timer
    // A refused combination keeps the last good charts, their titles and the readouts together, and says so.
    onError() {
      stale.hidden = false;
      stale.textContent = last
        ? `The fields are refused, so the charts and readouts below still show the last good settings: ${last.name} and GPipe, ${settings(last)}.`
        : "The fields are refused: no schedule is drawn yet.";
      root.classList.add("mp-showing-last-good");
    },
    onResult(r) {
      const ms = performance.now() - t0;
      const g = r.reference;
      last = r;
      stale.hidden = true;
      stale.textContent = "";
      root.classList.remove("mp-showing-last-good");
      title.textContent = `${r.name}: ${settings(r)}`;
      refTitle.textContent = `GPipe, for reference: ${settings(g)}`;
      drawBoth();
      explain(svg, r, `${r.name}, ${settings(r)}: the schedule takes ${units(r.makespan)} time units and the devices idle ` +
        `${pct(r.bubble_fraction)} of it ` +
        (r.formula_of_total === null ? `(the formula ${r.formula_note})` : `(formula ${pct(r.formula_of_total)})`) +
        `. Stage 1 holds at most ${held(r.peak_activations[0])} microbatches' activations, against ` +
        `${held(g.peak_activations[0])} under GPipe (the chart below).`);
      explain(refSvg, g, `GPipe on the same settings, for reference: ${units(g.makespan)} time units, the devices idle ` +
        `${pct(g.bubble_fraction)} of it. Stage 1 holds at most ${held(g.peak_activations[0])} microbatches' activations, ` +
        `against ${held(r.peak_activations[0])} under ${r.name} (the chart above).`);
      const short = SHORT[r.schedule] || r.name;
      label("of_total", `${short} idle share`);
      readouts.of_total.textContent = pct(r.bubble_fraction);
      // the formula beside the simulation is the schedule's own, named by Python (none where it does not hold)
      formula(readouts.formula_of_total, r.formula_label_of_total, r.formula_of_total, r.formula_note);
      formula(readouts.formula_over_ideal, r.formula_label_over_ideal, r.formula_over_ideal, r.formula_note);
      label("over_ideal", `${short} bubble ÷ work`);
      readouts.over_ideal.textContent = pct(r.bubble_over_ideal);
      label("peak", `${short} stage 1 peak`);
      readouts.peak.textContent = held(r.peak_activations[0]);
      readouts.gpipe_of_total.textContent = pct(g.bubble_fraction);
      readouts.gpipe_peak.textContent = held(g.peak_activations[0]);
      return {
        result: { schedule: r.schedule, stages: r.stages, microbatches: r.microbatches,
          chunks: r.chunks, ratio: r.ratio, makespan: r.makespan, bubble_fraction: r.bubble_fraction,
          bubble_over_ideal: r.bubble_over_ideal, formula_of_total: r.formula_of_total,
          formula_over_ideal: r.formula_over_ideal, peak_in_flight: r.peak_in_flight,
          peak_activations: r.peak_activations, events: r.start.length, ms,
          reference: { schedule: g.schedule, stages: g.stages, microbatches: g.microbatches, chunks: g.chunks,
            ratio: g.ratio, makespan: g.makespan, bubble_fraction: g.bubble_fraction,
            peak_activations: g.peak_activations, events: g.start.length } },
        text: `${r.name}, ${settings(r)}: the devices idle ${pct(r.bubble_fraction)} of the time; stage 1 holds ` +
          `${held(r.peak_activations[0])} microbatches' activations, GPipe's ${held(g.peak_activations[0])}.`,
      };
    },
  });

  // typing recomputes too, once the keys pause; the schedule's select at once
  fields.form.addEventListener("input", (event) => {
    if (!event.target.dataset.sliderFor && event.target.tagName !== "SELECT") calc.soon(60);
  });
  fields.input("schedule").addEventListener("change", () => calc.schedule());

  if (!(await calc.ready())) return;
  onResize(svg, () => last && drawBoth());
  await calc.run();
}
