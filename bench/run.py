"""Envoy CPU time per request: ratebound beside its baselines, in interleaved rounds.

Driven by bench/run.sh (which installs and builds everything first). Every
variant gets its own Envoy (pinned to CPU 0, --concurrency 1), all started up
front; in each round every variant is measured once, in a rotated order, with
wrk pinned to CPU 1. Per measured run:

    CPU/request = (utime+stime of the Envoy PID after - before) / requests completed

where "requests completed" is wrk's total, non-2xx responses included.
Results: bench/results/<timestamp>.{md,csv,png}, <timestamp>-rounds.csv, and
latest.{md,csv,png}.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

ENVOY_CPU = 0
WRK_CPU = 1


@dataclass
class Variant:
    id: str
    key: str
    label: str
    filters: list
    headers: dict = field(default_factory=dict)
    expect_status: int = 200  # status of a request once warmed up
    expect_charge: int | None = None  # a cost variant: RateLimit-Remaining falls by this a request
    baseline: str = "2"  # the variant whose cost this one adds to
    optional: bool = False  # measured only when named in --only
    routes: list | None = None  # the route table (default: `/` answers "ok")
    script: tuple | None = None  # a wrk Lua script and its arguments: (path, [args])
    sanity_requests: int = 2  # requests of the sanity check; the last must get expect_status
    lrl_tiers: str | None = None  # local_ratelimit tiers: their stat prefix, checked after the run
    env: bl.Envoy | None = None
    failed: str | None = None
    runs: list = field(default_factory=list)  # per round: dict


def build_variants(jwks: str, token: str) -> list[Variant]:
    noop = lambda: bl.wasm_filter("noop", bl.NOOP_WASM, None)  # noqa: E731
    rb = lambda cfg: bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)  # noqa: E731
    auth = {"Authorization": f"Bearer {token}"}
    return [
        Variant("1", "no_filter", "no filter", [], baseline="1"),
        Variant("2", "noop_wasm", "do-nothing Rust wasm filter", [noop()], baseline="1"),
        Variant("3", "local_ratelimit", "native local_ratelimit (never refuses)",
                [bl.local_ratelimit_filter()], baseline="1"),
        Variant("4", "ratebound_address", "ratebound: 1 bound per address",
                [rb(bl.CFG_ONE_ADDRESS)]),
        Variant("5", "ratebound_three_jwt", "ratebound: route + address + JWT user",
                [bl.jwt_authn_filter(jwks), rb(bl.CFG_THREE_BOUNDS)], headers=auth, baseline="7"),
        Variant("6", "ratebound_refusing", "ratebound refusing (1 per day per address)",
                [rb(bl.CFG_REFUSING)], expect_status=429),
        Variant("7", "jwt_noop_wasm", "jwt_authn + do-nothing wasm (baseline of 5)",
                [bl.jwt_authn_filter(jwks), noop()], headers=auth),
    ] + identity_variants(jwks, auth) + probe_variants(jwks, auth) + compare_variants(jwks, auth) \
      + profile_variants() + cost_variants() + scale_variants() + tier_variants()


def tier_variants() -> list[Variant]:
    """The issue's tiers side by side (`--only 1,2,3,4,6,70,71,72,73`, issue 41's
    outcome 4): "10 a second, 300 a minute, 5,000 an hour per address" as Envoy's
    local_ratelimit (a descriptor per tier, a token bucket per address) and as
    ratebound (three bounds per address: one lane, one shared write). 70 and 71
    hold the tiers' limits times bl.TIERS_SCALE, so nothing is refused; 72 and 73
    the limits as written, so after the first 10 requests of a second every
    request is refused (by the second's tier)."""
    rb = lambda cfg: bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)  # noqa: E731
    return [
        Variant("70", "lrl_tiers", "local_ratelimit: 3 tiers per address (×100,000, never refuses)",
                [bl.local_ratelimit_tiers("bench_lrl_tiers", bl.TIERS_SCALE)], baseline="1",
                optional=True, lrl_tiers="bench_lrl_tiers"),
        Variant("71", "ratebound_tiers", "ratebound: 3 tiers per address (×100,000, never refuses)",
                [rb(bl.ratebound_tiers("benchtiers", bl.TIERS_SCALE))], baseline="4", optional=True),
        Variant("72", "lrl_tiers_refusing", "local_ratelimit: 3 tiers per address, refusing (10/s)",
                [bl.local_ratelimit_tiers("bench_lrl_tiers_refusing")], baseline="70",
                expect_status=429, sanity_requests=25, optional=True,
                lrl_tiers="bench_lrl_tiers_refusing"),
        Variant("73", "ratebound_tiers_refusing", "ratebound: 3 tiers per address, refusing (10/s)",
                [rb(bl.ratebound_tiers("benchtiersrefuse"))], baseline="71",
                expect_status=429, sanity_requests=25, optional=True),
    ]


def lrl_tiers_check(v: Variant, stats: dict) -> str:
    """Did every request match a tier's descriptor? The default bucket (1 token
    a second) takes only requests that match none: with ok in the hundreds of
    thousands and nothing refused (70), or all but a few per second refused by
    the descriptors (72), they matched."""
    pre = f"{v.lrl_tiers}.http_local_rate_limit."
    ok, limited = stats.get(pre + "ok"), stats.get(pre + "rate_limited")
    if ok is None or limited is None:
        return f"variant {v.id}: CHECK FAILED: no local_ratelimit stats under `{pre}`"
    refusing = v.expect_status == 429
    applied = (limited > 0 and ok < limited) if refusing else (limited == 0 and ok > 1000)
    return (f"variant {v.id}: the tiers' descriptors {'applied' if applied else 'CHECK FAILED'}: "
            f"`ok` {ok:,}, `rate_limited` {limited:,} (a request matching no descriptor takes the "
            f"default bucket of 1 token a second)")


def scale_variants() -> list[Variant]:
    """How the cost grows (`--only 2,4,60,61,62,63,64`, issue 27's outcome 4;
    the meter's deterministic rows in BENCHMARKS.md): 10 and 100 bounds per
    address on the route (4 is 1), and one bound per user (a trusted header)
    with 10 and with 10,000 users taking turns (bench/users.lua), beside the
    do-nothing filter under the same script (62)."""
    noop = lambda: bl.wasm_filter("noop", bl.NOOP_WASM, None)  # noqa: E731
    rb = lambda cfg: bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)  # noqa: E731

    def address_bounds(n: int) -> dict:
        return bl.ratebound_config(f"bench{n}b", [
            {"name": f"addr{i}", "per": "address", "limit": 1_000_000_000, "window": "PT1M"}
            for i in range(n)])

    per_user = bl.ratebound_config(
        "benchusers", [{"name": "user", "per": "user", "limit": 1_000_000_000, "window": "PT1M"}],
        identity={"header": {"user": "x-user-id"}})
    users = lambda n: (bl.BENCH / "users.lua", [n])  # noqa: E731
    return [
        Variant("60", "users_10", "1 bound per user (trusted header), 10 users in turn",
                [rb(per_user)], script=users(10), baseline="62", optional=True),
        Variant("61", "users_10000", "1 bound per user (trusted header), 10,000 users in turn",
                [rb(per_user)], script=users(10_000), baseline="62", optional=True),
        Variant("62", "noop_users", "do-nothing wasm, 10,000 users' headers (baseline of 60, 61)",
                [noop()], script=users(10_000), optional=True),
        Variant("63", "bounds_10", "10 bounds per address on the route",
                [rb(address_bounds(10))], optional=True),
        Variant("64", "bounds_100", "100 bounds per address on the route",
                [rb(address_bounds(100))], optional=True),
    ]


def cost_variants() -> list[Variant]:
    """Cost bounds (`--only 2,4,50,51,52,53,54,55,56`, docs/cost.md): one
    bound per address counting tokens from an answer Envoy serves itself
    (direct_response; the filter reads that body as any other), each beside
    the do-nothing filter on the same answer. 51: an OpenAI-style JSON body
    (BENCHMARKS.md: "Cost bounds"); 53: the same answer as an event stream,
    usage in its last event; 54: a cost the request names (x-cost: 1); 55: a
    cost the response names in a header."""
    noop = lambda: bl.wasm_filter("noop", bl.NOOP_WASM, None)  # noqa: E731
    rb = lambda cfg: bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)  # noqa: E731
    json_route = bl.direct_routes(bl.CHAT_JSON, "application/json")
    sse_route = bl.direct_routes(bl.CHAT_SSE, "text/event-stream")
    header_route = bl.direct_routes(headers={"x-tokens": "300"})
    return [
        Variant("50", "noop_json_answer", "do-nothing wasm, JSON chat answer (baseline of 51)",
                [noop()], routes=json_route, optional=True),
        Variant("51", "cost_json", "ratebound: tokens from a JSON body's usage",
                [rb(bl.CFG_COST_JSON)], routes=json_route, baseline="50", optional=True,
                expect_charge=300),
        Variant("52", "noop_sse_answer", "do-nothing wasm, event-stream answer (baseline of 53)",
                [noop()], routes=sse_route, optional=True),
        Variant("53", "cost_sse", "ratebound: tokens from an event stream's last usage",
                [rb(bl.CFG_COST_SSE)], routes=sse_route, baseline="52", optional=True,
                expect_charge=300),
        Variant("54", "cost_request_header", "ratebound: a cost in a request header (x-cost: 1)",
                [rb(bl.CFG_COST_REQUEST_HEADER)], headers={"x-cost": "1"}, optional=True,
                expect_charge=1),
        Variant("56", "noop_header_answer", "do-nothing wasm, answer with x-tokens (baseline of 55)",
                [noop()], routes=header_route, optional=True),
        Variant("55", "cost_response_header", "ratebound: tokens from a response header",
                [rb(bl.CFG_COST_RESPONSE_HEADER)], routes=header_route, baseline="56",
                optional=True, expect_charge=300),
    ]


def profile_variants() -> list[Variant]:
    """What each header profile costs (`--only 2,4,41,42,43`): variant 4's
    bound with the x-ratelimit fields, the draft's structured pair alone
    (two fields instead of three), and both sets (five fields)."""
    def with_profile(instance: str, **extra) -> dict:
        return {**bl.CFG_ONE_ADDRESS, "instance": instance, **extra}

    def rb(cfg: dict) -> dict:
        return bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)

    return [
        Variant("41", "profile_x_ratelimit", "variant 4, header_profile x-ratelimit",
                [rb(with_profile("benchx", header_profile="x-ratelimit"))], optional=True),
        Variant("42", "profile_draft", "variant 4, header_profile draft (2 fields)",
                [rb(with_profile("benchdraft", header_profile="draft"))], optional=True),
        Variant("43", "profile_structured", "variant 4 with structured_headers (5 fields)",
                [rb(with_profile("benchstruct", structured_headers=True))], optional=True),
    ]


def identity_variants(jwks: str, auth: dict) -> list[Variant]:
    """What each identity source adds (`--only 2,4,7,9,10,11`): each variant
    differs from its baseline by the source alone."""
    rb = lambda cfg: bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)  # noqa: E731
    user = [{"name": "user", "per": "user", "limit": 1_000_000_000, "window": "PT1M"}]
    header_user = bl.ratebound_config("benchhdr", user, identity={"header": {"user": "x-user-id"}})
    jwt_user = bl.ratebound_config("benchjwt", user, identity={"jwt": {"user_claim": "sub"}})
    three_hdr = bl.ratebound_config(
        "bench3h",
        [{"name": "route", "per": "route", "limit": 4_000_000_000, "window": "PT1M"},
         {"name": "addr", "per": "address", "limit": 1_000_000_000, "window": "PT1M"}] + user,
        identity={"header": {"user": "x-jwt-sub"}})
    jwt_hdr = lambda: bl.jwt_authn_filter(jwks, claim_header="x-jwt-sub")  # noqa: E731
    return [
        Variant("12", "three_jwt_header", "as 5, the JWT user read from jwt_authn's claim_to_headers",
                [jwt_hdr(), rb(three_hdr)], headers=auth, baseline="13", optional=True),
        Variant("13", "jwt_header_noop", "jwt_authn (claim_to_headers) + do-nothing wasm (baseline of 12)",
                [jwt_hdr(), bl.wasm_filter("noop", bl.NOOP_WASM, None)], headers=auth, optional=True),
        Variant("9", "header_user", "1 bound per user from a trusted header (vs 4)",
                [rb(header_user)], headers={"x-user-id": "bench-user"}, baseline="4", optional=True),
        Variant("10", "jwt_address", "jwt_authn + 1 bound per address (baseline of 11)",
                [bl.jwt_authn_filter(jwks), rb(bl.CFG_ONE_ADDRESS)], headers=auth,
                baseline="7", optional=True),
        Variant("11", "jwt_user", "jwt_authn + 1 bound per user from the JWT (vs 10)",
                [bl.jwt_authn_filter(jwks), rb(jwt_user)], headers=auth, baseline="10",
                optional=True),
    ]


PROBES = {
    "20": ["address"],
    "21": ["time"],
    "22": ["header"],
    "23": ["shared_get"],
    "24": ["shared"],
    "25": ["replace3"],
    "26": ["add3"],
    "27": ["refuse"],
    "28": ["refuse_nobody"],
    "29": ["address", "time", "shared", "replace3"],  # variant 4's host calls, nothing else
    "30": ["address", "time", "shared_get", "refuse"],  # variant 6's host calls before refusals were remembered
    "36": ["address", "time", "shared", "add3"],  # variant 4's host calls before its writes were remembered
    "37": ["address", "time", "refuse"],  # variant 6's host calls now
    "38": ["address", "time", "shared_set", "add3"],  # variant 4's host calls with its writes remembered
    "39": ["address", "time", "add3"],  # the same without the write: a worker-local lease's ceiling
}


# The same probes behind jwt_authn (baseline 7), with its token.
JWT_PROBES = {
    "31": ["address"],
    "32": ["shared"],
    "33": ["add3"],
    "34": ["time"],
    "35": ["address", "time", "shared", "add3"],  # variant 10's host calls
}


def probe_variants(jwks: str, auth: dict) -> list[Variant]:
    """Where the time goes (`--only 2,20,21,...`): the probe filter doing one
    kind of host call per request, priced against the do-nothing filter
    (20-30) or against jwt_authn + the do-nothing filter (31-34)."""
    plain = [Variant(i, "probe_" + "_".join(ops), "probe: " + " + ".join(ops),
                     [bl.wasm_filter("probe", bl.PROBE_WASM, ops)],
                     expect_status=429 if any(o.startswith("refuse") for o in ops) else 200,
                     optional=True)
             for i, ops in PROBES.items()]
    behind_jwt = [Variant(i, "jwt_probe_" + "_".join(ops), "jwt_authn + probe: " + " + ".join(ops),
                          [bl.jwt_authn_filter(jwks), bl.wasm_filter("probe", bl.PROBE_WASM, ops)],
                          headers=auth, baseline="7", optional=True)
                  for i, ops in JWT_PROBES.items()]
    return plain + behind_jwt


def compare_variants(jwks: str, auth: dict) -> list[Variant]:
    """RATEBOUND_COMPARE_WASM=path adds variant 8: another build of the module
    with variant 4's configuration, measured in the same interleaved rounds
    (an A/B test of a change to the hot path); and, named in --only, 18 and
    16: the same build with variant 5's and variant 6's configurations."""
    other = os.environ.get("RATEBOUND_COMPARE_WASM")
    if not other:
        return []
    path = Path(other).resolve()
    return [Variant("8", "compare_address", f"variant 4 with {path.name} (compare)",
                    [bl.wasm_filter("ratebound", path, bl.CFG_ONE_ADDRESS)]),
            Variant("18", "compare_three_jwt", f"variant 5 with {path.name} (compare)",
                    [bl.jwt_authn_filter(jwks), bl.wasm_filter("ratebound", path, bl.CFG_THREE_BOUNDS)],
                    headers=auth, baseline="7", optional=True),
            Variant("16", "compare_refusing", f"variant 6 with {path.name} (compare)",
                    [bl.wasm_filter("ratebound", path, bl.CFG_REFUSING)], expect_status=429,
                    optional=True)]


# --------------------------------------------------------------------------
# wrk

_UNITS = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


def run_wrk(port: int, seconds: float, connections: int, headers: dict, *,
            script: Path | tuple | None = None, latency: bool = False, path: str = "/") -> dict:
    """One wrk run (pinned to WRK_CPU). script: a wrk Lua script, or (script,
    [its arguments]) (it then writes the requests; bench/signin.py,
    bench/users.lua); latency: also parse wrk's
    --latency distribution into p50_ms, p90_ms, p99_ms (and avg_ms)."""
    cmd = ["taskset", "-c", str(WRK_CPU), "wrk", "-t1", f"-c{connections}", f"-d{int(seconds)}s",
           "--timeout", "5s"]
    for k, v in headers.items():
        cmd += ["-H", f"{k}: {v}"]
    script_args: list = []
    if isinstance(script, tuple):
        script, script_args = script
    if script is not None:
        cmd += ["-s", str(script)]
    if latency:
        cmd.append("--latency")
    cmd.append(f"http://127.0.0.1:{port}{path}")
    if script_args:
        cmd += ["--", *map(str, script_args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
    text = out.stdout
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", text)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"wrk failed (exit {out.returncode}): {text}{out.stderr}")
    requests = int(m.group(1))
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(3)]
    elapsed = float(m.group(2)) * scale
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    return {
        "requests": requests,
        "elapsed_s": elapsed,
        "rps": float(rps.group(1)) if rps else requests / elapsed,
        "non2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": sum(int(x) for x in sock.groups()) if sock else 0,
        "raw": text,
        **(wrk_latency(text) if latency else {}),
    }


_TIME = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}


def wrk_latency(text: str) -> dict:
    """avg_ms and p50/p75/p90/p99_ms from wrk --latency output."""
    out = {}
    m = re.search(r"Latency\s+([\d.]+)(us|ms|s|m)\b", text)
    if m:
        out["avg_ms"] = float(m.group(1)) * _TIME[m.group(2)]
    for pct, val, unit in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.M):
        out[f"p{pct}_ms"] = float(val) * _TIME[unit]
    return out


def cpu_busy_seconds(cpu: int) -> float:
    """Busy (non-idle, non-iowait) time of one CPU, from /proc/stat."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                x = [int(t) for t in line.split()[1:]]
                return (sum(x[:8]) - x[3] - x[4]) / bl.CLK_TCK
    return float("nan")


def measure(v: Variant, seconds: float, warmup: float, connections: int) -> dict:
    env = v.env
    assert env is not None
    if warmup > 0:
        run_wrk(env.port, warmup, connections, v.headers, script=v.script)
    busy0 = cpu_busy_seconds(ENVOY_CPU)
    before = bl.cpu_seconds(env.pid)
    w = run_wrk(env.port, seconds, connections, v.headers, script=v.script)
    after = bl.cpu_seconds(env.pid)
    busy1 = cpu_busy_seconds(ENVOY_CPU)
    if not env.alive():
        raise RuntimeError("Envoy died during the run")
    cpu = after - before
    w["cpu_s"] = cpu
    w["cpu_us_per_req"] = cpu * 1e6 / w["requests"] if w["requests"] else float("nan")
    w["envoy_cpu_util"] = cpu / w["elapsed_s"] if w["elapsed_s"] else float("nan")
    # CPU 0 busy time not spent by this Envoy (other processes, interrupts): the noise
    w["foreign_cpu0_pct"] = max(0.0, 100.0 * ((busy1 - busy0) - cpu) / w["elapsed_s"]) if w["elapsed_s"] else float("nan")
    return w


# --------------------------------------------------------------------------
# summary

def med_min_max(xs: list[float]) -> tuple[float, float, float]:
    return statistics.median(xs), min(xs), max(xs)


def summarize(variants: list[Variant]) -> list[dict]:
    by_id = {v.id: v for v in variants}

    def per_round(v: Variant) -> dict[int, float]:
        return {r["round"]: r["cpu_us_per_req"] for r in v.runs if "cpu_us_per_req" in r}

    rows = []
    for v in variants:
        ok = [r for r in v.runs if "cpu_us_per_req" in r]
        row = {"id": v.id, "variant": v.key, "label": v.label, "rounds": len(ok),
               "status": "ok" if ok else "failed", "note": v.failed or ""}
        if ok:
            row["rps_med"], row["rps_min"], row["rps_max"] = med_min_max([r["rps"] for r in ok])
            row["cpu_med"], row["cpu_min"], row["cpu_max"] = med_min_max([r["cpu_us_per_req"] for r in ok])
            total = sum(r["requests"] for r in ok)
            row["requests"] = total
            row["non2xx_pct"] = 100.0 * sum(r["non2xx"] for r in ok) / total if total else 0.0
            row["socket_errors"] = sum(r["socket_errors"] for r in ok)
            row["envoy_util_med"] = statistics.median(r["envoy_cpu_util"] for r in ok)
            row["foreign_cpu0_pct_med"] = statistics.median(r["foreign_cpu0_pct"] for r in ok)
            row["foreign_cpu0_pct_max"] = max(r["foreign_cpu0_pct"] for r in ok)
            if len(ok) < len(v.runs) or v.failed:
                row["status"] = "partial"
        rows.append(row)

    rows_by_id = {r["id"]: r for r in rows}
    for row in rows:
        if row["status"] == "failed":
            continue
        v = by_id[row["id"]]
        for ref, col in (("1", "x_no_filter"), ("2", "x_noop")):
            ref_row = rows_by_id.get(ref)
            row[col] = row["cpu_med"] / ref_row["cpu_med"] if ref_row and ref_row.get("cpu_med") else None
        # µs added: median over rounds of the paired difference (same round), min-max
        for ref, prefix in (("2", "plus_noop"), (v.baseline, "plus_base")):
            mine, theirs = per_round(v), per_round(by_id[ref]) if ref in by_id else {}
            diffs = [mine[k] - theirs[k] for k in mine if k in theirs]
            if diffs:
                row[f"{prefix}_med"], row[f"{prefix}_min"], row[f"{prefix}_max"] = med_min_max(diffs)
        row["baseline"] = v.baseline
    return rows


def fmt(x, nd=1, plus=False):
    if x is None:
        return "–"
    s = f"{x:+.{nd}f}" if plus else f"{x:,.{nd}f}"
    return s


def markdown(rows: list[dict], meta: dict) -> str:
    L = []
    L.append(f"# ratebound benchmark — {meta['timestamp']}")
    L.append("")
    L.append(f"- commit `{meta['commit']}`; `dist/ratebound.wasm` sha256 `{meta['wasm_sha256'][:16]}…`, "
             f"{meta['wasm_bytes']:,} bytes; do-nothing module {meta['noop_bytes']:,} bytes")
    L.append(f"- Envoy {meta['envoy_version']}, pinned to CPU {ENVOY_CPU}, `--concurrency 1`; "
             f"`taskset -c {WRK_CPU} wrk -t1 -c{meta['connections']} -d{meta['duration']:g}s` "
             f"against a `direct_response` route")
    L.append(f"- {meta['rounds']} interleaved rounds (order rotated each round), {meta['warmup']:g} s "
             f"warm-up before each measured run, {meta['initial_warmup']:g} s after start-up")
    L.append(f"- machine: {meta['cpu_model']}, {meta['nproc']} CPUs, kernel {meta['kernel']}; "
             f"load average before {meta['load_before']}, after {meta['load_after']}; "
             f"wall time {meta['wall_s']:.0f} s")
    L.append("")
    L.append("CPU/request = Envoy utime+stime delta over the measured run ÷ requests wrk completed "
             "(non-2xx included). Medians over rounds, (min–max). ×1 and ×2 are ratios of medians "
             "to variants 1 and 2; +µs are medians (min–max) of per-round paired differences.")
    L.append("")
    L.append("| # | variant | req/s | Envoy CPU µs/req | ×1 no filter | ×2 do-nothing | +µs over 2 | +µs over own baseline | non-2xx |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["status"] == "failed":
            L.append(f"| {r['id']} | {r['label']} | **failed** | — | — | — | — | — | {r['note']} |")
            continue
        rps = f"{r['rps_med']:,.0f} ({r['rps_min']:,.0f}–{r['rps_max']:,.0f})"
        cpu = f"**{r['cpu_med']:.1f}** ({r['cpu_min']:.1f}–{r['cpu_max']:.1f})"
        x1 = f"{r['x_no_filter']:.2f}" if r.get("x_no_filter") else "–"
        x2 = f"{r['x_noop']:.2f}" if r.get("x_noop") else "–"
        if r["id"] in ("1", "2") or "plus_noop_med" not in r:
            p2 = "–"
        else:
            p2 = f"{r['plus_noop_med']:+.1f} ({r['plus_noop_min']:+.1f}…{r['plus_noop_max']:+.1f})"
        if r["id"] in ("1",) or "plus_base_med" not in r or r["baseline"] == r["id"]:
            pb = "–"
        else:
            pb = (f"{r['plus_base_med']:+.1f} over {r['baseline']} "
                  f"({r['plus_base_min']:+.1f}…{r['plus_base_max']:+.1f})")
        n2 = f"{r['non2xx_pct']:.1f}%"
        if 99.95 <= r["non2xx_pct"] < 100.0:
            n2 = f"{r['non2xx_pct']:.3f}%"
        if r["status"] == "partial":
            n2 += f" (partial: {r['rounds']} rounds; {r['note']})"
        L.append(f"| {r['id']} | {r['label']} | {rps} | {cpu} | {x1} | {x2} | {p2} | {pb} | {n2} |")
    L.append("")
    util = [r for r in rows if r["status"] != "failed"]
    if util:
        L.append("Envoy's own CPU use during the runs (share of CPU 0), median per variant: "
                 + ", ".join(f"{r['id']}: {100 * r['envoy_util_med']:.0f}%" for r in util)
                 + ". Other processes' use of CPU 0 during the runs (noise), median (max): "
                 + ", ".join(f"{r['id']}: {r['foreign_cpu0_pct_med']:.1f}% ({r['foreign_cpu0_pct_max']:.1f}%)"
                             for r in util) + ".")
        L.append("")
    notes = meta.get("notes") or []
    if notes:
        L.append("Notes:")
        for n in notes:
            L.append(f"- {n}")
        L.append("")
    return "\n".join(L)


CSV_COLS = ["id", "variant", "label", "status", "rounds", "requests", "rps_med", "rps_min", "rps_max",
            "cpu_med", "cpu_min", "cpu_max", "x_no_filter", "x_noop", "plus_noop_med", "plus_noop_min",
            "plus_noop_max", "baseline", "plus_base_med", "plus_base_min", "plus_base_max", "non2xx_pct",
            "socket_errors", "envoy_util_med", "foreign_cpu0_pct_med", "foreign_cpu0_pct_max", "note"]


def write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            out = {}
            for k in CSV_COLS:
                x = r.get(k, "")
                out[k] = f"{x:.3f}" if isinstance(x, float) else x
            w.writerow(out)


def write_rounds_csv(path: Path, variants: list[Variant]) -> None:
    cols = ["round", "order", "id", "variant", "requests", "elapsed_s", "rps", "non2xx", "socket_errors",
            "cpu_s", "cpu_us_per_req", "envoy_cpu_util", "foreign_cpu0_pct", "error"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for v in variants:
            for r in v.runs:
                w.writerow({**r, "id": v.id, "variant": v.key})


def chart(path: Path, rows: list[dict], meta: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    colors = {"1": "#9e9e9e", "2": "#7f7f7f", "7": "#7f7f7f", "3": "#4c72b0",
              "4": "#dd8452", "5": "#dd8452", "6": "#c44e52"}
    ok = [r for r in rows if r["status"] != "failed"]
    failed = [r for r in rows if r["status"] == "failed"]
    labels = [f"{r['id']}. {r['label']}" for r in ok] + [f"{r['id']}. {r['label']}" for r in failed]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 0.75 * len(labels) + 2.2),
                                   gridspec_kw={"width_ratios": [3, 2]})
    ys = list(range(len(labels)))[::-1]
    for ax, key, title, unit in ((ax1, "cpu", "Envoy CPU time per request (µs), median, min–max", "µs"),
                                 (ax2, "rps", "Requests/s (one Envoy worker), median, min–max", "req/s")):
        vals = [r[f"{key}_med"] for r in ok]
        lo = [r[f"{key}_med"] - r[f"{key}_min"] for r in ok]
        hi = [r[f"{key}_max"] - r[f"{key}_med"] for r in ok]
        y_ok = ys[: len(ok)]
        ax.barh(y_ok, vals, xerr=[lo, hi], color=[colors.get(r["id"], "#55a868") for r in ok],
                capsize=4, height=0.6)
        top = max((r[f"{key}_max"] for r in ok), default=1)
        for y, v, r in zip(y_ok, vals, ok):
            txt = f"{v:.1f} µs" if key == "cpu" else f"{v:,.0f}"
            if key == "cpu" and r["id"] not in ("1", "2") and "plus_noop_med" in r:
                txt += f"  ({r['plus_noop_med']:+.1f} vs 2"
                if r.get("baseline") not in (None, "1", "2") and "plus_base_med" in r:
                    txt += f", {r['plus_base_med']:+.1f} vs {r['baseline']}"
                txt += ")"
            ax.text(r[f"{key}_max"] + top * 0.02, y, txt, va="center", fontsize=10)
        for y, r in zip(ys[len(ok):], failed):
            if ax is ax1:
                ax.text(top * 0.02, y, "failed: " + (r["note"][:70] or "no result"), va="center",
                        fontsize=9, color="#c44e52")
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_xlim(0, top * (1.7 if key == "cpu" else 1.3))
        ax.set_title(title, fontsize=11)
        ax.set_xlabel(unit)
        ax.grid(axis="x", alpha=0.3)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.set_yticks(ys)
        ax.set_yticklabels(labels if ax is ax1 else [""] * len(labels), fontsize=10)
    fig.suptitle(f"ratebound vs baselines — Envoy {meta['envoy_version']} pinned to 1 CPU, "
                 f"{meta['rounds']} rounds × {meta['duration']:g} s, commit {meta['commit'][:12]}, "
                 f"{meta['timestamp']}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------

def sh(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        return "?"


def envoy_version() -> str:
    m = re.search(r"version: \S+?/([\d.]+)/", sh([bl.envoy_binary(), "--version"]))
    return m.group(1) if m else "?"


def restart(live: list[Variant], work: Path, rnd: int, args) -> None:
    """A fresh Envoy per variant for this round. One process keeps its own
    memory layout and JIT code placement for life, and two processes running
    the same module measured up to 3 µs apart in an A/A run
    (`bench/results/20261130-122313-aa-v5.md`): new processes each round turn that bias into
    round-to-round spread, which the median then absorbs."""
    for v in live:
        if v.env:
            v.env.stop()
        v.env = bl.bench_envoy(f"v{v.id}-{v.key}-r{rnd + 1}", v.filters, work,
                               cpu=ENVOY_CPU, routes=v.routes).start(wait=False)
    for v in live:
        failed = bl.wait_ready(v.env)
        if failed:
            v.failed = f"round {rnd + 1}: restart failed: {failed}"
            continue
        if args.initial_warmup > 0:
            run_wrk(v.env.port, args.initial_warmup, args.connections, v.headers, script=v.script)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=10, help="seconds per measured run")
    ap.add_argument("--warmup", type=int, default=1, help="seconds of warm-up before each run")
    ap.add_argument("--initial-warmup", type=int, default=3, help="seconds per variant after start-up")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--keep-envoys", action="store_true",
                    help="measure every round on the same Envoy processes (default: fresh ones each round)")
    ap.add_argument("--only", default="", help="comma-separated variant ids (default: all)")
    ap.add_argument("--out", default=str(bl.BENCH / "results"))
    ap.add_argument("--tag", default="", help="suffix of the result files' names")
    ap.add_argument("--replot", metavar="RESULT.json", help="only redraw the chart of a finished run")
    args = ap.parse_args()
    if args.replot:
        data = json.loads(Path(args.replot).read_text())
        png = Path(args.replot).with_suffix(".png")
        chart(png, data["summary"], data["meta"])
        print(f"run: wrote {png}")
        return 0

    t0 = time.monotonic()
    started = bl.start_run("", args.out, args.tag, (bl.RATEBOUND_WASM, bl.NOOP_WASM), "bench/run.sh")
    if started is None:
        return 2
    out_dir, stamp, work = started

    jwks, token = bl.make_jwt()
    variants = build_variants(jwks, token)
    if args.only:
        keep = set(args.only.split(","))
        variants = [v for v in variants if v.id in keep]
    else:
        variants = [v for v in variants if not v.optional]

    commit = sh(["git", "-C", str(bl.ROOT), "rev-parse", "HEAD"])
    dirty = sh(["git", "-C", str(bl.ROOT), "status", "--porcelain", "--untracked-files=no"])
    meta = {
        "timestamp": stamp,
        "commit": commit + ("+dirty" if dirty else ""),
        "wasm_sha256": hashlib.sha256(bl.RATEBOUND_WASM.read_bytes()).hexdigest(),
        "wasm_bytes": bl.RATEBOUND_WASM.stat().st_size,
        "noop_bytes": bl.NOOP_WASM.stat().st_size,
        "envoy_version": envoy_version(),
        "connections": args.connections,
        "duration": args.duration,
        "warmup": args.warmup,
        "initial_warmup": args.initial_warmup,
        "rounds": args.rounds,
        "nproc": os.cpu_count(),
        "cpu_model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
        "kernel": platform.release(),
        "load_before": " ".join(open("/proc/loadavg").read().split()[:3]),
        "notes": [],
    }

    print(f"run: {len(variants)} variants × {args.rounds} rounds × {args.duration:g} s "
          f"(+{args.warmup:g} s warm-up); work dir {work}", flush=True)
    try:
        # Start every Envoy up front (all pinned to CPU 0; idle ones cost ~nothing).
        for v in variants:
            v.env = bl.bench_envoy(f"v{v.id}-{v.key}", v.filters, work, cpu=ENVOY_CPU,
                                   routes=v.routes).start(wait=False)
        for v in variants:
            failed = bl.wait_ready(v.env)
            if failed:
                v.failed = failed
                tail = v.env.log_tail(8)
                print(f"run: variant {v.id} ({v.label}) FAILED: {v.failed}; Envoy log:\n{tail}", flush=True)
                lines = v.env.log_tail(40).splitlines()
                err = ([l for l in lines if "rejected" in l] or [l for l in lines if "error" in l.lower()])
                if err:
                    msg = err[0].split("] ")[-1].strip()
                    msg = msg.split("configuration rejected: ")[-1]
                    v.failed += ": " + msg[:160].replace("|", "/")
                v.env.stop()
                continue
            # sanity: the route answers as expected (variant 6: the 2nd request is refused)
            statuses = [bl.http_get(v.env.port, "/", v.headers) for _ in range(v.sanity_requests)]
            if statuses[-1] != v.expect_status:
                v.failed = f"sanity check: got {statuses}, expected {v.expect_status}"
                print(f"run: variant {v.id} FAILED {v.failed}", flush=True)
                v.env.stop()
                continue
            if v.expect_charge is not None:
                # the filter reads the answer Envoy itself gives: each request is charged
                left = [bl.remaining(v.env.port, "/", v.headers) for _ in range(3)]
                if None in left or left[1] - left[2] != v.expect_charge:
                    v.failed = (f"sanity check: RateLimit-Remaining {left}, expected to fall by "
                                f"{v.expect_charge} a request")
                    print(f"run: variant {v.id} FAILED {v.failed}", flush=True)
                    v.env.stop()
                    continue
            if "Authorization" in v.headers:
                no_token = bl.http_get(v.env.port, "/")
                if no_token != 401:
                    meta["notes"].append(f"variant {v.id}: a request without a token got {no_token}, not 401")
            print(f"run: variant {v.id} ready (pid {v.env.pid}, port {v.env.port}); "
                  f"warm-up {args.initial_warmup:g} s", flush=True)
            if args.initial_warmup > 0:
                try:
                    run_wrk(v.env.port, args.initial_warmup, args.connections, v.headers, script=v.script)
                except Exception as e:  # noqa: BLE001 - the rounds will record it
                    print(f"run: variant {v.id} warm-up failed: {e}", flush=True)

        live = [v for v in variants if not v.failed]
        for rnd in range(args.rounds):
            if rnd > 0 and not args.keep_envoys:
                restart(live, work, rnd, args)
            k = rnd % max(1, len(live))
            order = live[k:] + live[:k]
            line = []
            for pos, v in enumerate(order):
                if v.failed and not v.env.alive():
                    continue
                try:
                    r = measure(v, args.duration, args.warmup, args.connections)
                    r.update(round=rnd + 1, order=pos + 1)
                    v.runs.append(r)
                    line.append(f"{v.id}:{r['cpu_us_per_req']:.1f}µs/{r['rps']:,.0f}rps")
                except Exception as e:  # noqa: BLE001 - record and carry on
                    v.runs.append({"round": rnd + 1, "order": pos + 1, "error": str(e)[:300]})
                    v.failed = f"round {rnd + 1}: {str(e)[:120]}"
                    line.append(f"{v.id}:FAILED")
                    print(f"run: variant {v.id} failed in round {rnd + 1}: {e}\n{v.env.log_tail(8)}", flush=True)
            print(f"run: round {rnd + 1}/{args.rounds}: " + "  ".join(line), flush=True)

        # The filters' own counters: did the never-refusing variants refuse nothing, etc.
        for v in variants:
            if v.env is None or not v.env.alive() or v.key.startswith(("no_", "noop", "jwt_noop")):
                continue
            try:
                stats = v.env.stats("ratebound|local_rate_limit|jwt_authn")
            except OSError:
                continue
            keep = {k: x for k, x in stats.items()
                    if re.search(r"\.(allowed|refused|overflow|store_errors|store_reads_saved|"
                                 r"store_stale_guesses|costs_unknown|jwt_cache_hits|rate_limited|ok|"
                                 r"jwt_authn\.allowed|denied)$", k)}
            if keep:
                meta["notes"].append(f"variant {v.id} stats after the run: "
                                     + ", ".join(f"`{k}` {x}" for k, x in sorted(keep.items())))
            if v.lrl_tiers:
                meta["notes"].append(lrl_tiers_check(v, stats))
    finally:
        for v in variants:
            if v.env is not None:
                v.env.stop()

    meta["load_after"] = " ".join(open("/proc/loadavg").read().split()[:3])
    meta["wall_s"] = time.monotonic() - t0
    for v in variants:
        if v.id == "5" and v.failed:
            meta["notes"].append("variant 5 failed; it needs a filter that accepts its configuration "
                                 "(`identity.jwt`); the other variants were measured without it")
    rows = summarize(variants)
    md = markdown(rows, meta)

    (out_dir / f"{stamp}.md").write_text(md)
    write_csv(out_dir / f"{stamp}.csv", rows)
    write_rounds_csv(out_dir / f"{stamp}-rounds.csv", variants)
    (out_dir / f"{stamp}.json").write_text(json.dumps(
        {"meta": meta, "summary": rows,
         "runs": {v.id: [{k: x for k, x in r.items() if k != "raw"} for r in v.runs] for v in variants}},
        indent=1, default=str))
    try:
        chart(out_dir / f"{stamp}.png", rows, meta)
        shutil.copyfile(out_dir / f"{stamp}.png", out_dir / "latest.png")
    except Exception as e:  # noqa: BLE001 - the table matters more than the chart
        print(f"run: chart failed: {e}", file=sys.stderr)
    shutil.copyfile(out_dir / f"{stamp}.md", out_dir / "latest.md")
    shutil.copyfile(out_dir / f"{stamp}.csv", out_dir / "latest.csv")
    if not any(v.failed for v in variants):
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"run: configurations and Envoy logs kept in {work} (a variant failed)")

    print()
    print(md)
    print(f"run: wrote {out_dir}/{stamp}.{{md,csv,json,png}}, {stamp}-rounds.csv and latest.*")
    return 0 if any(r["status"] != "failed" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
