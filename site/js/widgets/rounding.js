// The rounding calculator: a thin view over precision_round (pylib.web.precision_ops, which calls
// pylib.systems.precision: decompose, decode, rounding_interval). It only lays out what the worker sends.
// The slider is the kit's log-scale slider over |value| (1e-45 to 1e39), with a decade readout; it keeps
// the sign of the value typed, and rounds as it moves. Each bit of each format is a toggle button:
// pressing one sends that format's flipped bits to the op, which decodes them (pylib, not here); the
// field then holds the decoded value and every format rounds it. The number line shows the chosen
// format's representable values around the value, on a linear scale local to it.

import { bindFields, calculator } from "../widget-kit.js";
import { describe, fillTable, frameOf, onResize, svgCanvas, svgEl, svgText } from "../plot.js";

const fmt = (v) => {
  if (v == null) return "–";
  if (typeof v === "string") return v;
  if (v === 0) return Object.is(v, -0) ? "-0" : "0";
  const a = Math.abs(v);
  return a >= 1e5 || a < 1e-3 ? v.toExponential(5) : v.toPrecision(8).replace(/\.?0+$/, "");
};
const pct = (v) => (v == null ? "–" : v === 0 ? "0" : v.toExponential(2));
// every digit of a float64 (the shortest text that reads back as the same number), for the field and the table
const exact = (v) => (typeof v !== "number" ? (v === "nan" ? "NaN" : v == null ? "–" : String(v)) : Object.is(v, -0) ? "-0" : String(v));
const REGIME = { normal: "normal", subnormal: "subnormal (fewer bits)", zero: "zero", underflow: "underflow → 0", overflow: "overflow", inf: "inf", nan: "nan" };
const DECODED = { normal: "a normal number", subnormal: "a subnormal number (fewer significant bits)", zero: "zero", inf: "infinity", nan: "NaN (not a number)" };
const PARTS = { sign: "sign", exponent: "exponent", mantissa: "mantissa" };
const SUP = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };
const pow10 = (k) => "10" + [...String(k)].map((c) => SUP[c]).join("");
const pow2 = (k) => "2" + [...String(k)].map((c) => SUP[c]).join("");

/** The given numbers as text, each exact if that is short, else at the fewest significant digits (from
 *  `fewest` to 17) at which they all read differently. */
function distinctTexts(vals, fewest = 4) {
  const show = (v, p) => {
    if (exact(v).length <= 12) return exact(v); // short enough to show every digit: never rounded
    const a = Math.abs(v);
    return a >= 1e6 || a < 1e-4 ? v.toExponential(p - 1).replace(/\.?0+e/, "e") : String(Number(v.toPrecision(p)));
  };
  for (let p = fewest; p <= 17; p++) {
    const texts = vals.map((v) => (v == null ? null : show(v, p)));
    const shown = texts.filter((t) => t != null);
    if (new Set(shown).size === shown.length) return texts;
  }
  return vals.map((v) => (v == null ? null : exact(v)));
}

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const table = $('[data-role="output"]');
  const rowTemplate = $('template[data-role="row"]');
  const bitTemplate = $('template[data-role="bit"]');
  const slider = $('[data-slider-for="value"]');
  const decade = $('[data-role="decade"]');
  const lineFormat = $('[data-role="line-format"]');
  const stale = $('[data-role="stale"]');
  const svg = $('[data-role="line"]');
  const frame = frameOf(svg);
  let negative = false; // the sign of the value typed: the slider moves |value| and keeps it
  let flip = null; // {format, bits}: the next call decodes these bits instead of reading the field
  let last = null; // the last result, for the number line
  const rows = new Map(); // format -> its <tbody>, built on the first result and updated in place

  // the decade readout beside the slider: which power of ten |value| is in, and the slider's ends
  slider.after(decade);
  const ends = `slider ${pow10(Math.round(Math.log10(Number(slider.dataset.min))))} to ${pow10(Math.round(Math.log10(Number(slider.dataset.max))))}`;
  const showDecade = () => {
    const v = Math.abs(Number(input.value.trim() || NaN));
    if (!Number.isFinite(v)) decade.textContent = `|value|: – (${ends})`;
    else if (v === 0) decade.textContent = `|value| = 0 (${ends})`;
    else {
      let k = Math.floor(Math.log10(v));
      if (10 ** (k + 1) <= v) k += 1; // log10 of an exact power of ten may land just below it
      decade.textContent = `${pow10(k)} ≤ |value| < ${pow10(k + 1)} (${ends})`;
    }
  };

  const fields = bindFields(root, {
    onSlide(name, v) {
      if (negative) {
        fields.input("value").value = String(-v);
        slider.setAttribute("aria-valuetext", fields.input("value").value);
      }
      showDecade();
      calc.schedule();
    },
  });
  const input = fields.input("value");
  // a negative value typed: the slider goes to its magnitude (the kit's sync leaves it for values ≤ 0)
  const syncSign = () => {
    const v = Number(input.value.trim() || NaN);
    negative = input.value.trim().startsWith("-");
    if (Number.isFinite(v) && v < 0) {
      const lo = Math.log10(Number(slider.dataset.min)), hi = Math.log10(Number(slider.dataset.max)), n = Number(slider.max);
      slider.value = String(Math.round(((Math.log10(-v) - lo) / (hi - lo)) * n));
    }
  };
  input.addEventListener("input", () => { syncSign(); showDecade(); });
  showDecade();

  function buildRow(f) {
    const body = rowTemplate.content.firstElementChild.cloneNode(true);
    body.dataset.format = f.format;
    body.querySelector('[data-cell="name"]').textContent = f.name;
    body.querySelector('[data-cell="layout"]').textContent = `1 + ${f.exponent_bits} + ${f.mantissa_bits} bits`;
    for (const group of body.querySelectorAll(".round-bitgroup")) {
      const part = group.dataset.part;
      const n = f[part].length;
      group.setAttribute("aria-label", `${f.name} ${PARTS[part]}, ${n} bit${n > 1 ? "s" : ""}`);
      const holder = group.querySelector(".round-bitbuttons");
      for (let i = 0; i < n; i++) {
        const b = bitTemplate.content.firstElementChild.cloneNode(true);
        const k = n - 1 - i; // bit k of the field, 0 the least significant
        b.dataset.part = part;
        b.dataset.index = String(i);
        b.dataset.label = part === "sign" ? `${f.name} sign bit` : `${f.name} ${PARTS[part]} bit ${k}`;
        b.addEventListener("click", () => flipBit(f.format, part, i));
        holder.append(b);
      }
    }
    return body;
  }

  function updateRow(body, f, x) {
    const cell = (k) => body.querySelector(`[data-cell="${k}"]`);
    // the stored value and its neighbours with as many digits as it takes to tell them apart
    // (and from the value itself, so that a stored value that is not x never reads as x)
    const s = typeof f.stored === "number" ? f.stored : null;
    const [below, stored, above] = distinctTexts([f.below, s, f.above, typeof x === "number" && x !== s ? x : null], 6);
    cell("stored").textContent = stored ?? fmt(f.stored);
    cell("abs_error").textContent = fmt(f.abs_error);
    cell("rel_error").textContent = pct(f.rel_error);
    cell("below").textContent = below ?? "–";
    cell("above").textContent = above ?? "–";
    cell("regime").textContent = REGIME[f.regime] || f.regime;
    cell("regime").className = `prec-line prec-wraps regime-${f.regime}`;
    cell("max").textContent = fmt(f.max);
    cell("smallest_subnormal").textContent = fmt(f.smallest_subnormal / 2);
    for (const b of body.querySelectorAll(".round-bit")) {
      const bit = f[b.dataset.part][Number(b.dataset.index)];
      b.textContent = bit;
      b.setAttribute("aria-label", `${b.dataset.label}: ${bit}`); // the name holds the visible text
      b.setAttribute("aria-pressed", bit === "1" ? "true" : "false");
    }
  }

  // the bits as the row shows them, with one flipped: the op decodes them (string work only here)
  function flipBit(format, part, index) {
    const body = rows.get(format);
    const bits = [...body.querySelectorAll(".round-bit")].map((b) => b.textContent);
    const at = ["sign", "exponent", "mantissa"].indexOf(part);
    const offset = [0, 1, 1 + body.querySelectorAll('[data-part="exponent"].round-bit').length][at] + index;
    bits[offset] = bits[offset] === "1" ? "0" : "1";
    flip = { format, bits: bits.join("") };
    lineFormat.value = format;
    calc.run();
  }

  const calc = calculator(root, client, {
    op: "precision_round",
    fields,
    runningText: "Rounding…",
    args() {
      const a = flip || fields.values();
      flip = null;
      return a;
    },
    onError() { // the last good table and number line stay, and say which value they show
      if (!last) return;
      stale.querySelector('[data-role="stale-value"]').textContent = exact(last.value);
      stale.hidden = false;
    },
    onResult(r) {
      for (const f of r.formats) {
        if (!rows.has(f.format)) {
          rows.set(f.format, buildRow(f));
          table.append(rows.get(f.format));
        }
        updateRow(rows.get(f.format), f, r.value);
      }
      table.hidden = false;
      stale.hidden = true;
      last = r;
      drawLine();
      let text = `${exact(r.value)} in each format.`;
      if (r.from_bits) {
        const b = r.from_bits;
        const f = r.formats.find((x) => x.format === b.format);
        const e = f.exponent.length;
        fields.set("value", exact(b.value));
        syncSign();
        showDecade();
        const spaced = `${b.bits[0]} ${b.bits.slice(1, 1 + e)} ${b.bits.slice(1 + e)}`;
        const what = typeof b.value === "string" ? `${exact(b.value)} (${DECODED[b.regime] || b.regime})` : `${exact(b.value)}: ${DECODED[b.regime] || b.regime}`;
        text = `${b.name} bits ${spaced} encode ${what}. Every format rounds it.`;
        if (typeof b.value === "string") text += " (Only finite values can be typed in the field.)";
      }
      return { result: r, text };
    },
  });

  // ---------------------------------------------------------------------------
  // The number line of the chosen format: a local linear scale from just below the lower neighbour to
  // just above the upper one (or the interval's end past the largest value)

  function drawLine() {
    if (!last) return;
    const f = last.formats.find((x) => x.format === lineFormat.value);
    const L = f.line;
    const H = L ? 168 : 40;
    const { W } = svgCanvas(svg, H);
    if (!L) {
      const nan = f.regime === "nan" || last.value === "nan";
      const why = nan ? `x is NaN` : `x is past ${f.name}'s largest value, ${fmt(f.max)}, so it is stored as ${f.stored}`;
      svgText(svg, W / 2, 24, `No number line: x ${nan ? "is NaN" : "overflows"}.`, { anchor: "middle" });
      describe(frame, `No number line for ${f.name}: ${why}.`);
      fillTable(frame, ["point", "value"], [["x", exact(last.value)], ["stored value", exact(f.stored)]], String);
      return;
    }
    const lo = L.below ?? L.round_lo, hi = L.above ?? L.round_hi;
    const pad = 0.1 * (hi - lo);
    const d0 = lo - pad, d1 = hi + pad;
    const m = 14;
    const X = (v) => m + ((v - d0) / (d1 - d0)) * (W - 2 * m);
    const axisY = 46;
    // the axis, the interval that rounds to the stored value, its ends solid when ties go to it
    svgEl("line", { x1: m, x2: W - m, y1: axisY, y2: axisY, class: "kit-axis" }, svg);
    svgEl("rect", { x: X(L.round_lo), y: axisY - 8, width: Math.max(1, X(L.round_hi) - X(L.round_lo)), height: 16, class: "kit-band" }, svg);
    for (const end of [L.round_lo, L.round_hi]) {
      svgEl("line", { x1: X(end), x2: X(end), y1: axisY - 10, y2: axisY + 10, class: L.ties_to_stored ? "kit-axis" : "kit-ref" }, svg);
    }
    const texts = distinctTexts([L.below, L.stored, L.above, L.x === L.stored ? null : L.x]);
    texts[3] ??= texts[1]; // x is the stored value itself
    const clampText = (x, y, s, cls) => {
      const t = svgText(svg, x, y, s, { anchor: "middle", cls });
      const w = t.getComputedTextLength ? t.getComputedTextLength() : 0;
      if (x - w / 2 < 2) { t.setAttribute("text-anchor", "start"); t.setAttribute("x", 2); }
      else if (x + w / 2 > W - 2) { t.setAttribute("text-anchor", "end"); t.setAttribute("x", W - 2); }
      return t;
    };
    // x: a diamond on the axis, labelled above it
    const xp = X(L.x);
    svgEl("path", { d: `M${xp} ${axisY - 7} L${xp + 6} ${axisY} L${xp} ${axisY + 7} L${xp - 6} ${axisY} Z`, class: "kit-dot s2" }, svg);
    svgEl("line", { x1: xp, x2: xp, y1: 20, y2: axisY - 8, class: "kit-line s2", "stroke-width": 1.5 }, svg);
    clampText(xp, 14, `x = ${texts[3]}`, "kit-marker-label");
    // the stored value and the neighbours: dots on the axis, labelled on two staggered rows below it
    const point = (v, filled, name, text, row) => {
      const px = X(v);
      svgEl("line", { x1: px, x2: px, y1: axisY + 6, y2: axisY + 12 + row * 36, class: "kit-grid" }, svg);
      svgEl("circle", { cx: px, cy: axisY, r: 5, class: `kit-dot s1${filled ? "" : " hollow"}` }, svg);
      clampText(px, axisY + 26 + row * 36, name, "kit-label");
      clampText(px, axisY + 40 + row * 36, text, "kit-label");
    };
    if (L.below != null) point(L.below, false, "next below", texts[0], 1);
    if (L.above != null) point(L.above, false, "next above", texts[2], 1);
    point(L.stored, true, "rounds to", texts[1], 0);
    // the gaps: brackets between the stored value and each neighbour
    const gapY = H - 14;
    const bracket = (a, b, k) => {
      const xa = X(a) + 6, xb = X(b) - 6;
      if (xb - xa < 8) return;
      svgEl("path", { d: `M${xa} ${gapY - 16} V${gapY - 12} H${xb} V${gapY - 16}`, class: "kit-axis" }, svg);
      clampText((xa + xb) / 2, gapY + 2, `gap ${pow2(k)}`, "kit-label");
    };
    if (L.below != null) bracket(L.below, L.stored, L.gap_below_log2);
    if (L.above != null) bracket(L.stored, L.above, L.gap_above_log2);

    const near = (v) => exact(v);
    const ties = L.ties_to_stored ? "the ends included (ties go to it: its last bit is 0)" : "the ends excluded (ties go to the neighbour, whose last bit is 0)";
    const sides = [L.below != null ? `${near(L.below)} below, ${pow2(L.gap_below_log2)} away` : `nothing finite below`,
      L.above != null ? `${near(L.above)} above, ${pow2(L.gap_above_log2)} away` : `nothing finite above (past ${near(L.round_hi)} it overflows)`];
    describe(frame, `In ${f.name}, x = ${exact(L.x)} rounds to ${near(L.stored)}. Its neighbours are ${sides.join(", and ")}. `
      + `Every value from ${near(L.round_lo)} to ${near(L.round_hi)} rounds to ${near(L.stored)}, ${ties}.`);
    fillTable(frame, ["point", "value"], [
      ["x", exact(L.x)], ["rounds to (stored value)", near(L.stored)],
      ["next below", L.below == null ? "none (the most negative value)" : near(L.below)],
      ["next above", L.above == null ? "none (the largest value)" : near(L.above)],
      ["gap below", L.gap_below == null ? "–" : `${near(L.gap_below)} = 2^${L.gap_below_log2}`],
      ["gap above", L.gap_above == null ? "–" : `${near(L.gap_above)} = 2^${L.gap_above_log2}`],
      ["rounds to it from", near(L.round_lo)], ["rounds to it up to", near(L.round_hi)],
    ], String);
  }
  lineFormat.addEventListener("change", drawLine);
  onResize(svg, drawLine);
  document.addEventListener("themechange", drawLine);

  if (!(await calc.ready())) return;
  await calc.run();
}
