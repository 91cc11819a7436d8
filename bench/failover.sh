#!/usr/bin/env bash
# A Redis failover in the middle of an attack, for a Sentinel set and a
# Redis Cluster, each behind two envoyproxy/ratelimit replicas and three
# Envoys: 503s, admissions beyond the limit (sliding and fixed), seconds
# until exact again, counts lost, restarts needed, the fleet bound's
# admissions (docs/rate-limit-service.md, "Failover").
#
#   bench/failover.sh                          2 trials per topology (about 4 minutes)
#   bench/failover.sh --trials 1 --lead 0      a quick look
#   bench/failover.sh --save                   writes bench/results/failover-<stamp>.{md,json}
#   (any option of bench/failover.py: .venv/bin/python bench/failover.py --help)
#
# SKIP_BUILD=1 uses the dist/ratebound.wasm and dist/ratebound already built.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for a in "$@"; do
  case "$a" in
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
  esac
done

"$ROOT/bench/setup.sh"
"$ROOT/scripts/install-ratelimit.sh"
exec "$ROOT/.venv/bin/python" "$ROOT/bench/failover.py" "$@"
