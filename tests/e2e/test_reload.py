"""Reloads through LDS: unchanged routes keep their counters, changed routes
start from zero, and an invalid configuration is rejected while the old one
keeps serving. An invalid configuration at startup stops Envoy."""
import copy
import time
import json
import re

from harness import addr, ensure_room, request, xff_flood

JSON_PATH = re.compile(r"routes(\[0\]|/0|\.0)[./]?bounds(\[0\]|/0|\.0)[./]?window")


def two_routes(limit_b=100):
    return {
        "instance": "rl",
        "routes": [
            {"name": "a", "match": {"route_name": "direct", "path_prefix": "/a"},
             "bounds": [{"name": "per_route", "per": "route", "limit": 100, "window": "PT1M"}]},
            {"name": "b", "match": {"route_name": "direct", "path_prefix": "/b"},
             "bounds": [{"name": "per_route", "per": "route", "limit": limit_b, "window": "PT1M"}]},
        ],
    }


def lr(e, path, src="127.0.0.1"):
    status, h, body = request(e.port, path, src=src)
    assert status == 200, (status, h, body)
    return int(h["ratelimit-limit"]), int(h["ratelimit-remaining"])


def test_reload_keeps_unchanged_routes_and_resets_changed_ones(envoy):
    e = envoy(two_routes())
    ensure_room(60, 20)
    assert [lr(e, "/a") for _ in range(3)] == [(100, 99), (100, 98), (100, 97)]
    assert [lr(e, "/b") for _ in range(5)][-1] == (100, 95)

    # Route b edited 100/min -> 200/min: b starts from zero, a keeps its count.
    assert e.reload(two_routes(limit_b=200)) == "success"
    a1, b1 = lr(e, "/a"), lr(e, "/b")
    print(f"after editing b to 200/min: a {a1} (was 97 remaining), b {b1}")
    assert a1 == (100, 96), "unchanged route a lost its counter"
    assert b1 == (200, 199), "edited bound inherited the old count"

    # Adding a route changes neither a nor b: both keep their counts.
    cfg = two_routes(limit_b=200)
    cfg["routes"].append(
        {"name": "c", "match": {"route_name": "direct", "path_prefix": "/c"},
         "bounds": [{"name": "per_route", "per": "route", "limit": 7, "window": "PT1M"}]})
    assert e.reload(cfg) == "success"
    a2, b2, c2 = lr(e, "/a"), lr(e, "/b"), lr(e, "/c")
    print(f"after adding route c: a {a2}, b {b2}, c {c2}")
    assert (a2, b2, c2) == ((100, 95), (200, 198), (7, 6))

    # Changing a's matching resets a only.
    cfg2 = copy.deepcopy(cfg)
    cfg2["routes"][0]["match"]["path_prefix"] = "/a/"
    assert e.reload(cfg2) == "success"
    a3, b3 = lr(e, "/a/x"), lr(e, "/b")
    print(f"after changing a's match: a {a3}, b {b3}")
    assert (a3, b3) == ((100, 99), (200, 197))
    assert e.rb("rl", what="store_errors") == 0


BASE = {
    "instance": "inv",
    "routes": [
        {"name": "r", "match": {"route_name": "direct"},
         "bounds": [{"name": "per_address", "per": "address", "limit": 2, "window": "PT1M"}]},
    ],
}


def invalid_variants():
    out = {}
    c = copy.deepcopy(BASE); c["routes"][0]["bounds"][0]["window"] = "PT0S"; out["window PT0S"] = c
    c = copy.deepcopy(BASE); c["routes"][0]["bounds"][0]["window"] = "P2D"; out["window P2D"] = c
    c = copy.deepcopy(BASE); c["routes"][0]["bounds"][0]["limit"] = 0; out["limit 0"] = c
    c = copy.deepcopy(BASE); c["routes"][0]["bounds"][0]["limt"] = 3; out["unknown field"] = c
    c = copy.deepcopy(BASE); c["routes"].append(copy.deepcopy(c["routes"][0])); out["duplicate route"] = c
    c = copy.deepcopy(BASE); c["routes"][0]["bounds"][0]["per"] = "planet"; out["unknown per"] = c
    out["not json"] = '{"routes": ['
    return out


def test_invalid_push_is_rejected_and_old_config_keeps_serving(envoy):
    e = envoy(BASE)
    ensure_room(60, 25)
    src = addr(30)
    assert [request(e.port, "/", src=src)[0] for _ in range(3)] == [200, 200, 429]
    rejected0 = e.stat("listener_manager.lds.update_rejected")
    for k, (label, bad) in enumerate(invalid_variants().items()):
        log_before = len(e.log())
        result = e.reload(bad)
        print(f"push {label}: {result}")
        assert result == "rejected", label
        # the old configuration keeps serving, with its counts
        status, h, body = request(e.port, "/", src=src)
        assert status == 429, (label, status, h)
        assert json.loads(body)["bound"] == "per_address"
        status, h, _ = request(e.port, "/", src=addr(31 + k))
        assert status == 200 and h["ratelimit-limit"] == "2", (label, h)
        if label == "window PT0S":
            new_log = e.log()[log_before:]
            hits = [l for l in new_log.splitlines() if JSON_PATH.search(l)]
            print("log: " + (hits[0] if hits else "<no line with the JSON path>"))
            assert hits, new_log[-3000:]
    assert e.stat("listener_manager.lds.update_rejected") == rejected0 + len(invalid_variants())
    # and a valid push is still accepted afterwards
    ok = copy.deepcopy(BASE)
    ok["routes"][0]["bounds"][0]["limit"] = 3
    assert e.reload(ok) == "success"
    assert request(e.port, "/", src=src)[0] == 200


def test_invalid_config_at_startup_stops_envoy(envoy):
    bad = copy.deepcopy(BASE)
    bad["routes"][0]["bounds"][0]["window"] = "PT0S"
    e = envoy(bad, start=False, static_listener=True)
    e.start(wait=False)
    code = e.wait_exit(timeout=20)
    log = e.log()
    hits = [l for l in log.splitlines() if JSON_PATH.search(l)]
    print(f"exit code {code}; " + (hits[0] if hits else "<no line with the JSON path>"))
    assert code is not None, "Envoy kept running with an invalid filter configuration"
    assert code != 0
    assert hits, log[-3000:]


def per_address(limit, instance="gauge"):
    return {
        "instance": instance,
        "routes": [
            {"name": "r", "match": {"route_name": "direct"},
             "bounds": [{"name": "per_address", "per": "address", "limit": limit,
                         "window": "PT1M"}]},
        ],
    }


def test_tracked_gauge_is_right_after_a_reload(envoy):
    # After a push, the old filter chain drains (Envoy's --drain-time-s,
    # default 600 s) and its root context keeps ticking. The gauge must keep
    # saying how many callers the live configuration tracks.
    e = envoy(per_address(5))
    burst_from = lambda lo, n: [request(e.port, "/", src=addr(lo + i, base=70))[0]  # noqa: E731
                                for i in range(n)]
    assert set(burst_from(0, 50)) == {200}
    before = e.wait_value(lambda: e.rb("gauge", "r", "per_address", "tracked"),
                          lambda v: v == 50)
    assert before == 50
    assert e.reload(per_address(6)) == "success"  # the bound changed: starts from zero
    assert set(burst_from(1000, 100)) == {200}
    time.sleep(1.2)  # at least one tick of every root context
    reads = []
    for _ in range(12):
        reads.append(e.rb("gauge", "r", "per_address", "tracked"))
        time.sleep(0.25)
    print(f"tracked before the push: {before}; after the push and 100 new callers, "
          f"read every 0.25 s: {reads}; draining filter chains: "
          f"{e.stat('listener_manager.total_filter_chains_draining')}")
    assert set(reads) == {100}, reads


def test_memory_stays_bounded_across_many_reloads(envoy):
    # Every push changes the bound (its counters start from zero) and then
    # 11,000 new callers arrive: keys must be reused slots, not new keys per
    # generation (which would add >= 10,000 shared-data keys, over 1 MB, per push).
    # --drain-time-s 1: Envoy frees drained filter chains (and their root
    # contexts) after the drain time; the default 600 s would keep every one.
    e = envoy(per_address(5, "many"), xff_num_trusted_hops=1, drain_time_s=1)
    pushes = 25
    rss = {}
    t0 = time.time()
    for k in range(pushes + 1):
        if k:
            assert e.reload(per_address(5 + k, "many")) == "success"
        c = xff_flood(e.port, 11_000, lambda i, k=k: addr(k * 11_000 + i, base=60))
        assert c.get(200, 0) >= 10_000, (k, c)  # the cap: 10,000 tracked, the rest overflow
        if k in (0, 5, 15, pushes):
            rss[k] = e.rss_kb()
    tracked = e.wait_value(lambda: e.rb("many", "r", "per_address", "tracked"),
                           lambda v: v == 10_000)
    print(f"{pushes} pushes x 11,000 new callers in {time.time() - t0:.1f}s; VmRSS kB by push "
          f"{rss}; growth from push 5 to {pushes}: {rss[pushes] - rss[5]} kB; tracked={tracked}")
    assert tracked == 10_000
    assert rss[pushes] - rss[5] < 6 * 1024, rss
