// The standard-library modules that the page's start-up imports (NumPy, then pylib.web) load into a
// freshly booted Pyodide, in the order they load: for offline.py's startup_modules. The page's
// worker imports them before it takes its memory snapshot of the booted interpreter (see worker.js),
// so that later visits find them already imported instead of loading them from the standard
// library's archive each time.
//   stdin: JSON {"wheels": [path, ...]}: the NumPy and pylib wheels the site ships
//   stdout: JSON ["module", ...]
// The wheels are written into site-packages before the list of loaded modules is taken, so that
// what installing them imports does not count: the page unpacks them itself, from JavaScript.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { loadPyodide } = await import(path.join(root, "node_modules", "pyodide", "pyodide.mjs"));
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const { wheels } = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const pyodide = await loadPyodide({
  indexURL: path.join(root, "node_modules", "pyodide") + "/",
  env: { PYTHONHASHSEED: "0" },
  stdout: (line) => process.stderr.write(line + "\n"),
  stderr: (line) => process.stderr.write(line + "\n"),
});
wheels.forEach((wheel, i) => pyodide.FS.writeFile(`/tmp/wheel-${i}.whl`, fs.readFileSync(wheel)));
const names = pyodide.runPython(`
import site
import sys
import zipfile

for i in range(${wheels.length}):
    with zipfile.ZipFile(f"/tmp/wheel-{i}.whl") as whl:
        whl.extractall(site.getsitepackages()[0])
before = set(sys.modules)
import pylib.web  # noqa: E402  (NumPy first, as pylib.web imports it)
stdlib = next(p for p in sys.path if p.endswith(".zip"))  # python_stdlib.zip, where Pyodide mounts it


def from_stdlib(name):
    if name in sys.builtin_module_names:
        return True
    file = getattr(sys.modules[name], "__file__", None) or ""
    return file.startswith(stdlib) and "site-packages" not in file


loaded = [name for name in sys.modules if name not in before and from_stdlib(name)]
import json  # noqa: E402  (after the list: the tool's own import does not count)

json.dumps(loaded)
`);
process.stdout.write(names + "\n");
