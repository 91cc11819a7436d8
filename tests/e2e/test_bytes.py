"""Header values that are not UTF-8 (obs-text, which Envoy lets through)
must not bring the module down: the SDK's header read panics on them, so
the filter reads bytes and replaces invalid sequences."""
import socket

from harness import ensure_room

CONFIG = {
    "instance": "bytes",
    "identity": {"header": {"user": "x-user", "token": "x-api-key"}},
    "routes": [{"name": "api", "match": {"path_prefix": "/api"}, "bounds": [
        {"name": "per_user", "per": "user", "limit": 2, "window": "PT1M"}]}],
}


def raw(port: int, head: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(head)
        data = s.recv(4096)
    return int(data.split(b" ", 2)[1])


def test_a_header_that_is_not_utf8_is_counted_not_fatal(envoy_factory):
    env = envoy_factory(CONFIG)
    ensure_room(60, 5)
    req = (b"GET /api/x HTTP/1.1\r\nHost: e2e\r\nx-user: \xff\xfe-mallory\r\n"
           b"Connection: close\r\n\r\n")
    statuses = [raw(env.port, req) for _ in range(3)]
    # Counted under one user (the bytes as read, invalid ones replaced):
    # the third is refused, and the module still answers afterwards.
    assert statuses == [200, 200, 429], statuses
    assert "panicked" not in env.log()
    ok = b"GET /api/x HTTP/1.1\r\nHost: e2e\r\nx-user: alice\r\nConnection: close\r\n\r\n"
    assert raw(env.port, ok) == 200
