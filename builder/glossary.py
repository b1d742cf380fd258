"""The glossary: chapters/glossary.yaml rendered into glossary.html, and each term's first use on a
chapter page linked to its entry, with its one-sentence definition shown on hover or focus.

Three pieces, each called by build.py:

- `load(path)` reads and checks the entries (every field present, no duplicate term);
- `link_terms(state, terms)` is a markdown-it core rule: on a chapter page, the first use of each
  term's phrases in running text (not in headings, links, code or inline HTML such as a number's
  label) becomes a link to its entry;
- `check_targets(entries, pages)` fails the build when a term's chapter, section heading or widget
  is missing from the rendered chapter.

Headings get GitHub-style ids (build.py's anchors plugin), so a section is found by its heading
text; a widget by its root element's id, `w<k>-<name>`, which build.py gives every widget.
"""

import dataclasses
import html
import re

import yaml
from mdit_py_plugins.anchors.index import slugify

from builder import navigation

FIELDS = ("term", "sentence", "chapter", "section", "widget", "match")
# skip: chapters where the term's phrases mean something else, so they are not linked; deck: the seed's
# deck that lists the term (the seed's 51 terms have one; terms added since do not): where it came from,
# kept for the seed-order test, never shown (the course has no slides)
OPTIONAL = ("skip", "deck")
NO_WIDGET = "none"  # widget: none says, explicitly, that no widget of the chapter animates the term


class GlossaryError(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Entry:
    term: str
    sentence: str  # Markdown with Jinja calls, as written in the YAML
    chapter: int
    section: str
    widgets: tuple  # the names of the widgets that animate it (the YAML's widget: one name, a list, or none)
    match: tuple
    skip: tuple = ()
    deck: str = ""

    @property
    def anchor(self):
        return "term-" + slugify(self.term.replace("µ", "mu"))

    @property
    def section_id(self):
        """The heading's id as the anchors plugin makes it (from the heading's text and code, maths left out)."""
        return slugify(re.sub(r"\$[^$]*\$", "", self.section).replace("`", ""))


def load(path):
    """The entries of glossary.yaml, in order; GlossaryError on a missing field or a duplicate."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, list) or not raw:
        raise GlossaryError(f"{path.name}: expected a list of entries")
    entries, seen = [], set()
    for i, item in enumerate(raw):
        missing = [f for f in FIELDS if not isinstance(item, dict) or item.get(f) in (None, "", [])]
        if missing:
            raise GlossaryError(f"{path.name}: entry {i + 1} ({item.get('term', '?') if isinstance(item, dict) else item!r}) "
                                f"lacks {', '.join(missing)}")
        extra = set(item) - set(FIELDS) - set(OPTIONAL)
        if extra:
            raise GlossaryError(f"{path.name}: entry {item['term']!r} has unknown fields {sorted(extra)}")
        fields = {k: v for k, v in item.items() if k != "widget"}
        widgets = item["widget"] if isinstance(item["widget"], list) else [item["widget"]]
        if NO_WIDGET in widgets and len(widgets) > 1:
            raise GlossaryError(f"{path.name}: entry {item['term']!r} names widgets and {NO_WIDGET!r}")
        widgets = [w for w in widgets if w != NO_WIDGET]
        entry = Entry(**dict(fields, chapter=int(item["chapter"]), match=tuple(str(m) for m in item["match"]),
                             widgets=tuple(str(w) for w in widgets), skip=tuple(int(c) for c in item.get("skip", ())),
                             deck=str(item.get("deck") or "")))
        if entry.anchor in seen:
            raise GlossaryError(f"{path.name}: {entry.term!r} appears twice")
        seen.add(entry.anchor)
        entries.append(entry)
    return entries


# ---------------------------------------------------------------------------
# First use on a chapter page -> a link to the entry, with the definition on hover or focus


def plain_text(sentence):
    """A sentence (Markdown after its Jinja calls ran) as plain text for the hover definition: number
    labels and tags dropped, $maths$ kept as its TeX source."""
    text = re.sub(r'<sup class="fig-tag">.*?</sup>', "", sentence)
    text = re.sub(r"\$\$?([^$]*)\$\$?", r"\1", text)
    text = html.unescape(re.sub(r"<[^>]+>", "", text)).replace("**", "").replace("`", "")
    return re.sub(r"\s+", " ", text).strip()


def phrase_pattern(phrase):
    """A phrase as a regex: whole words, an optional plural; case-insensitive unless it has capitals."""
    flags = 0 if any(c.isupper() for c in phrase) else re.I
    return re.compile(rf"(?<![\w-]){re.escape(phrase)}(?:e?s)?(?![\w-])", flags)


@dataclasses.dataclass
class Term:
    """What link_terms needs for one entry: its patterns, its href and its plain definition."""
    anchor: str
    href: str
    definition: str
    patterns: list


def terms_for_page(entries, definitions, glossary_href, chapter=None):
    """[Term] for a chapter page (its number: terms that skip it are left out); definitions: {anchor:
    plain-text sentence}."""
    return [Term(e.anchor, f"{glossary_href}#{e.anchor}", definitions[e.anchor], [phrase_pattern(m) for m in e.match])
            for e in entries if chapter not in e.skip]


def _first_match(text, terms, linked):
    """(start, end, term) of the earliest, then longest, match in text of a term not linked yet."""
    best = None
    for term in terms:
        if term.anchor in linked:
            continue
        for pattern in term.patterns:
            m = pattern.search(text)
            if m and (best is None or (m.start(), -(m.end() - m.start())) < (best[0], -(best[1] - best[0]))):
                best = (m.start(), m.end(), term)
    return best


def link_terms(state, terms):
    """markdown-it core rule: the first use of each term on the page links to its glossary entry."""
    linked = set()

    def find(text):
        found = _first_match(text, terms, linked)
        if not found:
            return None
        start, end, term = found
        linked.add(term.anchor)
        return start, end, (f'<a class="gloss-term" href="{html.escape(term.href)}" '
                            f'data-definition="{html.escape(term.definition)}" '
                            f'aria-description="{html.escape(term.definition)}">')

    navigation.link_first_uses(state, find)


# ---------------------------------------------------------------------------
# Targets


def widget_ids(page_html, name):
    return re.findall(rf'<section[^>]*\bid="(w\d+-{re.escape(name)})"', page_html)


def widget_title(page_html, widget_id):
    """The visible title of the widget whose root has this id ('' if it has none)."""
    m = re.search(rf'id="{re.escape(widget_id)}-title"[^>]*>(.*?)</h\d>', page_html, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip() if m else ""


def check_targets(entries, pages):
    """{anchor: (section id, [(widget id, widget title)])}; GlossaryError naming every missing target.

    pages: {chapter number: rendered chapter HTML} for every chapter that exists."""
    problems, targets = [], {}
    for e in entries:
        page = pages.get(e.chapter)
        if page is None:
            problems.append(f"{e.term!r}: chapter {e.chapter} does not exist")
            continue
        if not re.search(rf'<h[23][^>]*\bid="{re.escape(e.section_id)}"', page):
            problems.append(f"{e.term!r}: chapter {e.chapter} has no section headed {e.section!r} (id {e.section_id!r})")
        found = []
        for name in e.widgets:
            ids = widget_ids(page, name)
            if not ids:
                problems.append(f"{e.term!r}: chapter {e.chapter} has no widget {name!r}")
            else:
                found.append((ids[0], widget_title(page, ids[0])))
        targets[e.anchor] = (e.section_id, found)
    if problems:
        raise GlossaryError("glossary targets missing:\n  " + "\n  ".join(problems))
    return targets
