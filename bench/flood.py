"""Memory under a flood: N requests (default 1,000,000), each from a distinct
client address, against a ratebound per-address bound.

Envoy (pinned to CPU 0, --concurrency 1) trusts one X-Forwarded-For hop, so
the address each request carries in X-Forwarded-For is its client address;
wrk (pinned to CPU 1, bench/flood.lua) makes every one different. Reports
Envoy's VmRSS before, during and after, and the filter's
`wasmcustom.ratebound.flood.all.addr.{tracked,overflow,allowed,refused}`.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402


def stat_of(stats: dict, name: str) -> int:
    try:
        return int(stats.get(name, "-1"))
    except ValueError:
        return -1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", "--requests", type=int, default=1_000_000)
    ap.add_argument("--limit", type=int, default=10, help="the per-address bound's limit (per PT1M)")
    ap.add_argument("--max-seconds", type=int, default=600, help="wrk stops after this long in any case")
    ap.add_argument("--sample", type=float, default=5.0, help="seconds between RSS/stat samples")
    args = ap.parse_args()

    bl.exit_on_sigterm()
    print(f"flood: {bl.describe_module()}", flush=True)
    inst = "flood"
    cfg = bl.ratebound_config(inst, [{"name": "addr", "per": "address", "limit": args.limit, "window": "PT1M"}])
    prefix = f"wasmcustom.ratebound.{inst}.all.addr"
    work = bl.BENCH / ".work" / f"flood-{os.getpid()}"
    env = bl.bench_envoy("flood", [bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)], work,
                         concurrency=1, cpu=0, trusted_xff=True)
    port = env.port
    try:
        failed = bl.wait_ready(env.start(wait=False))
        if failed:
            print(f"flood: {failed}\n{env.log_tail()}", file=sys.stderr)
            return 1
        # settle: a few requests from one address, then let a tick publish the gauge
        for _ in range(20):
            bl.http_get(port, "/", {"X-Forwarded-For": "192.0.2.1"})
        time.sleep(2.5)

        def sample(tag: str) -> dict:
            st = env.stats(f"ratebound.{inst}")
            return {"tag": tag, "rss_kib": bl.rss_kib(env.pid),
                    **{k: stat_of(st, f"{prefix}.{k}") for k in ("tracked", "overflow", "allowed", "refused")}}

        samples = [sample("before")]
        t0 = time.monotonic()
        cmd = ["taskset", "-c", "1", "wrk", "-t1", "-c32", f"-d{args.max_seconds}s", "--timeout", "5s",
               "-s", str(bl.BENCH / "flood.lua"), f"http://127.0.0.1:{port}/"]
        print(f"flood: {args.requests:,} requests, each from its own X-Forwarded-For address, "
              f"bound {args.limit}/PT1M per address; Envoy pid {env.pid}", flush=True)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "FLOOD_N": str(args.requests)})
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
        reader.start()
        # wrk runs for -d whatever its script does: once the filter has decided on
        # N requests (flood.lua stops sending at N), SIGINT makes wrk print its summary.
        base = samples[0]["allowed"] + samples[0]["refused"]
        deadline = t0 + args.max_seconds + 30
        next_sample = t0 + args.sample
        last_seen, last_change = -1, time.monotonic()
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.25)
            st = env.stats(f"ratebound.{inst}")
            seen = stat_of(st, f"{prefix}.allowed") + stat_of(st, f"{prefix}.refused") - base
            if seen != last_seen:
                last_seen, last_change = seen, time.monotonic()
            # done: all N decided, or flood.lua stopped sending (its last few in-flight
            # requests are abandoned when the thread stops) and nothing moved for 2 s
            if seen >= args.requests or (seen > 0 and time.monotonic() - last_change > 2.0):
                time.sleep(0.5)
                proc.send_signal(signal.SIGINT)
                break
            if time.monotonic() >= next_sample:
                next_sample += args.sample
                s = sample(f"t+{time.monotonic() - t0:.0f}s")
                samples.append(s)
                print(f"flood: {s['tag']:>7}  RSS {s['rss_kib'] / 1024:7.1f} MiB  admitted {s['allowed']:>9,}  "
                      f"refused {s['refused']:>9,}  tracked {s['tracked']:>6,}  overflow {s['overflow']:>9,}",
                      flush=True)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        reader.join(timeout=10)
        elapsed = time.monotonic() - t0
        text = "".join(out)
        time.sleep(2.5)  # a tick publishes `tracked`
        after = sample("after")
        samples.append(after)
        if not env.alive():
            print("flood: Envoy died during the flood\n" + env.log_tail(), file=sys.stderr)
            return 1
    finally:
        env.stop()

    m = re.search(r"(\d+) requests in", text)
    sent = int(m.group(1)) if m else -1
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    before = samples[0]
    print()
    print(f"flood: wrk completed {sent:,} requests in {elapsed:.0f} s "
          f"({sent / elapsed:,.0f}/s), non-2xx {int(non2xx.group(1)) if non2xx else 0:,}")
    decided = after["allowed"] + after["refused"] - before["allowed"] - before["refused"]
    print(f"flood: distinct client addresses: {decided:,} (one per request the filter decided on; "
          f"wrk abandons its last few in-flight requests when it stops)")
    print()
    print("| | Envoy VmRSS | tracked | overflow | admitted | refused |")
    print("|---|---|---|---|---|---|")
    for s in (before, after):
        print(f"| {s['tag']} | {s['rss_kib'] / 1024:.1f} MiB | {s['tracked']:,} | {s['overflow']:,} | "
              f"{s['allowed']:,} | {s['refused']:,} |")
    peak = max(s["rss_kib"] for s in samples)
    print()
    print(f"flood: RSS growth {(after['rss_kib'] - before['rss_kib']) / 1024:+.1f} MiB "
          f"(peak {peak / 1024:.1f} MiB) for {sent:,} distinct addresses; "
          f"tracked {after['tracked']:,} (the cap bounds it), overflow {after['overflow']:,}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
