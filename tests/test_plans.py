"""builder/plans.py: a chapter's plan (the "What you will learn" box, key takeaways, the next
chapter's reason, references), checked on made-up plans and on the course's sixteen."""

import pathlib
import re

import pytest

import build
from builder import plans

PLAN = {
    "summary": "The loop, run and checked.",
    "learn": ["Run the loop.", "Read the curve.", "Check the gradient."],
    "assumes": [],
    "takeaways": ["One.", "Two.", "Three.", "Four."],
    "next": "Chapter 2 asks where the tokens come from.",
    "references": [{"key": "smith2020", "cite": "Smith et al.", "entry": "A. Smith (2020). *A paper*.",
                    "url": "https://arxiv.org/abs/2001.00001"}],
}


def write(tmp_path, plan, name="02.yaml"):
    import yaml
    path = tmp_path / name
    path.write_text(yaml.safe_dump(plan), encoding="utf-8")
    return path


@pytest.mark.parametrize("change, message", [
    ({"learn": ["Only one."]}, "learn has 1 items; expected 3 to 4"),
    ({"takeaways": ["a", "b", "c", "d", "e", "f", "g"]}, "takeaways has 7 items"),
    ({"assumes": [2]}, "each an earlier chapter"),
    ({"assumes": [1, 1]}, "each an earlier chapter"),
    ({"assumes": ["1"]}, "assumes is a list of chapter numbers"),
    ({"next": ""}, "next is a sentence"),
    ({"summary": "x" * 161}, "summary is one line of at most 160 characters"),
    ({"extra": 1}, "expected exactly"),
    ({"references": [{"key": "Bad Key", "entry": "x", "url": "https://arxiv.org/abs/2001.00001"}]}, "[a-z0-9-]+"),
    ({"references": [{"key": "a", "entry": "x", "url": "http://example.org"}]}, "is an https address"),
    ({"references": [{"key": "a", "entry": "x"}]}, "has key, entry, url"),
    ({"references": [{"key": "a", "entry": "x", "url": "https://a.org"}, {"key": "a", "entry": "y", "url": "https://b.org"}]},
     "unique"),
])
def test_a_wrong_plan_fails_with_the_file_and_the_field(tmp_path, change, message):
    with pytest.raises(plans.PlanError, match=re.escape(message)) as e:
        plans.load(write(tmp_path, {**PLAN, **change}), 2, {1, 2, 3})
    assert "02.yaml" in str(e.value)


def test_a_missing_plan_fails_and_names_the_format(tmp_path):
    with pytest.raises(plans.PlanError, match=r"05.yaml is missing: every chapter has a plan \(chapters/plans/README.md\)"):
        plans.load(tmp_path / "05.yaml", 5, {5})


def test_a_plan_goes_into_the_chapter_box_first_then_takeaways_before_the_exercises_then_references(tmp_path):
    plan = plans.load(write(tmp_path, {**PLAN, "assumes": [1]}), 2, {1, 2})
    source = "# T\n\nOpening.\n\n## First\n\nText by Smith et al. here.\n\n## Exercises\n\nDo it.\n"
    out = plans.add_to_source(source, plan, {1: ("The loop", "01-loop.html"), 2: ("T", "02-t.html")})
    order = [out.index(s) for s in ("Opening.", '<aside class="chapter-plan"', "## First", "## Key takeaways",
                                    "## Exercises", "## References")]
    assert order == sorted(order)
    assert '<a href="01-loop.html">1. The loop</a>' in out and "- Run the loop." in out
    assert '1. <span class="ref-anchor" id="ref-smith2020"></span>A. Smith (2020). *A paper*. ' \
           "[arXiv:2001.00001](https://arxiv.org/abs/2001.00001)" in out


def test_the_first_use_of_a_cite_in_running_text_links_to_its_entry_and_an_unused_cite_fails(tmp_path):
    plan = plans.load(write(tmp_path, PLAN), 2, {1, 2})
    linked = set()
    html = build.markdown_to_html("## Smith et al. in a heading\n\n[Smith et al.](x) in a link, `Smith et al.` in code,\n"
                                  "then Smith et al. (2020) and Smith et al. again.\n",
                                  references=plan.references, linked=linked)
    assert linked == {"smith2020"}
    assert html.count('class="ref-link"') == 1
    assert 'then <a class="ref-link" href="#ref-smith2020">Smith et al.</a> (2020) and Smith et al. again' in html
    plans.check_linked("x", plan, linked)
    with pytest.raises(plans.PlanError, match="never uses 'Smith et al.' \\(reference smith2020\\)"):
        plans.check_linked("x", plan, set())


@pytest.mark.parametrize("url, label", [
    ("https://arxiv.org/abs/1812.06162", "arXiv:1812.06162"),
    ("https://doi.org/10.1145/3458817.3476209", "doi:10.1145/3458817.3476209"),
    ("https://github.com/karpathy/nanoGPT/blob/3adf61e154c3fe3fca428ad6bc3818b27a3b8291/model.py#L142-L145",
     "karpathy/nanoGPT model.py lines 142–145 at 3adf61e"),
    ("https://github.com/openai/gpt-2/blob/9b63575ef42771a015060c964af2c3da4cf7c8ab/src/encoder.py#L53",
     "openai/gpt-2 src/encoder.py line 53 at 9b63575"),
    ("https://www.deepspeed.ai/tutorials/zero/", "deepspeed.ai/tutorials/zero"),
])
def test_a_references_address_reads_as_its_kind(url, label):
    assert plans.url_label(url) == label


def test_the_reading_time_is_counted_from_the_rendered_words(tmp_path):
    page = tmp_path / "chapters" / "02-t.md"
    page.parent.mkdir()
    page.write_text("# T\n\n" + "word " * 1000 + "\n\n## First\n\n" + "more " * 1000 + "by Smith et al.\n\n"
                    "```python\n" + "code " * 5000 + "\n```\n")
    plan = plans.load(write(tmp_path, PLAN), 2, {1, 2})
    chapters = [build.Chapter(1, "01-a", "A", tmp_path / "01-a.md"), build.Chapter(2, "02-t", "T", page)]
    body = build.render_chapter(build.make_env(), chapters[1], {"values": {}}, chapters, plan=plan)
    words = int(re.search(r"\(([\d,]+) words at 200 a minute\)", body).group(1).replace(",", ""))
    assert 2000 < words < 2100  # the prose, the box and the ending; not the code listing
    assert f"About {round(words / 200)} minutes to read" in body
    assert plans.READING_TIME not in body


# ---------------------------------------------------------------------------
# The course's own plans

CHAPTERS = build.find_chapters()
MEASUREMENT_SHAPED = re.compile(r"(?<![\w.])\d[\d,]*\.\d+|\d\s?%")  # a decimal or a percentage


def test_every_chapter_has_a_plan_that_loads():
    assert len(CHAPTERS) == 16
    for chapter in CHAPTERS:
        plan = build.load_plan(chapter, CHAPTERS)
        assert plan.number == chapter.number


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.slug)
def test_a_plan_types_in_no_measurement(chapter):
    """A plan's sentences are qualitative, or quote a figure through the chapter's helpers: outside
    {{ ... }}, maths and code, none has the shape of a measurement (a decimal or a percentage).
    Names (Llama 3, LLaMA 7B, 16 bits) and chapter numbers are words, not measurements."""
    plan = build.load_plan(chapter, CHAPTERS)
    for text in [plan.summary] + plan.learn + plan.takeaways + [plan.next]:
        plain = re.sub(r"\{\{.*?\}\}|\$[^$]*\$|`[^`]*`", "", text)
        assert not MEASUREMENT_SHAPED.search(plain), f"{chapter.slug}: a typed-in measurement in {text!r}"


def test_the_glossary_links_each_sentences_own_first_use_to_its_chapters_reference(tmp_path):
    """One pass over the glossary's sentences (plans.link_glossary_references): each paragraph links the
    first use of its own references' cite words, whatever an earlier paragraph linked; a paragraph past
    the list links nothing."""
    ref = plans.load(write(tmp_path, PLAN), 2, {1, 2}).references[0]
    linked = set()
    html = build.markdown_to_html("Smith et al. said so, as Smith et al. did.\n\nSmith et al. again.\n\nSmith et al., a third.\n",
                                  linked=linked, paragraph_references=[[(ref, "chapters/02-x.html#ref-smith2020")]] * 2)
    assert html.count('<a class="ref-link" href="chapters/02-x.html#ref-smith2020">Smith et al.</a>') == 2
    assert "as Smith et al. did" in html and "<p>Smith et al., a third.</p>" in html
    assert linked == {(0, "smith2020"), (1, "smith2020")}


def test_a_glossary_sentence_naming_authors_it_cannot_link_fails_the_build():
    from builder import glossary
    entry = glossary.Entry("Linear scaling", "Smith et al.'s rule.", 1, "Seeds and spread", ("train",), ("linear scaling",))
    plan = plans.Plan(1, "s", [], [], [], "n", [])
    links = [{"number": 1, "url": "chapters/01-x.html"}]
    with pytest.raises(build.BuildError, match="Linear scaling: the sentence names a paper's authors"):
        build.render_glossary(build.make_env(), {}, [entry], {1: plan}, links)
    plan.references.append(plans.Reference("smith2020", "A. Smith (2020).", "https://arxiv.org/abs/2001.00001", "Smith et al."))
    sentences, _, _ = build.render_glossary(build.make_env(), {}, [entry], {1: plan}, links)
    assert sentences[entry.anchor] == '<a class="ref-link" href="chapters/01-x.html#ref-smith2020">Smith et al.</a>\'s rule.'


def test_the_built_glossary_and_results_pages_link_to_the_chapters_references():
    site = build.OUT
    glossary_page = (site / "glossary.html").read_text(encoding="utf-8")
    cited = re.findall(r'<a class="ref-link" href="(chapters/[^"#]+)#(ref-[a-z0-9-]+)">([^<]+)</a>', glossary_page)
    assert {name for _, _, name in cited} >= {"McCandlish et al.", "Goyal et al.", "Xiong et al.", "Hoffmann et al."}, cited
    results_page = (site / "results.html").read_text(encoding="utf-8")
    sources = re.findall(r'<p class="results-sources">.*?href="(chapters/[^"#]+)#references"', results_page, re.S)
    assert len(sources) == 16, sources
    for page, anchor in [(p, a) for p, a, _ in cited] + [(p, "references") for p in sources]:
        assert f'id="{anchor}"' in (site / page).read_text(encoding="utf-8"), (page, anchor)
