"""Exact on a node: one count shared by all Envoy workers. A bound of 100 per
minute admits exactly 100 out of 2,000 concurrent requests, every trial."""
import time

import pytest

from harness import addr, burst, ensure_room


def cfg(instance):
    return {
        "instance": instance,
        "routes": [
            {"name": "r", "match": {"route_name": "direct"},
             "bounds": [{"name": "per_route", "per": "route", "limit": 100, "window": "PT1M"}]},
        ],
    }


@pytest.mark.parametrize("concurrency", [2, 4])
def test_exactly_100_of_2000_concurrent(envoy, concurrency):
    e = envoy(cfg(f"ex{concurrency}a"), concurrency=concurrency)
    results = []
    for trial, inst in enumerate((f"ex{concurrency}a", f"ex{concurrency}b", f"ex{concurrency}c")):
        if trial:
            assert e.reload(cfg(inst)) == "success"
        # a trial must not straddle a minute boundary (the previous window's
        # count would legitimately let a few more through)
        ensure_room(60, 12)
        t0 = time.monotonic()
        statuses = burst(e.port, 2000, 2000, src_fn=lambda i: addr(i % 500, base=30))
        dt = time.monotonic() - t0
        ok = statuses.count(200)
        refused = statuses.count(429)
        other = len(statuses) - ok - refused
        allowed_stat = e.rb(inst, "r", "per_route", "allowed")
        refused_stat = e.rb(inst, "r", "per_route", "refused")
        results.append((inst, ok, refused, other, allowed_stat, refused_stat, round(dt, 2)))
        print(f"concurrency {concurrency} trial {trial + 1} ({inst}): 200={ok} 429={refused} "
              f"other={other} stats allowed={allowed_stat} refused={refused_stat} in {dt:.2f}s")
    for inst, ok, refused, other, a, r, _ in results:
        assert (ok, refused, other) == (100, 1900, 0), results
        assert (a, r) == (100, 1900), results
    assert e.rb(results[-1][0], what="store_errors") == 0
