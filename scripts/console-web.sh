#!/usr/bin/env bash
# Builds the console's browser core: console-web compiled to
# wasm32-unknown-unknown (profile web) and its JS glue made by wasm-bindgen
# into console-web/pkg/, which build.rs embeds in the CLI (build the CLI
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
"$bindgen_bin/wasm-bindgen" --target web --no-typescript --remove-name-section --remove-producers-section --out-dir console-web/pkg \
  target/wasm32-unknown-unknown/web/ratebound_console_web.wasm
printf 'console-web: %s %d bytes\n' console-web/pkg/ratebound_console_web_bg.wasm \
  "$(stat -c %s console-web/pkg/ratebound_console_web_bg.wasm)" >&2
