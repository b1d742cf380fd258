"""An exercise's round trip in the page, for each chapter's browser tests: a typical wrong answer
shows its message (pylib.exercises' own Mistake), the reference answer marks the exercise done, the
mark survives a reload (a second page of the same browser context, so the same localStorage), and
the chapter's reset clears it. Chapter 1's browser tests take the round trip for a code exercise and
for a prediction: exercises.js and progress.js are the same on every page, and test_exercises_in_page
checks every chapter's blocks as built and every exercise's check in Pyodide.

A prediction is done once committed and checked, near or far (the point is to predict first), so
for a predict exercise the wrong answer is also the one that marks it done, and the reload shows
the committed number and its verdict again."""

import re

from playwright.sync_api import expect

from conftest import settle_after, wait_until
from pylib import exercises


def block(page, exercise_id):
    """The exercise's block, scrolled into view and mounted (its editor or its input is live)."""
    root = page.locator(f'[data-exercise="{exercise_id}"]')
    root.scroll_into_view_if_needed()
    expect(root).to_have_attribute("data-mounted", "true", timeout=60_000)
    return root


def heading_id(root):
    return root.evaluate("el => el.previousElementSibling.id")


def check(page, root, answer):
    """Put answer in the block (code in its editor, or a number) and check it; the verdict's text."""
    ex = exercises.get(root.get_attribute("data-exercise"))
    if ex.takes_code:
        root.evaluate("(el, text) => el.setExerciseAnswer(text)", answer)
    else:
        again = root.locator('[data-role="reset"]')
        if again.is_visible():
            again.click()
        root.locator('[data-role="value"]').fill(answer)
    settle_after(root, lambda: root.locator('[data-role="check"]').click(), timeout=120_000)
    verdict = root.locator('[data-role="verdict"]')
    expect(verdict).to_be_visible()
    return verdict.text_content()


def checked_in_the_page(page, exercise_id):
    """A typical wrong answer's message, then (for code) the reference answer: the exercise is marked
    done in its block, in the contents (said, not only shown) and in the chapter's tally: the first half
    of round_trip. Returns (root, link, tally)."""
    ex = exercises.get(exercise_id)
    root = block(page, exercise_id)
    link = page.locator(f'nav a[href="#{heading_id(root)}"]').first
    tally = page.locator('[data-exercise-progress] [data-role="tally"]')

    wrong = ex.mistakes[0]
    said = check(page, root, wrong.answer)
    assert wrong.message in said, said
    assert root.get_attribute("data-passed") == "false"
    if ex.takes_code:
        assert root.get_attribute("data-done") is None
        expect(link.locator(".exercise-tick")).to_have_count(0)
        said = check(page, root, ex.solution)
        assert root.get_attribute("data-passed") == "true", said
        assert said.startswith("Right"), said
    expect(root).to_have_attribute("data-done", "true")
    expect(root.locator('[data-role="done"]')).to_be_visible()
    expect(link.locator(".exercise-tick")).to_have_count(1)
    expect(link).to_contain_text("(done)")  # said, not only shown
    expect(tally).to_contain_text(re.compile(r"Done: [1-9]"))
    return root, link, tally


def round_trip(page, exercise_id):
    """The whole round trip on the chapter's shared page (which starts with no progress)."""
    ex = exercises.get(exercise_id)
    wrong = ex.mistakes[0]
    root, link, tally = checked_in_the_page(page, exercise_id)

    # a reload: the same browser's storage, another page
    again = page.context.new_page()
    # The marks need no Python: this page is not let fetch it (it would start loading at once, for nothing).
    again.route(re.compile(r"/(pyodide|wheels)/"), lambda route: route.abort())
    try:
        again.goto(page.url.split("#")[0])
        expect(again.locator(f'nav a[href="#{heading_id(root)}"] .exercise-tick').first).to_be_attached()
        root2 = block(again, exercise_id)
        expect(root2).to_have_attribute("data-done", "true")
        if not ex.takes_code:
            expect(root2.locator('[data-role="value"]')).to_have_value(wrong.answer)
            expect(root2.locator('[data-role="verdict"]')).to_contain_text(wrong.message)
    finally:
        again.close()

    # reset, after the in-page question
    reset = page.locator('[data-exercise-progress] [data-role="reset"]')
    reset.click()
    page.locator('[data-role="keep"]').click()  # "keep it" forgets nothing
    expect(root).to_have_attribute("data-done", "true")
    reset.click()
    page.locator('[data-role="confirm-reset"]').click()
    expect(root).not_to_have_attribute("data-done", "true")
    expect(root.locator('[data-role="done"]')).to_be_hidden()
    expect(link.locator(".exercise-tick")).to_have_count(0)
    expect(tally).to_contain_text("Done: 0 of")
    if not ex.takes_code:
        expect(root.locator('[data-role="value"]')).to_be_editable()


def hints_and_solution(page, exercise_id):
    """Hints open one at a time; the solution only when asked, and the page records that it was."""
    ex = exercises.get(exercise_id)
    root = block(page, exercise_id)
    hints = root.locator('[data-role="hint-list"] li')
    expect(hints).to_have_count(0)
    for n in range(1, len(ex.hints) + 1):
        root.locator('[data-role="hint"]').click()
        expect(hints).to_have_count(n)
    expect(root.locator('[data-role="hint"]')).to_be_hidden()
    box = root.locator('[data-role="solution-box"]')
    expect(box).to_be_hidden()
    root.locator('button[data-role="solution"]').click()
    expect(box).to_be_visible()
    expect(box).to_contain_text("You opened the solution")
    wait_until(page, "id => JSON.parse(localStorage.getItem('course-exercises-v1'))[id].solution !== undefined",
               exercise_id, "the solution's opening is recorded")
