"""Exactness under concurrency: a bound of 100 per route, 2,000 requests from
200 concurrent connections (hey), Envoy with several workers sharing the
count through proxy-wasm shared data. Admitted must be exactly 100 every time.

Each trial gets a fresh Envoy (fresh shared data). Default: 20 trials each at
--concurrency 2 and 4. Envoy and hey are not pinned here: the point is real
parallelism between the workers.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

LIMIT = 100


def trial(conc: int, n: int, c: int, work: Path, idx: int) -> dict:
    inst = "exact"
    cfg = bl.ratebound_config(inst, [{"name": "route", "per": "route", "limit": LIMIT, "window": "PT1M"}])
    env = bl.bench_envoy(f"exact-c{conc}-{idx}", [bl.wasm_filter("ratebound", bl.RATEBOUND_WASM, cfg)],
                         work, concurrency=conc, cpu=None)
    port = env.port
    try:
        failed = bl.wait_ready(env.start(wait=False))
        if failed:
            return {"error": f"{failed}: {env.log_tail(3)}"}
        out = subprocess.run(["hey", "-n", str(n), "-c", str(c), "-t", "10", f"http://127.0.0.1:{port}/"],
                             capture_output=True, text=True, timeout=120)
        codes = {int(k): int(v) for k, v in re.findall(r"\[(\d{3})\]\s+(\d+) responses", out.stdout)}
        err_block = out.stdout.split("Error distribution:")[-1] if "Error distribution:" in out.stdout else ""
        errors = sum(int(x) for x in re.findall(r"\[(\d+)\]\s+Get", err_block))
        p = f"wasmcustom.ratebound.{inst}.all.route"
        # The filter hands its counts to Envoy on its 1 s tick: wait for them
        # (bounded), or the stats columns would read 0.
        deadline = time.monotonic() + 5
        while True:
            st = env.stats(f"ratebound.{inst}|worker_[0-9]+.downstream_cx_total")
            counted = int(st.get(f"{p}.allowed", "0")) + int(st.get(f"{p}.refused", "0"))
            if counted >= n or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        per_worker = [int(v) for k, v in sorted(st.items()) if k.startswith("listener.") and "worker_" in k]
        return {
            "admitted": codes.get(200, 0),
            "refused": codes.get(429, 0),
            "other": sum(v for k, v in codes.items() if k not in (200, 429)),
            "errors": errors,
            "stat_allowed": int(st.get(f"{p}.allowed", "-1")),
            "stat_refused": int(st.get(f"{p}.refused", "-1")),
            "conns_per_worker": per_worker,
            "store_errors": int(st.get(f"wasmcustom.ratebound.{inst}.store_errors", "-1")),
            # Writes made from a worker's memory of its own (src/count/write_memory.rs)
            # and those the compare-and-swap found stale.
            "saved": int(st.get(f"wasmcustom.ratebound.{inst}.store_reads_saved", "-1")),
            "stale": int(st.get(f"wasmcustom.ratebound.{inst}.store_stale_guesses", "-1")),
        }
    finally:
        env.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--concurrency", default="2,4", help="Envoy --concurrency values")
    ap.add_argument("-n", "--requests", type=int, default=2000)
    ap.add_argument("-c", "--clients", type=int, default=200)
    args = ap.parse_args()
    bl.exit_on_sigterm()
    print(f"exactness: {bl.describe_module()}", flush=True)

    work = bl.BENCH / ".work" / f"exactness-{os.getpid()}"
    summary = []
    print(f"exactness: bound {LIMIT}/PT1M per route; {args.requests} requests, {args.clients} concurrent "
          f"(hey); {args.trials} trials per Envoy --concurrency", flush=True)
    for conc in (int(x) for x in args.concurrency.split(",")):
        admitted = []
        for i in range(args.trials):
            r = trial(conc, args.requests, args.clients, work, i)
            if "error" in r:
                print(f"  concurrency {conc} trial {i + 1:2}: ERROR {r['error']}", flush=True)
                continue
            admitted.append(r["admitted"])
            flag = "" if r["admitted"] == LIMIT else "   <-- not exact"
            print(f"  concurrency {conc} trial {i + 1:2}: admitted {r['admitted']:4}  refused {r['refused']:5}  "
                  f"other {r['other']}  errors {r['errors']}  (filter: allowed {r['stat_allowed']}, "
                  f"refused {r['stat_refused']}, store_errors {r['store_errors']}, "
                  f"writes from memory {r['saved']}, stale {r['stale']}; "
                  f"connections per worker {'/'.join(map(str, r['conns_per_worker']))}){flag}", flush=True)
        if admitted:
            exact = sum(1 for a in admitted if a == LIMIT)
            line = (f"concurrency {conc}: {exact}/{len(admitted)} trials admitted exactly {LIMIT}; "
                    f"admitted min {min(admitted)}, median {statistics.median(admitted):g}, max {max(admitted)}")
        else:
            line = f"concurrency {conc}: no trial completed"
        summary.append(line)
        print(line, flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print("\nexactness summary:")
    for line in summary:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
