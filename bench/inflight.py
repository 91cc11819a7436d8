"""Memory per in-flight request: Envoy's RSS growth while N requests, from N
distinct callers (127.x addresses), are in flight through it at once, with
a cost bound (each holding a reservation, its answer's body half read),
with a request-count bound, and with the do-nothing filter.

    .venv/bin/python bench/inflight.py                 # N = 1,000, 3 rounds
    .venv/bin/python bench/inflight.py --n 500 --rounds 5

The upstream (in this process, 127.0.0.1) answers every request with its
headers and the first half of an OpenAI-style JSON body (or event stream),
then holds the rest until all N have arrived and RSS has been read: so each
request is admitted, has taken its reservation, and its cost scan holds what
came of the body. Per round and variant, a fresh Envoy (one worker) serves a
few requests first (the VM is instantiated, its code compiled); then

    KiB per in-flight request = (RSS with N in flight − RSS before) / N

RSS counts pages, and Envoy's allocator keeps what it freed: figures are
per round, medians reported, and the difference between two variants is
what one adds per request in flight. Results: bench/results/inflight-<timestamp>.md.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402
from harness import addr, raise_fd_limit  # noqa: E402  (tests/e2e, on benchlib's path)

HOLD_S = 30.0  # the longest an answer is held (bounded)
SSE_ANSWER = bl.CHAT_SSE.encode()
JSON_ANSWER = bl.CHAT_JSON.encode()


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
                asyncio.LimitOverrunError):
            pass
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


async def measure(key: str, filters: list, answer: bytes, ctype: str, n: int, work: Path,
                  rnd: int, first_caller: int) -> dict:
    up = await HeldUpstream(n, answer, ctype).start()
    env = bl.bench_envoy(f"{key}-r{rnd}", filters, work, cpu=None, upstream_port=up.port)
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
        up.arrived = 0
        up.all_in.clear()
        await asyncio.sleep(1.5)  # the filter's 1 s tick has run (its periodic work)
        before = bl.rss_kib(env.pid)
        heads = Heads(n)
        tasks = [asyncio.ensure_future(one(env.port, addr(first_caller + i), heads))
                 for i in range(n)]
        try:
            await asyncio.wait_for(heads.all.wait(), HOLD_S)
        except asyncio.TimeoutError:
            up.release.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise RuntimeError(f"{key}: only {up.arrived} of {n} reached the upstream, "
                               f"{heads.seen} got their answer's first half")
        peak = bl.rss_kib(env.pid)
        up.release.set()
        statuses = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), HOLD_S)
        after = bl.rss_kib(env.pid)
        ok = sum(1 for s in statuses if s == 200)
        await asyncio.sleep(1.5)  # the filter hands its counters to Envoy on its 1 s tick
        unknown = {k: v for k, v in env.stats("costs_unknown").items()}
        return {"variant": key, "round": rnd, "n": n, "ok": ok, "rss_before_kib": before,
                "rss_peak_kib": peak, "rss_after_kib": after,
                "kib_per_inflight": (peak - before) / n, "costs_unknown": sum(unknown.values())}
    finally:
        env.stop()
        up.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="requests in flight at once (at most 1,000: "
                    "Envoy's default circuit breakers allow 1,024 upstream requests)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(bl.BENCH / "results"))
    args = ap.parse_args()
    if not 1 <= args.n <= 1000:
        ap.error("--n is 1 to 1000")
    started = bl.start_run("inflight", args.out, "", (bl.RATEBOUND_WASM, bl.NOOP_WASM), "bench/setup.sh")
    if started is None:
        return 2
    out_dir, stamp, work = started
    raise_fd_limit(4 * args.n + 1024)
    t0 = time.monotonic()
    runs = []
    vs = variants()
    for rnd in range(1, args.rounds + 1):
        k = (rnd - 1) % len(vs)
        for key, label, filters, answer, ctype in vs[k:] + vs[:k]:
            r = asyncio.run(measure(key, filters, answer, ctype, args.n, work, rnd,
                                    first_caller=rnd * 2000))
            runs.append(r)
            print(f"inflight: round {rnd} {key}: {r['kib_per_inflight']:.2f} KiB per request in flight "
                  f"(RSS {r['rss_before_kib']:,} → {r['rss_peak_kib']:,} → {r['rss_after_kib']:,} KiB; "
                  f"{r['ok']}/{args.n} answered 200; costs_unknown {r['costs_unknown']})", flush=True)
    med = {key: statistics.median(r["kib_per_inflight"] for r in runs if r["variant"] == key)
           for key, *_ in vs}
    spread = {key: (min(r["kib_per_inflight"] for r in runs if r["variant"] == key),
                    max(r["kib_per_inflight"] for r in runs if r["variant"] == key)) for key, *_ in vs}
    lines = [f"# Memory per in-flight request — {stamp}", "",
             f"- {bl.describe_module()}; Envoy one worker, not pinned",
             f"- {args.n} requests in flight at once from {args.n} distinct callers, each admitted, its "
             f"answer's headers and first half of its body through, the rest held; {args.rounds} rounds, "
             f"a fresh Envoy per round and variant; load average {' '.join(open('/proc/loadavg').read().split()[:3])}; "
             f"wall time {time.monotonic() - t0:.0f} s",
             "", "| variant | KiB per request in flight, median (min–max) | over do-nothing | over request-count |",
             "|---|---|---|---|"]
    for key, label, *_ in vs:
        lo, hi = spread[key]
        over_noop = "–" if key == "noop" else f"{med[key] - med['noop']:+.2f}"
        over_count = "–" if key in ("noop", "count") else f"{med[key] - med['count']:+.2f}"
        lines.append(f"| {label} | **{med[key]:.2f}** ({lo:.2f}–{hi:.2f}) | {over_noop} | {over_count} |")
    lines += ["", "Per round (RSS KiB before → with N in flight → after the answers):", ""]
    for r in runs:
        lines.append(f"- round {r['round']} {r['variant']}: {r['rss_before_kib']:,} → {r['rss_peak_kib']:,} → "
                     f"{r['rss_after_kib']:,} ({r['kib_per_inflight']:.2f} KiB each; {r['ok']} answered 200; "
                     f"costs_unknown {r['costs_unknown']})")
    md = "\n".join(lines) + "\n"
    path = out_dir / f"inflight-{stamp}.md"
    path.write_text(md)
    (out_dir / f"inflight-{stamp}.json").write_text(json.dumps(runs, indent=1))
    print()
    print(md)
    print(f"inflight: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
