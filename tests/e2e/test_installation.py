"""Installation bounds end to end: two real Envoys with the module, one
real envoyproxy/ratelimit, one real Redis (append-only). The service's
configuration is what `ratebound rls-config` prints for the filter's."""
from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness import free_port, request
from engines import clear_of_minute_end, rls_yaml
from launcher import grpc_cluster

RL = ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "retry-after")


def config(*, on_error="deny", account=None, limit=5, window="PT1M", node_limit=1000,
           timeout_ms=100, shape="sliding"):
    return {
        "instance": "signin",
        "rate_limit_service": {"cluster": "rls", "domain": "signin",
                               "timeout_ms": timeout_ms, "on_error": on_error},
        "routes": [
            {"name": "login", "match": {"path_prefix": "/up/login"},
             "account": account or {"json": "username"},
             "bounds": [
                 {"name": "per_address", "per": "address", "limit": node_limit,
                  "window": "PT1M"},
                 {"name": "attempts", "per": "account", "scope": "installation",
                  "shape": shape, "limit": limit, "window": window},
             ]},
            {"name": "other", "bounds": [
                {"name": "per_address", "per": "address", "limit": 1000, "window": "PT1M"}]},
        ],
    }


def login(port, account=None, src="127.0.0.1", body=None, headers=None, timeout=10.0):
    if body is None:
        body = json.dumps({"username": account, "password": "x"}).encode()
    h = {"content-type": "application/json"}
    h.update(headers or {})
    return request(port, "/up/login", src=src, method="POST", body=body, headers=h,
                   timeout=timeout)


def no_panic(*envoys):
    for e in envoys:
        assert "panicked" not in e.log(), e.log_tail(40)


def warmed(e) -> None:
    """Waits for the filter's own warm-up (`pipeline::warm_up`): every
    ticking root context, the workers' and the main thread's, has had its
    call to the service answered, so no worker's first sign-in waits for a
    connection (which on a loaded machine can outlast a 100 ms timeout)."""
    contexts = e.concurrency + 1
    answered = e.wait_value(lambda: e.stat("cluster.rls.upstream_rq_200"),
                            lambda v: v >= contexts, timeout=10.0)
    assert answered >= contexts, f"warm-up calls answered: {answered} of {contexts}"


@pytest.fixture
def installation(envoy_factory, rate_limit_service, upstream, tmp_path):
    """start(cfg, n=2) -> (service, [envoys]) sharing the service, routing to
    a real upstream (a direct response (every path but /up) would end requests before their body
    reaches the filter)."""

    def start(cfg: dict, n: int = 2, **kw):
        svc = rate_limit_service(rls_yaml(cfg, tmp_path))
        envoys = [envoy_factory(cfg, clusters=[grpc_cluster("rls", svc.grpc_port)],
                                upstream_port=upstream.port, **kw)
                  for _ in range(n)]
        for e in envoys:
            warmed(e)
        return svc, envoys

    return start


def test_five_attempts_in_total_across_two_envoys(installation):
    _, (a, b) = installation(config())
    clear_of_minute_end()
    account = f"alice-{uuid.uuid4().hex[:8]}"
    statuses = [login(a.port, account)[0] for _ in range(3)]
    statuses += [login(b.port, account)[0] for _ in range(2)]
    status, h, body = login(b.port, account)
    assert statuses == [200] * 5, statuses
    assert status == 429, (status, h, body)
    for name in RL:
        assert isinstance(h.get(name), str), (name, h)
    assert h["ratelimit-limit"] == "5" and h["ratelimit-remaining"] == "0"
    assert h["retry-after"] == h["ratelimit-reset"]
    # A sliding window of a minute: 5 this minute weigh until
    # 5·(1 − e/60) + 1 ≤ 5, 12 s into the next one.
    left = 60 - time.time() % 60
    assert abs(int(h["retry-after"]) - (left + 12)) <= 2, (h, left)
    doc = json.loads(body)
    assert (doc["route"], doc["bound"]) == ("login", "attempts")
    a.wait_value(lambda: a.stat("wasmcustom.ratebound.signin.login.attempts.allowed"),
                 lambda v: v == 3)
    assert b.stat("wasmcustom.ratebound.signin.login.attempts.refused") == 1
    # b's 2nd attempt took the last one (0 remaining): b locked the account
    # until the estimate admits again, and refused the 6th without a call.
    assert b.stat("wasmcustom.ratebound.signin.login.attempts.rls_calls") == 2
    assert b.stat("wasmcustom.ratebound.signin.rls_calls_saved") == 1
    no_panic(a, b)


def test_concurrent_attempts_admit_exactly_the_limit(installation):
    # 200 at once on a 2-core machine: give the service time to answer all
    # (a call that times out is a 503 the service may still have counted:
    # fewer admitted, never more).
    _, envoys = installation(config(timeout_ms=2000))
    ports = [e.port for e in envoys]
    for trial in range(5):
        clear_of_minute_end(12.0)
        account = f"bob-{trial}-{uuid.uuid4().hex[:6]}"
        go = threading.Barrier(50)

        def attempt(i):
            if i < 50:
                go.wait(timeout=10)
            status, _, body = login(ports[i % 2], account, src=f"127.0.{trial}.{i % 250 + 1}")
            return status, body

        with ThreadPoolExecutor(max_workers=50) as pool:
            answers = list(pool.map(attempt, range(200)))
        statuses = [s for s, _ in answers]
        assert 503 not in statuses, [b for s, b in answers if s == 503][:2]
        assert statuses.count(200) == 5, (trial, sorted(set(statuses)), statuses.count(200))
        assert statuses.count(429) == 195, (trial, {s: statuses.count(s) for s in statuses})
    no_panic(*envoys)


def test_restarts_of_envoys_service_and_redis_keep_the_count(installation, redis):
    svc, (a, b) = installation(config())
    clear_of_minute_end(20.0)
    account = f"carol-{uuid.uuid4().hex[:8]}"
    for _ in range(5):
        assert login(a.port, account)[0] == 200
    status, h, _ = login(a.port, account)
    assert status == 429
    horizon = time.time() + int(h["retry-after"])

    def still_refused(port, what):
        # The service reconnects to a restarted Redis on its own: a few
        # calls may fail first (503 with deny), never admit.
        deadline = time.monotonic() + 10
        while True:
            status, h, _ = login(port, account)
            assert status in (429, 503), (what, status)
            if status == 429:
                assert abs(time.time() + int(h["retry-after"]) - horizon) <= 2, (what, h)
                # The service counted this refusal: the Envoy refunds it at
                # its next tick, before another Envoy is asked.
                time.sleep(1.5)
                return
            assert time.monotonic() < deadline, f"{what}: no answer"
            time.sleep(0.1)

    a.restart()
    b.restart()
    still_refused(a.port, "after both Envoys restarted")
    still_refused(b.port, "after both Envoys restarted")
    svc.kill9()
    svc.start()
    still_refused(b.port, "after the service was killed -9")
    redis.restart()
    still_refused(a.port, "after Redis restarted")
    no_panic(a, b)


def test_engine_down_denies_with_503_or_allows_and_counts(envoy_factory, upstream):
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nothing listens there
    deny = envoy_factory(config(), clusters=[grpc_cluster("rls", port)],
                         upstream_port=upstream.port)
    status, h, body = login(deny.port, "dave")
    assert status == 503, (status, h, body)
    assert h["retry-after"] == "1"
    assert h["content-type"].startswith("application/problem+json")
    assert "could not be checked" in json.loads(body)["detail"]
    assert "ratelimit-limit" not in h
    allow = envoy_factory(config(on_error="allow"), clusters=[grpc_cluster("rls", port)],
                          upstream_port=upstream.port)
    assert login(allow.port, "dave")[0] == 200
    allow.wait_value(
        lambda: allow.stat("wasmcustom.ratebound.signin.login.attempts.rls_errors"),
        lambda v: v == 1)
    no_panic(deny, allow)


def test_a_service_that_never_answers_costs_timeout_ms_not_more(envoy_factory, upstream):
    # Accepts connections, reads, answers nothing.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        env = envoy_factory(config(timeout_ms=150),
                            clusters=[grpc_cluster("rls", silent.getsockname()[1])],
                            upstream_port=upstream.port)
        for _ in range(3):
            t0 = time.monotonic()
            status, _, _ = login(env.port, "erin")
            took = time.monotonic() - t0
            assert status == 503
            assert took < 0.15 + 0.5, took
    finally:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        silent.close()


def test_refused_by_a_node_bound_or_another_route_never_reaches_the_service(
        installation, redis):
    _, (a,) = installation(config(node_limit=2), n=1)
    clear_of_minute_end()
    assert login(a.port, "frank", src="127.0.3.1")[0] == 200
    # One call: an INCRBY a descriptor (four for a sliding bound).
    per_call = redis.commandstats().get("incrby", 0)
    assert per_call == 4
    assert login(a.port, "frank", src="127.0.3.1")[0] == 200
    status, _, body = login(a.port, "frank", src="127.0.3.1")
    assert status == 429 and json.loads(body)["bound"] == "per_address"
    for _ in range(3):
        assert request(a.port, "/up/other", method="POST", body=b"{}")[0] == 200
    assert redis.commandstats().get("incrby", 0) == 2 * per_call


def test_accounts_however_spelled_and_bodies_that_name_none(installation):
    _, (a, b) = installation(config(limit=2))
    clear_of_minute_end(15.0)
    # One account however spelled, across both Envoys.
    assert login(a.port, "Grace")[0] == 200
    assert login(b.port, "  ｇｒａｃｅ ")[0] == 200
    assert login(a.port, "GRACE")[0] == 429
    # No account field, malformed JSON, a body over the cap: refused with
    # why, asked about nowhere (tests/e2e/test_signin_attacks.py tries
    # every shape), whatever the address.
    src = "127.0.4.1"
    for body, want in [(b'{"user":"x"}', 400), (b"{not json", 400),
                       (json.dumps({"username": "heidi", "pad": "x" * 20000}).encode(), 413)]:
        for port in (a.port, b.port):
            status, _, text = login(port, body=body, src=src)
            assert status == want, (body[:20], status, text)
            assert json.loads(text)["route"] == "login"
    # Heidi herself is untouched by what her address did without her name.
    assert login(a.port, "heidi", src=src)[0] == 200
    # Two different accounts in one request: 400, counted nowhere.
    status, _, body = login(a.port, body=b'{"username":"ivan","username":"judy"}')
    assert status == 400 and json.loads(body)["reason"] == "ambiguous", body
    no_panic(a, b)


def test_form_and_header_sources(installation, envoy_factory, rate_limit_service, upstream,
                                 tmp_path):
    _, (form,) = installation(config(limit=1, account={"form": "username"}), n=1)
    clear_of_minute_end()
    h = {"content-type": "application/x-www-form-urlencoded"}
    assert login(form.port, body=b"username=K%61te&password=x", headers=h)[0] == 200
    assert login(form.port, body=b"password=y&username=kate", headers=h)[0] == 429
    cfg = config(limit=1, account={"header": "x-login"})
    svc = rate_limit_service(rls_yaml(cfg, tmp_path))
    hdr = envoy_factory(cfg, clusters=[grpc_cluster("rls", svc.grpc_port)],
                        upstream_port=upstream.port)
    warmed(hdr)
    assert request(hdr.port, "/up/login", method="POST", headers={"x-login": "Liam"})[0] == 200
    assert request(hdr.port, "/up/login", method="POST", headers={"x-login": "liam"})[0] == 429
    no_panic(form, hdr)


def test_hammering_while_refused_cannot_extend_the_lockout(installation):
    # The fixed shape's promise (the sliding one's: test_sliding.py).
    _, (a,) = installation(config(limit=2, window="PT1S", shape="fixed"), n=1)
    # Start just after a second begins; hammer for half of it.
    time.sleep(1 - time.time() % 1 + 0.02)
    account = "mallory"
    statuses = [login(a.port, account)[0] for _ in range(2)]
    end = time.time() + 0.4
    while time.time() < end:
        statuses.append(login(a.port, account)[0])
    assert statuses[:2] == [200, 200] and set(statuses[2:]) == {429}, statuses
    # The service counted every refused call too, but its window is the
    # clock's: at the next second the account starts over.
    time.sleep(1 - time.time() % 1 + 0.05)
    assert login(a.port, account)[0] == 200


def test_each_worker_opens_its_connection_to_the_service_before_any_sign_in(
        envoy_factory, rate_limit_service, upstream, redis, tmp_path):
    cfg = config()
    svc = rate_limit_service(rls_yaml(cfg, tmp_path))
    e = envoy_factory(cfg, clusters=[grpc_cluster("rls", svc.grpc_port)],
                      upstream_port=upstream.port)  # 2 workers
    # No request yet: every ticking root context (the 2 workers' and the
    # main thread's) calls once, and each call is answered.
    cx = e.wait_value(lambda: e.stat("cluster.rls.upstream_rq_completed"),
                      lambda v: v >= 2, timeout=10.0)
    assert cx >= 2, cx
    time.sleep(1.5)  # a tick more: no call once answered
    opened = e.stat("cluster.rls.upstream_cx_total")
    calls = e.stat("cluster.rls.upstream_rq_total")
    assert opened >= 2 and calls == e.stat("cluster.rls.upstream_rq_completed"), (opened, calls)
    # The service counted nothing and no bound saw a call.
    assert redis.commandstats().get("incrby", 0) == 0
    assert e.rb("signin", "login", "attempts", "rls_calls") == 0
    assert e.rb("signin", "login", "attempts", "rls_errors") == 0
    # Sign-ins on new connections (both workers, but with odds of 2^-15)
    # open no connection: each worker's is already there.
    clear_of_minute_end()
    for i in range(16):
        assert login(e.port, f"warm-{i}-{uuid.uuid4().hex[:6]}")[0] == 200
    assert e.stat("cluster.rls.upstream_cx_total") == opened
    assert e.stat("cluster.rls.upstream_rq_total") == calls + 16
    no_panic(e)


def test_a_service_started_after_envoy_is_warmed_up_when_it_comes(
        envoy_factory, rate_limit_service, upstream, tmp_path):
    cfg = config()
    port = free_port()
    e = envoy_factory(cfg, clusters=[grpc_cluster("rls", port)], upstream_port=upstream.port)
    # Nobody listens yet: tries fail, a tick apart, and count as no error.
    e.wait_value(lambda: e.stat("cluster.rls.upstream_cx_connect_fail"), lambda v: v >= 3,
                 timeout=10.0)
    assert e.rb("signin", "login", "attempts", "rls_errors") == 0
    svc = rate_limit_service(rls_yaml(cfg, tmp_path), grpc_port=port)
    done = e.wait_value(lambda: e.stat("cluster.rls.upstream_rq_200"), lambda v: v >= 2,
                        timeout=10.0)
    assert done >= 2, (done, svc.grpc_port)
    no_panic(e)


def test_a_rolling_key_rotation_keeps_one_count_per_account(envoy_factory, rate_limit_service,
                                                            upstream, tmp_path):
    """Issue 40: Envoys with the old and the new key secret side by side,
    as during a rolling restart, one real service between them. Swapped in
    one push, one account has two counters (10 admitted); with the new
    secret reading the old one's count (`also_read`) and the old reading
    the new one's, it keeps one (5). docs/sign-in.md, "Rotating the
    secret"."""
    old, new = "old-secret-0123456789", "new-secret-0123456789"

    def cfg(key, also=None):
        c = config()
        c["rate_limit_service"]["key_secret"] = {"value": key}
        if also:
            c["rate_limit_service"]["key_secret"]["also_read"] = {"value": also}
        return c

    svc = rate_limit_service(rls_yaml(cfg(old), tmp_path))

    def admitted(first: dict, second: dict) -> tuple[int, list[int]]:
        envoys = [envoy_factory(c, clusters=[grpc_cluster("rls", svc.grpc_port)],
                                upstream_port=upstream.port) for c in (first, second)]
        for e in envoys:
            warmed(e)
        clear_of_minute_end()
        account = f"rot-{uuid.uuid4().hex[:8]}"
        statuses = [login(envoys[i % 2].port, account)[0] for i in range(12)]
        no_panic(*envoys)
        for e in envoys:
            e.stop()
        return statuses.count(200), statuses

    swapped = admitted(cfg(old), cfg(new))
    assert swapped[0] == 10, swapped
    # The middle push of the three (docs): each reads the other's count.
    rotating = admitted(cfg(old, also=new), cfg(new, also=old))
    assert rotating[0] == 5 and set(rotating[1][5:]) == {429}, rotating
    print(f"\none account, two Envoys in turn: secrets swapped in one push {swapped[0]} "
          f"admitted of 12; rotating with also_read {rotating[0]}")
