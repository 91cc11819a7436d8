"""What a long event stream costs in Envoy with ratebound reading its usage
(issue 37, outcome 6), beside the same stream through Envoy without the
filter, in one run: Envoy's CPU per event, and the delay each event takes
from the upstream's write to the client's read.

The upstream (a thread here) streams N one-token events, an event a chunk,
one every PACE_MS (so buffers never fill and a delay is the path's own),
each carrying its send time; the client reads each as it comes and notes
the delay. Both variants run the same streams, alternating, ROUNDS times.
Envoy runs on one worker, pinned to CPU 0 (the client and upstream are
not pinned). Figures only: nothing here asserts a time.

  .venv/bin/python bench/stream_cost.py [--events 1000] [--streams 3] [--rounds 3]
"""
from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (  # noqa: E402
    CLK_TCK, RATEBOUND_WASM, bench_envoy, cpu_seconds, describe_module, start_run, wait_ready,
    wasm_filter,
)

PACE_MS = 1.0


def ratebound_filter() -> dict:
    config = {"instance": "benchstream", "routes": [{"name": "llm", "bounds": [
        {"name": "tokens", "per": "address", "limit": 1_000_000_000, "window": "PT1M",
         "cost": {"response_json": "/usage/total_tokens", "unit": "tokens"}}]}]}
    return wasm_filter("ratebound", RATEBOUND_WASM, config)


class Upstream:
    """An OpenAI-style streaming API: N events, paced; the usage event when
    the request asks for it (the filter asks)."""

    def __init__(self, events: int) -> None:
        self.events = events
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.settimeout(30)
        f = c.makefile("rb")
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = f.readline()
            if not line:
                return
            head += line
        body = b""
        if b"transfer-encoding: chunked" in head.lower():
            while True:
                size = int(f.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    f.readline()
                    break
                body += f.read(size)
                f.readline()
        else:
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    body = f.read(int(line.split(b":")[1]))
        usage = b"include_usage" in body
        c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                  b"transfer-encoding: chunked\r\n\r\n")

        def chunk(data: bytes) -> None:
            c.sendall(b"%x\r\n%s\r\n" % (len(data), data))

        extra = ',"usage":null' if usage else ""
        start = time.perf_counter()
        for i in range(self.events):
            # Paced against the start, so a late write is not followed by a burst.
            wait = start + i * PACE_MS / 1000 - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            event = ('data: {"choices":[{"index":0,"delta":{"content":"t%d"}}]%s,"sent":%d}\n\n'
                     % (i % 10, extra, time.perf_counter_ns()))
            chunk(event.encode())
        if usage:
            chunk(b'data: {"choices":[],"usage":{"total_tokens":%d}}\n\n' % (self.events + 12))
        chunk(b"data: [DONE]\n\n")
        c.sendall(b"0\r\n\r\n")
        c.close()

    def close(self) -> None:
        self.stop = True
        self.sock.close()


def one_stream(port: int) -> tuple[list[float], int]:
    """One streaming request: each event's delay (µs), and the events read."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps({"model": "m", "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]})
    conn.request("POST", "/up/v1/chat/completions", body=body,
                 headers={"content-type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.status
    delays, buf, events = [], b"", 0
    while True:
        data = resp.read1(65536)
        if not data:
            break
        now = time.perf_counter_ns()
        buf += data
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            at = event.find(b'"sent":')
            if at >= 0:
                sent = int(event[at + 7:].rstrip(b"}"))
                delays.append((now - sent) / 1000)
                events += 1
    conn.close()
    return delays, events


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--streams", type=int, default=3, help="streams per variant per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--tag", default="stream-cost")
    args = ap.parse_args()
    run = start_run("stream_cost", args.out, args.tag, (RATEBOUND_WASM,), "./build.sh")
    if run is None:
        return 2
    out_dir, stamp, work = run
    upstream = Upstream(args.events)
    variants = {"without the filter": [], "ratebound, a response_json cost": [ratebound_filter()]}
    envoys = {}
    try:
        for name, filters in variants.items():
            env = bench_envoy(name.split(",")[0].replace(" ", "-"), filters, work,
                              upstream_port=upstream.port)
            env.start(wait=False)
            why = wait_ready(env)
            if why:
                print(f"{name}: Envoy did not start: {why}", file=sys.stderr)
                return 1
            envoys[name] = env
            one_stream(env.port)  # warm-up: the VM and the connection pools
        cpu = {n: [] for n in envoys}
        delays = {n: [] for n in envoys}
        for _ in range(args.rounds):
            for name, env in envoys.items():
                before = cpu_seconds(env.proc.pid)
                events = 0
                for _ in range(args.streams):
                    d, n = one_stream(env.port)
                    assert n == args.events, (name, n)
                    delays[name] += d
                    events += n
                cpu[name].append((cpu_seconds(env.proc.pid) - before) / events * 1e6)
        base = "without the filter"
        lines = [f"# Event streams through Envoy, with and without ratebound ({stamp})", "",
                 f"Module: {describe_module()}. {args.events} one-token events a stream, one "
                 f"every {PACE_MS} ms, {args.streams} streams a variant a round, {args.rounds} "
                 "rounds alternating; Envoy on one worker pinned to CPU 0. CPU is read in "
                 f"clock ticks: {1e6 / CLK_TCK / (args.events * args.streams):.1f} µs an event "
                 "is one tick.", "",
                 "| variant | Envoy CPU per event (µs, median of rounds) | over the baseline "
                 "| delay per event, median (µs) | p90 | p99 |", "|---|---|---|---|---|---|"]
        for name in envoys:
            c = statistics.median(cpu[name])
            d = sorted(delays[name])
            over = c - statistics.median(cpu[base])
            lines.append(f"| {name} | {c:.1f} | {over:+.1f} | {statistics.median(d):.0f} | "
                         f"{d[int(len(d) * 0.9)]:.0f} | {d[int(len(d) * 0.99)]:.0f} |")
        text = "\n".join(lines) + "\n"
        print(text)
        (out_dir / f"{stamp}.md").write_text(text)
        print(f"written: {out_dir / f'{stamp}.md'}")
        return 0
    finally:
        for env in envoys.values():
            env.stop()
        upstream.close()


if __name__ == "__main__":
    sys.exit(main())
