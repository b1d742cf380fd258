// The overlap timeline and MFU: a thin view over pylib.web.parallel_ops.overlap_view and mfu_here
// (pylib.systems.overlap). The two sliders are read on a log scale; pylib does every sum.

import { invalidMarker, readConfig, readoutMap, showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";
import { el } from "./parallel-svg.js";

const FIELDS = ["alpha_us", "workers", "gflops", "peak_gflops", "layers", "width"];
const secs = (t) => (t >= 1 ? `${t.toPrecision(3)} s` : t >= 1e-3 ? `${(t * 1e3).toPrecision(3)} ms` : `${(t * 1e6).toPrecision(3)} µs`);

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const mfuButton = $('[data-action="mfu"]');
  const svg = $('[data-role="timeline"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => form.elements[n]);
  form.elements.bw_log.value = String(Math.log10(config.bw_gbs > 0 ? config.bw_gbs : 1));
  form.elements.bucket_log.value = String(Math.log10(config.bucket_kb));
  const bucketKb = () => 10 ** Number(form.elements.bucket_log.value);
  const bwGbs = () => 10 ** Number(form.elements.bw_log.value);
  const showSliders = () => {
    $('[data-role="bucket-out"]').textContent = `${bucketKb().toPrecision(3)} KB`;
    $('[data-role="bw-out"]').textContent = `${bwGbs().toPrecision(3)} GB/s`;
  };

  const drawTimeline = (r) => {
    svg.replaceChildren();
    // As wide as the chart on the page (360-640 units), so that its labels stay legible on a narrow page.
    const W = Math.round(Math.max(360, Math.min(640, svg.getBoundingClientRect().width || 640)));
    svg.setAttribute("viewBox", `0 0 ${W} 120`);
    const L = 70, end = Math.max(r.step, r.no_overlap > r.step ? r.step : r.step) || 1;
    const x = (t) => L + (t / end) * (W - L - 10);
    el("text", { x: 4, y: 34, class: "muted" }, svg, "compute");
    el("text", { x: 4, y: 74, class: "muted" }, svg, "link");
    el("rect", { x: x(0), y: 20, width: Math.max(0.5, x(r.forward) - x(0)), height: 22, class: "forward" }, svg);
    for (const [layer, a, b] of r.compute) {
      el("rect", { x: x(a), y: 20, width: Math.max(0.5, x(b) - x(a) - 0.5), height: 22, class: "compute" }, svg);
      if (x(b) - x(a) > 16) el("text", { x: (x(a) + x(b)) / 2, y: 35, "text-anchor": "middle", fill: "#fff" }, svg, `L${layer}`);
    }
    for (const [k, , a, b] of r.comm) el("rect", { x: x(a), y: 60, width: Math.max(0.5, x(b) - x(a) - 0.5), height: 22, class: "comm", "data-bucket": k }, svg);
    if (r.exposed > 0) el("rect", { x: x(r.backward_end), y: 14, width: Math.max(0.5, x(r.step) - x(r.backward_end)), height: 74, class: "exposed" }, svg);
    el("text", { x: L, y: 108, class: "muted" }, svg, W < 560 ? `0 … ${secs(end)}; exposed in red`
      : `0 … ${secs(end)}: forward (pale), backward per layer, then what is exposed (red)`);
  };

  if (!(await startPython(client, setStatus, [runButton, mfuButton]))) return;
  let sequence = 0;
  async function draw() {
    const mine = ++sequence;
    showSliders();
    root.dataset.status = "running";
    try {
      const args = Object.fromEntries(FIELDS.map((f) => [f, form.elements[f].value]));
      args.bucket_kb = bucketKb();
      args.bandwidth_gbs = bwGbs();
      const r = await client.call("parallel_overlap", args);
      if (mine !== sequence) return;
      markInvalid(null);
      drawTimeline(r);
      readouts.step.textContent = secs(r.step);
      readouts.exposed.textContent = `${secs(r.exposed)} of ${secs(r.comm_total)} communication`;
      readouts.no_overlap.textContent = secs(r.no_overlap);
      readouts.buckets.textContent = String(r.buckets);
      readouts.mfu.textContent = `${(100 * r.mfu).toPrecision(3)}% (${(100 * r.mfu_no_comm).toPrecision(3)}% with no communication)`;
      root.dataset.result = JSON.stringify({ args, step: r.step, exposed: r.exposed, mfu: r.mfu, buckets: r.buckets });
      setStatus("done", r.exposed > 0 ? `${secs(r.exposed)} of communication is exposed: the step takes that much longer than its compute.`
        : "All communication hides behind the backward pass.");
    } catch (err) {
      if (mine !== sequence) return;
      delete root.dataset.result;
      svg.replaceChildren();
      showRunError(err, setStatus, markInvalid);
    }
  }
  let timer = null;
  for (const name of ["bucket_log", "bw_log"]) form.elements[name].addEventListener("input", () => { showSliders(); clearTimeout(timer); timer = setTimeout(draw, 60); });
  form.addEventListener("submit", (e) => { e.preventDefault(); draw(); });
  mfuButton.addEventListener("click", async () => {
    mfuButton.disabled = true;
    readouts.mfu_page.textContent = "measuring…";
    try {
      const m = await client.call("parallel_mfu", {});
      readouts.mfu_page.textContent = `${(100 * m.mfu).toPrecision(3)}%: ${m.model_gflops.toPrecision(3)} GFLOP/s of model FLOPs (a step of ${m.step_ms.toPrecision(3)} ms) against a ${m.peak_gflops.toPrecision(3)} GFLOP/s matmul peak, both measured in this page`;
      root.dataset.mfu = JSON.stringify(m);
    } catch (err) {
      readouts.mfu_page.textContent = `failed: ${err.message}`;
    } finally {
      mfuButton.disabled = false;
    }
  });
  runButton.disabled = false;
  mfuButton.disabled = false;
  await draw();
}
