// The pipeline Gantt chart: a thin view over pipeline_schedule (pylib.web.model_parallel_ops ->
// pylib.systems.pipeline.simulate_pipeline). Every slider drag, keystroke or schedule change asks Python
// for the schedule again; the newest answer wins. A bad field gets its message under it; the last good
// chart stays.

import { describe, fillTable, frameOf, niceTicks, onResize, svgCanvas, svgEl as el, svgText as text } from "../plot.js";
import { bindFields, calculator, readoutMap } from "../widget-kit.js";

const pct = (x) => `${(100 * x).toFixed(1)}%`;
const SERIES = { F: "s1", B: "s2", W: "s3" }; // forward; backward (ZB-H1: its input-gradient half); weight gradient
const units = (x) => String(+x.toFixed(x < 10 ? 2 : 1));

/** The schedule, drawn at the width it is shown at (12 px text on any screen). */
function draw(svg, r) {
  const p = r.stages, v = r.chunks;
  const rowH = Math.max(18, Math.min(30, 240 / p)), top = 6, axisH = 24;
  const { W, H } = svgCanvas(svg, top + p * rowH + axisH);
  const left = 60, right = 10;
  const scale = (W - left - right) / r.makespan;
  for (let s = 0; s < p; s++) {
    el("rect", { class: "mp-idle", x: left, y: top + s * rowH + 1, width: W - left - right, height: rowH - 2 }, svg);
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
    const label = String(r.mb[i] + 1);
    if (w >= 8 * label.length + 4) text(svg, x + w / 2, y + rowH / 2 + 3, label, { anchor: "middle", cls: "kit-label mp-box-label" });
  }
  // round times (1, 2 or 5 × 10^k apart) from 0 to the makespan, one about every 70 px
  const ticks = niceTicks(0, r.makespan, Math.max(2, Math.min(8, Math.floor((W - left - right) / 70))));
  ticks.forEach((tv, k) => {
    const x = left + tv * scale, atEnd = k === ticks.length - 1 && x > W - right - 20;
    text(svg, x, H - 6, String(tv), { anchor: k === 0 ? "start" : atEnd ? "end" : "middle", "data-tick": tv });
  });
}

/** The text alternative: a sentence and, per stage, its busy and idle time and its peak activations. */
function explain(svg, r) {
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
  describe(frame, `${r.name}, ${r.stages} stages × ${r.microbatches} microbatches` + (r.chunks > 1 ? ` × ${r.chunks} chunks` : "") +
    `: the schedule takes ${units(r.makespan)} time units and the devices idle ${pct(r.bubble_fraction)} of it ` +
    (r.formula_of_total === null ? `(the formula ${r.formula_note})` : `(formula ${pct(r.formula_of_total)})`) + `. Stage 1 holds at most ${+r.peak_activations[0].toFixed(3)} microbatches' activations.`);
}

/** A formula readout: its label (the dt before it) and its value, or the reason it has none. */
function formula(dd, label, value, note) {
  dd.previousElementSibling.textContent = label;
  dd.textContent = value === null ? `– (${note})` : pct(value);
}

export async function mount(root, client) {
  const svg = root.querySelector('[data-role="chart"]');
  const readouts = readoutMap(root);
  let t0 = 0, last = null;

  const fields = bindFields(root, { onSlide: () => calc.schedule() });
  const calc = calculator(root, client, {
    op: "pipeline_schedule",
    fields,
    args() { t0 = performance.now(); return fields.values(); },
    // A refused combination withdraws the chart it replaced: no old schedule under the new fields.
    onError() {
      last = null;
      const { W, H } = svgCanvas(svg, 60);
      text(svg, W / 2, H / 2 + 4, "No schedule: the fields above say what to change.", { anchor: "middle" });
      for (const dd of Object.values(readouts)) dd.textContent = "–";
      fillTable(frameOf(svg), ["stage"], []);
      describe(frameOf(svg), "No schedule is drawn: the fields above are refused.");
    },
    onResult(r) {
      const ms = performance.now() - t0;
      last = r;
      draw(svg, r);
      explain(svg, r);
      readouts.of_total.textContent = pct(r.bubble_fraction);
      // the formula beside the simulation is the schedule's own, named by Python (none where it does not hold)
      formula(readouts.formula_of_total, r.formula_label_of_total, r.formula_of_total, r.formula_note);
      formula(readouts.formula_over_ideal, r.formula_label_over_ideal, r.formula_over_ideal, r.formula_note);
      readouts.over_ideal.textContent = pct(r.bubble_over_ideal);
      readouts.peak.textContent = String(+r.peak_activations[0].toFixed(3));
      return {
        result: { schedule: r.schedule, stages: r.stages, microbatches: r.microbatches,
          chunks: r.chunks, ratio: r.ratio, makespan: r.makespan, bubble_fraction: r.bubble_fraction,
          bubble_over_ideal: r.bubble_over_ideal, formula_of_total: r.formula_of_total,
          formula_over_ideal: r.formula_over_ideal, peak_in_flight: r.peak_in_flight, events: r.start.length, ms },
        text: `${r.name}, ${r.stages} stages × ${r.microbatches} microbatches` +
          (r.chunks > 1 ? ` × ${r.chunks} chunks` : "") + `: the devices idle ${pct(r.bubble_fraction)} of the time.`,
      };
    },
  });

  // typing recomputes too, once the keys pause; the schedule's select at once
  fields.form.addEventListener("input", (event) => {
    if (!event.target.dataset.sliderFor && event.target.tagName !== "SELECT") calc.soon(60);
  });
  fields.input("schedule").addEventListener("change", () => calc.schedule());

  if (!(await calc.ready())) return;
  onResize(svg, () => last && draw(svg, last));
  await calc.run();
}
