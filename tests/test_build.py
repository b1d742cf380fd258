"""build.py as a program: unknown references fail the build, outputs are reproducible."""

import base64
import email.utils
import gzip
import hashlib
import io
import json
import math
import os
import re
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
import zipfile

import pytest

import build
from builder import offline


@pytest.fixture
def ctx():
    results = {"values": {"ch1.x.mean": 1.25, "ch1.x.sd": 0.5, "ch1.n": 3,
                          "ch1.a.per_seed": {"0": 2.50, "1": 2.61, "2": 2.47},
                          "ch1.b.per_seed": {"0": 2.60, "1": 2.70, "2": 2.58},
                          "ch1.c.per_seed": {"0": 2.55, "1": 2.55, "2": 2.55},
                          "ch1.d.per_seed": {"0": 2.50, "1": 2.60}}}
    return build.ChapterContext(build.make_env(), results, "chapters/test.md")


def test_measured_number_is_labelled(ctx):
    html = str(ctx.measured("ch1.x.mean", ".2f"))
    assert "1.25" in html and 'class="fig measured"' in html and "ch1.x.mean" in html


def test_measured_timing_comes_from_the_timings_section_and_says_so():
    results = {"values": {"ch1.n": 3}, "timings": {"ch1.peak_gflops": 12.345, "ch1.flag": True}}
    c = build.ChapterContext(build.make_env(), results, "chapters/test.md")
    html = str(c.measured("ch1.peak_gflops", ".1f"))
    assert "12.3" in html and 'class="fig measured"' in html and "timings key ch1.peak_gflops" in html
    with pytest.raises(build.BuildError):
        c.measured("ch1.flag")  # only numbers are quoted from the timings


def test_measured_pm_renders_mean_and_sd(ctx):
    assert "1.250 ± 0.500" in str(ctx.measured_pm("ch1.x"))


@pytest.mark.parametrize("call", [
    lambda c: c.measured("ch1.no_such_key"),
    lambda c: c.measured_pm("ch1.nothing"),
    lambda c: c.derived("no_such_value"),
    lambda c: c.code("pylib.model.no_such_function"),
    lambda c: c.code("pylib.no_such_module.f"),
    lambda c: c.test("test_that_does_not_exist"),
    lambda c: c.widget("no-such-widget"),
])
def test_unknown_reference_fails_the_build(ctx, call):
    with pytest.raises(build.BuildError):
        call(ctx)


def test_compare_renders_the_paired_interval_and_its_verdict(ctx):
    html = str(ctx.compare("ch1.a", "ch1.b", expect="lower"))
    assert "Δ = −0.100 nats" in html and "3 paired seeds: lower" in html and 'class="fig measured"' in html


def test_compare_fails_the_build_when_the_wording_outruns_the_seeds(ctx):
    with pytest.raises(build.BuildError, match="expects 'lower' but the seeds say 'unresolved'"):
        ctx.compare("ch1.a", "ch1.c", expect="lower")
    assert "no difference resolved with 3 seeds" in str(ctx.compare("ch1.a", "ch1.c", expect="unresolved"))


@pytest.mark.parametrize("call", [
    lambda c: c.compare("ch1.a", "ch1.d", expect="lower"),  # different seeds
    lambda c: c.compare("ch1.a", "ch1.nothing", expect="lower"),
    lambda c: c.compare("ch1.a", "ch1.b", expect="better"),  # not a verdict
])
def test_compare_refuses_arms_it_cannot_pair(ctx, call):
    with pytest.raises(build.BuildError):
        call(ctx)


def test_measured_seeds_lists_every_seed(ctx):
    assert "seed 0: 2.500, seed 1: 2.610, seed 2: 2.470" in str(ctx.measured_seeds("ch1.a"))


def test_code_is_pulled_from_pylib_by_name(ctx):
    html = ctx.fill_blocks(str(ctx.code("pylib.data.get_batch")))
    assert "get_batch" in html and "pylib/data.py" in html and 'class="highlight"' in html


def test_companion_code_is_read_from_its_file_without_importing_torch():
    """companions/ need PyTorch and the build does not: their source is read, not imported."""
    import subprocess
    import sys
    script = ("import sys, build\n"
              "c = build.ChapterContext(build.make_env(), {'values': {}}, 'chapters/test.md')\n"
              "html = c.fill_blocks(str(c.code('companions.model.GPT')))\n"
              "assert 'weight tying' in html and 'companions/model.py' in html, html[:300]\n"
              "assert 'torch' not in sys.modules, 'the build imported torch'\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=build.ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_pylib_never_imports_the_companions():
    """The page is NumPy-only: pylib (which the page runs) never imports companions/ (PyTorch)."""
    import re
    offenders = [str(p.relative_to(build.ROOT)) for p in (build.ROOT / "pylib").rglob("*.py")
                 if re.search(r"^\s*(from|import)\s+companions\b", p.read_text(encoding="utf-8"), re.M)]
    assert offenders == []


@pytest.mark.parametrize("name", ["companions.model.no_such_class", "companions.no_such_module.f"])
def test_unknown_companion_code_fails_the_build(ctx, name):
    with pytest.raises(build.BuildError):
        ctx.code(name)


def test_test_source_is_pulled_by_name(ctx):
    html = ctx.fill_blocks(str(ctx.test("test_get_batch_targets_are_inputs_shifted_by_one")))
    assert "tests/test_data.py" in html and "shifted" in html


def test_derived_values_come_from_pylib(ctx):
    values = build.derived_values()
    assert values["param_count"] == 5376 and values["vocab_size"] == 65
    assert 'class="fig derived"' in str(ctx.derived("param_count"))


def test_cited_text_is_escaped(ctx):
    assert "&lt;b&gt;" in str(ctx.cited("<b>20</b>", "Hoffmann et al. 2022"))


def test_chapter_with_unknown_key_fails(tmp_path):
    page = tmp_path / "01-bad.md"
    page.write_text('# Bad\n\nLoss {{ measured("ch1.missing") }}.\n')
    chapter = build.Chapter(1, "01-bad", "Bad", page)
    with pytest.raises(build.BuildError, match="ch1.missing"):
        build.render_chapter(build.make_env(), chapter, {"values": {}})


def test_a_chapter_can_call_compare_and_measured_seeds(tmp_path):
    page = tmp_path / "01-cmp.md"
    page.write_text('# Cmp\n\nA is {{ compare("ch1.a", "ch1.b", expect="lower") }}; '
                    'seeds {{ measured_seeds("ch1.a") }}.\n')
    values = {"ch1.a.per_seed": {"0": 2.50, "1": 2.61, "2": 2.47}, "ch1.b.per_seed": {"0": 2.60, "1": 2.70, "2": 2.58}}
    html = build.render_chapter(build.make_env(), build.Chapter(1, "01-cmp", "Cmp", page), {"values": values})
    assert "3 paired seeds: lower" in html and "seed 2: 2.470" in html


def test_maths_renders_offline_with_katex():
    html = build.markdown_to_html("Gradient $p - y$ and\n\n$$\\frac{a}{b}$$\n")
    assert 'class="katex"' in html and "katex-display" in html and "$" not in html


def test_bad_tex_fails_the_build():
    with pytest.raises(build.BuildError, match="KaTeX"):
        build.markdown_to_html("$\\frac{a$\n")


def test_wheel_is_reproducible_and_depends_on_numpy_only(tmp_path):
    name1 = build.build_wheel(tmp_path / "a")
    name2 = build.build_wheel(tmp_path / "b")
    data1, data2 = ((tmp_path / d / name1).read_bytes() for d in "ab")
    assert name1 == name2 and data1 == data2
    with zipfile.ZipFile(tmp_path / "a" / name1) as whl:
        meta = whl.read(next(n for n in whl.namelist() if n.endswith("METADATA"))).decode()
        assert "pylib/model.py" in whl.namelist()
        assert {"pylib/web/__init__.py", "pylib/studies/__init__.py", "pylib/systems/__init__.py"} <= set(whl.namelist())
        assert "pylib/studies/chinchilla_data/svg_extracted_data.csv" in whl.namelist()  # the page's Chinchilla fit reads it
    assert [line for line in meta.splitlines() if line.startswith("Requires-Dist")] == ["Requires-Dist: numpy"]


def test_pyodide_wheel_with_wrong_sha_is_refused(tmp_path, monkeypatch):
    lock = json.loads((build.NODE_MODULES / "pyodide" / "pyodide-lock.json").read_text())
    fake = tmp_path / "assets.whl"
    with zipfile.ZipFile(fake, "w") as z:
        for package in build.PYODIDE_PACKAGES:
            z.writestr(build.PYODIDE_ASSETS_DIR + lock["packages"][package]["file_name"], b"tampered")
    monkeypatch.setattr(build, "PYODIDE_ASSETS", fake)
    with pytest.raises(build.BuildError, match="sha256"):
        build.copy_pyodide(tmp_path / "pyodide")


def test_built_site_has_checked_pyodide_and_pages():
    out = build.OUT
    assert (out / "index.html").is_file(), "run the README's setup command to build _site/"
    lock = json.loads((out / "pyodide" / "pyodide-lock.json").read_text())  # NumPy's sha256 is the stored wheel's
    for package in build.PYODIDE_PACKAGES:
        entry = lock["packages"][package]
        assert hashlib.sha256((out / "pyodide" / entry["file_name"]).read_bytes()).hexdigest() == entry["sha256"]
    for chapter in build.find_chapters():
        assert (out / "chapters" / f"{chapter.slug}.html").is_file()


def test_code_with_blank_lines_stays_one_block(tmp_path):
    page = tmp_path / "01-code.md"
    page.write_text('# Code\n\nBefore.\n\n{{ code("pylib.data.build_corpus") }}\n\nAfter *this*.\n')
    html = build.render_chapter(build.make_env(), build.Chapter(1, "01-code", "Code", page), {"values": {}})
    assert html.count('<figure class="code">') == 1 and "<em>this</em>" in html
    assert "&lt;span" not in html and "<p><span" not in html  # no highlighted line re-read as Markdown


def test_chapter_references_link_to_chapters_that_exist():
    links = {2: "02-data.html", 7: "07-init.html"}
    html = build.markdown_to_html(
        "See chapter 2 and Chapter 7, not chapter 12 or chapters 9–16.\n\n"
        "`chapter 2` in code, [chapter 7](x.html) already a link.\n\n## Back to chapter 2\n", links)
    assert '<a href="02-data.html" class="chapter-ref">chapter 2</a> and' in html
    assert '<a href="07-init.html" class="chapter-ref">Chapter 7</a>' in html
    assert "chapter 12" in html and "chapter-ref\">chapter 12" not in html  # not written yet: plain
    assert "<code>chapter 2</code>" in html and '<a href="x.html">chapter 7</a>' in html
    assert '<h2 id="back-to-chapter-2">Back to chapter 2</h2>' in html  # headings get ids, not links


# ---------------------------------------------------------------------------
# builder/offline.py: the precompressed files, the offline manifest and the service worker


def _offline_site(root):
    """A small built site: pages and scripts that compress, a font with its woff2 twin, a source map,
    a file too small to compress and one that does not compress."""
    files = {
        "index.html": "<!doctype html><p>" + "The loss falls as the model learns. " * 120,
        "chapters/01-a b.html": "<!doctype html><p>" + "Chapter one, with a space in its name. " * 100,
        "static/js/main.js": "export const x = 1;\n" * 200,
        "static/js/main.js.map": '{"version": 3}' * 200,
        "vendor/katex/fonts/KaTeX_Main.woff2": "woff2",
        "vendor/katex/fonts/KaTeX_Main.woff": "woff",
        "vendor/katex/fonts/KaTeX_Main.ttf": "ttf",
        "data/vocab.json": '{"chars": "abc"}',
        "wheels/pylib-0.1.0+abc-py3-none-any.whl": "a wheel",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "data" / "noise.bin").write_bytes(os.urandom(4096))
    return root


def _brotli_decompress(*paths):
    """Each file brotli-decompressed by node's zlib, in one node run: [bytes], in the order given."""
    proc = subprocess.run(["node", "-e", "const z = require('zlib'), fs = require('fs');"
                           "process.stdout.write(JSON.stringify(process.argv.slice(1).map("
                           "p => z.brotliDecompressSync(fs.readFileSync(p)).toString('base64'))))",
                           *map(str, paths)], capture_output=True, check=True)
    return [base64.b64decode(b) for b in json.loads(proc.stdout)]


def test_offline_manifest_lists_every_file_the_pages_use_with_its_sha256(tmp_path):
    site = _offline_site(tmp_path)
    manifest = offline.finish(site)
    # Paths as URL.pathname has them: a space is %20, a "+" stays. No source map, no woff/ttf with a
    # woff2 twin, no precompressed copies.
    expected = {"index.html", "chapters/01-a%20b.html", "static/js/main.js", "vendor/katex/fonts/KaTeX_Main.woff2",
                "data/vocab.json", "data/noise.bin", "wheels/pylib-0.1.0+abc-py3-none-any.whl"}
    assert set(manifest["files"]) == expected
    for path, digest in manifest["files"].items():
        rel = urllib.parse.unquote(path)
        assert hashlib.sha256((site / rel).read_bytes()).hexdigest() == digest
    sw = (site / "sw.js").read_text()
    build_line = next(line for line in sw.splitlines() if line.startswith("const BUILD = "))
    written = json.loads(build_line[len("const BUILD = "):build_line.index("; // written by builder/offline.py")])
    assert written == {"version": manifest["version"], "files": [[p, manifest["files"][p]] for p in sorted(expected)],
                       "bytes": sum((site / urllib.parse.unquote(p)).stat().st_size for p in expected)}
    assert (site / "_headers").read_text() == ("/*\n  Cross-Origin-Opener-Policy: same-origin\n"
                                               "  Cross-Origin-Embedder-Policy: require-corp\n")


def test_the_build_version_changes_with_any_file_and_only_then(tmp_path):
    site = _offline_site(tmp_path)
    first = offline.finish(site)
    sw = (site / "sw.js").read_bytes()
    again = offline.finish(site)
    assert again["version"] == first["version"] and (site / "sw.js").read_bytes() == sw  # same files: same worker
    (site / "data" / "vocab.json").write_text('{"chars": "abd"}')  # one byte
    changed = offline.finish(site)
    assert changed["version"] != first["version"] and (site / "sw.js").read_bytes() != sw
    assert changed["files"]["data/vocab.json"] != first["files"]["data/vocab.json"]


def test_precompressed_copies_decompress_to_the_file_and_follow_it(tmp_path):
    site = _offline_site(tmp_path)
    offline.finish(site)
    compressed = ("index.html", "chapters/01-a b.html", "static/js/main.js", "sw.js")
    brotli = _brotli_decompress(*(site / f"{rel}.br" for rel in compressed))
    for rel, unbrotlied in zip(compressed, brotli, strict=True):
        original = (site / rel).read_bytes()
        assert gzip.decompress((site / f"{rel}.gz").read_bytes()) == original, rel
        assert unbrotlied == original, rel
        assert (site / f"{rel}.br").stat().st_size < (site / f"{rel}.gz").stat().st_size < len(original) * 0.9
    for rel in ("data/vocab.json", "data/noise.bin", "vendor/katex/fonts/KaTeX_Main.woff2"):  # too small, or random
        assert not (site / f"{rel}.gz").exists() and not (site / f"{rel}.br").exists(), rel
    (site / "static" / "js" / "main.js").write_text("export const y = 2;\n" * 300)
    offline.finish(site)
    assert gzip.decompress((site / "static/js/main.js.gz").read_bytes()) == (site / "static/js/main.js").read_bytes()
    (site / "index.html").unlink()
    manifest = offline.finish(site)
    assert not (site / "index.html.gz").exists() and not (site / "index.html.br").exists()  # no stale copy left
    # nor is one listed as a file of the site (the service worker would fail to save it, for ever)
    assert not any(path.startswith("index.html") for path in manifest["files"]), sorted(manifest["files"])
    assert all((site / urllib.parse.unquote(path)).is_file() for path in manifest["files"])


def test_brotli_started_early_is_what_finish_uses_and_a_failed_build_stops_it(tmp_path, monkeypatch):
    """build_site starts brotli on the vendored files before the pages render (start_precompress) and
    finish waits for it: finish then compresses only the files started later, and writes the same copies."""
    monkeypatch.setattr(offline, "CACHE", tmp_path / "cache")
    site = _offline_site(tmp_path / "site")
    started = offline.start_precompress(site, ["static"])
    assert started is not None
    jobs = []
    real_start = offline._brotli_start
    monkeypatch.setattr(offline, "_brotli_start", lambda todo: jobs.extend(p.relative_to(site).as_posix() for p, _ in todo)
                        or real_start(todo))
    offline.finish(site, started=started)
    assert "static/js/main.js" not in jobs and "index.html" in jobs, jobs
    early = (site / "static/js/main.js.br").read_bytes()
    assert _brotli_decompress(site / "static/js/main.js.br") == [(site / "static/js/main.js").read_bytes()]
    monkeypatch.setattr(offline, "CACHE", tmp_path / "cache2")  # the same copy when finish compresses it itself
    offline.finish(site)
    assert (site / "static/js/main.js.br").read_bytes() == early
    monkeypatch.setattr(offline, "CACHE", tmp_path / "cache3")
    running = offline.start_precompress(site, ["static", "chapters"])
    offline.stop(running)
    assert running.poll() is not None


def test_the_server_sends_a_precompressed_copy_only_to_a_browser_that_accepts_it(tmp_path):
    site = _offline_site(tmp_path)
    offline.finish(site)
    server = build.make_server(0, site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/"

    def get(path, **headers):
        try:
            with urllib.request.urlopen(urllib.request.Request(base + path, headers=headers)) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, b""

    try:
        page = (site / "index.html").read_bytes()
        for accept, encoding, body in [("gzip, deflate, br", "br", (site / "index.html.br").read_bytes()),
                                       ("gzip;q=1.0, br;q=0", "gzip", (site / "index.html.gz").read_bytes()),
                                       ("identity", None, page)]:
            for path in ("index.html", ""):  # a folder's index too
                status, headers, data = get(path, **{"Accept-Encoding": accept})
                assert status == 200 and data == body, (accept, path)
                assert headers.get("Content-Encoding") == encoding
                assert headers["Content-Type"].startswith("text/html")
                assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
                assert headers["Cross-Origin-Embedder-Policy"] == "require-corp"
        status, headers, _ = get("static/js/main.js", **{"Accept-Encoding": "br"})
        assert headers["Content-Type"] == "text/javascript" and headers["Vary"] == "Accept-Encoding"
        later = email.utils.formatdate((site / "index.html").stat().st_mtime + 10, usegmt=True)
        assert get("index.html", **{"Accept-Encoding": "br", "If-Modified-Since": later})[0] == 304
        assert get("data/noise.bin", **{"Accept-Encoding": "br"})[1].get("Content-Encoding") is None
    finally:
        server.shutdown()
        server.server_close()


def _zip(members):
    """A deflated zip of the members, the same bytes on every call (fixed timestamps), so that
    offline.compiled's cache, keyed by the input's bytes, can hold its compiled twin."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in members.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o600 << 16  # what writestr(name, ...) gives
            z.writestr(info, text, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def test_python_is_compiled_to_bytecode_by_pyodide_reproducibly(tmp_path, monkeypatch):
    """Two node runs compile the same bytes: the first through the build's own cache (.cache/pyc, as
    copy_pyodide uses it: a node run on the first test run, its kept result afterwards, made by an
    earlier node run of the same tools/pycompile.mjs and Pyodide, which the cache key holds), the
    second with an empty cache, so a node run every time, of both jobs at once."""
    source = _zip({"pkg/__init__.py": "", "pkg/mod.py": "VALUE = {'a', 'b'}\n" * 20,
                   "pkg/broken.py": "def (:\n", "pkg/data.txt": "not Python"})
    jobs = [(source, "sourceless", "/lib/x/"), (source, "pycache", "/lib/x/")]
    sourceless, pycache = offline.compiled(jobs)
    monkeypatch.setattr(offline, "PYC_CACHE", tmp_path / "b")  # a node run now, nothing cached
    assert offline.compiled(jobs) == [sourceless, pycache]
    assert len(list((tmp_path / "b").glob("*.zip"))) == 2  # both compiled by that run
    with zipfile.ZipFile(io.BytesIO(sourceless)) as z:
        assert z.namelist() == ["pkg/__init__.pyc", "pkg/mod.pyc", "pkg/broken.py", "pkg/data.txt"]
        mod = z.read("pkg/mod.pyc")
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
        header = z.read("pkg/mod.pyc")[:16]
        assert int.from_bytes(header[4:8], "little") == 0b01  # hash-based, not checked against a source
        assert z.read("pkg/data.txt") == b"not Python" and z.read("pkg/broken.py") == b"def (:\n"
    with zipfile.ZipFile(io.BytesIO(pycache)) as z:
        assert {"pkg/mod.py", "pkg/__pycache__/mod.cpython-312.pyc", "pkg/__init__.py"} <= set(z.namelist())
        assert z.read("pkg/__pycache__/mod.cpython-312.pyc") == mod and z.read("pkg/mod.py") == b"VALUE = {'a', 'b'}\n" * 20


def test_the_standard_library_and_numpy_are_vendored_compiled_and_the_lock_follows(tmp_path):
    build.copy_pyodide(tmp_path / "pyodide")
    upstream = json.loads((build.NODE_MODULES / "pyodide" / "pyodide-lock.json").read_text())
    vendored = json.loads((tmp_path / "pyodide" / "pyodide-lock.json").read_text())
    for package in build.PYODIDE_PACKAGES:
        entry = vendored["packages"][package]
        data = (tmp_path / "pyodide" / entry["file_name"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]  # what Pyodide checks when it loads it
        if package not in offline.COMPILED_WHEELS:
            assert entry == upstream["packages"][package]
    for package in offline.COMPILED_WHEELS:
        del vendored["packages"][package]["sha256"], upstream["packages"][package]["sha256"]
    assert vendored == upstream  # nothing else changed
    entry = upstream["packages"]["numpy"]
    with zipfile.ZipFile(build.PYODIDE_ASSETS) as bundle:
        numpy = bundle.read(build.PYODIDE_ASSETS_DIR + entry["file_name"])
    pairs = [(zipfile.ZipFile(io.BytesIO(numpy)), zipfile.ZipFile(tmp_path / "pyodide" / entry["file_name"])),
             (zipfile.ZipFile(build.NODE_MODULES / "pyodide" / "python_stdlib.zip"),
              zipfile.ZipFile(tmp_path / "pyodide" / "python_stdlib.zip"))]
    for (original, done), unused in zip(pairs, [offline.NUMPY_UNUSED, None]):
        names = set(done.namelist())
        kept = [n for n in original.namelist() if not (unused and unused.search(n))]
        if unused:  # NumPy without what the page cannot use: f2py, headers, stubs, test-only modules
            assert all(unused.search(n) for n in set(original.namelist()) - set(kept))
            assert not any(unused.search(n) for n in names)
            assert not any(n.startswith("numpy/f2py/") for n in names) and len(kept) < 0.6 * len(original.namelist())
            assert "numpy/_core/_multiarray_tests.cpython-312-wasm32-emscripten.so" in names  # import numpy needs it
        for name in kept:  # every module is there, compiled; everything else as it was
            if name.endswith(".py") and name + "c" in names:
                assert name not in names
            elif name.endswith(".dist-info/RECORD") and unused:
                assert done.read(name).splitlines() == [line for line in original.read(name).splitlines()
                                                        if not unused.search(line.split(b",")[0].decode())]
            else:
                assert done.read(name) == original.read(name), name
        assert sum(n.endswith(".pyc") for n in names) > 0.95 * sum(n.endswith(".py") for n in kept)
        # Members stored, not deflated: the page's worker writes them out itself (worker.js unpackStored).
        assert all(i.compress_type == zipfile.ZIP_STORED for i in done.infolist())


def _chapter_with(tmp_path, body, values):
    page = tmp_path / "09-fam.md"
    page.write_text("# Fam\n\n" + body)
    return build.render_chapter(build.make_env(), build.Chapter(9, "09-fam", "Fam", page), {"values": values})


def _family_values():
    """One arm t = 5.06 higher on df = 2 (p ~ 0.037) and five flat ones: chapter 9's recipes, in small."""
    sd = 0.05 * math.sqrt(3) / 5.06
    values = {"ch9.base.per_seed": {"0": 0.0, "1": 0.0, "2": 0.0},
              "ch9.fp16.per_seed": {"0": 0.05 - sd, "1": 0.05, "2": 0.05 + sd}}
    for i in range(5):
        values[f"ch9.flat{i}.per_seed"] = {"0": 0.1, "1": -0.2, "2": 0.15}
    return values


def test_a_direction_that_does_not_survive_its_family_fails_the_build_until_called_nominal(tmp_path):
    flat = "".join(f'{{{{ compare("ch9.flat{i}", "ch9.base", expect="unresolved", family="recipes") }}}} '
                   for i in range(5))
    values = _family_values()
    with pytest.raises(build.BuildError, match="over the 6 comparisons of 'recipes' it is 'unresolved'"):
        _chapter_with(tmp_path, flat + '{{ compare("ch9.fp16", "ch9.base", expect="higher", family="recipes") }}',
                      values)
    html = _chapter_with(tmp_path, flat + '{{ compare("ch9.fp16", "ch9.base", expect="higher", family="recipes", '
                                         'adjusted="unresolved") }}', values)
    assert "higher nominally, one of 6 comparisons in recipes; unresolved after Holm" in html
    # alone in its family (the chapter's default family holds only it), the same seeds keep the direction
    html = _chapter_with(tmp_path, flat + '{{ compare("ch9.fp16", "ch9.base", expect="higher") }}', values)
    assert "higher, and still after Holm" not in html and "seeds: higher" in html


def test_a_verdict_that_survives_says_so_and_a_wrong_adjusted_claim_fails(tmp_path):
    values = {"ch9.base.per_seed": {"0": 0.0, "1": 0.0, "2": 0.0},
              "ch9.big.per_seed": {"0": 1.0, "1": 1.1, "2": 0.9},
              "ch9.flat.per_seed": {"0": 0.1, "1": -0.2, "2": 0.15}}
    body = ('{{ compare("ch9.big", "ch9.base", expect="higher") }} '
            '{{ compare("ch9.flat", "ch9.base", expect="unresolved") }}')
    assert "higher, and still after Holm's correction over the 2 comparisons of chapter 9" in _chapter_with(
        tmp_path, body, values)
    with pytest.raises(build.BuildError, match="pass adjusted='higher'"):
        _chapter_with(tmp_path, body.replace('expect="higher"', 'expect="higher", adjusted="unresolved"'), values)
    with pytest.raises(build.BuildError, match="expect one of"):
        _chapter_with(tmp_path, body.replace('expect="higher"', 'expect="higher", adjusted="maybe"'), values)


def test_a_table_column_of_one_kind_gets_one_mark_in_its_header_and_quiet_cells():
    """build.mark_figure_columns: a column whose every body cell holds figures of one kind is marked
    once, in its header; a column with a plain cell, or with two kinds, keeps each figure's own mark."""
    m, d = (str(build.figure(k, "1", f"{k}: x")) for k in ("measured", "derived"))
    html = build.markdown_to_html(
        "| a | b | c | d |\n| --- | --- | ---: | --- |\n"
        f"| {m} | {m} | {d} | {m} |\n"
        f"| {m} | plain | {d} | {d} |\n")
    out = build.mark_figure_columns(html)
    heads = re.findall(r"<th[^>]*>(.*?)</th>", out)
    assert heads == ['a <span class="fig-col measured">measured</span>', "b",
                     'c <span class="fig-col derived">derived</span>', "d"]
    rows = re.findall(r"<tr>(.*?)</tr>", out, re.S)[1:]
    classes = [re.findall(r"<td([^>]*)>", r) for r in rows]
    assert classes == [[' class="fig-quiet"', "", ' class="fig-quiet" style="text-align:right"', ""]] * 2
    assert build.mark_figure_columns("<table><thead><tr><th>x</th></tr></thead><tbody></tbody></table>") == \
        "<table><thead><tr><th>x</th></tr></thead><tbody></tbody></table>"


def test_every_chapter_explains_the_marks_once_and_draws_no_badge():
    pages = sorted((build.OUT / "chapters").glob("*.html"))
    assert len(pages) == 16, "run the README's setup command to build _site/"
    for page in pages:
        html = page.read_text()
        assert html.count('class="fig-legend"') == 1, page.name
        assert "title=\"measured:" not in html and "title=\"derived" not in html, page.name
