// One training window (pylib.web.data_ops.window): inputs x and targets y = x shifted by one, through
// the kit's calculator. Tokens from the corpus are shown with textContent.

import { bindFields, calculator } from "../widget-kit.js";
import { keepFocus } from "./data-svg.js";

const SHOWN = { "\n": "↵", " ": "␣", "␄": "EOS" }; // ␄ is missing from many fonts
const show = (ch) => SHOWN[ch] ?? ch;

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const cells = $('[data-role="cells"]');
  const cellTemplate = $('template[data-role="cell"]');
  const random = $('[data-action="random"]');
  let maxStart = null;

  const fields = bindFields(root);
  const calc = calculator(root, client, {
    op: "data_window",
    fields,
    busy: [random],
    args: () => ({ split: fields.input("split").value, start: fields.input("start").value }),
    onError: () => cells.replaceChildren(),
    onResult(w) {
      maxStart = w.max_start;
      cells.replaceChildren(...w.x.map((x, t) => {
        const cell = cellTemplate.content.firstElementChild.cloneNode(true);
        cell.querySelector(".dw-pos").textContent = t;
        cell.querySelector(".dw-x").textContent = show(x);
        cell.querySelector(".dw-y").textContent = show(w.y[t]);
        if (x === "␄") cell.classList.add("eos");
        return cell;
      }));
      return {
        result: { start: w.start, x: w.x.join(""), y: w.y.join("") },
        text: `Window at position ${w.start.toLocaleString("en")} (positions 0–${w.max_start.toLocaleString("en")}): ` +
          `${w.block_size + 1} tokens give ${w.block_size} inputs and ${w.block_size} targets.`,
      };
    },
  });
  keepFocus(root);

  if (!(await calc.ready())) return;
  random.addEventListener("click", () => {
    fields.set("start", Math.floor(Math.random() * ((maxStart ?? 100000) + 1)));
    calc.run();
  });
  await calc.run();
}
