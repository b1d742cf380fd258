// Keeps the focus in a calculator widget after its Run button is pressed. widget-kit.js's
// calculator().run() disables the buttons while Python computes, and a focused button that is disabled
// drops the focus to <body>; this puts it back once the call has ended: on the first field marked
// invalid after bad input (as runStreamed does), else on Run. For the integrator: it belongs in
// calculator() itself (remember the focused button before disabling it, focus it again in run()'s finally).

export function keepFocusOnRun(root) {
  const run = root.querySelector('[data-action="run"]');
  const form = root.querySelector('[data-role="form"]');
  if (!run || !form) return;
  let had = false;
  form.addEventListener("submit", () => { had = document.activeElement === run; }, true);
  new MutationObserver(() => {
    if (!had || !["done", "error"].includes(root.dataset.status)) return;
    had = false;
    // after run()'s finally has enabled the button again. Chromium may still report the disabled button
    // as focused (focus fixup waits for the next rendering), so Run counts as lost focus too.
    setTimeout(() => {
      const now = document.activeElement;
      if (now && now !== document.body && now !== run) return; // the reader has moved on
      const invalid = root.dataset.status === "error" && root.querySelector('[aria-invalid="true"]');
      (invalid || run).focus();
    }, 0);
  }).observe(root, { attributes: true, attributeFilter: ["data-status"] });
}
