// The backward pass, one gradient at a time: a thin view over backprop_order (pylib.web.backprop_ops ->
// pylib.studies.backprop_order, which records the order pylib.model.backward finishes each gradient).
// Play steps through that order; the forward list marks the tensor whose gradient has just been finished.

import { showRunError, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const STEP_MS = 450;

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const stepButton = $('[data-action="step"]');
  const resetButton = $('[data-action="reset"]');
  const setStatus = statusSetter(root, message);
  const fwdList = $('[data-role="forward"]');
  const bwdList = $('[data-role="backward"]');
  let data = null;
  let shown = 0;
  let timer = null;

  function item(text) {
    const li = document.createElement("li");
    li.textContent = text;
    return li;
  }

  function render() {
    const n = data.backward.length;
    const logs = data.backward.map((r) => Math.log10(Math.max(r.grad_norm, 1e-12)));
    const lo = Math.min(...logs) - 0.5, hi = Math.max(...logs);
    fwdList.replaceChildren(...data.forward.map((name) => item(name)));
    const current = shown > 0 ? data.backward[shown - 1].name : null;
    const finished = new Set(data.backward.slice(0, shown).map((r) => r.name));
    [...fwdList.children].forEach((li, i) => {
      const name = data.forward[i];
      li.className = name === current ? "bo-current" : finished.has(name) ? "bo-done-fwd" : "";
    });
    bwdList.replaceChildren(...data.backward.map((r, i) => {
      const li = document.createElement("li");
      li.className = i < shown - 1 ? "" : i === shown - 1 ? "bo-current" : "bo-pending";
      if (i < shown) {
        const bar = document.createElement("span");
        bar.className = "bo-bar";
        bar.style.width = `${(4 * (logs[i] - lo)) / (hi - lo || 1)}rem`;
        li.append(bar);
      }
      li.append(document.createTextNode(r.name));
      if (i < shown) {
        const norm = document.createElement("span");
        norm.className = "bo-norm";
        norm.textContent = `‖g‖ = ${r.grad_norm.toExponential(2)}`;
        li.append(norm);
      }
      return li;
    }));
    root.dataset.shown = String(shown);
    if (shown === 0) {
      message.textContent = `Loss ${data.loss.toFixed(4)} on the fixed batch (${data.B} × ${data.T} tokens). Press Play or Step.`;
    } else if (shown < n) {
      message.textContent = `Step ${shown} of ${n}: the gradient of ${current} is finished.`;
    } else {
      message.textContent = `All ${n} gradients finished. wte came last: the output head reuses it, so its gradient ` +
        `is the head's share plus the embedding's, and the embedding's share is known only at the bottom.`;
    }
  }

  function stop() {
    if (timer) clearInterval(timer);
    timer = null;
    runButton.textContent = "Play";
  }

  function step() {
    if (!data) return;
    if (shown < data.backward.length) shown += 1;
    if (shown >= data.backward.length) {
      stop();
      root.dataset.result = JSON.stringify({ order: data.backward.map((r) => r.name), forward: data.forward,
        norms: data.backward.map((r) => r.grad_norm), loss: data.loss });
      setStatus("done");
    }
    render();
  }

  async function load() {
    stop();
    delete root.dataset.result;
    try {
      data = await client.call("backprop_order", { weights: form.elements.weights.value });
      shown = 0;
      setStatus("ready");
      render();
    } catch (err) {
      data = null;
      showRunError(err, setStatus, () => {});
    }
  }

  if (!(await startPython(client, setStatus, [runButton, stepButton, resetButton]))) return;
  await load();
  for (const b of [runButton, stepButton, resetButton]) b.disabled = false;
  form.elements.weights.addEventListener("change", load);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!data) return;
    if (timer) { stop(); return; }
    if (shown >= data.backward.length) { shown = 0; delete root.dataset.result; }
    runButton.textContent = "Pause";
    setStatus("running");
    timer = setInterval(step, STEP_MS);
  });
  stepButton.addEventListener("click", () => { stop(); step(); });
  resetButton.addEventListener("click", () => { stop(); shown = 0; delete root.dataset.result; setStatus("ready"); render(); });
}
