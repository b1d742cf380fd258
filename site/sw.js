// The site's service worker: a copy of the whole built site, for reading and training offline after
// one visit. builder/offline.py (the build) writes it to the site's root as sw.js with BUILD filled in:
// the build's version (a hash over every file of the site) and each file's path and sha256.
//
// - install: fetches every file (revalidating with the server), checks each against its sha256 and
//   stores it in a cache named after this build's version; a file that does not match is fetched
//   again past the HTTP cache, and if it still does not match (the site changed while this ran)
//   the install fails and the browser tries again later. Then it takes over at once (skipWaiting).
// - activate: deletes the caches of other builds of this site (same scope), so a new build
//   replaces the old copy and nothing stale is served, and takes control of open pages.
// - fetch: a file of this build is answered from the cache; anything else from the network, and a
//   page the network cannot give (offline, not in the copy) is sent to the copy's offline.html.
//   Every response it gives carries Cross-Origin-Opener-Policy: same-origin and
//   Cross-Origin-Embedder-Policy: require-corp, so the pages are cross-origin isolated (the
//   editable code cells use SharedArrayBuffer to stop a runaway loop) even on a host that cannot
//   set headers.
// Pages send {type: "discard"} when the reader removes the copy. Pages ask {type: "status"} and get {type: "offline", state: "saving" | "ready", version, done, total,
// bytes} (bytes: the whole copy's size).

const BUILD = { version: "unbuilt", files: [], bytes: 0 }; // builder/offline.py replaces this line

const SCOPE = self.registration.scope; // the site's root, e.g. https://example.org/course/
const PREFIX = `course-site:${new URL(SCOPE).pathname}:`;
const CACHE = PREFIX + BUILD.version;
const decoded = (path) => {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
};
// file path relative to the scope (decoded) -> [the path as a URL has it, sha256]
const FILES = new Map(BUILD.files.map(([path, sha256]) => [decoded(path), [path, sha256]]));
const ISOLATION = { "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp" };
const PARALLEL = 4; // files fetched at once while saving the site

let saved = 0; // files in this build's cache, while installing
let discarded = false; // the reader chose not to keep a copy (offline.js): stop saving, delete it

async function broadcast(message) {
  for (const client of await self.clients.matchAll({ includeUncontrolled: true })) client.postMessage(message);
}

function hex(buffer) {
  return [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The file's bytes and content type, checked against this build's sha256. */
async function fetchChecked(path, sha256) {
  for (const cache of ["no-cache", "reload"]) {
    const response = await fetch(new URL(path, SCOPE), { cache });
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    const body = await response.arrayBuffer();
    if (hex(await crypto.subtle.digest("SHA-256", body)) === sha256) {
      return { body, type: response.headers.get("Content-Type") || "application/octet-stream" };
    }
  }
  throw new Error(`${path} does not match this build's copy (the site changed while it was being saved)`);
}

async function saveSite() {
  const cache = await caches.open(CACHE);
  const present = new Set((await cache.keys()).map((request) => request.url)); // an earlier, interrupted install
  const todo = [...FILES.values()].filter(([path]) => !present.has(new URL(path, SCOPE).href));
  saved = FILES.size - todo.length;
  let next = 0;
  let failed = false; // once one file fails, the install has failed: the other lanes stop, and say nothing
  async function lane() {
    while (next < todo.length && !failed && !discarded) {
      const [path, sha256] = todo[next++];
      try {
        const { body, type } = await fetchChecked(path, sha256);
        await cache.put(new URL(path, SCOPE), new Response(body, { headers: { "Content-Type": type, ...ISOLATION } }));
      } catch (err) {
        failed = true;
        throw err;
      }
      saved += 1;
      if (saved % 10 === 0 && !failed) {
        broadcast({ type: "offline", state: "saving", version: BUILD.version, done: saved, total: FILES.size, bytes: BUILD.bytes });
      }
    }
  }
  await Promise.all(Array.from({ length: PARALLEL }, lane));
  if (discarded) {
    await caches.delete(CACHE); // again: a file being stored when the reader chose may have re-made it
    throw new Error("the reader chose not to keep a copy");
  }
}

self.addEventListener("install", (event) => {
  event.waitUntil(saveSite().then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith(PREFIX) && name !== CACHE) await caches.delete(name);
    }
    await self.clients.claim();
    await broadcast(await status());
  })());
});

/** What the page shows in <html data-offline>: this build's copy is "ready" once every file is in. */
async function status() {
  const done = (await (await caches.open(CACHE)).keys()).length;
  return { type: "offline", state: done >= FILES.size ? "ready" : "saving", version: BUILD.version, done, total: FILES.size,
           bytes: BUILD.bytes };
}

self.addEventListener("message", (event) => {
  if (event.data?.type === "status") event.waitUntil(status().then((s) => event.source?.postMessage(s)));
  if (event.data?.type === "discard") {
    discarded = true;
    event.waitUntil(caches.delete(CACHE));
  }
});

/** response with the cross-origin-isolation headers added (a same-origin response only). */
function isolated(response) {
  if (response.type !== "basic" && response.type !== "default") return response;
  const headers = new Headers(response.headers);
  for (const [name, value] of Object.entries(ISOLATION)) headers.set(name, value);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

async function respond(request) {
  const url = new URL(request.url);
  let path = url.pathname.slice(new URL(SCOPE).pathname.length);
  if (path === "" || path.endsWith("/")) path += "index.html";
  const file = FILES.get(decoded(path));
  if (file) {
    const hit = await caches.match(new URL(file[0], SCOPE).href, { cacheName: CACHE });
    if (hit) return hit;
  }
  try {
    return isolated(await fetch(request));
  } catch (err) {
    // offline (or the host unreachable): a page goes to the copy's offline page rather than the browser's
    // error (a redirect: its styles and links are relative to the site's root, not to the address asked for)
    const fallback = request.mode === "navigate" && FILES.get("offline.html");
    if (!fallback || !(await caches.match(new URL(fallback[0], SCOPE).href, { cacheName: CACHE }))) throw err;
    return Response.redirect(new URL(fallback[0], SCOPE).href, 302);
  }
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET" || !request.url.startsWith(SCOPE)) return;
  event.respondWith(respond(request));
});
