// Activation memory through one step, animated: a thin view over pylib.web.memory_ops's memory_timeline op
// (pylib.systems.checkpointing.timeline). pylib runs the step and counts the bytes; this only draws them.

import { describe as describeFrame, fillTable, frameOf, onResize, svgCanvas, svgEl as el, svgText as text } from "../plot.js";
import { bindFields, calculator, readoutMap } from "../widget-kit.js";
import { fmtBytes } from "./memory-calculator.js";

const MODES = [["none", "no recomputation"], ["selective", "selective (attention recomputed)"], ["full", "full (each block recomputed)"]];
const PHASE = { forward: "s1", recompute: "s2", backward: "s8" }; // the legend's swatches

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const readouts = readoutMap(root);
  const svg = $('[data-role="chart"]');
  const frame = frameOf(svg);
  const scrub = $('[data-role="scrub"]');
  const playButton = $('[data-action="play"]');
  const stepButton = $('[data-action="step"]');
  const backButton = $('[data-action="back"]');
  const now = $('[data-role="now"]');
  const waiting = $('[data-role="chart-summary"]').textContent; // the placeholder sentence
  let data = null;
  let index = 0;
  let timer = null;

  const maxEvents = () => Math.max(...MODES.map(([m]) => data.modes[m].events.length));

  function draw() {
    if (!data) { svg.replaceChildren(); return; }
    const rowH = 120, top = 22, L = 8, R = 8;
    const { W } = svgCanvas(svg, MODES.length * (rowH + top) + 8);
    const n = maxEvents();
    const ymax = Math.max(...MODES.map(([m]) => data.modes[m].peak)) || 1;
    const bw = (W - L - R) / n;
    MODES.forEach(([mode, label], row) => {
      const d = data.modes[mode];
      const y0 = row * (rowH + top) + top;
      el("rect", { x: L, y: y0, width: W - L - R, height: rowH, class: "at-frame" }, svg);
      const title = text(svg, L + 4, y0 - 6, `${label}: peak ${fmtBytes(d.peak)}`, { cls: "kit-label at-title" });
      if (title.getComputedTextLength() > W - L - R - 4) title.textContent = `${mode}: peak ${fmtBytes(d.peak)}`;
      d.events.forEach((e, i) => {
        const h = (rowH - 4) * (e.held / ymax);
        el("rect", { x: L + i * bw, y: y0 + rowH - h, width: Math.max(bw - 1, 1), height: h,
          class: `kit-area ${PHASE[e.phase] || "s8"}${i > index ? " at-future" : ""}` }, svg);
      });
      const p = d.peak_index;
      const px = L + (p + 0.5) * bw, py = y0 + rowH - (rowH - 4) * (d.peak / ymax);
      if (p <= index) {
        el("circle", { cx: px, cy: Math.max(py, y0 + 6), r: 6, class: "at-peak" }, svg);
        const who = d.set_by ? `${d.set_by[0]} (${fmtBytes(d.set_by[1])})` : "";
        const ly = Math.max(py, y0 + 6) + 16;
        const label = text(svg, Math.min(px + 9, W - R - 4), ly, `peak, set by ${who}`,
          { cls: "at-peak-label", anchor: px > W * 0.55 ? "end" : "start" });
        // Keep the label inside the frame: the other side of the ring if it sticks out, on its own
        // line below the frame's top if it sticks out on both sides (a narrow page).
        const fits = () => { const b = label.getBBox(); return b.x >= L && b.x + b.width <= W - R; };
        if (!fits()) { label.setAttribute("text-anchor", px > W * 0.55 ? "start" : "end");
          label.setAttribute("x", px > W * 0.55 ? Math.max(px + 9, L + 4) : Math.max(px - 9, L + 4)); }
        if (!fits()) { label.setAttribute("text-anchor", "start"); label.setAttribute("x", L + 4);
          label.setAttribute("y", y0 + 16); label.textContent = `peak: ${who}`; }
      }
      const cx = L + (Math.min(index, d.events.length - 1) + 0.5) * bw;
      el("line", { x1: cx, x2: cx, y1: y0, y2: y0 + rowH, class: "at-cursor" }, svg);
    });
  }

  // The text alternative: the peaks in a sentence, every event of every mode in the table.
  function describeChart() {
    if (!data) {
      describeFrame(frame, waiting);
      fillTable(frame, ["event"], []);
      return;
    }
    describeFrame(frame, `One step of ${data.n_layer} layer${data.n_layer > 1 ? "s" : ""}, ${data.batch_size} × ${data.seq_len} tokens. Peak bytes held: ` +
      MODES.map(([m]) => `${m} ${fmtBytes(data.modes[m].peak)}` + (data.modes[m].set_by ? ` (set by ${data.modes[m].set_by[0]})` : "")).join("; ") +
      `. ${MODES.map(([m]) => `${m}: ${data.modes[m].events.length} events`).join(", ")}.`);
    const rows = [];
    for (let i = 0; i < maxEvents(); i++) {
      const row = [i + 1];
      for (const [m] of MODES) {
        const e = data.modes[m].events[i];
        row.push(e ? `${e.phase} ${e.what}` : "–", e ? e.held : null);
      }
      rows.push(row);
    }
    fillTable(frame, ["event", ...MODES.flatMap(([m]) => [`${m}: operation`, `${m}: bytes held`])], rows);
  }

  function describeNow() {
    if (!data) { now.textContent = ""; return; }
    const parts = MODES.map(([mode]) => {
      const evs = data.modes[mode].events;
      const e = evs[Math.min(index, evs.length - 1)];
      const sign = e.change >= 0 ? "+" : "−";
      return `${mode}: ${e.phase} ${e.what} (${sign}${fmtBytes(Math.abs(e.change))}) → ${fmtBytes(e.held)} held`;
    });
    now.textContent = `Event ${index + 1} of ${maxEvents()}. ` + parts.join("; ");
  }

  function show(i) {
    index = Math.max(0, Math.min(i, maxEvents() - 1));
    scrub.value = String(index);
    scrub.setAttribute("aria-valuetext", `event ${index + 1} of ${maxEvents()}`);
    root.dataset.index = String(index);
    draw();
    describeNow();
  }

  function stopPlaying() {
    if (timer) clearInterval(timer);
    timer = null;
    playButton.textContent = "Play";
  }

  const controls = [playButton, stepButton, backButton, scrub];
  const enableControls = (on) => { for (const c of controls) c.disabled = !on; };

  const fields = bindFields(root, { onCommit: () => calc.run() }); // a slider let go: run the step again
  const calc = calculator(root, client, {
    op: "memory_timeline",
    fields,
    runningText: "Running one step in each mode…",
    onError() {
      stopPlaying();
      data = null;
      enableControls(false);
      for (const key of Object.keys(readouts)) readouts[key].textContent = "–";
      draw();
      describeNow();
      describeChart();
    },
    onResult(r) {
      stopPlaying();
      data = r;
      scrub.max = String(maxEvents() - 1);
      for (const [mode] of MODES) readouts[`peak_${mode}`].textContent = fmtBytes(r.modes[mode].peak);
      enableControls(true);
      show(maxEvents() - 1);
      describeChart();
      const agree = MODES.every(([m]) => r.modes[m].peak === r.modes[m].formula_peak && r.modes[m].stored === r.modes[m].formula_stored);
      return {
        result: Object.fromEntries(MODES.map(([m]) => [m, {
          peak: r.modes[m].peak, stored: r.modes[m].stored, set_by: r.modes[m].set_by, held: r.modes[m].events.map((e) => e.held),
          formula_peak: r.modes[m].formula_peak, formula_stored: r.modes[m].formula_stored }])),
        text: `${r.n_layer} layer${r.n_layer > 1 ? "s" : ""}, ${r.batch_size} × ${r.seq_len} tokens: peak ` +
          MODES.map(([m]) => `${m} ${fmtBytes(r.modes[m].peak)}`).join(", ") +
          (agree ? ". Each matches pylib.systems.memory.recompute_bytes to the byte." : ". (Not what the formula predicts.)") +
          " Press Play to step through it.",
      };
    },
  });

  playButton.addEventListener("click", () => {
    if (!data) return;
    if (timer) { stopPlaying(); return; }
    if (index >= maxEvents() - 1) show(0);
    playButton.textContent = "Pause";
    timer = setInterval(() => {
      if (index >= maxEvents() - 1) { stopPlaying(); return; }
      show(index + 1);
    }, 450);
  });
  stepButton.addEventListener("click", () => { stopPlaying(); if (data) show(index + 1); });
  backButton.addEventListener("click", () => { stopPlaying(); if (data) show(index - 1); });
  scrub.addEventListener("input", () => { stopPlaying(); if (data) show(Number(scrub.value)); });
  onResize(svg, draw); // drawn at its shown width: its text stays 12 px
  if (!(await calc.ready())) return;
  await calc.run();
}
