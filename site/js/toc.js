// The page's contents (site/templates/contents.html): marks the section being read in the sidebar
// with aria-current="location" (nav.css highlights it) and keeps that link in view inside the sidebar.
// The contents work without this script; it only adds the highlight.

const side = document.querySelector('[data-role="toc"]');

function setUp(nav) {
  const links = [...nav.querySelectorAll('a[href^="#"]')];
  const targets = links
    .map((a) => [a, document.getElementById(decodeURIComponent(a.hash.slice(1)))])
    .filter(([, el]) => el);
  if (!targets.length) return;
  let current = null;
  let queued = false;

  const update = () => {
    queued = false;
    if (getComputedStyle(nav).display === "none") return; // the narrow layout: the sidebar is not shown
    const line = Math.min(160, window.innerHeight / 4); // a heading above this line has been reached
    let found = null;
    for (const [a, el] of targets) {
      if (el.getBoundingClientRect().top <= line) found = a;
      else break;
    }
    if (found === current) return;
    if (current) current.removeAttribute("aria-current");
    current = found;
    if (!current) return;
    current.setAttribute("aria-current", "location");
    // keep it visible in the sidebar's own scroll box, without scrolling the page
    const box = nav.getBoundingClientRect(), r = current.getBoundingClientRect();
    if (r.top < box.top + 8) nav.scrollTop -= box.top + 8 - r.top;
    else if (r.bottom > box.bottom - 8) nav.scrollTop += r.bottom - box.bottom + 8;
  };
  const queue = () => {
    if (!queued) { queued = true; requestAnimationFrame(update); }
  };
  window.addEventListener("scroll", queue, { passive: true });
  window.addEventListener("resize", queue);
  update();
}

if (side) setUp(side);
