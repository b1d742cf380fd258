// The site search in the header (site/templates/search.html): MiniSearch (vendored from npm) over
// search-index.json, which build.py writes with builder/search_index.py — one document per chapter
// section and per glossary term, each with the URL of its anchor. Both are loaded on first use, not
// with the page. Results are built with DOM methods and textContent only: nothing from the index or
// the query is read as markup. Keys: Down arrow from the field into the results, Up/Down between them,
// Escape back to the field (and closes them), Enter in the field opens the first result; Tab also
// walks the results.

const MAX_QUERY = 200; // characters searched (the field's maxlength; a paste may be longer)
const MAX_TERMS = 12; // words searched: a pasted paragraph is not a query
const SHOWN = 20; // results listed
const SNIPPET = 170; // characters of context around the first match
const INDEX_VERSION = 1; // search_index.VERSION

const siteRoot = () => new URL(document.documentElement.dataset.siteRoot || "./", document.baseURI).href;

let engine = null; // a promise of {mini, docs}, made on first use

function loadEngine() {
  if (engine) return engine;
  const root = siteRoot();
  engine = (async () => {
    const [module, response] = await Promise.all([
      import(new URL("vendor/minisearch/index.js", root).href),
      fetch(new URL("search-index.json", root)),
    ]);
    if (!response.ok) throw new Error(`the search index could not be fetched (HTTP ${response.status})`);
    const index = await response.json();
    if (index.version !== INDEX_VERSION) throw new Error("the search index is from another build of the site: reload the page");
    const MiniSearch = module.default;
    const tokenize = (text) => MiniSearch.getDefault("tokenize")(text);
    const mini = new MiniSearch({
      fields: index.fields,
      storeFields: [],
      tokenize,
      searchOptions: {
        tokenize: (text) => tokenize(text).slice(0, MAX_TERMS),
        boost: { heading: 3, chapter: 1.5 },
        prefix: (term, i, terms) => i === terms.length - 1, // the word being typed
        fuzzy: (term) => (term.length > 4 ? 0.2 : false),
      },
    });
    mini.addAll(index.documents);
    return { mini, docs: index.documents };
  })();
  engine.catch(() => { engine = null; }); // a later search tries again
  return engine;
}

/** {results, all}: every word must match; if nothing has them all, any of them (all = false). */
function search(mini, query) {
  const every = mini.search(query, { combineWith: "AND" });
  if (every.length) return { results: every, all: true };
  return { results: mini.search(query, { combineWith: "OR" }), all: false };
}

const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A node list for the snippet: text around the first match, matched words in <mark>. */
function snippet(text, words) {
  const frag = document.createDocumentFragment();
  const pattern = words.length ? new RegExp(`(${words.map(escapeRegExp).join("|")})`, "giu") : null;
  let start = 0;
  if (pattern && text.length > SNIPPET * 1.4) { // a short text is shown whole
    const m = pattern.exec(text);
    pattern.lastIndex = 0;
    if (m) start = Math.max(0, m.index - 50);
  }
  if (start > 0) {
    const space = text.indexOf(" ", start);
    start = space >= 0 && space - start < 20 ? space + 1 : start;
  }
  let end = text.length <= SNIPPET * 1.4 ? text.length : Math.min(text.length, start + SNIPPET);
  if (end < text.length) {
    const space = text.lastIndexOf(" ", end);
    if (space > start + SNIPPET / 2) end = space;
  }
  const part = (start > 0 ? "…" : "") + text.slice(start, end) + (end < text.length ? "…" : "");
  const pieces = pattern ? part.split(pattern) : [part];
  pieces.forEach((piece, i) => {
    if (!piece) return;
    if (i % 2 === 1) { // split() puts the captured matches at odd positions
      const mark = document.createElement("mark");
      mark.textContent = piece;
      frag.appendChild(mark);
    } else {
      frag.appendChild(document.createTextNode(piece));
    }
  });
  return frag;
}

function span(cls, text) {
  const el = document.createElement("span");
  el.className = cls;
  el.textContent = text;
  return el;
}

function setUp(form) {
  const input = form.querySelector("input");
  const panel = form.querySelector('[data-role="search-panel"]');
  const status = form.querySelector('[data-role="search-status"]');
  const list = form.querySelector('[data-role="search-results"]');
  const root = siteRoot();
  let timer = null;
  let seq = 0;

  form.hidden = false;
  const links = () => [...list.querySelectorAll("a")];
  const open = () => { panel.hidden = false; };
  const close = () => { panel.hidden = true; };

  async function run() {
    const mine = ++seq;
    const query = input.value.slice(0, MAX_QUERY).trim();
    if (!query) {
      list.replaceChildren();
      status.textContent = "";
      close();
      return;
    }
    open();
    if (!engine) status.textContent = "Loading the search index…";
    let found;
    try {
      const { mini, docs } = await loadEngine();
      if (mine !== seq) return; // the reader typed on
      found = { ...search(mini, query), docs };
    } catch (err) {
      if (mine !== seq) return;
      list.replaceChildren();
      status.textContent = `Search could not start: ${err && err.message ? err.message : err}.`;
      return;
    }
    const { results, all, docs } = found;
    const items = results.slice(0, SHOWN).map((r) => {
      const doc = docs[r.id];
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = new URL(doc.url, root).href;
      a.className = "site-search-result";
      a.append(span("site-search-where", doc.kind === "glossary" ? "Glossary" : doc.chapter),
        span("site-search-heading", doc.heading));
      const text = document.createElement("span");
      text.className = "site-search-snippet";
      text.appendChild(snippet(doc.text, r.terms || []));
      a.appendChild(text);
      li.appendChild(a);
      return li;
    });
    list.replaceChildren(...items);
    const shown = `“${query.length > 60 ? query.slice(0, 60) + "…" : query}”`;
    if (!results.length) {
      status.textContent = `No results for ${shown}.`;
    } else {
      const count = `${results.length} result${results.length === 1 ? "" : "s"}`;
      const more = results.length > SHOWN ? `, the first ${SHOWN} shown` : "";
      status.textContent = all
        ? `${count} for ${shown}${more}.`
        : `No section has every word of ${shown}; ${count} with some of them${more}.`;
    }
  }

  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(run, 120);
  });
  input.addEventListener("focus", () => {
    loadEngine().catch(() => {}); // start loading while the reader types; errors show on search
  });
  input.addEventListener("click", () => { // back to a query whose results were closed
    if (input.value.trim() && list.children.length) open();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const first = links()[0];
    if (first) window.location.href = first.href;
    else { clearTimeout(timer); run(); }
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" && links().length) {
      event.preventDefault();
      open();
      links()[0].focus();
    } else if (event.key === "Escape") {
      if (!panel.hidden) close();
      else input.value = "";
    }
  });
  list.addEventListener("keydown", (event) => {
    const all = links();
    const i = all.indexOf(document.activeElement);
    if (i < 0) return;
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const j = i + (event.key === "ArrowDown" ? 1 : -1);
      if (j < 0) input.focus();
      else all[Math.min(j, all.length - 1)].focus();
    } else if (event.key === "Home" || event.key === "End") {
      event.preventDefault();
      all[event.key === "Home" ? 0 : all.length - 1].focus();
    } else if (event.key === "Escape") {
      event.preventDefault();
      close();
      input.focus();
    }
  });
  // Leaving the search (focus or a click elsewhere) closes the results; the query stays.
  form.addEventListener("focusout", (event) => {
    if (!event.relatedTarget || !form.contains(event.relatedTarget)) close();
  });
  document.addEventListener("pointerdown", (event) => {
    if (!form.contains(event.target)) close();
  });
}

const form = document.querySelector('[data-role="site-search"]');
if (form) setUp(form);
