// The layout planner: a thin view over planner_runs and planner_plan (pylib.web.model_parallel_ops ->
// pylib.systems.planner). Every change plans again; the newest answer wins; bad fields are marked.

import { invalidMarker, readoutMap, showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const FIELDS = ["run", "gpus", "dp", "tp", "pp", "cp", "global_batch", "micro_batch", "chunks", "recompute"];
const MEM = [["weights", "#2a5db0"], ["gradients", "#6c8fd1"], ["optimizer", "#8e44ad"], ["activations", "#d9480f"]];
const TIME = [["compute", "#1b7a43"], ["bubble", "#bbb"], ["tensor_parallel", "#b45f06"], ["context_parallel", "#c0392b"],
  ["pipeline_p2p", "#7f8c8d"], ["data_parallel", "#2c3e50"]];
const LABEL = { compute: "compute", bubble: "bubble", tensor_parallel: "TP all-reduces", context_parallel: "CP passes",
  pipeline_p2p: "PP sends", data_parallel: "DP all-reduce", weights: "weights", gradients: "gradients",
  optimizer: "optimiser state", activations: "activations" };

function bar(node, parts, total) {
  node.replaceChildren();
  for (const [name, value, color] of parts) {
    const span = document.createElement("span");
    span.style.width = `${Math.max(0, (100 * value) / total)}%`;
    span.style.background = color;
    span.title = `${LABEL[name]}: ${value.toPrecision(3)}`;
    node.appendChild(span);
  }
}

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const select = $('[data-role="runs"]');
  if (!(await startPython(client, setStatus, [runButton]))) return;
  let runs;
  try {
    runs = (await client.call("planner_runs", {})).runs;
  } catch (err) {
    showRunError(err, setStatus, markInvalid);
    return;
  }
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
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = c;
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }
  const legend = $('[data-role="legend"]');
  for (const [name, color] of [...MEM, ...TIME]) {
    const li = document.createElement("li"), i = document.createElement("i");
    i.style.background = color;
    li.append(i, LABEL[name]);
    legend.appendChild(li);
  }

  function load(name) {
    const r = runs.find((x) => x.name === name);
    for (const k of ["gpus", "tp", "pp", "cp", "global_batch", "micro_batch", "chunks"]) form.elements[k].value = String(r[k]);
    form.elements.dp.value = "auto";
    form.elements.recompute.value = r.recompute;
    form.elements.sequence_parallel.checked = r.sequence_parallel;
    form.elements.tp_slider.value = String(Math.round(Math.log2(r.tp)));
    form.elements.pp_slider.value = String(Math.min(7, Math.round(Math.log2(r.pp))));
  }

  let seq = 0;
  async function update() {
    const mine = ++seq;
    const args = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value]));
    args.sequence_parallel = form.elements.sequence_parallel.checked;
    const t0 = performance.now();
    try {
      const p = await client.call("planner_plan", args);
      if (mine !== seq) return;
      markInvalid(null);
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
      readouts.ms.textContent = `${ms.toFixed(0)} ms`;
      bar($('[data-role="mem-bar"]'), MEM.map(([k, col]) => [k, m[k], col]), Math.max(m.total, p.gpu_memory_gb));
      const total = Object.values(p.time).reduce((a, b) => a + b, 0);
      bar($('[data-role="time-bar"]'), TIME.map(([k, col]) => [k, p.time[k], col]), total);
      root.dataset.result = JSON.stringify({ run: p.run, dp: p.dp, memory_total_gb: m.total, fits: p.fits,
        microbatches: p.microbatches, bubble_over_ideal: p.bubble_over_ideal, step_seconds: p.step_seconds,
        mfu: p.mfu, tflops, ms });
      setStatus("done", `${p.run}: DP ${p.dp}, a step of ${p.step_seconds.toPrecision(3)} s at ${(100 * p.mfu).toFixed(1)}% MFU` +
        (p.fits ? "." : `, but ${m.total.toFixed(1)} GB per GPU does not fit in ${p.gpu_memory_gb} GB.`));
    } catch (err) {
      if (mine !== seq) return;
      delete root.dataset.result;
      showRunError(err, setStatus, markInvalid);
    }
  }

  for (const name of ["tp", "pp"]) {
    form.elements[`${name}_slider`].addEventListener("input", (event) => {
      form.elements[name].value = String(2 ** Number(event.target.value));
    });
  }
  select.addEventListener("change", () => {
    load(select.value);
    update();
  });
  let timer = null;
  form.addEventListener("input", (event) => {
    if (event.target === select) return; // its change event loads the run's layout, then plans
    clearTimeout(timer);
    if (event.target.type === "range" || event.target.tagName === "SELECT" || event.target.type === "checkbox") update();
    else timer = setTimeout(update, 60);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    update();
  });
  select.value = runs[6].name;
  load(select.value);
  runButton.disabled = false;
  await update();
}
