"""A stand-in for an OpenAI-compatible chat API, reading its requests as such
servers do: the body parsed whole by Python's own JSON parser, then
validated by pydantic in its default (lax) mode into a request model shaped
like vLLM's (`stream`, `stream_options.include_usage`, `max_tokens`,
`max_completion_tokens`). It is the oracle of what the upstream read, not
the filter's reading of it.

Each answer has `?tokens=N` completion tokens (within the request's
ceiling), one an SSE event when streamed, the usage event only when the
request asked for it (as OpenAI sends it), and its usage's `total_tokens`
counts the prompt (`prompt_tokens`: the body's bytes at 4 a token). What it
delivered is recorded per request: the test's count of what passed.
"""
from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, ValidationError


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None


class Seen:
    """One request as the stand-in read it."""

    def __init__(self, headers: dict, body: bytes, parsed: ChatRequest | None,
                 error: str | None) -> None:
        self.headers = headers
        self.body = body
        self.parsed = parsed
        self.error = error
        self.delivered = 0  # completion tokens written to the socket

    @property
    def asked_usage(self) -> bool:
        p = self.parsed
        return bool(p and p.stream and p.stream_options and p.stream_options.include_usage)


def _event(obj) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


class ChatApi:
    """The server, on a free port of 127.0.0.1 (closed by `close`)."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _body(self) -> bytes:
                if self.headers.get("transfer-encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("content-length") or 0))

            def do_POST(self):
                body = self._body()
                headers = {k.lower(): v for k, v in self.headers.items()}
                parsed, error = None, None
                try:
                    parsed = ChatRequest.model_validate(json.loads(body))
                    if parsed.stream_options is not None and not parsed.stream:
                        error = "stream_options is only allowed when stream is true"
                except (ValueError, ValidationError) as e:
                    error = str(e).splitlines()[0]
                seen = Seen(headers, body, parsed, error)
                with api.lock:
                    api.seen.append(seen)
                if error:
                    data = json.dumps({"error": {"message": error}}).encode()
                    self.send_response(400)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                q = parse_qs(urlsplit(self.path).query)
                want = int(q.get("tokens", ["10"])[0])
                # vLLM's rule: max_completion_tokens, else max_tokens.
                ceiling = parsed.max_completion_tokens or parsed.max_tokens
                n = min(want, ceiling) if ceiling else want
                prompt = len(body) // 4
                usage = {"prompt_tokens": prompt, "completion_tokens": n,
                         "total_tokens": prompt + n}
                try:
                    if parsed.stream:
                        self._stream(seen, n, usage)
                    else:
                        self._json(seen, n, usage)
                except OSError:
                    pass  # the caller hung up

            def _json(self, seen: Seen, n: int, usage: dict) -> None:
                data = json.dumps({"choices": [{"index": 0, "message": {
                    "role": "assistant", "content": "abcd" * n}}], "usage": usage}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                seen.delivered = n

            def _stream(self, seen: Seen, n: int, usage: dict) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                include = seen.asked_usage
                extra = {"usage": None} if include else {}

                def chunk(data: bytes) -> None:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()

                for i in range(n):
                    chunk(_event({"choices": [{"index": 0, "delta": {"content": f"t{i % 10}"}}],
                                  **extra}))
                    seen.delivered += 1
                if include:
                    chunk(_event({"choices": [], "usage": usage}))
                chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
