"""The sign-in counter cannot be slipped past by the shape of the request:
two real Envoys with the module, one real envoyproxy/ratelimit over one real
Redis, a real upstream. Each shape (tests/e2e/signin_shapes.py) is one a
common server reads as an attempt at the account: once the account's 5
attempts are used up, no shape may get one more through, from any address.

Also: a service configuration without the filter's domain fails closed; a
locked account costs no service call, no Redis write and no upstream
request; the keys in Redis are keyed by the installation's secret."""
from __future__ import annotations

import json
import statistics
import threading
import time
import uuid

from engines import clear_of_minute_end, rls_yaml
from harness import addr
from launcher import grpc_cluster
from signin_shapes import HEADER_PATH, JSON_PATH, SHAPES, Req, account_for, config, plain

SECRET = {"RATEBOUND_KEY_SECRET": "e2e-secret-0123456789abcdef"}
KEYED = {"env": "RATEBOUND_KEY_SECRET"}
STAT = "wasmcustom.ratebound.attack"


def start(envoy_factory, rate_limit_service, upstream, tmp_path, cfg, n=2, env=SECRET,
          service_cfg=None):
    svc = rate_limit_service(rls_yaml(service_cfg or cfg, tmp_path))
    envoys = [envoy_factory(cfg, clusters=[grpc_cluster("rls", svc.grpc_port)],
                            upstream_port=upstream.port, vm_env=env) for _ in range(n)]
    for e in envoys:
        contexts = e.concurrency + 1
        e.wait_value(lambda: e.stat("cluster.rls.upstream_rq_200"),
                     lambda v: v >= contexts, timeout=10.0)
    return svc, envoys


def use_up(envoys, account: str) -> None:
    """The account's 5 attempts, across both Envoys, then refused."""
    got = [plain(account).send(envoys[i % 2].port)[0] for i in range(5)]
    assert got == [200] * 5, (account, got)
    status, body = plain(account).send(envoys[1].port)
    assert status == 429, (status, body)
    # That Envoy had not locked the account: the service counted the
    # refused attempt, and the Envoy refunds it at its next tick (each
    # second). Let the refund land before anything is measured.
    time.sleep(1.5)


def test_no_shape_of_the_request_moves_an_attempt_off_its_account(
        envoy_factory, rate_limit_service, upstream, redis, tmp_path):
    cfg = config(key_secret=KEYED)
    _, envoys = start(envoy_factory, rate_limit_service, upstream, tmp_path, cfg)
    rows = []
    for n, shape in enumerate(SHAPES):
        clear_of_minute_end(12.0)
        tag = uuid.uuid4().int % 10**6
        account = account_for(shape, tag)
        use_up(envoys, account)
        hits = upstream.hits
        incrby = redis.commandstats().get("incrby", 0)
        statuses = []
        # 6 addresses x 6 attempts, a fresh decoy each.
        for a in range(6):
            src = addr(a + 1, base=61 + n)
            for k in range(6):
                req = shape.build(account, f"decoy-{tag}-{a}-{k}")
                statuses.append(req.send(envoys[k % 2].port, src=src)[0])
        admitted = statuses.count(200)
        rows.append(f"{shape.name}: {admitted} of {len(statuses)} admitted, "
                    f"statuses {sorted(set(statuses))}")
        assert admitted == 0, rows[-1]
        assert set(statuses) == {shape.status}, rows[-1]
        assert upstream.hits == hits, f"{shape.name}: an attempt reached the upstream whole"
        if shape.status != 429:
            # Refused as unreadable: never asked about, nothing written.
            assert redis.commandstats().get("incrby", 0) == incrby, shape.name
    print("\nsign-in shapes (account used up, 36 attempts from 6 addresses each):")
    print("\n".join(f"  {r}" for r in rows))
    unreadable = sum(e.wait_value(lambda e=e: e.stat(f"{STAT}.accounts_unreadable"),
                                  lambda v: v > 0) for e in envoys)
    want = 36 * sum(1 for s in SHAPES if s.status != 429)
    assert unreadable == want, (unreadable, want)
    for e in envoys:
        assert "panicked" not in e.log()


def test_refusals_say_why_in_problem_json(envoy_factory, rate_limit_service, upstream,
                                          tmp_path):
    _, (a,) = start(envoy_factory, rate_limit_service, upstream, tmp_path,
                    config(key_secret=KEYED), n=1)
    status, body = Req(JSON_PATH, [("content-type", "text/plain")], b"{}").send(a.port)
    doc = json.loads(body)
    assert (status, doc["status"], doc["reason"]) == (415, 415, "content_type"), doc
    assert "application/json" in doc["detail"], doc
    status, body = Req(HEADER_PATH).send(a.port)
    doc = json.loads(body)
    assert (status, doc["reason"], doc["route"]) == (400, "missing", "hdr_login"), doc
    # An account named nowhere is no longer counted per address: every
    # such request is refused, whatever address sends it.
    for i in range(8):
        assert Req(JSON_PATH, [("content-type", "application/json")],
                   b'{"user":"x"}').send(a.port, src=addr(i + 1, base=64))[0] == 400


def test_a_service_without_the_domain_fails_closed_and_says_so(
        envoy_factory, rate_limit_service, upstream, tmp_path):
    cfg = config(key_secret=KEYED)
    # The service runs a configuration for another domain: it answers OK,
    # with no limit, for everything of ours.
    _, (a,) = start(envoy_factory, rate_limit_service, upstream, tmp_path, cfg, n=1,
                    service_cfg=config(domain="other"))
    statuses = [plain(f"mallory-{i % 3}").send(a.port)[0] for i in range(50)]
    assert statuses == [503] * 50, statuses
    a.wait_value(lambda: a.stat(f"{STAT}.rls_no_limit"), lambda v: v == 50)
    logged = a.log().count("applied no limit to descriptor")
    assert 1 <= logged <= a.concurrency + 1, f"logged {logged} times for 50 failures"
    assert a.stat(f"{STAT}.login.attempts.rls_errors") == 50


def hammer(port: int, account: str, seconds: float, threads: int = 8, cap: int = 4000):
    """Refused attempts at a locked account from one address, `threads`
    at a time, for `seconds` (at most `cap`). The statuses seen."""
    stop = time.time() + seconds
    statuses: list[int] = []
    lock = threading.Lock()

    def run():
        while time.time() < stop:
            with lock:
                if len(statuses) >= cap:
                    return
            s = plain(account).send(port, src="127.0.66.1")[0]
            with lock:
                statuses.append(s)

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=seconds + 30)
    return statuses


def test_a_locked_account_costs_no_call_no_write_no_upstream_request(
        envoy_factory, rate_limit_service, upstream, redis, tmp_path):
    _, envoys = start(envoy_factory, rate_limit_service, upstream, tmp_path,
                      config(key_secret=KEYED))
    clear_of_minute_end(15.0)
    account = f"locked-{uuid.uuid4().hex[:6]}"
    use_up(envoys, account)
    a = envoys[0]
    calls = a.stat(f"{STAT}.login.attempts.rls_calls")
    incrby = redis.commandstats().get("incrby", 0)
    hits = upstream.hits
    statuses = hammer(a.port, account, seconds=4.0)
    assert statuses and set(statuses) == {429}, set(statuses)
    saved = a.wait_value(lambda: a.stat(f"{STAT}.rls_calls_saved"),
                         lambda v: v >= len(statuses))
    after = a.stat(f"{STAT}.login.attempts.rls_calls")
    writes = redis.commandstats().get("incrby", 0) - incrby
    print(f"\nlocked account: {len(statuses)} attempts refused in 4 s from one address; "
          f"{after - calls} service calls, {writes} Redis INCRBY, "
          f"{upstream.hits - hits} upstream requests, rls_calls_saved {saved}")
    # Envoy a's workers may each ask once before the lock reaches them
    # (it is in shared data: usually none do).
    assert after - calls <= a.concurrency, (calls, after)
    assert writes <= a.concurrency
    assert upstream.hits == hits


def test_held_headers_open_no_upstream_request_for_a_refused_sign_in(
        envoy_factory, rate_limit_service, upstream, redis, tmp_path):
    """Issue 36: without `hold_sign_in_headers` a body-carried sign-in's
    headers go on before its account is read, and every refused attempt at
    a locked account opens an upstream request (reset before its body).
    With it (and Envoy's allow_on_headers_stop_iteration), none does, and
    an admitted sign-in still reaches the upstream whole."""
    figures, latency = {}, {}
    for hold in (False, True):
        cfg = config(key_secret=KEYED, domain=f"hold{int(hold)}")
        cfg["hold_sign_in_headers"] = hold
        _, (a,) = start(envoy_factory, rate_limit_service, upstream, tmp_path, cfg, n=1)
        clear_of_minute_end(15.0)
        account = f"held-{int(hold)}-{uuid.uuid4().hex[:6]}"
        hits = upstream.hits
        got = [plain(account).send(a.port)[0] for _ in range(5)]
        assert got == [200] * 5, got
        assert upstream.hits - hits == 5, "admitted sign-ins reach the upstream whole"
        # What holding costs an admitted sign-in: its latency, fresh accounts.
        took = []
        for k in range(30):
            t0 = time.perf_counter()
            assert plain(f"lat-{int(hold)}-{k}-{uuid.uuid4().hex[:4]}").send(a.port)[0] == 200
            took.append(1000 * (time.perf_counter() - t0))
        latency[hold] = statistics.median(took)
        heads = upstream.heads
        statuses = hammer(a.port, account, seconds=3.0, threads=4, cap=400)
        assert statuses and set(statuses) == {429}, set(statuses)
        # A form sign-in the filter cannot read: refused too, before any head.
        bad = Req("/up/form-login", [("content-type", "application/x-www-form-urlencoded")],
                  f"username={account}%01".encode()).send(a.port)[0]
        assert bad == 400
        time.sleep(0.5)
        figures[hold] = (upstream.heads - heads, len(statuses) + 1)
    print("\nupstream request heads per refused attempt at a locked account: "
          + "; ".join(f"{'held' if h else 'not held'}: {n} of {k} ({n / k:.2f})"
                      for h, (n, k) in figures.items())
          + "; an admitted sign-in's latency, median of 30: "
          + ", ".join(f"{'held' if h else 'not held'} {ms:.2f} ms" for h, ms in latency.items()))
    assert figures[True][0] == 0, figures
    assert figures[False][0] > 0, "without holding, the heads do go on (the case fixed)"


def test_keys_in_redis_are_keyed_by_the_installations_secret(
        envoy_factory, rate_limit_service, upstream, redis, tmp_path):
    cfg = config(key_secret=KEYED)
    svc, envoys = start(envoy_factory, rate_limit_service, upstream, tmp_path, cfg)
    clear_of_minute_end(10.0)
    account = f"zoe-{uuid.uuid4().hex[:6]}"
    use_up(envoys, account)
    keys = redis.cli("KEYS", "*").split()
    assert keys and not any(account in k for k in keys), keys
    # An Envoy with another secret counts the same account under another
    # key: an installation's Envoys must share theirs.
    other = envoy_factory(cfg, clusters=[grpc_cluster("rls", svc.grpc_port)],
                          upstream_port=upstream.port,
                          vm_env={"RATEBOUND_KEY_SECRET": "another-secret-0123456789"})
    assert plain(account).send(other.port)[0] == 200
    # A secret named but missing from the VM's environment: refused.
    assert envoys[0].reload(json.dumps(config(key_secret={"env": "NO_SUCH_VAR"}))) == "rejected"
    assert "NO_SUCH_VAR" in envoys[0].log()
    assert plain(account).send(envoys[0].port)[0] == 429, "the old configuration serves on"
