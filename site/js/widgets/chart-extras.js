// Two additions to the chart frames of the kit (site/templates/macros.html chart_frame, site/js/plot.js),
// for charts whose series are known only once a run has started: a legend written from JS (a model's
// layers, the worker counts typed in), with the macro's markup and kit-swatch classes, and the frame's
// placeholder put back when a chart has nothing to draw. Text set with textContent.

/** Replace the legend of the chart frame around (or at) el with entries [[swatch classes, text], …]. */
export function setLegend(el, entries) {
  const frame = el.closest(".kit-chart") || el;
  let ul = frame.querySelector(".chart-legend");
  if (!entries.length) { // nothing to name (yet)
    if (ul) ul.remove();
    return;
  }
  if (!ul) {
    ul = document.createElement("ul");
    ul.className = "chart-legend";
    ul.setAttribute("aria-label", "legend");
    frame.firstElementChild.after(ul);
  }
  ul.replaceChildren(...entries.map(([swatch, text]) => {
    const li = document.createElement("li");
    const sw = document.createElement("span");
    sw.className = `kit-swatch ${swatch}`;
    sw.setAttribute("aria-hidden", "true");
    li.append(sw, document.createTextNode(text));
    return li;
  }));
}

/** Series colour n (1–8, wrapping) for the i-th of several like series (layers, runs). */
export const nth = (i) => (i % 8) + 1;

/** Show text in the chart container el in place of a chart (the chart_frame macro's placeholder), for a
 *  chart with nothing to draw: the caller has destroyed its Plot, which leaves el empty. */
export function placeholder(el, text) {
  let p = el.querySelector('[data-role="placeholder"]');
  if (!p) {
    p = document.createElement("p");
    p.className = "kit-chart-placeholder";
    p.dataset.role = "placeholder";
    el.prepend(p);
  }
  p.textContent = text;
  const frame = el.closest(".kit-chart");
  const summary = frame && frame.querySelector('[data-role$="summary"]');
  if (summary) summary.textContent = "";
  const table = frame && frame.querySelector(".kit-chart-data table");
  if (table) {
    const td = document.createElement("td");
    td.textContent = "No data yet.";
    const body = document.createElement("tbody");
    body.appendChild(document.createElement("tr")).appendChild(td);
    table.replaceChildren(body);
  }
}

/** The placeholder texts of the chart containers els ({key: el}), as the template wrote them. */
export const placeholders = (els) =>
  Object.fromEntries(Object.entries(els).map(([k, el]) => [k, (el.querySelector('[data-role="placeholder"]') || {}).textContent || ""]));
