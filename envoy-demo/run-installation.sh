#!/usr/bin/env bash
# The installation-wide demo (also `run.sh --installation`): two real Envoys
# with the ratebound filter, on 127.0.0.1:10000 and 127.0.0.1:10001 (admin
# 9901 and 9902), in front of one small upstream, sharing one count of
# sign-in attempts: POST /login is bounded to 5 a minute per account (the
# JSON field "username"), for the whole installation, by envoyproxy/ratelimit
# over Redis (ratebound-installation.json; the service's configuration is
# what `dist/ratebound rls-config` prints for it).
#
# Installs what it needs (Envoy into .venv, the build, the rate-limit service
# into .tools/ with `go install` when not there yet -- 75 to 100 s once --
# and redis-server with apt-get when missing), stays in the foreground until
# Ctrl-C / SIGTERM or an Envoy exits, then stops exactly what it started.
# Everything listens on 127.0.0.1 only; Redis keeps an append-only file in a
# temporary folder that is removed at the end.
#
# Ports: LISTEN_PORT (10000), LISTEN_PORT_2 (10001), ADMIN_PORT (9901),
# ADMIN_PORT_2 (9902), UPSTREAM_PORT (10002), REDIS_PORT (16379),
# RLS_GRPC_PORT (18081), RLS_HTTP_PORT (18080, /healthcheck),
# RLS_DEBUG_PORT (16070). SKIP_BUILD=1 uses dist/ as it is.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEMO="$ROOT/envoy-demo"
LISTEN_PORT="${LISTEN_PORT:-10000}"
LISTEN_PORT_2="${LISTEN_PORT_2:-10001}"
ADMIN_PORT="${ADMIN_PORT:-9901}"
ADMIN_PORT_2="${ADMIN_PORT_2:-9902}"
UPSTREAM_PORT="${UPSTREAM_PORT:-10002}"
REDIS_PORT="${REDIS_PORT:-16379}"
RLS_GRPC_PORT="${RLS_GRPC_PORT:-18081}"
RLS_HTTP_PORT="${RLS_HTTP_PORT:-18080}"
RLS_DEBUG_PORT="${RLS_DEBUG_PORT:-16070}"
CONFIG="$DEMO/ratebound-installation.json"

"$DEMO/setup.sh"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  RATEBOUND_ISTIO=0 "$ROOT/build.sh"
fi
for f in "$ROOT/dist/ratebound.wasm" "$ROOT/dist/ratebound"; do
  if [[ ! -f "$f" ]]; then
    echo "run-installation.sh: $f is missing: run ./build.sh (or drop SKIP_BUILD=1)" >&2
    exit 1
  fi
done
"$ROOT/scripts/install-ratelimit.sh"
SERVICE="$ROOT/.tools/bin/service_cmd"
PY="$ROOT/.venv/bin/python"

# Every port must be free before anything starts (a clear message, not a
# half-started demo).
"$PY" - "$LISTEN_PORT" "$LISTEN_PORT_2" "$ADMIN_PORT" "$ADMIN_PORT_2" "$UPSTREAM_PORT" \
  "$REDIS_PORT" "$RLS_GRPC_PORT" "$RLS_HTTP_PORT" "$RLS_DEBUG_PORT" <<'PY'
import socket, sys
busy = []
for p in sys.argv[1:]:
    s = socket.socket()
    # as the servers bind: a connection of a previous run in TIME_WAIT does
    # not make the port busy, a listener does
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", int(p)))
    except OSError:
        busy.append(p)
    finally:
        s.close()
if busy:
    sys.exit("run-installation.sh: port(s) in use on 127.0.0.1: " + " ".join(busy)
             + " (see the port variables at the top of envoy-demo/run-installation.sh)")
PY

WORK="$(mktemp -d "${TMPDIR:-/tmp}/ratebound-installation.XXXXXX")"
PIDS=()
cleanup() {
  local pid
  # The Envoys first, Redis last (reverse order of start).
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill -TERM "${PIDS[$i]}" 2>/dev/null || true
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

# wait_ready WHAT PID KIND TARGET TIMEOUT_S LOG T0: polls (every 20 ms, at
# most TIMEOUT_S) until KIND answers -- "redis" (PING on port TARGET),
# "http200" (GET url TARGET) or "envoy" (url TARGET answers LIVE) -- and
# prints the seconds since T0 (EPOCHREALTIME when the process was started);
# fails with the log if PID exits or time is up.
wait_ready() {
  "$PY" - "$@" <<'PY'
import os, socket, sys, time, urllib.request
what, pid, kind, target, timeout, log, started = sys.argv[1:]
deadline = time.monotonic() + float(timeout)

def alive():
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    # a zombie is not alive
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True

def ready():
    if kind == "redis":
        with socket.create_connection(("127.0.0.1", int(target)), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")  # -LOADING while reading its file
    with urllib.request.urlopen(target, timeout=1) as r:
        body = r.read()
        return r.status == 200 and (kind != "envoy" or body.strip() == b"LIVE")

while time.monotonic() < deadline:
    if not alive():
        break
    try:
        if ready():
            print(f"{time.time() - float(started):.2f}")
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.02)
why = "exited" if not alive() else f"not ready after {timeout} s"
try:
    tail = open(log, errors="replace").read()[-6000:]
except OSError:
    tail = "(no log)"
sys.exit(f"run-installation.sh: {what} {why}; its log ({log}):\n{tail}")
PY
}

# --- Redis: append-only, fsynced on every write, no snapshots -------------
mkdir -p "$WORK/redis"
T0=$EPOCHREALTIME
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly yes \
  --appendfsync always --dir "$WORK/redis" --daemonize no \
  >"$WORK/redis/redis.log" 2>&1 </dev/null &
REDIS_PID=$!
PIDS+=("$REDIS_PID")
REDIS_S="$(wait_ready redis-server "$REDIS_PID" redis "$REDIS_PORT" 20 "$WORK/redis/redis.log" "$T0")"

# --- The rate-limit service, configured from the filter's configuration ----
# It reads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml; the settings are
# the ones docs/rate-limit-service.md explains ("The settings we run it with").
RLS_CONFIG_DIR="$WORK/ratelimit/runtime/ratebound/config"
mkdir -p "$RLS_CONFIG_DIR"
"$ROOT/dist/ratebound" rls-config "$CONFIG" >"$RLS_CONFIG_DIR/config.yaml"
T0=$EPOCHREALTIME
env -i PATH="$PATH" \
  USE_STATSD=false DISABLE_STATS=true \
  REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$REDIS_PORT" \
  RUNTIME_ROOT="$WORK/ratelimit/runtime" RUNTIME_SUBDIRECTORY=ratebound \
  RUNTIME_WATCH_ROOT=false LOCAL_CACHE_SIZE_IN_BYTES=0 \
  HOST=127.0.0.1 PORT="$RLS_HTTP_PORT" \
  GRPC_HOST=127.0.0.1 GRPC_PORT="$RLS_GRPC_PORT" \
  DEBUG_HOST=127.0.0.1 DEBUG_PORT="$RLS_DEBUG_PORT" \
  LOG_LEVEL=warn \
  "$SERVICE" >"$WORK/ratelimit/ratelimit.log" 2>&1 </dev/null &
RLS_PID=$!
PIDS+=("$RLS_PID")
RLS_S="$(wait_ready "ratelimit service" "$RLS_PID" http200 \
  "http://127.0.0.1:$RLS_HTTP_PORT/healthcheck" 20 "$WORK/ratelimit/ratelimit.log" "$T0")"

# --- The upstream (reads each request's whole body, as an app does) --------
"$PY" "$DEMO/upstream.py" --port "$UPSTREAM_PORT" &
PIDS+=("$!")

# --- Two Envoys: the demo's bootstrap plus the `rls` HTTP/2 cluster --------
render() { # render OUT LISTEN_PORT ADMIN_PORT
  "$PY" - "$DEMO/envoy.yaml.in" "$DEMO/rls-cluster.yaml.in" "$CONFIG" "$1" \
    "$ROOT" "$2" "$3" "$UPSTREAM_PORT" "$RLS_GRPC_PORT" <<'PY'
import json, sys
tmpl, rls, cfg, out, root, lport, aport, uport, gport = sys.argv[1:]
config = json.dumps(json.load(open(cfg)), separators=(",", ":"))
text = open(tmpl).read()
cluster = open(rls).read().replace("@RLS_GRPC_PORT@", gport)
for k, v in {"@ROOT@": root, "@LISTEN_PORT@": lport, "@ADMIN_PORT@": aport,
             "@UPSTREAM_PORT@": uport, "@CONFIG@": config.replace("'", "''"),
             "@EXTRA_CLUSTERS@\n": cluster,
             "@STATS_CONFIG@\n": open(f"{root}/envoy-demo/stats-tags.yaml").read()}.items():
    text = text.replace(k, v)
open(out, "w").write(text)
PY
}
# Both Envoys hash the keys they send the service with one secret (the
# configuration's "key_secret": {"env": "RATEBOUND_KEY_SECRET"}): a fresh
# one per demo run, unless one is given.
export RATEBOUND_KEY_SECRET="${RATEBOUND_KEY_SECRET:-$("$PY" -c 'import secrets; print(secrets.token_hex(16))')}"
ENVOY_PIDS=()
ENVOY_T0=()
ENVOY_S=()
for n in 1 2; do
  if [[ "$n" == 1 ]]; then lport="$LISTEN_PORT" aport="$ADMIN_PORT"; else lport="$LISTEN_PORT_2" aport="$ADMIN_PORT_2"; fi
  render "$WORK/envoy-$n.yaml" "$lport" "$aport"
  ENVOY_T0+=("$EPOCHREALTIME")
  "$ROOT/.venv/bin/envoy" -c "$WORK/envoy-$n.yaml" --concurrency 2 --disable-hot-restart \
    --log-level info --log-path "$WORK/envoy-$n.log" &
  ENVOY_PIDS+=("$!")
  PIDS+=("$!")
done
for n in 1 2; do
  if [[ "$n" == 1 ]]; then aport="$ADMIN_PORT"; else aport="$ADMIN_PORT_2"; fi
  ENVOY_S+=("$(wait_ready "Envoy $n" "${ENVOY_PIDS[$((n - 1))]}" envoy \
    "http://127.0.0.1:$aport/ready" 30 "$WORK/envoy-$n.log" "${ENVOY_T0[$((n - 1))]}")")
done

cat <<BANNER

ratebound installation demo is up (logs in $WORK)
  Redis          127.0.0.1:$REDIS_PORT (pid $REDIS_PID, append-only)    ready in ${REDIS_S} s
  ratelimit      grpc 127.0.0.1:$RLS_GRPC_PORT (pid $RLS_PID)         ready in ${RLS_S} s
  Envoy 1        http://127.0.0.1:$LISTEN_PORT  admin :$ADMIN_PORT (pid ${ENVOY_PIDS[0]})  ready in ${ENVOY_S[0]} s
  Envoy 2        http://127.0.0.1:$LISTEN_PORT_2  admin :$ADMIN_PORT_2 (pid ${ENVOY_PIDS[1]})  ready in ${ENVOY_S[1]} s
  POST /login is bounded to 5 a minute per account ("username"), counted once
  for both Envoys (the service's windows are clock minutes):

    B='{"username":"alice","password":"x"}'; J='content-type: application/json'
    for i in 1 2 3; do curl -s -o /dev/null -w '%{http_code} ' -H "\$J" -d "\$B" http://127.0.0.1:$LISTEN_PORT/login; done; echo
    for i in 1 2 3; do curl -s -o /dev/null -w '%{http_code} ' -H "\$J" -d "\$B" http://127.0.0.1:$LISTEN_PORT_2/login; done; echo
    curl -si -H "\$J" -d "\$B" http://127.0.0.1:$LISTEN_PORT_2/login       # 429 + RateLimit-* and Retry-After
    curl -s http://127.0.0.1:$ADMIN_PORT/stats | grep signin               # allowed / refused / rls_calls

  Ctrl-C to stop.
BANNER

# Foreground until an Envoy exits or we are interrupted.
set +e
wait -n "${ENVOY_PIDS[@]}"
rc=$?
set -e
echo "run-installation.sh: an Envoy exited ($rc)"
exit "$rc"
