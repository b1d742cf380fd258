"""What makes the built site fast to start and usable offline: Python bytecode, precompressed
files, the offline manifest and the service worker.

    compiled(jobs)   Python compiled to bytecode (build.py's copy_pyodide and build_site call it)
    finish(out)      the build's last step, after everything else is written into out/

finish(out) writes:

1. Precompression. Every file that compresses by at least a tenth gets two siblings: X.br (brotli,
   quality 11, made with node's zlib: no Python package needed) and X.gz (gzip -9). build.py's
   SiteHandler serves them with Content-Encoding when the browser accepts it, as nginx's
   gzip_static or Caddy's `precompressed br gzip` do; hosts that compress on the fly ignore them.
   Compressing the 10 MB wasm at quality 11 takes about half a minute, so each result is kept in
   .cache/precompressed/ under its content's sha256 and a rebuild only compresses what changed.
2. The manifest, offline-manifest.json: every file the pages use, with its sha256, and the build's
   version, a hash over all of them (and the service worker's own code). Two builds with the same
   files have the same version; any change to any file gives a new one.
3. sw.js at the site's root: site/sw.js with the manifest written in. The browser compares sw.js
   byte for byte on each visit, so a new build is a new service worker, which saves the new files
   under the new version's cache and deletes the old one.
4. _headers: the two cross-origin-isolation headers for hosts that read such a file (Netlify,
   Cloudflare Pages); the service worker adds them itself on any host.

compiled(...) compiles Python to bytecode at build time, with the Pyodide the site ships: its
standard library, NumPy's wheel (whose sha256 build.py then writes into the vendored
pyodide-lock.json) and, in pylib's wheel, the modules the page imports when Python starts. Pyodide
ships them as source, so without this the page compiles every module it imports on every visit:
measured in Chromium, that was about half of Python's start. The compiled archives have their
members stored, not deflated, so that brotli compresses each as a whole (the standard library:
9.4 MB stored, 2.6 MB as .br, against 2.4 MB for the deflated source).
"""

import ast
import email.utils
import gzip
import hashlib
import io
import json
import os
import pathlib
import re
import subprocess
import time
import urllib.parse
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent  # the repository's root
CACHE = ROOT / ".cache" / "precompressed"
SW_TEMPLATE = ROOT / "site" / "sw.js"
SW_NAME, MANIFEST_NAME, HEADERS_NAME = "sw.js", "offline-manifest.json", "_headers"

ISOLATION_HEADERS = {"Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp"}
ENCODINGS = (("br", ".br"), ("gzip", ".gz"))  # preferred first
MIN_SIZE = 1024  # smaller files are sent as they are
MIN_SAVING = 0.10  # a sibling is written only when it saves at least this share of the bytes
BROTLI = {"quality": 11, "lgwin": 24}  # the largest window browsers accept (16 MB)
# Already compressed: not worth trying (fonts, images). Zips and wheels are tried: a stored one compresses.
INCOMPRESSIBLE = {".woff", ".woff2", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".br", ".gz"}
SW_BUILD_LINE = re.compile(r"^const BUILD = .*; // builder/offline\.py replaces this line$", re.M)


class OfflineError(Exception):
    pass


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# Members of NumPy's wheel that nothing in the page can use: f2py (it needs a C compiler), the C
# headers and static libraries, type stubs, Cython declarations and the extension modules that only
# NumPy's own test suite imports (f2py and _pyinstaller are named in numpy/__init__.py only inside
# functions that nothing here calls). They are half the wheel's files (171 of 338, 1.8 of 12.7 MB),
# and the page's worker writes the wheel out at every start.
NUMPY_UNUSED = re.compile(
    r"(^|/)tests/|^numpy/f2py/|\.pyi$|\.pxd$|^numpy/py\.typed$|^numpy/_pyinstaller/"
    r"|^numpy/_core/(include|lib)/|^numpy/random/(lib|_examples)/"
    r"|^numpy/_core/_(operand_flag_tests|rational_tests|struct_ufunc_tests|umath_tests|simd)\.")
# (_multiarray_tests stays: numpy._core._add_newdocs imports it at `import numpy`.)


def without_unused(wheel, unused=NUMPY_UNUSED):
    """The wheel's bytes without the members whose names match unused (their RECORD lines too)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(wheel)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            if unused.search(info.filename):
                continue
            data = zin.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data = b"".join(line for line in data.splitlines(keepends=True)
                                if not unused.search(line.split(b",")[0].decode("utf-8", "replace")))
            zout.writestr(info, data)
    return out.getvalue()


# Python bytecode. Pyodide ships its standard library and its wheels as source, so the page's Python
# compiles every module it imports, every time: for the standard library that is most of its
# start-up. The build compiles them once, with the Pyodide the site ships (tools/pycompile.mjs).
COMPILED_WHEELS = ("numpy",)  # Pyodide packages vendored compiled (build.py updates their sha256 in the lock)
STDLIB_PREFIX = "/lib/python312.zip/"  # where Pyodide mounts python_stdlib.zip
SITE_PACKAGES = "/lib/python3.12/site-packages/"
PYC_CACHE = ROOT / ".cache" / "pyc"


def compiled(jobs):
    """[(zip bytes, mode, prefix[, only])] -> [the zip with its Python files compiled, members stored].

    mode "sourceless" replaces each x.py by x.pyc (the standard library, NumPy: their source is not
    shown anywhere); "pycache" keeps x.py and adds __pycache__/x.cpython-312.pyc (pylib, whose
    source the page may show). prefix: where the files are at run time; only: the .py files to
    compile (default: all). Results are cached in .cache/pyc/ by input; only new inputs start node
    (about 5 s, most of it Pyodide's own start)."""
    tool = ROOT / "tools" / "pycompile.mjs"
    pyodide_version = json.loads((ROOT / "node_modules" / "pyodide" / "package.json").read_text())["version"]
    salt = hashlib.sha256(tool.read_bytes() + pyodide_version.encode()).hexdigest()[:16]
    PYC_CACHE.mkdir(parents=True, exist_ok=True)
    paths, todo = [], []
    for data, mode, prefix, *rest in jobs:
        only = sorted(rest[0]) if rest and rest[0] is not None else None
        key = hashlib.sha256(f"{salt} {mode} {prefix} {only} ".encode() + data).hexdigest()
        target = PYC_CACHE / f"{key}.zip"
        if target.is_file():
            os.utime(target)
        else:
            source = PYC_CACHE / f"{key}.in.zip"
            source.write_bytes(data)
            todo.append([str(source), str(target), mode, prefix, only])
        paths.append(target)
    if todo:
        proc = subprocess.run(["node", str(tool)], input=json.dumps(todo), capture_output=True, text=True)
        for job in todo:
            pathlib.Path(job[0]).unlink(missing_ok=True)
        if proc.returncode != 0:
            raise OfflineError(f"compiling Python to bytecode (node tools/pycompile.mjs) failed:\n{proc.stderr[-3000:]}")
    cutoff = time.time() - CACHE_DAYS * 86400
    for old in PYC_CACHE.glob("*.zip"):
        if old.stat().st_mtime < cutoff:
            old.unlink(missing_ok=True)
    return [path.read_bytes() for path in paths]


def startup_modules(files, start="pylib/web/__init__.py"):
    """The .py files of {path: source} that importing `start` imports at once: its module-level
    imports, followed through the archive (imports inside functions happen later, if ever)."""
    def module_file(name):
        path = name.replace(".", "/")
        return next((f for f in (path + ".py", path + "/__init__.py") if f in files), None)

    def top_level(tree):
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            yield from (n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))

    seen, todo = set(), [start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        parts = path[:-3].split("/")
        if parts[-1] == "__init__":
            parts.pop()
        package = parts if path.endswith("__init__.py") else parts[:-1]
        for i in range(1, len(package)):  # the parent packages run first
            todo.append("/".join(package[:i]) + "/__init__.py")
        for node in top_level(ast.parse(files[path])):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = package[: len(package) - node.level + 1] if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                names = [mod] + [f"{mod}.{alias.name}" for alias in node.names]
            todo += [f for f in map(module_file, names) if f]
    return sorted(seen)


def compile_wheel(path):
    """Rewrites pylib's wheel at path with __pycache__ bytecode beside the sources of the modules the
    page imports when Python starts (startup_modules); the others compile when an op first needs
    them, which keeps the wheel small (all of it compiled is 0.3 MB more to send)."""
    path = pathlib.Path(path)
    data = path.read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as whl:
        files = {n: whl.read(n) for n in whl.namelist() if n.endswith(".py")}
    data = compiled([(data, "pycache", SITE_PACKAGES, startup_modules(files))])[0]
    if path.read_bytes() != data:
        path.write_bytes(data)


# ---------------------------------------------------------------------------
# What the site is made of


def is_precompressed_sibling(path):
    return path.suffix in (".br", ".gz") and path.with_suffix("").is_file()


def site_files(out):
    """Every file of the built site in out/, as sorted POSIX paths relative to it, without the
    precompressed siblings and the files this module writes."""
    out = pathlib.Path(out)
    files = []
    for path in out.rglob("*"):
        if not path.is_file() or is_precompressed_sibling(path) or path.name.endswith(".tmp"):
            continue
        rel = path.relative_to(out).as_posix()
        if rel in (SW_NAME, MANIFEST_NAME, HEADERS_NAME):
            continue
        files.append(rel)
    return sorted(files)


def url_path(rel):
    """rel as a browser writes it in a URL's path (the service worker compares it with
    URL.pathname): the WHATWG URL parser percent-encodes only controls, space, " # < > ? ` { } and
    non-ASCII there, so "+" (pylib's wheel has one) stays as it is."""
    return urllib.parse.quote(rel, safe="/!$&'()*+,;=:@[]^|")


def precached(rel, out):
    """Whether the service worker saves this file: not source maps, not KaTeX's .woff/.ttf fonts
    that have a .woff2 twin (every browser with service workers reads woff2), and not the notebooks'
    wheels (pip fetches them, never the page)."""
    path = pathlib.Path(out, rel)
    if path.suffix == ".map":
        return False
    if rel.startswith("notebooks/") and path.suffix == ".whl":
        return False
    if path.suffix in (".woff", ".ttf") and path.with_suffix(".woff2").is_file():
        return False
    return True


# ---------------------------------------------------------------------------
# Precompression


CACHE_DAYS = 14  # cached compressions no build has used for this long are deleted


def _cached(digest, ext):
    path = CACHE / f"{digest}{ext}"
    if path.is_file():
        os.utime(path)  # in use: kept by prune_cache
    return path


def prune_cache():
    cutoff = time.time() - CACHE_DAYS * 86400
    for path in CACHE.glob("*"):
        if path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)


def _brotli_start(jobs):
    """Starts compressing [(source path, destination path)] with brotli in node (tools/brotli.mjs);
    returns the process, or None when there is nothing to do. _brotli_wait waits for it."""
    if not jobs:
        return None
    proc = subprocess.Popen(["node", str(ROOT / "tools" / "brotli.mjs"), str(BROTLI["quality"]), str(BROTLI["lgwin"])],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    proc.stdin.write(json.dumps([[str(a), str(b)] for a, b in jobs]))
    proc.stdin.close()
    return proc


def _brotli_wait(proc):
    if proc is None:
        return
    stderr = proc.stderr.read()
    if proc.wait() != 0:
        raise OfflineError(f"brotli compression (node tools/brotli.mjs) failed:\n{stderr}")


def stop(proc):
    """Stops start_precompress's process if it still runs (the build failed before finish)."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    if proc is not None and proc.stderr and not proc.stderr.closed:
        proc.stderr.close()


def _brotli(jobs):
    """[(source path, destination path)] compressed with brotli by node (tools/brotli.mjs)."""
    _brotli_wait(_brotli_start(jobs))


def _brotli_todo(out, rels, digests):
    """[(path, cached .br path)] for the files of rels worth trying whose brotli copy is not cached."""
    todo = []
    for rel in rels:
        path = out / rel
        if path.stat().st_size < MIN_SIZE or path.suffix.lower() in INCOMPRESSIBLE:
            continue
        if _cached(digests[rel], ".skip").is_file():
            continue
        br = _cached(digests[rel], f".q{BROTLI['quality']}w{BROTLI['lgwin']}.br")
        if not br.is_file():
            todo.append((path, br))
    return todo


def start_precompress(out, folders):
    """Starts brotli, in the background, on the files already written in these folders of out (the
    vendored Pyodide and the corpus: most of the site's bytes, and at quality 11 most of a first
    build's time), into the cache that precompress reads; the rest of the site is written meanwhile,
    on the other core. finish(out, started=...) waits for it. Returns the process, or None."""
    out = pathlib.Path(out)
    CACHE.mkdir(parents=True, exist_ok=True)
    rels = [p.relative_to(out).as_posix() for folder in folders for p in sorted((out / folder).rglob("*"))
            if p.is_file() and p.suffix not in (".br", ".gz")]
    return _brotli_start(_brotli_todo(out, rels, {rel: sha256_file(out / rel) for rel in rels}))


def precompress(out, files, digests):
    """Writes X.br and X.gz next to each file worth compressing; returns the siblings written."""
    out = pathlib.Path(out)
    CACHE.mkdir(parents=True, exist_ok=True)
    todo_br, wanted = [], {}
    for rel in files:
        path = out / rel
        size = path.stat().st_size
        if size < MIN_SIZE or path.suffix.lower() in INCOMPRESSIBLE:
            continue
        digest = digests[rel]
        skip, gz = _cached(digest, ".skip"), _cached(digest, ".gz")
        if skip.is_file():
            continue
        if not gz.is_file():
            data = gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)
            if len(data) > (1 - MIN_SAVING) * size:
                skip.write_bytes(b"")
                continue
            gz.with_suffix(".gz.tmp").write_bytes(data)
            gz.with_suffix(".gz.tmp").replace(gz)
        br = _cached(digest, f".q{BROTLI['quality']}w{BROTLI['lgwin']}.br")
        if not br.is_file():
            todo_br.append((path, br))
        wanted[rel] = (gz, br)
    _brotli(todo_br)
    prune_cache()
    written = []
    for rel, (gz, br) in wanted.items():
        siblings = [(gz, ".gz")]
        if br.stat().st_size < gz.stat().st_size:
            siblings.append((br, ".br"))
        for cached, ext in siblings:
            target = out / (rel + ext)
            if not (target.is_file() and target.stat().st_size == cached.stat().st_size
                    and target.read_bytes() == cached.read_bytes()):
                target.write_bytes(cached.read_bytes())
            written.append(rel + ext)
    return written


# ---------------------------------------------------------------------------
# The manifest and the service worker


def build_version(entries, template):
    h = hashlib.sha256(hashlib.sha256(template.encode()).hexdigest().encode())
    for path, digest in entries:
        h.update(f"\n{path} {digest}".encode())
    return h.hexdigest()[:20]


def read_manifest(out):
    path = pathlib.Path(out, MANIFEST_NAME)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def finish(out, started=None):
    """Precompress out/, write offline-manifest.json, sw.js and _headers; returns the manifest.
    Call it after every other file of the site is written; started is start_precompress's process,
    which it waits for first."""
    out = pathlib.Path(out)
    _brotli_wait(started)
    old = read_manifest(out)
    for sibling in old.get("precompressed", []):  # a copy of a file now gone (an older pylib wheel) goes too,
        if not (out / sibling).with_suffix("").is_file():  # before it could be taken for a file of the site
            (out / sibling).unlink(missing_ok=True)
    files = site_files(out)
    digests, stat = {}, {}
    for rel in files:
        st = (out / rel).stat()
        previous = old.get("stat", {}).get(rel)
        # An unchanged file (same size and mtime as last time) keeps its digest; the rest are hashed.
        if previous and previous[1] == st.st_size and previous[2] == st.st_mtime_ns:
            digests[rel] = previous[0]
        else:
            digests[rel] = sha256_file(out / rel)
        stat[rel] = [digests[rel], st.st_size, st.st_mtime_ns]
    template = SW_TEMPLATE.read_text(encoding="utf-8")
    if not SW_BUILD_LINE.search(template):
        raise OfflineError(f"{SW_TEMPLATE.relative_to(ROOT)}: no `const BUILD = …; // builder/offline.py replaces this line`")
    entries = [(url_path(rel), digests[rel]) for rel in files if precached(rel, out)]
    version = build_version(entries, template)
    # bytes: what the saved copy holds, for the page's "saved for offline reading (… MB)"
    build = {"version": version, "files": entries, "bytes": sum(stat[rel][1] for rel in files if precached(rel, out))}
    sw = SW_BUILD_LINE.sub(lambda m: f"const BUILD = {json.dumps(build, separators=(',', ':'))}; // written by builder/offline.py",
                           template)
    _write_if_changed(out / SW_NAME, sw)
    _write_if_changed(out / HEADERS_NAME, "/*\n" + "".join(f"  {k}: {v}\n" for k, v in ISOLATION_HEADERS.items()))
    digests[SW_NAME] = hashlib.sha256(sw.encode()).hexdigest()  # each visit fetches it: sent compressed too
    siblings = precompress(out, files + [SW_NAME], digests)
    for stale in set(old.get("precompressed", [])) - set(siblings):  # a file gone or now not worth it
        (out / stale).unlink(missing_ok=True)
    manifest = {"version": version, "files": dict(entries),
                "bytes": sum(stat[rel][1] for rel in files if precached(rel, out)),
                "precompressed": sorted(siblings), "stat": stat}
    _write_if_changed(out / MANIFEST_NAME, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def _write_if_changed(path, text):
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


# ---------------------------------------------------------------------------
# Serving the siblings (build.py's SiteHandler)


def accepted_encodings(header):
    """Accept-Encoding -> the set of codings with a non-zero quality."""
    accepted = set()
    for part in (header or "").split(","):
        coding, _, params = part.strip().partition(";")
        q = re.search(r"q\s*=\s*([0-9.]+)", params)
        if coding and not (q and float(q.group(1)) == 0):
            accepted.add(coding.strip().lower())
    return accepted


def send_precompressed(handler):
    """For SimpleHTTPRequestHandler.send_head: sends the headers for the X.br or X.gz sibling of the
    requested file, with Content-Encoding, when the request accepts it (or a 304 when the request's
    If-Modified-Since is not older than the file). Returns (True, body or None) when it answered,
    (False, None) to let the handler serve the file itself."""
    path = handler.translate_path(handler.path)
    if os.path.isdir(path):
        if not urllib.parse.urlsplit(handler.path).path.endswith("/"):
            return False, None  # the handler redirects to the slash
        path = os.path.join(path, "index.html")
    if not os.path.isfile(path):
        return False, None
    accepted = accepted_encodings(handler.headers.get("Accept-Encoding"))
    for coding, ext in ENCODINGS:
        if coding in accepted and os.path.isfile(path + ext):
            break
    else:
        return False, None
    mtime = os.stat(path).st_mtime
    since = handler.headers.get("If-Modified-Since")
    if since and not handler.headers.get("If-None-Match"):
        try:
            when = email.utils.parsedate_to_datetime(since)
        except (TypeError, ValueError, IndexError, OverflowError):
            when = None
        if when is not None and when.tzinfo is not None and int(mtime) <= when.timestamp():
            handler.send_response(304)
            handler.send_header("Vary", "Accept-Encoding")
            handler.end_headers()
            return True, None
    f = open(path + ext, "rb")
    handler.send_response(200)
    handler.send_header("Content-Type", handler.guess_type(path))
    handler.send_header("Content-Encoding", coding)
    handler.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
    handler.send_header("Last-Modified", handler.date_time_string(mtime))
    handler.send_header("Vary", "Accept-Encoding")
    handler.end_headers()
    return True, f
