"""Installation bounds slide: real Envoys with the module, one real
envoyproxy/ratelimit, one real Redis. The filter computes the two-window
estimate from counts the service keeps per window it names; the service
counts every call, so an attempt the estimate refuses is refunded.

The fixed shape ("shape": "fixed", the service's own clock windows) is
tried beside it at the same edge: it lets twice the limit through there,
which is what makes the sliding result mean something."""
from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from engines import clear_of_minute_end
from test_installation import installation, no_panic, warmed  # noqa: F401

LIMIT = 5


def two_shapes(window: str = "PT1M") -> dict:
    """A sign-in route per shape, 5 attempts a window per account."""
    def route(name: str, shape: str) -> dict:
        return {"name": name, "match": {"path_prefix": f"/up/{name}"},
                "account": {"json": "username"},
                "bounds": [{"name": "attempts", "per": "account", "scope": "installation",
                            "shape": shape, "limit": LIMIT, "window": window}]}

    return {
        "instance": "slide",
        "rate_limit_service": {"cluster": "rls", "domain": "slide", "timeout_ms": 2000,
                               "on_error": "deny"},
        "routes": [route("login", "sliding"), route("fixed", "fixed"),
                   {"name": "other", "bounds": []}],
    }


def attempt(port: int, path: str, account: str, src: str = "127.0.0.1"):
    import json

    from harness import request

    body = json.dumps({"username": account, "password": "x"}).encode()
    return request(port, path, src=src, method="POST", body=body,
                   headers={"content-type": "application/json"})


def most_in_any(times: list[float], span: float) -> int:
    """The most admissions in any `span` seconds (an exact sliding log)."""
    return max((sum(1 for u in times if t <= u <= t + span) for t in times), default=0)


def until_edge(before: float) -> float:
    """Sleeps until `before` seconds ahead of the next clock minute (the
    next but one when less is left) and returns that edge's time."""
    edge = (time.time() // 60 + 1) * 60
    if edge - time.time() < before + 0.5:
        edge += 60
    time.sleep(edge - before - time.time())
    return edge


def test_the_edge_trial_admits_the_limit_not_twice(installation):
    """The issue's trial, on three Envoys taking turns: one account, an
    attempt every 100 ms from 1 s before a clock minute to 1 s after,
    sliding and fixed side by side; and 20 attempts at once from all three
    half a second either side of the edge on two more accounts."""
    _, envoys = installation(two_shapes(), n=3)
    ports = [e.port for e in envoys]
    tag = uuid.uuid4().hex[:6]
    admitted = {"login": [], "fixed": []}
    burst = {"login": [], "fixed": []}

    def at_once(route: str, account: str, when: float) -> None:
        go = threading.Barrier(20)

        def one(i: int):
            go.wait(timeout=10)
            status, _, _ = attempt(ports[i % 3], f"/up/{route}", account,
                                   src=f"127.0.9.{i + 1}")
            return status

        time.sleep(max(0.0, when - time.time()))
        with ThreadPoolExecutor(max_workers=20) as pool:
            burst[route].extend(pool.map(one, range(20)))

    edge = until_edge(1.5)
    bursts = [threading.Thread(target=at_once, args=(r, f"{r}-burst-{tag}", edge + d))
              for r in ("login", "fixed") for d in (-0.5, 0.5)]
    for t in bursts:
        t.start()
    for k in range(21):
        time.sleep(max(0.0, edge - 1.0 + k * 0.1 - time.time()))
        for route in ("login", "fixed"):
            status, _, body = attempt(ports[k % 3], f"/up/{route}", f"{route}-{tag}")
            assert status in (200, 429), (route, status, body)
            if status == 200:
                admitted[route].append(time.time())
    for t in bursts:
        t.join(timeout=30)
    fixed, sliding = admitted["fixed"], admitted["login"]
    assert len(fixed) == 2 * LIMIT and most_in_any(fixed, 1.4) == 2 * LIMIT, fixed
    assert len(sliding) == LIMIT, [round(t - edge, 2) for t in sliding]
    assert burst["fixed"].count(200) == 2 * LIMIT, burst["fixed"]
    assert burst["login"].count(200) == LIMIT, burst["login"]
    no_panic(*envoys)


def test_a_refused_attempt_is_refunded_and_the_wait_stays_put(installation, redis):
    """An Envoy not locked asks, is refused by the estimate, and refunds
    the attempt the service counted at its next tick (about a second);
    hammering meanwhile asks no more, and the wait it is told does not
    move; the caller is admitted when it said."""
    _, (a, b) = installation(two_shapes("PT1M"), n=2)
    account = f"dave-{uuid.uuid4().hex[:6]}"
    clear_of_minute_end(10.0)  # the trial stays in one minute
    for _ in range(LIMIT):
        assert attempt(a.port, "/up/login", account)[0] == 200
    status, h, _ = attempt(b.port, "/up/login", account)
    assert status == 429, (status, h)
    told = time.time() + int(h["retry-after"])
    end = time.time() + 1.5
    while time.time() < end:
        status, h, _ = attempt(b.port, "/up/login", account)
        assert status == 429
        assert abs(time.time() + int(h["retry-after"]) - told) <= 1.5, h
    calls = "wasmcustom.ratebound.slide.login.attempts.rls_calls"
    assert b.stat(calls) == 1, "locked after its one refusal"
    refunded = [k for k in redis.cli("KEYS", "*").split() if "refunded" in k]
    assert refunded, redis.cli("KEYS", "*")
    assert sum(int(redis.cli("GET", k)) for k in refunded) == 1
    # The estimate without the refund: 5·(1 − e/60) + 1 ≤ 5 from 12 s into
    # the next minute.
    left = 60 - time.time() % 60
    assert abs((told - time.time()) - (left + 12)) <= 2, (told - time.time(), left)
    no_panic(a, b)


def test_a_window_of_a_second_slides_too(installation):
    """Windows of a second are keyed by the minute: the edge of every
    second is one the estimate holds."""
    _, (a, b) = installation(two_shapes("PT1S"), n=2)
    account = f"erin-{uuid.uuid4().hex[:6]}"
    time.sleep(1 - time.time() % 1 + 0.6)  # 0.6 s into a second
    got = []
    end = time.time() + 0.8  # across the next edge
    k = 0
    while time.time() < end:
        status, _, _ = attempt((a, b)[k % 2].port, "/up/login", account)
        k += 1
        if status == 200:
            got.append(time.time())
    assert len(got) <= LIMIT + 1, got
    assert most_in_any(got, 0.5) <= LIMIT, got
    no_panic(a, b)


def test_the_service_keeps_a_sliding_count_across_envoy_restarts(installation):
    """What a restart does not give back: the counts are the service's."""
    _, (a,) = installation(two_shapes(), n=1)
    account = f"frank-{uuid.uuid4().hex[:6]}"
    clear_of_minute_end(20.0)
    for _ in range(LIMIT):
        assert attempt(a.port, "/up/login", account)[0] == 200
    a.restart()
    warmed(a)
    assert attempt(a.port, "/up/login", account)[0] == 429
    no_panic(a)
