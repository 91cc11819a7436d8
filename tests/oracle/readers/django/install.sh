#!/usr/bin/env bash
# Installs the Django reader's pinned packages into the repo's venv ($ROOT/.venv).
# Idempotent: exits at once when the pinned versions are already there.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../../.." && pwd)"
PINS=(Django==5.2.19 djangorestframework==3.18.3 asgiref==3.13.0 sqlparse==0.6.1)

if [[ ! -x "$ROOT/.venv/bin/python" ]]; then
    python3 -m venv "$ROOT/.venv"
fi
PY="$ROOT/.venv/bin/python"

if "$PY" - "${PINS[@]}" <<'PYEOF' 2>/dev/null; then exit 0; fi
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    if version(name) != want:
        sys.exit(1)
PYEOF

"$ROOT/.venv/bin/pip" install -q --disable-pip-version-check "${PINS[@]}"
