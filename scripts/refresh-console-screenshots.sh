#!/usr/bin/env bash
# Takes the console's screenshots again and writes them over
# docs/console/*.png (the ones docs/console.md shows). ./test.sh never does:
# a run of the suite leaves tracked files alone and writes its screenshots
# to the git-ignored target/console-screenshots/ (tests/e2e/console_app.py).
# Needs the CLI (./build.sh) and Debian's Chromium (scripts/install-chromium.sh).
# Extra arguments go to pytest (e.g. -k live).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

RATEBOUND_REFRESH_DOCS=1 .venv/bin/python -m pytest tests/e2e/test_console.py \
  -p no:cacheprovider --timeout 300 "$@"
git status --short -- docs/console
