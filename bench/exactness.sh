#!/usr/bin/env bash
# Exactness: 20 trials each at Envoy --concurrency 2 and 4, a fresh Envoy per
# trial, a bound of 100 per route, 2,000 requests 200 at a time (hey): prints
# the admitted count of every trial and a summary. About 2 minutes.
#   bench/exactness.sh                       # the full 2 x 20 trials
#   bench/exactness.sh --trials 3 --concurrency 4
# SKIP_BUILD=1 uses the dist/ratebound.wasm already built. See BENCHMARKS.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/bench/setup.sh"
# The output also goes to bench/results/exactness-<timestamp>.txt and exactness-latest.txt.
mkdir -p "$ROOT/bench/results"
out="$ROOT/bench/results/exactness-$(date +%Y%m%d-%H%M%S).txt"
"$ROOT/.venv/bin/python" -u "$ROOT/bench/exactness.py" "$@" 2>&1 | tee "$out"
cp "$out" "$ROOT/bench/results/exactness-latest.txt"
