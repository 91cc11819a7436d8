"""Fleet bounds end to end (`"scope": "fleet"`): three real Envoys with the
module, each syncing its admitted hits with one real envoyproxy/ratelimit
over one real Redis every `sync_ms`, one real upstream. The service's
configuration is what `ratebound rls-config` prints for the filter's.

What is checked (docs/fleet.md, "What the wiring must respect"):
- even load over three nodes admits the limit once for the fleet (and the
  same trial with "scope": "node" admits it once per node: 3 x);
- all of the load on one node can use the whole budget (not limit / nodes);
- a node killed and restarted: the others go on, the restarted one decides
  alone until its first answer, then joins the fleet's count;
- the service down: each node admits limit / nodes alone (nodes learned
  from the heartbeat), counts sync errors, and converges once it is back;
- sync traffic: ~1000 / sync_ms calls a second per node whatever the
  request rate, and refused requests never reach the service (the counts
  in Redis are exactly the admitted requests).

Every test uses its own client addresses (harness.addr, base 60..) and keeps
its trial inside one clock minute: the service's windows are clock minutes,
and a fresh key's previous window is empty, so within the minute the
fleet's estimate is just its count. Every loop is bounded in count and time.
"""
from __future__ import annotations

import asyncio
import json
import math
import re
import time
import urllib.parse

import pytest

from harness import _one, addr, note_request, raise_fd_limit
from engines import rls_yaml
from launcher import grpc_cluster


INSTANCE = "fleet"
DOMAIN = "fleet"
ROUTE = "api"
BOUND = "per_address"
LIMIT = 300
SYNC_MS = 200
NODES = 3
PATH = "/up/fleet"
SYNC_S = SYNC_MS / 1000

# What a fleet bound may admit over its limit in these trials. docs/fleet.md:
# the excess is up to about 2 x (nodes - 1) x per-node rate x sync_ms, plus
# the sliding estimate's own edge error (none here: a fresh key inside one
# clock minute has no previous window). At the paces below (<= 30 requests
# a second per node, 200 ms syncs) that is 2 x 2 x 30 x 0.2 = 24, i.e. 8 %;
# 10 % leaves room for a loaded 2-core machine.
OVER = 0.10


def stated_over(rate_per_node: float, nodes: int = NODES) -> float:
    """docs/fleet.md's measured reading of the error: 2 x (nodes - 1) x
    per-node rate x sync_ms (a hit can wait one sync to be sent and one more
    before another node reads it)."""
    return 2 * (nodes - 1) * rate_per_node * SYNC_S

# A node new to a key (restarted, or never sent it) decides alone until its
# first answer for it: a sync interval or two. Five leave room for a slow box
# (measured: 0.11-0.22 s).
JOIN_S = 5 * SYNC_S


def config(scope: str = "fleet", *, limit: int = LIMIT, sync_ms: int = SYNC_MS,
           fleet_nodes: int | None = NODES, timeout_ms: int = 200) -> dict:
    """One route /up with one bound per address. With scope "node" an idle
    fleet bound (a route no request takes) keeps the rate_limit_service
    block in use, so the node trial's Envoys are the fleet trial's but for
    that one word."""
    service = {"cluster": "rls", "domain": DOMAIN, "timeout_ms": timeout_ms, "sync_ms": sync_ms}
    if fleet_nodes is not None:
        service["fleet_nodes"] = fleet_nodes
    cfg = {
        "instance": INSTANCE,
        "rate_limit_service": service,
        "routes": [{"name": ROUTE, "match": {"path_prefix": "/up"},
                    "bounds": [{"name": BOUND, "per": "address", "limit": limit,
                                "window": "PT1M", "scope": scope}]}],
    }
    if scope != "fleet":
        cfg["routes"].insert(0, {"name": "idle", "match": {"path_prefix": "/idle"},
                                 "bounds": [{"name": BOUND, "per": "address", "limit": limit,
                                             "window": "PT1M", "scope": "fleet"}]})
    return cfg



# --------------------------------------------------------------------------
# Time: the service's windows are clock minutes.
# --------------------------------------------------------------------------
def room_in_minute(need_s: float) -> float:
    """If fewer than need_s seconds are left in this clock minute, sleep into
    the next one (bounded: at most need_s + 1 s). Returns the minute's start."""
    assert need_s < 55, need_s
    left = 60 - time.time() % 60
    if left < need_s:
        time.sleep(left + 0.3)
    now = time.time()
    return now - now % 60


def same_minute(start: float) -> None:
    assert time.time() - start < 60, "the trial ran into the next clock minute"


# --------------------------------------------------------------------------
# Stats
# --------------------------------------------------------------------------
def raw_stat(e, name: str) -> int:
    """A stat read now (harness stats wait for the filter's 1 s flush after
    the last request: right for the filter's counters, but Envoy's own
    cluster stats are live and a poll must not wait)."""
    text = e.admin("/stats?filter=" + urllib.parse.quote("^" + re.escape(name) + "$"))
    for line in text.splitlines():
        n, sep, v = line.rpartition(": ")
        if sep and n == name:
            try:
                return int(v)
            except ValueError:
                return 0
    return 0


def rb(e, what: str) -> int:
    """The fleet bound's stat (allowed, refused, alone, ...), after the flush."""
    return e.rb(INSTANCE, ROUTE, BOUND, what)


def inst(e, what: str) -> int:
    """An instance stat: fleet_sync_calls, fleet_sync_errors, fleet_alone
    (decisions made without a fresh fleet count), the gauge fleet_nodes."""
    return e.rb(INSTANCE, what=what)


def rls_calls(e) -> int:
    return raw_stat(e, "cluster.rls.upstream_rq_total")


def no_panic(*envoys) -> None:
    for e in envoys:
        assert "panicked" not in e.log(), e.log_tail(40)


def redis_hits(redis, minute_start: float) -> dict[str, int]:
    """What the service counted for the bound in this clock minute, per key
    (`fleet_bound_api.per_address_address_f<hex>_<start>`): every hit any
    node sent."""
    out = {}
    keys = redis.cli("KEYS", f"{DOMAIN}_bound_{ROUTE}.{BOUND}_*_{int(minute_start)}")
    for key in keys.split():
        out[key] = int(redis.cli("GET", key) or 0)
    return out


# --------------------------------------------------------------------------
# Load: paced requests spread over nodes
# --------------------------------------------------------------------------
def paced(envoys, n: int, duration_s: float, src, *, node_of=None, concurrency: int = 8,
          timeout: float = 5.0, path: str = PATH) -> list[tuple[int, int, float]]:
    """n requests, request i due at i * duration_s / n (sooner if behind, at
    most `concurrency` in flight), each on a new connection from `src` (a
    string, or a function of i) to envoys[node_of(i)] (default round-robin).
    Returns [(node, status, seconds since the first)] in order of i; status
    -1 for a connection error or timeout. Bounded: duration_s + 2 x timeout
    + 30 s in all."""
    raise_fd_limit(4096)
    node_of = node_of or (lambda i: i % len(envoys))
    src_of = src if callable(src) else (lambda i: src)
    ports = [e.port for e in envoys]

    async def main():
        loop = asyncio.get_running_loop()
        sem = asyncio.Semaphore(concurrency)
        t0 = loop.time()

        async def one(i: int):
            node = node_of(i)
            delay = t0 + i * duration_s / n - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            async with sem:
                sent = loop.time() - t0
                try:
                    status = await asyncio.wait_for(
                        _one(ports[node], path, src_of(i), timeout), timeout)
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                        asyncio.LimitOverrunError, ValueError):
                    status = -1
            return node, status, sent

        return await asyncio.wait_for(
            asyncio.gather(*(one(i) for i in range(n))), duration_s + 2 * timeout + 30)

    try:
        return asyncio.run(main())
    finally:
        note_request()


def count(results, status: int = 200, node: int | None = None) -> int:
    return sum(1 for nd, s, _ in results if s == status and (node is None or nd == node))


def per_node(results, k: int, status: int = 200) -> list[int]:
    return [count(results, status, i) for i in range(k)]


def no_errors(results) -> None:
    bad = [(nd, s) for nd, s, _ in results if s not in (200, 429)]
    assert not bad, f"{len(bad)} requests neither 200 nor 429: {bad[:10]}"


def get(e, src: str, timeout: float = 5.0) -> int:
    """One request to e from src; its status (-1: no answer)."""
    async def main():
        return await asyncio.wait_for(_one(e.port, PATH, src, timeout), timeout)

    try:
        return asyncio.run(main())
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
        return -1
    finally:
        note_request()


def join(e, src: str, every_s: float = 0.05, timeout: float = 10.0):
    """One request every `every_s` from src to e until ten in a row are
    refused (at most 200 requests, `timeout` seconds). Returns (statuses,
    seconds from the first request to the first refusal, or None)."""
    t0 = time.monotonic()
    statuses, first_refusal = [], None
    while time.monotonic() < t0 + timeout and len(statuses) < 200:
        statuses.append(get(e, src))
        if statuses[-1] == 429 and first_refusal is None:
            first_refusal = time.monotonic() - t0
        if statuses[-10:] == [429] * 10:
            break
        time.sleep(every_s)
    return statuses, first_refusal


# --------------------------------------------------------------------------
# The installation: one Redis, one service, three Envoys
# --------------------------------------------------------------------------
def start_all(envoys) -> None:
    """Start the Envoys side by side (V8 compiles the module in each), then
    wait for each to serve."""
    for e in envoys:
        e.start(wait=False)
    for e in envoys:
        e.wait_started()


def synced(envoys, nodes: int | None = NODES, timeout: float = 20.0) -> None:
    """Until every Envoy has had a call to the service answered and (nodes)
    its fleet_nodes gauge says `nodes`: the heartbeat has counted them all."""
    for e in envoys:
        ok = e.wait_value(lambda: raw_stat(e, "cluster.rls.upstream_rq_200"), lambda v: v >= 1,
                          timeout=10.0)
        assert ok >= 1, f"{e.name}: no call to the service answered\n{e.log_tail(30)}"
    if nodes is None:
        return
    for e in envoys:
        seen = e.wait_value(lambda: inst(e, "fleet_nodes"), lambda v: v == nodes,
                            timeout=timeout, interval=0.3)
        assert seen == nodes, f"{e.name}: fleet_nodes {seen}, want {nodes}"


@pytest.fixture
def fleet(envoy_factory, rate_limit_service, upstream, tmp_path):
    """fleet(cfg, n=3) -> (service, [envoys]): n Envoys (--concurrency 2)
    routing /up to one upstream, each with cluster rls to one service over
    one Redis, started together and synced once."""

    def start(cfg: dict, n: int = NODES, nodes: int | None = NODES, concurrency: int = 2):
        svc = rate_limit_service(rls_yaml(cfg, tmp_path))
        envoys = [envoy_factory(cfg, start=False, concurrency=concurrency,
                                clusters=[grpc_cluster("rls", svc.grpc_port)],
                                upstream_port=upstream.port)
                  for _ in range(n)]
        start_all(envoys)
        synced(envoys, nodes)
        return svc, envoys

    return start


def report(what: str, **figures) -> None:
    print(f"\nfleet e2e: {what}: " + ", ".join(f"{k} {v}" for k, v in figures.items()),
          flush=True)


# --------------------------------------------------------------------------
# 1. Even load
# --------------------------------------------------------------------------
EVEN_N = 1200  # 4 x the limit, 400 a node
EVEN_S = 16.0  # 75 requests a second, 25 a node


def test_even_load_admits_the_limit_once_for_the_fleet_not_once_per_node(fleet, redis):
    svc, envoys = fleet(config())
    start = room_in_minute(EVEN_S + 12)
    src = addr(0, base=60)
    res = paced(envoys, EVEN_N, EVEN_S, src, concurrency=8)
    same_minute(start)
    no_errors(res)
    admitted = count(res)
    nodes_admitted = per_node(res, NODES)
    # When the fleet reached the limit: every node refuses from then on.
    last_ok = max(t for _, s, t in res if s == 200)
    report("even load, fleet", limit=LIMIT, requests=EVEN_N, admitted=admitted,
           per_node=nodes_admitted, last_admitted_at_s=round(last_ok, 2))
    # 25 a second a node: the stated error is 20 (measured: 310).
    assert admitted <= min(LIMIT * (1 + OVER), LIMIT + stated_over(EVEN_N / EVEN_S / NODES) + 6), \
        (admitted, nodes_admitted)
    assert admitted >= LIMIT * 0.9, (admitted, nodes_admitted)
    # Each node took a share, none took a node's whole limit.
    for k in nodes_admitted:
        assert LIMIT / NODES * 0.5 <= k <= LIMIT / NODES * 1.5, nodes_admitted
    # Nothing admitted in the last third of the trial: the fleet was full.
    late = [t for _, s, t in res if s == 200 and t > EVEN_S * 2 / 3]
    assert not late, f"{len(late)} admitted after {EVEN_S * 2 / 3:.0f} s: {late[:5]}"
    # Each node's stats say the same as its clients.
    for i, e in enumerate(envoys):
        assert rb(e, "allowed") == nodes_admitted[i], (i, rb(e, "allowed"))
        assert rb(e, "refused") == count(res, 429, i), (i, rb(e, "refused"))
        assert rb(e, "tracked") >= 1
    # Every admitted hit reached the service once, no refused one did.
    time.sleep(3 * SYNC_S + 0.5)
    hits = redis_hits(redis, start)
    assert sum(hits.values()) == admitted, (hits, admitted)
    same_minute(start)

    # The same trial on the same Envoys with "scope": "node": 3 x the limit.
    for e in envoys:
        assert e.reload(config("node")) == "success", e.log_tail(20)
    start = room_in_minute(EVEN_S + 5)
    res = paced(envoys, EVEN_N, EVEN_S, addr(1, base=60), concurrency=8)
    same_minute(start)
    no_errors(res)
    node_admitted = count(res)
    report("even load, node scope", limit=LIMIT, requests=EVEN_N, admitted=node_admitted,
           per_node=per_node(res, NODES))
    assert node_admitted >= NODES * LIMIT * 0.97, node_admitted
    assert node_admitted > admitted * 2.5, (node_admitted, admitted)
    no_panic(*envoys)


# --------------------------------------------------------------------------
# 2. Skewed load
# --------------------------------------------------------------------------
def test_all_of_the_load_on_one_node_can_use_the_whole_budget(fleet, redis):
    _, envoys = fleet(config())
    start = room_in_minute(25)
    src = addr(0, base=61)
    # 600 requests in 10 s, all to node 0: twice the limit.
    res = paced(envoys, 2 * LIMIT, 10.0, src, node_of=lambda i: 0, concurrency=8)
    same_minute(start)
    no_errors(res)
    admitted = count(res)
    report("skewed load", limit=LIMIT, requests=2 * LIMIT, admitted=admitted)
    assert admitted >= LIMIT * 0.95, admitted  # not limit / nodes
    # One node knows its own hits exactly: no more than the limit.
    assert admitted <= LIMIT, admitted
    # The other nodes never saw the address: each decides alone until its
    # first answer for it (a sync or two), then refuses with the fleet.
    for e in envoys[1:]:
        statuses, took = join(e, src)
        report(f"skewed load, {e.name} joins", admitted_alone=statuses.count(200),
               first_refusal_s=took, statuses=statuses[:20])
        assert took is not None and took <= JOIN_S, (took, statuses)
        assert statuses[-10:] == [429] * 10, statuses
        admitted += statuses.count(200)
    assert admitted <= LIMIT * (1 + OVER), admitted
    time.sleep(3 * SYNC_S + 0.5)
    same_minute(start)
    assert sum(redis_hits(redis, start).values()) == admitted
    no_panic(*envoys)


# --------------------------------------------------------------------------
# 3. A node killed and restarted
# --------------------------------------------------------------------------
def test_a_node_killed_and_restarted_rejoins_the_fleet_count(fleet):
    _, envoys = fleet(config())
    a, b, c = envoys
    start = room_in_minute(40)
    src = addr(0, base=62)
    # Well under the limit on all three: 90 admitted, 30 a node.
    first = paced(envoys, 90, 3.0, src, concurrency=4)
    no_errors(first)
    assert count(first) == 90, per_node(first, NODES)
    time.sleep(2 * SYNC_S)  # c's hits reached the service

    c.proc.kill()  # kill -9 by the PID we started
    c.proc.wait(timeout=5)

    # a and b go on alone with c gone: 400 in 8 s (25 a second a node).
    second = paced([a, b], 400, 8.0, src, concurrency=6)
    no_errors(second)
    second_ok = count(second)
    total = count(first) + second_ok
    report("node killed", before_kill=count(first), after_kill_on_two=second_ok, total=total)
    assert second_ok >= (LIMIT - 90) * 0.9, second_ok  # they kept admitting
    assert total <= LIMIT * (1 + OVER), total

    # c again, empty shared data: alone until its first answer, then the
    # fleet's count (full) refuses it.
    c.restart()
    statuses, first_refusal = join(c, src)
    alone_ok = statuses.count(200)
    report("node restarted", admitted_alone=alone_ok, first_refusal_s=first_refusal,
           statuses=statuses[:40])
    assert set(statuses) <= {200, 429}, statuses
    assert first_refusal is not None, statuses
    # Its first answer comes within a sync interval or two; then it joins.
    assert first_refusal <= JOIN_S, (first_refusal, statuses)
    assert statuses[-10:] == [429] * 10, statuses
    # Alone it never takes more than its share of the limit.
    assert alone_ok <= LIMIT // NODES, alone_ok
    assert total + alone_ok <= LIMIT * (1 + OVER), (total, alone_ok)
    # ... and the others still refuse.
    assert [get(e, src) for e in (a, b) for _ in range(5)] == [429] * 10
    same_minute(start)
    no_panic(a, b, c)


# --------------------------------------------------------------------------
# 4. The service stopped, then back
# --------------------------------------------------------------------------
def test_service_down_each_node_admits_its_share_then_converges(fleet, redis):
    # fleet_nodes 1: the share of 100 a node must come from the heartbeat's
    # count of 3, not from the configuration.
    svc, envoys = fleet(config(fleet_nodes=1))
    start = room_in_minute(35)
    src = addr(0, base=63)
    errors0 = [inst(e, "fleet_sync_errors") for e in envoys]
    alone0 = [inst(e, "fleet_alone") for e in envoys]

    svc.stop()
    # Every node has seen a sync fail.
    for i, e in enumerate(envoys):
        got = e.wait_value(lambda: inst(e, "fleet_sync_errors"), lambda v: v > errors0[i],
                           timeout=5.0, interval=0.2)
        assert got > errors0[i], (i, got)

    # 200 requests a node, a fresh address: each admits limit / 3 alone.
    down = paced(envoys, 3 * 200, 4.0, src, concurrency=8)
    no_errors(down)
    shares = per_node(down, NODES)
    report("service down", shares=shares, total=sum(shares))
    for k in shares:
        assert LIMIT // NODES * 0.9 <= k <= -(-LIMIT // NODES), shares
    for i, e in enumerate(envoys):
        assert inst(e, "fleet_sync_errors") > errors0[i]
        assert inst(e, "fleet_alone") >= alone0[i] + shares[i], (i, inst(e, "fleet_alone"))

    svc.start()  # same ports
    # Every node syncs again: calls answered, errors stop growing.
    for e in envoys:
        ok0 = raw_stat(e, "cluster.rls.upstream_rq_200")
        got = e.wait_value(lambda: raw_stat(e, "cluster.rls.upstream_rq_200"),
                           lambda v: v >= ok0 + 3, timeout=10.0, interval=0.1)
        assert got >= ok0 + 3, (e.name, ok0, got)
    time.sleep(3 * SYNC_S)
    errs = [inst(e, "fleet_sync_errors") for e in envoys]
    time.sleep(5 * SYNC_S)
    assert [inst(e, "fleet_sync_errors") for e in envoys] == errs

    # The hits admitted alone were sent: the fleet is full, everywhere.
    same_minute(start)
    hits = sum(redis_hits(redis, start).values())
    assert hits == sum(shares), (hits, shares)
    after = paced(envoys, 90, 2.0, src, concurrency=6)
    no_errors(after)
    report("service back", admitted_after=count(after), redis_hits=hits)
    assert count(after) == 0, per_node(after, NODES)
    assert sum(shares) + count(after) <= LIMIT * (1 + OVER)
    same_minute(start)
    no_panic(*envoys)


# --------------------------------------------------------------------------
# 5. Sync traffic
# --------------------------------------------------------------------------
def test_sync_calls_follow_sync_ms_not_requests_and_refusals_stay_home(fleet, redis):
    _, envoys = fleet(config())
    busy = envoys[0]
    start = room_in_minute(25)
    src = addr(0, base=64)
    calls0 = [rls_calls(e) for e in envoys]
    sync0 = [inst(e, "fleet_sync_calls") for e in envoys]
    keys0 = [inst(e, "fleet_sync_keys") for e in envoys]
    incrby0 = redis.commandstats().get("incrby", 0)
    t0 = time.monotonic()
    # 1000 requests in 10 s to one node (100 a second): 300 admitted, the rest refused.
    res = paced(envoys, 1000, 10.0, src, node_of=lambda i: 0, concurrency=8)
    secs = time.monotonic() - t0
    calls = [rls_calls(e) - c for e, c in zip(envoys, calls0)]
    same_minute(start)
    no_errors(res)
    admitted = count(res)
    sync = [inst(e, "fleet_sync_calls") - s for e, s in zip(envoys, sync0)]
    keys = [inst(e, "fleet_sync_keys") - k for e, k in zip(envoys, keys0)]
    per_s = [round(c / secs, 2) for c in calls]
    expect = 1000 / SYNC_MS
    time.sleep(3 * SYNC_S + 0.5)
    hits = redis_hits(redis, start)
    report("sync traffic", seconds=round(secs, 1), requests=len(res), admitted=admitted,
           rls_calls_per_s=per_s, fleet_sync_calls=sync, fleet_sync_keys=keys,
           incrby=redis.commandstats().get("incrby", 0) - incrby0, redis_hits=hits)
    # The busy node: one call every sync_ms (its key and the heartbeat in
    # one), whatever its 100 requests a second; one syncing root context of
    # its two workers and main thread, not one each.
    assert 0.6 * expect <= per_s[0] <= 1.5 * expect, per_s
    assert calls[0] < len(res) / 10, (calls, len(res))
    # Idle nodes sync too (the heartbeat), no more often.
    for p in per_s[1:]:
        assert 0.6 * expect <= p <= 1.5 * expect, per_s
    # Every sync call is counted (the stat is flushed on the filter's tick:
    # they agree within a second's calls).
    for c, s in zip(calls, sync):
        assert abs(c - s) <= 2 * expect + 3, (calls, sync)
    # The busy node sends its one key with every sync from its first
    # request on (a second's syncs before it); the idle ones never saw it
    # and send the heartbeat alone.
    assert sync[0] - 2 * expect <= keys[0] <= sync[0], (keys, sync)
    assert keys[1:] == [0, 0], keys
    # Refused requests never reach the service: what it counted is exactly
    # what was admitted, 700 refusals notwithstanding.
    assert count(res, 429) >= 600
    assert sum(hits.values()) == admitted, (hits, admitted)
    assert len(hits) == 1, hits  # one key: one address, one bound
    # The service sees a keyed hash of the address, never the address, and
    # the heartbeat's key beside it.
    (key,) = hits
    assert re.fullmatch(rf"{DOMAIN}_bound_{ROUTE}\.{BOUND}_address_f[0-9a-f]{{16}}_\d+", key), key
    every = redis.cli("KEYS", "*").split()
    assert not [k for k in every if "127." in k], every
    assert [k for k in every if k.startswith(f"{DOMAIN}_ratebound_nodes_instance_{INSTANCE}_")], every
    no_panic(*envoys)


# --------------------------------------------------------------------------
# 6. A bound per route: one counter for the fleet, the bound entry alone
# --------------------------------------------------------------------------
def test_a_route_wide_fleet_bound_is_one_counter_for_the_fleet(fleet, redis):
    cfg = config()
    cfg["routes"][0]["bounds"] = [{"name": "all", "per": "route", "limit": 60,
                                   "window": "PT1M", "scope": "fleet"}]
    _, envoys = fleet(cfg)
    start = room_in_minute(20)
    # 240 requests in 6 s from 240 addresses, round-robin: one budget of 60.
    res = paced(envoys, 240, 6.0, lambda i: addr(i, base=65), concurrency=8)
    same_minute(start)
    no_errors(res)
    admitted = count(res)
    report("route-wide", limit=60, requests=240, admitted=admitted, per_node=per_node(res, NODES))
    # 13 a second a node: the stated error is 10.7 (measured: 66).
    assert 60 * 0.9 <= admitted <= 60 + stated_over(240 / 6.0 / NODES) + 2, admitted
    time.sleep(3 * SYNC_S + 0.5)
    same_minute(start)
    keys = redis.cli("KEYS", f"{DOMAIN}_bound_{ROUTE}.all_*").split()
    assert keys == [f"{DOMAIN}_bound_{ROUTE}.all_{int(start)}"], keys
    assert int(redis.cli("GET", keys[0])) == admitted
    no_panic(*envoys)


# --------------------------------------------------------------------------
# 7. What Envoy refuses: fleet bounds need the service's windows and syncs
#    short against them
# --------------------------------------------------------------------------
def test_envoy_refuses_fleet_bounds_the_service_cannot_count(envoy_factory, upstream):
    def with_bound(window: str, sync_ms: int = SYNC_MS) -> dict:
        cfg = config(sync_ms=sync_ms)
        cfg["routes"][0]["bounds"][0]["window"] = window
        return cfg

    # No service needed to configure: the cluster points nowhere.
    e = envoy_factory(config(), clusters=[grpc_cluster("rls", 9)], upstream_port=upstream.port)
    refused = {
        "PT30S (not one of the service's windows)": with_bound("PT30S"),
        "PT1S with syncs every 200 ms (under 10 syncs a window)": with_bound("PT1S"),
        "sync_ms 50 (under 100)": with_bound("PT1M", 50),
        "sync_ms 6000 (over 5000)": with_bound("P1D", 6000),
    }
    for what, cfg in refused.items():
        assert e.reload(cfg) == "rejected", what
    # The edges that are fine: PT1S at 100 ms, PT1H at 5000 ms.
    assert e.reload(with_bound("PT1S", 100)) == "success"
    assert e.reload(with_bound("PT1H", 5000)) == "success"
    assert get(e, addr(0, base=66)) == 200
    no_panic(e)


# --------------------------------------------------------------------------
# 8. A reload: the new configuration's contexts take the sync at once
# --------------------------------------------------------------------------
def test_a_reload_keeps_the_fleet_count_and_the_sync(fleet):
    """A configuration pushed through LDS (here: one more route, the fleet
    bound unchanged) keeps the bound's lane and its fleet counts, and its
    root contexts take the node's sync lease from the superseded ones at
    their first tick: the sync goes on, and no request decides alone."""
    cfg = config()
    _, envoys = fleet(cfg, n=1, nodes=1)
    (e,) = envoys
    start = room_in_minute(20)
    src = addr(0, base=67)
    first = paced(envoys, 200, 2.0, src)
    assert count(first) == 200
    time.sleep(3 * SYNC_S)
    alone0 = inst(e, "fleet_alone")
    cfg2 = json.loads(json.dumps(cfg))
    cfg2["routes"].append({"name": "other", "match": {"path_prefix": "/other"},
                           "bounds": [{"name": "b", "per": "address", "limit": 5,
                                       "window": "PT1M"}]})
    assert e.reload(cfg2) == "success"
    calls0 = rls_calls(e)
    t0 = time.monotonic()
    second = paced(envoys, 200, 4.0, src)
    secs = time.monotonic() - t0
    calls = rls_calls(e) - calls0
    same_minute(start)
    no_errors(second)
    alone = inst(e, "fleet_alone") - alone0
    report("reload", admitted_before=200, admitted_after=count(second), alone_after=alone,
           rls_calls_per_s=round(calls / secs, 2))
    # The count carried over: 100 more of the 300, not another 300.
    assert count(second) == LIMIT - 200, count(second)
    assert 0.6 * 1000 / SYNC_MS <= calls / secs <= 1.5 * 1000 / SYNC_MS, (calls, secs)
    assert alone == 0, alone
    no_panic(e)


# --------------------------------------------------------------------------
# 9-13. Issue 22: the shapes an attacker used (docs/fleet.md, "Under
#    attack"). Each node holds its unsynced admissions to its share of what
#    the fleet had left at its last answer; a key new to a node waits for
#    its first answer; the node count survives an outage and restarts; a
#    timed-out sync is sent again only after an answer; junk keys cannot
#    crowd a sync.
# --------------------------------------------------------------------------
# What a key new to a node admits before its first answer: a tenth of its
# share (docs/fleet.md).
JOIN = LIMIT // NODES // 10


def burst(envoys, per_node: int, src, *, concurrency: int = 48):
    """per_node requests on every node at once (as fast as the client goes,
    `concurrency` in flight), round-robin."""
    return paced(envoys, per_node * len(envoys), 0.05, src, concurrency=concurrency)


def test_a_synchronised_burst_right_after_a_sync_admits_the_fleet_budget_once(fleet, redis):
    """One request a node, a second of syncs, then 400 a node at once. The
    estimate alone let each node take all that was left (issue 22: 894 of
    300); each node now takes its share, (300 - 3) / 3, until its next
    answer."""
    _, envoys = fleet(config())
    start = room_in_minute(25)
    src = addr(0, base=68)
    first = paced(envoys, NODES, 0.1, src, concurrency=3)
    assert count(first) == NODES, first
    time.sleep(1.0)
    res = burst(envoys, 400, src)
    same_minute(start)
    no_errors(res)
    admitted = count(first) + count(res)
    report("synchronised burst", limit=LIMIT, requests=len(res) + NODES, admitted=admitted,
           per_node=per_node(res, NODES))
    assert admitted <= LIMIT * (1 + OVER), (admitted, per_node(res, NODES))
    # The nodes wait an answer for each share: a burst that lasts a few
    # syncs may end before it has spent the whole budget (measured: 263-301).
    assert admitted >= LIMIT * 0.75, admitted
    time.sleep(3 * SYNC_S + 0.5)
    assert sum(redis_hits(redis, start).values()) == admitted
    same_minute(start)
    no_panic(*envoys)


def test_a_node_new_to_a_key_waits_for_its_first_answer(fleet):
    """The budget used on one node, then fast bursts on the two others: each
    admits a tenth of its share (10) before its first answer (issue 22:
    each took its alone share, 500 of 300 in all)."""
    _, envoys = fleet(config())
    start = room_in_minute(25)
    src = addr(0, base=69)
    # Twice the limit on node 0: its share of each answer's remainder lets
    # it reach the budget, a little more slowly than the estimate alone.
    used = paced(envoys, 2 * LIMIT, 8.0, src, node_of=lambda i: 0, concurrency=8)
    no_errors(used)
    assert LIMIT * 0.95 <= count(used) <= LIMIT, count(used)
    time.sleep(2 * SYNC_S)
    res = burst(envoys[1:], 200, src)
    same_minute(start)
    no_errors(res)
    joined = count(res)
    report("new-key join", used_on_node_0=count(used), admitted_by_the_others=joined,
           per_node=per_node(res, 2))
    # A join share each, and then their shares of what was left.
    assert count(used) + joined <= LIMIT + 2 * (JOIN + 1), (count(used), per_node(res, 2))
    no_panic(*envoys)


def test_a_long_outage_keeps_the_node_count(fleet):
    """The service down until the last heartbeat answer is over a clock
    minute old: the node count stays 3 (issue 22: it fell back to
    fleet_nodes, 1 by default, and each node admitted all 300 while the
    fleet_nodes gauge said 3). fleet_nodes is unset here."""
    svc, envoys = fleet(config(fleet_nodes=None))
    # Down from now until the minute after next (the old rule's limit).
    svc.stop()
    stopped = time.time()
    resume = (stopped - stopped % 60) + 120 + 0.5
    time.sleep(max(0.0, resume - time.time()))
    start = room_in_minute(15)
    src = addr(0, base=70)
    res = paced(envoys, 3 * 400, 6.0, src, concurrency=8)
    same_minute(start)
    no_errors(res)
    shares = per_node(res, NODES)
    gauges = [inst(e, "fleet_nodes") for e in envoys]
    report("outage over a minute", down_s=round(time.time() - stopped, 1), shares=shares,
           total=sum(shares), fleet_nodes=gauges)
    assert gauges == [NODES] * NODES, gauges
    for k in shares:
        assert k <= -(-LIMIT // NODES), shares
    assert sum(shares) <= LIMIT, shares
    no_panic(*envoys)


def test_restarts_are_neither_new_nodes_nor_fresh_shares(fleet, redis):
    """One node restarted three times in a minute once the budget is used:
    each run admits its join share (10) before its first answer says the
    fleet is full (issue 22: +60, +50, +42), and the heartbeat still counts
    3 nodes (issue 22: 7), the restarted node's own key (its Envoy node id)
    saying it was already counted."""
    _, envoys = fleet(config())
    a, b, c = envoys
    start = room_in_minute(50)
    src = addr(0, base=71)
    used = paced(envoys, 2 * LIMIT, 8.0, src, concurrency=8)
    no_errors(used)
    total = count(used)
    assert total <= LIMIT * (1 + OVER), total
    time.sleep(2 * SYNC_S)
    alone = []
    for _ in range(3):
        c.restart()
        res = burst([c], 60, src, concurrency=16)
        no_errors(res)
        alone.append(count(res))
    time.sleep(5 * SYNC_S + 1.0)
    gauges = [raw_stat(e, f"wasmcustom.ratebound.{INSTANCE}.fleet_nodes") for e in envoys]
    same_minute(start)
    beats = {k: redis.cli("GET", k) for k in redis.cli("KEYS", f"{DOMAIN}_ratebound_*").split()}
    report("restarts", before_restarts=total, admitted_per_restart=alone, fleet_nodes=gauges,
           heartbeat_keys=beats)
    assert sum(alone) <= 3 * (JOIN + 1), alone
    assert gauges == [NODES] * NODES, gauges
    no_panic(a, b, c)


def test_junk_keys_do_not_starve_an_honest_callers_sync(fleet, redis):
    """6,000 junk addresses on one node while an honest caller sends 4 x its
    limit round-robin: syncs carry at most 1,000 keys, the keys with most to
    send first, and a timed-out sync is sent again only once the service
    answers the key again (issue 22: the syncs timed out, their hits were
    re-sent at every sync, and the honest caller got 177 of its 300)."""
    import threading

    _, envoys = fleet(config())
    start = room_in_minute(40)
    honest = addr(0, base=72)
    junk_out: list = []
    junk = threading.Thread(target=lambda: junk_out.extend(
        paced(envoys[:1], 6000, 12.0, lambda i: addr(i, base=73), concurrency=32)))
    junk.start()
    res = paced(envoys, 4 * LIMIT, 16.0, honest, concurrency=8)
    junk.join(timeout=60)
    same_minute(start)
    no_errors(res)
    admitted = count(res)
    errors = [inst(e, "fleet_sync_errors") for e in envoys]
    report("junk spray", junk_requests=len(junk_out), junk_admitted=count(junk_out),
           honest_admitted=admitted, per_node=per_node(res, NODES), fleet_sync_errors=errors)
    assert admitted >= LIMIT * 0.9, admitted
    assert admitted <= LIMIT * (1 + OVER), admitted
    time.sleep(3 * SYNC_S + 0.5)
    same_minute(start)
    # The honest caller's count (the largest; a junk key has 1), in one
    # call: 6,000 keys one GET at a time would take a minute.
    honest_hits = int(redis.cli(
        "EVAL", "local m = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
        "local v = tonumber(redis.call('GET', k)) if v > m then m = v end end return m",
        "0", f"{DOMAIN}_bound_{ROUTE}.{BOUND}_*_{int(start)}"))
    report("junk spray, the service's count", honest_hits=honest_hits, honest_admitted=admitted)
    # Counted once, and once more at most for the hits of a call that timed
    # out after the service counted it (a node's sync of the honest key
    # carries about a sync's worth of its load); before issue 22, re-sent
    # at every sync: 371 counted for 318 admitted.
    per_sync = math.ceil(4 * LIMIT / 16.0 * SYNC_S / NODES) + 1
    assert honest_hits <= admitted + sum(errors) * per_sync, (honest_hits, admitted, errors)
    no_panic(*envoys)
