// The streamed gradient check: a thin view over pylib.web.backprop_ops's backprop_check_* ops, run by
// the worker as "run:backprop_check" (one or more tensors per chunk, stoppable between chunks), at the
// initial or the perturbed weights (the select; validated in Python).

import { startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const sci = (v) => (v == null || !Number.isFinite(v) ? "–" : v.toExponential(2));

export async function mount(root, client) {
  const { $, message, runButton, stopButton } = widgetParts(root);
  const tbody = $('[data-role="rows"]');
  const rowTemplate = $('template[data-role="row"]');
  const weightsSelect = $('select[name="weights"]');
  let running = false;
  const setStatus = statusSetter(root, message);

  const addRow = (r) => {
    const tr = rowTemplate.content.firstElementChild.cloneNode(true);
    tr.querySelector(".name").textContent = r.name;
    tr.querySelector(".shape").textContent = r.shape.join(" × ");
    tr.querySelector(".checked").textContent = `${r.checked} of ${r.size}`;
    tr.querySelector(".max").textContent = sci(r.max);
    tr.querySelector(".median").textContent = sci(r.median);
    tbody.append(tr);
  };

  if (!(await startPython(client, setStatus, [runButton]))) return;
  runButton.disabled = false;
  if (weightsSelect) weightsSelect.disabled = false;
  setStatus("ready", "Ready. Press Run to check every parameter tensor.");

  wireStop(stopButton, client, message, () => running, "Stopping after this tensor…");

  runButton.addEventListener("click", async () => {
    if (running) return;
    running = true;
    runButton.disabled = true;
    if (weightsSelect) weightsSelect.disabled = true;
    stopButton.disabled = false;
    tbody.replaceChildren();
    delete root.dataset.result;
    setStatus("running", "Checking…");
    try {
      const weights = weightsSelect ? weightsSelect.value : "init";
      const out = await client.call("run:backprop_check", { weights }, {
        onEvent: (event) => {
          if (event.kind !== "chunk") return;
          event.chunk.rows.forEach(addRow);
          message.textContent = `Checked ${event.chunk.checked} of ${event.chunk.tensors} tensors…`;
        },
      });
      const r = out.result;
      const summary = `${r.weights === "perturbed" ? "Perturbed weights" : "Initial weights"}: ${r.tensors_checked} of ${r.tensors} tensors, ${r.elements_checked.toLocaleString("en")} elements in ${r.seconds.toFixed(1)} s; largest error ${sci(r.max)} (${r.worst_tensor ?? "–"}).`;
      if (out.stopped) {
        setStatus("stopped", `Stopped: ${summary}`);
      } else {
        root.dataset.result = JSON.stringify({ weights: r.weights, tensors: r.tensors, max: r.max, worst_tensor: r.worst_tensor, elements: r.elements_checked, complete: r.complete });
        setStatus("done", `Done: ${summary}`);
      }
    } catch (err) {
      setStatus("error", err.kind === "input" && err.errors ? Object.values(err.errors).join("\n") : err.message);
    } finally {
      running = false;
      runButton.disabled = false;
      if (weightsSelect) weightsSelect.disabled = false;
      stopButton.disabled = true;
    }
  });
}
