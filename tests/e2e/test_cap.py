"""Keys are capped: each bound tracks at most 10,000 callers; the next one is
counted in the bound's overflow counter; expired callers are reclaimed; memory
stays bounded under a flood of rotating addresses."""
import json
import time

from harness import addr, burst, ensure_room, request, wait_window_start, xff_flood

CAP = 10_000


def cap_cfg(instance, limit, window):
    bound = {"name": "per_address", "per": "address", "limit": limit, "window": window}
    return {
        "instance": instance,
        "routes": [{"name": "r", "match": {"route_name": "direct"}, "bounds": [bound]}],
    }


def test_cap_then_overflow_then_reclaim(envoy):
    window = 20.0
    e = envoy(cap_cfg("cap", 2, "PT20S"))
    st = lambda what: e.rb("cap", "r", "per_address", what)  # noqa: E731

    # Every entry written in window W stays live until W+2 starts (it still
    # weighs in the next window's estimate). Start early in a window so that
    # all 10,000 are tracked at once when we look.
    W0 = wait_window_start(window, at=0.05, max_elapsed=4.0)
    t0 = time.time()
    statuses = burst(e.port, CAP, 400, src_fn=lambda i: addr(i, base=40))
    t1 = time.time()
    counts = {s: statuses.count(s) for s in set(statuses)}
    # the tracked gauge is refreshed on the filter's 1 s tick
    tracked = e.wait_value(lambda: st("tracked"), lambda v: v == CAP)
    overflow = st("overflow")
    print(f"{CAP} distinct source addresses in {t1 - t0:.1f}s: {counts}; "
          f"tracked={tracked} overflow={overflow} allowed={st('allowed')}")
    assert t1 < W0 + 2 * window - 1, "too slow: the first entries may have expired"
    assert counts == {200: CAP}
    assert st("allowed") == CAP
    assert tracked == CAP
    assert overflow == 0

    # The 10,001st caller: counted in the shared overflow counter (same limit 2).
    ensure_room(window, 2.0)
    assert time.time() < W0 + 2 * window - 1
    x = [addr(CAP + k, base=40) for k in range(3)]
    s1, h1, _ = request(e.port, "/", src=x[0])
    overflow1 = st("overflow")
    s2, _, _ = request(e.port, "/", src=x[1])
    s3, h3, b3 = request(e.port, "/", src=x[2])
    tracked = e.wait_value(lambda: st("tracked"), lambda v: v == CAP, timeout=2.5)
    print(f"overflow callers: {s1} {s2} {s3}; overflow stat {overflow} -> {overflow1} -> "
          f"{st('overflow')}; tracked={tracked}")
    assert s1 == 200, h1
    assert overflow1 == overflow + 1
    assert tracked == CAP
    # the long tail shares one counter: never refused outright, never unbounded
    assert s2 == 200
    assert s3 == 429, (s3, h3, b3)
    assert json.loads(b3)["bound"] == "per_address"
    overflow_before_reclaim = st("overflow")

    # After the entries expire (2 windows after the last tracked write), a new
    # caller is tracked again, not counted in overflow.
    last_window_start = t1 - (t1 % window)
    wake = last_window_start + 2 * window + 0.5
    time.sleep(max(0.0, wake - time.time()))
    y = addr(CAP + 10, base=40)
    for k in range(2):
        status, h, _ = request(e.port, "/", src=y)
        assert status == 200, h
    status, h, _ = request(e.port, "/", src=y)
    assert status == 429, "the reclaimed caller must have its own counter (limit 2)"
    # expired callers are swept on the tick: the gauge falls
    tracked_after = e.wait_value(lambda: st("tracked"), lambda v: v < CAP, timeout=5.0)
    print(f"after expiry: overflow {overflow_before_reclaim} -> {st('overflow')}; "
          f"tracked {CAP} -> {tracked_after}")
    assert st("overflow") == overflow_before_reclaim
    assert 1 <= tracked_after < CAP
    assert e.rb("cap", what="store_errors") == 0


def test_bounded_memory_under_100k_rotating_addresses(envoy):
    # Trusted XFF (1 hop): the client address is the X-Forwarded-For value.
    limit = 5
    e = envoy(cap_cfg("flood", limit, "PT1M"), xff_num_trusted_hops=1)
    st = lambda what: e.rb("flood", "r", "per_address", what)  # noqa: E731
    xff = lambda i: addr(i, base=60)  # noqa: E731

    # sanity: the XFF value is the caller (its own counter, limit 5)
    ensure_room(60, 3)
    r = [request(e.port, "/", headers={"X-Forwarded-For": addr(0, base=200)})[0]
         for _ in range(limit + 1)]
    assert r == [200] * limit + [429], r

    phases = [(0, 20_000), (20_000, 60_000), (60_000, 100_000)]
    rss = [e.rss_kb()]
    t0 = time.time()
    total = {}
    for lo, hi in phases:
        c = xff_flood(e.port, hi - lo, lambda i, lo=lo: xff(lo + i))
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
        rss.append(e.rss_kb())
        print(f"after {hi} addresses ({time.time() - t0:.1f}s): {c} tracked={st('tracked')} "
              f"overflow={st('overflow')} VmRSS={rss[-1]} kB")
    n = phases[-1][1]
    time.sleep(1.2)  # one tick: the tracked gauge is current
    allowed, refused, overflow, tracked = st("allowed"), st("refused"), st("overflow"), st("tracked")
    print(f"{n} rotating addresses: statuses {total}; allowed={allowed} refused={refused} "
          f"overflow={overflow} tracked={tracked}; VmRSS kB {rss} "
          f"(growth {rss[-1] - rss[1]} kB over the last {n - phases[0][1]} addresses)")
    assert sum(total.values()) == n
    assert total.get(200, 0) + total.get(429, 0) == n
    assert allowed + refused == n + limit + 1
    assert tracked <= CAP
    assert overflow > 0
    # 10,000 tracked callers (+1 sanity caller) admitted once each; the other
    # 90,000 share one overflow counter of limit 5 (at most 2x across a boundary).
    assert allowed <= CAP + limit + 2 * limit
    # Once the cap is full, 80,000 more distinct callers must not grow memory
    # like a key per caller would.
    assert rss[-1] - rss[1] < 16 * 1024, rss
