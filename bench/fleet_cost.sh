#!/usr/bin/env bash
# What a fleet bound ("scope": "fleet") costs beside the same bound with
# "scope": "node": (a) Envoy CPU per request and latency (0: no filter,
# N: node bound, F: fleet bound), 100 callers, interleaved rounds, then idle;
# (b) 10,000 active callers against one Envoy with a fleet bound: sync calls
# per second, bytes per call, what the service and Redis see per second.
# Envoy pinned to CPU 0 (--concurrency 1); wrk, the service and Redis to CPU 1.
#
#   bench/fleet_cost.sh                                  3 rounds x 3 variants x 10 s, then (b) at sync_ms 200 and 500 (about 3 minutes)
#   bench/fleet_cost.sh --rounds 1 --duration 3 --b-duration 5    a smoke test
#   (any option of bench/fleet_cost.py: .venv/bin/python bench/fleet_cost.py --help)
#
# SKIP_BUILD=1 uses the dist/ratebound.wasm and dist/ratebound already built.
# Results go to bench/results/fleet-cost-<timestamp>.{md,json}.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for a in "$@"; do
  case "$a" in
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
  esac
done

"$ROOT/bench/setup.sh"
"$ROOT/scripts/install-ratelimit.sh"
exec "$ROOT/.venv/bin/python" "$ROOT/bench/fleet_cost.py" "$@"
