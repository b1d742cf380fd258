// Compiles the Python files of zip archives (Pyodide's standard library, wheels) to bytecode with the
// Pyodide the site ships, so the page's Python imports them without compiling their source first:
// for builder/offline.py. Its CPython (3.12) is the one that reads the .pyc files, so they always
// match.
//   stdin: JSON [[source zip, destination zip, mode, prefix, only], ...]
//     mode "sourceless": each x.py is replaced by x.pyc (zipimport and the path finder both load it);
//     mode "pycache":    each x.py is kept and __pycache__/x.<cache tag>.pyc is added beside it.
//     prefix: where the archive's files live at run time, for the code objects' file names.
//     only: null, or the archive's .py files to compile (the others are kept as they are).
// The .pyc files are unchecked hash-based ones (PEP 552): valid whatever the files' dates. A .py that
// does not compile is kept as it is. Members are stored, not deflated (brotli compresses the whole
// archive better); dates and order are the source's, and PYTHONHASHSEED is fixed, so the output is
// the same on every run.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { loadPyodide } = await import(path.join(root, "node_modules", "pyodide", "pyodide.mjs"));
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const jobs = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const pyodide = await loadPyodide({
  indexURL: path.join(root, "node_modules", "pyodide") + "/",
  env: { PYTHONHASHSEED: "0" },
  stdout: (line) => process.stderr.write(line + "\n"),
  stderr: (line) => process.stderr.write(line + "\n"),
});
pyodide.runPython(`
import importlib._bootstrap_external as bootstrap
import importlib.util
import sys
import zipfile

def compile_zip(src, dst, mode, prefix, only=None):
    tag = sys.implementation.cache_tag
    only = None if only is None else set(only)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            name = info.filename
            if not name.endswith(".py") or info.is_dir() or (only is not None and name not in only):
                zout.writestr(info, data, zipfile.ZIP_STORED)
                continue
            try:
                code = compile(data, prefix + name, "exec", dont_inherit=True)
            except (SyntaxError, ValueError):
                zout.writestr(info, data, zipfile.ZIP_STORED)
                continue
            pyc = bytes(bootstrap._code_to_hash_pyc(code, importlib.util.source_hash(data), checked=False))
            if mode == "pycache":
                zout.writestr(info, data, zipfile.ZIP_STORED)
                folder, _, base = name.rpartition("/")
                target = (folder + "/" if folder else "") + f"__pycache__/{base[:-3]}.{tag}.pyc"
            else:
                target = name + "c"
            member = zipfile.ZipInfo(target, date_time=info.date_time)
            member.external_attr = info.external_attr
            zout.writestr(member, pyc, zipfile.ZIP_STORED)
`);
const compileZip = pyodide.globals.get("compile_zip");
for (const [source, destination, mode, prefix, only] of jobs) {
  pyodide.FS.writeFile("/tmp/in.zip", fs.readFileSync(source));
  const names = only ? pyodide.toPy(only) : null;
  compileZip("/tmp/in.zip", "/tmp/out.zip", mode, prefix, names);
  names?.destroy();
  fs.writeFileSync(destination + ".tmp", pyodide.FS.readFile("/tmp/out.zip"));
  fs.renameSync(destination + ".tmp", destination);
}
compileZip.destroy();
