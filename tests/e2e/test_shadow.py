"""Shadow mode (per bound and for the whole filter) and the structured
RateLimit-Policy / RateLimit fields of the IETF httpapi draft."""
import re

from harness import ensure_room, request


def get_n(port, n, src, path="/x"):
    return [request(port, path, src=src) for _ in range(n)]


def test_a_shadow_bound_counts_and_reports_but_never_refuses_until_enforced(envoy):
    def cfg(shadow):
        return {"instance": "shadow", "routes": [{"name": "api", "bounds": [
            {"name": "dry", "per": "address", "limit": 3, "window": "PT1M", "shadow": shadow},
            {"name": "all", "per": "route", "limit": 1000, "window": "PT1M"},
        ]}]}

    e = envoy(cfg(True))
    ensure_room(60, 15)
    answers = get_n(e.port, 10, "127.0.5.1")
    assert [s for s, _, _ in answers] == [200] * 10
    # The headers say what enforcement would: nothing left.
    assert [h["ratelimit-remaining"] for _, h, _ in answers[3:]] == ["0"] * 7
    dry = {w: e.rb("shadow", "api", "dry", w) for w in ("allowed", "would_refuse", "refused")}
    print("shadow stats:", dry, "route bound allowed:", e.rb("shadow", "api", "all", "allowed"))
    assert dry == {"allowed": 3, "would_refuse": 7, "refused": 0}
    assert e.rb("shadow", "api", "all", "allowed") == 10
    # Enforcing it is a configuration change: the route starts again.
    assert e.reload(cfg(False)) == "success"
    statuses = [s for s, _, _ in get_n(e.port, 4, "127.0.5.1")]
    assert statuses == [200, 200, 200, 429]


def test_the_whole_filter_in_shadow_mode_refuses_nothing(envoy):
    e = envoy({"instance": "dry", "shadow": True, "routes": [
        {"name": "api", "bounds": [{"name": "b", "per": "address", "limit": 2, "window": "PT1M"}]}]})
    ensure_room(60, 10)
    assert [s for s, _, _ in get_n(e.port, 5, "127.0.5.2")] == [200] * 5
    assert e.rb("dry", "api", "b", "would_refuse") == 3


def test_structured_fields_follow_the_draft_syntax(envoy):
    e = envoy({"instance": "sf", "structured_headers": True, "routes": [
        {"name": "api", "bounds": [{"name": "per_address", "per": "address", "limit": 2,
                                    "window": "PT1M"}]}]})
    ensure_room(60, 10)
    (s1, h1, _), (s2, h2, _), (s3, h3, _) = get_n(e.port, 3, "127.0.5.3")
    assert (s1, s2, s3) == (200, 200, 429)
    for h in (h1, h2, h3):
        assert h["ratelimit-policy"] == '"per_address";q=2;w=60', h
    assert re.fullmatch(r'"per_address";r=1;t=\d+', h1["ratelimit"]), h1
    m = re.fullmatch(r'"per_address";r=0;t=(\d+)', h3["ratelimit"])
    assert m, h3
    t = int(m.group(1))
    assert t >= 1 and int(h3["retry-after"]) >= t, h3
    # The seed's fields are still there, once each.
    assert h3["ratelimit-reset"] == str(t) and h3["ratelimit-limit"] == "2"
