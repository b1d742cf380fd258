"""Finding one's way, at build time: a page's sections (builder/navigation.py), the "#" link beside
each heading, the search index (builder/search_index.py), the results page's anchors
(builder/results_page.py) and the links from measured figures to them (build.py's figure())."""

import json
import re

import pytest

import build
from builder import navigation, results_page, search_index

PAGE = """<html><body><nav class="toc"><a href="#a">Contents: skip me</a></nav>
<article class="chapter"><h1>Chapter 9 The title</h1>
<p>Intro words, with <code>code</code> and a <span class="fig measured" data-source="t">2.52<sup class="fig-tag">measured</sup></span> figure.</p>
<h2 id="first-section">First section <a class="heading-anchor" href="#first-section" aria-label="Link">#</a></h2>
<p>Alpha <em>beta</em></p><p>gamma.</p>
<figure class="code"><figcaption>pylib.optim.adamw_step (pylib/optim.py)</figcaption><pre>def secret_code(): pass</pre></figure>
<section class="widget" id="w1-x"><h3 class="widget-title" id="w1-x-title">A widget's title</h3>
<form><label>Learning rate <input name="lr"></label><button>Start</button></form>
<script type="application/json">{"hidden": "config"}</script><p>Widget prose.</p></section>
<h3 id="sub">Sub <span class="katex"><span class="katex-mathml"><math><mi>p</mi><annotation>p - y</annotation></math></span><span class="katex-html" aria-hidden="true">p−y</span></span></h3>
<p>Delta.</p>
</article><footer>Footer text</footer></body></html>"""


# ---------------------------------------------------------------------------
# Sections and contents


def test_sections_split_a_page_at_its_own_headings_and_keep_only_its_words():
    sections = navigation.sections(PAGE)
    assert [(s.level, s.id, s.title) for s in sections] == [
        (1, "", ""), (2, "first-section", "First section"), (3, "sub", "Sub p")]
    intro, first, sub = (s.text for s in sections)
    assert intro == "Intro words, with code and a 2.52 figure."  # no title, no provenance tag, no contents
    assert "Alpha beta gamma." in first and "pylib.optim.adamw_step" in first
    assert "A widget's title" in first and "Widget prose." in first  # a widget's heading stays in its section
    for hidden in ("secret_code", "config", "Learning rate", "Start", "#", "p−y", "p - y"):
        assert hidden not in first + sub, hidden
    assert sub == "Delta." and "Footer" not in sub


def test_contents_nest_each_h3_under_its_h2():
    html = '<h3 id="a">A</h3><h2 id="b">B</h2><h3 id="c">C</h3><h3 id="d">D</h3><h2 id="e">E</h2>'
    assert navigation.contents(html) == [
        {"id": "a", "title": "A", "children": []},
        {"id": "b", "title": "B", "children": [{"id": "c", "title": "C"}, {"id": "d", "title": "D"}]},
        {"id": "e", "title": "E", "children": []}]


def test_section_of_names_the_section_holding_an_element():
    assert navigation.section_of(PAGE, "w1-x") == "first-section"
    assert navigation.section_of(PAGE, "nowhere") == ""


def test_each_heading_gets_a_named_link_to_itself_only_when_asked():
    html = build.markdown_to_html("## A `code` title\n\n### Sub\n\nText.\n", heading_links=True)
    assert ('<h2 id="a-code-title">A <code>code</code> title <a class="heading-anchor" href="#a-code-title" '
            'aria-label="Link to this section: A code title">#</a></h2>') in html
    assert '<a class="heading-anchor" href="#sub" aria-label="Link to this section: Sub">#</a></h3>' in html
    assert "heading-anchor" not in build.markdown_to_html("## A title\n")  # the glossary's pages keep plain headings
    assert [s.title for s in navigation.sections(html)[1:]] == ["A code title", "Sub"]  # the "#" is not in the title


def test_a_real_chapter_has_a_section_for_every_heading_in_its_source(tmp_path):
    chapter = next(c for c in build.find_chapters() if c.number == 3)
    body = build.render_chapter(build.make_env(), chapter, build.load_results())
    source = chapter.path.read_text(encoding="utf-8")
    # each exercise() call renders its own ### heading ("Exercise 3.1: …")
    levels = [len(m[1]) if m[1] else 3 for m in re.finditer(r"^(?:(##|###) .+|\{\{ exercise\(.+)$", source, re.M)]
    sections = navigation.sections(body)[1:]
    assert levels == [s.level for s in sections]
    assert all(s.id and s.text for s in sections)
    assert all(f'<a class="heading-anchor" href="#{s.id}"' in body for s in sections)


# ---------------------------------------------------------------------------
# The search index


CHAPTER = {"number": 9, "title": "The title", "url": "chapters/09-the-title.html"}
GLOSSARY = [{"term": "Beta", "anchor": "term-beta", "text": "A <b>second</b> letter.", "chapter": {"number": 9},
             "section": "First section"}]


def test_the_index_links_each_section_and_glossary_term_to_its_anchor():
    index = search_index.build_index([(CHAPTER, PAGE)], GLOSSARY)
    docs = index["documents"]
    assert [d["url"] for d in docs] == ["chapters/09-the-title.html", "chapters/09-the-title.html#first-section",
                                        "chapters/09-the-title.html#sub", "glossary.html#term-beta"]
    assert [d["id"] for d in docs] == [0, 1, 2, 3]
    assert docs[0]["heading"] == "The title" and docs[1]["chapter"] == "Chapter 9: The title"
    assert docs[3]["kind"] == "glossary" and docs[3]["text"] == "A <b>second</b> letter. Explained in chapter 9, First section."
    assert set(index["fields"]) <= set(docs[0]) and set(index["storeFields"]) <= set(docs[0])
    assert index["version"] == search_index.VERSION


def test_the_index_is_the_same_bytes_for_the_same_build(tmp_path):
    path = tmp_path / "search-index.json"
    assert search_index.write_index(path, [(CHAPTER, PAGE)], GLOSSARY) == 4
    first = path.read_bytes()
    again = search_index.to_bytes(search_index.build_index([(dict(reversed(CHAPTER.items())), PAGE)], GLOSSARY))
    assert again == first  # key order of the inputs does not matter
    assert json.loads(first.decode("utf-8"))["documents"][1]["text"].startswith("Alpha beta gamma.")
    assert search_index.to_bytes(search_index.build_index([(CHAPTER, PAGE.replace("Delta", "Epsilon"))], GLOSSARY)) != first


# ---------------------------------------------------------------------------
# The results page and the figures' links


RESULTS = {"values": {"ch1.arm.mean": 2.5213, "ch1.arm.sd": 0.0269, "ch1.arm.n": 3,
                      "ch1.arm.per_seed": {"0": 2.5, "1": 2.53, "10": 2.6, "2": 2.54},
                      "ch1.other.per_seed": {"0": 2.6, "1": 2.64, "10": 2.69, "2": 2.65},
                      "ch1.steps": 400, "ch1.name": "<b>bold</b>", "ch10.peak": 1.5e9, "ch2.flag": True,
                      "ch2.nothing": None},
           "timings": {"ch1.seconds": 2.45, "bench": {"rows": []}}}
SUMMARY = """# Results

## Chapter 1

| quantity | value | key |
| --- | --- | --- |
| the arm | 2.5213 ± 0.0269 | `ch1.arm` |
| again | 2.5213 | `ch1.arm` |

- `ch1.seconds`: 2.450
- `not.a.key`: 1
"""


def test_an_arms_parts_share_the_row_of_its_base_key():
    values = RESULTS["values"]
    for key in ("ch1.arm.mean", "ch1.arm.sd", "ch1.arm.n", "ch1.arm.per_seed"):
        assert results_page.anchor(key, values) == "key-ch1.arm"
    assert results_page.anchor("ch1.steps", values) == "key-ch1.steps"
    assert results_page.row_keys(RESULTS) == ["ch1.arm", "ch1.other", "ch1.steps", "ch1.name", "ch10.peak", "ch2.flag",
                                              "ch2.nothing", "ch1.seconds"]


def test_the_results_page_gives_every_key_one_anchor_the_summary_first():
    page = results_page.page(RESULTS, SUMMARY)
    summary = page["summary"]
    assert summary.count('id="key-ch1.arm"') == 1 and '<tr id="key-ch1.arm">' in summary  # the first row naming it
    assert '<li id="key-ch1.seconds">' in summary and "key-not.a.key" not in summary
    assert '<a class="heading-anchor" href="#chapter-1"' in summary
    rows = {r["key"]: r for g in page["groups"] for r in g["rows"]}
    assert [g["title"] for g in page["groups"]] == ["Chapter 1", "Chapter 2", "Chapter 10"]
    assert rows["ch1.arm"]["id"] is None and rows["ch1.arm"]["summary_id"] == "key-ch1.arm"
    assert rows["ch1.steps"]["id"] == "key-ch1.steps"
    assert rows["ch1.arm"]["value"] == "2.5213 ± 0.0269 (3 seeds)"
    assert rows["ch1.arm"]["seeds"] == "seed 0: 2.5, seed 1: 2.53, seed 2: 2.54, seed 10: 2.6"
    assert rows["ch10.peak"]["value"] == "1.5e+09" and rows["ch2.flag"]["value"] == "true"
    assert rows["ch2.nothing"]["value"] == "null" and rows["ch1.seconds"]["timing"]
    ids = [r["id"] or r["summary_id"] for r in rows.values()]
    assert len(ids) == len(set(ids)) == len(results_page.row_keys(RESULTS))


def test_the_results_template_escapes_values_and_holds_every_anchor():
    html = results_page.render(build.make_env(), RESULTS, SUMMARY, site={"title": "T", "root": "", "wheel": "w.whl", "numpy": "n.whl"},
                               chapters=[])
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold</b>" not in html
    for key in results_page.row_keys(RESULTS):
        assert html.count(f'id="key-{key}"') == 1, key
    assert '<a class="results-in-summary" href="#key-ch1.arm">' in html


@pytest.fixture
def ctx():
    return build.ChapterContext(build.make_env(), RESULTS, "chapters/test.md")


@pytest.mark.parametrize("call, href", [
    (lambda c: c.measured("ch1.steps"), "../results.html#key-ch1.steps"),
    (lambda c: c.measured("ch1.arm.mean", ".3f"), "../results.html#key-ch1.arm"),
    (lambda c: c.measured("ch1.seconds", ".1f"), "../results.html#key-ch1.seconds"),
    (lambda c: c.measured_pm("ch1.arm"), "../results.html#key-ch1.arm"),
    (lambda c: c.measured_seeds("ch1.arm"), "../results.html#key-ch1.arm"),
    (lambda c: c.compare("ch1.arm", "ch1.other", expect="lower"), "../results.html#key-ch1.arm"),
])
def test_a_measured_figure_links_to_its_row_and_keeps_its_label(ctx, call, href):
    html = str(call(ctx))
    assert re.fullmatch(r'<span class="fig measured" data-source="[^"]+"><a class="fig-link" href="([^"]+)">[^<]+</a>'
                        r'<sup class="fig-tag">measured</sup></span>', html)
    assert f'href="{href}"' in html


def test_a_widget_quotes_a_key_with_the_chapters_helpers():
    """Chapter 2's mixture table: each mean ± sd is the chapter's own measured_pm, linked to its row; a
    build without results leaves the table out, and a missing key fails the build."""
    arms = [f"ch2.mix.w{w}.{source}" for w in (0, 25, 50, 75, 100) for source in ("comedies", "tragedies")]
    values = {f"{arm}.{part}": v for i, arm in enumerate(arms) for part, v in (("mean", 2.5 + i / 100), ("sd", 0.01))}

    def mixture(values):
        ctx = build.ChapterContext(build.make_env(), {"values": values}, "chapters/test.md")
        return ctx, ctx.fill_blocks(str(ctx.widget("mixture")))

    ctx, html = mixture(values)
    figures = re.findall(r'<span class="fig measured".*?</span>', html)
    assert figures == [str(ctx.measured_pm(arm)) for arm in arms]
    assert 'href="../results.html#key-ch2.mix.w75.tragedies"' in figures[7] and "2.570 ± 0.010" in figures[7]
    assert "fig measured" not in mixture({})[1]
    with pytest.raises(build.BuildError, match="ch2.mix.w100.tragedies.sd"):
        mixture({k: v for k, v in values.items() if k != "ch2.mix.w100.tragedies.sd"})


def test_figures_on_the_glossary_page_link_from_the_sites_root(ctx):
    ctx.results_href = "results.html"
    assert 'href="results.html#key-ch1.steps"' in str(ctx.measured("ch1.steps"))
    assert "href" not in str(ctx.derived("vocab_size")) and "href" not in str(ctx.cited("1", "a paper"))
