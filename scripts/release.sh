#!/usr/bin/env bash
# One release, from the checked-out commit:
#
#   scripts/release.sh VERSION --registry HOST[:PORT]/REPOSITORY [--out DIR]
#
# builds (./build.sh), pushes the module's OCI image to
# REGISTRY:VERSION and checks the registry answers the same manifest digest,
# and leaves in DIR (default dist/release/VERSION):
#
#   ratebound-VERSION.wasm                    the module
#   ratebound-VERSION-x86_64-linux            the CLI (Linux x86_64, glibc)
#   ratebound-VERSION.schema.json             the configuration's JSON Schema
#   ratebound-VERSION-oci.tar                 the OCI image as an OCI layout archive
#                                             (`oras cp --from-oci-layout` it to any registry)
#   ratebound-VERSION-istio.yaml              the Istio manifests, url and sha256 filled in
#   ratebound-VERSION-chart.tgz               the Helm chart, image url and digest as defaults
#   ratebound-VERSION-rls.yaml                envoyproxy/ratelimit + Redis (Kubernetes), for
#                                             installation and fleet bounds
#   ratebound-VERSION.cdx.json                SBOM (CycloneDX) of the module's and the CLI's crates
#   RELEASE-NOTES.md                          the CHANGELOG section, the image and its digest
#   SHA256SUMS                                of every file above
#
# VERSION must be the crate's version (Cargo.toml) and have a CHANGELOG.md
# section. The working tree must be clean (RELEASE_ALLOW_DIRTY=1 allows
# otherwise, and says so in the notes). Everything written is deterministic
# for one commit and toolchain: file times are the commit's time
# (SOURCE_DATE_EPOCH), tar entries have fixed owners and order, gzip stores
# no name or time.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

usage() { echo "usage: $0 VERSION --registry HOST[:PORT]/REPOSITORY [--out DIR]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
VERSION="$1"; shift
REGISTRY=""
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --registry) REGISTRY="${2:?}"; shift 2 ;;
    --out) OUT="${2:?}"; shift 2 ;;
    *) usage ;;
  esac
done
[[ -n "$REGISTRY" ]] || usage
REGISTRY="${REGISTRY#oci://}"
OUT="${OUT:-$ROOT/dist/release/$VERSION}"

fail() { echo "release: $*" >&2; exit 1; }

CRATE_VERSION="$(grep -m1 '^version' Cargo.toml | cut -d'"' -f2)"
[[ "$VERSION" == "$CRATE_VERSION" ]] || fail "VERSION $VERSION is not the crate's version ($CRATE_VERSION in Cargo.toml)"
grep -q "^## \[$VERSION\]" CHANGELOG.md || fail "CHANGELOG.md has no section '## [$VERSION]'"
[[ "$(uname -m)" == x86_64 && "$(uname -s)" == Linux ]] || fail "the CLI is released for Linux x86_64; this is $(uname -sm)"
[[ "$REGISTRY" == */* && "$REGISTRY" != *:*:* && "$REGISTRY" != *@* ]] \
  || fail "--registry is HOST[:PORT]/REPOSITORY, without tag or digest (got $REGISTRY)"

COMMIT="$(git rev-parse HEAD)"
DIRTY=""
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  [[ "${RELEASE_ALLOW_DIRTY:-0}" == 1 ]] || fail "the working tree has changes (commit them, or RELEASE_ALLOW_DIRTY=1)"
  DIRTY=" (with uncommitted changes)"
fi
EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}"
REF="$REGISTRY:$VERSION"
URL="oci://$REF"

echo "release: $VERSION from $COMMIT$DIRTY, image $REF"
# The whole build, dist/oci and dist/istio included: the module embeds the
# commit, so a build of the module alone would leave them stale beside it.
# Without SOURCE_DATE_EPOCH: dist/oci stays the image every plain build
# makes (created at 0); the release's own image carries the commit's time.
env -u SOURCE_DATE_EPOCH ./build.sh
export SOURCE_DATE_EPOCH="$EPOCH"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export OCI_LAYOUT="$WORK/oci"
# Builds the image into $OCI_LAYOUT and renders the manifests with its digest.
RATEBOUND_URL="$URL" scripts/istio-manifests.sh "$WORK/istio" >/dev/null
DIGEST="$(cat "$OCI_LAYOUT/digest")"
PUSHED="$(scripts/image.sh push "$REF")"
[[ "$PUSHED" == "$DIGEST" ]] || fail "the registry answers $PUSHED for $REF, the image built is $DIGEST"

rm -rf "$OUT"
mkdir -p "$OUT"
P="ratebound-$VERSION"

# A tar that is the same bytes for the same files.
det_tar() { # det_tar OUT.tar DIR PATH...
  local out="$1" dir="$2"; shift 2
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    --mode=u+rwX,go+rX,go-w --format=ustar -C "$dir" -cf "$out" "$@"
}

install -m 0644 dist/ratebound.wasm "$OUT/$P.wasm"
install -m 0755 dist/ratebound "$OUT/$P-x86_64-linux"
install -m 0644 dist/ratebound.schema.json "$OUT/$P.schema.json"

rm -f "$OCI_LAYOUT/digest"
det_tar "$OUT/$P-oci.tar" "$OCI_LAYOUT" .

# The Istio manifests, one multi-document file.
{
  echo "# ratebound $VERSION for Istio: $URL (manifest digest $DIGEST)."
  echo "# Apply the WasmPlugin that fits (each document says what it is for);"
  echo "# envoy-demo/istio/README.md in the source explains them."
  for f in "$WORK"/istio/*.yaml; do
    echo "---"
    echo "# $(basename "$f")"
    cat "$f"
  done
} > "$OUT/$P-istio.yaml"

# The Helm chart, with this image as its default.
mkdir -p "$WORK/chart"
# -L: the chart's files/ are links to the repository's dashboard, rules, tags.
cp -rL deploy/helm/ratebound "$WORK/chart/ratebound"
sed -i -e "s|^version: .*|version: $VERSION|" -e "s|^appVersion: .*|appVersion: \"$VERSION\"|" \
  "$WORK/chart/ratebound/Chart.yaml"
sed -i -e "s|^  url: .*|  url: $URL|" -e "s|^  sha256: .*|  sha256: \"${DIGEST#sha256:}\"|" \
  "$WORK/chart/ratebound/values.yaml"
grep -q "^  sha256: \"${DIGEST#sha256:}\"" "$WORK/chart/ratebound/values.yaml" \
  || fail "the chart's values.yaml has no 'image.sha256' line to fill in"
det_tar "$WORK/chart.tar" "$WORK/chart" ratebound
gzip -9 -n -c "$WORK/chart.tar" > "$OUT/$P-chart.tgz"

install -m 0644 deploy/kubernetes/ratelimit.yaml "$OUT/$P-rls.yaml"

python3 scripts/sbom.py "$VERSION" "$OUT/$P.cdx.json" >/dev/null

{
  # The CHANGELOG section of this version, up to the next section.
  awk -v v="## [$VERSION]" 'index($0, v) == 1 { on = 1; print; next } on && /^## \[/ { exit } on { print }' CHANGELOG.md
  echo
  echo "### Artifacts"
  echo
  echo "- Source: commit \`$COMMIT\`$DIRTY"
  echo "- OCI image: \`$REF\`, manifest digest \`$DIGEST\` (the WasmPlugin \`sha256\`)"
  echo "- Module sha256: \`$(sha256sum dist/ratebound.wasm | cut -d' ' -f1)\`"
  echo "- Built with: $(rustc --version), $(cargo --version)"
  echo "- Checksums: \`SHA256SUMS\` (\`sha256sum -c SHA256SUMS\`)"
} > "$OUT/RELEASE-NOTES.md"

touch -d "@$SOURCE_DATE_EPOCH" "$OUT"/*
(cd "$OUT" && sha256sum -- * | grep -v ' SHA256SUMS$' > SHA256SUMS)
touch -d "@$SOURCE_DATE_EPOCH" "$OUT/SHA256SUMS"

echo "release: $OUT"
(cd "$OUT" && cat SHA256SUMS)
echo "release: image $REF = $DIGEST"
