#!/usr/bin/env bash
# Envoy CPU time per request and requests/s: ratebound beside its baselines
# (no filter, a do-nothing wasm filter, Envoy's native local_ratelimit), in
# interleaved rounds. Envoy pinned to CPU 0 (--concurrency 1), wrk to CPU 1.
#
#   bench/run.sh            full run: 5 rounds x 7 variants x 10 s (about 7 minutes)
#   bench/run.sh --quick    2 rounds x 3 s (about 1 minute)
#   bench/run.sh --rounds 3 --duration 5 --only 1,2,4    (any option of bench/run.py)
#
# SKIP_BUILD=1 uses the dist/ratebound.wasm already built. Results go to
# bench/results/<timestamp>.{md,csv,json,png} and bench/results/latest.*.
# See BENCHMARKS.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
args=()
for a in "$@"; do
  case "$a" in
    --quick) args+=(--rounds 2 --duration 3 --warmup 1 --initial-warmup 1 --tag quick) ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) args+=("$a") ;;
  esac
done

"$ROOT/bench/setup.sh"
exec "$ROOT/.venv/bin/python" "$ROOT/bench/run.py" "${args[@]}"
