// Glossary terms in the chapters (a.gloss-term, build.py): on a screen with hover or a keyboard the
// term's sentence shows on hover or focus (site.css). On a touch screen a tap is the only way to ask,
// and it would follow the link: there the first tap on a term shows its sentence, kept inside the
// screen, and a second tap on the same term follows the link to its entry; a tap elsewhere hides it.

const touch = window.matchMedia("(hover: none)");
let shown = null;

function hide() {
  if (!shown) return;
  delete shown.dataset.shown;
  shown.style.removeProperty("--term-shift");
  shown = null;
}

export function watchTerms() {
  document.addEventListener("click", (event) => {
    const term = event.target.closest && event.target.closest("a.gloss-term");
    if (!touch.matches || term === shown) {
      if (!term) hide();
      return; // not a touch screen, or the second tap: the link is followed
    }
    hide();
    if (!term) return;
    event.preventDefault();
    // the sentence is at most min(22rem, 80vw) wide from the term's left edge: shift it left if it
    // would run off the screen's right edge
    const screenWidth = Math.min(window.innerWidth, window.screen.width || Infinity); // the page may have zoomed out
    const room = screenWidth - 8 - term.getBoundingClientRect().left;
    const widest = Math.min(22 * parseFloat(getComputedStyle(document.documentElement).fontSize), 0.8 * screenWidth);
    if (room < widest) term.style.setProperty("--term-shift", `${Math.round(room - widest)}px`);
    term.dataset.shown = "true";
    shown = term;
  });
}

// Figures (span.fig[data-source], build.py's figure()): a number's source (its label, results key and
// seeds) shows in one popover, fixed to the viewport so that a table's scroll box cannot clip it, on
// hover where there is hover, on keyboard focus of its link, and on a touch screen's first tap; as with
// the terms, a second tap follows a measured figure's link to its row of the results page, and a tap
// elsewhere or Escape hides it; it follows its number when the page scrolls.

let pop = null;
let figureShown = null;
let figureTapped = null; // shown by a tap (a tap's focus shows it first, and must not count as the first tap)

function popover() {
  if (!pop) {
    pop = document.createElement("div");
    pop.className = "fig-pop";
    pop.id = "fig-pop";
    pop.setAttribute("role", "tooltip");
    pop.hidden = true;
    document.body.appendChild(pop);
  }
  return pop;
}

function showFigure(fig) {
  if (figureShown === fig) return;
  hideFigure();
  const box = popover();
  box.textContent = fig.dataset.source;
  box.hidden = false;
  fig.dataset.shown = "true";
  fig.querySelector("a")?.setAttribute("aria-describedby", box.id);
  figureShown = fig;
  place();
}

// Below the number, or above it when there is no room below, kept inside the screen's width; hidden
// once the number has scrolled out of sight.
function place() {
  if (!figureShown) return;
  const box = popover();
  const r = figureShown.getBoundingClientRect();
  if (r.bottom < 0 || r.top > window.innerHeight) {
    hideFigure();
    return;
  }
  const width = Math.min(window.innerWidth, document.documentElement.clientWidth);
  const left = Math.max(8, Math.min(r.left, width - 8 - box.offsetWidth));
  const below = r.bottom + 6;
  const top = below + box.offsetHeight <= window.innerHeight - 4 ? below : Math.max(4, r.top - 6 - box.offsetHeight);
  box.style.left = `${Math.round(left)}px`;
  box.style.top = `${Math.round(top)}px`;
}

function hideFigure() {
  if (!figureShown) return;
  delete figureShown.dataset.shown;
  figureShown.querySelector("a")?.removeAttribute("aria-describedby");
  figureShown = null;
  figureTapped = null;
  popover().hidden = true;
}

const hover = window.matchMedia("(hover: hover)");
const figureAt = (target) => (target && target.closest ? target.closest(".fig[data-source]") : null);

export function watchFigures() {
  document.addEventListener("mouseover", (event) => {
    if (!hover.matches) return;
    const fig = figureAt(event.target);
    if (fig) showFigure(fig);
  });
  document.addEventListener("mouseout", (event) => {
    if (!hover.matches || !figureShown) return;
    if (figureAt(event.relatedTarget) === figureShown) return; // still over the same number
    if (figureShown.contains(document.activeElement)) return; // it has focus: it stays until blur
    hideFigure();
  });
  document.addEventListener("focusin", (event) => {
    const fig = figureAt(event.target);
    if (fig) showFigure(fig);
    else hideFigure();
  });
  document.addEventListener("focusout", (event) => {
    if (figureShown && !figureShown.contains(event.relatedTarget)) hideFigure();
  });
  document.addEventListener("click", (event) => {
    const fig = figureAt(event.target);
    if (!touch.matches) return; // with a mouse, the click follows the link
    if (!fig) {
      hideFigure();
      return;
    }
    if (fig === figureTapped && fig.querySelector("a")) return; // the second tap: the link is followed
    if (fig === figureTapped) {
      hideFigure();
      return;
    }
    event.preventDefault();
    showFigure(fig);
    figureTapped = fig;
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") hideFigure();
  });
  let placing = false;
  window.addEventListener("scroll", () => {
    if (!figureShown || placing) return;
    placing = true;
    requestAnimationFrame(() => {
      placing = false;
      place();
    });
  }, { passive: true, capture: true });
}
