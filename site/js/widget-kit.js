// Set-up shared by the widgets in site/js/widgets/: element lookups, the status line, invalid
// fields, starting Python and the Stop button. Each widget keeps its own logic.

// The usual parts of a widget: a scoped querySelector ($), its form, message, Run and Stop (null when absent).
export function widgetParts(root) {
  const $ = (sel) => root.querySelector(sel);
  return {
    $,
    form: $('[data-role="form"]'),
    message: $('[data-role="message"]'),
    runButton: $('[data-action="run"]'),
    stopButton: $('[data-action="stop"]'),
  };
}

// The widget's JSON config, from its <script data-role="config"> element.
export const readConfig = (root) => JSON.parse(root.querySelector('[data-role="config"]').textContent);

// Every [data-readout] element in the widget, by its data-readout name.
export const readoutMap = (root) =>
  Object.fromEntries([...root.querySelectorAll("[data-readout]")].map((el) => [el.dataset.readout, el]));

// setStatus(status, text): sets root's data-status and, when text is given, the message's text.
export const statusSetter = (root, message) => (status, text) => {
  root.dataset.status = status;
  if (text !== undefined) message.textContent = text;
};

// markInvalid(errors): aria-invalid on each named field that errors lists, removed from the others.
export const invalidMarker = (fields, fieldFor) => (errors) => {
  for (const name of fields) {
    const input = fieldFor(name);
    if (errors && errors[name]) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  }
};

// A failed run: reader-input errors mark their fields and are listed one per line; anything else
// (a worker or Python error) is shown as its message.
export function showRunError(err, setStatus, markInvalid) {
  if (err.kind === "input" && err.errors) {
    markInvalid(err.errors);
    setStatus("error", Object.values(err.errors).join("\n"));
  } else {
    setStatus("error", err.message);
  }
}

// Disables buttons, shows "Loading Python…", starts Python and runs setUp; false (error shown) on failure.
export async function startPython(client, setStatus, buttons, setUp = null) {
  for (const button of buttons) button.disabled = true;
  setStatus("loading", "Loading Python…");
  try {
    await client.start();
    if (setUp) await setUp();
  } catch (err) {
    setStatus("error", err.message);
    return false;
  }
  return true;
}

// Stop asks the worker to stop after the current chunk (only while isRunning()) and disables itself.
export function wireStop(stopButton, client, message, isRunning = () => true, text = "Stopping after this chunk…") {
  stopButton.addEventListener("click", () => {
    if (!isRunning()) return;
    client.stop();
    stopButton.disabled = true;
    message.textContent = text;
  });
}
