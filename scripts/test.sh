#!/usr/bin/env bash
# README command 2: set everything up (with the test requirements), make sure Debian's
# Chromium is installed, and run every test: pylib, the builder, and the browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache
# Debian's Chromium, if missing, installs in the background while the rest is set up (the two need
# nothing of each other; on a fresh machine each takes a minute or more).
chromium_pid=""
if [ ! -x /usr/bin/chromium ]; then
  echo "test: installing Debian's chromium (in the background; log: .cache/chromium-install.log)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  ( $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium ) \
    > .cache/chromium-install.log 2>&1 &
  chromium_pid=$!
fi
if ! scripts/setup.sh --test; then
  [ -z "$chromium_pid" ] || wait "$chromium_pid" || true
  exit 1
fi
if [ -n "$chromium_pid" ]; then
  if ! wait "$chromium_pid" || [ ! -x /usr/bin/chromium ]; then
    echo "test: installing Debian's chromium failed:" >&2
    cat .cache/chromium-install.log >&2
    exit 1
  fi
  echo "test: chromium installed"
fi
echo "test: set-up took ${SECONDS} s"
# One pytest process per core (pytest-xdist). Each module's tests stay on one process (so a chapter's
# browser tests share one loaded page), except the accessibility visits, one group per page: the
# scheduler that does so is in tests/conftest.py. TEST_WORKERS=0 runs everything in this process.
workers="${TEST_WORKERS:-$(nproc)}"
if [ "$workers" -gt 0 ]; then
  exec .venv/bin/python -m pytest -n "$workers" "$@"
fi
exec .venv/bin/python -m pytest "$@"
