// The module Web Worker that runs Python: Pyodide + NumPy + the pylib wheel, and the corpus when an
// op needs it.
// Protocol (page -> worker):  {type: "init", pyodideURL, wheelURL, numpyURL, dataURL, afresh}
//                             {type: "call", id, op, args}     {type: "stop"}
// (worker -> page):           {type: "progress", message, fraction}   {type: "progress-done"}
//                             {type: "ready", info}   {type: "fatal", message}
//                             {type: "data-error", message}   (a corpus file failed; Python still runs)
//                             {type: "event", id, data}   {type: "result", id, value}
//                             {type: "error", id, message, kind, errors}
// Every op but "train" and "run:<name>" is one call of pylib.web.handle(op, json). Those two run
// in chunks of about LIMITS.chunk_seconds, yielding between chunks so a "stop" is seen.
//
// Start-up does only what every widget needs: Pyodide, then NumPy and the pylib wheel, each
// unpacked straight into site-packages (no micropip, no loadPackage), and the 1 kB vocabulary; the
// three downloads run while Python boots. NumPy's compiled modules load when `import numpy` needs
// them: Pyodide's loadPackage would first link all 19 of them, which measured about 0.5 s slower
// on the 2-core test machine.
// The token files (data/train.bin, val.bin) load the first time an op asks for them: pylib.web
// answers {kind: "data", files}, and the op runs again once they are in. A page whose widgets never
// train on the corpus never downloads it.
//
// The first start in a browser also takes a memory snapshot of the freshly booted interpreter
// (Pyodide's makeMemorySnapshot, before NumPy: the snapshot holds only the wasm memory, not the
// compiled modules NumPy links in) and keeps it in Cache Storage once the page is ready. Later
// starts restore it instead of booting Python again, which measured about 0.3 s faster on the
// same machine, and reseed Python's random module (Pyodide imports it while booting), whose state
// would otherwise be the snapshot's on every visit. A snapshot that does not restore (another
// Pyodide build, a damaged entry: see wellFormed) is deleted and Python boots as on the first
// visit; info.boot in the ready message says which way it started.

let pyodide = null;
let web = null;
let training = false;
let stopRequested = false;
let dataURL = null;

const post = (msg, transfer = []) => self.postMessage(msg, transfer);
const progress = (message, fraction) => post({ type: "progress", message, fraction });
const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));
const errorText = (err) => String(err && err.message ? err.message : err).replace(/[.\s]+$/, "");

class OpError extends Error {
  constructor(message, kind, errors = null) {
    super(message);
    this.kind = kind;
    this.errors = errors;
  }
}

// A start-up step that failed: its message says which part, in the reader's words.
class LoadError extends Error {}

/** The bytes at url, or an Error saying why not (the HTTP status, or that the request failed). */
async function fetchBytes(url) {
  let response;
  try {
    response = await fetch(url);
  } catch (err) {
    throw new Error(`the request failed (${errorText(err)}: is the network off?)`);
  }
  if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`.trim());
  return new Uint8Array(await response.arrayBuffer());
}

// A promise whose rejection is handled later (by whoever awaits it), not reported as unhandled now.
function early(promise) {
  promise.catch(() => {});
  return promise;
}

const shownPath = (url, root) => url.startsWith(root) ? url.slice(root.length) : url;

// Pyodide 0.27 reports a failed download of its wasm or standard library on the console and then
// waits forever. While it starts, the worker watches its own fetches of pyodide/ files: `failed`
// rejects with a LoadError naming the file.
function watchDownloads(pyodideURL, root) {
  const original = self.fetch;
  let fail;
  const failed = early(new Promise((_, reject) => { fail = reject; }));
  const failure = (url, why) => {
    fail(new LoadError(`Python (Pyodide) could not be loaded: ${shownPath(url, root)} could not be downloaded (${why}).`));
  };
  self.fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input), self.location.href).href;
    let response;
    try {
      response = await original(input, init);
    } catch (err) {
      if (url.startsWith(pyodideURL)) failure(url, `the request failed: ${errorText(err)}; is the network off?`);
      throw err;
    }
    if (!response.ok && url.startsWith(pyodideURL)) failure(url, `HTTP ${response.status} ${response.statusText}`.trim());
    return response;
  };
  return { failed, stop: () => { self.fetch = original; } };
}

// Where the snapshot is kept: its own cache (the service worker deletes only its own caches, named
// per build; a snapshot depends on Pyodide's build alone, which restoring checks).
const SNAPSHOT_CACHE = "course-python-snapshot";
const snapshotKey = (pyodideURL) => pyodideURL + "memory-snapshot";

// A snapshot is Pyodide's header (a magic number, where the memory starts, its build id, ...) and
// then the wasm memory, whole 64 KiB pages. Pyodide sizes the new memory from the snapshot before
// it checks anything, and a damaged one makes the wasm fail to instantiate, after which Pyodide
// waits forever. So the worker keeps, beside the bytes, their length and header as it wrote them
// (X-Snapshot), and restores only a snapshot that still matches them; Pyodide then checks the
// build id itself and throws on a mismatch.
const headerOf = (bytes) => Array.from(bytes.subarray(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");

function wellFormed(bytes, kept) {
  if (!kept || bytes.length < 64 || kept !== `${bytes.length} ${headerOf(bytes)}`) return false;
  const memoryStart = new DataView(bytes.buffer, bytes.byteOffset).getUint32(4, true);
  return memoryStart > 16 && memoryStart < bytes.length && (bytes.length - memoryStart) % 65536 === 0;
}

/** The stored snapshot's bytes, or null (none, a damaged one: dropped, or no Cache Storage: an
 *  insecure origin or a private window). */
async function storedSnapshot(pyodideURL) {
  try {
    if (typeof caches === "undefined") return null;
    const hit = await (await caches.open(SNAPSHOT_CACHE)).match(snapshotKey(pyodideURL));
    if (!hit) return null;
    const bytes = new Uint8Array(await hit.arrayBuffer());
    if (wellFormed(bytes, hit.headers.get("X-Snapshot"))) return bytes;
    await dropSnapshot(pyodideURL);
    return null;
  } catch {
    return null;
  }
}

async function keepSnapshot(pyodideURL, bytes) {
  try {
    if (typeof caches === "undefined" || !bytes) return;
    await (await caches.open(SNAPSHOT_CACHE)).put(snapshotKey(pyodideURL), new Response(bytes, {
      headers: { "Content-Type": "application/octet-stream", "X-Snapshot": `${bytes.length} ${headerOf(bytes)}` },
    }));
  } catch {
    // Quota or a private window: the next start boots Python again, which is all this costs.
  }
}

async function dropSnapshot(pyodideURL) {
  try {
    if (typeof caches !== "undefined") await (await caches.open(SNAPSHOT_CACHE)).delete(snapshotKey(pyodideURL));
  } catch {
    // nothing kept, nothing to drop
  }
}

// When each start-up step ended, in ms since the Unix epoch (performance.timeOrigin-based, so the page
// can place them on its own clock): info.steps in the ready message, printed by bench/bench_load.py.
const steps = [];
const step = (name) => steps.push([name, performance.timeOrigin + performance.now()]);

let newSnapshot = null; // taken at the first start; kept once the page is ready (see "ready" below)

async function init({ pyodideURL, wheelURL, numpyURL, dataURL: data, afresh = false }) {
  step("init");
  dataURL = data;
  const root = new URL("../", pyodideURL).href;
  const wheelName = shownPath(wheelURL, root);
  const numpyName = shownPath(numpyURL, root);
  // afresh: the last start in this tab was slow (pyodide-client.js), so the saved snapshot is dropped
  // in case it was the cause; this start boots and keeps a new one.
  const snapshot = early(afresh ? dropSnapshot(pyodideURL).then(() => null) : storedSnapshot(pyodideURL));
  const wheel = early(fetchBytes(wheelURL));
  const numpy = early(fetchBytes(numpyURL));
  const vocab = early(fetchBytes(dataURL + "vocab.json"));

  progress("Loading Python (Pyodide 0.27.7)…", null); // no finer progress from Pyodide: indeterminate
  let loadPyodide;
  try {
    ({ loadPyodide } = await import(pyodideURL + "pyodide.mjs"));
    step("pyodide.mjs");
  } catch (err) {
    throw new LoadError(`Python (Pyodide) could not be loaded: pyodide/pyodide.mjs did not load (${errorText(err)}).`);
  }
  const downloads = watchDownloads(pyodideURL, root);
  let boot = "booted";
  try {
    const options = { indexURL: pyodideURL, stdout: () => {}, stderr: () => {} };
    const saved = await snapshot;
    if (saved) {
      try {
        pyodide = await Promise.race([loadPyodide({ ...options, _loadSnapshot: saved }), downloads.failed]);
        pyodide.runPython("import random; random.seed()"); // not the state the snapshot was taken in
        boot = "snapshot";
      } catch (err) {
        if (err instanceof LoadError) throw err; // a download failed: booting again would not help
        pyodide = null;
        await dropSnapshot(pyodideURL); // another Pyodide build's, or damaged
      }
    }
    if (!pyodide) {
      pyodide = await Promise.race([loadPyodide({ ...options, _makeSnapshot: true }), downloads.failed]);
      try {
        newSnapshot = pyodide.makeMemorySnapshot();
      } catch {
        newSnapshot = null; // the next start boots again
      }
    }
  } catch (err) {
    throw err instanceof LoadError ? err : new LoadError(`Python (Pyodide) could not be loaded: ${errorText(err)}.`);
  } finally {
    downloads.stop();
  }
  step(`python (${boot})`);
  try {
    return await install({ wheel, wheelName, numpy, numpyName, vocab, boot });
  } catch (err) {
    if (boot === "snapshot") await dropSnapshot(pyodideURL); // in case the snapshot is to blame
    throw err;
  }
}

/**
 * Writes a zip archive whose members are all stored (not deflated) into dir of Pyodide's file
 * system, straight from JavaScript; returns false, having written nothing, for any other archive
 * (deflated members, ZIP64, a damaged directory), which the caller then gives to unpackArchive.
 * The build stores the members of NumPy's and pylib's wheels (offline.compiled). Measured on a
 * second visit (bench/bench_load.py's worker steps), NumPy's wheel took 17-53 ms here against
 * 114-344 ms through Python's zipfile (unpackArchive).
 */
function unpackStored(bytes, dir) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u16 = (at) => view.getUint16(at, true);
  const u32 = (at) => view.getUint32(at, true);
  let end = bytes.length - 22; // the end-of-central-directory record (its comment is at most 64 kB)
  while (end >= 0 && end >= bytes.length - 22 - 0xffff && u32(end) !== 0x06054b50) end--;
  if (end < 0 || u32(end) !== 0x06054b50) return false;
  const count = u16(end + 10);
  let at = u32(end + 16);
  if (count === 0xffff || at === 0xffffffff) return false; // ZIP64
  const names = new TextDecoder();
  const members = [];
  for (let i = 0; i < count; i++) {
    if (at + 46 > bytes.length || u32(at) !== 0x02014b50) return false;
    const method = u16(at + 10), size = u32(at + 20), stored = u32(at + 24);
    const nameLength = u16(at + 28), extra = u16(at + 30), comment = u16(at + 32), local = u32(at + 42);
    const name = names.decode(bytes.subarray(at + 46, at + 46 + nameLength));
    if (method !== 0 || size !== stored || local + 30 > bytes.length || u32(local) !== 0x04034b50) return false;
    if (name.startsWith("/") || name.split("/").includes("..")) return false;
    const start = local + 30 + u16(local + 26) + u16(local + 28);
    if (start + size > bytes.length) return false;
    members.push([name, start, size]);
    at += 46 + nameLength + extra + comment;
  }
  for (const [name, start, size] of members) {
    const path = `${dir}/${name}`;
    if (name.endsWith("/")) {
      pyodide.FS.mkdirTree(path);
      continue;
    }
    pyodide.FS.mkdirTree(path.slice(0, path.lastIndexOf("/")));
    pyodide.FS.writeFile(path, bytes.subarray(start, start + size), { canOwn: false });
  }
  return true;
}

/** Unpacks a wheel into dir; says how ("stored": unpackStored, "zipfile": Pyodide's unpackArchive). */
function unpack(bytes, dir) {
  if (unpackStored(bytes, dir)) return "stored";
  pyodide.unpackArchive(bytes, "wheel", { extractDir: dir });
  return "zipfile";
}

/** NumPy, pylib and the vocabulary, into the Python that init started. */
async function install({ wheel, wheelName, numpy, numpyName, vocab, boot }) {
  const unpacked = {};
  progress("Loading NumPy…", 0.6);
  const lib = pyodide.FS.readdir("/lib").find((name) => /^python3\.\d+$/.test(name)); // as Pyodide makes it
  const sitePackages = `/lib/${lib}/site-packages`;
  let bytes;
  try {
    bytes = await numpy;
    step("numpy fetched");
  } catch (err) {
    throw new LoadError(`NumPy could not be loaded into Python: ${numpyName} could not be downloaded (${errorText(err)}).`);
  }
  try {
    unpacked.numpy = unpack(bytes, sitePackages);
    step("numpy unpacked");
    pyodide.runPython("import importlib; importlib.invalidate_caches(); import numpy");
    step("numpy");
  } catch (err) {
    throw new LoadError(`NumPy could not be loaded into Python (${numpyName}: ${errorText(err)}).`);
  }

  progress("Installing pylib…", 0.8);
  try {
    unpacked.pylib = unpack(await wheel, sitePackages);
    pyodide.runPython("import importlib; importlib.invalidate_caches()");
    web = pyodide.pyimport("pylib.web");
    step("pylib");
  } catch (err) {
    throw new LoadError(`The course's Python library (${wheelName}) could not be loaded: ${errorText(err)}.`);
  }

  // The vocabulary is small and most corpus widgets use it; when it fails, Python still runs and
  // the ops that need it fail with the file's name (see loadData).
  try {
    pyodide.FS.mkdirTree("/corpus");
    pyodide.FS.writeFile("/corpus/vocab.json", await vocab);
    await callPython("load_data", { folder: "/corpus", files: ["vocab.json"] });
  } catch (err) {
    post({ type: "data-error", message: dataFailure(["vocab.json"], err) });
  }
  step("vocabulary");
  return { python: pyodide.version, boot, unpacked, steps };
}

function dataFailure(files, err) {
  const what = files.includes("train.bin") || files.includes("val.bin")
    ? "The training data" : "The corpus's vocabulary";
  const reason = err instanceof OpError ? err.message : errorText(err);
  return `${what} (${files.map((f) => "data/" + f).join(", ")}) could not be loaded: ${reason}. ` +
    "The widgets that train on the corpus or read it need it and cannot run; the other widgets work.";
}

// One load of corpus files at a time; a failure is not kept, so a later op tries again.
let loading = null;

async function loadData(files) {
  while (loading) await loading.catch(() => {});
  progress(`Loading the corpus (${files.map((f) => "data/" + f).join(", ")})…`, null);
  loading = (async () => {
    try {
      const fetched = await Promise.allSettled(files.map((name) => fetchBytes(dataURL + name)));
      const failed = files.filter((_, i) => fetched[i].status === "rejected");
      if (failed.length) {
        const reasons = failed.map((f) => errorText(fetched[files.indexOf(f)].reason));
        throw Object.assign(new Error([...new Set(reasons)].join("; ")), { files: failed });
      }
      files.forEach((name, i) => pyodide.FS.writeFile("/corpus/" + name, fetched[i].value));
      const out = JSON.parse(web.handle("load_data", JSON.stringify({ folder: "/corpus", files })));
      if (!out.ok) throw new OpError(out.message, out.kind);
    } catch (err) {
      const message = dataFailure(err.files ?? files, err);
      post({ type: "data-error", message });
      throw new OpError(message, "data");
    } finally {
      post({ type: "progress-done" });
    }
  })();
  try {
    await loading;
  } finally {
    loading = null;
  }
}

/** pylib.web.handle(op, args); loads the corpus files the op asks for and runs it again. */
async function callPython(op, args) {
  for (let attempt = 0; ; attempt++) {
    const out = JSON.parse(web.handle(op, JSON.stringify(args ?? {})));
    if (out.ok) return out.value;
    if (out.kind === "data" && out.files && attempt < 2) {
      await loadData(out.files);
      continue;
    }
    throw new OpError(out.message, out.kind, out.errors);
  }
}

function exportWeights() {
  const proxy = web.SESSION.export_npz();
  try {
    const bytes = proxy.toJs();
    return bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  } finally {
    proxy.destroy();
  }
}

// A chunked run: "<name>_start", then "<name>_chunk" until it says done or a "stop" arrives,
// then "<name>_finish". Op "train" is the chapter-1 run; any op "run:<name>" runs <name>_* the
// same way (pylib/web/<topic>_ops.py modules define them). A finish result with export: true also gets
// the session's weights as an .npz buffer.
async function chunkedRun(id, name, args) {
  if (training) throw new OpError("A training run is already going in this page; stop it first.", "busy");
  training = true;
  stopRequested = false;
  try {
    const info = await callPython(`${name}_start`, args);
    post({ type: "event", id, data: { kind: "start", info } });
    let chunk = null;
    for (;;) {
      chunk = await callPython(`${name}_chunk`, {});
      post({ type: "event", id, data: { kind: "chunk", chunk } });
      if (chunk.done) break;
      await nextTask(); // lets a "stop" message in
      if (stopRequested) break;
    }
    // A stopped run also gets its finish (sample, weights): the model as it is at that step.
    const stopped = !chunk.done;
    const result = await callPython(`${name}_finish`, {});
    const wantsWeights = name === "train" ? !result.diverged : result.export === true;
    return wantsWeights ? { stopped, result, weights: exportWeights() } : { stopped, result };
  } finally {
    training = false;
  }
}

async function dispatch({ id, op, args }) {
  try {
    const value = op === "train" ? await chunkedRun(id, "train", args)
      : op.startsWith("run:") ? await chunkedRun(id, op.slice(4), args)
      : await callPython(op, args);
    const transfer = value && value.weights instanceof Uint8Array ? [value.weights.buffer] : [];
    post({ type: "result", id, value }, transfer);
  } catch (err) {
    const kind = err instanceof OpError ? err.kind : "internal";
    post({ type: "error", id, message: String(err && err.message ? err.message : err), kind, errors: err.errors ?? null });
  }
}

let initialised = null;

self.addEventListener("message", (event) => {
  const m = event.data;
  if (m.type === "init") {
    initialised = init(m).then(
      (info) => {
        post({ type: "ready", info });
        const bytes = newSnapshot;
        newSnapshot = null;
        if (bytes) keepSnapshot(m.pyodideURL, bytes); // after "ready": storing 20 MB should not delay it
      },
      (err) => post({ type: "fatal", message: err instanceof LoadError ? err.message
        : `Python could not be started: ${errorText(err)}.` }),
    );
  } else if (m.type === "stop") {
    stopRequested = true;
  } else if (m.type === "call") {
    initialised.then(() => dispatch(m));
  }
});
