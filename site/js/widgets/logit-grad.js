// p, y and p - y at one position of a validation window: a thin view over pylib.web.objective_ops's
// objective_logit_grad (pylib.loss's forward and backward) and, for the trained model, the chunked
// run:objective_pretrain (stoppable). Fields, errors and status through the kit (a typed field is checked
// when the reader leaves it: checkOnLeave); everything from the reader or the model is shown with textContent.

import { bindFields, checkOnLeave, makeStatus, reportError, startPython } from "../widget-kit.js";

const SHOWN = { "\n": "↵", " ": "␣", "\t": "⇥" };
const ARGS = ["window", "position", "k"];

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const output = $('[data-role="output"]');
  const rowTemplate = $('template[data-role="row"]');
  const charTemplate = $('template[data-role="char"]');
  const runButton = $('[data-action="run"]');
  const stopButton = $('[data-action="stop"]');
  const readout = (key, text) => { $(`[data-readout="${key}"]`).textContent = text; };
  const setStatus = makeStatus(root);
  let busy = false;
  let trained = false;

  const fields = bindFields(root, {
    onCommit() { if (!busy && !runButton.disabled) fields.form.requestSubmit(); }, // let go of a slider: show it
  });
  const label = fields.label;
  fields.label = (name) => (name === "model" ? "Model" : label(name)); // a radio group has no label[for]
  const argsOf = (values) => ({ model: values.model, ...Object.fromEntries(ARGS.map((k) => [k, values[k]])) });
  // leaving a typed field: Python's check of what Show would send (not while Show trains or computes)
  checkOnLeave(root, { op: "objective_logit_grad", args: () => argsOf(fields.values()), fields, skip: () => busy });

  async function pretrain() {
    stopButton.disabled = false;
    stopButton.removeAttribute("aria-disabled");
    if (document.activeElement === runButton || document.activeElement === document.body) stopButton.focus();
    setStatus("running", "Training the default model…", false);
    setStatus.announcer.say("Training the default model started.");
    const value = await client.call("run:objective_pretrain", {}, {
      onEvent: (ev) => {
        if (ev.kind !== "chunk") return;
        const c = ev.chunk;
        const loss = c.loss == null ? "" : `, batch loss ${c.loss.toFixed(3)}`;
        setStatus("running", `Training the default model… step ${c.step} of ${c.steps}${loss}.`, "throttled");
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

  stopButton.addEventListener("click", () => {
    if (!busy || stopButton.disabled || stopButton.getAttribute("aria-disabled") === "true") return;
    client.stop();
    stopButton.setAttribute("aria-disabled", "true"); // not disabled: focus stays on it until the run ends
    setStatus("running", "Stopping after this chunk…", "now");
  });

  fields.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (busy) return;
    busy = true;
    const hadFocus = document.activeElement === runButton;
    runButton.setAttribute("aria-disabled", "true"); // disabled would drop the focus to <body>
    fields.clearErrors();
    delete root.dataset.result;
    const args = argsOf(fields.values());
    let focusField = false;
    try {
      let note = "";
      if (args.model === "trained" && !trained) {
        runButton.disabled = true;
        const value = await pretrain();
        note = value.stopped ? ` Training was stopped at step ${value.result.steps}: this is that model.` : "";
      }
      setStatus("running", "Computing…", false);
      const r = await client.call("objective_logit_grad", args);
      render(r);
      root.dataset.result = JSON.stringify({
        model: r.model, trained_steps: r.trained_steps, target: r.target.id, loss: r.loss, grad_sum: r.grad_sum,
        rows: r.rows.map((row) => ({ id: row.id, p: row.p, y: row.y, grad: row.grad })),
      });
      const which = r.model === "trained" ? `the model trained for ${r.trained_steps} steps` : "the untrained model";
      setStatus("done", `Position ${args.position.trim()} of window ${args.window.trim()}, ${which}: loss ${r.loss.toFixed(3)}.${note}`);
    } catch (err) {
      output.hidden = true;
      focusField = reportError(err, { fields, setStatus });
    } finally {
      busy = false;
      const stopHadFocus = document.activeElement === stopButton || document.activeElement === document.body;
      runButton.disabled = false;
      runButton.removeAttribute("aria-disabled");
      stopButton.disabled = true;
      stopButton.removeAttribute("aria-disabled");
      if (focusField) fields.focusFirstInvalid();
      else if (stopHadFocus || (hadFocus && document.activeElement !== runButton)) runButton.focus();
    }
  });

  if (!(await startPython(client, setStatus, [runButton]))) return;
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Show.", false);
}
