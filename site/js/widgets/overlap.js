// The overlap timeline and MFU: a thin view over pylib.web.parallel_ops.overlap_view and mfu_here
// (pylib.systems.overlap). pylib does every sum; this only draws the intervals it returns.

import { describe, fillTable, frameOf, onResize, svgCanvas } from "../plot.js";
import { bindFields, calculator, readoutMap } from "../widget-kit.js";
import { el } from "./parallel-svg.js";

const secs = (t) => (t >= 1 ? `${t.toPrecision(3)} s` : t >= 1e-3 ? `${(t * 1e3).toPrecision(3)} ms` : `${(t * 1e6).toPrecision(3)} µs`);

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const readouts = readoutMap(root);
  const mfuButton = $('[data-action="mfu"]');
  const svg = $('[data-role="timeline"]');
  const frame = frameOf(svg);
  let last = null;
  let sent = null; // the fields of the latest call: the result shown is always that call's

  const drawTimeline = () => {
    const r = last;
    if (!r) { svg.replaceChildren(); return; }
    const { W } = svgCanvas(svg, 124);
    const L = 70, end = r.step || 1;
    const x = (t) => L + (t / end) * (W - L - 10);
    el("text", { x: 4, y: 35, class: "kit-label" }, svg, "compute");
    el("text", { x: 4, y: 75, class: "kit-label" }, svg, "link");
    el("rect", { x: x(0), y: 20, width: Math.max(0.5, x(r.forward) - x(0)), height: 22, class: "kit-area s6" }, svg);
    for (const [layer, a, b] of r.compute) {
      el("rect", { x: x(a), y: 20, width: Math.max(0.5, x(b) - x(a) - 0.5), height: 22, class: "kit-area s1" }, svg);
      if (x(b) - x(a) > 20) el("text", { x: (x(a) + x(b)) / 2, y: 35, "text-anchor": "middle", class: "kit-label par-on-bar" }, svg, `L${layer}`);
    }
    for (const [k, , a, b] of r.comm) el("rect", { x: x(a), y: 60, width: Math.max(0.5, x(b) - x(a) - 0.5), height: 22, class: "kit-area s4", "data-bucket": k }, svg);
    if (r.exposed > 0) el("rect", { x: x(r.backward_end), y: 14, width: Math.max(0.5, x(r.step) - x(r.backward_end)), height: 74, class: "par-exposed" }, svg);
    el("text", { x: L, y: 112, class: "kit-label" }, svg, W < 560 ? `0 … ${secs(end)}` : `0 … ${secs(end)}: forward, backward per layer, then what is exposed`);
  };

  // The text alternative: the step in a sentence, every interval in the table.
  const describeTimeline = (r) => {
    describe(frame, `Step time ${secs(r.step)}: forward ${secs(r.forward)}, the backward ends at ${secs(r.backward_end)}; ` +
      `${r.buckets} bucket${r.buckets === 1 ? "" : "s"} of all-reduce, ${secs(r.comm_total)} on the link, of which ${secs(r.exposed)} is exposed` +
      ` (without overlap the step would take ${secs(r.no_overlap)}).`);
    const rows = [["forward", 0, r.forward]];
    for (const [layer, a, b] of r.compute) rows.push([`backward, layer ${layer}`, a, b]);
    for (const [k, , a, b] of r.comm) rows.push([`all-reduce, bucket ${k}`, a, b]);
    if (r.exposed > 0) rows.push(["exposed", r.backward_end, r.step]);
    fillTable(frame, ["interval", "start (s)", "end (s)"], rows);
  };

  const fields = bindFields(root, { onSlide: () => calc.schedule() }); // redraw as a slider moves
  const calc = calculator(root, client, {
    op: "parallel_overlap",
    fields,
    args: () => (sent = fields.values()),
    checkArgs: () => fields.values(), // a check must not relabel the result on its way
    runningText: "Drawing…",
    onError() { last = null; drawTimeline(); },
    onResult(r) {
      last = r;
      drawTimeline();
      describeTimeline(r);
      readouts.step.textContent = secs(r.step);
      readouts.exposed.textContent = `${secs(r.exposed)} of ${secs(r.comm_total)} communication`;
      readouts.no_overlap.textContent = secs(r.no_overlap);
      readouts.buckets.textContent = String(r.buckets);
      readouts.mfu.textContent = `${(100 * r.mfu).toPrecision(3)}% (${(100 * r.mfu_no_comm).toPrecision(3)}% with no communication)`;
      return {
        result: { args: sent, step: r.step, exposed: r.exposed, mfu: r.mfu, buckets: r.buckets },
        text: r.exposed > 0 ? `${secs(r.exposed)} of communication is exposed: the step takes that much longer than its compute.`
          : "All communication hides behind the backward pass.",
      };
    },
  });
  mfuButton.addEventListener("click", async () => {
    mfuButton.disabled = true;
    readouts.mfu_page.textContent = "measuring…";
    try {
      const m = await client.call("parallel_mfu", {});
      readouts.mfu_page.textContent = `${(100 * m.mfu).toPrecision(3)}%: ${m.model_gflops.toPrecision(3)} GFLOP/s of model FLOPs (a step of ${m.step_ms.toPrecision(3)} ms) against a ${m.peak_gflops.toPrecision(3)} GFLOP/s matmul peak, both measured in this page` +
        (m.above_peak ? ". Above 100%: the machine was busier while the peak was timed than during the step, so this figure is not an MFU; measure again when it is quiet" : "");
      root.dataset.mfu = JSON.stringify(m);
      calc.setStatus.announcer.say(`MFU measured in this page: ${(100 * m.mfu).toPrecision(3)}%.`);
    } catch (err) {
      readouts.mfu_page.textContent = `failed: ${err.message}`;
    } finally {
      mfuButton.disabled = false;
      if (document.activeElement === document.body) mfuButton.focus(); // it was pressed: keep focus on it
    }
  });
  onResize(svg, drawTimeline); // drawn at its shown width: its text stays 12 px
  if (!(await calc.ready())) return;
  mfuButton.disabled = false;
  await calc.run();
}
