// The module Web Worker that runs Python: Pyodide + NumPy + the pylib wheel, and the corpus when an
// op needs it.
// Protocol (page -> worker):  {type: "init", pyodideURL, wheelURL, dataURL}
//                             {type: "call", id, op, args}     {type: "stop"}
// (worker -> page):           {type: "progress", message, fraction}   {type: "progress-done"}
//                             {type: "ready", info}   {type: "fatal", message}
//                             {type: "data-error", message}   (a corpus file failed; Python still runs)
//                             {type: "event", id, data}   {type: "result", id, value}
//                             {type: "error", id, message, kind, errors}
// Every op but "train" and "run:<name>" is one call of pylib.web.handle(op, json). Those two run
// in chunks of about LIMITS.chunk_seconds, yielding between chunks so a "stop" is seen.
//
// Start-up does only what every widget needs: Pyodide, then NumPy, the pylib wheel unpacked
// straight into site-packages (no micropip), and the 1 kB vocabulary (the last two downloaded while
// Python boots). The token files (data/train.bin, val.bin)
// load the first time an op asks for them: pylib.web answers {kind: "data", files}, and the op runs
// again once they are in. A page whose widgets never train on the corpus never downloads it.

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
// rejects with a LoadError naming the file (NumPy's wheel gets NumPy's wording).
function watchDownloads(pyodideURL, root) {
  const original = self.fetch;
  let fail;
  const failed = early(new Promise((_, reject) => { fail = reject; }));
  const failure = (url, why) => {
    const file = shownPath(url, root);
    const what = /\/numpy-[^/]*\.whl$/.test(url) ? "NumPy could not be loaded into Python" : "Python (Pyodide) could not be loaded";
    fail(new LoadError(`${what}: ${file} could not be downloaded (${why}).`));
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

async function init({ pyodideURL, wheelURL, dataURL: data }) {
  dataURL = data;
  const root = new URL("../", pyodideURL).href;
  const wheelName = shownPath(wheelURL, root);
  const wheel = early(fetchBytes(wheelURL));
  const vocab = early(fetchBytes(dataURL + "vocab.json"));

  progress("Loading Python (Pyodide 0.27.7)…", null); // no finer progress from Pyodide: indeterminate
  let loadPyodide;
  try {
    ({ loadPyodide } = await import(pyodideURL + "pyodide.mjs"));
  } catch (err) {
    throw new LoadError(`Python (Pyodide) could not be loaded: pyodide/pyodide.mjs did not load (${errorText(err)}).`);
  }
  const downloads = watchDownloads(pyodideURL, root);
  try {
    // NumPy is loaded after Python has booted, not with loadPyodide's `packages` (which fetches it
    // during the boot): measured, that made the start-up slower by more than the download takes.
    pyodide = await Promise.race([
      loadPyodide({ indexURL: pyodideURL, stdout: () => {}, stderr: () => {} }), downloads.failed]);
    progress("Loading NumPy…", 0.6);
    const problems = [];
    await Promise.race([
      pyodide.loadPackage(["numpy"], { messageCallback: () => {}, errorCallback: (m) => problems.push(m) }),
      downloads.failed]);
    if (!pyodide.loadedPackages.numpy) {
      const why = problems.map((p) => p.replace(/[:;.\s]+$/, "")).join("; ") || "unknown error";
      throw new LoadError(`NumPy could not be loaded into Python (${why}).`);
    }
  } catch (err) {
    throw err instanceof LoadError ? err : new LoadError(`Python (Pyodide) could not be loaded: ${errorText(err)}.`);
  } finally {
    downloads.stop();
  }

  progress("Installing pylib…", 0.8);
  try {
    const lib = pyodide.FS.readdir("/lib").find((name) => /^python3\.\d+$/.test(name)); // as Pyodide makes it
    const sitePackages = `/lib/${lib}/site-packages`;
    pyodide.unpackArchive(await wheel, "wheel", { extractDir: sitePackages });
    pyodide.runPython("import importlib; importlib.invalidate_caches()");
    web = pyodide.pyimport("pylib.web");
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
  return { python: pyodide.version };
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
      (info) => post({ type: "ready", info }),
      (err) => post({ type: "fatal", message: err instanceof LoadError ? err.message
        : `Python could not be started: ${errorText(err)}.` }),
    );
  } else if (m.type === "stop") {
    stopRequested = true;
  } else if (m.type === "call") {
    initialised.then(() => dispatch(m));
  }
});
