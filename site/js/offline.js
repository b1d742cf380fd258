// Registers the site's service worker (sw.js at the site's root, written by the build), which keeps
// a copy of the whole site so that it works offline after one visit (see site/sw.js).
//
// It registers once the page is done with its own loading (Python ready or failed on a page with
// widgets, the load event otherwise), so saving the site never competes with the first widget.
// <html data-offline> says where things stand: "saving" while the copy is made, "ready" once this
// page's build is saved (data-offline-version names it), "unsupported" where there is no service
// worker (file://, a browser or context that blocks them), "error" if registering failed, "declined"
// when the reader chose not to keep a copy (localStorage course-offline = "off": nothing is
// registered until they choose to save it). The footer's line says the same in words, with the size
// of the copy, and its button removes the copy (or declines it while it is being saved) or saves it.

import { siteRoot } from "./pyodide-client.js";

const html = document.documentElement;
const CHOICE_KEY = "course-offline";
const COPY_PREFIX = "course-site:"; // the copy's caches (sw.js); Python's own snapshot (worker.js) is not the course's copy

const declined = () => {
  try { return localStorage.getItem(CHOICE_KEY) === "off"; } catch { return false; }
};
const megabytes = (bytes) => `${Math.round(bytes / 1e6)} MB`;

let last = {};

/** The footer's line: where the copy stands, in words, and the one choice that makes sense now. */
function say({ state, done, total, bytes }) {
  const text = document.querySelector('[data-role="offline-text"]');
  const button = document.querySelector('[data-action="offline-choice"]');
  if (!text || !button) return;
  const size = bytes ? ` (${megabytes(bytes)})` : "";
  const words = {
    saving: `Saving the course in this browser for offline reading${size}` + (total ? `: ${done} of ${total} files.` : "…"),
    ready: `Saved in this browser for offline reading${size}: every page and widget works without a network.`,
    declined: "Not saved for offline reading: this browser keeps no copy of the course.",
    unsupported: "This browser does not let the site keep a copy here, so it works online only.",
    error: "The copy for offline reading could not be saved; the site works online.",
  }[state];
  if (!words) return;
  text.textContent = words;
  const choice = { saving: "Don't keep a copy", ready: "Remove the saved copy", declined: "Save it for offline reading" }[state];
  button.hidden = !choice;
  if (choice) {
    button.textContent = choice;
    button.dataset.choice = state === "declined" ? "save" : "remove";
  }
}

function setState(message) {
  const { state, version } = message;
  if (declined() && state !== "declined" && state !== "unsupported") return; // a worker still finishing: not kept
  html.dataset.offline = state;
  if (version) html.dataset.offlineVersion = version;
  last = { ...last, ...message };
  say(last);
}

/** The reader's choice not to keep a copy: the service worker unregistered and the copy deleted. */
async function removeCopy() {
  try { localStorage.setItem(CHOICE_KEY, "off"); } catch { /* storage off: this visit only */ }
  if ("serviceWorker" in navigator) {
    for (const registration of await navigator.serviceWorker.getRegistrations()) {
      if (registration.scope !== new URL(siteRoot()).href) continue;
      // a worker still saving stops, and deletes what it saved (sw.js)
      for (const worker of [registration.installing, registration.waiting, registration.active]) worker?.postMessage({ type: "discard" });
      await registration.unregister();
    }
  }
  for (const name of await caches.keys()) {
    if (name.startsWith(COPY_PREFIX + new URL(siteRoot()).pathname + ":")) await caches.delete(name);
  }
  delete html.dataset.offlineVersion;
  last = {};
  setState({ state: "declined" });
}

function watchChoice() {
  const button = document.querySelector('[data-action="offline-choice"]');
  if (!button) return;
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      if (button.dataset.choice === "save") {
        try { localStorage.removeItem(CHOICE_KEY); } catch { /* storage off */ }
        setState({ state: "saving" });
        await register();
      } else {
        await removeCopy();
      }
    } catch {
      setState({ state: "error" });
    } finally {
      button.disabled = false;
    }
  });
}

function pageSettled() {
  return new Promise((resolve) => {
    const check = () => {
      const python = html.dataset.pyodide;
      if (document.readyState === "complete" && python !== "loading") {
        watch.disconnect();
        resolve();
      }
    };
    const watch = new MutationObserver(check);
    watch.observe(html, { attributes: true, attributeFilter: ["data-pyodide"] });
    window.addEventListener("load", check);
    check();
  });
}

let listening = false;

async function register() {
  if (!("serviceWorker" in navigator) || !window.isSecureContext) {
    setState({ state: "unsupported" });
    return;
  }
  if (declined()) {
    setState({ state: "declined" });
    return;
  }
  const root = siteRoot();
  if (!listening) {
    listening = true;
    navigator.serviceWorker.addEventListener("message", (event) => {
      if (event.data?.type === "offline") setState(event.data);
    });
  }
  let registration;
  try {
    // updateViaCache "none": every visit checks sw.js itself with the server, so a new build is seen.
    registration = await navigator.serviceWorker.register(new URL("sw.js", root), { scope: root, updateViaCache: "none" });
  } catch (err) {
    // Blocked (a browser setting, a private window) or sw.js missing: the site works, online only.
    setState({ state: err && err.name === "SecurityError" ? "unsupported" : "error" });
    return;
  }
  const follow = (worker) => {
    if (!worker) return;
    setState({ state: "saving" });
    // An install that fails (a file missing or changed while it was saved) leaves the old copy, if any.
    // When this worker turns redundant, Chromium may not yet have cleared it from
    // registration.installing, so "another worker on its way" means one that is not this one.
    const failed = () => {
      const next = [registration.installing, registration.waiting].filter((w) => w && w !== worker);
      if (worker.state === "redundant" && !next.length) setState({ state: "error" });
    };
    worker.addEventListener("statechange", failed);
    failed(); // it may have failed already, before this page could listen (a file that fails at once)
  };
  registration.addEventListener("updatefound", () => follow(registration.installing));
  follow(registration.installing || registration.waiting);
  const active = registration.active;
  if (!active) {
    // no worker at all: its install failed before this page could follow it
    if (!registration.installing && !registration.waiting) setState({ state: "error" });
    return; // otherwise the new worker says "ready" when it has saved the site and taken over
  }
  active.postMessage({ type: "status" }); // answered with {type: "offline", state, version}
  // A new build? (The browser also checks on navigation; this makes it certain on every visit.)
  registration.update().catch(() => {}); // offline: keep the saved copy
}

watchChoice();
pageSettled()
  .then(() => new Promise((resolve) => (window.requestIdleCallback ? requestIdleCallback(resolve, { timeout: 2000 }) : setTimeout(resolve, 0))))
  .then(register)
  .catch(() => setState({ state: "error" }));
