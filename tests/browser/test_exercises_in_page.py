"""Every exercise's check, in the page: the reference answer passes and each typical wrong answer gets
its intended message, through the cells' worker (Pyodide's NumPy is 32-bit: np.bincount refuses
int64, intp is int32), as tests/test_exercises.py checks them in CPython."""

import time

from conftest import chapter_fixture
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
