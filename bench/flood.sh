#!/usr/bin/env bash
# Memory under a flood: 1,000,000 requests from distinct client addresses
# (trusted X-Forwarded-For) against a per-address bound; Envoy RSS before and
# after, the filter's tracked/overflow stats. About 2 minutes.
#   bench/flood.sh               # 1,000,000 requests
#   bench/flood.sh -n 100000     # fewer (any option of bench/flood.py)
# SKIP_BUILD=1 uses the dist/ratebound.wasm already built. See BENCHMARKS.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/bench/setup.sh"
# The output also goes to bench/results/flood-<timestamp>.txt and flood-latest.txt.
mkdir -p "$ROOT/bench/results"
out="$ROOT/bench/results/flood-$(date +%Y%m%d-%H%M%S).txt"
"$ROOT/.venv/bin/python" -u "$ROOT/bench/flood.py" "$@" 2>&1 | tee "$out"
cp "$out" "$ROOT/bench/results/flood-latest.txt"
