"""The engines behind installation-wide bounds, for the e2e tests and
scripts/record-rls.py: a real Redis and a real envoyproxy/ratelimit
(`.tools/bin/service_cmd`, from scripts/install-ratelimit.sh), plus a
hand-written protobuf codec for `ShouldRateLimit` (no generated code).

Everything listens on 127.0.0.1 only, on ports picked at run time; every
wait is bounded; every process is stopped by the PID this module started.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import processes
from harness import ROOT, free_port

SERVICE_CMD = ROOT / ".tools" / "bin" / "service_cmd"
INSTALL_HINT = "run scripts/install-ratelimit.sh"

CLI = ROOT / "dist" / "ratebound"

READY_TIMEOUT = 20.0  # seconds for Redis or the service to answer
STOP_TIMEOUT = 5.0  # seconds between SIGTERM and SIGKILL

SHOULD_RATE_LIMIT = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

def rls_yaml(cfg: dict, folder: Path) -> str:
    """The service's configuration for a filter configuration, from the CLI
    (`ratebound rls-config`), so the two cannot drift."""
    import json

    f = folder / "rls-filter.json"
    f.write_text(json.dumps(cfg))
    out = subprocess.run([str(CLI), "rls-config", str(f)], capture_output=True, text=True,
                         timeout=30)
    if out.returncode != 0:
        raise EngineError(f"ratebound rls-config failed: {out.stderr}")
    return out.stdout


def clear_of_minute_end(margin_s: float = 8.0) -> None:
    """The service's windows are clock minutes: keep a trial inside one
    (waits for the next minute when fewer than `margin_s` seconds are left)."""
    import time

    left = 60 - time.time() % 60
    if left < margin_s:
        time.sleep(left + 0.2)


# RateLimitResponse.Code
UNKNOWN, OK, OVER_LIMIT = 0, 1, 2
# envoy.type.v3.RateLimitUnit
SECOND, MINUTE, HOUR, DAY = 1, 2, 3, 4


class EngineError(RuntimeError):
    pass


def _wait_port(port: int, proc: subprocess.Popen, what: str, log: Path,
               timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineError(f"{what} exited with {proc.returncode}:\n{_tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise EngineError(f"{what}: port {port} not accepting after {timeout}s:\n{_tail(log)}")


def _tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _stop(proc: subprocess.Popen | None) -> int | None:
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)
    return proc.returncode


# --------------------------------------------------------------------------
# Redis
# --------------------------------------------------------------------------
class Redis:
    """redis-server on 127.0.0.1 with an append-only file written on every
    command (appendfsync always), no RDB snapshots: a restart keeps exactly
    what was counted."""

    def __init__(self, tmpdir: Path | str) -> None:
        exe = shutil.which("redis-server")
        if exe is None or shutil.which("redis-cli") is None:
            raise EngineError(f"redis-server/redis-cli not found: {INSTALL_HINT}")
        self.exe = exe
        self.dir = Path(tmpdir) / "redis"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / "redis.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.start()

    def start(self) -> "Redis":
        self._log = open(self.log_path, "ab")
        self.proc = processes.popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "yes", "--appendfsync", "always",
             "--dir", str(self.dir), "--daemonize", "no"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=self.dir,
        )
        self._wait_ping()
        return self

    def _wait_ping(self) -> None:
        _wait_port(self.port, self.proc, "redis-server", self.log_path)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            # Loading the append-only file answers -LOADING until done.
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise EngineError(f"redis-server does not answer PING:\n{_tail(self.log_path)}")

    def stop(self) -> None:
        _stop(self.proc)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self) -> "Redis":
        """Same port and folder: the append-only file brings the data back."""
        self.stop()
        return self.start()

    def cli(self, *args: str) -> str:
        out = subprocess.run(
            ["redis-cli", "-h", "127.0.0.1", "-p", str(self.port), *args],
            capture_output=True, text=True, timeout=10, check=True,
        )
        return out.stdout.strip()

    def commandstats(self) -> dict[str, int]:
        """Calls per command since start (or CONFIG RESETSTAT), e.g. {"incrby": 3}."""
        stats: dict[str, int] = {}
        for line in self.cli("INFO", "commandstats").splitlines():
            # cmdstat_incrby:calls=3,usec=12,usec_per_call=4.00,...
            if not line.startswith("cmdstat_"):
                continue
            name, _, fields = line[len("cmdstat_"):].partition(":")
            for field in fields.split(","):
                key, _, value = field.partition("=")
                if key == "calls":
                    stats[name] = int(value)
        return stats

    def log(self) -> str:
        return _tail(self.log_path, 10_000)

    def service_env(self) -> dict[str, str]:
        """What envoyproxy/ratelimit is told to use this Redis (the
        topologies of redis_topologies.py give their own)."""
        return {"REDIS_TYPE": "SINGLE", "REDIS_URL": f"127.0.0.1:{self.port}"}


# --------------------------------------------------------------------------
# envoyproxy/ratelimit
# --------------------------------------------------------------------------
class RateLimitService:
    """envoyproxy/ratelimit over `redis` (a Redis, or a SentinelSet or
    RedisCluster of redis_topologies.py: its `service_env()`), configured by
    one YAML file, serving gRPC on 127.0.0.1:grpc_port."""

    def __init__(self, redis, config_yaml: str, tmpdir: Path | str,
                 extra_env: dict[str, str] | None = None,
                 grpc_port: int | None = None) -> None:
        if not SERVICE_CMD.exists():
            raise EngineError(f"{SERVICE_CMD} is missing: {INSTALL_HINT}")
        self.redis = redis
        self.dir = Path(tmpdir) / "ratelimit"
        # The service reads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml.
        self.runtime_root = self.dir / "runtime"
        self.subdirectory = "ratebound"
        config_dir = self.runtime_root / self.subdirectory / "config"
        config_dir.mkdir(parents=True, exist_ok=True)
        self.config_path = config_dir / "config.yaml"
        self.config_path.write_text(config_yaml)
        self.log_path = self.dir / "ratelimit.log"
        self.port = free_port()
        self.grpc_port = grpc_port if grpc_port is not None else free_port()
        self.debug_port = free_port()
        self.extra_env = dict(extra_env or {})
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.start()

    def env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            # No statsd daemon here (it would dial localhost:8125), and no
            # stats at all: without a sink they are logged every flush.
            "USE_STATSD": "false",
            "DISABLE_STATS": "true",
            "REDIS_SOCKET_TYPE": "tcp",
            "RUNTIME_ROOT": str(self.runtime_root),
            "RUNTIME_SUBDIRECTORY": self.subdirectory,
            # Watch the config folder itself, not a symlink swap of the root.
            "RUNTIME_WATCH_ROOT": "false",
            # No in-process cache of keys over the limit: every answer comes
            # from Redis, so a test sees each call in Redis.
            "LOCAL_CACHE_SIZE_IN_BYTES": "0",
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "GRPC_HOST": "127.0.0.1",
            "GRPC_PORT": str(self.grpc_port),
            "DEBUG_HOST": "127.0.0.1",
            "DEBUG_PORT": str(self.debug_port),
            "LOG_LEVEL": "warn",
        }
        env.update(self.redis.service_env())  # REDIS_TYPE, REDIS_URL (and what they need)
        env.update(self.extra_env)
        return env

    def start(self) -> "RateLimitService":
        self._log = open(self.log_path, "ab")
        self.proc = processes.popen(
            [str(SERVICE_CMD)], env=self.env(), cwd=self.dir,
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        _wait_port(self.grpc_port, self.proc, "ratelimit service", self.log_path)
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EngineError(
                    f"ratelimit service exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{self.port}/healthcheck", timeout=1.0) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError) as e:
                last = str(e)
            time.sleep(0.05)
        raise EngineError(f"ratelimit service not healthy ({last}):\n{self.log()}")

    def stop(self) -> None:
        _stop(self.proc)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill9(self) -> None:
        """SIGKILL, no goodbye: what a crash looks like to its callers."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def log(self) -> str:
        return _tail(self.log_path, 300)


# --------------------------------------------------------------------------
# ShouldRateLimit over gRPC, with a hand-written protobuf codec
# --------------------------------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _len(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _varint(len(payload)) + payload


def _uint(field: int, n: int) -> bytes:
    # proto3: a zero scalar is not written.
    return _key(field, 0) + _varint(n) if n else b""


def encode_request(domain: str, descriptors: list[dict]) -> bytes:
    """RateLimitRequest. Each descriptor: {"entries": [(key, value), ...],
    "limit": (requests_per_unit, unit) or None, "hits_addend": int or None}."""
    out = _len(1, domain.encode())
    for d in descriptors:
        body = b""
        for key, value in d["entries"]:
            body += _len(1, _len(1, key.encode()) + _len(2, value.encode()))
        if d.get("limit") is not None:
            rpu, unit = d["limit"]
            body += _len(2, _uint(1, rpu) + _uint(2, unit))
        if d.get("hits_addend") is not None:
            # google.protobuf.UInt64Value: present even when 0.
            body += _len(3, _uint(1, d["hits_addend"]))
        out += _len(2, body)
    return out


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    out = []
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(buf, i)
        elif wire == 2:
            size, i = _read_varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        out.append((field, value))
    return out


def decode_response(buf: bytes) -> dict:
    """The parts of RateLimitResponse the tests look at:
    {"overall": code, "statuses": [{"code", "limit", "unit", "remaining", "reset_s"}]}."""
    answer = {"overall": UNKNOWN, "statuses": []}
    for field, value in _fields(buf):
        if field == 1:
            answer["overall"] = value
        elif field == 2:
            status = {"code": UNKNOWN, "limit": None, "unit": None,
                      "remaining": 0, "reset_s": None}
            for f, v in _fields(value):
                if f == 1:
                    status["code"] = v
                elif f == 2:
                    status["limit"], status["unit"] = 0, 0
                    for lf, lv in _fields(v):
                        if lf == 1:
                            status["limit"] = lv
                        elif lf == 2:
                            status["unit"] = lv
                elif f == 3:
                    status["remaining"] = v
                elif f == 4:
                    status["reset_s"] = 0
                    for df, dv in _fields(v):
                        if df == 1:
                            status["reset_s"] = dv
            answer["statuses"].append(status)
    return answer


class RlsClient:
    """A gRPC channel to the service; `call` sends encoded bytes, returns bytes."""

    def __init__(self, grpc_port: int) -> None:
        import grpc  # envoy-demo/setup.sh installs it into .venv

        self._grpc = grpc
        self.channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        # No serializers: the request is already bytes, the answer stays bytes.
        self._call = self.channel.unary_unary(
            SHOULD_RATE_LIMIT, request_serializer=None, response_deserializer=None)

    def call(self, request: bytes, timeout: float = 5.0) -> bytes:
        return self._call(request, timeout=timeout)

    def should_rate_limit(self, domain: str, descriptors: list[dict]) -> dict:
        return decode_response(self.call(encode_request(domain, descriptors)))

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "RlsClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def descriptor(*entries: tuple[str, str], limit: tuple[int, int] | None = None,
               hits_addend: int | None = 1) -> dict:
    return {"entries": list(entries), "limit": limit, "hits_addend": hits_addend}
