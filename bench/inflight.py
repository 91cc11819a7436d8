"""Memory per in-flight request: Envoy's RSS growth while requests from
distinct callers (127.x addresses) are in flight through it at once, with a
cost bound (each request holding a reservation, its answer's body half
read), with a request-count bound, and with the do-nothing filter; and the
two bounds again with a 48 KiB answer (a JSON cost scan keeps the body it
has read, up to max_body_bytes).

    .venv/bin/python bench/inflight.py                 # n = 1,000, 5 rounds
    .venv/bin/python bench/inflight.py --n 500 --rounds 3

The upstream (in this process, 127.0.0.1) answers every request with its
headers and the first half of an OpenAI-style JSON body (or event stream),
then holds the rest until RSS has been read: so each request is admitted,
has taken its reservation, and its cost scan holds what came of the body.
Per round and variant, a fresh Envoy (one worker) serves 20 requests first
(the VM instantiated, its code compiled); then n requests go in flight
(RSS read), then n more (RSS read again), then all are answered:

    KiB per request in flight = RSS growth of a stage / n

The first stage may reuse memory the process already holds free (V8 leaves
some after compiling a module), so the second stage, which takes new pages,
is the figure to compare. RSS counts pages and Envoy's allocator keeps what
it freed: medians over rounds, and the difference between two variants is
what one adds per request in flight. Results:
bench/results/inflight-<timestamp>.{md,json}.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402
from harness import addr, raise_fd_limit  # noqa: E402  (tests/e2e, on benchlib's path)
from launcher import static_cluster  # noqa: E402

HOLD_S = 30.0  # the longest an answer is held (bounded)
SSE_ANSWER = bl.CHAT_SSE.encode()
JSON_ANSWER = bl.CHAT_JSON.encode()
# A long answer (48 KiB, under the default max_body_bytes of 64 KiB), its
# usage at the end: a JSON cost scan keeps what came of it (24 KiB, half).
BIG_ANSWER = json.dumps({"choices": [{"message": {"content": "x" * 48_000}}],
                         "usage": {"total_tokens": 12_000}}, separators=(",", ":")).encode()


def variants() -> list[tuple[str, str, list, bytes, str]]:
    """(key, label, filters, answer, content-type)."""
    noop = bl.wasm_filter("noop", bl.NOOP_WASM, None)
    rb = lambda cfg: bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)  # noqa: E731
    return [
        ("noop", "do-nothing wasm filter", [noop], JSON_ANSWER, "application/json"),
        ("count", "ratebound: 1 request-count bound per address", [rb(bl.CFG_ONE_ADDRESS)],
         JSON_ANSWER, "application/json"),
        ("cost_json", "ratebound: 1 cost bound per address (JSON usage)", [rb(bl.CFG_COST_JSON)],
         JSON_ANSWER, "application/json"),
        ("cost_sse", "ratebound: 1 cost bound per address (event stream)", [rb(bl.CFG_COST_SSE)],
         SSE_ANSWER, "text/event-stream"),
        ("count_big", "request-count bound, a 48 KiB JSON answer", [rb(bl.CFG_ONE_ADDRESS)],
         BIG_ANSWER, "application/json"),
        ("cost_big", "cost bound (JSON usage), a 48 KiB JSON answer", [rb(bl.CFG_COST_JSON)],
         BIG_ANSWER, "application/json"),
    ]


class HeldUpstream:
    """Answers each request with its headers and the first half of `answer`,
    then holds the rest until `release` (or HOLD_S)."""

    def __init__(self, n: int, answer: bytes, content_type: str) -> None:
        self.n = n
        self.answer = answer
        self.content_type = content_type
        self.arrived = 0
        self.all_in = asyncio.Event()
        self.release = asyncio.Event()
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> "HeldUpstream":
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0, backlog=4096)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HOLD_S)
                half = len(self.answer) // 2
                writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: {self.content_type}\r\n"
                             f"content-length: {len(self.answer)}\r\n\r\n".encode()
                             + self.answer[:half])
                await writer.drain()
                self.arrived += 1
                if self.arrived >= self.n:
                    self.all_in.set()
                try:
                    await asyncio.wait_for(self.release.wait(), HOLD_S)
                except asyncio.TimeoutError:
                    pass
                writer.write(self.answer[half:])
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError,
                asyncio.LimitOverrunError, asyncio.CancelledError):
            pass  # closed, or an idle connection cancelled at the end of the round
        finally:
            writer.close()

    def close(self) -> None:
        if self.server:
            self.server.close()


class Heads:
    """Counts answers whose headers reached their client."""

    def __init__(self, n: int) -> None:
        self.n, self.seen, self.all = n, 0, asyncio.Event()

    def saw(self) -> None:
        self.seen += 1
        if self.seen >= self.n:
            self.all.set()


async def one(port: int, src: str, heads: Heads | None = None, path: str = "/up/chat") -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(src, 0))
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:].strip())
        if length:
            # the first half came with the headers: it has passed the filter
            await reader.readexactly(length // 2)
        if heads:
            heads.saw()
        await reader.readexactly(length - length // 2)
        return status
    finally:
        writer.close()


def held_routes() -> list[dict]:
    return [{"name": "upstream", "match": {"prefix": "/up"},
             "route": {"cluster": "upstream", "timeout": f"{2 * HOLD_S:.0f}s"}}]


def held_cluster(port: int) -> dict:
    """The upstream, its circuit breakers opened past 2 × N (Envoy's
    defaults stop at 1,024 requests and connections)."""
    c = static_cluster("upstream", port)
    c["circuit_breakers"] = {"thresholds": [
        {"max_connections": 100_000, "max_pending_requests": 100_000, "max_requests": 100_000}]}
    return c


async def measure(key: str, filters: list, answer: bytes, ctype: str, n: int, work: Path,
                  rnd: int, first_caller: int) -> dict:
    up = await HeldUpstream(2 * n, answer, ctype).start()
    env = bl.bench_envoy(f"{key}-r{rnd}", filters, work, cpu=None, routes=held_routes(),
                         clusters=[held_cluster(up.port)])
    tasks: list[asyncio.Future] = []
    try:
        env.start(wait=False)
        failed = await asyncio.to_thread(bl.wait_ready, env)
        if failed:
            raise RuntimeError(f"{key}: Envoy did not start: {failed}\n{env.log_tail(8)}")
        # Warm: the VM instantiated and its code compiled, a few callers counted.
        up.release.set()
        warm = await asyncio.gather(*(one(env.port, addr(90_000 + i)) for i in range(20)))
        assert all(s == 200 for s in warm), warm
        up.release.clear()
        await asyncio.sleep(1.5)  # the filter's 1 s tick has run (its periodic work)
        rss = [bl.rss_kib(env.pid)]
        # Two stages of n: the first n may reuse memory the process already
        # holds (free in its allocator); the next n mostly take new pages.
        for stage in range(2):
            heads = Heads(n)
            tasks += [asyncio.ensure_future(one(env.port, addr(first_caller + stage * n + i), heads))
                      for i in range(n)]
            try:
                await asyncio.wait_for(heads.all.wait(), HOLD_S)
            except asyncio.TimeoutError:
                raise RuntimeError(f"{key}: stage {stage + 1}: {heads.seen} of {n} got their "
                                   f"answer's first half") from None
            rss.append(bl.rss_kib(env.pid))
        up.release.set()
        statuses = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), HOLD_S)
        rss.append(bl.rss_kib(env.pid))
        ok = sum(1 for s in statuses if s == 200)
        await asyncio.sleep(1.5)  # the filter hands its counters to Envoy on its 1 s tick
        unknown = env.stats("costs_unknown")
        return {"variant": key, "round": rnd, "n": n, "ok": ok, "rss_kib": rss,
                "first_kib": (rss[1] - rss[0]) / n, "next_kib": (rss[2] - rss[1]) / n,
                "costs_unknown": sum(unknown.values())}
    finally:
        up.release.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        env.stop()
        up.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="requests in flight in each of the two stages")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(bl.BENCH / "results"))
    args = ap.parse_args()
    if not 1 <= args.n <= 5000:
        ap.error("--n is 1 to 5000")
    started = bl.start_run("inflight", args.out, "", (bl.RATEBOUND_WASM, bl.NOOP_WASM), "bench/setup.sh")
    if started is None:
        return 2
    out_dir, stamp, work = started
    raise_fd_limit(8 * args.n + 1024)
    t0 = time.monotonic()
    runs = []
    vs = variants()
    for rnd in range(1, args.rounds + 1):
        k = (rnd - 1) % len(vs)
        for key, label, filters, answer, ctype in vs[k:] + vs[:k]:
            r = asyncio.run(measure(key, filters, answer, ctype, args.n, work, rnd,
                                    first_caller=rnd * 2 * args.n))
            runs.append(r)
            print(f"inflight: round {rnd} {key}: KiB per request in flight, first {args.n} "
                  f"{r['first_kib']:.2f}, next {args.n} {r['next_kib']:.2f} (RSS KiB "
                  f"{' → '.join(f'{x:,}' for x in r['rss_kib'])}; {r['ok']}/{2 * args.n} answered 200; "
                  f"costs_unknown {r['costs_unknown']})", flush=True)

    def stat(key: str, col: str) -> tuple[float, float, float]:
        xs = [r[col] for r in runs if r["variant"] == key]
        return statistics.median(xs), min(xs), max(xs)

    lines = [f"# Memory per in-flight request — {stamp}", "",
             f"- {bl.describe_module()}; Envoy one worker, not pinned",
             f"- {args.n} requests in flight, then {args.n} more (2 × {args.n} at once), each from its "
             f"own caller, admitted, its answer's headers and first half of its body through, the rest "
             f"held; {args.rounds} rounds, a fresh Envoy per round and variant, order rotated; load "
             f"average after {' '.join(open('/proc/loadavg').read().split()[:3])}; wall time "
             f"{time.monotonic() - t0:.0f} s",
             "", "KiB of Envoy RSS per request in flight, median of the rounds (min–max); the difference "
             "of medians with the request-count bound:", "",
             f"| variant | first {args.n} | next {args.n} | next, over request-count (same answer) |",
             "|---|---|---|---|"]
    for key, label, *_ in vs:
        f, n_ = stat(key, "first_kib"), stat(key, "next_kib")
        ref = "count_big" if key == "cost_big" else "count"
        over = "–" if key in ("noop", "count", "count_big") else \
            f"{n_[0] - stat(ref, 'next_kib')[0]:+.2f}"
        lines.append(f"| {label} | {f[0]:.2f} ({f[1]:.2f}–{f[2]:.2f}) | **{n_[0]:.2f}** "
                     f"({n_[1]:.2f}–{n_[2]:.2f}) | {over} |")
    lines += ["", "Per round, RSS KiB idle → first n in flight → 2n in flight → after the answers:", ""]
    for r in runs:
        lines.append(f"- round {r['round']} {r['variant']}: {' → '.join(f'{x:,}' for x in r['rss_kib'])} "
                     f"({r['first_kib']:.2f}, {r['next_kib']:.2f} KiB each; {r['ok']} answered 200; "
                     f"costs_unknown {r['costs_unknown']})")
    md = "\n".join(lines) + "\n"
    path = out_dir / f"inflight-{stamp}.md"
    path.write_text(md)
    (out_dir / f"inflight-{stamp}.json").write_text(json.dumps(runs, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    print()
    print(md)
    print(f"inflight: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
