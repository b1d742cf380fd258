// Registers the site's service worker (sw.js at the site's root, written by the build), which keeps
// a copy of the whole site so that it works offline after one visit (see site/sw.js).
//
// It registers once the page is done with its own loading (Python ready or failed on a page with
// widgets, the load event otherwise), so saving the site never competes with the first widget.
// <html data-offline> says where things stand: "saving" while the copy is made, "ready" once this
// page's build is saved (data-offline-version names it), "unsupported" where there is no service
// worker (file://, a browser or context that blocks them), "error" if registering failed.

import { siteRoot } from "./pyodide-client.js";

const html = document.documentElement;

function setState({ state, version }) {
  html.dataset.offline = state;
  if (version) html.dataset.offlineVersion = version;
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

async function register() {
  if (!("serviceWorker" in navigator) || !window.isSecureContext) {
    setState({ state: "unsupported" });
    return;
  }
  const root = siteRoot();
  navigator.serviceWorker.addEventListener("message", (event) => {
    if (event.data?.type === "offline") setState(event.data);
  });
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
    worker.addEventListener("statechange", () => {
      const next = [registration.installing, registration.waiting].filter((w) => w && w !== worker);
      if (worker.state === "redundant" && !next.length) setState({ state: "error" });
    });
  };
  registration.addEventListener("updatefound", () => follow(registration.installing));
  follow(registration.installing || registration.waiting);
  const active = registration.active;
  if (!active) return; // the new worker says "ready" when it has saved the site and taken over
  active.postMessage({ type: "status" }); // answered with {type: "offline", state, version}
  // A new build? (The browser also checks on navigation; this makes it certain on every visit.)
  registration.update().catch(() => {}); // offline: keep the saved copy
}

pageSettled()
  .then(() => new Promise((resolve) => (window.requestIdleCallback ? requestIdleCallback(resolve, { timeout: 2000 }) : setTimeout(resolve, 0))))
  .then(register)
  .catch(() => setState({ state: "error" }));
