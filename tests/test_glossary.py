"""The glossary: its entries, the first-use links in the chapters, and the build's check of targets."""

import re

import pytest

import build
from builder import glossary


def page_terms(*entries):
    definitions = {e.anchor: f"definition of {e.term}" for e in entries}
    return glossary.terms_for_page(list(entries), definitions, "../glossary.html")


def entry(term, match, chapter=1, section="Seeds and spread", widget="train"):
    return glossary.Entry(term=term, sentence="One sentence.", deck="deck 01", chapter=chapter,
                          section=section, widgets=(widget,) if isinstance(widget, str) else tuple(widget),
                          match=tuple(match))


def test_first_use_links_once_and_skips_headings_code_links_and_labels():
    seeds = entry("Seeds and spread", ["seed"])
    sgd = entry("SGD", ["SGD"])
    source = ("## Seeds everywhere\n\n"
              "A `seed` in code, [a seed](x.html) in a link, "
              '<span class="fig measured" data-source="t">seed 0</span> in a label.\n\n'
              "Then the seeds, once; a second seed stays plain. sgd in lower case is not SGD's name.\n")
    html = build.markdown_to_html(source, terms=page_terms(seeds, sgd))
    links = re.findall(r'<a class="gloss-term" href="([^"]+)"[^>]*>([^<]+)</a>', html)
    assert links == [("../glossary.html#term-seeds-and-spread", "seeds"), ("../glossary.html#term-sgd", "SGD")]
    assert '<h2 id="seeds-everywhere">Seeds everywhere</h2>' in html
    assert "<code>seed</code>" in html and '<a href="x.html">a seed</a>' in html
    assert 'data-definition="definition of Seeds and spread"' in html


def test_longest_match_wins_and_words_are_whole():
    adam = entry("Adam", ["Adam"])
    adamw = entry("AdamW", ["AdamW"])
    clipping = entry("Gradient clipping", ["gradient clipping"])
    gradient = entry("Gradient", ["gradient"])
    html = build.markdown_to_html("AdamW is not Adam. Gradient clipping, then a gradient.\n",
                                  terms=page_terms(adam, adamw, clipping, gradient))
    assert re.findall(r'#term-([\w-]+)"[^>]*>([^<]+)</a>', html) == [
        ("adamw", "AdamW"), ("adam", "Adam"), ("gradient-clipping", "Gradient clipping"), ("gradient", "gradient")]


def test_definition_is_plain_text_and_cannot_inject_markup():
    e = entry("Perplexity", ["perplexity"])
    text = glossary.plain_text('$e^L$ tokens, <span class="fig derived" data-source="x">5,376<sup class="fig-tag">derived</sup></span> "<b>')
    assert text == 'e^L tokens, 5,376 "'
    html = build.markdown_to_html("perplexity\n", terms=glossary.terms_for_page(
        [e], {e.anchor: '"><script>alert(1)</script>'}, "../glossary.html"))
    assert "<script>" not in html and "&quot;&gt;&lt;script&gt;" in html


def test_missing_targets_fail_with_every_problem_named():
    page = '<h2 id="seeds-and-spread">Seeds and spread</h2><section class="widget" id="w1-train">'
    ok = entry("Seeds and spread", ["seed"])
    assert glossary.check_targets([ok], {1: page}) == {ok.anchor: ("seeds-and-spread", [("w1-train", "")])}
    two = entry("Seeds and spread", ["seed"], widget=["train", "bpe"])
    with pytest.raises(glossary.GlossaryError, match="no widget 'bpe'"):
        glossary.check_targets([two], {1: page})
    bad = [entry("A", ["a"], section="No such section"), entry("B", ["b"], widget="nope"), entry("C", ["c"], chapter=99)]
    with pytest.raises(glossary.GlossaryError) as e:
        glossary.check_targets(bad, {1: page})
    message = str(e.value)
    assert "no section headed 'No such section'" in message and "no widget 'nope'" in message
    assert "chapter 99 does not exist" in message


def test_section_ids_follow_the_headings_maths_left_out():
    assert entry("x", ["x"], section="The gradient at the logits is $p - y$").section_id == "the-gradient-at-the-logits-is-"
    html = build.markdown_to_html("## The gradient at the logits is $p - y$\n")
    assert 'id="the-gradient-at-the-logits-is-"' in html


def test_glossary_file_loads_and_a_broken_entry_is_refused(tmp_path):
    entries = glossary.load(build.GLOSSARY)
    assert len({e.anchor for e in entries}) == len(entries)
    assert all(e.chapter in {c.number for c in build.find_chapters()} for e in entries)
    broken = tmp_path / "glossary.yaml"
    broken.write_text("- term: X\n  sentence: S\n  deck: d\n  chapter: 1\n  section: s\n  match: [x]\n")
    with pytest.raises(glossary.GlossaryError, match="lacks widget"):
        glossary.load(broken)


def test_built_glossary_links_to_sections_and_widgets_that_exist():
    out = build.OUT
    page = (out / "glossary.html").read_text()
    entries = glossary.load(build.GLOSSARY)
    for e in entries:
        assert f'id="{e.anchor}"' in page
    for href in set(re.findall(r'href="(chapters/[^"#]+)#([^"]+)"', page)):
        chapter_html = (out / href[0]).read_text()
        assert f'id="{href[1]}"' in chapter_html, href


def test_glossary_has_the_seeds_51_terms_in_deck_order_each_animated_by_a_widget():
    entries = glossary.load(build.GLOSSARY)
    seed = [e for e in entries if e.deck]
    assert len(seed) == 51
    decks = [int(e.deck.split()[-1]) for e in seed]
    assert decks == sorted(decks)
    assert all(e.widgets for e in seed)
    assert {e.chapter for e in seed} == set(range(1, 17))  # every chapter animates a term


def test_terms_added_since_the_seed_are_there_each_with_its_section():
    # Issue 22's list: the terms the course teaches that the seed glossary lacked.
    terms = {e.term for e in glossary.load(build.GLOSSARY) if not e.deck}
    assert terms == {
        "Loss scaling", "Gradient accumulation", "Loss mask", "Response-only loss", "Multi-token prediction (MTP)",
        "Muon", "RMSNorm", "Linear scaling rule", "Coordinate check", "FP8", "α–β model", "HFU",
        "Sequence and context parallelism", "Expert parallelism", "Interleaved schedule", "C ≈ 6ND",
        "Compute-optimal (Chinchilla)", "Overtraining", "Loss spike", "Outlier skipping", "Determinism",
        "MTBF (mean time between failures)", "Daly's interval", "Reward model", "Bradley–Terry model",
        "KL penalty", "Reference model"}


def test_widget_none_says_no_widget_animates_the_term_and_cannot_be_mixed(tmp_path):
    path = tmp_path / "glossary.yaml"
    path.write_text("- term: X\n  sentence: S\n  chapter: 1\n  section: s\n  widget: none\n  match: [x]\n")
    (e,) = glossary.load(path)
    assert e.widgets == () and e.deck == ""
    assert glossary.check_targets([e], {1: '<h2 id="s">s</h2>'})[e.anchor] == ("s", [])
    path.write_text("- term: X\n  sentence: S\n  chapter: 1\n  section: s\n  widget: [train, none]\n  match: [x]\n")
    with pytest.raises(glossary.GlossaryError, match="names widgets and 'none'"):
        glossary.load(path)


def test_built_glossary_renders_maths_in_section_titles_and_says_when_no_widget_animates():
    page = (build.OUT / "glossary.html").read_text()
    where = re.search(r'id="term-cross-entropy-loss".*?class="glossary-where">(.*?)</p>', page, re.S).group(1)
    assert "$p - y$" not in where and 'class="katex"' in where
    rms = re.search(r'id="term-rmsnorm".*?class="glossary-where">(.*?)</p>', page, re.S).group(1)
    assert "no widget animates it" in rms
    text = re.sub(r"<[^>]+>", " ", page)
    assert "Slides" not in text and not re.search(r"\bdecks?\b", text)  # the course has no slides to point to


def test_a_term_is_not_linked_in_the_chapters_it_skips():
    e = glossary.Entry(term="Checkpoint", sentence="s", deck="deck 13", chapter=15, section="Checkpoints",
                       widgets=("checkpoint",), match=("checkpoint",), skip=(10,))
    definitions = {e.anchor: "d"}
    assert glossary.terms_for_page([e], definitions, "g.html", 10) == []
    assert len(glossary.terms_for_page([e], definitions, "g.html", 8)) == 1
