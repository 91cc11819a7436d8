"""Cost bounds under load and under attack, in a real Envoy in front of a
scripted stand-in for an OpenAI-style API (plain JSON and server-sent
events, written byte by byte, chunk by chunk, reset at will): a concurrent
burst stays within the stated over-admission; event-stream chunks reach the
client unchanged and unheld; a cut stream, a body over its cap or an answer
without usage keeps its reservation and is counted; and the ways a caller
or an answer might move a request off its counter end as docs/cost.md says.

The charge of earlier requests is read from the RateLimit-Remaining of a
next request whose reservation is taken at admission: remaining = limit −
charged − reserve. Windows are an hour long, so nothing slides out."""
from __future__ import annotations

import gzip
import http.client
import json
import socket
import statistics
import struct
import threading
import time

import pytest

from harness import addr, burst, ensure_room, request

LIMIT, RESERVE = 1000, 100
UNKNOWN = "wasmcustom.ratebound.llm.costs_unknown"
GATE_S = 5.0  # the longest an answer waits for the client (bounded)


def tokens(limit: int = LIMIT, reserve: int = RESERVE, **cost) -> dict:
    return {"instance": "llm", "routes": [{"name": "chat", "bounds": [
        {"name": "tokens", "per": "address", "limit": limit, "window": "PT1H",
         "cost": {"response_json": "/usage/total_tokens", "reserve": reserve,
                  "unit": "tokens", **cost}}]}]}


def sse(obj) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def delta(text: str) -> bytes:
    return sse({"choices": [{"delta": {"content": text}}], "usage": None})


def usage(n) -> bytes:
    return sse({"choices": [], "usage": {"total_tokens": n}})


DONE = b"data: [DONE]\n\n"


# --------------------------------------------------------------------------
# The upstream: answers written as the test scripts them
# --------------------------------------------------------------------------
class Answer:
    """One answer on one upstream connection (closed after it)."""

    def __init__(self, sock: socket.socket, request: bytes = b"") -> None:
        self.sock = sock
        self.request = request  # the request's head, as it came
        self.chunked = False

    def head(self, content_type: str, length: int | None = None, status: int = 200,
             extra: tuple[str, ...] = ()) -> None:
        lines = [f"HTTP/1.1 {status} OK", f"content-type: {content_type}", "connection: close",
                 *extra]
        if length is None:
            self.chunked = True
            lines.append("transfer-encoding: chunked")
        else:
            lines.append(f"content-length: {length}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())

    def send(self, data: bytes) -> None:
        if self.chunked:
            data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
        self.sock.sendall(data)

    def end(self) -> None:
        if self.chunked:
            self.sock.sendall(b"0\r\n\r\n")

    def whole(self, content_type: str, body: bytes) -> None:
        self.head(content_type, len(body))
        self.send(body)

    def reset(self) -> None:
        """Abort the connection (RST, not FIN)."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def wait_closed(self, timeout: float = GATE_S) -> bool:
        """Until Envoy closes this connection (bounded); True if it did."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except OSError:
            return True


class ScriptedApi:
    """A loopback HTTP/1.1 upstream on a free port. `on(prefix, fn)`: a
    request whose path starts with prefix is answered by fn(Answer, path).
    `/up/json/<n>` answers a JSON body whose usage is n tokens."""

    def __init__(self) -> None:
        self.hits = 0
        self._lock = threading.Lock()
        self._routes: dict[str, object] = {"/up/json/": self._json}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4096)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def on(self, prefix: str, fn) -> None:
        self._routes[prefix] = fn

    @staticmethod
    def _json(a: Answer, path: str) -> None:
        n = int(path.rsplit("/", 1)[1])
        a.whole("application/json", json.dumps(
            {"choices": [{"text": "..."}], "usage": {"total_tokens": n}}).encode())

    def _accept(self) -> None:
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s: socket.socket) -> None:
        s.settimeout(10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            buf = b""
            while b"\r\n\r\n" not in buf:
                data = s.recv(65536)
                if not data:
                    return
                buf += data
            path = buf.split(b" ", 2)[1].decode()
            with self._lock:
                self.hits += 1
            prefix = max((p for p in self._routes if path.startswith(p)), key=len, default=None)
            if prefix is None:
                Answer(s).whole("text/plain", b"no such route\n")
            else:
                self._routes[prefix](Answer(s, buf), path)
        except OSError:
            pass
        finally:
            try:
                s.close()
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes accept()
        except OSError:
            pass
        self.sock.close()


@pytest.fixture
def api():
    a = ScriptedApi()
    yield a
    a.close()


def gated(pieces: list[bytes], content_type: str = "text/event-stream"):
    """An answer that sends pieces[i] as one chunk, then waits (at most
    GATE_S) until the client has read it before sending the next: an answer
    held by the filter never gets its next piece out. Returns (fn, gates,
    sent): gates[i] is set by the client, sent[i] is when piece i was about
    to be sent."""
    gates = [threading.Event() for _ in pieces]
    sent: list[float] = []

    def fn(a: Answer, path: str) -> None:
        a.head(content_type)
        for piece, gate in zip(pieces, gates):
            sent.append(time.monotonic())
            a.send(piece)
            if not gate.wait(GATE_S):
                a.reset()  # the client never saw it
                return
        a.end()

    return fn, gates, sent


def read_gated(port: int, path: str, src: str, pieces: list[bytes], gates, *,
               hang_up_after: int | None = None):
    """GET path, reading the body as it comes; once the first i+1 pieces
    have arrived whole, gates[i] is set. hang_up_after=i: close the
    connection right after piece i. Returns (status, headers, body, times):
    times[i] is when piece i was read."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(src, 0))
    times: list[float] = []
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        headers = {k.lower(): v for k, v in resp.getheaders()}
        got = b""
        want = 0
        for i, piece in enumerate(pieces):
            want += len(piece)
            while len(got) < want:
                data = resp.read1(65536)
                if not data:
                    break
                got += data
            if len(got) < want:
                break
            times.append(time.monotonic())
            if hang_up_after == i:
                conn.sock.shutdown(socket.SHUT_RDWR)
                return resp.status, headers, got, times
            gates[i].set()
        try:
            got += resp.read()
        except http.client.IncompleteRead as e:
            got += e.partial  # the answer was cut: what came is the body
        except OSError:
            pass
        return resp.status, headers, got, times
    finally:
        conn.close()


def remaining_after(e, src: str) -> int:
    """RateLimit-Remaining of a next request of `src` (admitted: its
    reservation is taken; its answer costs 0)."""
    status, h, _ = request(e.port, "/up/json/0", src=src)
    assert status == 200, (status, h)
    return int(h["ratelimit-remaining"])


def unknown_costs(e, want: int) -> int:
    return e.wait_value(lambda: e.stats().get(UNKNOWN, 0), lambda v: v == want)


# --------------------------------------------------------------------------
# A burst of one caller
# --------------------------------------------------------------------------
def test_a_burst_of_50_admits_what_its_reservations_fit_and_charges_every_answer(envoy, api):
    """50 requests of one caller at once, each answer held until every
    admitted one has arrived (so all are in flight together) and then
    costing 300: limit / reserve of them are admitted, the others refused
    without reaching the upstream, and afterwards the caller is charged
    every answer in full, which is within the stated over-admission
    (limit + k × (cost − reserve))."""
    limit, reserve, cost, n = 1000, 100, 300, 50
    admitted = limit // reserve  # reservations that fit at once: 10
    all_in = threading.Event()
    count = {"n": 0}
    lock = threading.Lock()

    def held(a: Answer, path: str) -> None:
        with lock:
            count["n"] += 1
            if count["n"] == admitted:
                all_in.set()
        all_in.wait(GATE_S)
        a.whole("application/json", json.dumps({"usage": {"total_tokens": cost}}).encode())

    api.on("/up/held", held)
    # `audit`: a shadow bound of the whole route, with the same cost, that
    # never refuses: its RateLimit-Remaining, seen by another caller, reads
    # the charge the burst left (limit 3,500 > anything the burst can charge).
    cfg = tokens(limit, reserve)
    cfg["routes"][0]["bounds"].append(
        {"name": "audit", "per": "route", "limit": 3500, "window": "PT1H", "shadow": True,
         "cost": {"response_json": "/usage/total_tokens", "reserve": reserve}})
    e = envoy(cfg, upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(400)
    statuses = burst(e.port, n, n, src_fn=lambda i: src, path="/up/held", timeout=20)
    assert statuses.count(200) == admitted and statuses.count(429) == n - admitted, statuses
    assert api.hits == admitted
    # They were in flight together: every admitted one reached the upstream
    # before any was answered.
    assert all_in.is_set()
    # The caller is over its limit now: refused (a refusal charges nothing).
    status, h, _ = request(e.port, "/up/json/0", src=src)
    assert status == 429 and int(h["ratelimit-remaining"]) == 0, (status, h)
    # Another caller sees the route's audit bound (its own tokens bound has
    # 900 left, more): 3,500 − what the burst charged − its reservation.
    status, h, _ = request(e.port, "/up/json/0", src=addr(401))
    assert status == 200 and int(h["ratelimit-limit"]) == 3500, (status, h)
    charged = 3500 - reserve - int(h["ratelimit-remaining"])
    # Every admitted answer in full (3,000): over the limit by 2,000, which
    # is the stated bound with k = 10 in flight: k × (cost − reserve).
    assert charged == admitted * cost, charged
    assert charged - limit <= admitted * (cost - reserve)
    assert e.stats().get(UNKNOWN, 0) == 0


# --------------------------------------------------------------------------
# Event streams pass unheld and unchanged
# --------------------------------------------------------------------------
def test_event_stream_chunks_pass_unheld_and_unchanged_and_the_last_usage_is_charged(envoy, api):
    """The upstream sends each event only once the client has read the one
    before: a filter that held any chunk would stall the stream (the
    upstream gives up after 5 s and resets it). Every chunk arrives byte for
    byte, and the final usage is charged. The per-chunk delay (upstream
    send to client read) is printed with and without the filter."""
    pieces = [delta(f"word{i} ") for i in range(20)] + [usage(60), DONE]
    e = envoy(tokens(), upstream_port=api.port)
    plain = envoy(None, http_filters=[], upstream_port=api.port)
    ensure_room(3600, 30)
    delays = {}
    for name, env, src in (("with the filter", e, addr(410)), ("without", plain, addr(411))):
        fn, gates, sent = gated(pieces)
        api.on("/up/sse/stream", fn)
        status, h, body, times = read_gated(env.port, "/up/sse/stream", src, pieces, gates)
        assert status == 200 and body == b"".join(pieces), (name, status, body)
        assert len(times) == len(pieces) and len(sent) == len(pieces), (name, times, sent)
        delays[name] = [1000 * (t - s) for t, s in zip(times, sent)]
    print("per-chunk delay, upstream send to client read (ms): " + "; ".join(
        f"{k}: median {statistics.median(v):.2f}, max {max(v):.2f}" for k, v in delays.items()))
    # Reserved 100, charged 60: a next request sees 1000 − 60 − 100.
    assert remaining_after(e, addr(410)) == LIMIT - 60 - RESERVE
    assert unknown_costs(e, 0) == 0


# --------------------------------------------------------------------------
# A cost that never comes keeps its reservation
# --------------------------------------------------------------------------
def test_a_reset_stream_keeps_its_reservation_and_is_counted_unknown(envoy, api):
    """The upstream sends the headers and part of a JSON body, then resets
    the connection: the client gets a cut answer, the request keeps its
    reservation (not the usage of the part it saw, not nothing) and
    `costs_unknown` counts it."""
    part = b'{"usage":{"total_tokens":5},"choices":[{"text":"'

    def cut(a: Answer, path: str) -> None:
        a.head("application/json", length=len(part) + 500)
        a.send(part)
        if gate[0].wait(GATE_S):  # the client has the headers and the part
            a.reset()

    gate = [threading.Event()]
    api.on("/up/cut", cut)
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(420)
    status, _, body, _ = read_gated(e.port, "/up/cut", src, [part], gate)
    assert status == 200 and body == part, (status, body)
    assert remaining_after(e, src) == LIMIT - RESERVE - RESERVE
    assert unknown_costs(e, 1) == 1


def test_no_json_answer_is_too_large_to_count(envoy, api):
    """Issue 37: an answer inflated past the old cap (1 MiB at most) by the
    caller's own `logprobs` and `top_logprobs: 20` named no cost, and its
    caller paid its reservation only. A JSON answer is now read as it
    passes, whatever its size, keeping none of it: a 1.5 MB answer's usage
    is charged (`max_body_bytes`, still accepted, reads no less)."""
    entry = {"token": "ok", "logprob": -0.01,
             "top_logprobs": [{"token": f"t{k}", "logprob": -1.0} for k in range(20)]}
    body = json.dumps({"choices": [{"message": {"content": "ok"},
                                    "logprobs": {"content": [entry] * 2100}}],
                       "usage": {"total_tokens": 250}}).encode()
    assert len(body) > 1_500_000
    api.on("/up/big", lambda a, p: a.whole("application/json", body))
    e = envoy(tokens(max_body_bytes=256), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(430)
    status, _, got = request(e.port, "/up/big", src=src)
    assert status == 200 and got == body
    assert remaining_after(e, src) == LIMIT - 250 - RESERVE
    assert unknown_costs(e, 0) == 0


def test_an_event_stream_without_usage_keeps_its_reservation(envoy, api):
    """A stream whose client did not ask for include_usage names no usage:
    the reservation is its charge, and it is counted unknown."""
    stream = delta("Hi") + delta("!") + DONE
    api.on("/up/sse/nousage", lambda a, p: a.whole("text/event-stream", stream))
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(440)
    status, _, got = request(e.port, "/up/sse/nousage", src=src)
    assert status == 200 and got == stream
    assert remaining_after(e, src) == LIMIT - RESERVE - RESERVE
    assert unknown_costs(e, 1) == 1


# --------------------------------------------------------------------------
# Moving a request off its counter
# --------------------------------------------------------------------------
def test_a_later_smaller_usage_wins_as_documented(envoy, api):
    """An event stream names usage 500, then a later event names 5: the
    last event that has it wins (docs/cost.md), so 5 is charged — the
    stream itself decides its cost, and the filter does not take the
    largest. (Events without usage in between change nothing.)"""
    stream = delta("a") + usage(500) + delta("b") + sse({"usage": None}) + usage(5) + DONE
    api.on("/up/sse/twice", lambda a, p: a.whole("text/event-stream", stream))
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(450)
    assert request(e.port, "/up/sse/twice", src=src)[0] == 200
    assert remaining_after(e, src) == LIMIT - 5 - RESERVE
    assert unknown_costs(e, 0) == 0


def test_a_malformed_or_negative_usage_neither_erases_nor_credits(envoy, api):
    """A usage that is not a non-negative number is no cost (docs/cost.md):
    after a good usage (300), a later `"lots"` and a later −1,000 leave it
    the last that has one, so 300 is charged — the stream neither gets back
    to its reservation nor credits its caller; a JSON answer whose only
    usage is −1,000 names no cost: it keeps its reservation and is counted."""
    stream = (usage(300) + sse({"usage": {"total_tokens": "lots"}}) + usage(-1000)
              + sse({"usage": {"total_tokens": None}}) + DONE)
    api.on("/up/sse/bad", lambda a, p: a.whole("text/event-stream", stream))
    api.on("/up/json/neg", lambda a, p: a.whole(
        "application/json", json.dumps({"usage": {"total_tokens": -1000}}).encode()))
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(520)
    assert request(e.port, "/up/sse/bad", src=src)[0] == 200
    assert remaining_after(e, src) == LIMIT - 300 - RESERVE
    src = addr(521)
    assert request(e.port, "/up/json/neg", src=src)[0] == 200
    assert remaining_after(e, src) == LIMIT - RESERVE - RESERVE
    assert unknown_costs(e, 1) == 1


def test_a_number_split_across_chunks_is_read_whole(envoy, api):
    """A usage split mid-number and mid-prefix across chunks, each chunk
    forwarded to the client before the next is sent (`"total_tokens": 3` |
    `00}`): the whole number is charged, 300, not 3 and not nothing — in a
    JSON body and in an event stream."""
    cases = {
        "json": ("application/json",
                 [b'{"choices":[{"text":"hi"}],"usage":{"total_tok', b'ens": 3', b"00}}"]),
        "sse": ("text/event-stream",
                [delta("hi") + b"da", b'ta: {"choices":[],"usage":{"total_tokens": 3',
                 b"00}}\n", b"\n" + DONE]),
    }
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    for i, (kind, (ctype, pieces)) in enumerate(cases.items()):
        fn, gates, _ = gated(pieces, ctype)
        api.on(f"/up/split/{kind}", fn)
        src = addr(460 + i)
        status, _, body, times = read_gated(e.port, f"/up/split/{kind}", src, pieces, gates)
        assert status == 200 and body == b"".join(pieces) and len(times) == len(pieces), kind
        assert remaining_after(e, src) == LIMIT - 300 - RESERVE, kind
    assert unknown_costs(e, 0) == 0


def test_a_content_type_that_lies_reads_no_cost_and_keeps_the_reservation(envoy, api):
    """An event stream sent as application/json is no JSON document, and a
    JSON body sent as text/event-stream has no `data:` line: neither names
    a cost, whatever small usage it carries, so each keeps its reservation
    and is counted unknown."""
    stream = delta("a") + usage(5) + DONE
    plain = json.dumps({"usage": {"total_tokens": 5}}).encode()
    api.on("/up/lie/json", lambda a, p: a.whole("application/json", stream))
    api.on("/up/lie/sse", lambda a, p: a.whole("text/event-stream", plain))
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    for i, path in enumerate(("/up/lie/json", "/up/lie/sse")):
        src = addr(470 + i)
        assert request(e.port, path, src=src)[0] == 200
        assert remaining_after(e, src) == LIMIT - RESERVE - RESERVE, path
    assert unknown_costs(e, 2) == 2


def test_a_caller_asking_for_a_compressed_answer_is_charged_its_usage(envoy, api):
    """A caller sends `accept-encoding: gzip` to an API that compresses
    when asked, as real ones do: compressed bytes would name no cost and
    the caller would pay its reservation (100) only. The route reads its
    cost in the body, so the filter asks the upstream for an answer that
    is not compressed: the usage (300) is charged."""
    body = json.dumps({"usage": {"total_tokens": 300}}).encode()
    asked = []

    def fn(a: Answer, path: str) -> None:
        asked.append(a.request.lower())
        if b"gzip" in a.request.lower():
            packed = gzip.compress(body)
            a.head("application/json", len(packed), extra=("content-encoding: gzip",))
            a.send(packed)
        else:
            a.whole("application/json", body)

    api.on("/up/gz", fn)
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(530)
    status, h, got = request(e.port, "/up/gz", src=src, headers={"accept-encoding": "gzip"})
    assert status == 200 and "content-encoding" not in h, h
    assert json.loads(got)["usage"]["total_tokens"] == 300
    assert b"accept-encoding: identity" in asked[0], asked[0]
    assert remaining_after(e, src) == LIMIT - 300 - RESERVE


def test_a_caller_hanging_up_before_the_usage_keeps_its_reservation(envoy, api):
    """The caller reads the first event of its stream and hangs up before
    the usage comes: the stream is cut, the request keeps its reservation
    (it is not let off with nothing) and `costs_unknown` counts it."""
    pieces = [delta("a"), delta("b"), usage(900), DONE]
    gone = threading.Event()

    def fn(a: Answer, path: str) -> None:
        a.head("text/event-stream")
        a.send(pieces[0])
        gone.wait(GATE_S)
        a.wait_closed()  # Envoy drops the upstream once the client is gone
        try:
            for p in pieces[1:]:
                a.send(p)
            a.end()
        except OSError:
            pass

    api.on("/up/sse/hangup", fn)
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(480)
    status, _, body, _ = read_gated(e.port, "/up/sse/hangup", src, pieces,
                                    [threading.Event() for _ in pieces], hang_up_after=0)
    gone.set()
    assert status == 200 and body == pieces[0]
    assert unknown_costs(e, 1) == 1
    assert remaining_after(e, src) == LIMIT - RESERVE - RESERVE


def test_a_stream_cut_after_a_small_usage_keeps_its_reservation(envoy, api):
    """A stream names usage 1, then is reset before it ends: a cut stream
    keeps its reservation (docs/cost.md), so the small usage it named on
    the way is not what is charged."""
    piece = delta("a") + usage(1)

    def fn(a: Answer, path: str) -> None:
        a.head("text/event-stream")
        a.send(piece)
        if gate[0].wait(GATE_S):
            a.reset()

    gate = [threading.Event()]
    api.on("/up/sse/cut", fn)
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(490)
    status, _, body, _ = read_gated(e.port, "/up/sse/cut", src, [piece], gate)
    assert status == 200 and body == piece, (status, body)
    assert remaining_after(e, src) == LIMIT - RESERVE - RESERVE
    assert unknown_costs(e, 1) == 1


# --------------------------------------------------------------------------
# Event streams as their format allows them to be written
# --------------------------------------------------------------------------
def test_an_event_stream_whose_content_type_is_not_lowercase_is_read_as_one(envoy, api):
    """`Text/Event-Stream; charset=utf-8` is text/event-stream: its last
    usage (300) is charged."""
    stream = delta("a") + usage(300) + DONE
    api.on("/up/sse/case", lambda a, p: a.whole("Text/Event-Stream; charset=utf-8", stream))
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(500)
    assert request(e.port, "/up/sse/case", src=src)[0] == 200
    assert remaining_after(e, src) == LIMIT - 300 - RESERVE


def test_an_event_whose_data_spans_two_lines_is_read_as_one_event(envoy, api):
    """An event of two `data:` lines is one event whose data is the lines
    joined by a newline: here a JSON document naming usage 300, charged."""
    stream = (delta("a") + b'data: {"choices": [],\ndata:  "usage": {"total_tokens": 300}}\n\n'
              + DONE)
    api.on("/up/sse/lines", lambda a, p: a.whole("text/event-stream", stream))
    e = envoy(tokens(), upstream_port=api.port)
    ensure_room(3600, 30)
    src = addr(510)
    assert request(e.port, "/up/sse/lines", src=src)[0] == 200
    assert remaining_after(e, src) == LIMIT - 300 - RESERVE


# --------------------------------------------------------------------------
# Issue 37: the caller's choices, tokens received in one window
# --------------------------------------------------------------------------
TOKENS_PER_ANSWER = 200


def one_token_events(n: int) -> list[bytes]:
    """An answer of n tokens, one an event, as OpenAI-style APIs stream."""
    return [delta(f"t{i % 10}") for i in range(n)]


def test_no_caller_choice_moves_a_token_off_its_counter(envoy, api):
    """Issue 37's table, as an attacker plays it against a budget of 1,000
    tokens a window per address: each caller sends answers of 200 tokens
    until refused (at most 30 requests), and the test counts the tokens it
    received. Before, a stream without `include_usage` (reserve 1: 200
    answers, 40,000 tokens), or one hung up on just before its usage event
    (20×), or a JSON answer inflated past the body cap (10×) was charged
    its reservation. Now each is charged what it delivered, so what a
    caller receives stays within the limit plus one answer beyond its
    reservation (the stated over-admission with one request in flight)."""
    usage_evt = usage(TOKENS_PER_ANSWER + 20)  # the prompt too
    api.on("/up/llm/nousage", lambda a, p: a.whole(
        "text/event-stream", b"".join(one_token_events(TOKENS_PER_ANSWER)) + DONE))
    entry = {"token": "t", "logprob": -0.01,
             "top_logprobs": [{"token": f"t{k}", "logprob": -1.0} for k in range(20)]}
    inflated = json.dumps({"choices": [{"message": {"content": "t" * 4 * TOKENS_PER_ANSWER},
                                        "logprobs": {"content": [entry] * 2100}}],
                           "usage": {"total_tokens": TOKENS_PER_ANSWER}}).encode()
    api.on("/up/llm/inflated", lambda a, p: a.whole("application/json", inflated))
    hangups = []

    def hung_up(a: Answer, path: str) -> None:
        # Every token, then the usage only once the client is still there.
        a.head("text/event-stream")
        a.send(b"".join(one_token_events(TOKENS_PER_ANSWER)))
        gone = hangups[-1]
        gone.wait(GATE_S)
        a.wait_closed()
        try:
            a.send(usage_evt + DONE)
            a.end()
        except OSError:
            pass

    api.on("/up/llm/hangup", hung_up)
    rows = []
    for i, (behaviour, reserve, path) in enumerate([
            ("streams without include_usage, reserve 1", 1, "/up/llm/nousage"),
            ("streams without include_usage, reserve 100", 100, "/up/llm/nousage"),
            ("reads every token, hangs up before the usage event, reserve 1", 1,
             "/up/llm/hangup"),
            ("a JSON answer inflated to 1.5 MB by logprobs, reserve 100", 100,
             "/up/llm/inflated")]):
        e = envoy(tokens(reserve=reserve), upstream_port=api.port)
        ensure_room(3600, 60)
        src = addr(600 + i)
        received = admitted = 0
        for _ in range(30):
            if path.endswith("hangup"):
                gone = threading.Event()
                hangups.append(gone)
                whole = b"".join(one_token_events(TOKENS_PER_ANSWER))
                conn = http.client.HTTPConnection("127.0.0.1", e.port, timeout=10,
                                                  source_address=(src, 0))
                conn.request("GET", path)
                resp = conn.getresponse()
                if resp.status != 200:
                    conn.close()
                    gone.set()
                    break
                got = b""
                while len(got) < len(whole):
                    data = resp.read1(65536)
                    if not data:
                        break
                    got += data
                conn.sock.shutdown(socket.SHUT_RDWR)
                conn.close()
                gone.set()
                received += got.count(b'"content"')
                time.sleep(0.3)  # the hang-up reaches the filter (on_done)
            else:
                status, _, body = request(e.port, path, src=src)
                if status != 200:
                    break
                received += (TOKENS_PER_ANSWER if path.endswith("inflated")
                             else body.count(b'"content"'))
            admitted += 1
        rows.append(f"{behaviour}: {received} tokens received in {admitted} answers")
        assert received <= LIMIT + TOKENS_PER_ANSWER - reserve, rows[-1]
        assert received >= LIMIT - TOKENS_PER_ANSWER, rows[-1]
    print("\nbudget 1,000 tokens a window, answers of 200 tokens:\n  " + "\n  ".join(rows))
