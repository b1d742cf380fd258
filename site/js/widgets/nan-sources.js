// Where NaN comes from: a thin view over stability_nan_demo (pylib.web.stability_ops -> pylib.studies.stability).
// Values arrive as numbers or as the strings "nan", "inf", "-inf"; they are shown as text.

import { bindFields, calculator } from "../widget-kit.js";

const fmt = (v) => (typeof v === "string" ? v : Math.abs(v) !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5) ? v.toExponential(3) : String(+v.toFixed(4)));
const vec = (a) => `[${a.map(fmt).join(", ")}]`;
const bad = (v) => typeof v === "string";

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const buttons = [...root.querySelectorAll('[data-action="run"]')];
  const output = $('[data-role="output"]');
  const rowsEl = $('[data-role="rows"]');
  const rowTemplate = $('template[data-role="row"]');
  let which = "log0";
  let shown = null; // the demo on show: the slider reruns it as it moves

  function addRow(label, naive, guarded) {
    const tr = rowTemplate.content.firstElementChild.cloneNode(true);
    tr.querySelector('[data-cell="label"]').textContent = label;
    for (const [cell, text, flag] of [["naive", naive, true], ["guarded", guarded, false]]) {
      const td = tr.querySelector(`[data-cell="${cell}"]`);
      td.textContent = text;
      if (flag && /nan|inf/.test(text)) td.classList.add("nan-bad");
    }
    rowsEl.append(tr);
  }

  function show(v) {
    rowsEl.replaceChildren();
    if (v.which === "log0") {
      addRow("logits z (target: index 1)", vec(v.logits), vec(v.logits));
      addRow("loss −log p(target)", fmt(v.naive_loss), fmt(v.guarded_loss));
      addRow("gradient d loss / dz", vec(v.naive_grad), vec(v.guarded_grad));
    } else if (v.which === "overflow") {
      addRow("scores", vec(v.scores), vec(v.scores));
      addRow("softmax", vec(v.naive), vec(v.guarded));
    } else {
      v.scores.forEach((row, i) => {
        const visible = v.mask[i].map((m, j) => (m ? fmt(row[j]) : "−inf")).join(", ");
        addRow(`row ${i}: visible scores [${visible}]`, vec(v.naive[i]), vec(v.guarded[i]));
      });
    }
    const explain = $(`template[data-role="explain-${v.which}"]`);
    $('[data-role="explain"]').textContent = explain.content.textContent.replace(/\s+/g, " ").trim();
    output.hidden = false;
  }

  // The three buttons submit the form; the one pressed names the demo. Enter in the field submits with
  // the first button, so it runs the first demo. (Registered before calculator()'s own submit listener.)
  $('[data-role="form"]').addEventListener("submit", (event) => {
    which = (event.submitter && event.submitter.dataset.which) || "log0";
  });
  const fields = bindFields(root, {
    onSlide() { if (shown) { which = shown; calc.schedule(); } },
  });
  const calc = calculator(root, client, {
    op: "stability_nan_demo",
    fields,
    args: () => ({ which, logit: fields.values().logit }),
    busy: buttons.slice(1),
    runningText: "Computing…",
    onError() { output.hidden = true; },
    onResult(v) {
      shown = v.which;
      show(v);
      const naive = v.which === "log0" ? [v.naive_loss, ...v.naive_grad] : v.which === "overflow" ? v.naive : v.naive.flat();
      const guarded = v.which === "log0" ? [v.guarded_loss, ...v.guarded_grad] : v.which === "overflow" ? v.guarded : v.guarded.flat();
      return {
        result: { which: v.which, naive_bad: naive.some(bad), guarded_bad: guarded.some(bad) },
        text: naive.some(bad)
          ? "The unguarded formula produced nan or inf (red); the guarded one did not."
          : "No nan or inf this time: the numbers are too small to overflow or underflow. Try a larger logit.",
      };
    },
  });
  if (!(await calc.ready())) return;
  calc.setStatus("ready", "Ready. Press one of the three buttons.", false);
}
