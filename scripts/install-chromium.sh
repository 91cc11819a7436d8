#!/usr/bin/env bash
# Debian's Chromium and its WebDriver (chromium, chromium-driver), for the
# console's browser tests: wasm-bindgen-test drives it through chromedriver,
# Playwright through its executable path. Installed with apt-get when
# missing (CI runs as root on Debian); no browser is downloaded otherwise.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
sudo=""
if [[ "$(id -u)" != 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-chromium: run as root, or apt-get install chromium chromium-driver" >&2
    exit 1
  fi
  sudo=sudo
fi
echo "install-chromium: apt-get install chromium chromium-driver" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
chromium --version 2>/dev/null | head -1 >&2
