// One training window (pylib.web.data_ops.window): inputs x and targets y = x shifted by one.
// Tokens from the corpus are shown with textContent.

import { startPython, statusSetter, widgetParts } from "../widget-kit.js";

const SHOWN = { "\n": "↵", " ": "␣", "␄": "EOS" }; // ␄ is missing from many fonts
const show = (ch) => SHOWN[ch] ?? ch;

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const cells = $('[data-role="cells"]');
  const cellTemplate = $('template[data-role="cell"]');
  let maxStart = null;
  const setStatus = statusSetter(root, message);

  const showWindow = async () => {
    form.elements.start.removeAttribute("aria-invalid");
    delete root.dataset.result;
    try {
      const w = await client.call("data_window", { split: form.elements.split.value, start: form.elements.start.value });
      maxStart = w.max_start;
      cells.replaceChildren(...w.x.map((x, t) => {
        const cell = cellTemplate.content.firstElementChild.cloneNode(true);
        cell.querySelector(".dw-pos").textContent = t;
        cell.querySelector(".dw-x").textContent = show(x);
        cell.querySelector(".dw-y").textContent = show(w.y[t]);
        if (x === "␄") cell.classList.add("eos");
        return cell;
      }));
      root.dataset.result = JSON.stringify({ start: w.start, x: w.x.join(""), y: w.y.join("") });
      setStatus("done", `Window at position ${w.start.toLocaleString("en")} (positions 0–${w.max_start.toLocaleString("en")}): ` +
        `${w.block_size + 1} tokens give ${w.block_size} inputs and ${w.block_size} targets.`);
    } catch (err) {
      if (err.kind === "input") form.elements.start.setAttribute("aria-invalid", "true");
      setStatus("error", err.message);
    }
  };

  if (!(await startPython(client, setStatus, [runButton]))) return;
  form.addEventListener("submit", (e) => { e.preventDefault(); showWindow(); });
  $('[data-action="random"]').addEventListener("click", () => {
    form.elements.start.value = String(Math.floor(Math.random() * ((maxStart ?? 100000) + 1)));
    showWindow();
  });
  await showWindow();
  runButton.disabled = false;
}
