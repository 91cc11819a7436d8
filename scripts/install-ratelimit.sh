#!/usr/bin/env bash
# Installs the engines behind installation-wide bounds, for the e2e tests and
# scripts/record-rls.py:
#   - envoyproxy/ratelimit (the rate-limit service), built with `go install`
#     into the git-ignored .tools/ folder of the repository;
#   - redis-server (and redis-cli), from Debian's packages, when missing.
# Idempotent: an existing binary is kept. Prints where it is and how long the
# build took.
#
# RATEBOUND_TOOLS overrides the folder (default: <repo>/.tools).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${RATEBOUND_TOOLS:-$ROOT/.tools}"

# The issue pinned commit f2fb15770f7f, but the Go module proxy refuses it
# ("403 Forbidden ... This module version is not available"). This is the
# newest main commit the proxy serves (its go.mod says go 1.25.6).
RATELIMIT_VERSION="v1.4.1-0.20260122083618-3fb702589d36"
MODULE="github.com/envoyproxy/ratelimit/src/service_cmd"

BIN="$TOOLS/bin/service_cmd"
# shellcheck source=scripts/go-tool.sh
. "$ROOT/scripts/go-tool.sh"
go_tool install-ratelimit service_cmd "$MODULE@$RATELIMIT_VERSION" 1.25.6

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  echo "install-ratelimit: installing redis-server (apt-get)"
  # Runs as root (CI and the development machines); no sudo.
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
fi

echo "install-ratelimit: service_cmd: $BIN"
echo "install-ratelimit: redis-server: $(command -v redis-server) ($(redis-server --version | head -n1))"
