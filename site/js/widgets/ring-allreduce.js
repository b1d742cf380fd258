// The ring all-reduce, stepped: a thin view over pylib.web.parallel_ops.ring (pylib.systems.collectives).
// Python computes every step once (the messages, how many workers' values each chunk holds, the running
// sums); the buttons only move through them. Each worker is a row of p chunk blocks, chunk c in column c,
// coloured by chunk (sN) and labelled cN, with its count k/p written on it and drawn as a bar; a step's
// sent blocks slide one row down the ring (the last row's wrap round to the first), unless the reader
// asks for reduced motion, when the step's outlines and arrows show it without the slide.

import { describe, fillTable, frameOf, onResize, svgCanvas } from "../plot.js";
import { bindFields, checkOnLeave, makeStatus, markSettled, readoutMap, reportError, startPython } from "../widget-kit.js";
import { el } from "./parallel-svg.js";

const fmtBytes = (b) => `${Math.round(b).toLocaleString("en")} B`;
const cell = (tag, text) => Object.assign(document.createElement(tag), { textContent: text });
const PLAY_EVERY_MS = 1400;
const SLIDE_MS = 650;
const reducedMotion = () => typeof matchMedia === "function" && matchMedia("(prefers-reduced-motion: reduce)").matches;

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const form = $('[data-role="form"]');
  const runButton = $('[data-action="run"]');
  const back = $('[data-action="back"]'), next = $('[data-action="next"]'), end = $('[data-action="end"]');
  const play = $('[data-action="play"]'), reset = $('[data-action="reset"]');
  const stepButtons = [reset, back, next, play, end];
  const readouts = readoutMap(root);
  const svg = $('[data-role="ring"]'), table = $('[data-role="table"]'), gather = $('[data-role="gather"]');
  const scrollers = [[$('[data-role="table-scroll"]'), $('[data-role="scroll-cue"]')],
    [$('[data-role="gather-scroll"]'), $('[data-role="gather-scroll-cue"]')]];
  const frame = frameOf(svg);
  const waiting = $('[data-role="ring-summary"]').textContent;
  const setStatus = makeStatus(root);
  const fields = bindFields(root);
  let data = null, at = -1;  // at = -1: before the first step
  let timer = null;          // Play's interval

  const haveAt = (k) => (k >= 0 ? data.steps[k].have : data.initial_have);

  // ---------------------------------------------------------------------------
  // The drawing: rows of chunk blocks, the ring's edges in the gutter on the left

  // animate: the step was just taken, so its sent blocks slide (a redraw on resize or theme does not)
  const drawRing = (animate = false) => {
    if (!data) { svg.replaceChildren(); return; }
    const p = data.workers;
    const top = 30, rowPitch = 58, bh = 40, gutter = 62;
    const narrow = (svg.getBoundingClientRect().width || 600) < 480;
    const captionLines = narrow ? 2 : 1;
    const H = top + p * rowPitch + 4 + 16 * captionLines;
    const { W } = svgCanvas(svg, H);
    const pitch = Math.min(76, (W - gutter - 6) / p), bw = pitch - 5;
    const bx = (c) => gutter + c * pitch, by = (i) => top + i * rowPitch;
    const step = at >= 0 ? data.steps[at] : null;
    const have = haveAt(at);
    const defs = el("defs", {}, svg);
    const marker = el("marker", { id: `${root.id}-arrow`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" }, defs);
    el("path", { d: "M0,0 L10,5 L0,10 z", class: "par-arrow" }, marker);
    const edgeMarker = el("marker", { id: `${root.id}-edge`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" }, defs);
    el("path", { d: "M0,0 L10,5 L0,10 z", class: "ring-edge-head" }, edgeMarker);

    // the ring: w0 -> w1 -> ... -> w(p-1), and back round to w0 along the left edge
    const nodeX = 22, nodeW = 34;
    for (let i = 0; i < p; i++) {
      const y = by(i);
      el("rect", { x: nodeX, y: y + 6, width: nodeW, height: bh - 12, rx: 6, class: "par-worker", "data-node": i }, svg);
      el("text", { x: nodeX + nodeW / 2, y: y + bh / 2 + 4, "text-anchor": "middle", class: "kit-label ring-node-label", "data-node-label": i }, svg, `w${i}`);
      if (i < p - 1) el("line", { x1: nodeX + nodeW / 2, y1: y + bh - 5, x2: nodeX + nodeW / 2, y2: by(i + 1) + 5, class: "ring-edge", "marker-end": `url(#${root.id}-edge)` }, svg);
    }
    const back0 = by(p - 1) + bh / 2, back1 = by(0) + bh / 2;
    el("path", { d: `M${nodeX},${back0} H${8} V${back1} H${nodeX - 1}`, class: "ring-edge", "marker-end": `url(#${root.id}-edge)` }, svg);

    // which blocks this step sends and receives
    const sending = new Set(), receiving = new Set();
    if (step) for (const [src, dst, c] of step.messages) { sending.add(`${src}:${c}`); receiving.add(`${dst}:${c}`); }

    const block = (parent, x, y, c, k, cls, attrs = {}) => {
      const g = el("g", { class: `ring-block s${(c % 8) + 1} ${cls}`, transform: `translate(${x},${y})`, ...attrs }, parent);
      el("rect", { x: 0, y: 0, width: bw, height: bh, rx: 4, class: "ring-block-bg" }, g);
      el("rect", { x: 0, y: 0, width: bw, height: bh, rx: 4, class: "ring-block-tint" }, g);
      el("rect", { x: 0, y: 0, width: bw, height: bh, rx: 4, class: "ring-block-edge" }, g);
      if (cls.includes("receiving")) el("rect", { x: -3, y: -3, width: bw + 6, height: bh + 6, rx: 6, class: "ring-block-mark" }, g);
      el("text", { x: bw / 2, y: 14, "text-anchor": "middle", class: "kit-label ring-chunk-label" }, g, `c${c}`);
      el("text", { x: bw / 2, y: 28, "text-anchor": "middle", class: "kit-label ring-count" }, g, `${k}/${p}`);
      el("rect", { x: 3, y: bh - 8, width: bw - 6, height: 5, class: "ring-bar-track" }, g);
      el("rect", { x: 3, y: bh - 8, width: ((bw - 6) * k) / p, height: 5, class: "ring-bar" }, g);
      return g;
    };
    const blocks = el("g", { "data-role": "blocks" }, svg);
    for (let i = 0; i < p; i++) {
      for (let c = 0; c < p; c++) {
        const k = have[i][c], key = `${i}:${c}`;
        const cls = [k === p ? "complete" : "", sending.has(key) ? "sending" : "", receiving.has(key) ? "receiving" : ""].join(" ");
        block(blocks, bx(c), by(i), c, k, cls, { "data-worker": i, "data-chunk": c, "data-have": k });
      }
    }

    // the step's messages: an arrow from the sent block down to the one it lands on (the last row's
    // leave at the bottom and come in at the top: the ring closes)
    if (step) {
      const arrows = el("g", { "data-role": "messages" }, svg);
      for (const [src, dst, c] of step.messages) {
        const x = bx(c) + bw / 2, mark = `url(#${root.id}-arrow)`;
        if (dst === src + 1) {
          el("line", { x1: x, y1: by(src) + bh + 1, x2: x, y2: by(dst) - 1, class: "par-msg", "marker-end": mark }, arrows);
        } else {
          el("line", { x1: x, y1: by(src) + bh + 1, x2: x, y2: by(src) + bh + 14, class: "par-msg ring-wrap" }, arrows);
          el("line", { x1: x, y1: top - 16, x2: x, y2: by(dst) - 1, class: "par-msg ring-wrap", "marker-end": mark }, arrows);
        }
      }
      if (animate && !reducedMotion()) {
        // a copy of each sent block (with the count it carried) slides one row down, then fades
        const ghosts = el("g", { "data-role": "ghosts", "aria-hidden": "true" }, svg);
        step.messages.forEach(([src, dst, c], m) => {
          const starts = dst === src + 1 ? [[by(src), by(dst)]] : [[by(src), by(src) + rowPitch], [by(dst) - rowPitch, by(dst)]];
          for (const [y0, y1] of starts) {
            const g = block(ghosts, 0, 0, c, step.carried[m], "ghost", { "data-carries": step.carried[m] });
            g.removeAttribute("transform");
            const from = `translate(${bx(c)}px, ${y0}px)`, to = `translate(${bx(c)}px, ${y1}px)`;
            g.style.transform = to;
            g.style.opacity = "0";
            const fadeIn = y0 < top ? 0 : 1, fadeOut = y1 > by(p - 1) ? 0 : 1;
            g.animate([{ transform: from, opacity: fadeIn }, { transform: to, opacity: fadeOut, offset: 0.8 }, { transform: to, opacity: 0 }],
              { duration: SLIDE_MS, easing: "ease-in-out" }).onfinish = () => g.remove();
          }
        });
      }
    }
    const caption = step
      ? (step.phase === "reduce-scatter"
        ? `reduce-scatter step ${step.step + 1} of ${p - 1}: each worker adds the chunk it receives to its own`
        : `all-gather step ${step.step + 1} of ${p - 1}: each worker copies the finished chunk it receives`)
      : "before the first step: every block holds one worker's values (1/" + p + ")";
    if (narrow) {
      const cut = caption.indexOf(": ");
      el("text", { x: 4, y: H - 22, class: "kit-label" }, svg, caption.slice(0, cut + 1));
      el("text", { x: 4, y: H - 6, class: "kit-label" }, svg, caption.slice(cut + 2));
    } else {
      el("text", { x: 4, y: H - 6, class: "kit-label" }, svg, caption);
    }
  };

  // The text alternative: the step in a sentence, its messages in the table with what each receiver then holds.
  const describeRing = () => {
    if (!data) {
      describe(frame, waiting);
      fillTable(frame, ["from"], []);
      return;
    }
    const p = data.workers, step = at >= 0 ? data.steps[at] : null;
    const columns = ["from", "to", "chunk", "numbers", "it carried (workers' values)", "receiver now holds"];
    if (!step) {
      describe(frame, `${p} workers in a ring, each holding its own gradient cut into ${p} chunks; before the first step every chunk holds 1 of the ${p} workers' values.`);
      fillTable(frame, columns, []);
      return;
    }
    const holds = step.phase === "reduce-scatter" ? `the sum of ${step.step + 2} of ${p} workers' values` : `the whole sum (${p} of ${p})`;
    describe(frame, `${step.phase} step ${step.step + 1} of ${p - 1}: ` +
      step.messages.map(([src, dst, chunk, n]) => `w${src} sends chunk ${chunk} (${n.toLocaleString("en")} numbers) to w${dst}`).join("; ") +
      `. Each chunk received now holds ${holds}.`);
    fillTable(frame, columns, step.messages.map(([src, dst, chunk, n], m) =>
      [`w${src}`, `w${dst}`, chunk, n, `${step.carried[m]} of ${p}`, `${step.have[dst][chunk]} of ${p}`]));
  };

  // The numbers: every worker's copy of every chunk (its first number and its count), in a box that
  // scrolls sideways with a cue when the chunks do not fit
  const drawTable = () => {
    table.replaceChildren();
    if (!data) { updateScrollCues(); return; }
    const p = data.workers;
    const step = at >= 0 ? data.steps[at] : null;
    const firsts = step ? step.firsts : data.initial;
    const have = haveAt(at);
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
    updateScrollCues();
  };
  // a box whose table is wider than the column says so: a cue line under it, an edge on its right
  // until scrolled to the end, and a tab stop so that the keyboard can scroll it
  const updateScrollCues = () => {
    for (const [box, cue] of scrollers) {
      const over = box.scrollWidth - box.clientWidth, scrolls = over > 1;
      cue.hidden = !scrolls;
      box.classList.toggle("scrolls", scrolls);
      box.classList.toggle("at-end", box.scrollLeft >= over - 1);
      if (scrolls) box.tabIndex = 0;
      else box.removeAttribute("tabindex");
    }
  };
  for (const [box] of scrollers) {
    box.addEventListener("scroll", updateScrollCues, { passive: true });
    onResize(box, updateScrollCues);
  }

  // announce: the reader moved to this step, so the live region says where they are
  // (the status line's text is the same at every step; a region that never changes says nothing)
  const show = (announce = false, animate = false) => {
    const p = data.workers, step = at >= 0 ? data.steps[at] : null;
    const where = step
      ? `Step ${at + 1} of ${data.steps.length}: ${step.phase} step ${step.step + 1} of ${p - 1}, each worker sends one chunk to the next.`
      : "Before the first step: every worker holds only its own gradient.";
    readouts.phase.textContent = step ? step.phase : "not started";
    readouts.step.textContent = step ? `${at + 1} of ${data.steps.length}` : `0 of ${data.steps.length}`;
    readouts.sent.textContent = `${fmtBytes((step ? step.sent[0] : 0) * data.itemsize)} of ${fmtBytes(data.closed_form_wire)}`;
    readouts.payload.textContent = fmtBytes(data.payload_bytes);
    readouts.naive.textContent = fmtBytes(data.naive_wire_bytes);
    // a step button that disables itself would drop focus to <body>: hand it on first
    const active = document.activeElement;
    const last = data.steps.length - 1;
    back.disabled = reset.disabled = at < 0;
    next.disabled = end.disabled = at >= last;
    play.disabled = false;
    if (active && active.disabled) ([next, back].find((b) => !b.disabled) || runButton).focus();
    drawRing(animate);
    describeRing();
    drawTable();
    if (at === last) {
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
  const goTo = (k) => {
    const forward = k === at + 1;
    at = k;
    show(true, forward);
  };

  // Play steps on by itself until the end or Pause; any other step button pauses it first
  const setPlaying = (on) => {
    if (on === (timer !== null)) return;
    if (on) {
      timer = setInterval(() => {
        if (!data || at >= data.steps.length - 1) { setPlaying(false); return; }
        goTo(at + 1);
        if (at >= data.steps.length - 1) setPlaying(false);
      }, PLAY_EVERY_MS);
    } else {
      clearInterval(timer);
      timer = null;
    }
    play.textContent = on ? "Pause ❚❚" : "Play ▶▶";
    play.setAttribute("aria-pressed", String(on));
    root.dataset.playing = String(on);
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
    updateScrollCues();
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (runButton.disabled) return;
    setPlaying(false);
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
        final_firsts: last.firsts[0], payload_bytes: value.payload_bytes, all_gather: value.all_gather.map((g) => g.sent), all_gather_whole: value.all_gather.map((g) => g.sent_whole),
        initial_have: value.initial_have, have: value.steps.map((s) => s.have) });
      drawGather();
      show();
      markSettled(root); // the call has ended, in "ready" (before the first step), which makeStatus does not count
      setStatus.announcer.say(`Ready: ${value.workers} workers. Press Step to send the first messages.`);
    } catch (err) {
      // refused: the last good drawing and tables stay as they were, but they can no longer be stepped
      // (they are not what the field now says) until the reader presses Split and start again
      for (const b of stepButtons) b.disabled = true;
      focusField = reportError(err, { fields, setStatus });
    } finally {
      runButton.disabled = false;
      const lost = document.activeElement === document.body || document.activeElement === null;
      if (focusField) fields.focusFirstInvalid();
      else if (pressed && lost) (next.disabled ? runButton : next).focus();
    }
  });
  // the workers field is checked when the reader leaves it (op parallel_ring's own check), not while it computes
  checkOnLeave(root, { op: "parallel_ring", args: () => fields.values(), fields, skip: () => runButton.disabled });
  back.addEventListener("click", () => { setPlaying(false); if (data && at >= 0) goTo(at - 1); });
  next.addEventListener("click", () => { setPlaying(false); if (data && at < data.steps.length - 1) goTo(at + 1); });
  end.addEventListener("click", () => { setPlaying(false); if (data) goTo(data.steps.length - 1); });
  reset.addEventListener("click", () => { setPlaying(false); if (data) goTo(-1); });
  play.addEventListener("click", () => {
    if (!data) return;
    if (timer !== null) { setPlaying(false); return; }
    if (at >= data.steps.length - 1) goTo(-1); // from the end, Play starts again from the beginning
    setPlaying(true);
  });
  onResize(svg, () => drawRing()); // drawn at its shown width: its text stays 12 px
  if (!(await startPython(client, setStatus, [runButton]))) return;
  runButton.disabled = false;
  setStatus("ready", "Ready. Choose the number of workers and press Split and start.", false);
}
