"""Envoy stats: counters add up across workers, appear in the Prometheus
output, and their number is fixed by the configuration, never by traffic."""
import re

from harness import addr, burst, ensure_room

CFG = {"instance": "st", "routes": [{"name": "api", "bounds": [
    {"name": "all", "per": "route", "limit": 1000000, "window": "PT1M"},
    {"name": "addr", "per": "address", "limit": 3, "window": "PT1M"},
]}]}


def test_stats_add_up_across_workers_and_never_grow_with_callers(envoy):
    e = envoy(CFG, concurrency=2)
    ensure_room(60, 20)
    names_before = sorted(k for k in e.stats("ratebound") if k.startswith("wasmcustom."))
    # Exactly the stats src/stats.rs gives node bounds and an instance with
    # no rate-limit service, sign-in route or fleet bound.
    per_bound = ("allowed", "refused", "would_refuse", "overflow", "tracked")
    per_instance = ("store_errors", "identity_errors", "session_calls", "session_cache_hits",
                    "jwt_cache_hits", "store_reads_saved", "store_stale_guesses")
    assert names_before == sorted(
        [f"wasmcustom.ratebound.st.api.{b}.{s}" for b in ("all", "addr") for s in per_bound]
        + [f"wasmcustom.ratebound.st.{s}" for s in per_instance]), names_before
    # 400 callers, 4 requests each, on both workers.
    statuses = burst(e.port, 1600, 64, src_fn=lambda i: addr(i % 400, base=20))
    assert statuses.count(200) == 1200 and statuses.count(429) == 400, statuses[:20]
    s = e.stats("ratebound")
    assert s["wasmcustom.ratebound.st.api.all.allowed"] == 1200
    assert s["wasmcustom.ratebound.st.api.addr.allowed"] == 1200
    assert s["wasmcustom.ratebound.st.api.addr.refused"] == 400
    assert s["wasmcustom.ratebound.st.api.all.refused"] == 0, "a refused request is counted by no bound"
    tracked = e.wait_value(lambda: e.rb("st", "api", "addr", "tracked"), lambda v: v == 400)
    assert tracked == 400
    names_after = sorted(k for k in e.stats("ratebound") if k.startswith("wasmcustom."))
    assert names_after == names_before, "no stat per caller"
    prom = e.admin("/stats/prometheus")
    lines = [l for l in prom.splitlines() if "ratebound_st_api" in l and not l.startswith("#")]
    print("\n".join(lines))
    assert any(re.fullmatch(r"ratebound_st_api_addr_refused\{?\}? 400", l) for l in lines), lines
