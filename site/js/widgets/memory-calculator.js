// The training-memory calculator: a thin view over pylib.web.memory_ops's memory_calc op
// (pylib.systems.memory.training_memory). It only draws; reader input is validated in pylib.

import { invalidMarker, showRunError, readoutMap, startPython, statusSetter, widgetParts } from "../widget-kit.js";
import { drawChart } from "./init-plot.js";

const FIELDS = ["arch", "seq_len", "micro_batch", "n_layer", "n_embd", "n_head", "vocab_size", "ffn_hidden",
  "precision", "recompute", "optimizer"];
const PARTS = [["weights", "#2a5db0"], ["gradients", "#1b7a43"], ["optimizer", "#d9480f"], ["activations", "#7b3fa0"]];
const NAMES = { weights: "weights", gradients: "gradients", optimizer: "optimiser state", activations: "activations" };

// Bytes as the page shows them: binary units (GiB = 2^30 bytes), three significant figures.
export function fmtBytes(b) {
  if (b == null || !Number.isFinite(b)) return "–";
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"];
  let i = 0;
  let v = b;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${Math.round(v)} bytes` : `${v.toPrecision(3)} ${units[i]}`;
}

const fmtCount = (n) => (n >= 1e15 ? n.toExponential(3) : Math.round(n).toLocaleString("en-US"));

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const set = (key, text) => { readouts[key].textContent = text; };
  const presetButtons = [...root.querySelectorAll("[data-preset]")];
  let presets = {};

  function drawStack(mem) {
    const stack = $('[data-role="stack"]');
    stack.replaceChildren();
    for (const [key, color] of PARTS) {
      const share = mem.total > 0 ? mem[key] / mem.total : 0;
      const seg = document.createElement("div");
      seg.className = `mem-seg mem-${key}`;
      seg.style.flexGrow = String(share);
      seg.style.background = color;
      seg.title = `${NAMES[key]}: ${fmtBytes(mem[key])} (${(100 * share).toFixed(1)}%)`;
      const text = document.createElement("span");
      text.textContent = share >= 0.08 ? `${NAMES[key]} ${fmtBytes(mem[key])}` : "";
      seg.appendChild(text);
      stack.appendChild(seg);
    }
    // On a narrow page a label that does not fit its segment is shortened to the size, then dropped
    // (the legend and each segment's tooltip still name it), rather than shown cut off.
    for (const seg of stack.children) {
      const text = seg.firstChild;
      const key = seg.className.replace("mem-seg mem-", "");
      if (text.textContent && text.scrollWidth > seg.clientWidth) text.textContent = fmtBytes(mem[key]);
      if (text.textContent && text.scrollWidth > seg.clientWidth) text.textContent = "";
    }
  }

  function drawGrowth(r) {
    const g = r.growth;
    const series = PARTS.map(([key, color]) => ({ xs: g.seq_len, ys: g[key], color, name: key }));
    series.push({ xs: g.seq_len, ys: g.total, color: "#222", dash: "5 4", width: 1.5, name: "total" });
    series.push({ xs: [r.seq_len], ys: [r.memory.total], color: "#222", dots: true, name: "yours" });
    drawChart($('[data-role="chart-growth"]'), series, {
      xlog: true, ylog: true, xlabel: "sequence length (tokens)", ylabel: "bytes per device",
    });
  }

  function clear() {
    for (const key of Object.keys(readouts)) set(key, "–");
    $('[data-role="stack"]').replaceChildren();
    drawChart($('[data-role="chart-growth"]'), [], { empty: "nothing to draw: fix the input above" });
  }

  async function compute() {
    const args = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value]));
    markInvalid(null);
    delete root.dataset.result;
    setStatus("running", "Computing…");
    try {
      const r = await client.call("memory_calc", args);
      const m = r.memory;
      set("params", fmtCount(r.params));
      for (const key of ["weights", "gradients", "optimizer", "activations", "total"]) set(key, fmtBytes(m[key]));
      const b = r.bytes_per_param;
      set("bpp", `${b.weights} + ${b.gradients} + ${b.moments}${b.master ? ` + ${b.master} master` : ""} = ${b.total}`);
      drawStack(m);
      drawGrowth(r);
      root.dataset.result = JSON.stringify({ params: r.params, memory: m, seq_len: r.seq_len, growth: r.growth });
      const biggest = PARTS.map(([k]) => k).reduce((a, k) => (m[k] > m[a] ? k : a), "weights");
      setStatus("done", `${fmtCount(r.params)} parameters; ${fmtBytes(m.total)} per device, the largest part ${NAMES[biggest]} ` +
        `(${fmtBytes(m[biggest])}). Activations are for one micro-batch of ${r.micro_batch} × ${r.seq_len} tokens.`);
    } catch (err) {
      clear();  // the figures above were for other input
      showRunError(err, setStatus, markInvalid);
    }
  }

  if (!(await startPython(client, setStatus, [runButton, ...presetButtons]))) return;
  try {
    presets = await client.call("memory_presets", {});
  } catch (err) {
    setStatus("error", err.message);
    return;
  }
  const busy = (on) => { for (const b of [runButton, ...presetButtons]) b.disabled = on; };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    busy(true);
    try { await compute(); } finally { busy(false); }
  });
  for (const button of presetButtons) {
    button.addEventListener("click", async () => {
      const values = presets[button.dataset.preset];
      if (!values) return;
      for (const [name, value] of Object.entries(values)) form.elements[name].value = String(value);
      busy(true);
      try { await compute(); } finally { busy(false); }
    });
  }
  await compute();
  busy(false);
}
