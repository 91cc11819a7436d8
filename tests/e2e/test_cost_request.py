"""Issue 37: a cost the answer names reads the request first, in a real Envoy
in front of a stand-in OpenAI-compatible API that reads its requests as
such servers do (Python's JSON parser, then pydantic's lax model:
chat_api.py). The stand-in, not the filter, says what the upstream read.

- A stream that did not ask for its usage is made to (the upstream reads
  `include_usage: true`), is charged its usage, and its caller sees the
  stream it expects: no usage event.
- The reservation is what the request allows itself, so k requests in
  flight cannot pass on an empty counter.
- A body no two readers agree on, too large, or in another encoding is
  refused before the upstream reads it.

Windows are an hour long, so nothing slides out."""
from __future__ import annotations

import http.client
import json
import threading
import time

import pytest

from chat_api import ChatApi
from harness import addr, ensure_room

LIMIT = 1000


def chat(**cost) -> dict:
    return {"instance": "llm", "routes": [{"name": "chat", "bounds": [
        {"name": "tokens", "per": "address", "limit": LIMIT, "window": "PT1H",
         "cost": {"response_json": "/usage/total_tokens", "unit": "tokens", **cost}}]}]}


@pytest.fixture
def api():
    a = ChatApi()
    yield a
    a.close()


def post(port: int, src: str, body, tokens: int = 10, headers: dict | None = None,
         chunks: list[bytes] | None = None):
    """One chat request from `src`: (status, headers, body)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20, source_address=(src, 0))
    try:
        h = {"content-type": "application/json", **(headers or {})}
        if chunks is not None:
            def pieces():
                for c in chunks:
                    time.sleep(0.05)
                    yield c
            conn.request("POST", f"/up/v1/chat/completions?tokens={tokens}", body=pieces(),
                         headers=h, encode_chunked=True)
        else:
            conn.request("POST", f"/up/v1/chat/completions?tokens={tokens}", body=data, headers=h)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def stat(e, name: str, want: int) -> int:
    """The instance stat `name` once it reads `want` (stats are flushed on
    a tick), or what it reads when the wait ends."""
    key = f"wasmcustom.ratebound.llm.{name}"
    return e.wait_value(lambda: e.stats().get(key, 0), lambda v: v == want)


MESSAGES = [{"role": "user", "content": "Say something."}]


def test_a_stream_that_did_not_ask_for_its_usage_is_made_to_and_does_not_see_it(envoy, api):
    e = envoy(chat(reserve=1), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(700)
    status, _, body = post(e.port, src, {"model": "m", "messages": MESSAGES, "stream": True})
    assert status == 200, body
    seen = api.seen[-1]
    # The upstream, reading as OpenAI-compatible servers read, was asked.
    assert seen.asked_usage, seen.body
    assert seen.error is None
    events = [x for x in body.split(b"\n\n") if x]
    assert len(events) == 11 and events[-1] == b"data: [DONE]", body
    assert b"total_tokens" not in body, "the caller did not ask for the usage"
    # Charged the usage it named: the next request's remaining says so.
    charged = len(seen.body) // 4 + 10
    status, h, body2 = post(e.port, src, {"model": "m", "messages": MESSAGES}, tokens=0)
    assert status == 200, body2
    reserve2 = -(-len(api.seen[-1].body) // 4)  # its prompt, reserved at admission (rounded up)
    assert int(h["ratelimit-remaining"]) == LIMIT - charged - reserve2
    assert stat(e, "usage_asked", 1) == 1
    # A caller that asked gets its usage event, and the body it sent.
    asked = {"model": "m", "messages": MESSAGES, "stream": True,
             "stream_options": {"include_usage": True}}
    status, _, body3 = post(e.port, src, asked)
    assert status == 200 and b"total_tokens" in body3
    assert json.loads(api.seen[-1].body) == asked


def test_no_request_field_or_concurrency_moves_a_token_off_its_counter(envoy, api):
    """Issue 37's table again, with the request read: each row plays a
    caller against a budget of 1,000 tokens (answers of 200) and counts
    what the API delivered to it. Before (issue 37): 40,000 without
    include_usage at reserve 1; 10,000 at reserve 100 with max_tokens 1,000;
    10,000 with 50 streams in flight."""
    rows = []

    def play(i, behaviour, cost, body, concurrent):
        e = envoy(chat(**cost), upstream_port=api.port)
        ensure_room(3600, 60)
        src = addr(720 + i)
        start = len(api.seen)
        statuses = []
        if concurrent:
            threads = [threading.Thread(target=lambda: statuses.append(
                post(e.port, src, body, tokens=200)[0])) for _ in range(concurrent)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        else:
            for _ in range(30):
                status = post(e.port, src, body, tokens=200)[0]
                statuses.append(status)
                if status != 200:
                    break
        delivered = sum(s.delivered for s in api.seen[start:])
        rows.append(f"{behaviour}: {delivered} tokens delivered, "
                    f"{statuses.count(200)} of {len(statuses)} admitted")
        e.stop()
        return delivered

    stream = {"model": "m", "messages": MESSAGES, "stream": True}
    # Sequential: the usage is asked for, so each answer is charged exactly;
    # what passes is the limit and at most the one answer that crossed it.
    d = play(0, "streams without include_usage, reserve 1", {"reserve": 1}, stream, 0)
    assert LIMIT - 200 <= d <= LIMIT + 200, rows
    # Reserving what the request allows: never past the limit.
    ceiling = {**stream, "max_tokens": 200}
    d = play(1, "streams without include_usage, max_tokens 200, reserve unset", {},
             ceiling, 0)
    assert LIMIT - 250 <= d <= LIMIT, rows
    d = play(2, "50 streams in flight, max_tokens 200, reserve unset", {}, ceiling, 50)
    assert 0 < d <= LIMIT, rows
    lying = {**stream, "max_tokens": 1, "max_completion_tokens": 200}
    d = play(3, "50 in flight, max_tokens 1 beside max_completion_tokens 200", {}, lying, 50)
    assert 0 < d <= LIMIT, rows
    print("\nbudget 1,000 tokens a window, answers of 200 tokens:\n  " + "\n  ".join(rows))


@pytest.mark.parametrize("body, headers, status, reason", [
    (b'{"model":"m","stream":false,"stream":true}', {}, 400, "ambiguous"),
    (b'{"model":"m","max_tokens":1,"max_tokens":5000}', {}, 400, "ambiguous"),
    (b'{"model":"m","stream":true,', {}, 400, "not_json"),
    ('{"model":"m","stream":true}'.encode("utf-16"), {}, 415, "not_utf8"),
    (b'{"model":"m","messages":"' + b"x" * 5000 + b'"}', {}, 413, "too_large"),
    (b'{"model":"m","stream":true}', {"content-encoding": "gzip"}, 415, "encoded"),
])
def test_a_body_read_with_doubt_is_refused_before_the_upstream_reads_it(
        envoy, api, body, headers, status, reason):
    e = envoy(chat(max_request_bytes=4096), upstream_port=api.port)
    got, h, answer = post(e.port, addr(740), body, headers=headers)
    assert got == status, answer
    assert json.loads(answer)["reason"] == reason
    # The upstream read no request whole (its headers may have gone on: the
    # body never followed).
    assert all(s.parsed is None for s in api.seen), [s.body for s in api.seen]
    assert stat(e, "requests_unclear", 1) == 1


def test_a_body_sent_in_pieces_is_read_whole_and_held_headers_get_its_length(envoy, api):
    body = json.dumps({"model": "m", "messages": MESSAGES, "stream": True}).encode()
    pieces = [body[:7], body[7:20], body[20:]]
    for hold in (False, True):
        e = envoy({**chat(), "hold_sign_in_headers": hold}, upstream_port=api.port)
        status, _, answer = post(e.port, addr(750 + hold), body, chunks=pieces)
        assert status == 200, answer
        seen = api.seen[-1]
        assert seen.asked_usage and b"total_tokens" not in answer
        if hold:
            # Held headers wait for the body: they carry its new length.
            assert seen.headers.get("content-length") == str(len(seen.body)), seen.headers
        else:
            # The headers went on before the body was rewritten: no length.
            assert "content-length" not in seen.headers, seen.headers
        e.stop()


def test_envoys_own_answer_before_the_body_is_not_held(envoy):
    """A route Envoy answers itself (a direct response) never hands the
    filter the body it waits for: the answer goes on at once (it hung
    until the client gave up before)."""
    e = envoy(chat())
    conn = http.client.HTTPConnection("127.0.0.1", e.port, timeout=5)
    try:
        conn.request("POST", "/direct", body=b'{"stream":true}',
                     headers={"content-type": "application/json"})
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"ok")
    finally:
        conn.close()


def test_a_budget_in_money_prices_tokens_in_and_out_by_model(envoy, api):
    """Issue 37, outcome 5: "$0.05 an hour per address" as one bound. Tokens
    in and out are read apart from the usage and priced by the request's
    model; each request reserves its ceiling and prompt at its model's
    prices, and is charged what its usage says at them."""
    prices = {"big": {"input": 2, "output": 10}, "small": {"input": 0.5, "output": 1}}
    e = envoy({"instance": "llm", "routes": [{"name": "chat", "bounds": [
        {"name": "money", "per": "address", "limit": 50000, "window": "PT1H",
         "cost": {"input_json": "/usage/prompt_tokens", "output_json": "/usage/completion_tokens",
                  "prices": prices, "unit": "microdollars"}}]}]}, upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(760)
    spent = 0
    for model, stream in [("big", False), ("small", True), ("big", True)]:
        body = {"model": model, "messages": MESSAGES, "max_tokens": 300, "stream": stream}
        status, _, answer = post(e.port, src, body, tokens=100)
        assert status == 200, answer
        seen = api.seen[-1]
        assert b"completion_tokens" not in answer or not stream  # the asked usage is hidden
        p = prices[model]
        spent += -(-(len(seen.body) // 4 * p["input"] + 100 * p["output"]) // 1)
        # The next request reserves its prompt and 300 out at its prices.
        probe = {"model": "small", "messages": MESSAGES, "max_tokens": 1}
        status, h, _ = post(e.port, src, probe, tokens=0)
        assert status == 200
        probe_body = api.seen[-1].body
        reserve = -(-(-(-len(probe_body) // 4) * 0.5 + 1 * 1) // 1)
        probe_cost = -(-(len(probe_body) // 4 * 0.5) // 1)
        assert int(h["ratelimit-remaining"]) == 50000 - spent - reserve, (model, h)
        spent += probe_cost
    # A request whose ceiling at "big" prices is over what is left: refused
    # with the wait until it fits.
    status, h, _ = post(e.port, src, {"model": "big", "messages": MESSAGES, "max_tokens": 4900})
    assert status == 429 and int(h["retry-after"]) > 0, h


def test_a_bound_per_model_counts_each_model_apart_whoever_asks(envoy, api):
    """Issue 37, outcome 5: `per: model` keys a bound by the request body's
    `model`, read once; a body naming it twice is refused before the
    upstream reads it."""
    e = envoy({"instance": "llm", "routes": [{"name": "chat", "bounds": [
        {"name": "tokens", "per": "address", "limit": 100000, "window": "PT1H",
         "cost": {"response_json": "/usage/total_tokens"}},
        {"name": "calls", "per": "model", "limit": 2, "window": "PT1H"}]}]},
        upstream_port=api.port)
    ensure_room(3600, 30)
    statuses = [post(e.port, addr(770 + i), {"model": m, "messages": MESSAGES})[0]
                for i, m in enumerate(["a", "a", "a", "b"])]
    assert statuses == [200, 200, 429, 200]
    status, _, answer = post(e.port, addr(780), b'{"model":"b","model":"c"}')
    assert status == 400 and json.loads(answer)["reason"] == "ambiguous"
