"""A sign-in route with an installation bound: what the call to the rate-limit
service costs Envoy, and the latency it adds, beside the same route with node
bounds only, in interleaved rounds.

Driven by bench/signin.sh (which installs and builds everything first). Every
request (bench/signin.lua) is the same POST /up/login with a JSON body
{"username": "bench-<n>", "password": ...} and the header X-Login: bench-<n>,
n counting up (100,000 accounts, then again), proxied to a real upstream that
reads the whole body before it answers (a second Envoy: the buffer filter, then
a direct response; cheap, and C++). Variants, each its own Envoy pinned to
CPU 0 (--concurrency 1), a fresh one each round:

    0  no filter: the proxying alone
    A  ratebound, node bounds only (one per address, never refusing)
    B  A + an installation bound per account read from the JSON body (limit
       10^9 per minute, never refusing): one gRPC call to the real
       envoyproxy/ratelimit over a real Redis per request
    C  as B, the account read from the header X-Login (no body held)

and the call alone, each with one descriptor [("bound", "login.attempts"),
("account", X-Login)] to the same service and domain:

    N  Envoy's own ratelimit filter (envoy.filters.http.ratelimit), the
       descriptor from the route's rate_limits (request_headers action)
    G  bench/grpc-filter: a minimal wasm filter making one gRPC call
    H  the same over an HTTP/2 call-out framed as gRPC (ratebound's way)
    F  ratebound, the installation bound alone, "shape": "fixed" (one
       descriptor; the account hashed, the limit sent as an override)
    S  as F, "shape": "sliding" (four descriptors)

B and C are sliding (the default).

wrk (-t1, --connections, default 8), the upstream Envoy, the service and
Redis share CPU 1. Per measured run:

    Envoy CPU/request = (utime+stime of the front Envoy after - before) / requests completed

and the same for the upstream Envoy, the service and Redis (their own PIDs,
/proc/PID/stat), wrk's p50/p99 at --connections, then a --light-duration run
with 1 connection (one request at a time: the latency without queueing).

Results: bench/results/signin-<timestamp>.{md,json}.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402
import run  # noqa: E402 - run_wrk, cpu_busy_seconds, med_min_max, envoy_version, sh

import engines  # noqa: E402 - tests/e2e, on sys.path through benchlib
from launcher import grpc_cluster  # noqa: E402

ENVOY_CPU = run.ENVOY_CPU  # the measured Envoys
HELPER_CPU = run.WRK_CPU  # wrk, the upstream Envoy, the service, Redis
LUA = bl.BENCH / "signin.lua"
PATH = "/up/login"
CLI = bl.ROOT / "dist" / "ratebound"
TASKSET = shutil.which("taskset") or "taskset"

SERVICE = {"cluster": "rls", "domain": "benchsignin", "timeout_ms": 1000, "on_error": "deny"}
ADDRESS = {"name": "per_address", "per": "address", "limit": 1_000_000_000, "window": "PT1M"}
ACCOUNT = {"name": "attempts", "per": "account", "scope": "installation",
           "limit": 1_000_000_000, "window": "PT1M"}


def signin_config(instance: str, account: dict | None) -> dict:
    """The sign-in route: a bound per address; with `account`, also an
    installation bound per account (and the service it is counted by)."""
    route: dict = {"name": "login", "match": {"path_prefix": PATH}}
    if account is not None:
        route["account"] = account
    route["bounds"] = [ADDRESS] + ([ACCOUNT] if account is not None else [])
    cfg: dict = {"instance": instance}
    if account is not None:
        cfg["rate_limit_service"] = SERVICE
    cfg["routes"] = [route]
    return cfg


def installation_only(instance: str, shape: str) -> dict:
    """The sign-in route with the installation bound alone, the account from
    X-Login: what Envoy's own ratelimit filter does on the same route."""
    return {"instance": instance, "rate_limit_service": SERVICE,
            "routes": [{"name": "login", "match": {"path_prefix": PATH},
                        "account": {"header": "x-login"},
                        "bounds": [dict(ACCOUNT, shape=shape)]}]}


# The descriptor every call counts under, whoever sends it: what
# `ratebound rls-config` gives the bound login.attempts (its YAML rule).
BOUND = "login.attempts"


def native_filter() -> dict:
    """Envoy's own rate-limit filter, calling the same service for the same
    domain; the descriptor comes from the route's rate_limits (native_routes)."""
    return {"name": "envoy.filters.http.ratelimit",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit",
                "domain": SERVICE["domain"], "timeout": "1s", "failure_mode_deny": True,
                "rate_limit_service": {"grpc_service": {"envoy_grpc": {"cluster_name": SERVICE["cluster"]}},
                                       "transport_api_version": "V3"}}}


def native_routes() -> list[dict]:
    """The launcher's /up route with one rate limit: [("bound", BOUND),
    ("account", X-Login)], the limit from the service's YAML."""
    return [{"name": "upstream", "match": {"prefix": "/up"},
             "route": {"cluster": "upstream", "rate_limits": [{"actions": [
                 {"generic_key": {"descriptor_key": "bound", "descriptor_value": BOUND}},
                 {"request_headers": {"header_name": "x-login", "descriptor_key": "account"}}]}]}}]


def grpc_filter(transport: str) -> dict:
    """bench/grpc-filter: one ShouldRateLimit call, the native filter's descriptor."""
    words = f"{transport} {SERVICE['cluster']} {SERVICE['domain']} {BOUND} x-login"
    return bl.wasm_filter(f"grpc_{transport}", bl.GRPC_WASM, words)


@dataclass
class Variant:
    id: str
    key: str
    label: str
    filters: list
    config: dict | None = None
    env: bl.Envoy | None = None
    failed: str | None = None
    runs: list = field(default_factory=list)
    # Redis INCRBY per sign-in (the sanity check)
    incrby: int = 0
    routes: list | None = None


def build_variants() -> list[Variant]:
    rb = lambda cfg: bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)  # noqa: E731
    a = signin_config("signinA", None)
    b = signin_config("signinB", {"json": "username"})
    c = signin_config("signinC", {"header": "x-login"})
    f = installation_only("signinF", "fixed")
    s = installation_only("signinS", "sliding")
    return [
        Variant("0", "proxy", "no filter (proxying alone)", [], None),
        Variant("N", "native", "Envoy's ratelimit filter, account from X-Login", [native_filter()],
                None, incrby=1, routes=native_routes()),
        Variant("G", "wasm_grpc", "minimal wasm filter, one gRPC call (proxy_grpc_call)",
                [grpc_filter("grpc")], None, incrby=1),
        Variant("H", "wasm_http", "minimal wasm filter, the same call over an HTTP/2 call-out",
                [grpc_filter("http")], None, incrby=1),
        Variant("F", "ratebound_fixed", "ratebound: installation bound alone, fixed (1 descriptor)",
                [rb(f)], f, incrby=1),
        Variant("S", "ratebound_sliding", "ratebound: installation bound alone, sliding (4 descriptors)",
                [rb(s)], s, incrby=4),
        Variant("A", "node_only", "ratebound: node bound per address only", [rb(a)], a),
        Variant("B", "installation_json",
                "A + installation bound per account from the JSON body (sliding)", [rb(b)], b, incrby=4),
        Variant("C", "installation_header",
                "A + installation bound per account from a header (sliding)", [rb(c)], c, incrby=4),
    ]


# --------------------------------------------------------------------------
# The helpers on CPU 1: Redis, the service, the upstream Envoy

AOF = {
    "always": ["--appendonly", "yes", "--appendfsync", "always"],
    "everysec": ["--appendonly", "yes", "--appendfsync", "everysec"],
    "off": ["--appendonly", "no"],
}


class PinnedRedis(engines.Redis):
    """engines.Redis pinned to one CPU, with a choice of persistence (the e2e
    tests' Redis fsyncs every command: --redis-aof always)."""

    def __init__(self, tmpdir: Path, aof: str, cpu: int) -> None:
        self.aof, self.cpu = aof, cpu
        super().__init__(tmpdir)

    def start(self) -> "PinnedRedis":
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [TASKSET, "-c", str(self.cpu), self.exe, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", *AOF[self.aof], "--dir", str(self.dir), "--daemonize", "no"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir,
            start_new_session=True)
        self._wait_ping()
        return self


class PinnedService(engines.RateLimitService):
    """engines.RateLimitService started pinned to one CPU (so Go sizes
    GOMAXPROCS to it)."""

    def __init__(self, redis, config_yaml: str, tmpdir: Path, cpu: int) -> None:
        self.cpu = cpu
        super().__init__(redis, config_yaml, tmpdir)

    def start(self) -> "PinnedService":
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [TASKSET, "-c", str(self.cpu), str(engines.SERVICE_CMD)], env=self.env(), cwd=self.dir,
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        engines._wait_port(self.grpc_port, self.proc, "ratelimit service", self.log_path)
        self._wait_healthy()
        return self


def buffer_filter() -> dict:
    """Envoy's buffer filter: the request goes on only once its body is complete."""
    return {"name": "envoy.filters.http.buffer",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
                             "max_request_bytes": 65536}}



def post_login(port: int, user: str = "sanity") -> int:
    body = json.dumps({"username": user, "password": "x"}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{PATH}", data=body, method="POST",
                                 headers={"content-type": "application/json", "x-login": user})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


# --------------------------------------------------------------------------
# Measuring

def wrk(port: int, seconds: float, connections: int, latency: bool = False) -> dict:
    return run.run_wrk(port, seconds, connections, {}, script=LUA, latency=latency, path=PATH)


def measure(v: Variant, helpers: dict[str, int], args) -> dict:
    env = v.env
    assert env is not None
    if args.warmup > 0:
        wrk(env.port, args.warmup, args.connections)
    pids = {"envoy": env.pid, **helpers}
    cpu0 = {k: bl.cpu_seconds(p) for k, p in pids.items()}
    busy0 = {c: run.cpu_busy_seconds(c) for c in (ENVOY_CPU, HELPER_CPU)}
    w = wrk(env.port, args.duration, args.connections, latency=True)
    cpu1 = {k: bl.cpu_seconds(p) for k, p in pids.items()}
    busy1 = {c: run.cpu_busy_seconds(c) for c in (ENVOY_CPU, HELPER_CPU)}
    if not env.alive():
        raise RuntimeError("Envoy died during the run")
    n, secs = w["requests"], w["elapsed_s"]
    for k in pids:
        w[f"{k}_cpu_s"] = cpu1[k] - cpu0[k]
        w[f"{k}_us"] = (cpu1[k] - cpu0[k]) * 1e6 / n if n else float("nan")
    w["cpu_us_per_req"] = w["envoy_us"]
    w["envoy_util_pct"] = 100.0 * w["envoy_cpu_s"] / secs
    w["cpu0_busy_pct"] = 100.0 * (busy1[ENVOY_CPU] - busy0[ENVOY_CPU]) / secs
    w["cpu1_busy_pct"] = 100.0 * (busy1[HELPER_CPU] - busy0[HELPER_CPU]) / secs
    w["foreign_cpu0_pct"] = max(0.0, w["cpu0_busy_pct"] - 100.0 * w["envoy_cpu_s"] / secs)
    if args.light_duration > 0:
        light = wrk(env.port, args.light_duration, 1, latency=True)
        for k in ("rps", "non2xx", "p50_ms", "p90_ms", "p99_ms", "avg_ms"):
            if k in light:
                w[f"c1_{k}"] = light[k]
        w["c1_requests"] = light["requests"]
    return w


# --------------------------------------------------------------------------
# Summary

COLS = ["rps", "envoy_us", "envoy_util_pct", "upstream_us", "service_us", "redis_us", "p50_ms", "p99_ms",
        "c1_rps", "c1_p50_ms", "c1_p99_ms", "cpu1_busy_pct", "foreign_cpu0_pct"]
PAIRED = ["envoy_us", "p50_ms", "p99_ms", "c1_p50_ms", "c1_p99_ms"]


def summarize(variants: list[Variant]) -> list[dict]:
    by_id = {v.id: v for v in variants}
    rows = []
    for v in variants:
        ok = [r for r in v.runs if "envoy_us" in r]
        row = {"id": v.id, "variant": v.key, "label": v.label, "rounds": len(ok),
               "status": "ok" if ok else "failed", "note": v.failed or ""}
        if ok:
            for c in COLS:
                xs = [r[c] for r in ok if c in r]
                if xs:
                    row[f"{c}_med"], row[f"{c}_min"], row[f"{c}_max"] = run.med_min_max(xs)
            total = sum(r["requests"] for r in ok)
            row["requests"] = total
            row["non2xx_pct"] = 100.0 * sum(r["non2xx"] for r in ok) / total if total else 0.0
            row["c1_non2xx"] = sum(r.get("c1_non2xx", 0) for r in ok)
            row["socket_errors"] = sum(r["socket_errors"] for r in ok)
            # all the CPU the request costs on this machine but wrk's
            sums = [r["envoy_us"] + r["upstream_us"] + r["service_us"] + r["redis_us"] for r in ok]
            row["all_us_med"], row["all_us_min"], row["all_us_max"] = run.med_min_max(sums)
            if len(ok) < len(v.runs) or v.failed:
                row["status"] = "partial"
        # paired with A, 0 and the native filter, same round
        for ref in ("A", "0", "N"):
            if ref == v.id or ref not in by_id or not ok:
                continue
            theirs = {r["round"]: r for r in by_id[ref].runs if "envoy_us" in r}
            for c in PAIRED + ["all_us"]:
                diffs = []
                for r in ok:
                    t = theirs.get(r["round"])
                    if t is None:
                        continue
                    if c == "all_us":
                        mine = r["envoy_us"] + r["upstream_us"] + r["service_us"] + r["redis_us"]
                        base = t["envoy_us"] + t["upstream_us"] + t["service_us"] + t["redis_us"]
                        diffs.append(mine - base)
                    elif c in r and c in t:
                        diffs.append(r[c] - t[c])
                if diffs:
                    row[f"{c}_vs{ref}_med"], row[f"{c}_vs{ref}_min"], row[f"{c}_vs{ref}_max"] = \
                        run.med_min_max(diffs)
            # Envoy CPU as a multiple of the reference's, per round
            ratios = [r["envoy_us"] / theirs[r["round"]]["envoy_us"] for r in ok
                      if r["round"] in theirs and theirs[r["round"]]["envoy_us"] > 0]
            if ratios:
                row[f"ratio_vs{ref}_med"], row[f"ratio_vs{ref}_min"], row[f"ratio_vs{ref}_max"] = \
                    run.med_min_max(ratios)
        rows.append(row)
    return rows


def mmm(row: dict, key: str, nd: int = 1, unit: str = "", bold: bool = False) -> str:
    if f"{key}_med" not in row:
        return "–"
    med = f"{row[f'{key}_med']:,.{nd}f}{unit}"
    if bold:
        med = f"**{med}**"
    return f"{med} ({row[f'{key}_min']:,.{nd}f}–{row[f'{key}_max']:,.{nd}f})"


def diff(row: dict, key: str, nd: int = 1) -> str:
    if f"{key}_med" not in row:
        return "–"
    return f"{row[f'{key}_med']:+.{nd}f} ({row[f'{key}_min']:+.{nd}f}…{row[f'{key}_max']:+.{nd}f})"


def markdown(rows: list[dict], meta: dict) -> str:
    L = [f"# ratebound sign-in benchmark — {meta['timestamp']}", ""]
    L.append(f"- commit `{meta['commit']}`; `dist/ratebound.wasm` sha256 `{meta['wasm_sha256'][:16]}…`, "
             f"{meta['wasm_bytes']:,} bytes")
    L.append(f"- Envoy {meta['envoy_version']} under test pinned to CPU {ENVOY_CPU}, `--concurrency 1`, "
             f"a fresh one per variant each round; on CPU {HELPER_CPU}: "
             f"`wrk -t1 -c{meta['connections']} -d{meta['duration']:g}s --latency -s bench/signin.lua`, "
             f"the upstream Envoy (buffer filter + direct response, `--concurrency 1`), "
             f"envoyproxy/ratelimit and {meta['redis_version']} (append-only: `{meta['redis_aof']}`)")
    L.append(f"- every request: `POST {PATH}` with `{{\"username\":\"bench-<n>\",\"password\":\"…\"}}` "
             f"(64–68 bytes) and `X-Login: bench-<n>`, n counting up over {meta['accounts']:,} accounts")
    L.append(f"- {meta['rounds']} interleaved rounds (order rotated each round), {meta['warmup']:g} s "
             f"warm-up before each measured run, {meta['initial_warmup']:g} s after each start; "
             f"after each measured run, {meta['light_duration']:g} s with 1 connection (latency without queueing)")
    L.append(f"- machine: {meta['cpu_model']}, {meta['nproc']} CPUs, kernel {meta['kernel']}; "
             f"load average before {meta['load_before']}, after {meta['load_after']}; "
             f"wall time {meta['wall_s']:.0f} s")
    L.append("")
    L.append("CPU µs/req = the process's utime+stime delta over the measured run ÷ requests wrk "
             "completed. Medians over rounds, (min–max); \"vs\" columns are medians (min…max) of "
             "per-round paired differences (or ratios: × N) with that variant.")
    L.append("")
    L.append(f"**CPU per request** (at {meta['connections']} connections)")
    L.append("")
    L.append("| # | variant | req/s | Envoy CPU µs/req | +µs vs 0 | +µs vs N | × N (Envoy CPU) | Envoy busy | "
             "upstream Envoy µs/req | service µs/req | Redis µs/req | all four µs/req | +all vs 0 | non-2xx |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["status"] == "failed":
            L.append(f"| {r['id']} | {r['label']} | **failed** | | | | | | | | | | | {r['note']} |")
            continue
        L.append(f"| {r['id']} | {r['label']} | {mmm(r, 'rps', 0)} | {mmm(r, 'envoy_us', bold=True)} | "
                 f"{diff(r, 'envoy_us_vs0')} | {diff(r, 'envoy_us_vsN')} | {mmm(r, 'ratio_vsN', 2)} | "
                 f"{mmm(r, 'envoy_util_pct', 0, '%')} | {mmm(r, 'upstream_us')} | {mmm(r, 'service_us')} | "
                 f"{mmm(r, 'redis_us')} | {mmm(r, 'all_us')} | {diff(r, 'all_us_vs0')} | "
                 f"{r['non2xx_pct']:.1f}% |")
    L.append("")
    by = {r["id"]: r for r in rows if r["status"] != "failed"}
    if "N" in by and "0" in by and "envoy_us_vs0_med" in by["N"]:
        call = by["N"]["envoy_us_vs0_med"]
        added = [f"{i} {by[i]['envoy_us_vs0_med'] / call:.2f}×" for i in by
                 if i not in ("0", "N") and "envoy_us_vs0_med" in by[i] and call > 0]
        L.append(f"What each filter adds to the proxying (+µs vs 0), as a multiple of what Envoy's own "
                 f"filter adds ({call:+.1f} µs): " + ", ".join(added) + ".")
        L.append("")
    L.append("**Latency** (ms, wrk's percentiles)")
    L.append("")
    L.append(f"| # | p50 at {meta['connections']} conn. | p99 at {meta['connections']} conn. | "
             f"+p50 vs N | 1 conn.: req/s | 1 conn.: p50 | 1 conn.: p99 | +p50 vs N (1 conn.) | "
             f"+p99 vs N (1 conn.) |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["status"] == "failed":
            continue
        L.append(f"| {r['id']} | {mmm(r, 'p50_ms', 3)} | {mmm(r, 'p99_ms', 3)} | {diff(r, 'p50_ms_vsN', 3)} | "
                 f"{mmm(r, 'c1_rps', 0)} | {mmm(r, 'c1_p50_ms', 3)} | {mmm(r, 'c1_p99_ms', 3)} | "
                 f"{diff(r, 'c1_p50_ms_vsN', 3)} | {diff(r, 'c1_p99_ms_vsN', 3)} |")
    L.append("")
    util = [r for r in rows if "cpu1_busy_pct_med" in r]
    if util:
        L.append(f"CPU {HELPER_CPU} busy, median over rounds: "
                 + ", ".join(f"{r['id']} {r['cpu1_busy_pct_med']:.0f}%" for r in util)
                 + f"; CPU {ENVOY_CPU} busy with anything but the measured Envoy, median (max): "
                 + ", ".join(f"{r['id']} {r['foreign_cpu0_pct_med']:.1f}% ({r['foreign_cpu0_pct_max']:.1f}%)"
                             for r in util) + ".")
        L.append("")
    if meta.get("notes"):
        L.append("Notes:")
        L.extend(f"- {n}" for n in meta["notes"])
        L.append("")
    return "\n".join(L)


# --------------------------------------------------------------------------

def rewrite(path: Path) -> int:
    """The .md of a finished run again, from its .json (after a change to the tables)."""
    data = json.loads(path.read_text())
    variants = []
    for v in build_variants():
        runs = data["runs"].get(v.id)
        if runs is None:
            continue
        for r in runs:
            if "envoy_cpu_s" in r and r.get("elapsed_s"):
                r.setdefault("envoy_util_pct", 100.0 * r["envoy_cpu_s"] / r["elapsed_s"])
        v.runs = runs
        variants.append(v)
    md = markdown(summarize(variants), data["meta"])
    path.with_suffix(".md").write_text(md + "\n")
    print(md)
    return 0


def start_front(v: Variant, work: Path, suffix: str, upstream_port: int, rls_port: int) -> None:
    v.env = bl.bench_envoy(f"v{v.id}-{v.key}{suffix}", v.filters, work, cpu=ENVOY_CPU,
                           upstream_port=upstream_port, routes=v.routes,
                           clusters=[grpc_cluster("rls", rls_port)]).start(wait=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10, help="seconds per measured run")
    ap.add_argument("--warmup", type=int, default=1, help="seconds of warm-up before each run")
    ap.add_argument("--initial-warmup", type=int, default=3, help="seconds per variant after start-up")
    ap.add_argument("--light-duration", type=int, default=5,
                    help="seconds at 1 connection after each measured run (0: none)")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--accounts", type=int, default=100_000, help="distinct usernames, cycled")
    ap.add_argument("--redis-aof", choices=sorted(AOF), default="everysec",
                    help="Redis persistence (the e2e tests use always)")
    ap.add_argument("--only", default="", help="comma-separated variant ids (default: 0,N,G,H,F,S,A,B,C)")
    ap.add_argument("--out", default=str(bl.BENCH / "results"))
    ap.add_argument("--tag", default="")
    ap.add_argument("--rewrite", metavar="RESULT.json",
                    help="only rewrite the .md of a finished run from its .json")
    args = ap.parse_args()
    if args.rewrite:
        return rewrite(Path(args.rewrite))

    t0 = time.monotonic()
    started = bl.start_run("signin", args.out, args.tag, (bl.RATEBOUND_WASM, CLI, engines.SERVICE_CMD),
                       "bench/signin.sh")
    if started is None:
        return 2
    out_dir, stamp, work = started
    os.environ["SIGNIN_ACCOUNTS"] = str(args.accounts)  # read by bench/signin.lua

    variants = build_variants()
    if args.only:
        keep = set(args.only.split(","))
        variants = [v for v in variants if v.id in keep]

    commit = run.sh(["git", "-C", str(bl.ROOT), "rev-parse", "HEAD"])
    dirty = run.sh(["git", "-C", str(bl.ROOT), "status", "--porcelain", "--untracked-files=no"])
    meta = {
        "timestamp": stamp,
        "commit": commit + ("+dirty" if dirty else ""),
        "wasm_sha256": hashlib.sha256(bl.RATEBOUND_WASM.read_bytes()).hexdigest(),
        "wasm_bytes": bl.RATEBOUND_WASM.stat().st_size,
        "envoy_version": run.envoy_version(),
        "redis_version": "Redis " + " ".join(re.findall(r"v=(\S+)", run.sh(["redis-server", "--version"]))),
        "redis_aof": args.redis_aof,
        "connections": args.connections, "duration": args.duration, "warmup": args.warmup,
        "initial_warmup": args.initial_warmup, "light_duration": args.light_duration,
        "rounds": args.rounds, "accounts": args.accounts,
        "nproc": os.cpu_count(),
        "cpu_model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                           if l.startswith("model name")), "?"),
        "kernel": platform.release(),
        "load_before": " ".join(open("/proc/loadavg").read().split()[:3]),
        "notes": [],
        "configs": {v.id: v.config for v in variants},
    }
    print(f"signin: {len(variants)} variants × {args.rounds} rounds × {args.duration:g} s "
          f"(+{args.warmup:g} s warm-up, +{args.light_duration:g} s at 1 connection); work dir {work}",
          flush=True)

    redis = svc = upstream = None
    try:
        redis = PinnedRedis(work, args.redis_aof, HELPER_CPU)
        svc = PinnedService(redis, engines.rls_yaml(signin_config("x", {"json": "username"}), work),
                            work, HELPER_CPU)
        upstream = bl.bench_envoy("upstream", [buffer_filter()], work, cpu=HELPER_CPU).start(wait=False)
        if (why := bl.wait_ready(upstream)):
            raise RuntimeError(f"upstream Envoy: {why}\n{upstream.log_tail(10)}")
        helpers = {"upstream": upstream.pid, "service": svc.proc.pid, "redis": redis.proc.pid}
        print(f"signin: Redis pid {redis.proc.pid} port {redis.port}, service pid {svc.proc.pid} "
              f"grpc {svc.grpc_port}, upstream Envoy pid {upstream.pid} port {upstream.port}", flush=True)

        def ready(v: Variant, rnd: int) -> None:
            failed = bl.wait_ready(v.env)
            if failed:
                v.failed = f"round {rnd}: {failed}"
                print(f"signin: variant {v.id} FAILED: {failed}\n{v.env.log_tail(10)}", flush=True)
                v.env.stop()
                return
            # The previous variant's warm-up may still have requests in
            # flight (wrk stops without waiting for them): let Redis settle.
            calls0 = redis.commandstats().get("incrby", 0)
            for _ in range(20):
                time.sleep(0.25)
                settled, calls0 = calls0, redis.commandstats().get("incrby", 0)
                if settled == calls0:
                    break
            status = post_login(v.env.port)
            calls = redis.commandstats().get("incrby", 0) - calls0
            want_calls = v.incrby
            if status != 200 or calls != want_calls:
                v.failed = f"round {rnd}: sanity check: status {status}, {calls} INCRBY (want 200, {want_calls})"
                print(f"signin: variant {v.id} FAILED {v.failed}", flush=True)
                v.env.stop()
                return
            if args.initial_warmup > 0:
                wrk(v.env.port, args.initial_warmup, args.connections)

        for v in variants:
            start_front(v, work, "", upstream.port, svc.grpc_port)
        for v in variants:
            ready(v, 1)
            if not v.failed:
                print(f"signin: variant {v.id} ready (pid {v.env.pid}, port {v.env.port})", flush=True)

        live = [v for v in variants if not v.failed]
        for rnd in range(args.rounds):
            if rnd > 0:
                for v in live:
                    v.env.stop()
                    start_front(v, work, f"-r{rnd + 1}", upstream.port, svc.grpc_port)
                for v in live:
                    ready(v, rnd + 1)
            k = rnd % max(1, len(live))
            order = live[k:] + live[:k]
            line = []
            for pos, v in enumerate(order):
                if v.failed:
                    line.append(f"{v.id}:skipped")
                    continue
                try:
                    r = measure(v, helpers, args)
                    r.update(round=rnd + 1, order=pos + 1)
                    v.runs.append(r)
                    line.append(f"{v.id}:{r['envoy_us']:.1f}µs/{r['rps']:,.0f}rps/"
                                f"p50 {r['p50_ms']:.2f}ms/c1 p50 {r.get('c1_p50_ms', float('nan')):.3f}ms")
                except Exception as e:  # noqa: BLE001 - record and carry on
                    v.runs.append({"round": rnd + 1, "order": pos + 1, "error": str(e)[:300]})
                    line.append(f"{v.id}:FAILED")
                    print(f"signin: variant {v.id} failed in round {rnd + 1}: {e}\n{v.env.log_tail(8)}",
                          flush=True)
            print(f"signin: round {rnd + 1}/{args.rounds}: " + "  ".join(line), flush=True)
            live = [v for v in live if not v.failed]

        # The filters' counters (last round's Envoys): nothing refused, no service errors.
        for v in variants:
            if v.env is None or not v.env.alive() or v.config is None:
                continue
            try:
                stats = v.env.stats("ratebound")
            except OSError:
                continue
            keep = {k.removeprefix("wasmcustom.ratebound."): x for k, x in stats.items()
                    if re.search(r"\.(allowed|refused|rls_calls|rls_errors|overflow)$", k)}
            if keep:
                meta["notes"].append(f"variant {v.id}, last round's Envoy, counters after the run: "
                                     + ", ".join(f"`{k}` {x}" for k, x in sorted(keep.items())))
        meta["notes"].append(f"Redis INCRBY calls over the whole run (sanity checks and warm-ups "
                             f"included): {redis.commandstats().get('incrby', 0):,}")
    finally:
        for v in variants:
            if v.env is not None:
                v.env.stop()
        for h in (upstream, svc, redis):
            if h is not None:
                h.stop()

    meta["load_after"] = " ".join(open("/proc/loadavg").read().split()[:3])
    meta["wall_s"] = time.monotonic() - t0
    rows = summarize(variants)
    md = markdown(rows, meta)
    (out_dir / f"signin-{stamp}.md").write_text(md + "\n")
    (out_dir / f"signin-{stamp}.json").write_text(json.dumps(
        {"meta": meta, "summary": rows,
         "runs": {v.id: [{k: x for k, x in r.items() if k != "raw"} for r in v.runs] for v in variants}},
        indent=1, default=str))
    if not any(v.failed for v in variants):
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"signin: configurations and logs kept in {work} (a variant failed)")
    print()
    print(md)
    print(f"signin: wrote {out_dir}/signin-{stamp}.{{md,json}}")
    return 0 if any(r["status"] != "failed" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
