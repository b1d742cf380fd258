"""Every exercise's check (pylib.exercises), in CPython: the reference passes, each typical wrong
answer fails with its intended message, and malformed answers (wrong name, wrong signature, a
syntax error, an answer that returns nothing, a prediction that is not a number) get a clear one."""

import ast
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
import yaml

from pylib import exercises

ALL = list(exercises.exercises().values())
CODE = [ex for ex in ALL if ex.takes_code]
PREDICT = [ex for ex in ALL if not ex.takes_code]
MISTAKES = [(ex, m) for ex in ALL for m in ex.mistakes]
COURSE_BUG = "the course's bug"
FINISHED = True
ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="module")
def corpus_once(shared_corpus):
    exercises.use_corpus(shared_corpus)


def ids(items):
    return [x.id if isinstance(x, exercises.Exercise) else f"{x[0].id}:{i}" for i, x in enumerate(items)]


def test_every_chapter_has_three_to_five_exercises_and_the_course_at_least_56():
    counts = {n: len(exercises.of_chapter(n)) for n in range(1, 17) if FINISHED or exercises.of_chapter(n)}
    assert all(3 <= c <= 5 for c in counts.values()), counts
    assert not FINISHED or sum(counts.values()) >= 56


def test_every_kind_is_used():
    assert {ex.kind for ex in ALL} == set(exercises.KINDS)


@pytest.mark.parametrize("ex", ALL, ids=ids(ALL))
def test_the_reference_answer_passes(ex):
    answer = ex.solution if ex.takes_code else repr(ex.truth())
    verdict = exercises.check(ex.id, answer)
    assert verdict.passed, verdict.message
    assert verdict.status == "checked"


@pytest.mark.parametrize("ex,mistake", MISTAKES, ids=ids(MISTAKES))
def test_each_typical_mistake_fails_with_its_message(ex, mistake):
    verdict = exercises.check(ex.id, mistake.answer)
    assert not verdict.passed, f"{ex.id}: the mistake passed"
    assert mistake.message in verdict.message, verdict.message
    assert COURSE_BUG not in verdict.message


@pytest.mark.parametrize("ex", ALL, ids=ids(ALL))
def test_each_exercise_has_two_or_three_mistakes_and_hints(ex):
    assert 2 <= len(ex.mistakes) <= 4, ex.id
    assert len({m.message for m in ex.mistakes}) == len(ex.mistakes), "two mistakes, one message"
    assert ex.hints and ex.task.strip() and ex.solution.strip()


@pytest.mark.parametrize("ex", CODE, ids=ids(CODE))
def test_the_starter_does_not_pass_and_keeps_the_solutions_signature(ex):
    assert not exercises.check(ex.id, ex.starter).passed
    assert exercises.starter_parameters(ex) == exercises.starter_parameters(
        exercises.Exercise(**{**ex.__dict__, "starter": ex.solution}))


@pytest.mark.parametrize("ex", CODE, ids=ids(CODE))
def test_malformed_code_gets_a_clear_message(ex):
    name, params = ex.function, exercises.starter_parameters(ex)
    cases = {
        "": "answer is empty",
        f"def {name}({', '.join(params)}:\n    pass\n": "SyntaxError on line 1",
        f"def not_{name}({', '.join(params)}):\n    return None\n": f"define a function called {name}",
        f"def {name}(only_one):\n    return None\n": f"{name} takes ({', '.join(params)})",
        f"{name} = 3\n": f"{name} must be a function",
        f"import numpy\nnumpy.zeros(1) / 0\nraise ValueError('at import')\n": "before the check could start",
    }
    for code, message in cases.items():
        verdict = exercises.check(ex.id, code)
        assert not verdict.passed and message in verdict.message, (code, verdict.message)
        assert verdict.status == "invalid"


@pytest.mark.parametrize("ex", CODE, ids=ids(CODE))
def test_an_answer_that_returns_nothing_or_raises_is_told_so_by_the_check_not_crashed(ex):
    params = ", ".join(exercises.starter_parameters(ex))
    for body, message in (("return None", None), ("raise RuntimeError('mine')", "RuntimeError on line 2: mine")):
        verdict = exercises.check(ex.id, f"def {ex.function}({params}):\n    {body}\n")
        assert not verdict.passed
        assert COURSE_BUG not in verdict.message, verdict.message
        if message:
            assert message in verdict.message, verdict.message


@pytest.mark.parametrize("ex", PREDICT, ids=ids(PREDICT))
def test_a_prediction_that_is_not_a_number_gets_a_clear_message(ex):
    for text, message in (("", "Type a number"), ("   ", "Type a number"), ("abc", "is not a number"),
                          ("nan", "finite"), ("-inf", "finite"), ("1e999", "finite"), ("9" * 80, "too long"),
                          ("🙂", "is not a number"), ("<b>1</b>", "is not a number")):
        verdict = exercises.check(ex.id, text)
        assert not verdict.passed and verdict.status == "invalid" and message in verdict.message, (text, verdict)


@pytest.mark.parametrize("ex", PREDICT, ids=ids(PREDICT))
def test_a_prediction_far_off_says_how_far_and_the_truth_within_tolerance_passes(ex):
    truth = ex.truth()
    assert exercises.check(ex.id, repr(truth * (1 + ex.tolerance / 2) if truth else ex.tolerance / 2)).passed
    far = truth * 3 + 1 if truth >= 0 else truth * 3 - 1
    verdict = exercises.check(ex.id, repr(far))
    assert not verdict.passed and verdict.message.startswith("Off:"), verdict.message
    assert verdict.truth == pytest.approx(truth) and verdict.value == pytest.approx(far)


def _statements(fn_node):
    """A function's statements without its docstring, as an AST dump (names of the function aside)."""
    body = fn_node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return [ast.dump(s) for s in body]


def shown_functions(chapter):
    """The AST of every function or class the chapter pulls in with code() or editable()."""
    import importlib
    import inspect
    text = next(ROOT.glob(f"chapters/{chapter:02d}-*.md")).read_text()
    out = []
    for name in re.findall(r"""\{\{\s*(?:code|editable)\(\s*["']([\w.]+)["']""", text):
        module, _, attr = name.rpartition(".")
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(importlib.import_module(module), attr))))
        out += [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    return out


@pytest.mark.parametrize("ex", CODE, ids=ids(CODE))
def test_no_answer_in_plain_sight_the_solution_is_not_code_its_chapter_shows(ex):
    solution = next(n for n in ast.walk(ast.parse(ex.solution)) if isinstance(n, ast.FunctionDef)
                    and n.name == ex.function)
    for shown in shown_functions(ex.chapter):
        assert _statements(solution) != _statements(shown), f"{ex.id}'s solution is {shown.name} as the chapter shows it"


@pytest.mark.parametrize("ex", CODE, ids=ids(CODE))
def test_an_answer_takes_no_parameter_a_later_chapter_teaches(ex):
    """The answer's signature is at its chapter's level (chapters/ideas.yaml, as test_chapter_level)."""
    later = {}
    for row in yaml.safe_load((ROOT / "chapters" / "ideas.yaml").read_text()):
        later.update({n: row["chapter"] for n in row["names"] if row["chapter"] > ex.chapter})
    assert not set(exercises.starter_parameters(ex)) & set(later)


def test_the_command_line_checks_a_file_with_the_pages_messages(tmp_path):
    ex = exercises.get("ch1.cross_entropy")
    mistake = ex.mistakes[0]
    answers = tmp_path / "answers.py"
    answers.write_text(mistake.answer + "\n\nloss_at_step_0 = 65\n")
    run = lambda *args: subprocess.run([sys.executable, "-m", "pylib.exercises", *args],  # noqa: E731
                                       capture_output=True, text=True, timeout=120)
    out = run("check", "ch1", str(answers))
    assert out.returncode == 1, out.stderr
    assert mistake.message in out.stdout and "vocabulary's size" in out.stdout
    assert re.search(r"\[ -- \] ch1\.windows .*not answered", out.stdout)
    answers.write_text(ex.solution)
    out = run("check", "ch1", str(answers))
    assert out.returncode == 0 and "[ ok ] ch1.cross_entropy" in out.stdout, out.stdout
    starter = run("starter", "ch1")
    assert starter.returncode == 0 and "def cross_entropy(logits, targets):" in starter.stdout
    assert "loss_at_step_0 = None" in starter.stdout
    assert run("show", "ch9.nothing").returncode == 2
    listed = run("list").stdout
    assert all(e.id in listed for e in ALL)


@pytest.mark.parametrize("ex", [e for e in ALL if not e.needs_corpus], ids=ids([e for e in ALL if not e.needs_corpus]))
def test_an_exercise_that_does_not_ask_for_the_corpus_does_not_read_it(ex, monkeypatch, shared_corpus):
    """The page loads the corpus only for an exercise with needs_corpus; a check that read it anyway
    would fail there."""
    from pylib import data

    def refuse():
        raise AssertionError(f"{ex.id} reads the corpus: give it needs_corpus=True")

    monkeypatch.setattr(data, "build_corpus", refuse)
    exercises.use_corpus(None)
    try:
        answer = ex.solution if ex.takes_code else repr(exercises.truth_of(ex))
        verdict = exercises.check(ex.id, answer)
        assert verdict.passed, verdict.message
    finally:
        exercises.use_corpus(shared_corpus)


def in_fresh_loop(coroutine):
    """asyncio.run(coroutine) on a thread of its own: on a pytest process that has already run a browser
    test, Playwright's sync API keeps an event loop running on the main thread, and asyncio.run refuses."""
    import asyncio
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_the_page_entry_point_reports_the_verdict_the_output_and_a_stop():
    import json

    from pylib.web import cells
    ex = exercises.get("ch1.windows")
    out = []
    emit = lambda text, stream: out.append((stream, text))  # noqa: E731
    code = ex.solution.replace("    idx =", "    print('hello from the answer')\n    idx =")
    reply = json.loads(in_fresh_loop(cells.check_in_page(ex.id, code, emit, "unused/")))
    assert reply["status"] == "done" and reply["verdict"]["passed"], reply
    assert "hello from the answer\n" in "".join(text for stream, text in out if stream == "out")
    stop = f"def windows(tokens, starts, T):\n    raise KeyboardInterrupt\n"
    reply = json.loads(in_fresh_loop(cells.check_in_page(ex.id, stop, emit, "unused/")))
    assert reply["status"] == "stopped"
    reply = json.loads(in_fresh_loop(cells.check_in_page("ch99.none", "", emit, "unused/")))
    assert reply["status"] == "error" and "no exercise" in reply["message"]


def test_the_straggler_prediction_uses_chapter_13s_base_and_spread():
    """pylib may not import experiments/, so ch13's exercise repeats the two numbers: they must agree."""
    from experiments import ch13
    from pylib.exercises import ch13 as exercise13
    assert (exercise13.STRAGGLE_BASE, exercise13.STRAGGLE_SPREAD) == (ch13.STRAGGLERS["base"],
                                                                      ch13.STRAGGLERS["spread"])


def test_what_a_check_keeps_is_kept_per_corpus_and_cannot_be_written(monkeypatch):
    """exercises.kept: a check's answer-independent runs are computed once per corpus (the reader's next
    try is checked sooner), recomputed for another corpus, and their arrays are read-only, so that a
    check writing to one fails instead of spoiling the next."""
    import numpy as np

    monkeypatch.setattr(exercises, "_kept", {})
    made = []
    make = lambda: made.append(1) or {"grads": [np.zeros(3)], "loss": 1.0}  # noqa: E731
    corpus_a, corpus_b = object(), object()
    monkeypatch.setattr(exercises, "_corpus", corpus_a)  # restored after the test
    first = exercises.kept("k", make)
    assert exercises.kept("k", make) is first and len(made) == 1
    with pytest.raises(ValueError):
        first["grads"][0][0] = 1.0
    exercises.use_corpus(corpus_b)
    assert exercises.kept("k", make) is not first and len(made) == 2
