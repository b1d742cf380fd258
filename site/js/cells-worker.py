# The editable cells' worker program, run by PyScript's PyWorker (site/js/cells.js) on the site's own
# Pyodide. Everything a cell does is pylib.web.cells; this file only connects it to the page:
#   install(wheel_url)                  loads NumPy from the site's pyodide/ folder (by Pyodide's lock)
#                                       and unpacks the site's pylib wheel into site-packages (once)
#   run(name, code, data_url) -> JSON   pylib.web.cells.run_in_page
#   check(exercise_id, answer, data_url) -> JSON   pylib.web.cells.check_in_page (an exercise's check)
#   set_interrupt(int32 array on a SharedArrayBuffer)   Stop writes 2 (SIGINT) into it
# Output goes to the page through cell_output(text, stream), which cells.js defines.

from pyscript import sync

cells = None  # pylib.web.cells, once install() has run


async def install(wheel_url):
    global cells
    import importlib
    import io
    import site
    import zipfile

    import pyodide_js
    from pyodide.http import pyfetch

    problems = []
    await pyodide_js.loadPackage("numpy", messageCallback=lambda message: None, errorCallback=problems.append)
    if problems:  # e.g. a wheel whose sha256 does not match the lock: Pyodide only reports it here
        raise ImportError("NumPy could not be loaded: " + "; ".join(problems))
    response = await pyfetch(wheel_url)
    if not response.ok:
        raise OSError(f"could not fetch the pylib wheel (HTTP {response.status})")
    # A wheel is a zip of the package as installed: pure Python, NumPy its only dependency.
    zipfile.ZipFile(io.BytesIO(await response.bytes())).extractall(site.getsitepackages()[0])
    importlib.invalidate_caches()
    from pylib.web import cells as module

    cells = module
    return True


def _emit(text, stream):
    sync.cell_output(text, stream)


async def run(name, code, data_url):
    return await cells.run_in_page(name, code, _emit, data_url)


async def check(exercise_id, answer, data_url):
    return await cells.check_in_page(exercise_id, answer, _emit, data_url)


def set_interrupt(buffer):
    import pyodide_js

    pyodide_js.setInterruptBuffer(buffer)
    return True


__export__ = ["install", "run", "check", "set_interrupt"]
