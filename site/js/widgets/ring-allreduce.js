// The ring all-reduce, stepped: a thin view over pylib.web.parallel_ops.ring (pylib.systems.collectives).
// Python computes every step once; the buttons only move through them.

import { invalidMarker, showRunError, startPython, statusSetter, widgetParts, readoutMap } from "../widget-kit.js";

const SVG = "http://www.w3.org/2000/svg";
const el = (tag, attrs = {}, text = null) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== null) e.textContent = text;
  return e;
};
const fmtBytes = (b) => `${Math.round(b).toLocaleString("en")} B`;

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const back = $('[data-action="back"]'), next = $('[data-action="next"]'), end = $('[data-action="end"]');
  const readouts = readoutMap(root);
  const svg = $('[data-role="ring"]'), table = $('[data-role="table"]'), gather = $('[data-role="gather"]');
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(["workers"], (n) => form.elements[n]);
  let data = null, at = -1;  // at = -1: before the first step

  const drawRing = () => {
    svg.replaceChildren();
    if (!data) return;
    const p = data.workers, cx = 320, cy = 120, r = 90;
    const pos = (i) => [cx + r * Math.cos(-Math.PI / 2 + (2 * Math.PI * i) / p), cy + r * Math.sin(-Math.PI / 2 + (2 * Math.PI * i) / p)];
    const defs = el("defs");
    const marker = el("marker", { id: `${root.id}-arrow`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" });
    marker.append(el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8a5a00" }));
    defs.append(marker);
    svg.append(defs);
    const step = at >= 0 ? data.steps[at] : null;
    if (step) {
      for (const [src, dst, chunk, n] of step.messages) {
        const [x1, y1] = pos(src), [x2, y2] = pos(dst);
        const dx = x2 - x1, dy = y2 - y1, len = Math.hypot(dx, dy) || 1;
        const sx = x1 + (dx / len) * 24, sy = y1 + (dy / len) * 24, ex = x2 - (dx / len) * 26, ey = y2 - (dy / len) * 26;
        svg.append(el("line", { x1: sx, y1: sy, x2: ex, y2: ey, class: "msg", "marker-end": `url(#${root.id}-arrow)` }));
        const mx = (sx + ex) / 2 + (dy / len) * 12, my = (sy + ey) / 2 - (dx / len) * 12;
        svg.append(el("text", { x: mx, y: my, "text-anchor": "middle" }, `c${chunk} (${n})`));
      }
    }
    for (let i = 0; i < p; i++) {
      const [x, y] = pos(i);
      svg.append(el("circle", { cx: x, cy: y, r: 20, class: "worker" }));
      svg.append(el("text", { x, y: y + 4, "text-anchor": "middle" }, `w${i}`));
    }
    svg.append(el("text", { x: 10, y: 230, class: "muted" }, step
      ? `${step.phase} step ${step.step + 1} of ${p - 1}: each arrow carries one chunk (cN) of the numbers in brackets`
      : "before the first step: every worker holds only its own gradient"));
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
    head.append(Object.assign(document.createElement("th"), { textContent: "worker" }));
    data.bounds.forEach(([a, b], c) => head.append(Object.assign(document.createElement("th"), { textContent: `chunk ${c} [${a}:${b}]` })));
    head.append(Object.assign(document.createElement("th"), { textContent: "sent so far" }));
    table.append(head);
    for (let i = 0; i < p; i++) {
      const tr = document.createElement("tr");
      tr.append(Object.assign(document.createElement("th"), { textContent: `w${i}` }));
      for (let c = 0; c < p; c++) {
        const td = document.createElement("td");
        td.textContent = `${firsts[i][c].toPrecision(6)} (${have[i][c]}/${p})`;
        if (fresh.has(`${i}:${c}`)) td.classList.add("fresh");
        if (have[i][c] === p) td.classList.add("done");
        tr.append(td);
      }
      tr.append(Object.assign(document.createElement("td"), { textContent: fmtBytes((step ? step.sent[i] : 0) * data.itemsize) }));
      table.append(tr);
    }
    const exact = document.createElement("tr");
    exact.append(Object.assign(document.createElement("th"), { textContent: "exact sum" }));
    for (const v of data.exact_firsts) exact.append(Object.assign(document.createElement("td"), { textContent: v.toPrecision(6) }));
    exact.append(document.createElement("td"));
    table.append(exact);
  };

  const show = () => {
    const p = data.workers, step = at >= 0 ? data.steps[at] : null;
    readouts.phase.textContent = step ? step.phase : "not started";
    readouts.step.textContent = step ? `${at + 1} of ${data.steps.length}` : `0 of ${data.steps.length}`;
    readouts.sent.textContent = fmtBytes((step ? step.sent[0] : 0) * data.itemsize) + ` of ${fmtBytes(data.closed_form_wire)} = 2(p−1)/p × payload`;
    readouts.payload.textContent = fmtBytes(data.payload_bytes);
    readouts.naive.textContent = `${fmtBytes(data.naive_wire_bytes)} = (p−1) × payload`;
    back.disabled = at < 0;
    next.disabled = end.disabled = at >= data.steps.length - 1;
    drawRing();
    drawTable();
    if (at === data.steps.length - 1) {
      setStatus("done", data.identical
        ? `Done: all ${p} workers hold bit-identical sums; the largest difference from the exact (float64) sum is ${data.max_abs_error.toExponential(2)}, float32 rounding.`
        : "Done, but the workers' results differ: this should not happen.");
    } else {
      setStatus("ready", `${p} workers, ${data.elements.toLocaleString("en")} numbers each, chunks of about ${Math.round(data.elements / p)}.`);
    }
  };

  const drawGather = () => {
    gather.replaceChildren();
    const h = document.createElement("tr"), r = document.createElement("tr"), r2 = document.createElement("tr");
    h.append(Object.assign(document.createElement("th"), { textContent: "workers p" }));
    r.append(Object.assign(document.createElement("th"), { textContent: "each holds gradient / p: bytes each sends" }));
    r2.append(Object.assign(document.createElement("th"), { textContent: "each holds a whole gradient: bytes each sends" }));
    for (const g of data.all_gather) {
      h.append(Object.assign(document.createElement("th"), { textContent: String(g.p) }));
      r.append(Object.assign(document.createElement("td"), { textContent: fmtBytes(g.sent) }));
      r2.append(Object.assign(document.createElement("td"), { textContent: fmtBytes(g.sent_whole) }));
    }
    gather.append(h, r, r2);
  };

  if (!(await startPython(client, setStatus, [runButton]))) return;

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    runButton.disabled = true;
    markInvalid(null);
    setStatus("running", "Computing the gradients and the ring's steps…");
    try {
      const t0 = performance.now();
      const value = await client.call("parallel_ring", { workers: form.elements.workers.value });
      data = value;
      at = -1;
      root.dataset.seconds = String((performance.now() - t0) / 1000);
      const last = value.steps[value.steps.length - 1];
      root.dataset.result = JSON.stringify({ workers: value.workers, identical: value.identical, wire_bytes: value.wire_bytes,
        final_firsts: last.firsts[0], payload_bytes: value.payload_bytes, all_gather: value.all_gather.map((g) => g.sent), all_gather_whole: value.all_gather.map((g) => g.sent_whole) });
      drawGather();
      show();
    } catch (err) {
      data = null;
      delete root.dataset.result;
      svg.replaceChildren();
      table.replaceChildren();
      for (const b of [back, next, end]) b.disabled = true;
      showRunError(err, setStatus, markInvalid);
    } finally {
      runButton.disabled = false;
    }
  });
  back.addEventListener("click", () => { if (data && at >= 0) { at -= 1; show(); } });
  next.addEventListener("click", () => { if (data && at < data.steps.length - 1) { at += 1; show(); } });
  end.addEventListener("click", () => { if (data) { at = data.steps.length - 1; show(); } });
  runButton.disabled = false;
  setStatus("ready", "Ready. Choose the number of workers and press Split and start.");
}
