"""Smoke test of the engines behind installation-wide bounds: a real
envoyproxy/ratelimit over a real Redis (tests/e2e/engines.py), driven over
gRPC with the hand-written ShouldRateLimit codec. No Envoy involved."""
from __future__ import annotations

import time

import grpc

from engines import DAY, MINUTE, OK, OVER_LIMIT, RlsClient, descriptor

CONFIG = """\
domain: ratebound
descriptors:
  - key: bound
    value: smoke
    rate_limit:
      unit: hour
      requests_per_unit: 2
"""

SMOKE = [descriptor(("bound", "smoke"))]


def clear_of_window_end(window_s: int, margin_s: float = 5.0) -> None:
    """The service's windows are aligned to the epoch; counting across the
    end of one would start over. Wait out the last seconds of a window."""
    left = window_s - time.time() % window_s
    if left < margin_s:
        time.sleep(left + 0.1)


def call_until_answered(client: RlsClient, domain: str, descriptors, timeout: float = 5.0):
    """The first calls after a Redis restart fail (UNKNOWN "EOF": the
    service's pooled connections are dead); it reconnects by itself."""
    deadline = time.monotonic() + timeout
    failures = 0
    while True:
        try:
            return client.should_rate_limit(domain, descriptors), failures
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNKNOWN, e
            failures += 1
            assert time.monotonic() < deadline, f"no answer after {failures} failures"
            time.sleep(0.05)


def test_counts_in_redis_refuses_above_the_limit_and_survives_restarts(
        redis, rate_limit_service):
    clear_of_window_end(3600)
    rls = rate_limit_service(CONFIG)
    with RlsClient(rls.grpc_port) as client:
        answers = [client.should_rate_limit("ratebound", SMOKE) for _ in range(3)]
        assert [(a["overall"], a["statuses"][0]["remaining"]) for a in answers] == [
            (OK, 1), (OK, 0), (OVER_LIMIT, 0)]
        for a in answers:
            assert (a["statuses"][0]["limit"], a["statuses"][0]["unit"]) == (2, 3)
            assert 1 <= a["statuses"][0]["reset_s"] <= 3600

        # One counter per window, counted by every call (the refused one too).
        key = redis.cli("KEYS", "ratebound_bound_smoke_*")
        assert int(key.rsplit("_", 1)[1]) % 3600 == 0, key
        assert redis.cli("GET", key) == "3"
        assert redis.commandstats()["incrby"] == 3

        # The append-only file keeps the count across a Redis restart.
        redis.restart()
        assert redis.cli("GET", key) == "3"
        answer, _ = call_until_answered(client, "ratebound", SMOKE)
        assert answer["overall"] == OVER_LIMIT
        assert redis.cli("GET", key) == "4"

        # A crashed service loses nothing: the counts live in Redis.
        rls.kill9()
        rls.start()
        assert client.should_rate_limit("ratebound", SMOKE)["overall"] == OVER_LIMIT
        assert redis.cli("GET", key) == "5"


def test_override_needs_the_domain_but_no_descriptor_in_the_yaml(redis, rate_limit_service):
    clear_of_window_end(86400)
    rls = rate_limit_service(CONFIG)
    bound = descriptor(("bound", "installation"), ("caller", "c1"), limit=(1, DAY))
    with RlsClient(rls.grpc_port) as client:
        first = client.should_rate_limit("ratebound", [bound])
        second = client.should_rate_limit("ratebound", [bound])
        assert (first["overall"], first["statuses"][0]["limit"]) == (OK, 1)
        assert first["statuses"][0]["remaining"] == 0
        assert second["overall"] == OVER_LIMIT
        # hits_addend 0 asks without counting.
        peek = descriptor(("bound", "installation"), ("caller", "c1"), limit=(1, DAY),
                          hits_addend=0)
        assert client.should_rate_limit("ratebound", [peek])["overall"] == OVER_LIMIT
        key = redis.cli("KEYS", "ratebound_bound_installation_caller_c1_*")
        assert redis.cli("GET", key) == "2"
        # A domain missing from the YAML: no limit at all, override or not.
        elsewhere = client.should_rate_limit("nobody", [bound, bound])
        assert elsewhere["overall"] == OK
        assert [s["limit"] for s in elsewhere["statuses"]] == [None, None]
        assert redis.cli("KEYS", "nobody*") == ""


def test_what_a_fleet_sync_relies_on(redis, rate_limit_service):
    """The facts `src/count/fleet/` and docs/fleet.md build on, against
    the real service: one call carries many keys, each with its own
    hits_addend (0 reads without counting) and limit override; the fleet
    count is limit - remaining only while it is under the limit, so a sync
    that must see counts above it sends a larger override."""
    clear_of_window_end(60)
    rls = rate_limit_service(CONFIG)

    def key(i):
        return ("bound", "fleet"), ("caller", f"k{i}")

    with RlsClient(rls.grpc_port) as client:
        # 200 keys in one call, key i adding i hits against a limit of 100.
        batch = [descriptor(*key(i), limit=(100, MINUTE), hits_addend=i) for i in range(200)]
        answer = client.should_rate_limit("ratebound", batch)
        assert len(answer["statuses"]) == 200
        for i, s in enumerate(answer["statuses"]):
            assert s["limit"] == 100, (i, s)
            # Each answer counts its own key, in the order sent.
            assert s["remaining"] == max(0, 100 - i), (i, s)
            assert 1 <= s["reset_s"] <= 60
        # A key sent 0 hits is read, not counted; the read is still an
        # INCRBY 0 (with its EXPIRE): it creates the key at 0.
        assert redis.cli("GET", redis.cli("KEYS", "ratebound_bound_fleet_caller_k0_*")) == "0"
        assert redis.cli("GET", redis.cli("KEYS", "ratebound_bound_fleet_caller_k150_*")) == "150"
        # Above the limit, remaining stays 0: the count is hidden ...
        over = client.should_rate_limit(
            "ratebound", [descriptor(*key(150), limit=(100, MINUTE), hits_addend=0)])
        assert over["statuses"][0]["remaining"] == 0
        # ... and an override of 10x the limit reads it (counts the same key:
        # the override's limit is not part of the key).
        wide = client.should_rate_limit(
            "ratebound", [descriptor(*key(150), limit=(1000, MINUTE), hits_addend=0)])
        assert 1000 - wide["statuses"][0]["remaining"] == 150
