"""builder/troubleshooting.py: the troubleshooting page's symptoms, each place checked against the
rendered chapter pages (a section heading of that chapter; a widget inside that section)."""

import re

import pytest

import build
from builder import troubleshooting

PAGE = """<article class="chapter">
<p>Intro.</p>
<h2 id="one">One <a class="heading-anchor" href="#one">#</a></h2>
<p>Text.</p>
<section class="widget" id="w1-knob" data-widget="knob"><h3 id="w1-knob-title">Turn the knob</h3></section>
<h2 id="two">Two</h2>
<p>More.</p>
</article>"""
CHAPTERS = {3: {"number": 3, "url": "chapters/03-x.html", "title": "X"}}


def symptoms(tmp_path, text):
    path = tmp_path / "troubleshooting.yaml"
    path.write_text(text, encoding="utf-8")
    return troubleshooting.load(path)


def test_a_place_links_its_section_and_its_widget_there(tmp_path):
    s = symptoms(tmp_path, "- symptom: It breaks\n  check: [Look.]\n  see:\n"
                           "    - {chapter: 3, section: One, widget: knob}\n    - {chapter: 3, section: Two}\n")
    [(symptom, links)] = troubleshooting.resolve(s, CHAPTERS, {3: PAGE})
    assert symptom.symptom == "It breaks" and symptom.check == ("Look.",)
    assert links[0]["href"] == "chapters/03-x.html#one" and links[0]["widget"] == ("w1-knob", "Turn the knob")
    assert links[1]["href"] == "chapters/03-x.html#two" and links[1]["widget"] is None


@pytest.mark.parametrize("place, message", [
    ("{chapter: 4, section: One}", "there is no chapter 4"),
    ("{chapter: 3, section: Three}", "chapter 3 has no section 'Three'"),
    ("{chapter: 3, section: Two, widget: knob}", "no widget 'knob' in chapter 3's section 'Two'"),
    ("{chapter: 3, section: One, widget: dial}", "no widget 'dial'"),
])
def test_a_place_that_is_not_there_fails_the_build(tmp_path, place, message):
    s = symptoms(tmp_path, f"- symptom: It breaks\n  check: [Look.]\n  see:\n    - {place}\n")
    with pytest.raises(troubleshooting.TroubleshootingError, match=re.escape(message)):
        troubleshooting.resolve(s, CHAPTERS, {3: PAGE})


@pytest.mark.parametrize("text, message", [
    ("- symptom: A\n  check: []\n  see: [{chapter: 3, section: One}]\n", "check is a list of lines"),
    ("- symptom: A\n  check: [x]\n  see: []\n", "see names at least one place"),
    ("- symptom: A\n  check: [x]\n  see: [{chapter: '3', section: One}]\n", "chapter (a number)"),
    ("- symptom: A\n  check: [x]\n  see: [{chapter: 3, section: One}]\n  extra: 1\n", "exactly symptom, check and see"),
])
def test_a_wrong_entry_fails_with_its_field(tmp_path, text, message):
    with pytest.raises(troubleshooting.TroubleshootingError, match=re.escape(message)):
        symptoms(tmp_path, text)


def test_the_course_page_has_every_symptom_the_issue_asks_for_and_links_what_it_names():
    page = build.OUT / "troubleshooting.html"
    assert page.is_file(), "run the README's setup command to build _site/"
    html = page.read_text()
    names = [s.symptom for s in troubleshooting.load(build.TROUBLESHOOTING)]
    for words in ("inf or NaN", "Out of memory", "number of devices", "few tokens go through", "spikes", "flat",
                  "does not reproduce", "after resuming"):
        assert any(words in n for n in names), words
    assert html.count('class="symptom"') == len(names)
    assert len(re.findall(r'href="chapters/\d\d-[a-z0-9-]+\.html#w\d+-', html)) >= 10  # the widgets that show them
