"""IPv6 clients end to end: Envoy listening on ::1, clients reaching it over
IPv6. Many client addresses without touching the machine's network: one
trusted X-Forwarded-For hop makes the forwarded address Envoy's
`source.address`. One /64 is one caller by default; `ipv6_prefix: 128`
counts each address; an IPv4-mapped address is its IPv4 address; a plain
IPv6 connection (no X-Forwarded-For) is counted too."""
from harness import ensure_room, request

ROUTE = {"name": "addr", "bounds": [
    {"name": "addr", "per": "address", "limit": 2, "window": "PT1M"}]}


def config(**client_address):
    cfg = {"instance": "v6", "routes": [ROUTE]}
    if client_address:
        cfg["client_address"] = client_address
    return cfg


def get(e, xff: str | None = None) -> int:
    headers = {"x-forwarded-for": xff} if xff else {}
    return request(e.port, "/x", host="::1", src="::1", headers=headers)[0]


def test_ipv6_clients_are_counted_per_64_unless_configured_otherwise(envoy):
    e = envoy(config(), listen="::1", xff_num_trusted_hops=1)
    ensure_room(60, 20)
    # Three addresses of one /64, however spelled: one budget of 2.
    assert [get(e, a) for a in ("2001:db8:1:2::1", "2001:db8:1:2::2",
                                "2001:DB8:1:2:0:0:ffff:3")] == [200, 200, 429]
    # The next /64 is another caller.
    assert [get(e, "2001:db8:1:3::1") for _ in range(3)] == [200, 200, 429]
    # An IPv4-mapped address is that IPv4 address.
    assert [get(e, a) for a in ("10.9.0.1", "::ffff:10.9.0.1", "::ffff:10.9.0.1")] \
        == [200, 200, 429]
    # A plain IPv6 connection from ::1, nothing forwarded: counted as ::1.
    assert [get(e) for _ in range(3)] == [200, 200, 429]
    assert e.rb("v6", "addr", "addr", "allowed") == 8
    assert e.rb("v6", "addr", "addr", "refused") == 4
    assert e.wait_value(lambda: e.rb("v6", "addr", "addr", "tracked"),
                        lambda n: n == 4) == 4

    # ipv6_prefix 128: each address is a caller (the route is unchanged, so
    # its counters stay; IPv6 callers are keyed anew, IPv4 ones are not).
    assert e.reload(config(ipv6_prefix=128)) == "success"
    assert [get(e, "2001:db8:1:2::1") for _ in range(3)] == [200, 200, 429]
    assert get(e, "2001:db8:1:2::2") == 200
    assert get(e, "10.9.0.1") == 429, "an IPv4 caller keeps its count"


def test_a_plain_ipv6_connection_is_counted_and_a_bad_prefix_is_rejected(envoy):
    """No forwarding: the client is the IPv6 peer itself (::1)."""
    e = envoy(config(), listen="::1")
    ensure_room(60, 10)
    assert [get(e) for _ in range(3)] == [200, 200, 429]
    # Out of range: rejected with its JSON path, the running one kept.
    assert e.reload(config(ipv6_prefix=129)) == "rejected"
    assert "$.client_address.ipv6_prefix: 129 is out of range" in e.log()
    assert get(e) == 429
    assert e.rb("v6", "addr", "addr", "allowed") == 2
