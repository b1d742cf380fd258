// Activation memory through one step, animated: a thin view over pylib.web.memory_ops's memory_timeline op
// (pylib.systems.checkpointing.timeline). pylib runs the step and counts the bytes; this only draws them.

import { invalidMarker, showRunError, readoutMap, startPython, statusSetter, widgetParts } from "../widget-kit.js";
import { fmtBytes } from "./memory-calculator.js";

const FIELDS = ["n_layer", "batch_size", "seq_len"];
const MODES = [["none", "no recomputation"], ["selective", "selective (attention recomputed)"], ["full", "full (each block recomputed)"]];
const NS = "http://www.w3.org/2000/svg";

function el(name, attrs, parent) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (parent) parent.appendChild(node);
  return node;
}

function text(parent, x, y, s, cls, anchor = "start") {
  const t = el("text", { x, y, class: cls, "text-anchor": anchor }, parent);
  t.textContent = s;
  return t;
}

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const scrub = $('[data-role="scrub"]');
  const playButton = $('[data-action="play"]');
  const stepButton = $('[data-action="step"]');
  const backButton = $('[data-action="back"]');
  const now = $('[data-role="now"]');
  let data = null;
  let index = 0;
  let timer = null;

  const maxEvents = () => Math.max(...MODES.map(([m]) => data.modes[m].events.length));

  function draw() {
    const svg = $('[data-role="chart"]');
    svg.replaceChildren();
    if (!data) return;
    // The drawing is as wide as the chart on the page (between 320 and 640 units), so that its
    // labels keep their size on a narrow page instead of shrinking with a fixed-width picture.
    const W = Math.round(Math.max(320, Math.min(640, svg.getBoundingClientRect().width || 640)));
    const rowH = 120, top = 16, L = 8, R = 8;
    const n = maxEvents();
    const ymax = Math.max(...MODES.map(([m]) => data.modes[m].peak)) || 1;
    svg.setAttribute("viewBox", `0 0 ${W} ${MODES.length * (rowH + top) + 8}`);
    const bw = (W - L - R) / n;
    MODES.forEach(([mode, label], row) => {
      const d = data.modes[mode];
      const y0 = row * (rowH + top) + top;
      el("rect", { x: L, y: y0, width: W - L - R, height: rowH, class: "at-frame" }, svg);
      const title = text(svg, L + 4, y0 - 4, `${label}: peak ${fmtBytes(d.peak)}`, "at-title");
      if (title.getComputedTextLength() > W - L - R - 4) title.textContent = `${mode}: peak ${fmtBytes(d.peak)}`;
      d.events.forEach((e, i) => {
        const h = (rowH - 4) * (e.held / ymax);
        el("rect", { x: L + i * bw, y: y0 + rowH - h, width: Math.max(bw - 1, 1), height: h,
          class: `at-${e.phase}${i > index ? " at-future" : ""}` }, svg);
      });
      const p = d.peak_index;
      const px = L + (p + 0.5) * bw, py = y0 + rowH - (rowH - 4) * (d.peak / ymax);
      if (p <= index) {
        el("circle", { cx: px, cy: Math.max(py, y0 + 6), r: 6, class: "at-peak" }, svg);
        const who = d.set_by ? `${d.set_by[0]} (${fmtBytes(d.set_by[1])})` : "";
        const ly = Math.max(py, y0 + 6) + 14;
        const label = text(svg, Math.min(px + 9, W - R - 4), ly, `peak, set by ${who}`, "at-peak-label",
          px > W * 0.55 ? "end" : "start");
        // Keep the label inside the frame: the other side of the ring if it sticks out, on its own
        // line below the frame's top if it sticks out on both sides (a narrow page).
        const fits = () => { const b = label.getBBox(); return b.x >= L && b.x + b.width <= W - R; };
        if (!fits()) { label.setAttribute("text-anchor", px > W * 0.55 ? "start" : "end");
          label.setAttribute("x", px > W * 0.55 ? Math.max(px + 9, L + 4) : Math.max(px - 9, L + 4)); }
        if (!fits()) { label.setAttribute("text-anchor", "start"); label.setAttribute("x", L + 4);
          label.setAttribute("y", y0 + 14); label.textContent = `peak: ${who}`; }
      }
      const cx = L + (Math.min(index, d.events.length - 1) + 0.5) * bw;
      el("line", { x1: cx, x2: cx, y1: y0, y2: y0 + rowH, class: "at-cursor" }, svg);
    });
  }

  function describe() {
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
    root.dataset.index = String(index);
    draw();
    describe();
  }

  function stopPlaying() {
    if (timer) clearInterval(timer);
    timer = null;
    playButton.textContent = "Play";
  }

  const controls = [playButton, stepButton, backButton, scrub];
  const enableControls = (on) => { for (const c of controls) c.disabled = !on; };

  async function run() {
    stopPlaying();
    const args = Object.fromEntries(FIELDS.map((name) => [name, form.elements[name].value]));
    markInvalid(null);
    delete root.dataset.result;
    setStatus("running", "Running one step in each mode…");
    try {
      const r = await client.call("memory_timeline", args);
      data = r;
      scrub.max = String(maxEvents() - 1);
      for (const [mode] of MODES) readouts[`peak_${mode}`].textContent = fmtBytes(r.modes[mode].peak);
      root.dataset.result = JSON.stringify(Object.fromEntries(MODES.map(([m]) => [m, {
        peak: r.modes[m].peak, stored: r.modes[m].stored, set_by: r.modes[m].set_by, held: r.modes[m].events.map((e) => e.held),
        formula_peak: r.modes[m].formula_peak, formula_stored: r.modes[m].formula_stored }])));
      enableControls(true);
      show(maxEvents() - 1);
      const agree = MODES.every(([m]) => r.modes[m].peak === r.modes[m].formula_peak && r.modes[m].stored === r.modes[m].formula_stored);
      setStatus("done", `${r.n_layer} layer${r.n_layer > 1 ? "s" : ""}, ${r.batch_size} × ${r.seq_len} tokens: peak ` +
        MODES.map(([m]) => `${m} ${fmtBytes(r.modes[m].peak)}`).join(", ") +
        (agree ? ". Each matches pylib.systems.memory.recompute_bytes to the byte." : ". (Not what the formula predicts.)") +
        " Press Play to step through it.");
    } catch (err) {
      data = null;
      enableControls(false);
      for (const key of Object.keys(readouts)) readouts[key].textContent = "–";
      draw();
      describe();
      showRunError(err, setStatus, markInvalid);
    }
  }

  if (!(await startPython(client, setStatus, [runButton]))) return;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    runButton.disabled = true;
    try { await run(); } finally { runButton.disabled = false; }
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
  await run();
  runButton.disabled = false;
}
