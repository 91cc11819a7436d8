#!/usr/bin/env bash
# A sign-in route with an installation bound: Envoy CPU time per request and
# latency, the same POST /up/login with a JSON body to a real upstream, with
# node bounds only (A) and with an installation bound per account counted by
# the real envoyproxy/ratelimit over a real Redis (B: account from the body,
# C: from a header), beside no filter (0), and the call alone: Envoy's own
# ratelimit filter (N), a minimal wasm filter making one gRPC call (G; H over
# an HTTP/2 call-out), ratebound's installation bound alone, fixed (F) and
# sliding (S), in interleaved rounds. Envoy pinned to CPU 0 (--concurrency 1);
# wrk, the upstream Envoy, the service and Redis to CPU 1.
#
#   bench/signin.sh                                  3 rounds x 9 variants x (10 s + 1 s warm-up + 5 s at 1 connection)
#   bench/signin.sh --rounds 2 --duration 3 --light-duration 2    a smoke test
#   bench/signin.sh --redis-aof always               Redis fsyncs every command (as the e2e tests)
#   (any option of bench/signin.py: .venv/bin/python bench/signin.py --help)
#
# SKIP_BUILD=1 uses the dist/ratebound.wasm and dist/ratebound already built.
# Results go to bench/results/signin-<timestamp>.{md,json}. See BENCHMARKS.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for a in "$@"; do
  case "$a" in
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
  esac
done

"$ROOT/bench/setup.sh"
"$ROOT/scripts/install-ratelimit.sh"
exec "$ROOT/.venv/bin/python" "$ROOT/bench/signin.py" "$@"
