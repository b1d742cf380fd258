"""build.py as a program: unknown references fail the build, outputs are reproducible."""

import hashlib
import json
import zipfile

import pytest

import build


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
    lock = json.loads((out / "pyodide" / "pyodide-lock.json").read_text())
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
