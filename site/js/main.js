// Finds every [data-widget] element on the page and mounts its widget module.
// Python starts when the page has widgets (pyodide-client.js starts it at the first widget, from
// <head>; this is the fallback).

import * as client from "./pyodide-client.js";
import "./offline.js"; // the service worker: the site saved for offline use after this visit
import { watchScrollers } from "./scrollers.js";
import { watchFigures, watchTerms } from "./terms.js";
import { markSettled } from "./widget-kit.js";

watchScrollers(); // code, tables and formulas that scroll sideways take keyboard focus while they overflow
watchTerms(); // on a touch screen, a glossary term's first tap shows its sentence, the second follows it
watchFigures(); // a number's source, in a popover on hover, focus or tap

function widgetFailed(root, message) {
  root.dataset.status = "error";
  const box = root.querySelector('[data-role="message"]') || root;
  box.textContent = message;
  markSettled(root);
}

// The chapter list is open on wide screens and collapsed on phones, where it would fill half the first
// screen (without JavaScript it stays open).
const narrow = window.matchMedia("(max-width: 699px)");
const chapterList = document.querySelector(".chapter-nav-list");
if (chapterList) {
  const fit = () => { chapterList.open = !narrow.matches; };
  fit();
  narrow.addEventListener("change", fit);
}

const roots = [...document.querySelectorAll("[data-widget]")];

// A widget's form never submits: before its module has mounted (or if Python never starts), Enter in
// a field would otherwise reload the page and lose what the reader typed.
for (const form of document.querySelectorAll("[data-widget] form")) {
  form.addEventListener("submit", (event) => event.preventDefault());
}
if (roots.length && !client.onDemand()) client.start().catch(() => {}); // failures are shown by the client

for (const root of roots) {
  const name = root.dataset.widget;
  if (!/^[a-z0-9-]+$/.test(name)) {
    widgetFailed(root, `Unknown widget "${name}".`);
    continue;
  }
  // site/js/widgets/<name>.js goes with site/templates/widgets/<name>.html
  import(`./widgets/${name}.js`)
    .then((module) => module.mount(root, client))
    .catch((err) => widgetFailed(root, `This widget failed to start: ${err.message}`));
}
