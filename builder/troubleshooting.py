"""The troubleshooting page: chapters/troubleshooting.yaml (its header has the format) rendered into
troubleshooting.html, from what a reader sees in a run to the chapter sections that explain it and
the widgets that show it.

Every place is checked against the rendered chapter pages: the chapter exists, the section heading
is one of its ## or ### headings, and the widget, when one is named, lies inside that section. A
partial build (build.py --chapters N) into a folder without every page leaves the page as it was."""

import dataclasses

import yaml

from builder import glossary, navigation


class TroubleshootingError(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Place:
    chapter: int
    section: str
    widget: str | None = None


@dataclasses.dataclass(frozen=True)
class Symptom:
    symptom: str
    check: tuple  # Markdown lines
    see: tuple  # Place


def load(path):
    """The symptoms of troubleshooting.yaml, in order (TroubleshootingError on a wrong field)."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, list) or not raw:
        raise TroubleshootingError(f"{path.name}: expected a list of symptoms")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) != {"symptom", "check", "see"}:
            raise TroubleshootingError(f"{path.name}: symptom {i + 1} has exactly symptom, check and see; got {item!r}")
        name = item["symptom"]
        if not isinstance(item["check"], list) or not item["check"] or not all(isinstance(c, str) and c.strip() for c in item["check"]):
            raise TroubleshootingError(f"{path.name}: {name!r}: check is a list of lines")
        places = []
        for place in item["see"] or []:
            if not isinstance(place, dict) or not {"chapter", "section"} <= set(place) <= {"chapter", "section", "widget"} \
                    or not isinstance(place["chapter"], int) or not isinstance(place["section"], str):
                raise TroubleshootingError(f"{path.name}: {name!r}: each place has chapter (a number), section "
                                           f"and optionally widget; got {place!r}")
            places.append(Place(place["chapter"], place["section"], place.get("widget")))
        if not places:
            raise TroubleshootingError(f"{path.name}: {name!r}: see names at least one place")
        out.append(Symptom(name, tuple(" ".join(c.split()) for c in item["check"]), tuple(places)))
    return out


def resolve(symptoms, chapters, pages):
    """Each symptom's places as links: [(symptom, [{chapter, section, href, widget: (id, title) or
    None}])]. chapters: {number: {url, title, ...}}; pages: {number: rendered page}, every page a
    place names (build.write_troubleshooting skips a partial build that lacks one).
    TroubleshootingError names a missing chapter, page, section or widget."""
    out = []
    for s in symptoms:
        links = []
        for p in s.see:
            if p.chapter not in chapters:
                raise TroubleshootingError(f"troubleshooting.yaml: {s.symptom!r}: there is no chapter {p.chapter}")
            page = pages.get(p.chapter)
            chapter = chapters[p.chapter]
            if page is None:
                raise TroubleshootingError(f"troubleshooting.yaml: chapter {p.chapter}'s page is not built")
            ids = {sec.title: sec.id for sec in navigation.sections(page) if sec.id}
            if p.section not in ids:
                raise TroubleshootingError(f"troubleshooting.yaml: {s.symptom!r}: chapter {p.chapter} has no section "
                                           f"{p.section!r}; its sections: {sorted(ids)}")
            widget = None
            if p.widget:
                found = [w for w in glossary.widget_ids(page, p.widget) if navigation.section_of(page, w) == ids[p.section]]
                if not found:
                    raise TroubleshootingError(f"troubleshooting.yaml: {s.symptom!r}: no widget {p.widget!r} in chapter "
                                               f"{p.chapter}'s section {p.section!r}")
                widget = (found[0], glossary.widget_title(page, found[0]))
            links.append({"chapter": chapter, "section": p.section, "href": f"{chapter['url']}#{ids[p.section]}",
                          "widget": widget})
        out.append((s, links))
    return out
