#!/usr/bin/env bash
# The console's browser core (console-web): its readings of every example
# and bad example natively (against console-web/tests/expected/), then the
# same in headless Chromium, compiled to wasm32-unknown-unknown
# (wasm-bindgen-test, Debian's chromedriver). The page itself is tested end
# to end by tests/e2e/test_console.py (Playwright).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

scripts/install-chromium.sh
bindgen="$(scripts/install-wasm-bindgen.sh)"
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi

echo "console-web: readings, native" >&2
cargo test -p ratebound-console-web --test readings

echo "console-web: readings, in headless Chromium (wasm-bindgen-test)" >&2
# From console-web/, where the runner finds webdriver.json (Chromium's
# flags: headless, and no sandbox, which root cannot have).
cd console-web
CHROMEDRIVER="${CHROMEDRIVER:-$(command -v chromedriver)}" \
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER="$bindgen/wasm-bindgen-test-runner" \
  cargo test -p ratebound-console-web --target wasm32-unknown-unknown --test browser
