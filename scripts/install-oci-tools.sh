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

# shellcheck source=scripts/go-tool.sh
. "$ROOT/scripts/go-tool.sh"
for entry in "${wanted[@]}"; do
  go_tool install-oci-tools "${entry%%:*}" "${entry#*:}" 1.26.7
done
