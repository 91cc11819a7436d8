"""A Redis failover in the middle of an attack (issue 38), for each topology:
a Sentinel set (a primary, two replicas, three sentinels) and a Redis
Cluster (three primaries, a replica each), each behind two envoyproxy/
ratelimit replicas and three Envoys with the module (--concurrency 2; each
Envoy's cluster `rls` holds both replicas as endpoints, round robin).

Driven by bench/failover.sh. The trial is tests/e2e/failover_trial.py's,
which tests/e2e/test_failover.py asserts on: one account attacked every
100 ms round-robin over the Envoys (each attempt from its own 127.x.y.z
address) under an installation bound of 5 a minute (`on_error: deny`), one
address sending to a fleet-bound route (100 a minute, 200 ms syncs) at the
same pace; the attack starts --lead seconds before a clock minute (so the
fixed-window and sliding checks can differ) and `--kill-after` seconds into
that minute the primary holding the account's counter gets SIGKILL. Every
answer is recorded. Per topology and trial it prints: attempts refused
with 503 and for how long, admitted beyond the limit (an exact sliding
60 s log, and clock minutes), seconds to the first answer and to an exact
count, counts lost, whether a service replica was restarted (same PIDs, a
fresh account then gets exactly its limit), the errors in the services'
logs, and the fleet bound's admissions against its stated error.

    bench/failover.sh                          2 trials per topology, 10 s lead, 30 s after
    bench/failover.sh --trials 1 --lead 0      a quick look (no minute boundary)
    bench/failover.sh --on-error allow         the same with on_error: allow
    bench/failover.sh --save                   also writes bench/results/failover-<stamp>.{md,json}
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

import failover_trial as ft  # noqa: E402 - tests/e2e, on sys.path through benchlib
from harness import Upstream  # noqa: E402
from redis_topologies import RedisCluster, SentinelSet  # noqa: E402

TOPOLOGIES = {"sentinel": SentinelSet, "cluster": RedisCluster}


def one_trial(kind: str, work: Path, args) -> dict:
    topo = TOPOLOGIES[kind](work / kind)
    up = Upstream()
    envoys: list = []

    def factory(cfg, **kw):
        e = bl.Envoy(work / f"envoy{len(envoys)}", cfg, name=f"failover{len(envoys)}", **kw)
        envoys.append(e)
        e.start()
        return e

    inst = None
    try:
        inst = ft.Installation(topo, factory, up.port, work,
                               cfg=ft.config(on_error=args.on_error, timeout_ms=args.timeout_ms))
        trial = ft.run_trial(inst, kind, lead_s=args.lead, kill_after=args.kill_after,
                             after_s=args.after, kill=not args.no_kill)
        result = ft.analyse(trial)
        # Every attempt, compact: [what, envoy, sent, answered (s from the
        # kill), status, RateLimit-Remaining].
        result["timeline"] = [[a["what"], a["envoy"], a["sent"], a["done"], a["status"],
                               a["remaining"]] for a in ft.timeline(trial)]
        return result
    finally:
        for e in envoys:
            e.stop()
        if inst is not None:
            inst.stop_services()
        up.close()
        topo.stop()


COLUMNS = [
    ("topology", lambda r: r["topology"]),
    ("attempts (after kill)", lambda r: f"{r['attempts']} ({r['attempts_after_kill']})"),
    ("refused 503", lambda r: r["refused_503"]),
    ("503 until (s)", lambda r: r["refused_503_span_s"]),
    ("new primary (s)", lambda r: r["failover_done_s"]),
    ("answered again (s)", lambda r: r["answered_again_s"]),
    ("exact again (s)", lambda r: r["exact_again_s"]),
    ("admitted", lambda r: r["admitted"]),
    ("wrongly admitted sliding / fixed", lambda r: f"{r['wrongly_admitted_sliding']} / "
                                                   f"{r['wrongly_admitted_fixed']}"),
    ("counts lost", lambda r: r["counts_lost"]),
    ("count at kill → after", lambda r: f"{r['count_at_kill']} → {r['count_after']}"),
    ("restarts", lambda r: r["restarts_needed"] if r["restarts_needed"] is not None else "yes?"),
    ("service log errors", lambda r: ", ".join(f"{k} {v}" for k, v in r["service_errors"].items()
                                               if v) or "none"),
    ("fleet admitted / limit (+stated)", lambda r: f"{r['fleet_admitted_in_window']} / "
                                                   f"{r['fleet_limit']} (+{r['fleet_stated_excess']})"),
]


def table(results: list[dict]) -> str:
    head = "| " + " | ".join(c for c, _ in COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    rows = ["| " + " | ".join(str(f(r)) for _, f in COLUMNS) + " |" for r in results]
    return "\n".join([head, rule, *rows])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topology", choices=["sentinel", "cluster", "both"], default="both")
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--lead", type=float, default=10.0,
                   help="seconds of attack before the clock minute of the kill (0: none)")
    p.add_argument("--kill-after", type=float, default=0.15,
                   help="seconds into the minute (or the attack, with --lead 0)")
    p.add_argument("--after", type=float, default=30.0,
                   help="seconds of attack after the minute starts")
    p.add_argument("--on-error", choices=["deny", "allow"], default="deny")
    p.add_argument("--timeout-ms", type=int, default=200)
    p.add_argument("--no-kill", action="store_true", help="the same trial, nothing killed")
    p.add_argument("--save", action="store_true",
                   help="write bench/results/failover-<stamp>.{md,json}")
    p.add_argument("--tag", default="")
    args = p.parse_args()
    if not 1 <= args.trials <= 10 or not 0 <= args.lead <= 40 or not 5 <= args.after <= 45:
        p.error("--trials 1..10, --lead 0..40, --after 5..45")
    started = bl.start_run("", str(bl.BENCH / "results"), args.tag,
                           (bl.RATEBOUND_WASM, bl.ROOT / "dist" / "ratebound"), "./build.sh")
    if started is None:
        return 1
    out_dir, stamp, _ = started
    kinds = ["sentinel", "cluster"] if args.topology == "both" else [args.topology]
    results = []
    with tempfile.TemporaryDirectory(prefix="failover-") as tmp:
        for n in range(args.trials):
            for kind in kinds:
                r = one_trial(kind, Path(tmp) / f"{kind}-{n}", args)
                results.append(r)
                print(table([r]).splitlines()[-1], flush=True)
    text = (f"# Redis failover under attack ({stamp})\n\n{bl.describe_module()}\n\n"
            f"`bench/failover.sh {' '.join(sys.argv[1:])}`: on_error {args.on_error}, "
            f"timeout_ms {args.timeout_ms}, lead {args.lead} s, kill {args.kill_after} s into "
            f"the minute, {args.after} s after it; times in seconds from the kill.\n\n"
            f"{table(results)}\n")
    print("\n" + text)
    if args.save:
        (out_dir / f"failover-{stamp}.md").write_text(text)
        (out_dir / f"failover-{stamp}.json").write_text(json.dumps(
            {"args": vars(args), "module": bl.describe_module(), "results": results},
            separators=(",", ":")) + "\n")
        print(f"wrote bench/results/failover-{stamp}.{{md,json}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
