// The page's one Python worker: started lazily (or at load when the page has widgets), shared by
// every widget. call(op, args, {onEvent}) returns a promise for the op's result; long ops (training)
// stream events to onEvent. The page root (<html>) gets data-pyodide="loading" | "ready" | "error".

let worker = null;
let ready = null;
let nextId = 1;
const pending = new Map(); // id -> {resolve, reject, onEvent}
const progressListeners = new Set();

/** Subscribe to loading progress: fn(message, fraction in [0, 1]). Returns an unsubscribe function. */
export function onProgress(fn) {
  progressListeners.add(fn);
  return () => progressListeners.delete(fn);
}

/** The site root as an absolute URL (a worker cannot resolve relative URLs against the page). */
export function siteRoot() {
  return new URL(document.body.dataset.siteRoot || "./", document.baseURI).href;
}

function statusElements() {
  return {
    box: document.querySelector('[data-role="pyodide-status"]'),
    text: document.querySelector('[data-role="pyodide-status-text"]'),
    bar: document.querySelector('[data-role="pyodide-progress"]'),
    error: document.querySelector('[data-role="page-error"]'),
  };
}

function showProgress(message, fraction) {
  for (const fn of progressListeners) fn(message, fraction);
  const { box, text, bar } = statusElements();
  if (!box) return;
  box.hidden = false;
  text.textContent = message;
  bar.value = fraction;
}

function hideProgress() {
  const { box } = statusElements();
  if (box) box.hidden = true;
}

/** A visible page-level error (text only). */
export function showPageError(message) {
  const { error } = statusElements();
  hideProgress();
  if (!error) return;
  error.textContent = message;
  error.hidden = false;
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

/** Start the worker (once); resolves with the corpus info when Python is ready. */
export function start() {
  if (ready) return ready;
  const root = siteRoot();
  document.documentElement.dataset.pyodide = "loading";
  showProgress("Starting Python…", 0.02);
  ready = new Promise((resolve, reject) => {
    const fatal = (message) => {
      const text = `Python could not be loaded in this page, so the live widgets cannot run. ${message}`;
      document.documentElement.dataset.pyodide = "error";
      showPageError(text);
      failAll(text);
      reject(new WorkerError(text, { kind: "fatal" }));
    };
    try {
      worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
    } catch (err) {
      fatal(String(err && err.message ? err.message : err));
      return;
    }
    worker.addEventListener("message", (event) => {
      const m = event.data;
      if (m.type === "ready") {
        document.documentElement.dataset.pyodide = "ready";
        hideProgress();
        resolve(m.info);
      } else if (m.type === "fatal") {
        fatal(m.message);
      } else {
        onMessage(event);
      }
    });
    worker.addEventListener("error", (event) => {
      event.preventDefault();
      fatal(`The worker failed: ${event.message || "unknown error"}.`);
    });
    worker.postMessage({
      type: "init",
      pyodideURL: new URL("pyodide/", root).href,
      wheelURL: new URL(document.body.dataset.wheel, root).href,
      dataURL: new URL("data/", root).href,
    });
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
