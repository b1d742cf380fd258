// Boxes that scroll sideways inside the text (code, wide tables, long formulas) take keyboard focus
// while they overflow, so that a reader without a mouse can scroll them with the arrow keys (WCAG
// 2.1.1; axe's rule scrollable-region-focusable). A box that fits, or that holds a link or a field the
// keyboard already reaches, is left out of the tab order.

const BOXES = "main pre, main .katex-display, main table";
const FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";

function update(box) {
  // A code block off screen (content-visibility: auto, site.css) is not laid out until something asks
  // for the geometry of what it holds: asking for its last line's box lays it out, so that its width
  // is measured rather than taken for the box's own (it would never join the tab order otherwise).
  if (box.lastElementChild && getComputedStyle(box).contentVisibility === "auto") box.lastElementChild.getBoundingClientRect();
  const overflows = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
  const owned = box.dataset.scrollFocus === "1";
  if (overflows && !owned && !box.hasAttribute("tabindex") && !box.querySelector(FOCUSABLE)) {
    box.tabIndex = 0;
    box.dataset.scrollFocus = "1";
  } else if (!overflows && owned) {
    box.removeAttribute("tabindex");
    delete box.dataset.scrollFocus;
  }
}

export function watchScrollers(root = document) {
  const boxes = [...root.querySelectorAll(BOXES)];
  const all = () => boxes.forEach(update);
  all();
  if (typeof ResizeObserver !== "undefined") {
    const observer = new ResizeObserver((entries) => entries.forEach((e) => update(e.target)));
    boxes.forEach((box) => observer.observe(box));
  }
  if (document.fonts) document.fonts.ready.then(all);
  window.addEventListener("load", all);
}
