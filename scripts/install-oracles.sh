#!/usr/bin/env bash
# The account oracle's readers (tests/oracle/readers/*/install.sh: Django and
# DRF from PyPI, Spring Security and Jackson from Maven Central, Express and
# passport-local from npm, Rack/Rails and Devise from Debian) and MariaDB
# (Debian), each pinned, each idempotent: quick once installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for install in "$ROOT"/tests/oracle/readers/*/install.sh; do
  start=$(date +%s)
  bash "$install"
  echo "install-oracles: $(basename "$(dirname "$install")") ready ($(( $(date +%s) - start ))s)"
done
# MariaDB's collations (Debian), and DUCET 9.0.0 for MySQL 8's (PyPI pyuca).
"$ROOT/scripts/install-mariadb.sh"
"$ROOT/.venv/bin/python" -c 'import pyuca' 2>/dev/null \
  || "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check pyuca==1.2
