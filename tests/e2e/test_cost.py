"""Bounds that count cost, in a real Envoy in front of a stand-in for an
OpenAI-style API: tokens named by the answer's `usage` (a JSON body, or the
last event of a server-sent-events stream), or units named by a request
header. Reserve at admission, true up when the answer names its cost."""
import json

from harness import LocalServer, addr, request


class LlmApi(LocalServer):
    """Answers `/up/json/<tokens>`, `/up/sse/<tokens>` (an event stream
    whose last data event carries the usage) and `/up/bad` (a usage that is
    not a number)."""

    def answer(self, path, headers):
        kind, _, tokens = path.removeprefix("/up/").partition("/")
        if kind == "json":
            body = {"choices": [{"text": "..."}], "usage": {"total_tokens": int(tokens)}}
            return 200, [("content-type", "application/json")], json.dumps(body).encode()
        if kind == "sse":
            events = [{"choices": [{"delta": {"content": w}}], "usage": None} for w in ("He", "llo")]
            events.append({"choices": [], "usage": {"total_tokens": int(tokens)}})
            body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            return 200, [("content-type", "text/event-stream")], body.encode()
        return 200, [("content-type", "application/json")], b'{"usage":{"total_tokens":"many"}}'


def tokens(limit: int, reserve: int) -> dict:
    return {"instance": "llm", "routes": [{"name": "chat", "bounds": [
        {"name": "tokens", "per": "address", "limit": limit, "window": "PT1M",
         "cost": {"response_json": "/usage/total_tokens", "reserve": reserve, "unit": "tokens"}}]}]}


def test_a_token_budget_refuses_once_the_answers_used_it(envoy):
    api = LlmApi()
    try:
        e = envoy(tokens(1000, 300), upstream_port=api.port)
        src = addr(71)
        statuses = [request(e.port, "/up/json/300", src=src)[0] for _ in range(4)]
        # 300 + 300 + 300 used: the fourth's reservation of 300 no longer fits.
        assert statuses == [200, 200, 200, 429], statuses
        status, h, _ = request(e.port, "/up/json/300", src=src)
        assert status == 429 and int(h["ratelimit-limit"]) == 1000, h
        assert api.hits == 3
    finally:
        api.close()


def test_an_event_streams_last_usage_is_charged_and_the_stream_passes_unchanged(envoy):
    api = LlmApi()
    try:
        e = envoy(tokens(100, 50), upstream_port=api.port)
        src = addr(72)
        status, h, body = request(e.port, "/up/sse/60", src=src)
        assert status == 200
        assert body.decode().endswith("data: [DONE]\n\n") and body.count(b"data: ") == 4, body
        # Reserved 50, charged 60: another 50 no longer fits (without the
        # true-up it would: 50 + 50 = 100).
        assert request(e.port, "/up/sse/60", src=src)[0] == 429
    finally:
        api.close()


def test_an_answer_without_a_usable_usage_keeps_its_reservation_and_is_counted(envoy):
    api = LlmApi()
    try:
        e = envoy(tokens(100, 40), upstream_port=api.port)
        src = addr(73)
        assert [request(e.port, "/up/bad", src=src)[0] for _ in range(3)] == [200, 200, 429]
        unknown = e.wait_value(lambda: e.stats().get("wasmcustom.ratebound.llm.costs_unknown"),
                               lambda v: v == 2)
        assert unknown == 2
    finally:
        api.close()


def test_a_cost_the_request_names_is_taken_at_admission(envoy):
    e = envoy({"instance": "units", "routes": [{"name": "export", "bounds": [
        {"per": "address", "limit": 10, "window": "PT1M", "cost": {"request_header": "x-cost"}}]}]})
    src = addr(74)
    statuses = [request(e.port, "/x", src=src, headers={"x-cost": "4"})[0] for _ in range(3)]
    assert statuses == [200, 200, 429], statuses
    # Two units are left: a request of 2 fits, one more of 1 does not.
    assert request(e.port, "/x", src=src, headers={"x-cost": "2"})[0] == 200
    assert request(e.port, "/x", src=src, headers={"x-cost": "1"})[0] == 429
