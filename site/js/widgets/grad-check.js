// The streamed gradient check: a thin view over pylib.web.backprop_ops's backprop_check_* ops, run by
// the worker as "run:backprop_check" (one or more tensors per chunk, stoppable between chunks), at the
// initial or the perturbed weights (the select; validated in Python).

import { bindFields, runStreamed } from "../widget-kit.js";

const sci = (v) => (v == null || !Number.isFinite(v) ? "–" : v.toExponential(2));

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const tbody = $('[data-role="rows"]');
  const rowTemplate = $('template[data-role="row"]');
  const fields = bindFields(root);
  const weights = fields.input("weights");

  const addRow = (r) => {
    const tr = rowTemplate.content.firstElementChild.cloneNode(true);
    tr.querySelector(".name").textContent = r.name;
    tr.querySelector(".shape").textContent = r.shape.join(" × ");
    tr.querySelector(".checked").textContent = `${r.checked} of ${r.size}`;
    tr.querySelector(".max").textContent = sci(r.max);
    tr.querySelector(".median").textContent = sci(r.median);
    tbody.append(tr);
  };

  const run = runStreamed(root, client, {
    op: "run:backprop_check",
    fields,
    args: () => ({ weights: weights.value }),
    startText: "Checking…",
    announceStart: "Gradient check started.",
    stoppingText: "Stopping after this tensor…",
    onStart() {
      weights.disabled = true;
    },
    onClear() {
      tbody.replaceChildren();
    },
    onEvent(ev) {
      if (ev.kind !== "chunk") return null;
      ev.chunk.rows.forEach(addRow);
      return `Checked ${ev.chunk.checked} of ${ev.chunk.tensors} tensors…`;
    },
    onResult(out) {
      weights.disabled = false;
      const r = out.result;
      const summary = `${r.weights === "perturbed" ? "Perturbed weights" : "Initial weights"}: ${r.tensors_checked} of ${r.tensors} tensors, ` +
        `${r.elements_checked.toLocaleString("en")} elements in ${r.seconds.toFixed(1)} s; largest error ${sci(r.max)} (${r.worst_tensor ?? "–"}).`;
      if (out.stopped) return { status: "stopped", text: `Stopped: ${summary}` };
      return {
        status: "done",
        result: { weights: r.weights, tensors: r.tensors, max: r.max, worst_tensor: r.worst_tensor, elements: r.elements_checked, complete: r.complete },
        text: `Done: ${summary}`,
      };
    },
    onError() { weights.disabled = false; },
  });
  await run.ready(null, "Ready. Press Run to check every parameter tensor.");
}
