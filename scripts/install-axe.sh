#!/usr/bin/env bash
# Installs axe-core (Deque's accessibility engine, MPL-2.0) from npm at a
# pinned version into .tools/axe-core-VERSION/ (cached; RATEBOUND_TOOLS
# moves .tools); prints the path of axe.min.js, which the console's browser
# test injects into the page (tests/e2e/test_console.py). The pin: the
# npm registry's latest release when it was added (December 2026).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="4.14.1"
tools="${RATEBOUND_TOOLS:-$ROOT/.tools}"
root="$tools/axe-core-$version"
js="$root/node_modules/axe-core/axe.min.js"
if [[ ! -s "$js" ]] || ! grep -q "\"version\": \"$version\"" "$root/node_modules/axe-core/package.json"; then
  command -v npm >/dev/null || { echo "install-axe.sh: npm is needed (Debian: apt-get install npm)" >&2; exit 1; }
  echo "install: axe-core $version into $root (npm, once)" >&2
  mkdir -p "$root"
  npm install --prefix "$root" --no-audit --no-fund --ignore-scripts "axe-core@$version" >&2
fi
echo "$js"
