// The pipeline Gantt chart: a thin view over pipeline_schedule (pylib.web.model_parallel_ops ->
// pylib.systems.pipeline.simulate_pipeline). Every slider drag or keystroke asks Python for the
// schedule again; the newest answer wins. A bad field is marked and explained; the last good chart stays.

import { invalidMarker, readoutMap, showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const FIELDS = ["schedule", "stages", "microbatches", "chunks", "ratio"];
const SLIDERS = ["stages", "microbatches", "chunks", "ratio"];
const SVG = "http://www.w3.org/2000/svg";

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

const pct = (x) => `${(100 * x).toFixed(1)}%`;

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const chart = $('[data-role="chart"]');
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  let seq = 0;

  function draw(r) {
    const p = r.stages, v = r.chunks;
    const width = 760, left = 58, right = 8, top = 6, rowH = Math.max(14, Math.min(30, 240 / p)), axisH = 22;
    const height = top + p * rowH + axisH;
    const scale = (width - left - right) / r.makespan;
    const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `${r.name}: ${p} stages, ${r.microbatches} microbatches` });
    for (let s = 0; s < p; s++) {
      el("rect", { class: "idle", x: left, y: top + s * rowH + 1, width: width - left - right, height: rowH - 2 }, svg);
      const t = el("text", { x: 4, y: top + s * rowH + rowH / 2 + 3 }, svg);
      t.textContent = `stage ${s + 1}`;
    }
    const fontOk = rowH >= 12;
    for (let i = 0; i < r.start.length; i++) {
      const x = left + r.start[i] * scale, w = (r.end[i] - r.start[i]) * scale, y = top + r.stage[i] * rowH + 1;
      const light = v > 1 ? 40 + (30 * r.chunk[i]) / (v - 1) : 45;
      const fill = r.kind[i] === "F" ? `hsl(215, 60%, ${light}%)` : `hsl(28, 85%, ${light + 5}%)`;
      el("rect", { x, y, width: Math.max(w - 0.6, 0.4), height: rowH - 2, fill }, svg);
      if (fontOk && w > 11) {
        const t = el("text", { x: x + w / 2, y: y + rowH / 2 + 2, "text-anchor": "middle", fill: "#fff" }, svg);
        t.textContent = String(r.mb[i] + 1);
      }
    }
    const axis = el("g", { class: "axis" }, svg);
    const ticks = 8;
    for (let k = 0; k <= ticks; k++) {
      const tv = (r.makespan * k) / ticks;
      const t = el("text", { x: left + tv * scale, y: height - 6, "text-anchor": k === 0 ? "start" : k === ticks ? "end" : "middle" }, axis);
      t.textContent = tv.toFixed(tv < 10 ? 1 : 0);
    }
    chart.replaceChildren(svg);
  }

  if (!(await startPython(client, setStatus, [runButton]))) return;

  async function update() {
    const mine = ++seq;
    const args = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value]));
    const t0 = performance.now();
    try {
      const r = await client.call("pipeline_schedule", args);
      if (mine !== seq) return; // a newer drag is on its way
      markInvalid(null);
      draw(r);
      const ms = performance.now() - t0;
      readouts.of_total.textContent = pct(r.bubble_fraction);
      readouts.formula_of_total.textContent = pct(r.formula_of_total);
      readouts.over_ideal.textContent = pct(r.bubble_over_ideal);
      readouts.formula_over_ideal.textContent = pct(r.formula_over_ideal);
      readouts.peak.textContent = `${+r.peak_activations[0].toFixed(3)} microbatches`;
      readouts.ms.textContent = `${ms.toFixed(0)} ms`;
      root.dataset.result = JSON.stringify({ schedule: r.schedule, stages: r.stages, microbatches: r.microbatches,
        chunks: r.chunks, ratio: r.ratio, makespan: r.makespan, bubble_fraction: r.bubble_fraction,
        bubble_over_ideal: r.bubble_over_ideal, formula_of_total: r.formula_of_total,
        formula_over_ideal: r.formula_over_ideal, peak_in_flight: r.peak_in_flight, events: r.start.length, ms });
      setStatus("done", `${r.name}, ${r.stages} stages × ${r.microbatches} microbatches` +
        (r.chunks > 1 ? ` × ${r.chunks} chunks` : "") + `: the devices idle ${pct(r.bubble_fraction)} of the time.`);
    } catch (err) {
      if (mine !== seq) return;
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    }
  }

  for (const name of SLIDERS) {
    form.elements[`${name}_slider`].addEventListener("input", (event) => {
      event.stopPropagation();
      form.elements[name].value = event.target.value;
      update();
    });
  }
  let timer = null;
  form.addEventListener("input", (event) => {
    if (event.target.type === "range") return;
    clearTimeout(timer);
    timer = setTimeout(update, 60);
  });
  form.addEventListener("change", (event) => {
    if (event.target.name === "schedule") {
      clearTimeout(timer);
      update();
    }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    update();
  });
  runButton.disabled = false;
  await update();
}
