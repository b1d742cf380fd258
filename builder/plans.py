"""A chapter's plan and ending, from chapters/plans/NN.yaml (chapters/plans/README.md has the format).

What it adds to the chapter's Markdown, before the chapter's Jinja runs (so a plan's strings can call
the same helpers, measured() and the rest, and a number in them has a source like any other):

- the "What you will learn" box (what the reader will learn, the chapters it builds on, and how long it
  takes to read), before the chapter's first ## section;
- "## Key takeaways", before "## Exercises" (or at the end);
- "## References", at the end: each entry linked, with an id (ref-<key>) that the first use of its
  `cite` words in the running text links to (link_references, a markdown-it rule).

The reading time is counted, not typed: the words of the rendered page's text (navigation.sections:
no code listings, controls or maths source), at READING_WPM words a minute. The `next` sentence goes
with the link to the next chapter, at the end of the page (the chapter template); the `summary` line
and the reading time go on the index's course map.
"""

import dataclasses
import html
import re

import yaml

from builder import navigation

READING_WPM = 200  # words a minute for technical prose with formulas and tables (a round, stated rate)
READING_TIME = "READING-TIME-TO-COUNT"  # filled in once the page is rendered and its words counted (no NUL: markdown-it replaces it)
FIELDS = {"summary", "learn", "assumes", "takeaways", "next", "references"}
REFERENCE_FIELDS = {"key", "cite", "entry", "url"}
URL = re.compile(r"https://\S+$")  # an https address; url_label names arXiv, DOI and GitHub ones


class PlanError(Exception):
    pass


@dataclasses.dataclass
class Reference:
    key: str
    entry: str
    url: str
    cite: str | None = None


@dataclasses.dataclass
class Plan:
    number: int
    summary: str
    learn: list
    assumes: list
    takeaways: list
    next: str
    references: list


def load(path, number, chapter_numbers):
    """The plan of chapter `number` (PlanError, naming the file and the field, when it is wrong)."""
    where = f"{path.parent.parent.name}/{path.parent.name}/{path.name}"
    if not path.is_file():
        raise PlanError(f"{where} is missing: every chapter has a plan (chapters/plans/README.md)")
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise PlanError(f"{where}: expected a mapping with {sorted(FIELDS)}")
    if set(raw) != FIELDS:
        raise PlanError(f"{where}: fields {sorted(raw)}; expected exactly {sorted(FIELDS)}")

    def strings(name, low, high):
        items = raw[name]
        if not isinstance(items, list) or not all(isinstance(s, str) and s.strip() for s in items):
            raise PlanError(f"{where}: {name} is a list of sentences")
        if not low <= len(items) <= high:
            raise PlanError(f"{where}: {name} has {len(items)} items; expected {low} to {high}")
        return [" ".join(s.split()) for s in items]

    learn, takeaways = strings("learn", 3, 4), strings("takeaways", 4, 6)
    summary = raw["summary"]
    if not isinstance(summary, str) or not summary.strip() or len(summary) > 160 or "\n" in summary.strip():
        raise PlanError(f"{where}: summary is one line of at most 160 characters (the index's course map)")
    assumes = raw["assumes"]
    if not isinstance(assumes, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in assumes):
        raise PlanError(f"{where}: assumes is a list of chapter numbers")
    wrong = [n for n in assumes if n >= number or n not in chapter_numbers]
    if wrong or len(set(assumes)) != len(assumes):
        raise PlanError(f"{where}: assumes {assumes}: each an earlier chapter, once")
    if not isinstance(raw["next"], str) or not raw["next"].strip():
        raise PlanError(f"{where}: next is a sentence or two")
    references, keys = [], set()
    for i, ref in enumerate(raw["references"] or []):
        if not isinstance(ref, dict) or not {"key", "entry", "url"} <= set(ref) <= REFERENCE_FIELDS:
            raise PlanError(f"{where}: references[{i}] has key, entry, url and optionally cite; got {ref!r}")
        key = ref["key"]
        if not isinstance(key, str) or not re.fullmatch(r"[a-z0-9-]+", key) or key in keys:
            raise PlanError(f"{where}: references[{i}]: key {key!r} is [a-z0-9-]+ and unique")
        keys.add(key)
        if not isinstance(ref["url"], str) or not URL.match(ref["url"]):
            raise PlanError(f"{where}: reference {key}: url {ref['url']!r} is an https address")
        cite = ref.get("cite")
        if cite is not None and (not isinstance(cite, str) or not cite.strip()):
            raise PlanError(f"{where}: reference {key}: cite is the words the text uses for it")
        references.append(Reference(key, " ".join(str(ref["entry"]).split()), ref["url"], cite))
    return Plan(number, summary.strip(), learn, sorted(assumes), takeaways, " ".join(raw["next"].split()), references)


def url_label(url):
    """How a reference's address reads: arXiv:1812.06162, doi:10..., owner/repo path, or the host."""
    m = re.match(r"https://arxiv\.org/abs/(\S+)$", url)
    if m:
        return f"arXiv:{m.group(1)}"
    m = re.match(r"https://doi\.org/(\S+)$", url)
    if m:
        return f"doi:{m.group(1)}"
    m = re.match(r"https://github\.com/([\w.-]+/[\w.-]+)/(?:blob|tree)/([0-9a-f]{7})[0-9a-f]*/([^#]+)(#L\d+(?:-L\d+)?)?", url)
    if m:
        lines = m.group(4)[2:].replace("-L", "–") if m.group(4) else ""
        return f"{m.group(1)} {m.group(3)}" + (f" line{'s' if '–' in lines else ''} {lines}" if lines else "") + f" at {m.group(2)}"
    return re.sub(r"^https://(www\.)?", "", url).rstrip("/")


def markdown_escape(text):
    """text as literal Markdown: torch/__init__.py must not turn into bold "init"."""
    return re.sub(r"([\\`*_{}\[\]<>()#+!|])", r"\\\1", text)


def add_to_source(source, plan, chapters):
    """The chapter's Markdown (its Jinja source) with the plan's box, takeaways and references in it.
    chapters: {number: (title, href)} of the course's chapters."""
    def chapter_link(n):
        title, href = chapters[n]
        return f'<a href="{html.escape(href)}">{n}. {html.escape(title)}</a>'

    if plan.assumes:
        links = [chapter_link(n) for n in plan.assumes]
        builds = "It builds on " + (links[0] if len(links) == 1 else ", ".join(links[:-1]) + " and " + links[-1]) + "."
    else:
        builds = "It assumes no earlier chapter: the course starts here."
    learn = "\n".join(f"- {s}" for s in plan.learn)
    box = (f'<aside class="chapter-plan" aria-labelledby="chapter-plan-title">\n'
           f'<p class="chapter-plan-title" id="chapter-plan-title">What you will learn</p>\n\n'
           f"{learn}\n\n"
           f'<p class="chapter-plan-meta">{builds} {READING_TIME}</p>\n</aside>\n\n')
    first_section = re.search(r"^## ", source, re.M)
    at = first_section.start() if first_section else len(source)
    source = source[:at] + box + source[at:]

    takeaways = "## Key takeaways\n\n" + "\n".join(f"- {s}" for s in plan.takeaways) + "\n\n"
    exercises = re.search(r"^## Exercises\b", source, re.M)
    at = exercises.start() if exercises else len(source)
    source = source[:at] + takeaways + source[at:]

    if plan.references:
        items = "\n".join(f'1. <span class="ref-anchor" id="ref-{r.key}"></span>{r.entry} '
                          f"[{markdown_escape(url_label(r.url))}]({r.url})" for r in plan.references)
        source = source.rstrip("\n") + "\n\n## References\n\n" + items + "\n"
    return source


def reading_time(words):
    minutes = max(1, round(words / READING_WPM))
    return f"About {minutes} minute{'s' if minutes != 1 else ''} to read ({words:,} words at {READING_WPM} a minute), longer with the widgets and exercises."


def minutes_on(page_html):
    """The reading time a rendered chapter page states in its box (None if it has none): the index
    quotes the page, so the two always agree."""
    m = re.search(r"About (\d+) minutes? to read", page_html)
    return int(m.group(1)) if m else None


def fill_reading_time(body, words):
    return body.replace(READING_TIME, html.escape(reading_time(words)))


def phrase(cite):
    """The cite words as a regex: whole words, case-sensitive."""
    return re.compile(rf"(?<![\w-]){re.escape(cite)}(?![\w-]|\.\w)")


def link_references(state, references, linked):
    """markdown-it core rule: the first use of each reference's cite words in the running text (not in
    a heading, a link, inline HTML or code, nor in the references themselves) links to its entry
    (#ref-<key>); linked collects their keys."""
    pending = [(r, phrase(r.cite)) for r in references if r.cite]

    def find(text):
        nonlocal pending
        found = min(((m.start(), -m.end(), r, m) for r, p in pending if (m := p.search(text))),
                    default=None, key=lambda t: (t[0], t[1]))
        if not found:
            return None
        _, _, ref, m = found
        pending = [(r, p) for r, p in pending if r is not ref]
        linked.add(ref.key)
        return m.start(), m.end(), f'<a class="ref-link" href="#ref-{ref.key}">'

    navigation.link_first_uses(state, find)


def link_glossary_references(state, per_paragraph, linked):
    """markdown-it core rule for the glossary's one pass over its sentences: in the k-th paragraph, the
    first use of each of per_paragraph[k]'s references' cite words ([(Reference, href)]: the entry's
    chapter's references, href to their entry on that page) links there; linked collects the
    (paragraph, key) pairs linked. Paragraphs past the list link nothing."""
    pending = []

    def start(k):
        nonlocal pending
        pending = [(r, href, k, phrase(r.cite)) for r, href in (per_paragraph[k] if k < len(per_paragraph) else ())]

    def find(text):
        nonlocal pending
        found = min(((m.start(), -m.end(), i, m) for i, (_, _, _, p) in enumerate(pending) if (m := p.search(text))),
                    default=None, key=lambda t: (t[0], t[1]))
        if not found:
            return None
        _, _, i, m = found
        ref, href, k, _ = pending.pop(i)
        linked.add((k, ref.key))
        return m.start(), m.end(), f'<a class="ref-link" href="{html.escape(href)}">'

    navigation.link_first_uses(state, find, paragraph=start)


def check_linked(where, plan, linked):
    missing = [r for r in plan.references if r.cite and r.key not in linked]
    if missing:
        raise PlanError(f"{where}: the running text never uses " + "; ".join(
            f"{r.cite!r} (reference {r.key})" for r in missing) +
            ": fix the reference's cite to the words the text uses, or leave cite out")
