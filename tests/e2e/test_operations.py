"""Per-endpoint bounds: operations of a route's OpenAPI inventory carry
bounds of their own, on top of the route's."""
import json

from harness import ensure_room, request
from identity_env import IdentityEnvoy, bearer

CFG = {
    "instance": "ops",
    "identity": {"jwt": {}},
    "routes": [{
        "name": "shop",
        "match": {"path_prefix": "/orders"},
        "bounds": [{"name": "all", "per": "route", "limit": 1000, "window": "PT1M"}],
        "operations": [
            {"operation_id": "payOrder", "method": "POST", "path": "/orders/{id}/pay",
             "bounds": [{"name": "addr", "per": "address", "limit": 2, "window": "PT1M"}]},
            {"operation_id": "myOrders", "method": "GET", "path": "/orders/mine",
             "bounds": [{"name": "addr", "per": "address", "limit": 3, "window": "PT1M"}]},
            {"operation_id": "getOrder", "method": "GET", "path": "/orders/{id}",
             "bounds": [{"name": "user", "per": "user", "limit": 2, "window": "PT1M"}]},
        ],
    }],
}


def test_operations_are_bounded_on_their_own_and_on_top_of_the_route(envoy):
    e = envoy(CFG, cls=IdentityEnvoy)
    ensure_room(60, 15)
    ok = 0

    def go(method, path, src="127.0.6.1", **kw):
        nonlocal ok
        status, h, body = request(e.port, path, src=src, method=method, **kw)
        ok += status == 200
        return status, h, body

    # payOrder: 2 per address, whatever the order id (per operation, per caller).
    assert [go("POST", f"/orders/{i}/pay")[0] for i in (1, 1)] == [200, 200]
    status, h, body = go("POST", "/orders/2/pay")
    assert status == 429
    assert json.loads(body)["bound"] == "payOrder.addr"
    assert h["ratelimit-limit"] == "2" and h["retry-after"] == h["ratelimit-reset"]
    # Other operations and other callers still pass.
    assert go("POST", "/orders/3/pay", src="127.0.6.2")[0] == 200
    alice, bob = bearer(sub="alice"), bearer(sub="bob")
    assert go("GET", "/orders/7", headers=alice)[0] == 200

    # /orders/mine is concrete: it wins over /orders/{id}, with its own bound.
    assert [go("GET", "/orders/mine")[0] for _ in range(4)] == [200, 200, 200, 429]
    status, _, body = go("GET", "/orders/mine")
    assert json.loads(body)["bound"] == "myOrders.addr"
    # ...and it did not spend alice's getOrder budget (1 of 2 used so far).
    assert [go("GET", "/orders/8", headers=alice)[0] for _ in range(2)] == [200, 429]
    assert go("GET", "/orders/8", headers=bob)[0] == 200, "per user"

    # A method the inventory does not list for that path is no operation:
    # only the route's bound applies.
    assert [go("DELETE", "/orders/1/pay")[0] for _ in range(3)] == [200] * 3

    # The route's bound counted every admitted request, operations included.
    assert e.rb("ops", "shop", "all", "allowed") == ok
    assert e.rb("ops", "shop", "payOrder.addr", "refused") == 1
    assert e.rb("ops", "shop", "getOrder.user", "allowed") == 3
