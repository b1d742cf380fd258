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
