#!/usr/bin/env bash
# Installs Istio's control plane and bootstrap code for tests/e2e/test_istiod.py,
# built from one pinned istio.io/istio module version into the git-ignored
# .tools/ folder (GOPATH and the build cache under .tools/ too, like the other
# Go tools):
#   .tools/bin/pilot-discovery   istiod itself (istio.io/istio/pilot/cmd/pilot-discovery)
#   .tools/bin/istio-helper      scripts/istio/istio-helper: runs Istio's
#                                bootstrap generation (pkg/bootstrap), its
#                                WasmPlugin -> TrafficExtension translation
#                                and istio-agent's Wasm fetch (pkg/wasm)
#   .tools/istio/envoy_bootstrap.json   Istio's bootstrap template (from the module)
# Both binaries are built from scripts/istio/go.mod, whose only direct
# requirement is istio.io/istio (its versions of every dependency; the
# go.sum is committed), with -p=1 under nice: the machine is shared.
# Idempotent: pilot-discovery is kept while .tools/istio/VERSION names this
# version; the helper is rebuilt when its source changed.
# Prints the paths and how long the download and the build took.
#
# RATEBOUND_TOOLS overrides the folder (default: <repo>/.tools).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${RATEBOUND_TOOLS:-$ROOT/.tools}"

# The Go module proxy here serves istio.io/istio only as main-branch
# pseudo-versions (release tags are refused); this is the newest one
# (2026-08-27, go 1.26.0). Keep it equal to the require in scripts/istio/go.mod.
ISTIO_VERSION="v0.0.0-20260827124520-eed52ebb66ad"
GO_MIN="1.26.0"

MOD="$ROOT/scripts/istio"
if ! grep -q "istio.io/istio $ISTIO_VERSION" "$MOD/go.mod"; then
  echo "install-istiod: scripts/istio/go.mod does not require istio.io/istio $ISTIO_VERSION" >&2
  exit 1
fi

if ! command -v go >/dev/null 2>&1; then
  echo "install-istiod: go is required (Go >= $GO_MIN) to build istio.io/istio" >&2
  exit 1
fi
mkdir -p "$TOOLS/bin" "$TOOLS/gopath" "$TOOLS/gocache" "$TOOLS/istio"
export GOPATH="$TOOLS/gopath" GOCACHE="$TOOLS/gocache"
# -modcacherw: the module cache stays deletable (rm -rf .tools) without chmod.
# -p=1: one compile job at a time (2 shared cores).
export GOFLAGS="-modcacherw -p=1"

if [[ -x "$TOOLS/bin/pilot-discovery" && -f "$TOOLS/istio/VERSION" \
      && "$(cat "$TOOLS/istio/VERSION")" == "$ISTIO_VERSION" ]]; then
  echo "install-istiod: pilot-discovery $ISTIO_VERSION already there"
else
  echo "install-istiod: istio.io/istio@$ISTIO_VERSION ($(go version))"
  start=$(date +%s)
  (cd "$MOD" && nice -n 19 go mod download)
  downloaded=$(date +%s)
  echo "install-istiod: modules downloaded in $(( downloaded - start ))s"
  (cd "$MOD" && nice -n 19 go build -o "$TOOLS/bin/pilot-discovery" istio.io/istio/pilot/cmd/pilot-discovery)
  echo "install-istiod: built pilot-discovery in $(( $(date +%s) - downloaded ))s"
  src="$(cd "$MOD" && go list -m -f '{{.Dir}}' istio.io/istio)"
  cp "$src/tools/packaging/common/envoy_bootstrap.json" "$TOOLS/istio/envoy_bootstrap.json"
  chmod u+w "$TOOLS/istio/envoy_bootstrap.json"
  echo "$ISTIO_VERSION" > "$TOOLS/istio/VERSION"
fi

# The helper's source is in this repository: rebuilt when a file of
# scripts/istio/ is newer than the binary (10-20 s once Istio's packages are
# in the build cache, most of it linking).
if [[ -x "$TOOLS/bin/istio-helper" && -z "$(find "$MOD" -newer "$TOOLS/bin/istio-helper" -type f -print -quit)" ]]; then
  echo "install-istiod: istio-helper up to date"
else
  helper=$(date +%s)
  (cd "$MOD" && nice -n 19 go build -o "$TOOLS/bin/istio-helper" ./istio-helper)
  echo "install-istiod: istio-helper built in $(( $(date +%s) - helper ))s"
fi
echo "install-istiod: pilot-discovery: $TOOLS/bin/pilot-discovery"
echo "install-istiod: istio-helper: $TOOLS/bin/istio-helper"
echo "install-istiod: template: $TOOLS/istio/envoy_bootstrap.json"
