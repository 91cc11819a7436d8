"""Where an Envoy's CPU goes per request, split by what runs: the wasm code
V8 compiled (JIT), Envoy itself, libc, the kernel. Sampled with
`perf record -e cpu-clock` (a software clock: this works in VMs without
hardware counters), while wrk loads one variant at a time.

    .venv/bin/python bench/profile.py --only 2,4,6 [--seconds 8]

Variants are bench/run.py's. Prints, per variant, CPU µs/request and how
many of those µs fall in each part. Envoy's binary is stripped, so inside
Envoy there are no names: the split is what it can tell.
"""
from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402
import run as rb  # noqa: E402


def part(dso: str) -> str:
    if dso.startswith("[kernel"):
        return "kernel"
    if dso == "envoy" or dso.endswith("/envoy"):
        return "envoy"
    if dso == "[vdso]" or "libc" in dso or "libm" in dso or "ld-linux" in dso:
        return "libc"
    if dso in ("[unknown]", "[anon]") or dso.startswith("//anon") or dso.startswith("[JIT]") \
            or dso.startswith("/memfd:"):
        return "jit"
    return "other"


def profile(v: rb.Variant, seconds: float, work: Path) -> dict:
    env = v.env
    data = work / f"perf-{v.id}.data"
    wrk_cmd = ["taskset", "-c", str(rb.WRK_CPU), "wrk", "-t1", "-c32", f"-d{seconds:g}s",
               "--timeout", "5s", f"http://127.0.0.1:{env.port}/"]
    rb.run_wrk(env.port, 1.0, 32, v.headers)  # warm-up
    cpu0 = bl.cpu_seconds(env.pid)
    perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4999", "-p", str(env.pid),
                             "-o", str(data), "--", "sleep", f"{seconds + 0.5:g}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    r = rb.run_wrk(env.port, seconds, 32, v.headers)
    perf.wait(timeout=seconds + 30)
    cpu = bl.cpu_seconds(env.pid) - cpu0
    rep = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "dso", "-q",
                          "--percent-limit", "0"], capture_output=True, text=True, timeout=120).stdout
    shares: dict[str, float] = collections.defaultdict(float)
    for line in rep.splitlines():
        bits = line.split()
        if len(bits) >= 2 and bits[0].endswith("%"):
            shares[part(bits[1])] += float(bits[0].rstrip("%"))
    us = cpu / max(r["requests"], 1) * 1e6
    return {"us": us, "split": {k: us * s / 100 for k, s in shares.items()}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="2,4,6")
    ap.add_argument("--seconds", type=float, default=8)
    args = ap.parse_args()
    jwks, token = bl.make_jwt()
    keep = set(args.only.split(","))
    variants = [v for v in rb.build_variants(jwks, token) if v.id in keep]
    work = Path(tempfile.mkdtemp(prefix="ratebound-profile-"))
    bl.exit_on_sigterm()
    try:
        for v in variants:
            v.env = bl.bench_envoy(f"v{v.id}", v.filters, work, cpu=rb.ENVOY_CPU).start(wait=False)
            failed = bl.wait_ready(v.env)
            if failed:
                print(f"variant {v.id}: {failed}")
                continue
            res = profile(v, args.seconds, work)
            parts = "  ".join(f"{k} {x:.1f}" for k, x in sorted(res["split"].items(), key=lambda kv: -kv[1]))
            print(f"{v.id:>3} {v.label[:44]:44} {res['us']:5.1f} µs/req:  {parts}", flush=True)
            v.env.stop()
    finally:
        for v in variants:
            if v.env:
                v.env.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
