"""Cost bounds beyond one node, and a cost in a gRPC trailer: real Envoys
with the module, a real envoyproxy/ratelimit over a real Redis, a stand-in
LLM API (tests/e2e/test_cost.py's) or a real gRPC server.

- installation scope: the admission's call sends the reservation as
  `hits_addend`, the rest of the answer's cost is owed and sent by the
  root context at its next tick: Redis ends up holding the costs the
  answers named, whichever Envoy served them; a request the filter
  refuses adds nothing;
- fleet scope: the nodes' syncs send their true costs as `hits_addend`:
  Redis holds the same total;
- a gRPC service's usage in its trailers is charged (docs/cost.md)."""
from __future__ import annotations

import time

import grpc

from engines import clear_of_minute_end, rls_yaml
from harness import addr, request
from launcher import grpc_cluster
from test_cost import LlmApi
from test_grpc_refusal import GrpcEnvoy, GrpcUpstream

LIMIT, RESERVE, ANSWER = 1000, 100, 300


def tokens(scope: str) -> dict:
    service = {"cluster": "rls", "domain": "llm", "timeout_ms": 500}
    if scope == "fleet":
        service |= {"sync_ms": 200, "fleet_nodes": 2}
    return {"instance": "llm", "rate_limit_service": service,
            "routes": [{"name": "chat", "bounds": [
                {"name": "tokens", "per": "address", "limit": LIMIT, "window": "PT1M",
                 "scope": scope,
                 "cost": {"response_json": "/usage/total_tokens", "reserve": RESERVE,
                          "unit": "tokens"}}]}]}


def counted(redis, what: str = "net") -> int:
    """What the service counts for the bound, over its keys: an
    installation bound's attempts less its refunds (`what`: "net",
    "attempts" or "refunded"; a sliding bound keys each by window), a fleet
    bound's counts."""
    keys = redis.cli("KEYS", "llm_bound_chat.tokens_*").split()
    refunded = sum(int(redis.cli("GET", k) or 0) for k in keys if "_refunded_" in k)
    attempts = sum(int(redis.cli("GET", k) or 0) for k in keys if "_refunded_" not in k)
    return {"net": attempts - refunded, "attempts": attempts, "refunded": refunded}[what]


def settles(redis, want: int, timeout: float = 6.0) -> int:
    """Redis's count once it reaches `want` (the owed costs go at the next
    tick, a fleet's at its next sync), or what it was after `timeout`."""
    end = time.monotonic() + timeout
    got = counted(redis)
    while got != want and time.monotonic() < end:
        time.sleep(0.1)
        got = counted(redis)
    return got


def envoys(envoy_factory, rate_limit_service, tmp_path, cfg, n=2):
    svc = rate_limit_service(rls_yaml(cfg, tmp_path))
    api = LlmApi()
    es = [envoy_factory(cfg, clusters=[grpc_cluster("rls", svc.grpc_port)],
                        upstream_port=api.port) for _ in range(n)]
    for e in es:
        e.wait_value(lambda e=e: e.stat("cluster.rls.upstream_rq_200"), lambda v: v >= 1,
                     timeout=10.0)
    return api, es


def test_an_installation_token_budget_is_counted_by_the_service_in_tokens(
        envoy_factory, rate_limit_service, redis, tmp_path):
    api, (a, b) = envoys(envoy_factory, rate_limit_service, tmp_path, tokens("installation"))
    try:
        clear_of_minute_end(15)
        src = addr(91)
        path = f"/up/json/{ANSWER}"
        # Three answers of 300 on two Envoys: each call reserves 100, the
        # other 200 are owed and sent within a tick.
        statuses = [request(e.port, path, src=src)[0] for e in (a, b, a)]
        assert statuses == [200, 200, 200], statuses
        assert settles(redis, 3 * ANSWER) == 3 * ANSWER
        # 900 counted: a reservation of 100 fits, exactly (OK, 0 left),
        # and its answer's 300 is charged too.
        status, h, _ = request(b.port, path, src=src)
        assert status == 200 and h["ratelimit-remaining"] == "0", h
        assert settles(redis, 4 * ANSWER) == 4 * ANSWER
        # Over: b remembers the lock and refuses without a call; a asks the
        # service, which counts the 100 it was sent (as it does every call:
        # never the answer's tokens); the estimate refuses, and a refunds
        # them at its next tick.
        status, h, _ = request(b.port, path, src=src)
        assert status == 429 and h["ratelimit-limit"] == str(LIMIT), h
        assert settles(redis, 4 * ANSWER, timeout=2.0) == 4 * ANSWER
        assert request(a.port, path, src=src)[0] == 429
        assert counted(redis, "attempts") == 4 * ANSWER + RESERVE
        end = time.monotonic() + 6.0
        while counted(redis, "refunded") < RESERVE and time.monotonic() < end:
            time.sleep(0.1)
        assert counted(redis, "refunded") == RESERVE
        assert counted(redis) == 4 * ANSWER
        assert api.hits == 4
        for e in (a, b):
            assert e.rb("llm", what="costs_unsent") == 0
            assert "panicked" not in e.log()
    finally:
        api.close()


def steady(redis, quiet_s: float = 0.7, timeout: float = 8.0) -> int:
    """Redis's count once it has not moved for `quiet_s` (three syncs)."""
    end = time.monotonic() + timeout
    got, since = counted(redis), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.1)
        now = counted(redis)
        if now != got:
            got, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return got


def test_a_fleet_token_budget_syncs_its_true_costs(envoy_factory, rate_limit_service, redis,
                                                   tmp_path):
    api, (a, b) = envoys(envoy_factory, rate_limit_service, tmp_path, tokens("fleet"))
    try:
        clear_of_minute_end(20)
        src = addr(92)
        assert request(a.port, f"/up/json/{ANSWER}", src=src)[0] == 200
        assert steady(redis) == ANSWER
        assert request(b.port, f"/up/json/{ANSWER}", src=src)[0] == 200
        assert steady(redis) == 2 * ANSWER
        # An answer under its reservation: trued down before a's next sync
        # takes it, 50 is sent; if the sync took the 100 first (the answer
        # came within its 200 ms), 100 stays counted: never less.
        assert request(a.port, "/up/json/50", src=src)[0] == 200
        base = steady(redis)
        assert base in (2 * ANSWER + 50, 2 * ANSWER + RESERVE), base
        # 650 (or 700) of 1,000: one more reservation of 100 fits; charged
        # its answer's 300, the next fits on neither node.
        assert request(b.port, f"/up/json/{ANSWER}", src=src)[0] == 200
        assert steady(redis) == base + ANSWER
        assert [request(e.port, f"/up/json/{ANSWER}", src=src)[0] for e in (a, b)] == [429, 429]
        assert steady(redis) == base + ANSWER, "a refused request is never sent"
        assert api.hits == 4
        for e in (a, b):
            assert "panicked" not in e.log()
    finally:
        api.close()


def test_a_cost_in_a_grpc_trailer_is_charged(envoy_factory, tmp_path):
    # Its answers name their tokens in a trailer, after the message.
    up = GrpcUpstream(trailers=(("x-tokens", "300"),))
    try:
        cfg = {"instance": "rpc", "routes": [{"name": "rpc", "bounds": [
            {"name": "tokens", "per": "address", "limit": LIMIT, "window": "PT1M",
             "cost": {"response_trailer": "x-tokens", "reserve": RESERVE, "unit": "tokens"}}]}]}
        env = envoy_factory(cfg, cls=GrpcEnvoy, log_path=tmp_path / "access.log",
                            clusters=[grpc_cluster("grpc_up", up.port)])
        codes = []
        with grpc.insecure_channel(f"127.0.0.1:{env.port}") as ch:
            hello = ch.unary_unary("/demo.Greeter/Hello", request_serializer=None,
                                   response_deserializer=None)
            for _ in range(5):
                try:
                    hello(b"x", timeout=5)
                    codes.append("OK")
                except grpc.RpcError as e:
                    codes.append(e.code().name)
        # 300 a call, from the trailer: after three (900) a reservation of
        # 100 still fits, after four (1,200) none does. Counted from the
        # reservations alone, ten would pass.
        assert codes == ["OK", "OK", "OK", "OK", "RESOURCE_EXHAUSTED"], codes
        assert up.calls == 4
    finally:
        up.stop()
