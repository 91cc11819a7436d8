"""End-to-end harness: real Envoys with dist/ratebound.wasm (started by
launcher.py, the Envoy launcher the benchmarks share), driven over HTTP.

Everything here talks to 127.0.0.0/8 only, every wait is bounded, and every
process is stopped by the PID this harness started.
"""
from __future__ import annotations

import asyncio
import http.client
import http.server
import resource
import sys
import threading
import time

from launcher import (  # noqa: F401 - the tests import these from here
    DIST,
    RATEBOUND,
    ROOT,
    WASM,
    Envoy,
    EnvoyStartError,
    envoy_binary,
    envoy_version,
    free_port,
    grpc_cluster,
    note_request,
    settle_stats,
    static_cluster,
    wasm_filter,
)


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


# --------------------------------------------------------------------------
# Local HTTP servers: the upstream (paths with "own-limit" get its own
# RateLimit-Limit) and, in identity_env, the session service.
# --------------------------------------------------------------------------
class LocalServer:
    """A loopback HTTP/1.1 server on a free port, served from a thread, that
    counts its hits (whole requests, body included); `answer(path, headers)`
    gives (status, headers, body)."""

    def __init__(self) -> None:
        self.hits = 0
        # Request heads that arrived (a request whose body never came
        # included), and the headers of the last whole one.
        self.heads = 0
        self.last_headers: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body are two writes: with Nagle on, the body waits
            # for Envoy's delayed ACK of the headers (40 ms a response).
            disable_nagle_algorithm = True

            def do_GET(self):  # noqa: N802
                # As an application does: the whole request first. A request
                # whose body never comes (Envoy reset it) is no hit.
                with outer._lock:
                    outer.heads += 1
                length = int(self.headers.get("content-length") or 0)
                if length and len(self.rfile.read(length)) < length:
                    return
                with outer._lock:
                    outer.hits += 1
                    outer.last_headers = {}
                    for k, v in self.headers.items():
                        outer.last_headers.setdefault(k.lower(), []).append(v)
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

        class Server(http.server.ThreadingHTTPServer):
            # A full accept queue drops SYNs, and Envoy's 1 s connect timeout
            # answers 503. One thread accepts, sharing the GIL with the test's
            # clients, and a burst of sign-ins opens an upstream connection
            # each (their headers go on before the decision): 256 overflowed
            # in 2 of 18 runs of 200 concurrent attempts, 4096 in none of 15.
            request_queue_size = 4096

        self.server = Server(("127.0.0.1", 0), Handler)
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
# Clients (each notes its last request: see launcher.settle_stats)
# --------------------------------------------------------------------------
def request(port: int, path: str, src: str = "127.0.0.1", method: str = "GET",
            headers: dict | None = None, timeout: float = 10.0, host: str = "127.0.0.1",
            body: bytes | None = None):
    """One request on a fresh connection from `src` to `host` (an Envoy
    listening there: `listen="::1"` with host="::1", src="::1" for IPv6).
    Returns (status, headers, body).

    Header names are lowercased; a header that came once maps to its string, a
    header that came several times maps to the list of its values.
    """
    conn = http.client.HTTPConnection(host, port, timeout=timeout,
                                      source_address=(src, 0))
    try:
        conn.request(method, path, body=body, headers=headers or {})
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
        note_request()


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
        note_request()


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
        note_request()


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
