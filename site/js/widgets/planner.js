// The layout planner: a thin view over planner_runs and planner_plan (pylib.web.model_parallel_ops ->
// pylib.systems.planner). Every change plans again; the newest answer wins; a bad field gets its
// message under it.

import { describe, fillTable, frameOf } from "../plot.js";
import { bindFields, calculator, readoutMap } from "../widget-kit.js";

// Each part's series colour (the sN classes of site/css/widgets/kit.css): distinct within a bar.
const MEM = [["weights", 1], ["gradients", 6], ["optimizer", 5], ["activations", 2]];
const TIME = [["compute", 3], ["bubble", 8], ["tensor_parallel", 4], ["context_parallel", 5], ["pipeline_p2p", 6], ["data_parallel", 1]];
const LABEL = { compute: "compute", bubble: "bubble", tensor_parallel: "TP all-reduces", context_parallel: "CP passes",
  pipeline_p2p: "PP sends", data_parallel: "DP all-reduce", weights: "weights", gradients: "gradients",
  optimizer: "optimiser state", activations: "activations" };
const LOADED = ["gpus", "tp", "pp", "cp", "global_batch", "micro_batch", "chunks"];

const node = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
};

/** One bar of parts (name, value, series) scaled to total, with its title and legend. */
function bar(title, parts, total, fmt) {
  const wrap = node("div", "mp-bar-block");
  const row = node("div", "mp-bar");
  const legend = node("ul", "chart-legend");
  for (const [name, value, n] of parts) {
    const seg = node("span", `s${n}`);
    seg.style.width = `${Math.max(0, (100 * value) / total)}%`;
    seg.title = `${LABEL[name]}: ${fmt(value)}`;
    row.appendChild(seg);
    const li = node("li");
    li.append(node("span", `kit-swatch area s${n}`), LABEL[name]);
    legend.appendChild(li);
  }
  wrap.append(node("p", "mp-bar-title", title), row, legend);
  return wrap;
}

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const readouts = readoutMap(root);
  const bars = $('[data-role="bars"]');
  let runs = [], t0 = 0;

  const fields = bindFields(root, { onSlide: () => calc.schedule() });
  const select = fields.input("run");

  function drawBars(p) {
    const m = p.memory_gb;
    const gb = (v) => `${v.toPrecision(3)} GB`, s = (v) => `${v.toPrecision(3)} s`;
    const timeTotal = Object.values(p.time).reduce((a, b) => a + b, 0);
    bars.replaceChildren(
      bar(`memory per GPU: ${m.total.toFixed(1)} of ${p.gpu_memory_gb} GB`, MEM.map(([k, n]) => [k, m[k], n]), Math.max(m.total, p.gpu_memory_gb), gb),
      bar(`step time: ${p.step_seconds.toPrecision(3)} s`, TIME.map(([k, n]) => [k, p.time[k], n]), timeTotal, s),
    );
    const frame = frameOf(bars);
    fillTable(frame, ["part", "amount", "share of its bar"], [
      ...MEM.map(([k]) => [`${LABEL[k]} (memory)`, gb(m[k]), `${((100 * m[k]) / m.total).toFixed(1)}%`]),
      ...TIME.map(([k]) => [`${LABEL[k]} (time)`, s(p.time[k]), `${((100 * p.time[k]) / timeTotal).toFixed(1)}%`]),
    ]);
    describe(frame, `Memory per GPU: ${MEM.map(([k]) => `${LABEL[k]} ${gb(m[k])}`).join(", ")}; ${m.total.toFixed(1)} GB in all, ` +
      `${p.fits ? "within" : "more than"} the GPU's ${p.gpu_memory_gb} GB. Step time: ` +
      `${TIME.map(([k]) => `${LABEL[k]} ${s(p.time[k])}`).join(", ")}.`);
  }

  const calc = calculator(root, client, {
    op: "planner_plan",
    fields,
    args() {
      t0 = performance.now();
      return { ...fields.values(), sequence_parallel: fields.input("sequence_parallel").checked };
    },
    onResult(p) {
      const ms = performance.now() - t0;
      const m = p.memory_gb;
      readouts.memory.textContent = `${m.total.toFixed(1)} GB of ${p.gpu_memory_gb} GB` + (p.fits ? "" : " — does not fit");
      readouts.bubble.textContent = `${p.microbatches}; ${(100 * p.bubble_over_ideal).toFixed(1)}%`;
      readouts.step.textContent = `${p.step_seconds.toPrecision(3)} s`;
      const tflops = p.metric === "hardware_tflops_per_gpu" ? p.hardware_tflops_per_gpu : p.model_tflops_per_gpu;
      readouts.mfu.textContent = `${tflops.toFixed(0)} TFLOP/s; MFU ${(100 * p.mfu).toFixed(1)}%`;
      readouts.mfu.title = p.metric === "hardware_tflops_per_gpu" ? "FLOPs counted with the recomputed forward, as Narayanan et al. count them" : "model FLOPs, as Llama 3 counts them";
      const c = p.comm_gb;
      readouts.comm.textContent = `TP ${c.tensor_parallel.toPrecision(3)}, PP ${c.pipeline.toPrecision(3)}, ` +
        `CP ${c.context_parallel.toPrecision(3)}, DP ${c.data_parallel.toPrecision(3)} GB`;
      drawBars(p);
      return {
        result: { run: p.run, dp: p.dp, memory_total_gb: m.total, fits: p.fits, microbatches: p.microbatches,
          bubble_over_ideal: p.bubble_over_ideal, step_seconds: p.step_seconds, mfu: p.mfu, tflops, ms },
        text: `${p.run}: DP ${p.dp}, a step of ${p.step_seconds.toPrecision(3)} s at ${(100 * p.mfu).toFixed(1)}% MFU` +
          (p.fits ? "." : `, but ${m.total.toFixed(1)} GB per GPU does not fit in ${p.gpu_memory_gb} GB.`),
      };
    },
  });

  function load(name) {
    const r = runs.find((x) => x.name === name);
    for (const k of LOADED) fields.set(k, r[k]);
    fields.set("dp", "auto");
    fields.input("recompute").value = r.recompute;
    fields.input("sequence_parallel").checked = r.sequence_parallel;
  }

  // typing plans again once the keys pause; a select or the checkbox at once
  fields.form.addEventListener("input", (event) => {
    const t = event.target;
    if (t.dataset.sliderFor || t === select) return; // sliders: onSlide; the run: its change event
    if (t.tagName === "SELECT" || t.type === "checkbox") calc.schedule();
    else calc.soon(60);
  });
  select.addEventListener("change", () => { load(select.value); calc.schedule(); });

  const ok = await calc.ready(async () => { runs = (await client.call("planner_runs", {})).runs; });
  if (!ok) return;
  for (const r of runs) {
    const option = document.createElement("option");
    option.value = r.name;
    option.textContent = `${r.name} (${r.source})`;
    select.appendChild(option);
  }
  const tbody = $('[data-role="table"] tbody');
  for (const r of runs) {
    const tr = document.createElement("tr");
    const cells = [r.name, `${r.dp}×${r.tp}×${r.pp}` + (r.cp > 1 ? `×${r.cp}` : ""), String(r.reported_tflops),
      r.predicted_tflops.toFixed(0), `${(100 * r.error).toFixed(1)}%`, r.calibration ? "fitted" : "predicted"];
    cells.forEach((c, i) => tr.appendChild(node(i === 0 ? "th" : "td", null, c)));
    tr.firstChild.scope = "row";
    tbody.appendChild(tr);
  }
  select.value = runs[6].name;
  load(select.value);
  await calc.run();
}
