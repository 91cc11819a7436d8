"""Superseded configurations drain for --drain-time-s (600 s by default):
every one of them still counts its own keep-alive connections, so no two
configurations alive at once may ever write the same counters.

Envoy 1.36 (Istio 1.28's proxy) does not keep an HTTP/1.1 keep-alive
connection on a superseded filter chain: its next response after the push
says `connection: close`, so the client reconnects onto the new chain.
Envoy 1.40 keeps it for the drain time. Both are checked
(docs/envoy-host.md, "Envoy lines")."""
import http.client
import re
import time

from harness import addr, ensure_room, envoy_version, request
from test_reload import per_address


class KeepAlive:
    """One HTTP/1.1 connection from `src`, kept open: it stays on the filter
    chain (and so the configuration) that accepted it."""

    def __init__(self, port: int, src: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                               source_address=(src, 0))

    def get(self, path: str = "/", may_close: bool = False):
        self.conn.request("GET", path)
        resp = self.conn.getresponse()
        resp.read()
        if may_close and resp.will_close:
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, True
        # A draining chain may ask the client to close; the test needs the
        # connection to stay on the old chain, so it must never reconnect.
        assert not resp.will_close, "Envoy closed the draining keep-alive connection"
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}

    def close(self) -> None:
        self.conn.close()


def on_1_36_a_push_closes_the_old_keep_alive(envoy):
    # On 1.36 the connection on the first configuration is closed at its next
    # response after a push (that response is still the old configuration's,
    # counted there), and the reconnection counts on the new one.
    e = envoy(per_address(100, "drain"), drain_time_s=3600)
    ensure_room(60, 25)
    src = addr(8, base=90)
    first = KeepAlive(e.port, src)
    try:
        seen = [first.get()[1]["ratelimit-remaining"] for _ in range(3)]
        assert seen == ["99", "98", "97"], seen
        assert e.reload(per_address(5, "drain")) == "success"
        status, h, closed = first.get(may_close=True)
        assert closed and h.get("connection") == "close", h
        assert (status, h["ratelimit-limit"], h["ratelimit-remaining"]) == (200, "100", "96")
    finally:
        first.close()
    again = KeepAlive(e.port, src)
    try:
        statuses = [again.get(may_close=True)[0] for _ in range(7)]
        assert statuses == [200] * 5 + [429] * 2, statuses
    finally:
        again.close()
    assert e.rb("drain", what="store_errors") == 0


def test_three_configurations_alive_never_share_counters(envoy):
    if envoy_version() < (1, 40):
        # Never three alive at once on a keep-alive connection: see above.
        on_1_36_a_push_closes_the_old_keep_alive(envoy)
        return
    # Three pushes, every bound changed each time: 100/min, 101/min, 5/min.
    # A keep-alive connection stays on the first; new connections get the
    # third. Each must count on its own.
    e = envoy(per_address(100, "drain"), drain_time_s=3600)
    ensure_room(60, 25)
    src = addr(7, base=90)
    first = KeepAlive(e.port, src)
    try:
        seen_first = [first.get()[1]["ratelimit-remaining"] for _ in range(3)]
        assert seen_first == ["99", "98", "97"], seen_first
        assert e.reload(per_address(101, "drain")) == "success"
        assert e.reload(per_address(5, "drain")) == "success"
        third, old = [], []
        for _ in range(12):
            status, h, _ = request(e.port, "/", src=src)
            third.append((status, h.get("ratelimit-limit")))
            status, h = first.get()
            old.append((status, h.get("ratelimit-limit"), h.get("ratelimit-remaining")))
        admitted_third = sum(1 for s, _ in third if s == 200)
        print(f"three configurations alive: new connections (5/min) admitted "
              f"{admitted_third} of {len(third)}: {third}")
        print(f"the first configuration's keep-alive connection (100/min): {old}")
        assert all(limit == "5" for _, limit in third), "new connections are on the third push"
        assert admitted_third == 5, f"{admitted_third} admitted against 5/min"
        assert [s for s, _ in third[5:]] == [429] * 7
        # The first configuration's count went on from 97, untouched.
        assert [(s, lim) for s, lim, _ in old] == [(200, "100")] * 12
        assert [int(r) for _, _, r in old] == list(range(96, 84, -1)), old
    finally:
        first.close()
    assert e.rb("drain", what="store_errors") == 0


LANES_LINE = re.compile(r"ratebound lanes: instance \"(\w+)\" is generation (\d+); this vm_id has "
                        r"(\d+) configurations alive and (\d+) shared-data keys")


def lanes_lines(e):
    return [tuple(int(x) for x in m.groups()[1:]) for m in LANES_LINE.finditer(e.log())]


def test_drained_configurations_give_their_lanes_back(envoy):
    # --drain-time-s 1: each superseded configuration is destroyed about a
    # second after the next push, and its lanes are free for the one after.
    e = envoy(per_address(1, "back"), drain_time_s=1)
    for k in range(2, 8):
        assert e.reload(per_address(k, "back")) == "success"
        assert request(e.port, "/", src=addr(k, base=91))[0] == 200
        time.sleep(2.5)  # drained and destroyed
    lines = lanes_lines(e)
    print("(generation, configurations alive, keys) at each push:", lines)
    assert len(lines) == 7, e.log()[-3000:]
    # Never more than the one in force and the one draining; never more than
    # two caller tables (1,252 keys each) however many pushes.
    assert max(alive for _, alive, _ in lines) <= 2
    assert max(keys for _, _, keys in lines) <= 2 * 1252
    assert "left the lane directory (0 left)" in e.log()


def keyed_bounds(n, limit, instance="budget"):
    # Enforced at 99%: each bound keeps a lane of its own (bounds on one key
    # enforced in full share one, up to eight a lane: CHANGELOG, issue 41).
    return {
        "instance": instance,
        "routes": [
            {"name": "r", "match": {"route_name": "direct"},
             "bounds": [{"name": f"b{j}", "per": "address", "limit": limit + j,
                         "window": "PT1M", "enforce_percent": 99} for j in range(n)]},
        ],
    }


def test_a_push_over_the_key_budget_of_what_is_alive_is_refused(envoy):
    # 128 bounds keyed per caller (the most one configuration may have),
    # every bound changed at each push, nothing drains: the fourth push
    # fills 512 caller tables of the vm_id's budget (645,120 keys), the
    # fifth is refused and the fourth keeps serving.
    e = envoy(keyed_bounds(128, 1000), drain_time_s=3600)
    src = addr(3, base=92)
    for k in range(1, 4):
        assert e.reload(keyed_bounds(128, 1000 + k * 1000)) == "success", k
    status, h, _ = request(e.port, "/", src=src)
    assert status == 200 and h["ratelimit-limit"] == "4000", h
    log_before = len(e.log())
    assert e.reload(keyed_bounds(128, 9000)) == "rejected"
    refusal = [l for l in e.log()[log_before:].splitlines() if "over the budget" in l]
    print("refused push:", refusal[:1])
    assert refusal, e.log()[log_before:][-3000:]
    status, h, _ = request(e.port, "/", src=src)
    assert status == 200 and h["ratelimit-limit"] == "4000", h
    assert h["ratelimit-remaining"] == "3998", "the fourth configuration kept its count"
    # An unchanged configuration needs no new lane: accepted.
    assert e.reload(keyed_bounds(128, 4000)) == "success"
    print("(generation, configurations alive, keys):", lanes_lines(e))
    assert max(keys for _, _, keys in lanes_lines(e)) <= 512 * 1252
