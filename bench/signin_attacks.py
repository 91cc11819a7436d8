"""The sign-in attacks, measured on any module: how many attempts at an
account whose budget is used up each request shape gets through
(tests/e2e/signin_shapes.py, 36 attempts from 6 addresses per shape), what
a service configuration without the filter's domain lets through, and what
hammering a locked account costs (service calls, Redis writes, upstream
requests per refused attempt).

    .venv/bin/python bench/signin_attacks.py                      # dist/ratebound.wasm
    .venv/bin/python bench/signin_attacks.py --baseline OLD.wasm  # and a module from before the rule

A baseline module is configured without `key_secret` (it predates it).
Two real Envoys, the real envoyproxy/ratelimit over a real Redis, one real
upstream; everything on 127.0.0.1, every loop bounded in count and time.
Results: bench/results/signin-attacks-<timestamp>.md (and on stdout).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

import engines  # noqa: E402 - tests/e2e, on sys.path through benchlib
from harness import Upstream, addr  # noqa: E402
from launcher import grpc_cluster  # noqa: E402
from engines import clear_of_minute_end  # noqa: E402
from signin_shapes import SHAPES, account_for, config, plain  # noqa: E402

SECRET = {"RATEBOUND_KEY_SECRET": "bench-secret-0123456789abcdef"}
STAT = "wasmcustom.ratebound.attack"


class Setup:
    """Redis, the service configured for `service_cfg`, an upstream, two
    Envoys running `wasm` with `cfg`."""

    def __init__(self, work: Path, wasm: Path, cfg: dict, service_cfg: dict | None = None):
        work.mkdir(parents=True, exist_ok=True)
        self.redis = engines.Redis(work)
        self.svc = engines.RateLimitService(
            self.redis, engines.rls_yaml(service_cfg or cfg, work), work / "rls")
        self.up = Upstream()
        self.envoys = []
        for i in range(2):
            e = bl.Envoy(work / f"envoy{i}", cfg, wasm=wasm, name=f"attack{i}",
                         clusters=[grpc_cluster("rls", self.svc.grpc_port)],
                         upstream_port=self.up.port, vm_env=SECRET)
            self.envoys.append(e)
            e.start()
        for e in self.envoys:
            e.wait_value(lambda e=e: e.stat("cluster.rls.upstream_rq_200"),
                         lambda v: v >= e.concurrency + 1, timeout=10.0)

    def stop(self):
        for e in self.envoys:
            e.stop()
        self.svc.stop()
        self.redis.stop()
        self.up.close()


def shapes(s: Setup) -> list[tuple[str, int, int]]:
    rows = []
    for n, shape in enumerate(SHAPES):
        clear_of_minute_end(12.0)
        account = account_for(shape, uuid.uuid4().int % 10**6)
        for i in range(5):
            plain(account).send(s.envoys[i % 2].port)
        got = 0
        for a in range(6):
            for k in range(6):
                req = shape.build(account, f"decoy-{n}-{a}-{k}-{uuid.uuid4().hex[:4]}")
                got += req.send(s.envoys[k % 2].port, src=addr(a + 1, base=61 + n))[0] == 200
        rows.append((shape.name, got, 36))
    return rows


def unknown_domain(work: Path, wasm: Path, cfg: dict) -> tuple[int, int]:
    s = Setup(work, wasm, cfg, service_cfg=config(domain="other"))
    try:
        admitted = sum(plain(f"mallory-{i % 3}").send(s.envoys[0].port)[0] == 200
                       for i in range(50))
        return admitted, 50
    finally:
        s.stop()


def hammer(s: Setup, seconds: float, threads: int, cap: int) -> dict:
    clear_of_minute_end(seconds + 10)
    account = f"hammer-{uuid.uuid4().hex[:6]}"
    for i in range(6):
        plain(account).send(s.envoys[0].port)
    e = s.envoys[0]
    calls0 = e.stat(f"{STAT}.login.attempts.rls_calls")
    rq0 = e.stat("cluster.upstream.upstream_rq_total")
    incr0 = s.redis.commandstats().get("incrby", 0)
    stop = time.time() + seconds
    count = [0]
    lock = threading.Lock()

    def run():
        while time.time() < stop:
            with lock:
                if count[0] >= cap:
                    return
                count[0] += 1
            plain(account).send(e.port, src="127.0.66.1")

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=seconds + 60)
    time.sleep(1.2)  # stats are flushed each second
    return {
        "attempts": count[0],
        "service calls": e.stat(f"{STAT}.login.attempts.rls_calls") - calls0,
        "Redis INCRBY": s.redis.commandstats().get("incrby", 0) - incr0,
        "upstream requests": e.stat("cluster.upstream.upstream_rq_total") - rq0,
    }


def measure(label: str, wasm: Path, legacy: bool, args) -> dict:
    cfg = config(key_secret=None if legacy else {"env": "RATEBOUND_KEY_SECRET"})
    with tempfile.TemporaryDirectory(prefix="signin-attacks-") as tmp:
        work = Path(tmp)
        s = Setup(work / "a", wasm, cfg)
        try:
            rows = shapes(s)
            ham = hammer(s, args.seconds, args.threads, args.cap)
        finally:
            s.stop()
        unknown = unknown_domain(work / "b", wasm, cfg)
    return {"label": label, "rows": rows, "hammer": ham, "unknown": unknown}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--module", type=Path, default=bl.RATEBOUND_WASM)
    p.add_argument("--baseline", type=Path, help="a module from before the rule")
    p.add_argument("--seconds", type=float, default=8.0, help="hammering time")
    p.add_argument("--threads", type=int, default=24, help="hammering connections")
    p.add_argument("--cap", type=int, default=60000, help="hammering attempts at most")
    p.add_argument("--out", default=str(bl.BENCH / "results"))
    args = p.parse_args()
    bl.exit_on_sigterm()
    runs = []
    if args.baseline:
        runs.append(measure("before", args.baseline, True, args))
    runs.append(measure("after", args.module, False, args))

    lines = ["# Sign-in attacks", "",
             f"`bench/signin_attacks.py` ({time.strftime('%Y-%m-%d %H:%M')}), 2 Envoys, "
             "envoyproxy/ratelimit, Redis; an account whose 5 attempts a minute are used up.", "",
             "| attack | " + " | ".join(f"admitted {r['label']}" for r in runs) + " |",
             "|---|" + "---|" * len(runs)]
    for i, (name, _, total) in enumerate(runs[0]["rows"]):
        lines.append(f"| {name} | " + " | ".join(f"{r['rows'][i][1]} of {total}" for r in runs)
                     + " |")
    lines.append("| service configured without the domain (`on_error: deny`) | "
                 + " | ".join(f"{r['unknown'][0]} of {r['unknown'][1]}" for r in runs) + " |")
    lines += ["", f"Hammering a locked account from one address ({args.threads} connections, "
              f"{args.seconds:g} s):", "",
              "| | " + " | ".join(r["label"] for r in runs) + " |", "|---|" + "---|" * len(runs)]
    for k in runs[0]["hammer"]:
        lines.append(f"| {k} | " + " | ".join(str(r["hammer"][k]) for r in runs) + " |")
    lines.append("| service calls per refused attempt | " + " | ".join(
        f"{r['hammer']['service calls'] / max(1, r['hammer']['attempts']):.3f}" for r in runs)
        + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"signin-attacks-{time.strftime('%Y%m%d-%H%M%S')}.md"
    path.write_text(text)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
