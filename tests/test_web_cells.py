"""pylib.web.cells in CPython: the editable cells' runner (compile, errors, output, stop) and drivers.

The browser tests (tests/browser/test_cells.py) run the same code in the page's PyScript worker."""

import inspect
import sys
import textwrap

import numpy as np
import pytest

from pylib import optim
from pylib.web import cell_drivers, cells


@pytest.fixture(scope="module")
def corpus(shared_corpus):
    return shared_corpus


def source(name):
    module, attr = cells.resolve(name)
    return textwrap.dedent(inspect.getsource(getattr(module, attr)))


def run(name, code, corpus=None):
    out = []
    r = cells.run(name, code, lambda text, stream: out.append((stream, text)), corpus)
    return r, "".join(t for s, t in out if s == "out"), "".join(t for s, t in out if s == "err")


def test_every_cell_names_a_pylib_function_and_says_what_run_does():
    for name, cell in cells.CELLS.items():
        module, attr = cells.resolve(name)
        assert callable(getattr(module, attr)) and cell.target == name
        assert cell.summary.startswith("Run ")


@pytest.mark.parametrize("name", ["pylib.systems.precision.round_to", "pylib.systems.collectives.ring_all_reduce_steps"])
def test_unedited_cells_agree_with_pylib(name):
    r, out, err = run(name, source(name))
    assert r["status"] == "done" and err == ""
    if name.endswith("round_to"):
        assert all(v["same"] == v["of"] for v in r["result"]["formats"].values())
    else:
        assert all(k["workers_agree"] and k["same_as_pylib"] for k in r["result"]["checks"])


def test_unedited_loss_cell_matches_pylib_exactly(corpus):
    r, out, _ = run("pylib.loss.cross_entropy_forward", source("pylib.loss.cross_entropy_forward"), corpus)
    assert r["status"] == "done" and r["result"]["same"] is True
    assert "Every case matches pylib exactly." in out


def test_syntax_error_names_the_line_and_runs_nothing():
    code = source("pylib.systems.precision.round_to").replace('if fmt == "fp32":', 'if fmt == "fp32"')
    r, out, err = run("pylib.systems.precision.round_to", code)
    assert r["status"] == "error" and r["line"] == 3
    assert r["message"] == "SyntaxError on line 3: expected ':'."
    assert 'if fmt == "fp32"' in err and out == ""


def test_indentation_error_is_reported_the_same_way():
    r, _, _ = run("pylib.systems.precision.round_to", "def round_to(x, fmt):\nreturn x\n")
    assert r["status"] == "error" and r["message"].startswith("IndentationError on line 2: expected an indented block")


def test_runtime_error_names_the_cells_line_and_shows_its_traceback():
    code = source("pylib.systems.precision.round_to").replace("    _layout(fmt)\n", "    _layout(fmt)\n    x = 1 / 0\n")
    r, _, err = run("pylib.systems.precision.round_to", code)
    assert r["status"] == "error" and r["line"] == 6
    assert r["message"] == "ZeroDivisionError (line 6 of the cell): division by zero"
    assert 'File "<cell>", line 6, in round_to' in err and "x = 1 / 0" in err
    assert "cells.py" not in err.split('File "<cell>"')[0]  # the runner's own frames are left out


def test_code_without_the_function_is_refused_with_a_sentence():
    r, out, err = run("pylib.systems.precision.round_to", "print('hello')\n")
    assert r["status"] == "error" and r["message"] == "The cell must define a function called round_to (it is what Run uses)."
    assert out == "hello\n"


def test_keyboard_interrupt_is_a_stop_and_restores_the_patched_function(corpus, monkeypatch):
    original = optim.adamw_step
    code = source("pylib.optim.adamw_step").replace('    state["t"] += 1\n',
                                                      '    state["t"] += 1\n    raise KeyboardInterrupt\n')
    monkeypatch.setitem(cell_drivers._REFERENCE, ("pylib.optim.adamw_step", int(corpus.train.size),
                                                   cell_drivers._train_config(**cell_drivers.ADAMW_RUN)),
                        ([{"step": 0, "val": 4.0}], None))
    r, _, err = run("pylib.optim.adamw_step", code, corpus)
    assert r["status"] == "stopped" and "Stopped by the reader." in err
    assert optim.adamw_step is original


def test_output_is_throttled_and_limited(monkeypatch):
    monkeypatch.setattr(cells, "OUTPUT_LIMIT", 1000)
    code = "for i in range(10_000):\n    print(i)\n" + source("pylib.systems.precision.round_to")
    pieces = []
    r = cells.run("pylib.systems.precision.round_to", code, lambda text, stream: pieces.append((stream, text)))
    assert r["status"] == "done"
    out = "".join(t for s, t in pieces if s == "out")
    assert len(out) == 1000 and out.startswith("0\n1\n2\n")
    assert "characters of output were not shown" in pieces[-1][1]
    assert len(pieces) < 100  # sent in pieces, not one message per print
    assert not isinstance(sys.stdout, cells.CellOutput)  # restored


def test_zero_learning_rate_leaves_the_loss_where_it_was_while_pylibs_lowers_it(corpus):
    name = "pylib.optim.adamw_step"
    code = source(name).replace('    state["t"] += 1\n', '    state["t"] += 1\n    lr = 0.0 * lr\n')
    r, out, _ = run(name, code, corpus)
    assert r["status"] == "done", r["message"]
    res = r["result"]
    assert len({row["val"] for row in res["yours"]}) == 1 and res["yours_change"] == 0.0
    assert res["reference_change"] < -0.5
    assert optim.adamw_step.__code__.co_filename.endswith("optim.py")  # restored


def test_unedited_adamw_trains_exactly_like_pylib(corpus):
    name = "pylib.optim.adamw_step"
    r, _, _ = run(name, source(name), corpus)
    assert r["status"] == "done"
    assert r["result"]["yours"] == r["result"]["reference"]


def test_result_is_strict_json():
    assert cells._jsonable({"a": [float("nan"), 1.0, np.inf.__float__()]}) == {"a": [None, 1.0, None]}


# ---------------------------------------------------------------------------
# build.py's editable(name): the cell shows exactly what code(name) shows


def test_editable_renders_the_code_blocks_source_as_a_cell(tmp_path):
    import html
    import re

    import build

    page = tmp_path / "01-cell.md"
    page.write_text('# Cell\n\n{{ code("pylib.systems.precision.round_to") }}\n\n'
                    '{{ editable("pylib.systems.precision.round_to") }}\n')
    out = build.render_chapter(build.make_env(), build.Chapter(1, "01-cell", "Cell", page), {"values": {}})
    static_blocks = re.findall(r'<div class="highlight">.*?</div>', out, re.S)
    assert len(static_blocks) == 2 and static_blocks[0] == static_blocks[1]  # the same highlighted source
    attr = re.search(r'data-source="([^"]*)"', out).group(1)
    assert html.unescape(attr) == source("pylib.systems.precision.round_to")
    assert 'data-code-cell="pylib.systems.precision.round_to"' in out
    assert cells.CELLS["pylib.systems.precision.round_to"].summary in html.unescape(out)
    assert out.count("<!--block:") == 0


def test_editable_without_a_cell_fails_the_build(tmp_path):
    import build

    page = tmp_path / "01-cell.md"
    page.write_text('# Cell\n\n{{ editable("pylib.optim.sgd_step") }}\n')
    with pytest.raises(build.BuildError, match=r"editable\('pylib.optim.sgd_step'\): pylib.web.cells.CELLS has no cell"):
        build.render_chapter(build.make_env(), build.Chapter(1, "01-cell", "Cell", page), {"values": {}})
    page.write_text('# Cell\n\n{{ editable("pylib.optim.no_such_step") }}\n')
    with pytest.raises(build.BuildError, match="no such function"):
        build.render_chapter(build.make_env(), build.Chapter(1, "01-cell", "Cell", page), {"values": {}})
