// Editable code cells: each [data-code-cell] root (site/templates/cell.html) becomes a code editor with
// Run, Stop and Reset. The code runs in the cells' own Python worker: PyScript 0.6.60's PyWorker
// on the site's vendored Pyodide (the same pyodide/ URLs as the widgets' worker, so the browser's
// cache serves the 10 MB wasm), with NumPy and the pylib wheel (site/js/cells-worker.py). It is a
// separate worker from the widgets' (site/js/pyodide-client.js), so stopping a cell never touches a
// widget.
//
// Stop: with cross-origin isolation (COOP/COEP headers), Pyodide's interrupt buffer raises
// KeyboardInterrupt in the running code and the worker stays warm; if the code does not stop
// within STOP_GRACE_MS, or without isolation, the worker is terminated and a new one started.
// The editor is PyScript's bundled CodeMirror 6. Tab moves focus on, as everywhere on the page (an editor
// that kept Tab would trap a keyboard reader in every cell); Ctrl+] and Ctrl+[ indent and un-indent, and
// Enter keeps the line's indentation.
//
// A cell's root gets data-status idle|loading|running|done|error|stopped and, after a run,
// data-result (the driver's JSON summary, pylib.web.cells). Output is text only (textContent).
//
// The reader's edit is kept in this browser (localStorage) until Reset: see "Saved edits" below.

import { siteRoot } from "./pyodide-client.js";
import { markSettled, SETTLED } from "./widget-kit.js";

// How long an interrupted run may take to stop before the worker is replaced. 1.5 s was exceeded once
// in a full test run on a busy 2-core machine; a needless restart costs the reader a new Python.
const STOP_GRACE_MS = 3000;
const START_TIMEOUT_MS = 180_000; // a worker that is not ready by then has failed
const OUTPUT_CHARS = 200_000; // characters kept in an output box (pylib.web.cells limits a run to less)

// ---------------------------------------------------------------------------
// PyScript, loaded once, with none of its page plugins (no py-editor, terminal or error banner)

let pyscriptModule = null;

function loadPyScript() {
  if (pyscriptModule) return pyscriptModule;
  // PyScript reads <py-config>/<mpy-config> once, when core.js is first imported: "!name" turns a
  // plugin off. Every plugin is off for both interpreter types; the cells use only PyWorker and
  // the bundled CodeMirror.
  const plugins = ["codemirror", "deprecations-manager", "donkey", "error", "py-editor", "py-game", "py-terminal"];
  for (const tag of ["py-config", "mpy-config"]) {
    if (document.querySelector(tag)) continue;
    const el = document.createElement(tag);
    el.hidden = true;
    el.textContent = JSON.stringify({ plugins: plugins.map((p) => `!${p}`) });
    document.body.append(el);
  }
  pyscriptModule = import(new URL("vendor/pyscript/core.js", siteRoot()).href);
  return pyscriptModule;
}

// ---------------------------------------------------------------------------
// The cells' worker: one per page, shared by its cells, one run at a time

class CellWorker {
  constructor() {
    this.generation = 0; // counts starts: a start that a restart overtook is dropped
    this.ready = null; // promise of the PyScript xworker
    this.xworker = null;
    this.interrupt = null; // Int32Array on a SharedArrayBuffer, when the page is cross-origin isolated
    this.onOutput = null; // (text, stream) of the current run
    this.abortRun = null; // rejects the current run's promise (the worker was terminated)
    this.running = null; // the current run's promise
  }

  start() {
    if (this.ready) return this.ready;
    const generation = ++this.generation;
    this.ready = this._start(generation);
    this.ready.catch(() => {
      if (this.generation === generation) this.ready = null; // a failed start is retried by the next Run
    });
    return this.ready;
  }

  async _start(generation) {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error("Python did not start within three minutes.")), START_TIMEOUT_MS);
    });
    const boot = this._boot();
    try {
      const { xworker, interrupt } = await Promise.race([boot, timeout]);
      if (generation !== this.generation) throw new Error("Python was restarted.");
      this.xworker = xworker;
      this.interrupt = interrupt;
      return xworker;
    } catch (err) {
      boot.then((late) => late.xworker.terminate(), () => {}); // a worker that comes up after all is not kept
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  async _boot() {
    const { PyWorker } = await loadPyScript();
    // PyWorker needs PyScript's own set-up done; it defines <py-script> when it is.
    await customElements.whenDefined("py-script");
    const root = siteRoot();
    const interpreter = new URL("pyodide/pyodide.mjs", root).href;
    // No "packages": PyScript would install them with micropip; install() loads NumPy with Pyodide.
    const config = { interpreter };
    const program = new URL("./cells-worker.py", import.meta.url).href;
    // version: PyScript loads the interpreter from this URL instead of its default CDN address.
    const xworker = await PyWorker(program, { config, version: interpreter });
    // The wheel's name has a "+" (its local version): sent as %2B, which every static host reads as
    // "+" (some read a bare "+" in a path as a space) and the site's service worker stores it under.
    await xworker.sync.install(new URL(document.documentElement.dataset.wheel, root).href.replace(/\+/g, "%2B"));
    xworker.sync.cell_output = (text, stream) => this.onOutput?.(String(text), String(stream));
    let interrupt = null;
    if (globalThis.crossOriginIsolated) {
      interrupt = new Int32Array(new SharedArrayBuffer(4));
      await xworker.sync.set_interrupt(interrupt);
    }
    return { xworker, interrupt };
  }

  /** Run cell name with code; resolves with pylib.web.cells.run's result (status stopped if terminated). */
  run(name, code, onOutput) {
    return this._call((xworker, dataUrl) => xworker.sync.run(name, code, dataUrl), onOutput);
  }

  /** Check an answer to an exercise (pylib.exercises, through pylib.web.cells.check_in_page). */
  check(exerciseId, answer, onOutput) {
    return this._call((xworker, dataUrl) => xworker.sync.check(exerciseId, answer, dataUrl), onOutput);
  }

  async _call(send, onOutput) {
    const xworker = await this.start();
    if (this.interrupt) Atomics.store(this.interrupt, 0, 0);
    this.onOutput = onOutput;
    const aborted = new Promise((resolve) => {
      this.abortRun = () => resolve({ status: "stopped", message: "Stopped: Python was restarted.", restarted: true });
    });
    const call = send(xworker, new URL("data/", siteRoot()).href).then((json) => JSON.parse(json));
    this.running = Promise.race([call, aborted]);
    try {
      return await this.running;
    } finally {
      this.running = null;
      this.abortRun = null;
      this.onOutput = null;
    }
  }

  /** Stop the current run: interrupt it, or replace the worker if it does not stop in time. */
  async stop() {
    const running = this.running;
    if (!running) return;
    if (this.interrupt) {
      Atomics.store(this.interrupt, 0, 2); // SIGINT: KeyboardInterrupt at the next bytecode check
      const stopped = await Promise.race([
        running.then(() => true, () => true),
        new Promise((resolve) => setTimeout(() => resolve(false), STOP_GRACE_MS)),
      ]);
      if (stopped) return;
    }
    this.restart();
  }

  restart() {
    this.xworker?.terminate();
    this.xworker = null;
    this.ready = null;
    this.abortRun?.();
    this.start().catch(() => {}); // warm again for the next Run; a failure shows then
  }
}

export const worker = new CellWorker();
let busyCell = null; // the cell (or exercise) whose run is in progress: one at a time per page

/** Take the page's one Python run for root; false if another cell or exercise has it. */
export function claimRun(root) {
  if (busyCell && busyCell !== root) return false;
  busyCell = root;
  return true;
}

export function releaseRun(root) {
  if (busyCell === root) busyCell = null;
}

export const runningRoot = () => busyCell;

// ---------------------------------------------------------------------------
// The editor: PyScript's CodeMirror, coloured with the site's code classes (Pygments' names, so
// site.css's light and dark code colours apply), keyboard-usable

let editorKit = null;

export function loadEditorKit() {
  if (editorKit) return editorKit;
  editorKit = (async () => {
    const { codemirror } = await loadPyScript();
    const [core, state, python, language, view, commands] = await Promise.all([
      codemirror.core, codemirror.state, codemirror.python, codemirror.language, codemirror.view, codemirror.commands,
    ]);
    return { core, state, python, language, view, commands, highlight: pygmentsHighlight(python, language) };
  })();
  return editorKit;
}

// The highlight tags of the Python grammar by name (CodeMirror names its standard tags), mapped to
// the Pygments classes the static code blocks use. Tags are found on the grammar's own node types,
// as PyScript's bundle does not export @lezer/highlight's tag list.
const TAG_CLASSES = {
  keyword: "k", controlKeyword: "k", definitionKeyword: "k", moduleKeyword: "kn", operatorKeyword: "ow",
  bool: "kc", null: "kc", self: "bp",
  string: "s", docString: "sd", special: "si",
  comment: "c1", lineComment: "c1",
  number: "m", integer: "mi", float: "mf",
  operator: "o", arithmeticOperator: "o", compareOperator: "o", logicOperator: "o", updateOperator: "o",
  className: "nc", typeName: "nc", meta: "nd",
};

function pygmentsHighlight(python, language) {
  const byName = new Map();
  const modifiedFunctionNames = new Set();
  for (const type of python.pythonLanguage.parser.nodeSet.types) {
    for (const prop of Object.values(type.props || {})) {
      for (const tag of prop?.tags || []) {
        for (const t of tag.set || []) if (t?.name && !byName.has(t.name)) byName.set(t.name, t);
        // function(definition(variableName)): a def's name; CodeMirror marks it with two modifiers
        if (tag.base?.name === "variableName" && (tag.modified?.length || 0) >= 2) modifiedFunctionNames.add(tag);
      }
    }
  }
  const specs = [];
  for (const [name, cls] of Object.entries(TAG_CLASSES)) {
    const tag = byName.get(name);
    if (tag) specs.push({ tag, class: cls });
  }
  for (const tag of modifiedFunctionNames) specs.push({ tag, class: "nf" });
  if (!specs.length) return null;
  return language.syntaxHighlighting(language.HighlightStyle.define(specs));
}

// Colours through the site's variables, so the editor follows light and dark.
function editorTheme(core) {
  return core.EditorView.theme({
    "&": { color: "var(--fg, var(--text))", backgroundColor: "var(--surface, var(--panel))" },
    ".cm-content": { caretColor: "var(--fg, var(--text))", fontFamily: "var(--mono, ui-monospace, monospace)" },
    ".cm-cursor, .cm-dropCursor": { borderLeftColor: "var(--fg, var(--text))" },
    ".cm-gutters": {
      backgroundColor: "var(--surface, var(--panel))", color: "var(--muted)",
      borderRight: "1px solid var(--border, var(--rule))",
    },
    ".cm-activeLine": { backgroundColor: "transparent" },
    ".cm-activeLineGutter": { backgroundColor: "transparent", color: "var(--fg, var(--text))" },
    // the ring from the moment the text takes focus: CodeMirror sets .cm-focused a few ms later
    "&.cm-focused, &:focus-within": { outline: "3px solid var(--focus, var(--accent))", outlineOffset: "2px" },
    "&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-selectionBackground, .cm-content ::selection":
      { backgroundColor: "color-mix(in srgb, var(--accent) 30%, transparent)" },
    ".cm-matchingBracket, &.cm-focused .cm-matchingBracket": {
      backgroundColor: "color-mix(in srgb, var(--accent) 22%, transparent)", outline: "1px solid var(--accent)",
    },
  });
}

export function makeEditor(kit, parent, doc, { label, describedBy, onRun, onChange = null }) {
  const { core, state, python, language, view, commands, highlight } = kit;
  const run = () => {
    onRun();
    return true;
  };
  const extensions = [
    view.lineNumbers(),
    view.highlightSpecialChars(),
    commands.history(),
    view.drawSelection(),
    language.indentOnInput(),
    language.bracketMatching(),
    language.indentUnit.of("    "),
    python.python(),
    view.keymap.of([
      { key: "Ctrl-Enter", run, preventDefault: true },
      { key: "Mod-Enter", run, preventDefault: true },
      { key: "Shift-Enter", run, preventDefault: true },
      ...commands.defaultKeymap, // with Mod-] and Mod-[ (indent, un-indent) and Enter that keeps the indentation
      ...commands.historyKeymap,
    ]),
    core.EditorView.contentAttributes.of({ "aria-label": label, "aria-describedby": describedBy }),
    // Long lines wrap and the editor grows with its code: nothing scrolls inside it, and a phone
    // never scrolls sideways.
    core.EditorView.lineWrapping,
    editorTheme(core),
  ];
  if (highlight) extensions.push(highlight);
  // onChange(): after every change to the text (typed, pasted, or set by Reset)
  if (onChange) extensions.push(core.EditorView.updateListener.of((update) => { if (update.docChanged) onChange(); }));
  return new core.EditorView({ state: state.EditorState.create({ doc, extensions }), parent });
}

// ---------------------------------------------------------------------------
// Saved edits: a cell's edited code is kept in this browser's localStorage (nothing is sent anywhere)
// until the reader presses Reset, under "course-cell-edit:<page path>#<cell id>" (the page path from
// the site's root), as JSON {source: a hash of the cell's original code, code}. A later build whose
// cell shows different code has another hash: the saved edit is then dropped, not put back over code
// it was not made to. Storage that is full or blocked (a private mode) leaves the edit working for
// the visit, and the cell's note says it could not be saved.

const SAVED_PREFIX = "course-cell-edit:";
const SAVE_DELAY_MS = 300; // the text is saved once the keys pause (and when the page is left)

/** cyrb53, a fast 53-bit string hash (not cryptographic: it only tells one original from another). */
export function sourceHash(text) {
  let h1 = 0xdeadbeef, h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36);
}

export function savedEditKey(root) {
  const site = new URL(siteRoot()).pathname;
  const page = location.pathname.startsWith(site) ? location.pathname.slice(site.length) : location.pathname;
  return `${SAVED_PREFIX}${page}#${root.id}`;
}

function forgetEdit(key) {
  try { localStorage.removeItem(key); } catch { /* blocked: nothing was kept */ }
}

/** The edit saved for this cell's original (hash), or null; a stale or unreadable entry is removed. */
function savedEdit(key, hash) {
  let raw = null;
  try { raw = localStorage.getItem(key); } catch { return null; }
  if (raw === null) return null;
  try {
    const entry = JSON.parse(raw);
    if (entry && entry.source === hash && typeof entry.code === "string") return entry.code;
  } catch { /* not JSON: dropped below */ }
  forgetEdit(key);
  return null;
}

/** Save code as this cell's edit; false if the browser would not keep it (full or blocked). */
function saveEdit(key, hash, code) {
  try {
    localStorage.setItem(key, JSON.stringify({ source: hash, code }));
    return true;
  } catch {
    forgetEdit(key); // an older saved edit must not come back in its place
    return false;
  }
}

const SAVED_NOTE = "Your edit, saved in this browser; Reset restores the original.";
const UNSAVED_NOTE = "Your edit could not be saved in this browser (its storage is full or turned off): "
  + "it lasts until you leave this page. Reset restores the original.";

// ---------------------------------------------------------------------------
// One cell

export function formatSeconds(s) {
  return s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`;
}

async function mount(root) {
  const $ = (role) => root.querySelector(`[data-role="${role}"]`);
  const source = root.dataset.source.replace(/\n+$/, ""); // no empty last line in the editor
  const name = root.dataset.codeCell;
  const attr = name.split(".").pop();
  const [runButton, stopButton, resetButton, statusBox, output, outputFrame] =
    ["run", "stop", "reset", "status", "output", "output-frame"].map($);

  const setStatus = (status, text) => {
    root.dataset.status = status;
    if (text !== undefined) statusBox.textContent = text;
    if (SETTLED.includes(status)) markSettled(root);
  };

  let kit;
  try {
    kit = await loadEditorKit();
  } catch (err) {
    setStatus("error", `The editor could not be loaded (${err.message}); the code above is pylib's.`);
    return;
  }
  const keys = $("keys");
  const note = $("saved");
  const key = savedEditKey(root);
  const hash = sourceHash(source);
  // data-saved: "saved" (the edit is in this browser), "unsaved" (it could not be kept), or absent
  // (the code is the original)
  const showNote = (state) => {
    if (state) root.dataset.saved = state;
    else delete root.dataset.saved;
    note.textContent = state === "saved" ? SAVED_NOTE : state === "unsaved" ? UNSAVED_NOTE : "";
    note.hidden = !state;
  };
  let saveTimer = null;
  let editor = null;
  const saveNow = () => {
    clearTimeout(saveTimer);
    saveTimer = null;
    const code = editor.state.doc.toString();
    if (code === source) {
      forgetEdit(key);
      showNote(null);
    } else {
      showNote(saveEdit(key, hash, code) ? "saved" : "unsaved");
    }
  };
  const restored = savedEdit(key, hash);
  editor = makeEditor(kit, $("editor"), restored ?? source, {
    label: `Code of ${attr}, editable`,
    describedBy: `${root.querySelector(".cell-summary").id} ${note.id} ${keys.id}`,
    onRun: () => runButton.click(),
    onChange: () => {
      clearTimeout(saveTimer);
      saveTimer = setTimeout(saveNow, SAVE_DELAY_MS);
    },
  });
  if (restored !== null && restored !== source) showNote("saved");
  // an edit typed just before the reader leaves is saved then (the timer would not run)
  const flush = () => { if (saveTimer !== null) saveNow(); };
  window.addEventListener("pagehide", flush);
  document.addEventListener("visibilitychange", () => { if (document.visibilityState === "hidden") flush(); });
  $("static").hidden = true;
  $("editor").hidden = false;
  $("controls").hidden = false;
  keys.hidden = false;

  // Start Python when the reader first shows interest in a cell, so Run is quicker.
  const warm = () => worker.start().catch(() => {});
  editor.contentDOM.addEventListener("focus", warm, { once: true });

  let current = null; // the run in progress: {cancelled}
  let outputChars = 0;
  const appendOutput = (text, stream) => {
    outputFrame.hidden = false;
    if (outputChars >= OUTPUT_CHARS) return;
    const kept = text.slice(0, OUTPUT_CHARS - outputChars);
    outputChars += kept.length;
    const atBottom = output.scrollTop + output.clientHeight >= output.scrollHeight - 4;
    if (stream === "err") {
      const span = document.createElement("span");
      span.className = "cell-stderr";
      span.textContent = kept;
      output.append(span);
    } else {
      output.append(document.createTextNode(kept));
    }
    if (atBottom) output.scrollTop = output.scrollHeight;
  };
  const clearOutput = () => {
    output.replaceChildren();
    outputChars = 0;
  };

  runButton.addEventListener("click", async () => {
    if (busyCell === root) return;
    if (!claimRun(root)) {
      setStatus(root.dataset.status, "Another cell or exercise on this page is running: stop it or wait for it first.");
      return;
    }
    runButton.disabled = true;
    stopButton.disabled = false;
    clearOutput();
    delete root.dataset.result;
    const t0 = performance.now();
    let firstOutput = null;
    const onOutput = (text, stream) => {
      if (firstOutput === null) {
        firstOutput = (performance.now() - t0) / 1000;
        root.dataset.firstOutput = firstOutput.toFixed(3); // seconds from Run to the first output (bench/)
      }
      appendOutput(text, stream);
    };
    if (!worker.xworker) setStatus("loading", "Starting Python for the cells (a few seconds the first time)…");
    const attempt = { cancelled: false };
    current = attempt;
    try {
      await worker.start();
      if (attempt.cancelled) {
        setStatus("stopped", "Stopped before it ran.");
        return;
      }
      setStatus("running", `Running ${attr}…`);
      const result = await worker.run(name, editor.state.doc.toString(), onOutput);
      if (result.result !== undefined && result.result !== null) root.dataset.result = JSON.stringify(result.result);
      const seconds = formatSeconds((performance.now() - t0) / 1000);
      if (result.status === "done") setStatus("done", `Finished in ${seconds}.`);
      else if (result.status === "stopped") {
        if (result.restarted) {
          appendOutput("\nStopped: the code did not stop when asked, so Python was restarted.\n", "err");
        }
        setStatus("stopped", result.restarted ? "Stopped (Python was restarted)." : "Stopped.");
      } else setStatus("error", `Error: ${result.message}`);
    } catch (err) {
      // Python did not start (or its worker failed): a short status, the details in the output.
      appendOutput(`${err && err.message ? err.message : err}\n`, "err");
      setStatus("error", "Error: Python could not be started for this cell; the output says why.");
    } finally {
      current = null;
      releaseRun(root);
      runButton.disabled = false;
      stopButton.disabled = true;
      // Stop had focus and is now disabled: keep the keyboard where the reader was.
      if (document.activeElement === stopButton || document.activeElement === document.body) runButton.focus();
    }
  });

  stopButton.addEventListener("click", () => {
    if (busyCell !== root) return;
    if (current && root.dataset.status === "loading") {
      current.cancelled = true; // Python is still starting: the code will not run
      statusBox.textContent = "Stopping: the code will not run…";
      return;
    }
    setStatus("running", "Stopping…");
    worker.stop();
  });

  resetButton.addEventListener("click", () => {
    editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: source } });
    clearTimeout(saveTimer);
    saveTimer = null;
    forgetEdit(key);
    showNote(null);
    if (busyCell !== root) {
      clearOutput();
      outputFrame.hidden = true;
      delete root.dataset.result;
      setStatus("idle", "The code is pylib's again.");
    }
  });

  // The editor's text, for the browser tests (they edit through the keyboard, as a reader does).
  root.cellCode = () => editor.state.doc.toString();
  root.dataset.mounted = "true";
}

// ---------------------------------------------------------------------------
// Mount each cell when it comes near the screen (the editor's code is then loaded once)

/** Mount each element with mount(el) once it comes within 800 px of the screen; a failed mount says so
 * in the element's status ("This <what> failed to start") and settles it. Cells and exercises use it. */
export function mountWhenNear(elements, mount, what) {
  const mountOnce = (el) => {
    if (el.dataset.mounting) return;
    el.dataset.mounting = "true";
    mount(el).catch((err) => {
      el.dataset.status = "error";
      const box = el.querySelector('[data-role="status"]');
      if (box) box.textContent = `This ${what} failed to start: ${err.message}`;
      markSettled(el);
    });
  };
  const pending = elements.filter((el) => !el.dataset.mounted);
  if (!("IntersectionObserver" in globalThis)) {
    for (const el of pending) mountOnce(el);
    return;
  }
  const seen = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (entry.isIntersecting) {
        seen.unobserve(entry.target);
        mountOnce(entry.target);
      }
    }
  }, { rootMargin: "800px 0px" });
  for (const el of pending) seen.observe(el);
}

mountWhenNear([...document.querySelectorAll("[data-code-cell]")], mount, "cell");
