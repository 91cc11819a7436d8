"""Refusals as their callers and operators read them: a gRPC client gets a
gRPC status with the retry delay (never the upstream), an access log line
says ratebound refused and which bound, and the x-ratelimit header profile
marks a refusal as Envoy's own filters do."""
from __future__ import annotations

import json
import threading
import time
from concurrent import futures

import grpc

from harness import ensure_room, request
from launcher import Envoy, grpc_cluster

METHOD = "/demo.Greeter/Hello"
CONFIG = {
    "instance": "grpcr",
    "routes": [{"name": "rpc", "match": {"path_prefix": "/demo.Greeter/"}, "bounds": [
        {"name": "per_address", "per": "address", "limit": 2, "window": "PT1M"}]}],
}
LOG_FORMAT = "%RESPONSE_CODE% %GRPC_STATUS_NUMBER% %RESPONSE_CODE_DETAILS% %REQ(:PATH)%\n"


class GrpcUpstream:
    """A real gRPC server (grpcio, generic handler) counting its calls;
    `trailers` go after each answer's message (as services send usage)."""

    def __init__(self, trailers: tuple = ()) -> None:
        self.calls = 0
        self._lock = threading.Lock()
        outer = self

        def hello(request: bytes, context) -> bytes:
            with outer._lock:
                outer.calls += 1
            if trailers:
                context.set_trailing_metadata(trailers)
            return b"hi " + request

        handler = grpc.method_handlers_generic_handler("demo.Greeter", {
            "Hello": grpc.unary_unary_rpc_method_handler(hello)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def stop(self) -> None:
        self.server.stop(0)


class GrpcEnvoy(Envoy):
    """Every path to the gRPC upstream, and an access log."""

    def __init__(self, *a, log_path, **kw):
        self.access_log = log_path
        super().__init__(*a, **kw)

    def _routes(self):
        return [{"name": "grpc", "match": {"prefix": "/"}, "route": {"cluster": "grpc_up"}}]

    def _hcm(self, filter_config):
        hcm = super()._hcm(filter_config)
        hcm["access_log"] = [{
            "name": "envoy.access_loggers.file",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
                "path": str(self.access_log),
                "log_format": {"text_format_source": {"inline_string": LOG_FORMAT}},
            },
        }]
        return hcm


def call(port: int):
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        hello = ch.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        try:
            return hello(b"x", timeout=5), None
        except grpc.RpcError as e:
            return None, e


def retry_delay_s(e: grpc.RpcError) -> int | None:
    """google.rpc.RetryInfo's delay from grpc-status-details-bin, decoded by
    hand: Status.details[0] (field 3) → Any.value (field 2) → RetryInfo
    .retry_delay (field 1) → Duration.seconds (field 1)."""
    raw = dict(e.trailing_metadata() or ()).get("grpc-status-details-bin")
    if raw is None:
        return None

    def fields(b: bytes):
        i = 0
        while i < len(b):
            key, i = varint(b, i)
            if key & 7 == 2:
                n, i = varint(b, i)
                yield key >> 3, b[i:i + n]
                i += n
            else:
                v, i = varint(b, i)
                yield key >> 3, v

    def varint(b: bytes, i: int):
        n = shift = 0
        while True:
            n |= (b[i] & 0x7F) << shift
            i += 1
            if not b[i - 1] & 0x80:
                return n, i
            shift += 7

    any_ = dict(fields(raw))[3]
    retry = dict(fields(dict(fields(any_))[2]))[1]
    return dict(fields(retry))[1]


def test_a_grpc_caller_is_refused_in_grpc_and_the_access_log_says_by_whom(envoy_factory, tmp_path):
    up = GrpcUpstream()
    try:
        log = tmp_path / "access.log"
        env = envoy_factory(CONFIG, cls=GrpcEnvoy, log_path=log,
                            clusters=[grpc_cluster("grpc_up", up.port)])
        ensure_room(60, 5)
        answers = [call(env.port) for _ in range(3)]
        assert [a for a, _ in answers[:2]] == [b"hi x", b"hi x"], answers
        reply, err = answers[2]
        assert reply is None and err is not None
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err
        assert "rate limit rpc/per_address" in err.details(), err.details()
        meta = dict(err.initial_metadata() or ()) | dict(err.trailing_metadata() or ())
        assert meta.get("ratelimit-limit") == "2", meta
        assert meta.get("ratelimit-remaining") == "0", meta
        retry = int(meta["retry-after"])
        assert 1 <= retry <= 120
        assert retry_delay_s(err) == retry
        assert up.calls == 2, "the refused call never reached the upstream"
        # The access log line of the refusal names ratebound and the bound
        # (read once Envoy stopped: it writes a stream's line when the
        # stream is gone, and grpcio keeps the connection open).
        env.stop()
        lines = log.read_text().splitlines()
        assert any(l.startswith("200 8 ratebound.refused:rpc/per_address /demo.Greeter/Hello")
                   for l in lines), lines
        assert sum("via_upstream" in l for l in lines) == 2, lines
    finally:
        up.stop()


def test_the_x_ratelimit_profile(envoy_factory):
    cfg = {"instance": "xrl", "header_profile": "x-ratelimit", "routes": [
        {"name": "all", "bounds": [{"name": "a", "per": "address", "limit": 1, "window": "PT1M"}]}]}
    env = envoy_factory(cfg)
    ensure_room(60, 5)
    status, h, _ = request(env.port, "/x", src="127.0.9.1")
    assert status == 200 and h.get("x-ratelimit-remaining") == "0", h
    assert "ratelimit-remaining" not in h
    status, h, body = request(env.port, "/x", src="127.0.9.1")
    assert status == 429
    assert h.get("x-envoy-ratelimited") == "true", h
    assert h.get("x-ratelimit-limit") == "1" and h["retry-after"] == h["x-ratelimit-reset"]
    assert json.loads(body)["bound"] == "a"
