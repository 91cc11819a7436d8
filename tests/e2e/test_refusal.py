"""Admitted then refused: the four headers, once each; problem+json; the
upstream never dialled for a refusal; several bounds where a later one refuses."""
import json

from harness import addr, ensure_room, request

HELLO = {
    "instance": "t1",
    "success_headers": True,
    "routes": [
        {"name": "hello",
         "match": {"route_name": "direct", "path_prefix": "/hello", "methods": ["GET"]},
         "bounds": [
             {"name": "per_address", "per": "address", "limit": 5, "window": "PT1M"},
             {"name": "whole_route", "per": "route", "limit": 1000, "window": "PT1S"},
         ]},
    ],
}
RL = ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset")


def assert_once(headers, name):
    assert name in headers, f"missing {name}: {headers}"
    assert isinstance(headers[name], str), f"{name} sent more than once: {headers[name]}"
    return headers[name]


def assert_refusal(status, h, body, *, limit, route, bound, window_s):
    assert status == 429, (status, h, body)
    for name in RL + ("retry-after", "content-type"):
        assert_once(h, name)
    assert int(h["ratelimit-limit"]) == limit
    assert int(h["ratelimit-remaining"]) == 0
    reset = int(h["ratelimit-reset"])
    retry = int(h["retry-after"])
    # the sliding estimate can hold a caller into the next window: up to 2 windows
    assert 1 <= retry <= 2 * window_s, h
    assert retry == reset, h
    assert h["content-type"].split(";")[0].strip() == "application/problem+json", h
    doc = json.loads(body)
    assert doc["route"] == route, doc
    assert doc["bound"] == bound, doc
    return doc


def test_admitted_then_refused_with_all_four_headers(envoy):
    e = envoy(HELLO)
    ensure_room(60, 15)
    src = addr(1)
    remaining = []
    for _ in range(5):
        status, h, body = request(e.port, "/hello", src=src)
        assert status == 200, (status, h, body)
        assert body == b"ok"
        for name in RL:
            assert_once(h, name)
        assert "retry-after" not in h, h
        # the most constrained bound is per_address (5 per minute)
        assert int(h["ratelimit-limit"]) == 5, h
        assert 0 <= int(h["ratelimit-reset"]) <= 120, h
        remaining.append(int(h["ratelimit-remaining"]))
    assert remaining == [4, 3, 2, 1, 0], remaining

    for _ in range(3):
        status, h, body = request(e.port, "/hello", src=src)
        doc = assert_refusal(status, h, body, limit=5, route="hello", bound="per_address",
                             window_s=60)
    print(f"refusal headers: { {k: h[k] for k in RL + ('retry-after', 'content-type')} }")
    print(f"refusal body: {doc}")

    # another caller is unaffected; other methods and paths are not bounded
    status, h, _ = request(e.port, "/hello", src=addr(2))
    assert status == 200 and int(h["ratelimit-remaining"]) == 4, h
    status, h, _ = request(e.port, "/hello", src=src, method="POST")
    assert status == 200 and "ratelimit-limit" not in h, h
    status, h, _ = request(e.port, "/other", src=src)
    assert status == 200 and "ratelimit-limit" not in h, h

    assert e.rb("t1", "hello", "per_address", "allowed") == 6
    assert e.rb("t1", "hello", "per_address", "refused") == 3
    assert e.rb("t1", "hello", "whole_route", "allowed") == 6
    assert e.rb("t1", "hello", "whole_route", "refused") == 0
    assert e.rb("t1", what="store_errors") == 0


def test_success_headers_can_be_switched_off(envoy):
    cfg = json.loads(json.dumps(HELLO))
    cfg["success_headers"] = False
    e = envoy(cfg)
    ensure_room(60, 10)
    src = addr(3)
    for _ in range(5):
        status, h, _ = request(e.port, "/hello", src=src)
        assert status == 200
        for name in RL + ("retry-after",):
            assert name not in h, h
    status, h, body = request(e.port, "/hello", src=src)
    assert_refusal(status, h, body, limit=5, route="hello", bound="per_address", window_s=60)


def test_upstream_never_contacted_for_a_refusal(envoy, upstream):
    cfg = {
        "instance": "up",
        "routes": [
            {"name": "up",
             "match": {"route_name": "upstream", "path_prefix": "/up"},
             "bounds": [{"name": "per_address", "per": "address", "limit": 2, "window": "PT1M"}]},
        ],
    }
    e = envoy(cfg, upstream_port=upstream.port)
    ensure_room(60, 10)
    src = addr(4)
    for _ in range(2):
        status, h, body = request(e.port, "/up/x", src=src)
        assert status == 200 and body == b"hello from upstream\n", (status, h, body)
    # An upstream's own RateLimit fields are kept; ratebound appends its own.
    status, h, _ = request(e.port, "/up/own-limit", src=addr(5))
    assert status == 200 and h["ratelimit-limit"] == ["1000", "2"], h
    assert upstream.hits == 3
    assert e.stat("cluster.upstream.upstream_rq_total") == 3
    for _ in range(10):
        status, h, body = request(e.port, "/up/x", src=src)
        assert_refusal(status, h, body, limit=2, route="up", bound="per_address", window_s=60)
    print(f"upstream hits {upstream.hits}, upstream_rq_total "
          f"{e.stat('cluster.upstream.upstream_rq_total')} after 3 admitted + 10 refused")
    assert upstream.hits == 3
    assert e.stat("cluster.upstream.upstream_rq_total") == 3
    # the direct route is not matched by this configuration
    status, h, _ = request(e.port, "/", src=src)
    assert status == 200 and "ratelimit-limit" not in h


def test_later_bound_refuses_and_earlier_bounds_are_unchanged(envoy):
    cfg = {
        "instance": "multi",
        "routes": [
            {"name": "r",
             "match": {"route_name": "direct"},
             "bounds": [
                 {"name": "route5", "per": "route", "limit": 5, "window": "PT1M"},
                 {"name": "addr2", "per": "address", "limit": 2, "window": "PT1M"},
             ]},
        ],
    }
    e = envoy(cfg)
    ensure_room(60, 15)
    a, b, c, d = addr(10), addr(11), addr(12), addr(13)
    for _ in range(2):
        assert request(e.port, "/", src=a)[0] == 200
    # A keeps going: refused by the second bound each time; the first bound
    # must not count these (5 refusals would exhaust route5 if counted).
    for _ in range(5):
        status, h, body = request(e.port, "/", src=a)
        assert status == 429, (status, h)
        assert json.loads(body)["bound"] == "addr2"
        assert int(h["ratelimit-limit"]) == 2
    assert e.rb("multi", "r", "route5", "allowed") == 2
    assert e.rb("multi", "r", "route5", "refused") == 0
    assert e.rb("multi", "r", "addr2", "refused") == 5

    # B: two admitted (route count 4); its second shows addr2 (remaining 0) as
    # the most constrained bound.
    assert request(e.port, "/", src=b)[0] == 200
    status, h, _ = request(e.port, "/", src=b)
    assert status == 200
    assert (int(h["ratelimit-limit"]), int(h["ratelimit-remaining"])) == (2, 0), h
    # C: the fifth admitted on the route; route5 is now the most constrained.
    status, h, _ = request(e.port, "/", src=c)
    assert status == 200, "route5 counted A's refusals"
    assert (int(h["ratelimit-limit"]), int(h["ratelimit-remaining"])) == (5, 0), h
    # D: refused by route5 -- exactly 5 were counted on the route.
    status, h, body = request(e.port, "/", src=d)
    assert status == 429
    assert json.loads(body)["bound"] == "route5"
    assert int(h["ratelimit-limit"]) == 5

    st = {f"{b}.{w}": e.rb("multi", "r", b, w)
          for b in ("route5", "addr2") for w in ("allowed", "refused")}
    print(f"stats: {st}")
    assert st == {"route5.allowed": 5, "route5.refused": 1,
                  "addr2.allowed": 5, "addr2.refused": 5}
