// The attention mask of a packed window and the live leak test: a view over pylib.web.data_ops's
// data_pack_window (masks computed by pylib.layers) and data_leak (logits from pylib.model). The window
// is the kit's calculator; the leak test is a second form with its own fields. Colours are the theme's
// series colours (documents) and --chart-axis (across a boundary); the mask is redrawn on "themechange".

import { cssColor, describe, fillTable, frameOf } from "../plot.js";
import { bindFields, calculator, checkOnLeave, markSettled, reportError, SETTLED } from "../widget-kit.js";
import { setLegend } from "./chart-extras.js";
import { barChart, DOC_COLORS, docClass, docLegend, keepFocus, redrawOnResize, tableFocusable } from "./data-svg.js";

const SHOWN = { "\n": "↵\n", "␄": "[EOS]" };
const CELL = { "\n": "↵", " ": "␣", "␄": "EOS" };
const docColor = (d) => cssColor(`--series-${(d % DOC_COLORS) + 1}`);
const span = (from, to) => (from === to ? String(from) : `${from}–${to}`);

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const leakPart = $('[data-role="leak-part"]');
  const leakMessage = $('[data-role="leak-message"]');
  const gridBox = $('[data-role="grid"]');
  const textBox = $('[data-role="text"]');
  const spanTemplate = $('template[data-role="span"]');
  const leakButton = $('[data-action="leak"]');
  const masked = $('[data-role="bars-masked"]'), unmasked = $('[data-role="bars-unmasked"]');
  let win = null;
  let canvas = null;
  let lastLeak = null;

  const fields = bindFields($('[data-role="show-part"]'));
  const leakFields = bindFields(leakPart, { onCommit: () => { if (!leakButton.disabled) leak(); } });

  const drawGrid = () => {
    if (!win) return;
    const name = fields.input("mask").value;
    const mask = win[name];
    const T = mask.length;
    if (!canvas) {
      canvas = document.createElement("canvas");
      canvas.className = "pm-canvas";
      gridBox.replaceChildren(canvas); // the placeholder goes
    }
    canvas.width = canvas.height = T;
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = cssColor("--bg");
    ctx.fillRect(0, 0, T, T);
    const across = cssColor("--chart-axis");
    for (let t = 0; t < T; t++) {
      for (let s = 0; s < T; s++) {
        if (!mask[t][s]) continue;
        ctx.fillStyle = win.doc_ids[t] === win.doc_ids[s] ? docColor(win.doc_ids[t]) : across;
        ctx.fillRect(s, t, 1, 1);
      }
    }
    // the text alternative: which keys each query may attend to, per row
    const frame = tableFocusable(frameOf(gridBox));
    const rows = mask.map((row, t) => {
      const allowed = row.map((v, s) => (v ? s : -1)).filter((s) => s >= 0);
      const other = allowed.filter((s) => win.doc_ids[s] !== win.doc_ids[t]).length;
      return [t, CELL[win.chars[t]] ?? win.chars[t], win.doc_ids[t] + 1, span(allowed[0], allowed[allowed.length - 1]), other];
    });
    fillTable(frame, ["query position", "token", "document", "may attend to positions", "of them in another document"], rows);
    const total = mask.flat().reduce((a, b) => a + b, 0);
    const across_ = rows.reduce((a, r) => a + r[4], 0);
    // the legend names the window's documents, and the boundary's grey only where the mask shows it
    setLegend(gridBox, [...docLegend(win.doc_ids), ...(across_ ? [["area axis", "across a document boundary"]] : [])]);
    describe(frame, `${name === "doc_mask" ? "Causal and block-diagonal" : "Causal only"} mask of a ${T}-token window with ` +
      `${win.n_docs} document${win.n_docs === 1 ? "" : "s"}: ${total.toLocaleString("en")} allowed (query, key) pairs, ` +
      `${across_.toLocaleString("en")} of them across a document boundary.`);
  };

  const calc = calculator(root, client, {
    op: "data_pack_window",
    fields,
    busy: [leakButton],
    args: () => ({ start: fields.input("start").value.trim() || null }),
    onResult(w) {
      win = w;
      if (fields.input("start").value.trim() === "auto") fields.set("start", w.start);
      drawGrid();
      textBox.replaceChildren(...w.chars.map((ch, t) => {
        const s = spanTemplate.content.firstElementChild.cloneNode(true);
        s.textContent = SHOWN[ch] ?? ch;
        s.className = docClass(w.doc_ids[t]);
        return s;
      }));
      const allowed = (m) => m.flat().reduce((a, b) => a + b, 0);
      return {
        result: { start: w.start, n_docs: w.n_docs, allowed_causal: allowed(w.causal), allowed_doc_mask: allowed(w.doc_mask) },
        text: `Window at ${w.start.toLocaleString("en")}: ${w.n_docs} document${w.n_docs === 1 ? "" : "s"}. ` +
          "Grey cells (causal only) are attention across a document boundary.",
      };
    },
  });
  keepFocus(root);
  // the leak test's own form: leaving its position field, Python checks it against the window shown
  // (not before a window is drawn, nor while the test runs)
  checkOnLeave(leakPart, { op: "data_leak", args: () => ({ start: win.start, position: leakFields.input("position").value }),
    fields: leakFields, skip: () => !win || leakButton.disabled });

  const drawLeak = () => {
    const r = lastLeak;
    if (!r) return;
    const classes = r.doc_ids.map((d, t) => (t === r.position ? "s8" : docClass(d)));
    // The changed position itself moves most; the scale is set by the others (its grey bar is clipped).
    const others = (v) => v.filter((_, t) => t !== r.position);
    const top = Math.max(...others(r.masked), ...others(r.unmasked));
    const rows = (v) => v.map((x, t) => [t, r.doc_ids[t] + 1, t === r.position ? `${x.toExponential(3)} (changed here)` : x]);
    const columns = ["position", "document", "max |Δ logit|"];
    const doc = `document ${r.doc_ids[r.position] + 1}`;
    setLegend(unmasked, [...docLegend(r.doc_ids.filter((_, t) => t !== r.position)), ["area s8", "the changed position"]]);
    barChart(masked, r.masked, classes, { ymax: top, title: "with the document mask", columns, rows: rows(r.masked),
      summary: `With the document mask, the largest change outside ${doc}, which holds the changed position ${r.position}, is ${r.max_other_masked.toExponential(2)}.` });
    barChart(unmasked, r.unmasked, classes, { ymax: top, title: "causal mask only", columns, rows: rows(r.unmasked),
      summary: `Causal mask only: the largest change outside ${doc} is ${r.max_other_unmasked.toExponential(2)}.` });
  };
  redrawOnResize(masked, drawLeak);

  async function leak() {
    leakFields.clearErrors();
    leakMessage.classList.remove("error");
    delete root.dataset.leak;
    if (!win) await calc.run();
    if (!win) return;
    root.dataset.status = "running";
    leakButton.disabled = true;
    try {
      const r = await client.call("data_leak", { start: win.start, position: leakFields.input("position").value });
      lastLeak = r;
      drawLeak();
      root.dataset.leak = JSON.stringify({ position: r.position, max_other_masked: r.max_other_masked, max_other_unmasked: r.max_other_unmasked });
      leakMessage.textContent = `Changed “${r.changed_from}” to “${r.changed_to}” at position ${r.position}. ` +
        `Largest |Δ logit| in the other documents: ${r.max_other_masked.toExponential(2)} with the mask, ` +
        `${r.max_other_unmasked.toExponential(2)} without.`;
      calc.setStatus.announcer.say(leakMessage.textContent);
      root.dataset.status = "done";
      markSettled(root);
    } catch (err) {
      leakMessage.classList.add("error");
      // the field's message goes under the field; the line here names it (as the kit's status does)
      const setLeak = (status, text) => {
        root.dataset.status = status;
        if (text !== undefined) leakMessage.textContent = text;
        if (SETTLED.includes(status)) markSettled(root);
      };
      setLeak.announcer = calc.setStatus.announcer;
      if (reportError(err, { fields: leakFields, setStatus: setLeak })) leakFields.focusFirstInvalid();
    } finally {
      leakButton.disabled = false;
    }
  }

  if (!(await calc.ready())) return;
  fields.input("mask").addEventListener("change", drawGrid);
  document.addEventListener("themechange", drawGrid);
  leakFields.form.addEventListener("submit", (e) => { e.preventDefault(); leak(); });
  await calc.run();
}
