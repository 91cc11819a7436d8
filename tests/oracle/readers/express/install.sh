#!/usr/bin/env bash
# Installs the Express reader's pinned npm packages into $ROOT/.tools/oracle/express
# (git-ignored) from this folder's package.json and package-lock.json.
# Idempotent: exits at once when that exact manifest is already installed.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$(dirname "$0")/../../../.." && pwd)"
DEST="$ROOT/.tools/oracle/express"
STAMP="$DEST/.installed-manifest"

want="$(cat "$HERE/package.json" "$HERE/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ -d "$DEST/node_modules" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    exit 0
fi

mkdir -p "$DEST"
cp "$HERE/package.json" "$DEST/package.json"
cp "$HERE/package-lock.json" "$DEST/package-lock.json"
(cd "$DEST" && npm install --no-audit --no-fund --loglevel=error)
echo "$want" > "$STAMP"
