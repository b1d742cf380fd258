"""results.html: results.md as a page of the site, and every value of results.json with its own anchor,
one section per chapter (its part of results.md, then its values in a collapsed table), with a filter
(static/js/results.js).

A measured figure on a chapter page links to `results.html#key-<key>` (build.py's figure()). That id is
on the row of results.md's summary that names the key in code (`ch1.default.final_val`), where there is
one, so the reader lands on the number with its description; every other key has its row in the table
of every value below the summary. An arm stored as key.mean, key.sd, key.n and key.per_seed
(experiments.common.arm) is one row, under its base key.
"""

import json
import re

import markupsafe
from markdown_it import MarkdownIt
from mdit_py_plugins.anchors import anchors_plugin

from builder import navigation

ARM_PARTS = ("mean", "sd", "n", "per_seed")


# ---------------------------------------------------------------------------
# Keys and their anchors


def base_key(key, values):
    """The row a key belongs to: an arm's part (key.mean, .sd, .n, .per_seed) goes to the arm's base key."""
    base, _, part = key.rpartition(".")
    if part in ARM_PARTS and (f"{base}.mean" in values or f"{base}.per_seed" in values):
        return base
    return key


def anchor(key, values):
    """The id of key's row on results.html."""
    return "key-" + base_key(key, values)


def row_keys(results):
    """Every row's key, in results.json's order: the values' base keys, then the timings' numeric keys."""
    values = results.get("values", {})
    keys = dict.fromkeys(base_key(k, values) for k in values)
    keys.update(dict.fromkeys(k for k, v in results.get("timings", {}).items() if _is_number(v) and k not in keys))
    return list(keys)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ---------------------------------------------------------------------------
# The summary: results.md, with an id on each row that names a key


def _key_row_ids(state, known, anchored):
    """markdown-it core rule: a table row or list item whose code names a known key gets that key's id
    (the first such key in it; a key already anchored above keeps its first place)."""
    containers = []
    for tok in state.tokens:
        if tok.type in ("tr_open", "list_item_open"):
            containers.append(tok)
        elif tok.type in ("tr_close", "list_item_close"):
            containers.pop()
        elif tok.type == "inline" and containers and not containers[-1].attrGet("id"):
            for child in tok.children or []:
                if child.type == "code_inline" and child.content in known and child.content not in anchored:
                    anchored.add(child.content)
                    containers[-1].attrSet("id", "key-" + child.content)
                    break


def _focusable_tables(state):
    """markdown-it core rule: a table (it scrolls sideways on a phone) can take keyboard focus, to scroll it."""
    for tok in state.tokens:
        if tok.type == "table_open":
            tok.attrSet("tabindex", "0")


def summary_html(markdown_text, known):
    """results.md (its '# ' title dropped) as HTML, and the set of keys whose row it anchors."""
    anchored = set()
    md = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable("table")
    md.use(anchors_plugin, min_level=2, max_level=3)
    md.core.ruler.push("key_rows", lambda state: _key_row_ids(state, known, anchored))
    md.core.ruler.push("heading_links", navigation.heading_links)
    md.core.ruler.push("focusable_tables", _focusable_tables)
    return md.render(re.sub(r"\A# .+\n", "", markdown_text)), anchored


# ---------------------------------------------------------------------------
# The table of every value


def format_value(v):
    """A stored value as text: numbers to 6 significant digits, a seed dict as 'seed 0: …, seed 1: …'."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False, sort_keys=True)


def format_seeds(per_seed):
    if not isinstance(per_seed, dict):
        return format_value(per_seed)
    return ", ".join(f"seed {s}: " + ("diverged" if v is None else format_value(v))
                     for s, v in sorted(per_seed.items(), key=lambda kv: (len(kv[0]), kv[0])))


def _row(key, results):
    values, timings = results.get("values", {}), results.get("timings", {})
    if key in values or not (f"{key}.mean" in values or f"{key}.per_seed" in values):
        source = values if key in values else timings
        return {"key": key, "value": format_value(source[key]), "seeds": "", "timing": key not in values}
    parts = {p: values.get(f"{key}.{p}") for p in ARM_PARTS}
    if parts["mean"] is None:
        value = "no mean (a seed diverged)" if f"{key}.mean" in values else ""
    else:
        value = format_value(parts["mean"])
        if parts["sd"] is not None:
            value += f" ± {format_value(parts['sd'])}"
    if parts["n"] is not None:
        value += f" ({parts['n']} seeds)" if value else f"{parts['n']} seeds"
    seeds = format_seeds(parts["per_seed"]) if parts["per_seed"] is not None else ""
    return {"key": key, "value": value, "seeds": seeds, "timing": False}


def _group_of(key):
    head = key.split(".", 1)[0]
    m = re.fullmatch(r"ch(\d+)", head)
    return (0, int(m.group(1)), f"Chapter {m.group(1)}") if m else (1, 0, head)


def page(results, markdown_text):
    """What templates/results.html needs: the summary's HTML and the grouped rows of every value, each
    row with its anchor id (None when the summary holds that key's id)."""
    keys = row_keys(results)
    summary, anchored = summary_html(markdown_text, set(keys))
    groups = {}
    for key in keys:
        row = _row(key, results)
        row["id"] = None if key in anchored else "key-" + key
        row["summary_id"] = "key-" + key if key in anchored else None
        groups.setdefault(_group_of(key), []).append(row)
    groups = [{"title": title, "id": "values-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-"),
               "chapter": number if kind == 0 else None, "rows": rows}
              for (kind, number, title), rows in sorted(groups.items())]
    return {"summary": summary, "groups": groups, "anchors": {"key-" + k for k in keys},
            "intro": split_sections(summary)[0], "sections": chapter_sections(summary, groups)}


def split_sections(summary):
    """(the summary's text before its first ## heading, [(h2 id, h2 title, html from that h2 on)])."""
    parts = re.split(r'(?=<h2 id=")', summary)
    sections = []
    for part in parts[1:]:
        m = re.match(r'<h2 id="([^"]+)">(.*?)</h2>', part, re.S)
        title = re.sub(r"<[^>]+>", "", m.group(2)).replace("#", "").strip() if m else ""
        sections.append((m.group(1) if m else "", title, part))
    return parts[0], sections


def chapter_sections(summary, groups):
    """The page's sections, one per chapter: its part of results.md and its table of every value
    (a chapter in only one of them gets that one); then the rest (the timings, keys of no chapter)."""
    _, parts = split_sections(summary)
    out, by_chapter = [], {}
    for hid, title, html in parts:
        m = re.match(r"Chapter (\d+)\b", title)
        section = {"id": hid, "title": title, "summary": markupsafe.Markup(html), "table": None,
                   "chapter": int(m.group(1)) if m else None}
        out.append(section)
        if m:
            by_chapter[int(m.group(1))] = section
    for group in groups:
        section = by_chapter.get(group["chapter"])
        if section is None:
            title = group["title"] if group["chapter"] is not None else f"Keys of no chapter: {group['title']}"
            section = {"id": group["id"] + "-section", "title": title, "summary": None, "table": None,
                       "chapter": group["chapter"]}
            out.append(section)
            if group["chapter"] is not None:
                by_chapter[group["chapter"]] = section
        section["table"] = group
    chapters = sorted((s for s in out if s["chapter"] is not None), key=lambda s: s["chapter"])
    return chapters + [s for s in out if s["chapter"] is None]


def render(env, results, markdown_text, references=None, **context):
    """results.html, from templates/results.html; context: the page's site and chapters. references:
    {chapter number: the address of its references list}; a chapter's section links to it."""
    data = page(results, markdown_text)
    for section in data["sections"]:
        section["references"] = (references or {}).get(section["chapter"])
    toc = [{"id": "how-to-read", "title": "How to read this page", "children": []}] + [
        {"id": s["id"], "title": s["title"], "children": []} for s in data["sections"]]
    return env.get_template("results.html").render(
        intro=markupsafe.Markup(data["intro"]), sections=data["sections"], toc=toc,
        chapter_numbers=sorted(s["chapter"] for s in data["sections"] if s["chapter"] is not None), **context)
