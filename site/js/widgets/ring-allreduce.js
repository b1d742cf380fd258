// The ring all-reduce, stepped: a thin view over pylib.web.parallel_ops.ring (pylib.systems.collectives).
// Python computes every step once; the buttons only move through them.

import { describe, fillTable, frameOf, onResize, svgCanvas } from "../plot.js";
import { bindFields, makeStatus, markSettled, readoutMap, reportError, startPython } from "../widget-kit.js";
import { el } from "./parallel-svg.js";

const fmtBytes = (b) => `${Math.round(b).toLocaleString("en")} B`;
const cell = (tag, text) => Object.assign(document.createElement(tag), { textContent: text });

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const form = $('[data-role="form"]');
  const runButton = $('[data-action="run"]');
  const back = $('[data-action="back"]'), next = $('[data-action="next"]'), end = $('[data-action="end"]');
  const readouts = readoutMap(root);
  const svg = $('[data-role="ring"]'), table = $('[data-role="table"]'), gather = $('[data-role="gather"]');
  const frame = frameOf(svg);
  const waiting = $('[data-role="ring-summary"]').textContent;
  const setStatus = makeStatus(root);
  const fields = bindFields(root);
  let data = null, at = -1;  // at = -1: before the first step

  const drawRing = () => {
    if (!data) { svg.replaceChildren(); return; }
    const { W, H } = svgCanvas(svg, 250);
    const p = data.workers, cx = W / 2, cy = 118, r = Math.min(95, W / 2 - 40);
    const pos = (i) => [cx + r * Math.cos(-Math.PI / 2 + (2 * Math.PI * i) / p), cy + r * Math.sin(-Math.PI / 2 + (2 * Math.PI * i) / p)];
    const defs = el("defs", {}, svg);
    const marker = el("marker", { id: `${root.id}-arrow`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" }, defs);
    el("path", { d: "M0,0 L10,5 L0,10 z", class: "par-arrow" }, marker);
    const step = at >= 0 ? data.steps[at] : null;
    if (step) {
      for (const [src, dst, chunk, n] of step.messages) {
        const [x1, y1] = pos(src), [x2, y2] = pos(dst);
        const dx = x2 - x1, dy = y2 - y1, len = Math.hypot(dx, dy) || 1;
        const sx = x1 + (dx / len) * 24, sy = y1 + (dy / len) * 24, ex = x2 - (dx / len) * 26, ey = y2 - (dy / len) * 26;
        el("line", { x1: sx, y1: sy, x2: ex, y2: ey, class: "par-msg", "marker-end": `url(#${root.id}-arrow)` }, svg);
        const mx = (sx + ex) / 2 + (dy / len) * 14, my = (sy + ey) / 2 - (dx / len) * 14 + 4;
        el("text", { x: mx, y: my, "text-anchor": "middle", class: "kit-label par-halo" }, svg, `c${chunk} (${n})`);
      }
    }
    for (let i = 0; i < p; i++) {
      const [x, y] = pos(i);
      el("circle", { cx: x, cy: y, r: 20, class: "par-worker" }, svg);
      el("text", { x, y: y + 4, "text-anchor": "middle", class: "kit-label" }, svg, `w${i}`);
    }
    const caption = step
      ? (W < 480 ? `${step.phase} step ${step.step + 1} of ${p - 1}` : `${step.phase} step ${step.step + 1} of ${p - 1}: each arrow carries one chunk (cN) of the numbers in brackets`)
      : (W < 480 ? "before the first step" : "before the first step: every worker holds only its own gradient");
    el("text", { x: 8, y: H - 8, class: "kit-label" }, svg, caption);
  };

  // The text alternative: the step in a sentence, its messages in the table.
  const describeRing = () => {
    if (!data) {
      describe(frame, waiting);
      fillTable(frame, ["from"], []);
      return;
    }
    const p = data.workers, step = at >= 0 ? data.steps[at] : null;
    if (!step) {
      describe(frame, `${p} workers in a ring, before the first step: every worker holds only its own gradient.`);
      fillTable(frame, ["from", "to", "chunk", "numbers"], []);
      return;
    }
    describe(frame, `${step.phase} step ${step.step + 1} of ${p - 1}: ` +
      step.messages.map(([src, dst, chunk, n]) => `w${src} sends chunk ${chunk} (${n.toLocaleString("en")} numbers) to w${dst}`).join("; ") + ".");
    fillTable(frame, ["from", "to", "chunk", "numbers"], step.messages.map(([src, dst, chunk, n]) => [`w${src}`, `w${dst}`, chunk, n]));
  };

  const drawTable = () => {
    table.replaceChildren();
    if (!data) return;
    const p = data.workers;
    const step = at >= 0 ? data.steps[at] : null;
    const firsts = step ? step.firsts : data.initial;
    const have = step ? step.have : data.initial.map((row) => row.map(() => 1));
    const fresh = new Set(step ? step.messages.map(([, dst, c]) => `${dst}:${c}`) : []);
    const head = document.createElement("tr");
    head.append(Object.assign(cell("th", "worker"), { scope: "col" }));
    data.bounds.forEach(([a, b], c) => head.append(Object.assign(cell("th", `chunk ${c} [${a}:${b}]`), { scope: "col" })));
    head.append(Object.assign(cell("th", "sent so far"), { scope: "col" }));
    table.append(head);
    for (let i = 0; i < p; i++) {
      const tr = document.createElement("tr");
      tr.append(Object.assign(cell("th", `w${i}`), { scope: "row" }));
      for (let c = 0; c < p; c++) {
        const td = cell("td", `${firsts[i][c].toPrecision(6)} (${have[i][c]}/${p})`);
        if (fresh.has(`${i}:${c}`)) td.classList.add("fresh");
        if (have[i][c] === p) td.classList.add("done");
        tr.append(td);
      }
      tr.append(cell("td", fmtBytes((step ? step.sent[i] : 0) * data.itemsize)));
      table.append(tr);
    }
    const exact = document.createElement("tr");
    exact.append(Object.assign(cell("th", "exact sum"), { scope: "row" }));
    for (const v of data.exact_firsts) exact.append(cell("td", v.toPrecision(6)));
    exact.append(document.createElement("td"));
    table.append(exact);
  };

  // announce: the reader moved to this step with a button, so the live region says where they are
  // (the status line's text is the same at every step; a region that never changes says nothing)
  const show = (announce = false) => {
    const p = data.workers, step = at >= 0 ? data.steps[at] : null;
    const where = step
      ? `Step ${at + 1} of ${data.steps.length}: ${step.phase} step ${step.step + 1} of ${p - 1}, each worker sends one chunk to the next.`
      : "Before the first step: every worker holds only its own gradient.";
    readouts.phase.textContent = step ? step.phase : "not started";
    readouts.step.textContent = step ? `${at + 1} of ${data.steps.length}` : `0 of ${data.steps.length}`;
    readouts.sent.textContent = fmtBytes((step ? step.sent[0] : 0) * data.itemsize) + ` of ${fmtBytes(data.closed_form_wire)} = 2(p−1)/p × payload`;
    readouts.payload.textContent = fmtBytes(data.payload_bytes);
    readouts.naive.textContent = `${fmtBytes(data.naive_wire_bytes)} = (p−1) × payload`;
    // a step button that disables itself would drop focus to <body>: hand it on first
    const active = document.activeElement;
    back.disabled = at < 0;
    next.disabled = end.disabled = at >= data.steps.length - 1;
    if (active && active.disabled) ([next, back].find((b) => !b.disabled) || runButton).focus();
    drawRing();
    describeRing();
    drawTable();
    if (at === data.steps.length - 1) {
      const done = data.identical
        ? `Done: all ${p} workers hold bit-identical sums; the largest difference from the exact (float64) sum is ${data.max_abs_error.toExponential(2)}, float32 rounding.`
        : "Done, but the workers' results differ: this should not happen.";
      setStatus("done", done, false);
      setStatus.announcer.say(announce ? `${where} ${done}` : done);
    } else {
      setStatus("ready", `${p} workers, ${data.elements.toLocaleString("en")} numbers each, chunks of about ${Math.round(data.elements / p)}.`, false);
      if (announce) setStatus.announcer.say(where);
    }
  };

  const drawGather = () => {
    gather.replaceChildren();
    const h = document.createElement("tr"), r = document.createElement("tr"), r2 = document.createElement("tr");
    h.append(Object.assign(cell("th", "workers p"), { scope: "row" }));
    r.append(Object.assign(cell("th", "each holds gradient / p: bytes each sends"), { scope: "row" }));
    r2.append(Object.assign(cell("th", "each holds a whole gradient: bytes each sends"), { scope: "row" }));
    for (const g of data.all_gather) {
      h.append(Object.assign(cell("th", String(g.p)), { scope: "col" }));
      r.append(cell("td", fmtBytes(g.sent)));
      r2.append(cell("td", fmtBytes(g.sent_whole)));
    }
    gather.append(h, r, r2);
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (runButton.disabled) return;
    // disabled while it computes, the pressed button would drop the focus to <body>: it goes on to Step
    // (the next thing to press), or back to the button if there is nothing to step through
    const pressed = document.activeElement === runButton;
    runButton.disabled = true;
    fields.clearErrors();
    delete root.dataset.result;
    setStatus("running", "Computing the gradients and the ring's steps…", false);
    let focusField = false;
    try {
      const t0 = performance.now();
      const value = await client.call("parallel_ring", fields.values());
      data = value;
      at = -1;
      root.dataset.seconds = String((performance.now() - t0) / 1000);
      const last = value.steps[value.steps.length - 1];
      root.dataset.result = JSON.stringify({ workers: value.workers, identical: value.identical, wire_bytes: value.wire_bytes,
        final_firsts: last.firsts[0], payload_bytes: value.payload_bytes, all_gather: value.all_gather.map((g) => g.sent), all_gather_whole: value.all_gather.map((g) => g.sent_whole) });
      drawGather();
      show();
      markSettled(root); // the call has ended, in "ready" (before the first step), which makeStatus does not count
      setStatus.announcer.say(`Ready: ${value.workers} workers. Press Step to send the first messages.`);
    } catch (err) {
      data = null;
      at = -1;
      drawRing();
      describeRing();
      table.replaceChildren();
      for (const b of [back, next, end]) b.disabled = true;
      focusField = reportError(err, { fields, setStatus });
    } finally {
      runButton.disabled = false;
      const lost = document.activeElement === document.body || document.activeElement === null;
      if (focusField) fields.focusFirstInvalid();
      else if (pressed && lost) (next.disabled ? runButton : next).focus();
    }
  });
  back.addEventListener("click", () => { if (data && at >= 0) { at -= 1; show(true); } });
  next.addEventListener("click", () => { if (data && at < data.steps.length - 1) { at += 1; show(true); } });
  end.addEventListener("click", () => { if (data) { at = data.steps.length - 1; show(true); } });
  onResize(svg, drawRing); // drawn at its shown width: its text stays 12 px
  if (!(await startPython(client, setStatus, [runButton]))) return;
  runButton.disabled = false;
  setStatus("ready", "Ready. Choose the number of workers and press Split and start.", false);
}
