"""Sizing the rate-limit service and its Redis: how many calls to
envoyproxy/ratelimit and how many Redis commands one Envoy node causes, per
sign-in attempt (installation bounds) and per fleet sync (fleet bounds).
Counts, not times: what the service and Redis must be sized for.

Real parts only: an Envoy (.venv's) loading dist/ratebound.wasm, the pinned
envoyproxy/ratelimit (.tools/bin/service_cmd), Debian's redis-server; all on
127.0.0.1. Per scenario, a fresh Envoy; the service and Redis are shared and
measured by deltas:

  service calls   Envoy's cluster.rls.upstream_rq_total (every call the
                  filter made to the service's cluster), and the service's
                  own count (USE_PROMETHEUS: its ShouldRateLimit requests)
  Redis commands  INFO commandstats, per command (INCRBY, EXPIRE, the rest)
  fleet syncs     the filter's own fleet_sync_calls / fleet_sync_keys

Scenarios (each bound's limit is never reached, so nothing is refused):

  S1  sign-in, one installation bound per account (sliding, the default:
      four descriptors): --attempts POSTs to /up/login, the account from
      the header X-Login, each a new account
  S2  as S1 with a second installation bound on the route (per address):
      eight descriptors in the one call
  S1F as S1 with the bound's "shape": "fixed": one descriptor
  F   a fleet bound per address (sync_ms --sync-ms), for each number of
      addresses in --fleet-keys (a fresh Envoy each): --fleet-seconds of
      requests cycling through them, then as long with no request (idle)

Results: bench/results/rls-sizing-<timestamp>.{md,json}; the table is printed.

  .venv/bin/python bench/rls_sizing.py                 (about 3 minutes)
  .venv/bin/python bench/rls_sizing.py --attempts 100 --fleet-seconds 10 --fleet-keys 100   (a smoke run)
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

import engines  # noqa: E402 - tests/e2e, on sys.path through benchlib
from launcher import grpc_cluster  # noqa: E402

CLI = bl.ROOT / "dist" / "ratebound"
DOMAIN = "sizing"
BIG = 1_000_000_000  # never reached
SERVICE = {"cluster": "rls", "domain": DOMAIN, "timeout_ms": 1000, "on_error": "deny"}


def signin_config(instance: str, by_address: bool, shape: str = "sliding") -> dict:
    bounds = [{"name": "attempts", "per": "account", "scope": "installation",
               "shape": shape, "limit": BIG, "window": "PT1M"}]
    if by_address:
        bounds.append({"name": "per_address", "per": "address", "scope": "installation",
                       "shape": shape, "limit": BIG, "window": "PT1H"})
    return {"instance": instance, "rate_limit_service": SERVICE,
            "routes": [{"name": "login", "match": {"path_prefix": "/up/login", "methods": ["POST"]},
                        "account": {"header": "x-login"}, "bounds": bounds}]}


def fleet_config(instance: str, sync_ms: int) -> dict:
    return {"instance": instance,
            "rate_limit_service": {**SERVICE, "sync_ms": sync_ms, "fleet_nodes": 1},
            "routes": [{"name": "api", "bounds": [{"name": "per_address", "per": "address",
                                                   "scope": "fleet", "limit": BIG,
                                                   "window": "PT1M"}]}]}


def rls_yaml(cfg: dict, work: Path) -> str:
    """The service's configuration for the domain (`ratebound rls-config`);
    the fleet bound's keys carry their limit, so it needs only the domain."""
    f = work / "filter.json"
    f.write_text(json.dumps(cfg))
    out = subprocess.run([str(CLI), "rls-config", str(f)], capture_output=True, text=True,
                         timeout=30)
    if out.returncode != 0:
        raise SystemExit(f"rls-config: {out.stderr}")
    return out.stdout


def request(port: int, path: str, method: str = "GET", headers: dict | None = None) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 headers=headers or {}, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


class Counters:
    """What the node caused, as deltas between two snapshots."""

    def __init__(self, env: bl.Envoy, redis: engines.Redis, service_metrics: str,
                 instance: str) -> None:
        self.env, self.redis, self.metrics_url, self.instance = env, redis, service_metrics, instance

    def service_requests(self) -> int:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as r:
            text = r.read().decode()
        total = 0
        for m in re.finditer(r'^ratelimit_service_total_requests\{grpc_method="ShouldRateLimit"\} (\S+)$',
                             text, re.M):
            total += int(float(m.group(1)))
        return total

    def snapshot(self) -> dict:
        s = self.env.stats("^(cluster\\.rls\\.upstream_rq_total|wasmcustom\\.ratebound\\.)")
        prefix = f"wasmcustom.ratebound.{self.instance}."
        return {"calls": s.get("cluster.rls.upstream_rq_total", 0),
                "sync_calls": s.get(prefix + "fleet_sync_calls", 0),
                "sync_keys": s.get(prefix + "fleet_sync_keys", 0),
                "redis": self.redis.commandstats(),
                "service": self.service_requests(),
                "t": time.monotonic()}


def delta(a: dict, b: dict) -> dict:
    cmds = {k: b["redis"].get(k, 0) - a["redis"].get(k, 0)
            for k in set(a["redis"]) | set(b["redis"])}
    cmds = {k: v for k, v in cmds.items() if v and k not in ("info",)}
    return {"seconds": b["t"] - a["t"], "calls": b["calls"] - a["calls"],
            "service": b["service"] - a["service"],
            "sync_calls": b["sync_calls"] - a["sync_calls"],
            "sync_keys": b["sync_keys"] - a["sync_keys"], "redis": cmds}


FLUSH_S = 1.5  # the service's stats flush (STATS_FLUSH_INTERVAL=1s), and the filter's tick


def settle() -> None:
    time.sleep(FLUSH_S)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attempts", type=int, default=1000)
    ap.add_argument("--fleet-seconds", type=float, default=30.0)
    ap.add_argument("--fleet-keys", default="100,1000",
                    help="comma-separated: a fleet run (fresh Envoy) for each number of addresses")
    ap.add_argument("--sync-ms", type=int, default=500)
    ap.add_argument("--out", default=str(bl.BENCH / "results"))
    args = ap.parse_args()
    started = bl.start_run("rls-sizing", args.out, "", (bl.RATEBOUND_WASM, CLI, engines.SERVICE_CMD),
                           "./build.sh and scripts/install-ratelimit.sh")
    if started is None:
        return 2
    out_dir, stamp, work = started
    s1, s2 = signin_config("sizings1", False), signin_config("sizings2", True)
    s1f = signin_config("sizings1f", False, "fixed")
    fl = fleet_config("sizingf", args.sync_ms)
    redis = engines.Redis(work)
    metrics_port = bl.free_port()
    service = engines.RateLimitService(redis, rls_yaml(s2, work), work, extra_env={
        "DISABLE_STATS": "false", "USE_PROMETHEUS": "true",
        "PROMETHEUS_ADDR": f"127.0.0.1:{metrics_port}", "STATS_FLUSH_INTERVAL": "1s"})
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    results: dict = {"meta": {"stamp": stamp, "module": bl.describe_module(),
                              "redis": subprocess.run(["redis-server", "--version"], capture_output=True,
                                                      text=True).stdout.strip(),
                              "args": vars(args)}}
    envs = []
    try:
        def envoy(name: str, cfg: dict) -> bl.Envoy:
            env = bl.bench_envoy(name, [bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)], work,
                                 cpu=None, trusted_xff=True,
                                 clusters=[grpc_cluster("rls", service.grpc_port)])
            env.start(wait=False)
            envs.append(env)
            why = bl.wait_ready(env)
            if why:
                raise SystemExit(f"{name}: {why}\n{env.log_tail(20)}")
            time.sleep(3)  # the workers' warm-up calls (no Redis) are done before counting
            return env

        for key, cfg in (("S1", s1), ("S2", s2), ("S1F", s1f)):
            env = envoy(key, cfg)
            c = Counters(env, redis, metrics_url, cfg["instance"])
            settle()
            a = c.snapshot()
            for i in range(args.attempts):
                status = request(env.port, "/up/login", "POST",
                                 {"x-login": f"user{i}", "X-Forwarded-For": "127.1.0.1"})
                if status != 200:
                    raise SystemExit(f"{key}: attempt {i} answered {status}\n{env.log_tail(20)}")
            settle()
            d = delta(a, c.snapshot())
            d["attempts"] = args.attempts
            results[key] = d
            print(key, json.dumps(d), flush=True)
            env.stop()

        for keys in [int(k) for k in str(args.fleet_keys).split(",")]:
            env = envoy(f"F{keys}", fl)
            c = Counters(env, redis, metrics_url, fl["instance"])
            settle()
            a = c.snapshot()
            sent, i = 0, 0
            end = time.monotonic() + args.fleet_seconds
            while time.monotonic() < end:
                n = i % keys
                request(env.port, "/", headers={"X-Forwarded-For": f"127.1.{n // 250}.{n % 250 + 1}"})
                sent += 1
                i += 1
            b = c.snapshot()
            d = delta(a, b)
            d["requests"], d["keys"] = sent, keys
            results[f"F{keys}_active"] = d
            print(f"F{keys}_active", json.dumps(d), flush=True)
            time.sleep(args.fleet_seconds)
            d = delta(b, c.snapshot())
            d["keys"] = keys
            results[f"F{keys}_idle"] = d
            print(f"F{keys}_idle", json.dumps(d), flush=True)
            env.stop()
    finally:
        for env in envs:
            env.stop()
        service.stop()
        redis.stop()
    md = markdown(results, args)
    (out_dir / f"rls-sizing-{stamp}.json").write_text(json.dumps(results, indent=1))
    (out_dir / f"rls-sizing-{stamp}.md").write_text(md)
    print(md)
    shutil.rmtree(work, ignore_errors=True)
    return 0


def markdown(r: dict, args) -> str:
    def ops(d: dict) -> tuple[int, int, dict]:
        x = dict(d["redis"])
        return x.pop("incrby", 0), x.pop("expire", 0), x

    rows, pings = [], []
    for key, label in (("S1", "sign-in attempt, 1 sliding installation bound (4 descriptors)"),
                       ("S2", "sign-in attempt, 2 sliding installation bounds (8 descriptors)"),
                       ("S1F", "sign-in attempt, 1 fixed installation bound (1 descriptor)")):
        d = r[key]
        n = d["attempts"]
        inc, exp, other = ops(d)
        pings.append((other, d["seconds"]))
        rows.append(f"| {label} | per attempt | {d['calls'] / n:.2f} | {d['service'] / n:.2f} "
                    f"| {inc / n:.2f} | {exp / n:.2f} | {(inc + exp) / n:.2f} |")
    notes = []
    for key in [k for k in r if k.startswith("F")]:
        d = r[key]
        s = d["seconds"]
        state = "active" if key.endswith("active") else "idle (no request since)"
        label = f"fleet bound, {d['keys']} addresses {state}, sync_ms {args.sync_ms}"
        inc, exp, other = ops(d)
        pings.append((other, s))
        rows.append(f"| {label} | per second | {d['calls'] / s:.2f} "
                    f"| {d['service'] / s:.2f} | {inc / s:.1f} | {exp / s:.1f} | {(inc + exp) / s:.1f} |")
        if d["sync_keys"]:
            k = d["sync_keys"]
            rows.append(f"| {label} | per key a sync sends | {d['calls'] / k:.3f} "
                        f"| {d['service'] / k:.3f} | {inc / k:.2f} | {exp / k:.2f} | {(inc + exp) / k:.2f} |")
        notes.append(f"{key}: {d.get('requests', 0)} requests over {s:.1f} s; "
                     f"{d['sync_calls']} sync calls sent {d['sync_keys']} keys "
                     f"({d['sync_keys'] / max(d['sync_calls'], 1):.1f} a call)")
    head = ("| one Envoy node | unit | calls to the service (Envoy) | calls (the service's count) "
            "| Redis INCRBY | Redis EXPIRE | Redis commands |\n|---|---|---|---|---|---|---|")
    other_total: dict = {}
    for o, _ in pings:
        for k, v in o.items():
            other_total[k] = other_total.get(k, 0) + v
    secs = sum(t for _, t in pings)
    text = (f"\nOther Redis commands, from the service itself whatever the load (per service "
            f"replica, not per node): "
            + ", ".join(f"{k.upper()} {v / secs:.1f}/s" for k, v in sorted(other_total.items()))
            + ".\n" + "\n".join(f"- {n}" for n in notes)
            + f"\n\nModule: {r['meta']['module']}; {r['meta']['redis']}.\n")
    return head + "\n" + "\n".join(rows) + "\n" + text


if __name__ == "__main__":
    sys.exit(main())
