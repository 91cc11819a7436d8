#!/usr/bin/env bash
# Renders envoy-demo/istio/*.yaml into OUT_DIR (./build.sh: dist/istio) with
# @URL@ and @SHA256@ filled in. RATEBOUND_URL is the url (default
# oci://registry.example.com/ratebound:<crate version>).
#
# What Istio compares a WasmPlugin's `sha256` with depends on the scheme
# (istio pkg/wasm/cache.go and imagefetcher.go; docs/istio.md):
#   - oci:// (or no scheme, Istio's default): the image MANIFEST digest.
#     The image is built first (scripts/image.sh build, into dist/oci/ or
#     OCI_LAYOUT) and its digest is written; push that very image with
#     `scripts/image.sh push REF`, which keeps the digest. A url already
#     pinned with @sha256: must name the same image, or this fails.
#   - http://, https://, file://: the sha256 of the .wasm file itself.
# A wrong value is a fetch failure, and Istio answers a failed fetch with 5xx
# (fail closed) even under failStrategy FAIL_RELOAD.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: $0 OUT_DIR}"
VERSION="$(grep -m1 '^version' "$ROOT/Cargo.toml" | cut -d'"' -f2)"
URL="${RATEBOUND_URL:-oci://registry.example.com/ratebound:$VERSION}"
WASM="$ROOT/dist/ratebound.wasm"

case "$URL" in
  http://*|https://*|file://*)
    SHA256="$(sha256sum "$WASM" | cut -d' ' -f1)"
    ;;
  *)
    DIGEST="$("$ROOT/scripts/image.sh" build)"
    SHA256="${DIGEST#sha256:}"
    if [[ "$URL" == *@sha256:* && "${URL##*@sha256:}" != "$SHA256" ]]; then
      echo "istio-manifests: $URL is pinned to another image; the image built is $DIGEST" >&2
      exit 1
    fi
    ;;
esac

rm -rf "$OUT"
mkdir -p "$OUT"
for f in "$ROOT"/envoy-demo/istio/*.yaml; do
  sed -e "s|@SHA256@|$SHA256|g" -e "s|@URL@|$URL|g" "$f" > "$OUT/$(basename "$f")"
done
echo "istio-manifests: $OUT (url $URL, sha256 $SHA256)"
