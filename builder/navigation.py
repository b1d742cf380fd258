"""Finding one's way in a page: the link beside each section heading, and a page's sections.

- `heading_links(state)` is a markdown-it core rule: after the anchors plugin has given each ## and ###
  heading its GitHub-style id, it appends a "#" link to that id, named "Link to this section: <title>"
  for a screen reader (the CSS shows it on hover and on keyboard focus).
- `sections(page_html)` splits a rendered page into its sections: the text before the first heading,
  then one per ## or ### heading of the page itself (not the headings inside widgets), each with its
  id, its title and its text as plain words. The chapter template draws its contents from it, and
  search_index.py indexes the same sections, so a search result and the contents name the same places.
"""

import dataclasses
import html.parser
import re

from markdown_it.token import Token

LINK_NAME = "Link to this section"


# ---------------------------------------------------------------------------
# The link beside each heading


def heading_links(state):
    """markdown-it core rule: every h2/h3 with an id gets a trailing '#' link to itself."""
    tokens = state.tokens
    for i, tok in enumerate(tokens):
        if tok.type != "heading_open" or tok.tag not in ("h2", "h3") or not tok.attrGet("id"):
            continue
        inline = tokens[i + 1]
        title = " ".join("".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline")).split())
        link = Token("link_open", "a", 1)
        link.attrSet("class", "heading-anchor")
        link.attrSet("href", f"#{tok.attrGet('id')}")
        link.attrSet("aria-label", f"{LINK_NAME}: {title}" if title else LINK_NAME)
        inline.children = (inline.children or []) + [
            Token("text", "", 0, content=" "), link, Token("text", "", 0, content="#"), Token("link_close", "a", -1)]


# ---------------------------------------------------------------------------
# A page's sections


@dataclasses.dataclass
class Section:
    level: int  # 2 or 3; 1 for the text before the first heading
    id: str  # the heading's id ("" for the text before the first heading)
    title: str  # plain text ("" for the text before the first heading)
    text: str = ""  # the section's words, up to the next h2/h3


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
BLOCK = {"p", "div", "li", "ul", "ol", "dt", "dd", "dl", "tr", "td", "th", "table", "figure", "figcaption",
         "section", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "details", "summary", "br", "label",
         "caption", "pre", "math"}
# Not words of the text: code listings, scripts (a widget's JSON config), controls, drawings, the
# second (visual) copy of KaTeX maths and its TeX source, a figure's provenance tag, the heading link,
# the page's title (the index names it) and its contents (a <nav>).
SKIP_TAGS = {"script", "style", "pre", "svg", "canvas", "button", "select", "textarea", "form", "template",
             "noscript", "annotation", "nav", "h1"}
SKIP_CLASSES = {"katex-html", "fig-tag", "heading-anchor", "readouts"}


class _SectionParser(html.parser.HTMLParser):
    """Collects sections from the page's <article> (or the whole input when it has none)."""

    def __init__(self, whole):
        super().__init__(convert_charrefs=True)
        self.stack = []  # open elements: (tag, skipped)
        self.inside = whole  # collecting: inside <article>, or everywhere for a bare body
        self.article_depth = None if not whole else 0
        self.sections = [Section(1, "", "")]
        self.heading = None  # [tag, id, words] while inside a page-level heading
        self.words = []  # the current section's text pieces

    def _skipping(self):
        return any(skipped for _, skipped in self.stack)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "article" and self.article_depth is None:
            self.inside, self.article_depth = True, len(self.stack) + 1
        if tag in VOID:
            if tag == "br" and self.inside:
                self._space()
            return
        classes = set((attrs.get("class") or "").split())
        skipped = tag in SKIP_TAGS or bool(classes & SKIP_CLASSES)
        depth = len(self.stack)  # this element's depth below the article is depth - article_depth
        self.stack.append((tag, skipped))
        if not self.inside:
            return
        if tag in ("h2", "h3") and attrs.get("id") and depth == self.article_depth and not self._skipping():
            self._end_section()
            self.heading = [tag, attrs["id"], []]
        elif tag in BLOCK:
            self._space()

    def handle_endtag(self, tag):
        if tag in VOID or not any(t == tag for t, _ in self.stack):
            return
        while self.stack:
            open_tag, _ = self.stack.pop()
            if open_tag == tag:
                break
        if self.heading and tag == self.heading[0] and len(self.stack) == self.article_depth:
            _, hid, words = self.heading
            self.sections.append(Section(int(tag[1]), hid, _squash("".join(words))))
            self.heading = None
        elif tag in BLOCK and self.inside:
            self._space()
        if tag == "article" and self.article_depth is not None and len(self.stack) < self.article_depth:
            self.inside = False

    def handle_data(self, data):
        if not self.inside or self._skipping():
            return
        (self.heading[2] if self.heading else self.words).append(data)

    def _space(self):
        (self.heading[2] if self.heading else self.words).append(" ")

    def _end_section(self):
        self.sections[-1].text = _squash("".join(self.words))
        self.words = []

    def close(self):
        super().close()
        self._end_section()


def link_first_uses(state, find, paragraph=None):
    """The body of a markdown-it core rule that links first uses in the running text: the glossary's
    terms (glossary.link_terms) and a chapter's references (plans.link_references). It walks the text
    tokens outside headings, links and inline HTML, and stops at a "References" heading (its entries are
    titles, not uses). find(text) -> (start, end, opening <a> tag) of the earliest match in text that is
    not linked yet, or None; find records what it links. The match is wrapped in that tag and </a>.
    paragraph(k), if given, is called before the k-th block of running text is walked (the glossary
    links each entry's own first uses: plans.link_glossary_references)."""
    tokens = state.tokens
    walked = 0
    for i, block in enumerate(tokens):
        if block.type == "heading_open" and block.attrGet("id") == "references":
            break
        if block.type != "inline" or not block.children:
            continue
        if i > 0 and tokens[i - 1].type == "heading_open":
            continue  # headings stay plain: they carry the section ids
        if paragraph:
            paragraph(walked)
        walked += 1
        children, depth = [], 0
        for child in block.children:
            if child.type in ("link_open", "link_close"):
                depth += 1 if child.type == "link_open" else -1
            elif child.type == "html_inline":
                tag = re.match(r"<(/?)([a-zA-Z][\w-]*)", child.content)
                if tag and not child.content.rstrip().endswith("/>") and tag.group(2).lower() not in ("br", "img", "wbr"):
                    depth += -1 if tag.group(1) else 1
            if child.type != "text" or depth > 0:
                children.append(child)
                continue
            text = child.content
            while text:
                found = find(text)
                if not found:
                    break
                start, end, opening = found
                if start:
                    children.append(Token("text", "", 0, content=text[:start]))
                children.append(Token("html_inline", "", 0, content=opening))
                children.append(Token("text", "", 0, content=text[start:end]))
                children.append(Token("html_inline", "", 0, content="</a>"))
                text = text[end:]
            if text:
                children.append(Token("text", "", 0, content=text))
        block.children = children


def _squash(text):
    return re.sub(r"\s+", " ", text).strip()


def sections(page_html):
    """[Section] of a rendered page: first the text before the first heading (level 1, no id), then one
    per h2/h3 with an id that is a child of the page's <article> (or of the top level, for a bare body)."""
    parser = _SectionParser(whole="<article" not in page_html)
    parser.feed(page_html)
    parser.close()
    return parser.sections


def contents(page_html):
    """The page's contents for its template: [{id, title, children: [{id, title}]}], each h3 under the
    h2 before it (an h3 before any h2 stands on its own)."""
    items = []
    for s in sections(page_html):
        if s.level == 3 and items:
            items[-1]["children"].append({"id": s.id, "title": s.title})
        elif s.level > 1:
            items.append({"id": s.id, "title": s.title, "children": []})
    return items


def section_of(page_html, element_id):
    """The id of the h2/h3 section of a page that holds the element with this id ('' if none does)."""
    at = page_html.find(f'id="{element_id}"')
    if at < 0:
        return ""
    ids = [s.id for s in sections(page_html[:at] + ">") if s.id]
    return ids[-1] if ids else ""
