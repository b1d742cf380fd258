#!/usr/bin/env bash
# README command 2: set everything up (with the test requirements), make sure Debian's
# Chromium is installed, and run every test: pylib, the builder, and the browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
  echo "test: installing Debian's chromium"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
scripts/setup.sh --test
# One pytest process per core (pytest-xdist); each test module stays on one process, so a chapter's
# browser tests share one loaded page. TEST_WORKERS=0 runs everything in this process.
workers="${TEST_WORKERS:-$(nproc)}"
if [ "$workers" -gt 0 ]; then
  exec .venv/bin/python -m pytest -n "$workers" --dist loadfile "$@"
fi
exec .venv/bin/python -m pytest "$@"
