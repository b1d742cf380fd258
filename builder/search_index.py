"""The site's search index: every chapter section and every glossary term, as search-index.json.

The page searches it with MiniSearch (site/js/search.js, vendored from npm): the JSON holds the
documents MiniSearch indexes, one per section of a chapter (navigation.sections: the same sections as
the page's contents) and one per glossary term, each with the URL of its anchor, so a result links to
the section itself. The file depends only on the built pages and the glossary, in a fixed order, so the
same build writes the same bytes.
"""

import json

from builder import navigation

VERSION = 1  # bump when the document fields change; search.js checks it
FIELDS = ["heading", "text", "chapter"]  # what MiniSearch indexes
STORED = ["kind", "chapter", "heading", "url"]  # what a result shows (the text gives its snippet)


def chapter_documents(chapter, page_html):
    """One document per section of a chapter page: the text before the first heading, then each h2/h3.
    chapter: {number, title, url} (url relative to the site's root)."""
    docs = []
    for s in navigation.sections(page_html):
        if not s.text and s.level == 1:
            continue
        docs.append({
            "kind": "section",
            "chapter": f"Chapter {chapter['number']}: {chapter['title']}",
            "heading": s.title or chapter["title"],
            "text": s.text,
            "url": chapter["url"] + (f"#{s.id}" if s.id else ""),
        })
    return docs


def glossary_documents(items, glossary_url="glossary.html"):
    """One document per glossary term: its plain sentence and where it is explained.
    items: [{term, anchor, text, chapter: {number, title}, section}] in the glossary's order."""
    return [{
        "kind": "glossary",
        "chapter": "Glossary",
        "heading": item["term"],
        "text": f"{item['text']} Explained in chapter {item['chapter']['number']}, {item['section']}.",
        "url": f"{glossary_url}#{item['anchor']}",
    } for item in items]


def build_index(chapter_pages, glossary_items):
    """The index as a dict: chapter_pages is [(chapter dict, page HTML)] in chapter order."""
    docs = [d for chapter, html in chapter_pages for d in chapter_documents(chapter, html)]
    docs += glossary_documents(glossary_items)
    for i, d in enumerate(docs):
        d["id"] = i
    return {"version": VERSION, "fields": FIELDS, "storeFields": STORED, "documents": docs}


def to_bytes(index):
    """Deterministic JSON: sorted keys, no spaces, UTF-8."""
    return json.dumps(index, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def write_index(path, chapter_pages, glossary_items):
    """Write search-index.json (only when its bytes change); returns the number of documents."""
    index = build_index(chapter_pages, glossary_items)
    data = to_bytes(index)
    if not path.is_file() or path.read_bytes() != data:
        path.write_bytes(data)
    return len(index["documents"])
