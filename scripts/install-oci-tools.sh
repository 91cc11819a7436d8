#!/usr/bin/env bash
# Installs the OCI tools behind scripts/image.sh and tests/e2e/test_image.py,
# built with `go install` into the git-ignored .tools/ folder of the
# repository (no Docker daemon involved):
#   - oras     (oras.land/oras): builds the image into an OCI image layout and
#              copies it to a registry (scripts/image.sh);
#   - crane    (go-containerregistry, the library Istio's Wasm image fetcher
#              uses): the test's second, independent client;
#   - registry (distribution/distribution v3): the local registry the test
#              pushes to, on 127.0.0.1.
# Idempotent: an existing binary is kept. `--image-only` installs just oras
# (what ./build.sh needs).
#
# RATEBOUND_TOOLS overrides the folder (default: <repo>/.tools).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${RATEBOUND_TOOLS:-$ROOT/.tools}"

# Pinned to versions the Go module proxy serves (its @v/list); all three
# build with Go >= 1.26.7 (oras's go.mod).
ORAS="oras.land/oras/cmd/oras@v1.3.6"
CRANE="github.com/google/go-containerregistry/cmd/crane@v0.22.1"
REGISTRY="github.com/distribution/distribution/v3/cmd/registry@v3.1.2"

wanted=("oras:$ORAS")
if [[ "${1:-}" != "--image-only" ]]; then
  wanted+=("crane:$CRANE" "registry:$REGISTRY")
fi

for entry in "${wanted[@]}"; do
  bin="${entry%%:*}"
  module="${entry#*:}"
  if [[ -x "$TOOLS/bin/$bin" ]]; then
    echo "install-oci-tools: $TOOLS/bin/$bin already there"
    continue
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "install-oci-tools: go is required (Go >= 1.26.7) to build $module" >&2
    exit 1
  fi
  mkdir -p "$TOOLS/bin" "$TOOLS/gopath" "$TOOLS/gocache"
  echo "install-oci-tools: go install $module ($(go version))"
  start=$(date +%s)
  # -modcacherw: the module cache stays deletable (rm -rf .tools) without chmod.
  GOBIN="$TOOLS/bin" GOPATH="$TOOLS/gopath" GOCACHE="$TOOLS/gocache" \
    GOFLAGS=-modcacherw go install "$module"
  echo "install-oci-tools: built $TOOLS/bin/$bin in $(( $(date +%s) - start ))s"
done
