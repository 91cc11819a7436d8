"""What the size of a configuration costs when nothing is asked of it:
time to ready, resident memory and idle CPU at 10, 100 and the most bounds
a configuration may have, and how long a reload to that size stalls a
request or the admin endpoint.

    .venv/bin/python bench/config_size.py [--wasm dist/ratebound.wasm]
        [--compare OLD.wasm] [--sizes 10,100,max] [--idle 10] [--out FILE]

Every Envoy runs with --concurrency 2 (the Istio sidecar default) on
127.0.0.1 with free ports, and is stopped by its PID. "max" is 128 bounds
keyed per caller plus 896 per route: the budget of one configuration.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

from benchlib import cpu_seconds  # noqa: E402
from harness import Envoy, request  # noqa: E402


def configuration(keyed: int, per_route: int = 0, base: int = 1_000_000) -> dict:
    def bound(j: int, per: str) -> dict:
        return {"name": f"b{j}", "per": per, "limit": base + j, "window": "PT1M"}

    bounds = [bound(j, "address") for j in range(keyed)]
    bounds += [bound(j, "route") for j in range(keyed, keyed + per_route)]
    return {"instance": "size",
            "routes": [{"name": "r", "match": {"route_name": "direct"}, "bounds": bounds}]}


def size(name: str) -> tuple[int, int]:
    """"max", N (keyed bounds) or KEYED+ROUTE."""
    if name == "max":
        return 128, 896
    keyed, _, per_route = name.partition("+")
    return int(keyed), int(per_route or 0)


class Prober:
    """Sequential requests (fresh connection each) to the listener and GETs
    of the admin /ready, every 5 ms, recording the slowest of each."""

    def __init__(self, e: Envoy) -> None:
        self.e = e
        self.stop = threading.Event()
        self.worst = {"request": 0.0, "admin": 0.0}
        self.count = {"request": 0, "admin": 0}
        self.threads = [threading.Thread(target=self.run, args=(k,), daemon=True)
                        for k in ("request", "admin")]

    def one(self, kind: str) -> None:
        if kind == "request":
            request(self.e.port, "/", src="127.0.0.1", timeout=30)
        else:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.e.admin_port}/ready", timeout=30) as r:
                r.read()

    def run(self, kind: str) -> None:
        deadline = time.monotonic() + 120  # bounded whatever happens
        while not self.stop.is_set() and time.monotonic() < deadline:
            t = time.monotonic()
            try:
                self.one(kind)
            except Exception:  # noqa: BLE001 - a failed probe counts as slow
                pass
            self.worst[kind] = max(self.worst[kind], time.monotonic() - t)
            self.count[kind] += 1
            time.sleep(0.005)

    def __enter__(self) -> "Prober":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=40)


def measure(wasm: Path, name: str, idle_s: float, workdir: Path) -> dict:
    keyed, per_route = size(name)
    cfg = configuration(keyed, per_route)
    out: dict = {"size": name, "bounds": keyed + per_route, "keyed": keyed}
    # Start with the configuration: time to ready, memory, idle CPU.
    e = Envoy(workdir / f"start-{name}", cfg, wasm=wasm, name="size")
    t0 = time.monotonic()
    e.start()
    out["ready_s"] = time.monotonic() - t0
    try:
        time.sleep(2)  # first ticks
        out["rss_mb"] = e.rss_kb() / 1024
        c0, w0 = cpu_seconds(e.pid), time.monotonic()
        time.sleep(idle_s)
        out["idle_cpu_pct"] = 100 * (cpu_seconds(e.pid) - c0) / (time.monotonic() - w0)
    finally:
        e.stop()
    # Start small, then reload to the size while requests and admin GETs
    # keep coming: the longest each waited.
    e = Envoy(workdir / f"reload-{name}", configuration(1, base=5_000_000), wasm=wasm,
              name="size")
    e.start()
    try:
        with Prober(e) as p:
            time.sleep(0.5)
            t0 = time.monotonic()
            e._write_lds(cfg)  # noqa: SLF001 - the push itself, timed below
            # Until a new connection is served by the new configuration.
            while time.monotonic() - t0 < 60:
                status, h, _ = request(e.port, "/", timeout=30)
                if h.get("ratelimit-limit") == "1000000":
                    break
                time.sleep(0.01)
            out["reload_s"] = time.monotonic() - t0
            time.sleep(1.0)
        out["reload"] = "success" if out["reload_s"] < 60 else "timeout"
        out["request_stall_ms"] = 1000 * p.worst["request"]
        out["admin_stall_ms"] = 1000 * p.worst["admin"]
        out["probes"] = sum(p.count.values())
        out["rss_after_reload_mb"] = e.rss_kb() / 1024
    finally:
        e.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wasm", default=str(ROOT / "dist" / "ratebound.wasm"))
    ap.add_argument("--compare", help="another build of the module, measured the same way")
    ap.add_argument("--sizes", default="10,100,max")
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--out")
    a = ap.parse_args()
    import tempfile

    builds = [("this build", Path(a.wasm))]
    if a.compare:
        builds.append(("compared", Path(a.compare)))
    rows = []
    with tempfile.TemporaryDirectory(prefix="rb-size-") as tmp:
        for label, wasm in builds:
            for name in a.sizes.split(","):
                r = measure(wasm, name, a.idle, Path(tmp) / label.replace(" ", "-"))
                r["build"] = label
                rows.append(r)
                print(r, flush=True)
    head = ("| build | bounds (keyed) | ready s | RSS MB | idle CPU % of a core | reload s "
            "| worst request ms during reload | worst admin ms | RSS after reload MB |")
    lines = [f"Envoy 1.40, --concurrency 2, idle {a.idle:.0f} s; module {a.wasm}",
             "", head, "|" + "---|" * 9]
    for r in rows:
        lines.append(
            f"| {r['build']} | {r['bounds']} ({r['keyed']}) | {r['ready_s']:.2f} | "
            f"{r['rss_mb']:.0f} | {r['idle_cpu_pct']:.1f} | {r['reload_s']:.2f} "
            f"({r['reload']}) | {r['request_stall_ms']:.0f} | {r['admin_stall_ms']:.0f} | "
            f"{r['rss_after_reload_mb']:.0f} |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
