"""Request spelling: a request the upstream understands as `/api/x`, `GET`
or `example.com` is counted as such, whatever way the client spelled it.

These Envoys run with Envoy's own path normalisation OFF (its defaults:
no `normalize_path`, no `merge_slashes`), so what is shown is the filter's
own normalisation; the last test turns Envoy's on as well, the setup the
docs recommend.

Each test spends a bound of 2 on the odd spelling, then checks that the
plain spelling is refused: the odd one was counted against the same bound."""
import json

from harness import addr, ensure_room, request

CFG = {
    "instance": "spell",
    "routes": [
        {"name": "host", "match": {"host": "example.com", "path_prefix": "/h/"},
         "bounds": [{"name": "addr", "per": "address", "limit": 2, "window": "PT1M"}]},
        {"name": "port", "match": {"host": "example.net:8080", "path_prefix": "/p/"},
         "bounds": [{"name": "addr", "per": "address", "limit": 2, "window": "PT1M"}]},
        {"name": "api", "match": {"path_prefix": "/api/", "methods": ["GET"]},
         "bounds": [{"name": "addr", "per": "address", "limit": 2, "window": "PT1M"}]},
        {"name": "shop", "match": {"path_prefix": "/shop/"},
         "operations": [
             {"operation_id": "pay", "method": "POST", "path": "/shop/orders/{id}/pay",
              "bounds": [{"name": "addr", "per": "address", "limit": 2, "window": "PT1M"}]},
         ]},
    ],
}


def spend_then_refused(e, src, odd, plain, *, method="GET", plain_method="GET",
                       headers=None, plain_headers=None, route="api", bound="addr"):
    """Two requests spelled `odd` are admitted and counted (RateLimit
    headers 1 then 0 remaining); then the plain spelling is refused by the
    same bound, and so is the odd one."""
    for want in (1, 0):
        status, h, body = request(e.port, odd, src=src, method=method, headers=headers)
        assert status == 200, (odd, status, h, body)
        assert h.get("ratelimit-remaining") == str(want), \
            f"{method} {odd} {headers or ''} was not counted: {h}"
    status, h, body = request(e.port, plain, src=src, method=plain_method,
                              headers=plain_headers)
    assert status == 429, (plain, status, h, body)
    assert json.loads(body)["route"] == route and json.loads(body)["bound"] == bound, body
    status, h, _ = request(e.port, odd, src=src, method=method, headers=headers)
    assert status == 429, (odd, status, h)


def start(envoy, **kw):
    e = envoy(CFG, **kw)
    ensure_room(60, 15)
    return e


def test_percent_encoded_unreserved_characters(envoy):
    e = start(envoy)
    spend_then_refused(e, addr(1), "/%61pi/x", "/api/x")


def test_doubled_slash(envoy):
    e = start(envoy)
    spend_then_refused(e, addr(2), "//api/x", "/api/x")


def test_dot_segment(envoy):
    e = start(envoy)
    spend_then_refused(e, addr(3), "/./api/x", "/api/x")


def test_dot_dot_segment(envoy):
    e = start(envoy)
    spend_then_refused(e, addr(4), "/x/../api/x", "/api/x")
    # Never above the root.
    spend_then_refused(e, addr(5), "/../../api/x", "/api/x")


def test_encoded_slash_counts_as_a_slash(envoy):
    e = start(envoy)
    spend_then_refused(e, addr(6), "/api%2Fx", "/api/x")
    spend_then_refused(e, addr(7), "/api%5cx", "/api/x")


def test_head_counts_on_a_get_only_route(envoy):
    e = start(envoy)
    spend_then_refused(e, addr(8), "/api/x", "/api/x", method="HEAD")
    # POST is still not on the route.
    status, h, _ = request(e.port, "/api/x", src=addr(8), method="POST")
    assert status == 200 and "ratelimit-limit" not in h, h


def test_host_with_a_trailing_dot(envoy):
    e = start(envoy)
    spend_then_refused(e, addr(9), "/h/x", "/h/x", headers={"Host": "example.com."},
                       plain_headers={"Host": "example.com"}, route="host")


def test_host_case_and_port(envoy):
    e = start(envoy)
    # A host written without a port matches it on any port, in any case.
    spend_then_refused(e, addr(10), "/h/x", "/h/x", headers={"Host": "EXAMPLE.Com.:8443"},
                       plain_headers={"Host": "example.com"}, route="host")
    # A host written with a port needs that port.
    spend_then_refused(e, addr(11), "/p/x", "/p/x", headers={"Host": "Example.NET.:8080"},
                       plain_headers={"Host": "example.net:8080"}, route="port")
    status, h, _ = request(e.port, "/p/x", src=addr(11), headers={"Host": "example.net:9090"})
    assert status == 200 and "ratelimit-limit" not in h, h


def test_operation_path_spellings(envoy):
    e = start(envoy)
    spend_then_refused(e, addr(12), "/shop//orders/7/./%70ay", "/shop/orders/8/pay",
                       method="POST", plain_method="POST", route="shop", bound="pay.addr")
    spend_then_refused(e, addr(13), "/shop/x/../orders/%37/pay?q=/", "/shop/orders/9/pay",
                       method="POST", plain_method="POST", route="shop", bound="pay.addr")
    # An id holding an encoded slash is still the one operation.
    spend_then_refused(e, addr(14), "/shop/orders/a%2Fb/pay", "/shop/orders/1/pay",
                       method="POST", plain_method="POST", route="shop", bound="pay.addr")


def test_with_envoy_normalising_too(envoy):
    """The recommended setup: Envoy normalises (normalize_path,
    merge_slashes, escaped slashes redirected) and the filter agrees."""
    e = start(envoy, path_normalization=True)
    spend_then_refused(e, addr(15), "/%61pi/./x", "//api/y/../x")
    spend_then_refused(e, addr(16), "/api/x", "/api/x", method="HEAD")
    # An escaped slash is redirected to the unescaped path by Envoy, before
    # any filter: not counted, and the client follows to /api/x.
    status, h, _ = request(e.port, "/api%2Fx", src=addr(17))
    assert status in (301, 302, 307, 308), (status, h)
    assert h["location"].endswith("/api/x"), h
    status, h, _ = request(e.port, "/api/x", src=addr(17))
    assert status == 200 and h["ratelimit-remaining"] == "1", h
