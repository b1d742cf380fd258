// p, y and p - y at one position of a validation window: a thin view over pylib.web.objective_ops's
// objective_logit_grad (pylib.loss's forward and backward) and, for the trained model, the chunked
// run:objective_pretrain. Everything from the reader or the model is shown with textContent.

import { invalidMarker, showRunError, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const SHOWN = { "\n": "↵", " ": "␣", "\t": "⇥" };
const FIELDS = ["model", "window", "position", "k"];

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const output = $('[data-role="output"]');
  const rowTemplate = $('template[data-role="row"]');
  const charTemplate = $('template[data-role="char"]');
  const readout = (key, text) => { $(`[data-readout="${key}"]`).textContent = text; };
  let busy = false;
  let trained = false;

  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => (name === "model" ? $('[data-role="model"]') : form.elements[name]));
  const showError = (err) => {
    showRunError(err, setStatus, markInvalid);
  };

  if (!(await startPython(client, setStatus, [runButton]))) return;

  async function pretrain() {
    stopButton.disabled = false;
    setStatus("running", "Training the default model…");
    const value = await client.call("run:objective_pretrain", {}, {
      onEvent: (ev) => {
        if (ev.kind === "chunk") {
          const c = ev.chunk;
          const loss = c.loss == null ? "" : `, batch loss ${c.loss.toFixed(3)}`;
          message.textContent = `Training the default model… step ${c.step} of ${c.steps}${loss}.`;
        }
      },
    });
    trained = true;
    return value;
  }

  function render(r) {
    const context = r.context.slice(-48);
    $('[data-role="context"]').replaceChildren(...context.map((ch, i) => {
      const span = charTemplate.content.firstElementChild.cloneNode(true);
      span.textContent = SHOWN[ch] ?? ch;
      if (i === context.length - 1) span.classList.add("lg-current");
      return span;
    }));
    $('[data-role="target"]').textContent = SHOWN[r.target.char] ?? r.target.char;
    const target = r.rows.find((row) => row.target);
    readout("loss", r.loss.toFixed(3));
    readout("p_target", target.p.toFixed(4));
    readout("grad_sum", r.grad_sum.toExponential(1));
    $('[data-role="rows"]').replaceChildren(...r.rows.map((row) => {
      const tr = rowTemplate.content.firstElementChild.cloneNode(true);
      tr.querySelector(".lg-tok").textContent = SHOWN[row.char] ?? row.char;
      tr.querySelector(".lg-id").textContent = row.id;
      tr.querySelector(".lg-p").textContent = row.p.toFixed(4);
      tr.querySelector(".lg-y").textContent = row.y.toFixed(0);
      tr.querySelector(".lg-g").textContent = (row.grad >= 0 ? "+" : "") + row.grad.toFixed(4);
      const bar = tr.querySelector(".lg-bar");
      bar.style.width = `${Math.min(100, Math.abs(row.grad) * 100) / 2}%`; // |p - y| <= 1: half the cell each way
      bar.classList.add(row.grad >= 0 ? "pos" : "neg");
      if (row.target) tr.classList.add("lg-is-target");
      return tr;
    }));
    output.hidden = false;
  }

  wireStop(stopButton, client, message);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (busy) return;
    busy = true;
    runButton.disabled = true;
    markInvalid(null);
    delete root.dataset.result;
    const args = {
      model: form.elements.model.value,
      window: form.elements.window.value,
      position: form.elements.position.value,
      k: form.elements.k.value,
    };
    try {
      let note = "";
      if (args.model === "trained" && !trained) {
        const value = await pretrain();
        note = value.stopped ? ` Training was stopped at step ${value.result.steps}: this is that model.` : "";
      }
      setStatus("running", "Computing…");
      const r = await client.call("objective_logit_grad", args);
      render(r);
      root.dataset.result = JSON.stringify({
        model: r.model, trained_steps: r.trained_steps, target: r.target.id, loss: r.loss, grad_sum: r.grad_sum,
        rows: r.rows.map((row) => ({ id: row.id, p: row.p, y: row.y, grad: row.grad })),
      });
      const which = r.model === "trained" ? `the model trained for ${r.trained_steps} steps` : "the untrained model";
      setStatus("done", `Position ${args.position.trim()} of window ${args.window.trim()}, ${which}.${note}`);
    } catch (err) {
      output.hidden = true;
      showError(err);
    } finally {
      busy = false;
      runButton.disabled = false;
      stopButton.disabled = true;
    }
  });
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Show.");
}
