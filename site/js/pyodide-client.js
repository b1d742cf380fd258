// The page's one Python worker, shared by every widget. call(op, args, {onEvent}) returns a promise
// for the op's result; long ops (training) stream events to onEvent. The page root (<html>) gets
// data-pyodide="loading" | "ready" | "error".
//
// It starts as early as it can: on a page the build marked html[data-widgets], python-start.js (a
// classic script in <head>) has created the worker and sent it "init" before the body is parsed;
// start() takes that worker over. Elsewhere start() creates it, through the same python-start.js,
// when the parser reaches a widget (this module is loaded async from <head>) or main.js asks.
// Pages without widgets never start it.

let worker = null;
let ready = null;
let nextId = 1;
const pending = new Map(); // id -> {resolve, reject, onEvent}
const progressListeners = new Set();

/** Subscribe to loading progress: fn(message, fraction in [0, 1], or null when it cannot say).
 *  Returns an unsubscribe function. */
export function onProgress(fn) {
  progressListeners.add(fn);
  return () => progressListeners.delete(fn);
}

/** The site root as an absolute URL (a worker cannot resolve relative URLs against the page). */
export function siteRoot() {
  return new URL(document.documentElement.dataset.siteRoot || "./", document.baseURI).href;
}

function statusElements() {
  return {
    box: document.querySelector('[data-role="pyodide-status"]'),
    text: document.querySelector('[data-role="pyodide-status-text"]'),
    bar: document.querySelector('[data-role="pyodide-progress"]'),
    error: document.querySelector('[data-role="page-error"]'),
  };
}

// Before the parser has reached the status bar, what it should show waits for it.
let shown = null; // {message, fraction} | "hidden" | {error}
function render() {
  const { box, text, bar, error } = statusElements();
  if (!box || !shown) return;
  if (shown.error !== undefined) {
    box.hidden = true;
    if (!error) return;
    error.textContent = shown.error;
    error.hidden = false;
    return;
  }
  box.hidden = shown === "hidden";
  if (shown === "hidden") return;
  text.textContent = shown.message;
  if (shown.fraction === null || shown.fraction === undefined) bar.removeAttribute("value"); // indeterminate
  else bar.value = shown.fraction;
}
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", render);

function showProgress(message, fraction) {
  for (const fn of progressListeners) fn(message, fraction);
  shown = { message, fraction };
  render();
}

function hideProgress() {
  shown = "hidden";
  render();
}

/** A visible page-level error (text only). */
export function showPageError(message) {
  shown = { error: message };
  render();
}

export class WorkerError extends Error {
  constructor(message, { kind = "internal", errors = null } = {}) {
    super(message);
    this.kind = kind; // "input" (the reader's input), "busy", "fatal" or "internal"
    this.errors = errors; // for kind "input": {field: message}
  }
}

function failAll(message) {
  for (const { reject } of pending.values()) reject(new WorkerError(message, { kind: "fatal" }));
  pending.clear();
}

function onMessage(event) {
  const m = event.data;
  if (m.type === "event") {
    pending.get(m.id)?.onEvent?.(m.data);
  } else if (m.type === "result") {
    pending.get(m.id)?.resolve(m.value);
    pending.delete(m.id);
  } else if (m.type === "error") {
    pending.get(m.id)?.reject(new WorkerError(m.message, m));
    pending.delete(m.id);
  } else if (m.type === "progress") {
    showProgress(m.message, m.fraction);
  }
}

const CANNOT_RUN = "The live widgets on this page cannot run; the text, the measured numbers and the code are all here.";

/** A page whose widgets start Python only when the reader asks (html[data-widgets=on-demand]: the index). */
export const onDemand = () => document.documentElement.dataset.widgets === "on-demand";

// A start that has not finished after SLOW_START_MS says so on the status line, and asks that the
// next start in this tab boot Python afresh (SLOW_START_KEY in sessionStorage, read by python-start.js:
// the worker then drops its saved snapshot), in case the saved copy is what holds it up. A start that
// ends forgets the request. Seen once in the tests: a page still "Loading Python" after 60 s, where it
// is ready in 2-8 s. A slow connection can take longer on a first visit, so this is a note, not an error.
export const SLOW_START_KEY = "course-python-boot-afresh";
const SLOW_START_MS = Number(window.__coursePythonSlowStartMs) || 45_000; // tests set it smaller
function forgetSlowStart() {
  try {
    sessionStorage.removeItem(SLOW_START_KEY);
  } catch {
    // no storage: nothing was asked
  }
}

/** Start the worker (once); resolves with {python: version} when Python and pylib are ready. */
export function start() {
  if (ready) return ready;
  document.documentElement.dataset.pyodide = "loading";
  showProgress("Starting Python…", 0.02);
  let started = false; // the worker has reported ready
  const since = performance.now();
  const slow = setTimeout(() => {
    if (started || document.documentElement.dataset.pyodide !== "loading") return;
    try {
      sessionStorage.setItem(SLOW_START_KEY, "1");
    } catch {
      // no storage: a reload boots as before
    }
    const seconds = Math.round((performance.now() - since) / 1000);
    showProgress(`Python is slow to start (${seconds} s so far). If nothing changes, reload the page.`,
      shown && shown.fraction !== undefined ? shown.fraction : null);
  }, SLOW_START_MS);
  ready = new Promise((resolve, reject) => {
    const fatal = (message) => {
      clearTimeout(slow);
      forgetSlowStart();
      const text = `${message} ${CANNOT_RUN}`;
      document.documentElement.dataset.pyodide = "error";
      showPageError(text);
      failAll(text);
      reject(new WorkerError(text, { kind: "fatal" }));
    };
    let takeOver;
    try {
      if (!window.__coursePython) throw new Error("its starter static/js/python-start.js did not load");
      ({ worker, takeOver } = window.__coursePython.start());
    } catch (err) {
      fatal(`The page could not start its Python worker (${err && err.message ? err.message : err}).`);
      return;
    }
    const onWorkerMessage = (event) => {
      const m = event.data;
      if (m.type === "ready") {
        started = true;
        clearTimeout(slow);
        forgetSlowStart();
        document.documentElement.dataset.pyodide = "ready";
        document.documentElement.dataset.pythonBoot = m.info.boot; // "snapshot" or "booted" (worker.js)
        hideProgress();
        document.dispatchEvent(new CustomEvent("python-ready", { detail: m.info }));
        resolve(m.info);
      } else if (m.type === "fatal") {
        fatal(m.message);
      } else if (m.type === "data-error") {
        showPageError(m.message); // Python runs: only the widgets that need the file fail
      } else if (m.type === "progress-done") {
        if (started) hideProgress();
      } else {
        onMessage(event);
      }
    };
    const onWorkerError = (event) => {
      event.preventDefault();
      const why = event.message || "its script static/js/worker.js did not load or did not run";
      fatal(started ? `The Python worker stopped with an error (${why}).`
        : `The page could not start its Python worker (${why}).`);
    };
    // What the worker said before this module ran (python-start.js kept it), then what it says next.
    for (const event of takeOver()) (event.type === "error" ? onWorkerError : onWorkerMessage)(event);
    worker.addEventListener("message", onWorkerMessage);
    worker.addEventListener("error", onWorkerError);
  });
  return ready;
}

/** Run op in the worker; onEvent receives streamed events (e.g. training chunks). */
export async function call(op, args = {}, { onEvent } = {}) {
  await start();
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject, onEvent });
    worker.postMessage({ type: "call", id, op, args });
  });
}

/** Ask the running training op to stop after its current chunk. */
export function stop() {
  if (worker) worker.postMessage({ type: "stop" });
}

// Start Python at once on a page the build marked as having widgets (html[data-widgets]: this module
// is loaded async from <head>, so before the body is parsed), else as soon as the parser reaches a
// widget; main.js starts it too, once the page is parsed, if this has not.
function startAtFirstWidget() {
  if (onDemand()) return; // the index: its widget starts Python when the reader presses Start
  if (document.documentElement.hasAttribute("data-widgets") || document.querySelector("[data-widget]")) {
    start().catch(() => {}); // failures are shown on the page
    return;
  }
  if (document.readyState !== "loading") return;
  const watch = new MutationObserver(() => {
    if (document.querySelector("[data-widget]")) {
      watch.disconnect();
      start().catch(() => {});
    }
  });
  watch.observe(document.documentElement, { childList: true, subtree: true });
  document.addEventListener("DOMContentLoaded", () => watch.disconnect());
}
startAtFirstWidget();
