#!/usr/bin/env bash
# Builds the console's browser core: console-web compiled to
# wasm32-unknown-unknown (profile web) and its JS glue made by wasm-bindgen
# into console-web/pkg/, which cli/build.rs embeds in the CLI (build the CLI
# after this). Installs wasm-bindgen-cli, at exactly the version the crate
# pins, into .tools/ when missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bindgen_bin="$(scripts/install-wasm-bindgen.sh)"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi

echo "console-web: core (wasm32-unknown-unknown, profile web)" >&2
cargo build -p ratebound-console-web --target wasm32-unknown-unknown --profile web
# Into a scratch folder first: a file in console-web/pkg is replaced only
# when its bytes changed. The CLI's build script watches that folder, so
# rewriting the same bytes would compile the crate and relink the CLI
# (minutes) on every ./build.sh, twice more in the release test.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$bindgen_bin/wasm-bindgen" --target web --no-typescript --remove-name-section --remove-producers-section --out-dir "$scratch" \
  target/wasm32-unknown-unknown/web/ratebound_console_web.wasm
for f in "$scratch"/*; do
  cmp -s "$f" "console-web/pkg/${f##*/}" || cp -r "$f" console-web/pkg/
done
printf 'console-web: %s %d bytes\n' console-web/pkg/ratebound_console_web_bg.wasm \
  "$(stat -c %s console-web/pkg/ratebound_console_web_bg.wasm)" >&2
