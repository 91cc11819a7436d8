#!/usr/bin/env bash
# Installs wasm-bindgen-cli (wasm-bindgen, wasm-bindgen-test-runner) at
# exactly the version console-web pins, into .tools/wasm-bindgen-VERSION/
# (cached); prints the directory of its binaries.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="$(grep -m1 '^wasm-bindgen = ' "$ROOT/console-web/Cargo.toml" | sed -E 's/.*"=?([0-9.]+)".*/\1/')"
tools="${RATEBOUND_TOOLS:-$ROOT/.tools}"
root="$tools/wasm-bindgen-$version"
if [[ ! -x "$root/bin/wasm-bindgen" || "$("$root/bin/wasm-bindgen" --version)" != "wasm-bindgen $version" ]]; then
  echo "install: wasm-bindgen-cli $version into $root (a few minutes, once)" >&2
  # Not --locked: its lockfile can name a release the index no longer
  # serves; the version of the CLI itself is what must match.
  cargo install --root "$root" wasm-bindgen-cli --version "$version" >&2
fi
echo "$root/bin"
