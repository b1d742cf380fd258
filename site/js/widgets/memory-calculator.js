// The training-memory calculator: a thin view over pylib.web.memory_ops's memory_calc op
// (pylib.systems.memory.training_memory). It only draws; reader input is validated in pylib.

import { bindFields, calculator, readoutMap } from "../widget-kit.js";
import { onResize } from "../plot.js";
import { drawChart } from "./init-plot.js";

// Each part's series colour (var(--series-N), the same sN classes as the legend's swatches).
const PARTS = [["weights", 1], ["gradients", 3], ["optimizer", 2], ["activations", 5]];
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
  const $ = (sel) => root.querySelector(sel);
  const readouts = readoutMap(root);
  const set = (key, text) => { readouts[key].textContent = text; };
  const presetButtons = [...root.querySelectorAll("[data-preset]")];
  const growth = $('[data-role="chart-growth"]');
  let presets = {};
  let last = null;

  function drawStack(mem) {
    const stack = $('[data-role="stack"]');
    stack.replaceChildren();
    for (const [key, n] of PARTS) {
      const share = mem.total > 0 ? mem[key] / mem.total : 0;
      const seg = document.createElement("div");
      seg.className = `mem-seg mem-${key} s${n}`;
      seg.dataset.part = key;
      seg.style.flexGrow = String(share);
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
      if (text.textContent && text.scrollWidth > seg.clientWidth) text.textContent = fmtBytes(mem[seg.dataset.part]);
      if (text.textContent && text.scrollWidth > seg.clientWidth) text.textContent = "";
    }
  }

  function drawGrowth(r) {
    const g = r.growth;
    // Parts with the same bytes at every length (the weights, their gradients and a momentum buffer, in
    // one precision) would hide one another's lines: each is drawn wider than the next, so all show.
    const same = (a, b) => a.length === b.length && a.every((v, k) => v === b[k]);
    const groups = [];
    for (const [key] of PARTS) {
      const group = groups.find((keys) => same(g[keys[0]], g[key]));
      if (group) group.push(key);
      else groups.push([key]);
    }
    const later = (key) => { const keys = groups.find((k) => k.includes(key)); return keys.length - 1 - keys.indexOf(key); };
    const series = PARTS.map(([key, n]) => ({ xs: g.seq_len, ys: g[key], color: n, name: key, label: `${NAMES[key]} (bytes)`, width: 2 + 4 * later(key) }));
    const list = (keys) => keys.map((k) => `the ${NAMES[k]}`).join(", ").replace(/, ([^,]*)$/, " and $1");
    const overlaps = groups.filter((keys) => keys.length > 1)
      .map((keys) => ` ${list(keys).replace(/^t/, "T")} take the same bytes at every length: their lines lie on one another, each drawn wider than the next.`);
    series.push({ xs: g.seq_len, ys: g.total, color: "fg", dash: "5 4", width: 1.5, name: "total", label: "total (bytes)" });
    series.push({ xs: [r.seq_len], ys: [r.memory.total], color: "fg", dots: true, name: "yours", label: "your setting" });
    const i = g.seq_len.indexOf(r.seq_len);
    drawChart(growth, series, {
      xlog: true, ylog: true, xlabel: "sequence length (tokens)", ylabel: "bytes per device",
      summary: `From ${g.seq_len[0].toLocaleString("en")} to ${g.seq_len[g.seq_len.length - 1].toLocaleString("en")} tokens the ` +
        `activations grow from ${fmtBytes(g.activations[0])} to ${fmtBytes(g.activations[g.activations.length - 1])}, ` +
        `the total from ${fmtBytes(g.total[0])} to ${fmtBytes(g.total[g.total.length - 1])}; the weights stay at ${fmtBytes(g.weights[0])}.` +
        (i >= 0 ? ` At your ${r.seq_len.toLocaleString("en")} tokens: ${fmtBytes(g.total[i])}.` : "") +
        overlaps.join(""),
    });
  }

  function clear() {
    for (const key of Object.keys(readouts)) set(key, "–");
    $('[data-role="stack"]').replaceChildren();
    last = null;
    drawChart(growth, [], { empty: "nothing to draw: fix the input above", summary: "Nothing drawn: the input above has an error." });
  }

  const fields = bindFields(root, {
    onSlide: () => calc.schedule(), // recompute as the slider moves (latest wins; announced at most every few seconds)
  });
  const calc = calculator(root, client, {
    op: "memory_calc",
    fields,
    busy: presetButtons,
    onError: clear, // the figures on show were for other input
    onResult(r) {
      last = r;
      const m = r.memory;
      set("params", fmtCount(r.params));
      for (const key of ["weights", "gradients", "optimizer", "activations", "activations_peak", "total"]) set(key, fmtBytes(m[key]));
      const b = r.bytes_per_param;
      set("bpp", `${b.weights} + ${b.gradients} + ${b.moments}${b.master ? ` + ${b.master} master` : ""} = ${b.total}`);
      drawStack(m);
      drawGrowth(r);
      const biggest = PARTS.map(([k]) => k).reduce((a, k) => (m[k] > m[a] ? k : a), "weights");
      return {
        result: { params: r.params, memory: m, seq_len: r.seq_len, growth: r.growth },
        text: `${fmtCount(r.params)} parameters; ${fmtBytes(m.total)} per device, the largest part ${NAMES[biggest]} ` +
          `(${fmtBytes(m[biggest])}). Activations are for one micro-batch of ${r.micro_batch} × ${r.seq_len} tokens.`,
      };
    },
  });
  for (const name of ["arch", "attention", "precision", "recompute", "optimizer"]) fields.input(name).addEventListener("change", () => calc.schedule());

  if (!(await calc.ready(async () => { presets = await client.call("memory_presets", {}); }))) return;
  for (const button of presetButtons) {
    button.addEventListener("click", async () => {
      const values = presets[button.dataset.preset];
      if (!values) return;
      for (const [name, value] of Object.entries(values)) fields.set(name, value);
      await calc.run();
    });
  }
  onResize(growth, () => last && drawGrowth(last)); // drawn at its shown width: text stays 12 px
  await calc.run();
}
