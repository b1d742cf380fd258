// The module Web Worker that runs Python: Pyodide + NumPy + the pylib wheel + the corpus.
// Protocol (page -> worker):  {type: "init", pyodideURL, wheelURL, dataURL}
//                             {type: "call", id, op, args}     {type: "stop"}
// (worker -> page):           {type: "progress", message, fraction}   {type: "ready", info}
//                             {type: "fatal", message}
//                             {type: "event", id, data}   {type: "result", id, value}
//                             {type: "error", id, message, kind, errors}
// Every op but "train" and "run:<name>" is one call of pylib.web.handle(op, json). Those two run
// in chunks of about LIMITS.chunk_seconds, yielding between chunks so a "stop" is seen.

let pyodide = null;
let web = null;
let training = false;
let stopRequested = false;

const post = (msg, transfer = []) => self.postMessage(msg, transfer);
const progress = (message, fraction) => post({ type: "progress", message, fraction });
const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

class OpError extends Error {
  constructor(message, kind, errors = null) {
    super(message);
    this.kind = kind;
    this.errors = errors;
  }
}

async function init({ pyodideURL, wheelURL, dataURL }) {
  progress("Loading Python (Pyodide 0.27.7)…", 0.05);
  const { loadPyodide } = await import(pyodideURL + "pyodide.mjs");
  pyodide = await loadPyodide({ indexURL: pyodideURL, stdout: () => {}, stderr: () => {} });

  progress("Loading NumPy…", 0.45);
  const problems = [];
  await pyodide.loadPackage(["numpy", "micropip"], {
    messageCallback: () => {},
    errorCallback: (message) => problems.push(message),
  });
  if (problems.length) throw new Error(`NumPy could not be loaded (${problems.map((p) => p.replace(/[:;\s]+$/, "")).join("; ")}).`);

  progress("Installing pylib…", 0.7);
  const micropip = pyodide.pyimport("micropip");
  await micropip.install(wheelURL);
  micropip.destroy();

  progress("Loading the corpus…", 0.85);
  pyodide.FS.mkdirTree("/corpus");
  await Promise.all(
    ["train.bin", "val.bin", "vocab.json"].map(async (name) => {
      const response = await fetch(dataURL + name);
      if (!response.ok) throw new Error(`could not fetch data/${name} (HTTP ${response.status})`);
      pyodide.FS.writeFile("/corpus/" + name, new Uint8Array(await response.arrayBuffer()));
    }),
  );
  web = pyodide.pyimport("pylib.web");
  return callPython("load_corpus", { folder: "/corpus" });
}

function callPython(op, args) {
  const out = JSON.parse(web.handle(op, JSON.stringify(args ?? {})));
  if (!out.ok) throw new OpError(out.message, out.kind, out.errors);
  return out.value;
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
    const info = callPython(`${name}_start`, args);
    post({ type: "event", id, data: { kind: "start", info } });
    let chunk = null;
    for (;;) {
      chunk = callPython(`${name}_chunk`, {});
      post({ type: "event", id, data: { kind: "chunk", chunk } });
      if (chunk.done) break;
      await nextTask(); // lets a "stop" message in
      if (stopRequested) break;
    }
    // A stopped run also gets its finish (sample, weights): the model as it is at that step.
    const stopped = !chunk.done;
    const result = callPython(`${name}_finish`, {});
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
      : callPython(op, args);
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
      (err) => post({ type: "fatal", message: String(err && err.message ? err.message : err) }),
    );
  } else if (m.type === "stop") {
    stopRequested = true;
  } else if (m.type === "call") {
    initialised.then(() => dispatch(m));
  }
});
