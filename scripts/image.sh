#!/usr/bin/env bash
# The OCI image of the module, for Istio's WasmPlugin `url: oci://...`,
# without a Docker daemon.
#
#   scripts/image.sh build         dist/ratebound.wasm -> dist/oci/ (an OCI
#                                  image layout, tag = the crate version);
#                                  prints the manifest digest, also written
#                                  to dist/oci/digest
#   scripts/image.sh push REF      copies that image, byte for byte, to REF
#                                  (e.g. registry.example.com/ratebound:0.1.0)
#                                  and checks the registry answers the same
#                                  manifest digest
#   scripts/image.sh digest        prints dist/oci/digest
#
# Layout: Istio's "compat" variant, an ordinary OCI image manifest with ONE
# layer of media type application/vnd.oci.image.layer.v1.tar+gzip holding
# `plugin.wasm` (istio pkg/wasm/imagefetcher.go, extractOCIStandardImage).
# Istio's other variant (media type application/vnd.module.wasm.content.layer.v1+wasm)
# must have exactly two layers, so a one-file artifact pushed with that media
# type would be refused by the fetcher; the compat image is what any registry
# and `crane export` handle as a plain image too.
#
# The image is reproducible: the tar entry has fixed owner, mode and mtime,
# gzip writes no name or time, and the manifest's created annotation is
# SOURCE_DATE_EPOCH (default 0). The same module always gives the same
# manifest digest, which is what Istio compares the WasmPlugin's `sha256`
# with for oci:// URLs (not the module's own hash).
#
# Environment: OCI_LAYOUT (default <repo>/dist/oci) moves the layout;
# RATEBOUND_TOOLS (default <repo>/.tools, where oras is built by
# scripts/install-oci-tools.sh when missing); PLAIN_HTTP=1 pushes over plain
# HTTP (a local test registry; automatic for 127.0.0.1 and localhost).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${RATEBOUND_TOOLS:-$ROOT/.tools}"
ORAS="$TOOLS/bin/oras"
WASM="$ROOT/dist/ratebound.wasm"
LAYOUT="${OCI_LAYOUT:-$ROOT/dist/oci}"
VERSION="$(grep -m1 '^version' "$ROOT/Cargo.toml" | cut -d'"' -f2)"

LAYER_TYPE="application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG_TYPE="application/vnd.oci.image.config.v1+json"

need_oras() {
  if [[ ! -x "$ORAS" ]]; then
    "$ROOT/scripts/install-oci-tools.sh" --image-only >&2
  fi
}

build() {
  [[ -f "$WASM" ]] || { echo "image: $WASM is missing: run ./build.sh" >&2; exit 1; }
  need_oras
  local work created diff_id digest
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  mkdir "$work/root"
  cp "$WASM" "$work/root/plugin.wasm"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --mode=0644 \
    --format=ustar -C "$work/root" -cf "$work/plugin.tar" plugin.wasm
  gzip -9 -n -c "$work/plugin.tar" > "$work/plugin.tar.gz"
  diff_id="sha256:$(sha256sum "$work/plugin.tar" | cut -d' ' -f1)"
  # A minimal OCI image config; Istio reads no field of it, `crane validate`
  # checks diff_ids against the layer.
  printf '{"architecture":"wasm","os":"wasip1","rootfs":{"type":"layers","diff_ids":["%s"]}}' \
    "$diff_id" > "$work/config.json"
  created="$(date -u -d "@${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)"
  rm -rf "$LAYOUT"
  # Run from the work folder: the layer's title annotation is "plugin.tar.gz".
  (cd "$work" && "$ORAS" push --no-tty --oci-layout-path "$LAYOUT" "$VERSION" \
    --image-spec v1.0 \
    --annotation "org.opencontainers.image.created=$created" \
    --annotation "org.opencontainers.image.version=$VERSION" \
    --config "config.json:$CONFIG_TYPE" \
    "plugin.tar.gz:$LAYER_TYPE" >/dev/null)
  rm -rf "$LAYOUT/ingest"
  digest="$("$ORAS" resolve --oci-layout-path "$LAYOUT" "$VERSION")"
  echo "$digest" > "$LAYOUT/digest"
  echo "$digest"
}

push() {
  local ref="$1" to_plain=() plain=() host remote
  [[ -f "$LAYOUT/digest" ]] || { echo "image: no $LAYOUT: run ./build.sh (or scripts/image.sh build)" >&2; exit 1; }
  need_oras
  ref="${ref#oci://}"
  host="${ref%%/*}"
  if [[ "${PLAIN_HTTP:-0}" == 1 || "$host" == 127.0.0.1:* || "$host" == localhost:* ]]; then
    to_plain=(--to-plain-http)
    plain=(--plain-http)
  fi
  "$ORAS" cp --no-tty "${to_plain[@]}" --from-oci-layout-path "$LAYOUT" "$VERSION" "$ref" >&2
  remote="$("$ORAS" resolve "${plain[@]}" "$ref")"
  if [[ "$remote" != "$(cat "$LAYOUT/digest")" ]]; then
    echo "image: $ref answers $remote, dist/oci has $(cat "$LAYOUT/digest")" >&2
    exit 1
  fi
  echo "$remote"
}

case "${1:-}" in
  build) build ;;
  push) [[ $# -eq 2 ]] || { echo "usage: $0 push REGISTRY/REPOSITORY:TAG" >&2; exit 2; }; push "$2" ;;
  digest) cat "$LAYOUT/digest" ;;
  *) echo "usage: $0 build | push REGISTRY/REPOSITORY:TAG | digest" >&2; exit 2 ;;
esac
