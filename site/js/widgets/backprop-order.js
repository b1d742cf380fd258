// The backward pass, one gradient at a time: a thin view over backprop_order (pylib.web.backprop_ops ->
// pylib.studies.backprop_order, which records the order pylib.model.backward finishes each gradient).
// Play steps through that order; the forward list marks the tensor whose gradient has just been finished.
// The message changes at every step and is not a live region: the announcer says the start and the end.

import { bindFields, makeStatus, reportError, startPython } from "../widget-kit.js";

const STEP_MS = 450;

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const form = $('[data-role="form"]');
  const runButton = $('[data-action="run"]');
  const stepButton = $('[data-action="step"]');
  const resetButton = $('[data-action="reset"]');
  const setStatus = makeStatus(root);
  const fields = bindFields(root);
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
    let text;
    if (shown === 0) {
      text = `Loss ${data.loss.toFixed(4)} on the fixed batch (${data.B} × ${data.T} tokens). Press Play or Step.`;
    } else if (shown < n) {
      text = `Step ${shown} of ${n}: the gradient of ${current} is finished.`;
    } else {
      text = `All ${n} gradients finished. wte came last: the output head reuses it, so its gradient ` +
        `is the head's share plus the embedding's, and the embedding's share is known only at the bottom.`;
    }
    // a single Step is a reader's action: say it; Play's steps are only shown (the end is announced)
    setStatus(root.dataset.status, text, timer || shown === 0 ? false : "now");
  }

  function pause() {
    if (timer) clearInterval(timer);
    timer = null;
    runButton.textContent = "Play";
  }

  function step() {
    if (!data) return;
    if (shown < data.backward.length) shown += 1;
    if (shown >= data.backward.length) {
      pause();
      root.dataset.result = JSON.stringify({ order: data.backward.map((r) => r.name), forward: data.forward,
        norms: data.backward.map((r) => r.grad_norm), loss: data.loss });
      root.dataset.status = "done";
    }
    render();
  }

  async function load() {
    pause();
    delete root.dataset.result;
    fields.clearErrors();
    try {
      data = await client.call("backprop_order", fields.values());
      shown = 0;
      root.dataset.status = "ready";
      render();
    } catch (err) {
      data = null;
      reportError(err, { fields, setStatus });
    }
  }

  if (!(await startPython(client, setStatus, [runButton, stepButton, resetButton]))) return;
  await load();
  for (const b of [runButton, stepButton, resetButton]) b.disabled = false;
  fields.input("weights").addEventListener("change", load);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!data) return;
    if (timer) {
      pause();
      setStatus("ready", `Paused at step ${shown} of ${data.backward.length}.`, "now");
      return;
    }
    if (shown >= data.backward.length) { shown = 0; delete root.dataset.result; }
    runButton.textContent = "Pause";
    setStatus("running", undefined, false);
    setStatus.announcer.say("Playing the backward pass.");
    timer = setInterval(step, STEP_MS);
  });
  stepButton.addEventListener("click", () => { pause(); if (root.dataset.status !== "done") root.dataset.status = "ready"; step(); });
  resetButton.addEventListener("click", () => { pause(); shown = 0; delete root.dataset.result; root.dataset.status = "ready"; render(); });
}
