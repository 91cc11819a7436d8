#!/usr/bin/env bash
# Builds the Go reader of the chat-request oracle into $ROOT/.tools/oracle
# (git-ignored; the standard library only, nothing downloaded). Idempotent:
# rebuilt only when its source changed. Prints the binary's path.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
DEST="$ROOT/.tools/oracle/chat-go"
STAMP="$DEST.source"
want="$(sha256sum "$HERE/go/main.go" | cut -d' ' -f1) $(go version)"
if [[ ! -x "$DEST" || ! -f "$STAMP" || "$(cat "$STAMP")" != "$want" ]]; then
    mkdir -p "$ROOT/.tools/oracle"
    GOCACHE="$ROOT/.tools/gocache" GOPATH="$ROOT/.tools/gopath" GOFLAGS=-mod=mod \
        go build -o "$DEST" "$HERE/go/main.go"
    echo "$want" > "$STAMP"
fi
echo "$DEST"
