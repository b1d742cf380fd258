#!/usr/bin/env bash
# README command 1: set everything up, build, and serve the site at http://127.0.0.1:8000
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python build.py --serve --no-build --port "${PORT:-8000}"
