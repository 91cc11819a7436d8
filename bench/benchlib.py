"""Shared pieces of the ratebound benchmarks (run.py, flood.py, exactness.py,
profile.py, config_size.py): the filter chains of the variants, Envoys for
them (started, waited for, read and stopped by the one launcher the e2e tests
use too, tests/e2e/launcher.py), JWTs, and Envoy's CPU time and RSS from /proc.

Everything talks to 127.0.0.1 only; every wait is bounded.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from launcher import (  # noqa: E402,F401 - the scripts use these through benchlib
    WASM as RATEBOUND_WASM,
    Envoy,
    EnvoyStartError,
    envoy_binary,
    free_port,
    wasm_filter,
)

NOOP_WASM = BENCH / "noop-filter" / "target" / "wasm32-wasip1" / "release" / "noop_filter.wasm"
PROBE_WASM = BENCH / "probe-filter" / "target" / "wasm32-wasip1" / "release" / "probe_filter.wasm"
GRPC_WASM = BENCH / "grpc-filter" / "target" / "wasm32-wasip1" / "release" / "grpc_filter.wasm"

READY_TIMEOUT = 30.0  # s for Envoy to become ready (V8 compiles the module)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def exit_on_sigterm() -> None:
    """Turn SIGTERM/SIGHUP into SystemExit, so `finally:` blocks stop the Envoys we started."""

    def handler(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def start_run(name: str, out: str, tag: str, needs: tuple[Path, ...], built_by: str):
    """The prelude of a bench run: SIGTERM handled, the results folder, a
    timestamp (and tag) naming this run, its work folder under bench/.work.
    Returns (out_dir, stamp, work), or None when a file in `needs` is
    missing (said on stderr: `built_by` builds it)."""
    import datetime as dt

    exit_on_sigterm()
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S") + (f"-{tag}" if tag else "")
    work = BENCH / ".work" / (f"{name}-{stamp}" if name else stamp)
    work.mkdir(parents=True, exist_ok=True)
    for f in needs:
        if not f.exists():
            print(f"{name or 'run'}: {f} is missing ({built_by} builds it)", file=sys.stderr)
            return None
    return out_dir, stamp, work


def describe_module() -> str:
    """One line naming what is measured: the commit and the module's hash."""
    import hashlib

    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        digest = hashlib.sha256(RATEBOUND_WASM.read_bytes()).hexdigest()[:16]
        return f"commit {commit}, dist/ratebound.wasm sha256 {digest}…, {RATEBOUND_WASM.stat().st_size:,} bytes"
    except OSError as e:
        return f"(module: {e})"


# --------------------------------------------------------------------------
# Filter configurations

def ratebound_config(instance: str, bounds: list[dict], identity: dict | None = None) -> dict:
    cfg: dict = {"instance": instance}
    if identity is not None:
        cfg["identity"] = identity
    cfg["routes"] = [{"name": "all", "bounds": bounds}]
    return cfg


CFG_ONE_ADDRESS = ratebound_config(
    "bench", [{"name": "addr", "per": "address", "limit": 1_000_000_000, "window": "PT1M"}]
)
CFG_THREE_BOUNDS = ratebound_config(
    "bench3",
    [
        {"name": "route", "per": "route", "limit": 4_000_000_000, "window": "PT1M"},
        {"name": "addr", "per": "address", "limit": 1_000_000_000, "window": "PT1M"},
        {"name": "user", "per": "user", "limit": 1_000_000_000, "window": "PT1M"},
    ],
    identity={"jwt": {"metadata_key": "payload", "user_claim": "sub"}},
)
# --------------------------------------------------------------------------
# Cost bounds (docs/cost.md): an OpenAI-style answer, whole (JSON) or as an
# event stream, served by Envoy itself (a direct_response route: the
# upstream is never the bottleneck), its usage 300 tokens.

CHAT_JSON = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1764633600,
    "model": "bench-model",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "Hello! How can I help you today?"}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 288, "total_tokens": 300},
}, separators=(",", ":"))


def _chat_stream() -> str:
    events = [{"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": "bench-model",
               "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}],
               "usage": None}
              for w in ("Hello", "!", " How", " can", " I", " help", " you", " today", "?")]
    events.append({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": "bench-model",
                   "choices": [],
                   "usage": {"prompt_tokens": 12, "completion_tokens": 288, "total_tokens": 300}})
    return "".join(f"data: {json.dumps(e, separators=(',', ':'))}\n\n" for e in events) \
        + "data: [DONE]\n\n"


CHAT_SSE = _chat_stream()


def direct_routes(body: str = "ok", content_type: str | None = None,
                  headers: dict | None = None) -> list[dict]:
    """The one route `/` answering 200 with `body` from Envoy itself, its
    content-type (and any other response headers) set by the route."""
    add = dict(headers or {})
    if content_type:
        add["content-type"] = content_type
    route: dict = {"name": "direct", "match": {"prefix": "/"},
                   "direct_response": {"status": 200, "body": {"inline_string": body}}}
    if add:
        route["response_headers_to_add"] = [
            {"header": {"key": k, "value": v}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
            for k, v in add.items()]
    return [route]


def cost_config(instance: str, cost: dict) -> dict:
    """One bound per address, counting `cost`, with a limit nothing reaches."""
    return ratebound_config(instance, [{"name": "tokens", "per": "address", "limit": 1_000_000_000,
                                        "window": "PT1M", "cost": cost}])


CFG_COST_JSON = cost_config("benchcostjson", {"response_json": "/usage/total_tokens",
                                              "reserve": 500, "unit": "tokens"})
CFG_COST_SSE = cost_config("benchcostsse", {"response_json": "/usage/total_tokens",
                                            "reserve": 500, "unit": "tokens"})
CFG_COST_REQUEST_HEADER = cost_config("benchcostreq", {"request_header": "x-cost"})
CFG_COST_RESPONSE_HEADER = cost_config("benchcostresp", {"response_header": "x-tokens",
                                                         "reserve": 500, "unit": "tokens"})

CFG_REFUSING = ratebound_config(
    "benchrefuse", [{"name": "addr", "per": "address", "limit": 1, "window": "P1D"}]
)


def _local_ratelimit(stat_prefix: str, bucket: dict, **more) -> dict:
    """Envoy's local_ratelimit, enabled and enforced on every request, with
    `bucket` as its default token bucket and `more` fields of its config."""
    every = {"numerator": 100, "denominator": "HUNDRED"}
    return {
        "name": "envoy.filters.http.local_ratelimit",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
            "stat_prefix": stat_prefix,
            "token_bucket": bucket,
            **more,
            "filter_enabled": {"runtime_key": "bench_lrl_enabled", "default_value": every},
            "filter_enforced": {"runtime_key": "bench_lrl_enforced", "default_value": every},
        },
    }


def local_ratelimit_filter() -> dict:
    """Envoy's native token bucket, enabled and enforced, that never runs dry."""
    return _local_ratelimit("bench_local_ratelimit", {
        "max_tokens": 1_000_000_000, "tokens_per_fill": 1_000_000_000, "fill_interval": "1s"})


# The tiers, "10 a second, 300 a minute, 5,000 an hour per address":
# (name, window in seconds, limit). TIERS_SCALE multiplies every limit for the
# variants that must never refuse (30,000 requests a second stay far below).
TIERS = (("second", 1, 10), ("minute", 60, 300), ("hour", 3600, 5000))
TIERS_SCALE = 100_000
_ISO_WINDOW = {1: "PT1S", 60: "PT1M", 3600: "PT1H"}


def ratebound_tiers(instance: str, scale: int = 1) -> dict:
    """The tiers as ratebound bounds, all per address on one route (one lane)."""
    return ratebound_config(instance, [
        {"name": name, "per": "address", "limit": limit * scale, "window": _ISO_WINDOW[secs]}
        for name, secs, limit in TIERS])


def local_ratelimit_tiers(stat_prefix: str, scale: int = 1) -> dict:
    """The tiers as Envoy's local_ratelimit: one descriptor per tier, made by
    the filter's own `rate_limits` (a generic_key naming the tier, then the
    remote_address), each with a token bucket of `limit` tokens refilled
    whole every window; a descriptor entry without a value keeps a bucket per
    address. The route-level `rate_limits` are not read on a direct_response
    route (it has no route entry), so the filter's own list is used. The
    default bucket, taken only by a request no descriptor matches, holds 1
    token a second: a second request in a second that matched nothing would be
    refused, so the sanity check and `rate_limited` show the descriptors
    applied."""
    return _local_ratelimit(
        stat_prefix,
        {"max_tokens": 1, "tokens_per_fill": 1, "fill_interval": "1s"},
        always_consume_default_token_bucket=False,
        rate_limits=[
            {"actions": [{"generic_key": {"descriptor_value": name}}, {"remote_address": {}}]}
            for name, _, _ in TIERS],
        descriptors=[
            {"entries": [{"key": "generic_key", "value": name}, {"key": "remote_address"}],
             "token_bucket": {"max_tokens": limit * scale, "tokens_per_fill": limit * scale,
                              "fill_interval": f"{secs}s"}}
            for name, secs, limit in TIERS])


def jwt_authn_filter(jwks: str, claim_header: str | None = None) -> dict:
    """RS256 tokens from issuer `bench`, verified against an inline JWKS; the payload
    lands in dynamic metadata under `payload` (as Istio does). Verified tokens are
    cached (jwt_cache_config), as a real deployment would, so the signature check is
    not redone on every request."""
    return {
        "name": "envoy.filters.http.jwt_authn",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication",
            "providers": {
                "bench": {
                    "issuer": "bench",
                    "local_jwks": {"inline_string": jwks},
                    "payload_in_metadata": "payload",
                    "forward": True,
                    "jwt_cache_config": {"jwt_cache_size": 100},
                    # jwt_authn writes the verified `sub` into this header
                    # (clients' copies must be stripped before any filter).
                    **({"claim_to_headers": [{"header_name": claim_header, "claim_name": "sub"}]}
                       if claim_header else {}),
                }
            },
            "rules": [{"match": {"prefix": "/"}, "requires": {"provider_name": "bench"}}],
        },
    }


# --------------------------------------------------------------------------
# JWT (variant 5)

def make_jwt() -> tuple[str, str]:
    """A fresh RSA key, its JWKS (JSON text) and one RS256 token for user `bench-user`."""
    import jwt  # PyJWT
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": "bench", "alg": "RS256", "use": "sig"})
    jwks = json.dumps({"keys": [jwk]}, separators=(",", ":"))
    now = int(time.time())
    token = jwt.encode(
        {"iss": "bench", "sub": "bench-user", "iat": now, "exp": now + 86_400},
        key,
        algorithm="RS256",
        headers={"kid": "bench"},
    )
    return jwks, token


# --------------------------------------------------------------------------
# Envoy processes

class RoutedEnvoy(Envoy):
    """An Envoy whose route table is given (`routes`, a list of route dicts)
    instead of the launcher's `direct` route answering "ok"."""

    def __init__(self, *a, routes: list[dict], **kw) -> None:
        super().__init__(*a, **kw)
        self.routes = routes

    def _routes(self) -> list[dict]:
        return self.routes


def bench_envoy(name: str, http_filters: list[dict], work: Path, *, concurrency: int = 1,
                cpu: int | None = 0, trusted_xff: bool = False,
                routes: list[dict] | None = None, **kw) -> Envoy:
    """A benchmark Envoy (not started): the filters, then the router, on one
    static listener whose route answers 200 "ok"; pinned to `cpu` (None: not
    pinned); warnings only in its log (work/name/envoy.log); its own session,
    so a ^C reaches this script, which stops it. trusted_xff: the client
    address is the last X-Forwarded-For entry (one trusted hop). kw: more
    Envoy(...) arguments (upstream_port, clusters: bench/signin.py).
    routes: the route table instead (RoutedEnvoy; the cost variants' bodies)."""
    if routes is not None:
        kw["routes"] = routes
    return (RoutedEnvoy if routes is not None else Envoy)(
        work / name, http_filters=http_filters, name=name, concurrency=concurrency,
                 cpu=cpu, static_listener=True, use_remote_address=trusted_xff,
                 xff_num_trusted_hops=1 if trusted_xff else 0, log_level="warn",
                 component_log_level=None, new_session=True, **kw)


def wait_ready(env: Envoy, timeout: float = READY_TIMEOUT) -> str | None:
    """None once env serves; otherwise why not, in one line (the log is env.log_tail()).
    No test connection: the listeners' connection counts stay the load's own."""
    try:
        env.wait_ready(timeout, connect=False)
        return None
    except EnvoyStartError as e:
        return e.reason


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime, stime are fields 14, 15
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def remaining(port: int, path: str = "/", headers: dict | None = None) -> int | None:
    """The RateLimit-Remaining of one request (None without one)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            value = r.headers.get("ratelimit-remaining")
    except urllib.error.HTTPError as e:
        value = e.headers.get("ratelimit-remaining")
    return int(value) if value is not None else None


def http_get(port: int, path: str = "/", headers: dict | None = None) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
