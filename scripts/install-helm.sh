#!/usr/bin/env bash
# Installs helm (helm.sh/helm/v3, pinned) with `go install` into the
# git-ignored .tools/ folder: the Helm chart's tests render it with
# `helm template` and `helm lint` (tests/e2e/test_helm.py). Idempotent.
# RATEBOUND_TOOLS overrides the folder (default: <repo>/.tools).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${RATEBOUND_TOOLS:-$ROOT/.tools}"

# A version the Go module proxy serves (go list -m -versions helm.sh/helm/v3).
HELM="helm.sh/helm/v3/cmd/helm@v3.22.0"

# shellcheck source=scripts/go-tool.sh
. "$ROOT/scripts/go-tool.sh"
go_tool install-helm helm "$HELM" 1.26.7
