// The results page (templates/results.html): the folded table of every value opens when a link lands on
// one of its rows (a chapter's measured figure links to results.html#key-<key>), and the filter keeps
// the rows whose text holds every word typed, in the chapter chosen; sections with no such row are
// hidden, and the count of matching rows is announced.

const page = document.querySelector(".results-page");

function openTarget() {
  const id = decodeURIComponent(location.hash.slice(1));
  const target = id && document.getElementById(id);
  const box = target && target.closest("details");
  if (box && !box.open) {
    box.open = true;
    target.scrollIntoView();
  }
}

function rowsOf(section) {
  return [...section.querySelectorAll("tbody tr, .results-summary li")];
}

function setUpFilter() {
  const form = page.querySelector('[data-role="results-filter"]');
  const text = form.querySelector('[data-role="filter-text"]');
  const chapter = form.querySelector('[data-role="filter-chapter"]');
  const count = form.querySelector('[data-role="filter-count"]');
  const sections = [...page.querySelectorAll(".results-chapter")];
  const apply = () => {
    const words = text.value.toLowerCase().split(/\s+/).filter(Boolean).slice(0, 20);
    const only = chapter.value;
    let shown = 0;
    for (const section of sections) {
      const inChapter = !only || section.dataset.chapter === only;
      let matches = 0;
      for (const row of rowsOf(section)) {
        const hit = inChapter && words.every((w) => row.textContent.toLowerCase().includes(w));
        row.hidden = !hit && words.length > 0;
        if (hit) matches += 1;
      }
      section.hidden = !inChapter || (words.length > 0 && matches === 0);
      if (words.length && matches) {
        for (const box of section.querySelectorAll("details")) if (box.querySelector("tbody tr:not([hidden])")) box.open = true;
      }
      if (!section.hidden) shown += words.length ? matches : rowsOf(section).length;
    }
    count.textContent = words.length || only ? `${shown.toLocaleString("en")} row${shown === 1 ? "" : "s"} match.` : "";
  };
  let timer = null;
  text.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(apply, 150);
  });
  chapter.addEventListener("change", apply);
  form.hidden = false; // without JavaScript there is no filter, and every row shows
}

if (page) {
  setUpFilter();
  openTarget();
  window.addEventListener("hashchange", openTarget);
}
