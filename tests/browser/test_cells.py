"""The editable code cells in a real browser: PyScript's worker on the site's Pyodide, running the
reader's edited pylib function (pylib.web.cells) next to pylib's own.

Each test edits through the keyboard (select all, then type the new code), presses the buttons a
reader presses and reads what the cell shows. The chapter pages open in one browser profile with a
disk cache (the profile fixture), and like conftest's chapter fixtures they fail a test on any
console error or request leaving 127.0.0.1 (conftest.py)."""

import functools
import http.server
import inspect
import json
import re
import textwrap
import threading

import pytest
from playwright.sync_api import expect

import build
from conftest import ROOT, SITE, PageLog, chapter_url, result, settle_after, settles, wait_settled, widget
from kit_checks import screenshot_widget

TIMEOUT = 240_000  # a cold cell starts its own Python, on a machine other tests share
ENDED = ("done", "error", "stopped")


class CountingHandler(build.SiteHandler):
    """The site's handler, counting the full (200) responses it sends per path: a 304 sends no body."""
    counts = {}
    lock = threading.Lock()

    def send_response(self, code, message=None):
        if code == 200:
            with self.lock:
                self.counts[self.path] = self.counts.get(self.path, 0) + 1
        super().send_response(code, message)


@pytest.fixture(scope="module")
def profile(browser_type, tmp_path_factory):
    """A browser profile with a disk cache, as a reader's has (Chromium launched on a fresh profile
    folder), and the site served to it by CountingHandler (cross-origin isolated, as build.py serves
    it): (context, base URL). Service workers are blocked: a chapter's tests do not need the saved
    copy (test_a_cell_runs_offline_after_one_visit tests it), and saving the whole site costs each
    page seconds of CPU. The module's chapter pages all open in it, so the HTTP cache also serves
    the later pages what the earlier ones fetched, as it would a reader."""
    CountingHandler.counts = {}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(CountingHandler, directory=str(SITE)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    context = browser_type.launch_persistent_context(str(tmp_path_factory.mktemp("profile")),
                                                     executable_path=build.CHROMIUM, args=build.CHROMIUM_ARGS,
                                                     viewport={"width": 1100, "height": 1000}, service_workers="block")
    yield context, f"http://127.0.0.1:{server.server_port}/"
    context.close()
    server.shutdown()
    server.server_close()


def cells_chapter_fixture(slug_prefix, widgets=False):
    """A module-scoped fixture like conftest's chapter_fixture (the chapter loaded once, its console and
    off-host requests in page.log, checked after every test), opened in the module's profile;
    page.off_server lists any request that went anywhere but the profile's server. With widgets, the
    page's widgets start their Python (waited for: html[data-pyodide=ready]); without, their worker is
    one that never starts (no_widget_python), as a test of the cells alone needs: loading the widgets'
    Python and running their defaults cost a chapter seconds of CPU."""

    @pytest.fixture(scope="module")
    def chapter(profile):
        context, base = profile
        page = context.new_page()
        page.log = PageLog(page)
        page.off_server = []
        page.on("request", lambda r: page.off_server.append(r.url) if not r.url.startswith(
            (base, "blob:", "data:")) else None)
        if not widgets:
            no_widget_python(page)
        page.goto(chapter_url(base, slug_prefix))
        if widgets:
            try:
                page.wait_for_selector("html[data-pyodide=ready], html[data-pyodide=error]", timeout=60_000)
            except Exception:
                print("\n".join(page.log.console))
                raise
        yield page
        page.close()

    return chapter


chapter3 = cells_chapter_fixture("03-")
chapter5 = cells_chapter_fixture("05-")
chapter6 = cells_chapter_fixture("06-")
chapter9 = cells_chapter_fixture("09-", widgets=True)  # its tests also use the rounding widget
chapter11 = cells_chapter_fixture("11-")


def pylib_source(name):
    """The source the cell must show: what build.py's code(name) shows, from the pylib on disk."""
    from pylib.web import cells
    module, attr = cells.resolve(name)
    return textwrap.dedent(inspect.getsource(getattr(module, attr)))


def cell(page, name):
    """The cell for pylib function name, scrolled to and mounted (its editor is up)."""
    c = page.locator(f'[data-code-cell="{name}"]')
    c.scroll_into_view_if_needed()
    expect(c).to_have_attribute("data-mounted", "true", timeout=60_000)
    return c


def code_of(c):
    return c.evaluate("el => el.cellCode()")


def type_code(c, code):
    """Replace the editor's text as a reader would: click into it, select all, type."""
    c.locator(".cm-content").click()
    c.page.keyboard.press("Control+a")
    c.page.keyboard.insert_text(code)
    assert code_of(c) == code


def paste_code(c, code):
    """Replace the editor's text as a reader pasting it would: click into it, select all, Ctrl+V from
    the browser's clipboard (written with the clipboard permission granted). Typing 115k characters
    through the keyboard took 21 s here; a paste takes a quarter of a second, and is how such text comes."""
    c.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    c.locator(".cm-content").click()
    c.page.evaluate("text => navigator.clipboard.writeText(text)", code)
    c.page.keyboard.press("Control+a")
    c.page.keyboard.press("Control+v")
    assert code_of(c) == code


def run(c, timeout=TIMEOUT):
    """Press Run and wait for that run to end (the cell's data-settles moves on; its status, read
    at once, could still be the last run's); returns the cell's data-status."""
    return settle_after(c, lambda: c.get_by_role("button", name="Run").click(), ENDED, timeout=timeout)


def start_running(c):
    """Press Run and wait until the code is running; returns settles(c) from before the press."""
    before = settles(c)
    c.get_by_role("button", name="Run").click()
    expect(c).to_have_attribute("data-status", "running", timeout=TIMEOUT)
    return before


def stop(c, before):
    """Press Stop and wait for the run pressed after settles() count `before` to end; returns its status."""
    c.get_by_role("button", name="Stop").click()
    return wait_settled(c, ENDED, timeout=30_000, after=before)


def run_and_stop(c):
    """Press Run, wait until the code is running, press Stop; returns the status it ends in."""
    return stop(c, start_running(c))


def status_text(c):
    return c.locator('[data-role="status"]').inner_text()


def output(c):
    return c.get_by_role("region", name=re.compile("^Output of")).inner_text()


def edited(name, old, new):
    source = pylib_source(name)
    assert source.count(old) == 1, f"{old!r} is not in {name}'s source any more: update the test"
    return source.replace(old, new)


# ---------------------------------------------------------------------------
# What a cell shows, and its keyboard and screen-reader parts

ROUND = "pylib.systems.precision.round_to"


def test_cell_shows_pylibs_own_source_with_named_controls(chapter9):
    c = cell(chapter9, ROUND)
    assert code_of(c) == pylib_source(ROUND).rstrip("\n")
    for name in ("Run", "Stop", "Reset"):
        expect(c.get_by_role("button", name=name)).to_be_visible()
    expect(c.get_by_role("button", name="Stop")).to_be_disabled()
    editor = c.get_by_role("textbox", name="Code of round_to, editable")
    expect(editor).to_be_visible()
    assert "Tab moves on to the next control" in c.locator('[data-role="keys"]').inner_text()
    # The static block is the no-JavaScript view: the same code, hidden once the editor is up.
    assert c.locator('[data-role="static"]').inner_text().strip() == pylib_source(ROUND).strip()
    expect(c.locator('[data-role="static"]')).to_be_hidden()


def test_tab_leaves_the_editor_and_ctrl_brackets_indent_and_unindent(chapter9):
    """Tab moves focus on, as everywhere on the page (a keyboard reader is never trapped in a cell);
    indentation is Ctrl+] and Ctrl+[, and Enter keeps the line's indentation."""
    page = chapter9
    c = cell(page, ROUND)
    c.locator(".cm-content").click()
    page.keyboard.press("Control+Home")
    page.keyboard.press("Control+BracketRight")
    assert code_of(c).startswith("    def round_to"), "Ctrl+] should indent the line"
    page.keyboard.press("Control+BracketLeft")
    assert code_of(c).startswith("def round_to"), "Ctrl+[ should un-indent it"
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("x = 1")
    assert "\n    x = 1\n" in code_of(c), "Enter after a def line should indent the new line"
    assert page.evaluate("document.activeElement.classList.contains('cm-content')")
    page.keyboard.press("Tab")
    assert not page.evaluate("document.activeElement.closest('.cm-editor')"), "Tab must leave the editor"
    assert "    def round_to" not in code_of(c) and "\tdef" not in code_of(c)  # and insert nothing
    c.get_by_role("button", name="Reset").click()
    assert code_of(c) == pylib_source(ROUND).rstrip("\n")


def test_the_editor_shows_its_focus_ring_in_the_same_task_as_it_takes_focus(chapter9):
    """CodeMirror marks the editor .cm-focused a few ms after its text takes focus; the ring must not
    wait for that (test_a11y's Tab walk read it in between once). Read in the task that focuses."""
    c = cell(chapter9, ROUND)
    ring = c.evaluate("""el => {
        el.querySelector(".cm-content").focus();
        const s = getComputedStyle(el.querySelector(".cm-editor"));
        return [s.outlineStyle, parseFloat(s.outlineWidth)];
    }""")
    chapter9.evaluate("document.activeElement.blur()")
    assert ring[0] == "solid" and ring[1] >= 2, ring


def test_editor_follows_the_theme_through_the_sites_colours(chapter9):
    page = chapter9
    c = cell(page, ROUND)
    for theme in ("light", "dark"):
        page.evaluate("t => { document.documentElement.dataset.theme = t; }", theme)
        colours = c.locator(".cm-editor").evaluate("""el => {
            const probe = document.createElement('span');
            probe.style.color = 'var(--surface, var(--panel))';
            document.body.append(probe);
            const want = getComputedStyle(probe).color;
            probe.style.color = 'var(--fg, var(--text))';
            const fg = getComputedStyle(probe).color;
            probe.remove();
            const s = getComputedStyle(el);
            return {background: s.backgroundColor, want, color: s.color, fg};
        }""")
        assert colours["background"] == colours["want"] and colours["color"] == colours["fg"], (theme, colours)
    page.evaluate("document.documentElement.dataset.theme = 'light'")


# ---------------------------------------------------------------------------
# Edit, run, errors, Reset


def cell_axe_violations(page):
    """axe's serious and critical violations inside the page's code cells (axe-core, added once)."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(ROOT / "node_modules" / "axe-core" / "axe.min.js"))
    return page.evaluate("""async () => {
        // The code's token colours are site.css's Pygments palette, shared with every static code
        // block and checked on every page by the site-wide axe test; the rest of the cell is here.
        const r = await axe.run({include: ['[data-code-cell]'], exclude: ['.cm-line span']},
                                {resultTypes: ['violations']});
        return r.violations.filter(v => ['serious', 'critical'].includes(v.impact))
            .map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join(', '));
    }""")


def test_edit_run_and_see_the_output_with_no_serious_accessibility_violations_before_and_after(chapter9):
    """An edited round_to runs and its output shows the edit; axe finds no serious or critical
    violation in the cell before the run (editor only) nor after it (status and output shown)."""
    page = chapter9
    c = cell(page, ROUND)
    found = cell_axe_violations(page)
    assert not found, "before a run:\n" + "\n".join(found)
    code = edited(ROUND, "    r &= np.uint32(1)  # the kept LSB: ties go to even\n",
                  "    r &= np.uint32(0)  # edited: a tie always rounds towards zero\n")
    code = code.replace('"""\n', '"""\n    print("my round_to", fmt)\n', 1)
    type_code(c, code)
    assert run(c) == "done"
    text = output(c)
    assert "my round_to bf16" in text
    # 1 + 3 * 2^-8 is a bfloat16 tie: pylib rounds it to the even 1.015625, the edit down to
    # 1.0078125, and the table marks the difference with *
    row = next(line for line in text.splitlines() if line.strip().startswith("1.0117188"))
    assert row.split()[1] == "1.00781*"
    r = json.loads(c.get_attribute("data-result"))
    assert set(r["formats"]) == {"bf16", "fp16", "fp8_e4m3", "fp8_e5m2"}
    assert status_text(c).startswith("Finished in")
    found = cell_axe_violations(page)
    assert not found, "after a run:\n" + "\n".join(found)


def test_syntax_error_names_the_line_and_nothing_runs(chapter9):
    c = cell(chapter9, ROUND)
    type_code(c, edited(ROUND, '    if fmt == "fp32":\n', '    if fmt == "fp32"\n'))
    assert run(c) == "error"
    assert status_text(c) == "Error: SyntaxError on line 3: expected ':'."
    text = output(c)
    assert 'if fmt == "fp32"' in text and "^" in text
    assert "bfloat16" not in text  # the driver never ran


def test_runtime_error_says_where_in_the_cell(chapter9):
    c = cell(chapter9, ROUND)
    type_code(c, edited(ROUND, '    _layout(fmt)\n', '    _layout(fmt)\n    x = 1 / 0\n'))
    assert run(c) == "error"
    assert status_text(c) == "Error: ZeroDivisionError (line 6 of the cell): division by zero"
    assert 'File "<cell>", line 6, in round_to' in output(c)


def test_output_is_text_never_markup(chapter9):
    page = chapter9
    c = cell(page, ROUND)
    type_code(c, edited(ROUND, '"""\n', '"""\n    print("<img src=x onerror=alert(1)><b class=injected>hi</b>")\n'
                                         '    import sys; print("<b class=injected>err</b>", file=sys.stderr)\n'))
    assert run(c) == "done"
    assert "<b class=injected>hi</b>" in output(c)
    assert page.locator("[data-code-cell] b.injected, [data-code-cell] img[src='x']").count() == 0


# ---------------------------------------------------------------------------
# A runaway loop is stopped; the page keeps working


def rounding_widget_works(page, raw="0.1"):
    """The page's rounding calculator (the widgets' own worker) still answers."""
    w = widget(page, "rounding")
    w.locator('input[name="value"]').fill(raw)
    assert settle_after(w, lambda: w.locator('[data-action="run"]').click(), ("done", "error")) == "done"
    assert result(w)["value"] == float(raw)
    return result(w)


def test_infinite_loop_is_stopped_the_page_keeps_working_and_reset_restores_pylibs_code(chapter9):
    """A while-True loop is stopped by Stop while a widget still answers; then Reset puts pylib's code
    back (and says so), and it is pylib's code that runs: every result the same as pylib's."""
    page = chapter9
    isolated = page.evaluate("crossOriginIsolated")
    c = cell(page, ROUND)
    type_code(c, "while True:\n    pass\n")
    before = start_running(c)
    page.wait_for_timeout(1000)
    assert c.get_attribute("data-status") == "running"
    assert rounding_widget_works(page, "65519")["formats"]  # a widget runs while the cell loops
    assert stop(c, before) == "stopped"
    # Cross-origin isolated, the interrupt stops the loop and Python stays up; otherwise it is restarted.
    assert status_text(c) == ("Stopped." if isolated else "Stopped (Python was restarted).")
    if isolated:
        assert "KeyboardInterrupt" not in output(c) and "Stopped by the reader." in output(c)
    assert rounding_widget_works(page, "0.1")["formats"]
    c.get_by_role("button", name="Reset").click()
    assert code_of(c) == pylib_source(ROUND).rstrip("\n")
    assert status_text(c) == "The code is pylib's again."
    assert run(c) == "done"  # the cell runs again, and it is pylib's code that runs
    assert all(v["same"] == v["of"] for v in json.loads(c.get_attribute("data-result"))["formats"].values())


def test_code_that_ignores_the_interrupt_is_stopped_by_restarting_python_and_pyodide_is_downloaded_once(chapter9):
    """Code that never checks for the interrupt (one C call) is stopped by restarting the cells'
    Python; a widget still answers and the cell runs again. And in the profile's disk cache the
    cells' worker loads pyodide.asm.wasm from the same URL as the widgets' worker, so the server has
    sent it once for the page, also after Stop restarted the cells' Python (a second start). This is
    the HTTP cache's part: with the site's service worker, both workers' requests are answered from
    its copy."""
    page = chapter9
    c = cell(page, ROUND)
    type_code(c, "sum(range(10**15))  # one C call: Python never checks for the interrupt inside it\n")
    assert run_and_stop(c) == "stopped"
    assert status_text(c) == "Stopped (Python was restarted)."
    assert rounding_widget_works(page, "3e-8")["formats"]
    c.get_by_role("button", name="Reset").click()
    assert run(c) == "done"
    wasm = {p: n for p, n in CountingHandler.counts.items() if p.endswith("pyodide.asm.wasm")}
    assert wasm == {"/pyodide/pyodide.asm.wasm": 1}, wasm
    assert page.off_server == []


# ---------------------------------------------------------------------------
# The optimiser and schedule cells train the course model with the edited function

ADAMW = "pylib.optim.adamw_step"


def test_adamw_cell_trains_unedited_like_pylib_and_edited_with_zero_rate_not_at_all(chapter5):
    c = cell(chapter5, ADAMW)
    assert run(c) == "done"
    r = json.loads(c.get_attribute("data-result"))
    assert r["yours"] == r["reference"], "the unedited function must train exactly as pylib's does"
    assert r["reference_change"] < -0.5  # pylib's AdamW lowers the validation loss
    assert "Validation loss from step 0" in output(c)

    type_code(c, edited(ADAMW, '    state["t"] += 1\n', '    state["t"] += 1\n    lr = 0.0 * lr  # edited\n'))
    assert run(c) == "done"
    r = json.loads(c.get_attribute("data-result"))
    vals = [row["val"] for row in r["yours"]]
    assert len(set(vals)) == 1, f"a zero learning rate must leave the loss where it started: {vals}"
    assert r["yours_change"] == 0.0 and r["reference_change"] < -0.5
    assert r["yours"][0]["val"] == r["reference"][0]["val"]  # the same model at step 0
    yours_line = output(c).splitlines()[-2]
    assert re.fullmatch(r"  yours   ([0-9.]+) → \1  \(change \+0\.0000\)", yours_line), yours_line


SCHEDULE = "pylib.schedules.wsd_lr"


def test_schedule_cell_trains_with_the_edited_schedule(chapter6):
    from pylib import train
    c = cell(chapter6, SCHEDULE)
    type_code(c, edited(SCHEDULE, "    if step < warmup_steps:\n",
                        "    return max_lr  # edited: no warmup, no decay\n    if step < warmup_steps:\n"))
    assert run(c) == "done"
    r = json.loads(c.get_attribute("data-result"))
    peak = train.TrainConfig().lr  # the cell's run keeps the default peak rate
    assert all(row["lr"] == pytest.approx(peak) for row in r["yours"])
    assert r["reference"][0]["lr"] < peak / 5  # pylib's warms up from a small rate
    assert r["yours"][1]["val"] != r["reference"][1]["val"]  # and the loss curve shows the difference
    assert "lr: yours" in output(c)


# ---------------------------------------------------------------------------
# The other cells run against the live pylib and agree with it unedited


def test_loss_cell_matches_pylib_unedited(chapter3):
    c = cell(chapter3, "pylib.loss.cross_entropy_forward")
    assert run(c) == "done"
    r = json.loads(c.get_attribute("data-result"))
    assert r["same"] is True and len(r["cases"]) == 3
    assert "Every case matches pylib exactly." in output(c)


def test_ring_cell_matches_pylib_unedited(chapter11):
    c = cell(chapter11, "pylib.systems.collectives.ring_all_reduce_steps")
    assert run(c) == "done"
    checks = json.loads(c.get_attribute("data-result"))["checks"]
    assert all(k["workers_agree"] and k["same_as_pylib"] and k["steps"] == 2 * (k["workers"] - 1) for k in checks)
    assert "the sum: 111 222 333 444 555 666" in output(c)


# ---------------------------------------------------------------------------
# Saved edits: a cell's edit is kept in this browser until Reset (cells.js, "Saved edits")

SAVED_NOTE = "Your edit, saved in this browser; Reset restores the original."
UNSAVED_NOTE = re.compile(r"^Your edit could not be saved in this browser \(its storage is full or turned off\)")


@pytest.fixture(scope="module")
def fresh_site(fresh_context):
    """A fresh context (its own, empty localStorage: the module's profile holds the other tests'
    edits) and the site's URL. Each test empties the storage first."""
    return fresh_context


# The widgets' Python worker, answered by one that never starts: editing a cell needs no Python, and
# the cells run in a worker of their own (PyScript's), so these pages skip loading the widgets' Python.
NO_WIDGET_PYTHON = "self.addEventListener('message', () => {});"


def no_widget_python(page):
    """The page's widgets get a Python worker that never starts (NO_WIDGET_PYTHON)."""
    page.route("**/static/js/worker.js", lambda route: route.fulfill(  # COEP: the page is cross-origin isolated
        status=200, content_type="text/javascript", headers={"Cross-Origin-Embedder-Policy": "require-corp"},
        body=NO_WIDGET_PYTHON))


def new_page(fresh_site):
    page = fresh_site[0].new_page()
    page.log = PageLog(page)
    no_widget_python(page)
    return page


def open_chapter9(fresh_site, init_script=None):
    """Chapter 9 in a new page of fresh_site's context (the widgets' Python never starts), its storage
    emptied first (on the glossary, a page of the same origin with no cell); init_script runs in the
    chapter before the page's own."""
    context, url = fresh_site
    page = new_page(fresh_site)
    page.goto(url + "glossary.html")
    page.evaluate("localStorage.clear()")
    if init_script:
        page.add_init_script(init_script)
    page.goto(chapter_url(url, "09-"))
    return page


def saved_key(page, c):
    return c.evaluate("""el => {
        const site = new URL(document.documentElement.dataset.siteRoot || './', document.baseURI).pathname;
        return 'course-cell-edit:' + location.pathname.slice(site.length) + '#' + el.id;
    }""")


def stored(page, key):
    return page.evaluate("k => localStorage.getItem(k)", key)


def note(c):
    return c.locator('[data-role="saved"]')


def test_an_edit_survives_a_reload_until_reset_even_enormous_and_with_emoji(fresh_site):
    """An edit is back after a reload, with the note saying so; enormous pasted text and emoji (astral,
    joined, flags, combining marks) come back character for character; Reset puts pylib's code back,
    forgets the edit, and a reload then shows pylib's code with no note."""
    page = open_chapter9(fresh_site)
    original = pylib_source(ROUND).rstrip("\n")
    c = cell(page, ROUND)
    expect(note(c)).to_be_hidden()
    filler = "".join(f"# {i:06d} 🦜 👩‍👩‍👧‍👦 🇬🇧 𝔘 é ñ ∑ 漢字 {'x' * 40}\n" for i in range(1500))  # ~115k characters
    code = edited(ROUND, '"""\n', '"""\n    print("kept 🦜 e\u0301", fmt)\n') + "\n" + filler
    assert len(code) > 100_000
    paste_code(c, code)
    expect(c).to_have_attribute("data-saved", "saved")
    expect(note(c)).to_have_text(SAVED_NOTE)
    key = saved_key(page, c)
    assert json.loads(stored(page, key))["code"] == code

    page.reload()
    c = cell(page, ROUND)
    assert code_of(c) == code
    expect(note(c)).to_be_visible()
    expect(note(c)).to_have_text(SAVED_NOTE)
    assert c.get_attribute("data-saved") == "saved"
    # the editor names the note to a screen reader
    described = c.locator(".cm-content").get_attribute("aria-describedby").split()
    assert note(c).get_attribute("id") in described

    c.get_by_role("button", name="Reset").click()
    assert code_of(c) == original
    expect(note(c)).to_be_hidden()
    assert stored(page, key) is None
    page.reload()
    c = cell(page, ROUND)
    assert code_of(c) == original
    expect(note(c)).to_be_hidden()
    assert c.get_attribute("data-saved") is None
    assert page.log.problems() == []
    page.close()


def test_an_edit_typed_just_before_leaving_is_saved_and_undoing_it_forgets_it(fresh_site):
    """A reload straight after typing (before the save's pause) keeps the edit: it is saved as the page
    is left. Editing the code back to pylib's own forgets the saved edit and hides the note."""
    page = open_chapter9(fresh_site)
    original = pylib_source(ROUND).rstrip("\n")
    c = cell(page, ROUND)
    code = edited(ROUND, '"""\n', '"""\n    print("quick", fmt)\n')
    type_code(c, code)
    page.reload()
    c = cell(page, ROUND)
    assert code_of(c) == code
    expect(note(c)).to_have_text(SAVED_NOTE)
    type_code(c, original)
    expect(note(c)).to_be_hidden()
    assert stored(page, saved_key(page, c)) is None
    assert page.log.problems() == []
    page.close()


def test_an_edit_saved_for_another_original_is_not_restored(fresh_site):
    """A saved edit whose original is not the code this build's cell shows (a later build changed the
    cell) is not put back: the cell shows pylib's code, no note, and the stale entry is removed.
    An entry that is not JSON is dropped the same way."""
    context, url = fresh_site
    page = open_chapter9(fresh_site)
    c = cell(page, ROUND)
    key = saved_key(page, c)
    page.close()
    for stale in (json.dumps({"source": "an-older-original", "code": "print('a stale edit')\n"}), "not json {"):
        page = new_page(fresh_site)
        page.goto(url + "glossary.html")
        page.evaluate("([k, v]) => { localStorage.clear(); localStorage.setItem(k, v); }", [key, stale])
        page.goto(chapter_url(url, "09-"))
        c = cell(page, ROUND)
        assert code_of(c) == pylib_source(ROUND).rstrip("\n"), stale
        expect(note(c)).to_be_hidden()
        assert stored(page, key) is None, stale
        assert page.log.problems() == []
        page.close()


STORAGE_FULL = """
    Storage.prototype.setItem = function () {
        throw new DOMException("The quota has been exceeded.", "QuotaExceededError");
    };
"""
STORAGE_BLOCKED = """
    for (const name of ["getItem", "setItem", "removeItem", "clear", "key"]) {
        Storage.prototype[name] = function () {
            throw new DOMException("Access is denied for this document.", "SecurityError");
        };
    }
"""


@pytest.mark.parametrize("storage", ["full", "blocked"])
def test_storage_that_throws_keeps_the_cell_working_and_says_the_edit_is_not_saved(fresh_site, storage):
    """With localStorage full (setItem throws) or blocked (every call throws), the cell mounts, takes the
    edit, says it could not be saved, and (full) runs the edited code; a reload shows pylib's code."""
    page = open_chapter9(fresh_site, STORAGE_FULL if storage == "full" else STORAGE_BLOCKED)
    c = cell(page, ROUND)
    expect(note(c)).to_be_hidden()
    code = edited(ROUND, '"""\n', '"""\n    print("unsaved 🦜", fmt)\n')
    type_code(c, code)
    expect(c).to_have_attribute("data-saved", "unsaved")
    expect(note(c)).to_have_text(UNSAVED_NOTE)
    assert code_of(c) == code
    if storage == "full":
        assert run(c) == "done"
        assert "unsaved 🦜 bf16" in output(c)
        screenshot_widget(c, "cell-unsaved")
    c.get_by_role("button", name="Reset").click()
    expect(note(c)).to_be_hidden()
    assert code_of(c) == pylib_source(ROUND).rstrip("\n")
    type_code(c, code)
    page.reload()
    c = cell(page, ROUND)
    assert code_of(c) == pylib_source(ROUND).rstrip("\n")
    expect(note(c)).to_be_hidden()
    assert page.log.problems() == []
    page.close()


def test_the_saved_note_fits_and_reads_at_a_phones_width(fresh_site):
    """The cell with its saved note, photographed at 1280 and 360 px (nothing sticks out)."""
    page = open_chapter9(fresh_site)
    c = cell(page, ROUND)
    type_code(c, edited(ROUND, '"""\n', '"""\n    print("saved", fmt)\n'))
    expect(note(c)).to_have_text(SAVED_NOTE)
    screenshot_widget(c, "cell-saved")
    c.get_by_role("button", name="Reset").click()
    page.close()


# ---------------------------------------------------------------------------
# Without cross-origin isolation (a static host without the headers, before the service worker
# adds them): PyScript's worker still runs, and Stop restarts Python


class NotIsolatedHandler(build.SiteHandler):
    def end_headers(self):
        http.server.SimpleHTTPRequestHandler.end_headers(self)  # no COOP/COEP headers


def wait_for_python(page, log, timeout=TIMEOUT):
    """Wait for the page's Python to be ready; if it is not (it failed, or is still loading after
    `timeout`), fail at once with its state, the page's error line and its console."""
    try:
        page.wait_for_selector("html[data-pyodide=ready], html[data-pyodide=error]", timeout=timeout)
    except Exception:
        pass  # reported below, with what the page showed
    state, shown = page.evaluate("""[document.documentElement.dataset.pyodide ?? null,
        document.querySelector('[data-role="page-error"]')?.textContent ?? '']""")
    if state != "ready":
        pytest.fail(f"the page's Python is {state!r}, not ready; the page says {shown!r}; its console:\n"
                    + "\n".join(log.console), pytrace=False)


def test_cells_run_and_stop_without_cross_origin_isolation(browser):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(NotIsolatedHandler, directory=str(SITE)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    context = browser.new_context(viewport={"width": 1100, "height": 1000}, service_workers="block")
    try:
        page = context.new_page()
        log = PageLog(page)
        page.goto(chapter_url(f"http://127.0.0.1:{server.server_port}/", "09-"))
        wait_for_python(page, log)
        assert page.evaluate("crossOriginIsolated") is False
        c = cell(page, ROUND)
        type_code(c, edited(ROUND, '"""\n', '"""\n    print("not isolated", fmt)\n'))
        assert run(c) == "done"
        assert "not isolated fp8_e5m2" in output(c)
        type_code(c, "while True:\n    pass\n")
        assert run_and_stop(c) == "stopped"
        assert status_text(c) == "Stopped (Python was restarted)."
        assert rounding_widget_works(page, "1e-7")["formats"]
        c.get_by_role("button", name="Reset").click()
        assert run(c) == "done"
        assert log.problems() == []
    finally:
        context.close()
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------------
# Offline: after one visit, a cell runs with the server gone (the site's service worker answers the
# cells' worker as it answers the page)


def test_a_cell_runs_offline_after_one_visit(browser):
    """One visit to a page of the site (the glossary: it has no widget, so its Python does not start
    and it saves the site at once), then, with the server gone, chapter 9's cell runs."""
    url, server = build.serve_in_thread(SITE)
    context = browser.new_context(viewport={"width": 1100, "height": 1000})
    try:
        page = context.new_page()
        log = PageLog(page)
        page.goto(url + "glossary.html")
        page.wait_for_selector("html[data-offline=ready]", timeout=TIMEOUT)
        server.shutdown()
        server.server_close()
        page.goto(chapter_url(url, "09-"))
        c = cell(page, ROUND)
        type_code(c, edited(ROUND, '"""\n', '"""\n    print("offline", fmt)\n'))
        assert run(c) == "done"
        assert "offline bf16" in output(c)
        assert log.problems() == []
    finally:
        context.close()
        server.shutdown()
