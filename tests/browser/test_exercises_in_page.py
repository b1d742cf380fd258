"""Every exercise's check, in the page: the reference answer passes and each typical wrong answer gets
its intended message, through the cells' worker (Pyodide's NumPy is 32-bit: np.bincount refuses
int64, intp is int32), as tests/test_exercises.py checks them in CPython."""

import time

from conftest import SITE, chapter_fixture
from pylib import exercises

chapter1 = chapter_fixture("01-")

CHECK = """async ([id, answer]) => {
  const { worker } = await import(new URL("../static/js/cells.js", location.href).href);
  return await worker.check(id, answer, () => {});
}"""


def test_every_reference_passes_and_every_mistake_gets_its_message_in_pyodide(chapter1, shared_corpus):
    exercises.use_corpus(shared_corpus)  # for the predictions' truths, computed here in CPython
    wrong, seconds = [], {}
    for ex in exercises.exercises().values():
        cases = [(ex.solution if ex.takes_code else repr(ex.truth()), True, None)]
        cases += [(m.answer, False, m.message) for m in ex.mistakes]
        for answer, passes, message in cases:
            t0 = time.perf_counter()
            reply = chapter1.evaluate(CHECK, [ex.id, answer])
            seconds[ex.id] = max(seconds.get(ex.id, 0), time.perf_counter() - t0)
            verdict = reply.get("verdict") or {}
            if not (reply["status"] == "done" and verdict.get("passed") is passes
                    and (message is None or message in verdict.get("message", ""))):
                wrong.append(f"{ex.id} ({'reference' if passes else repr(message)}): {reply}")
    slowest = sorted(seconds.items(), key=lambda kv: -kv[1])[:3]
    print("slowest checks in the page:", ", ".join(f"{k} {v:.1f} s" for k, v in slowest))
    assert not wrong, "\n".join(wrong)


# A chapter page's exercise parts as the build wrote them, parsed by Chromium without running the page.
BLOCKS = """async (url) => {
  const doc = new DOMParser().parseFromString(await (await fetch(url)).text(), "text/html");
  const progress = doc.querySelectorAll("[data-exercise-progress]");
  return {
    progress: [...progress].map((p) => [p.dataset.exerciseProgress, p.dataset.count, !!p.querySelector('[data-role="tally"]'),
                                        !!p.querySelector('[data-role="reset"]')]),
    blocks: [...doc.querySelectorAll("[data-exercise]")].map((el) => {
      const heading = el.previousElementSibling;
      const id = heading && /^H[2-4]$/.test(heading.tagName) ? heading.id : null;
      return { id: el.dataset.exercise, kind: el.dataset.kind, heading: id,
               linked: !!id && !!doc.querySelector(`nav a[href="#${id}"]`),
               editor: !!el.querySelector('[data-role="editor"]'), value: !!el.querySelector('input[data-role="value"]'),
               check: !!el.querySelector('[data-role="check"]'), verdict: !!el.querySelector('[data-role="verdict"]') };
    }),
  };
}"""


def test_every_chapter_page_holds_its_exercises_wired_for_the_page(chapter1, site_url):
    """What each chapter's exercise check in the page relies on (exercises.js and progress.js are the same
    on every page; chapter 1's browser tests take them through a whole round trip for each kind): the
    chapter's tally and reset, then every exercise of pylib.exercises for that chapter, once, each
    after its own heading that the contents link to, with an editor (code) or a number field
    (prediction), a Check button and a verdict."""
    wrong = []
    for n in range(1, 17):
        pages = sorted((SITE / "chapters").glob(f"{n:02d}-*.html"))
        assert len(pages) == 1, (n, pages)
        facts = chapter1.evaluate(BLOCKS, site_url + "chapters/" + pages[0].name)
        expected = exercises.of_chapter(n)
        if facts["progress"] != [[f"ch{n}", str(len(expected)), True, True]]:
            wrong.append(f"chapter {n}: progress {facts['progress']}")
        shown = sorted(b["id"] for b in facts["blocks"])
        if shown != sorted(ex.id for ex in expected):
            wrong.append(f"chapter {n}: blocks {shown}, not {sorted(ex.id for ex in expected)}")
        for b in facts["blocks"]:
            ex = exercises.get(b["id"])
            ok = (b["kind"] == ex.kind and b["linked"] and b["check"] and b["verdict"]
                  and (b["editor"], b["value"]) == ((True, False) if ex.takes_code else (False, True)))
            if not ok:
                wrong.append(f"{ex.id}: {b}")
    assert not wrong, "\n".join(wrong)
