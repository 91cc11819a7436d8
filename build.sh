#!/usr/bin/env bash
# Builds the release wasm module (dist/ratebound.wasm), the native CLI
# (dist/ratebound, with the console's browser core from console-web/pkg
# embedded) and the configuration's JSON Schema
# (dist/ratebound.schema.json), and the Istio manifests with url and sha256 filled in
# (dist/istio/; RATEBOUND_URL sets the url; for an oci:// url, the default,
# also the OCI image in dist/oci/, see scripts/image.sh). With --selftest, also the module with the store
# behaviour suite compiled in (dist/ratebound-selftest.wasm).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"

SELFTEST=0
for arg in "$@"; do
  case "$arg" in
    --selftest) SELFTEST=1 ;;
    -h|--help) echo "usage: $0 [--selftest]"; exit 0 ;;
    *) echo "build.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

TARGET=wasm32-wasip1
if ! rustup target list --installed | grep -qx "$TARGET"; then
  echo "build: adding rustup target $TARGET"
  rustup target add "$TARGET"
fi

mkdir -p dist

echo "build: wasm module (release, $TARGET)"
cargo build -p ratebound-filter --profile wasm --target "$TARGET"
cp "target/$TARGET/wasm/ratebound_filter.wasm" dist/ratebound.wasm

# The console's page runs the core compiled for the browser; the CLI embeds
# it (build.rs), so it is built first (scripts/console-web.sh).
echo "build: the console's browser core (console-web, wasm32-unknown-unknown)"
scripts/console-web.sh

echo "build: native CLI"
cargo build -p ratebound-cli --profile cli --bin ratebound
cp target/cli/ratebound dist/ratebound
# The configuration's JSON Schema ships beside the module (its $id names the
# version): editors and CI validate against the schema of the build they run.
dist/ratebound schema > dist/ratebound.schema.json

if [[ "$SELFTEST" == 1 ]]; then
  echo "build: selftest wasm module"
  CARGO_TARGET_DIR=target/selftest cargo build -p ratebound-filter --profile wasm --target "$TARGET" --features selftest
  cp "target/selftest/$TARGET/wasm/ratebound_filter.wasm" dist/ratebound-selftest.wasm
fi

# The Istio manifests with url and sha256 filled in (dist/istio/), and for an
# oci:// url the image they pin (dist/oci/): scripts/istio-manifests.sh.
# Without Go (oras is built with `go install`), an oci:// url cannot get its
# digest: the manifests are left out rather than rendered with a wrong pin,
# and the module and CLI are still built (envoy-demo/run.sh needs no image).
URL="${RATEBOUND_URL:-oci://registry.example.com/ratebound:$(grep -m1 '^version' Cargo.toml | cut -d'"' -f2)}"
OCI=1
case "$URL" in http://*|https://*|file://*) OCI=0 ;; esac
if [[ "${RATEBOUND_ISTIO:-1}" == 0 ]]; then
  # The demos and the bench need no image (and the first build of oras takes minutes).
  echo "build: dist/istio/ not rendered (RATEBOUND_ISTIO=0)"
elif [[ "$OCI" == 1 && ! -x "${RATEBOUND_TOOLS:-$ROOT/.tools}/bin/oras" ]] && ! command -v go >/dev/null 2>&1; then
  echo "build: dist/istio/ NOT rendered: the oci:// url needs the image's manifest digest, and the image needs oras" >&2
  echo "build: (scripts/install-oci-tools.sh, Go >= 1.26.7). Install Go, or set RATEBOUND_URL=https://... (sha256 = the module's hash)." >&2
  rm -rf dist/istio dist/oci
else
  RATEBOUND_URL="$URL" scripts/istio-manifests.sh dist/istio
fi

report() {
  local f="$1"
  printf '%-32s %9d bytes  sha256 %s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
}
report dist/ratebound.wasm
report dist/ratebound
report dist/ratebound.schema.json
report console-web/pkg/ratebound_console_web_bg.wasm
if [[ "$OCI" == 1 && -f dist/oci/digest ]]; then
  printf '%-32s manifest %s (the WasmPlugin sha256 for %s)\n' dist/oci "$(cat dist/oci/digest)" "$URL"
fi
if [[ "$SELFTEST" == 1 ]]; then
  report dist/ratebound-selftest.wasm
fi
