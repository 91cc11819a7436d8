"""Sign-in requests an attacker shapes to move an attempt off its account's
counter, each read by a common server as an attempt at the account: used by
tests/e2e/test_signin_attacks.py (what the filter must do with each) and by
bench/signin_attacks.py (how many each got through, on any module).

Every shape is built for an account the attacker is after (its budget
already used up) and, for decoys, a fresh name; a shape's `send` is one
request on a fresh connection from a chosen source address, its headers
exactly as given (repeated ones too)."""
from __future__ import annotations

import http.client
import json
import unicodedata
from dataclasses import dataclass, field
from typing import Callable

from harness import note_request

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"

# The routes of SIGNIN (path prefixes under the test upstream's /up).
JSON_PATH, FORM_PATH, HEADER_PATH = "/up/login", "/up/form-login", "/up/hdr-login"
MAX_BODY = 16384  # the routes' max_body_bytes (the default)


def config(domain: str = "attack", *, limit: int = 5, key_secret: dict | None = None,
           on_error: str = "deny") -> dict:
    """Three sign-in routes, one per carrier, each 5 attempts a minute per
    account for the installation (and a generous per-address node bound)."""
    def route(name, prefix, account):
        return {"name": name, "match": {"path_prefix": prefix, "methods": ["POST"]},
                "account": account,
                "bounds": [
                    {"name": "per_address", "per": "address", "limit": 10000,
                     "window": "PT1M"},
                    {"name": "attempts", "per": "account", "scope": "installation",
                     "limit": limit, "window": "PT1M"}]}
    service = {"cluster": "rls", "domain": domain, "timeout_ms": 2000, "on_error": on_error}
    if key_secret is not None:
        service["key_secret"] = key_secret
    return {"instance": "attack", "rate_limit_service": service, "routes": [
        route("login", JSON_PATH, {"json": "username"}),
        route("form_login", FORM_PATH, {"form": "username"}),
        route("hdr_login", HEADER_PATH, {"header": "x-login"}),
    ]}


@dataclass
class Req:
    path: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def send(self, port: int, src: str = "127.0.0.1", timeout: float = 10.0):
        """(status, body) of the request, sent as built."""
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                          source_address=(src, 0))
        try:
            conn.putrequest("POST", self.path, skip_accept_encoding=True)
            for k, v in self.headers:
                conn.putheader(k, v)
            conn.putheader("content-length", str(len(self.body)))
            conn.endheaders(self.body)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()
            note_request()


def plain(account: str) -> Req:
    """The honest sign-in: the attempts that use the account's budget up."""
    return Req(JSON_PATH, [("content-type", JSON)],
               json.dumps({"username": account, "password": "x"}).encode())


def _json(obj) -> bytes:
    return json.dumps(obj).encode()


@dataclass
class Shape:
    name: str
    # (account, decoy) -> the request
    build: Callable[[str, str], Req]
    # What the filter answers now: the refusal it explains, or 429 when the
    # shape is read as the account itself (whose budget is used up).
    status: int
    # The account it is tried on: "accented" (NFD differs from NFC),
    # "ascii" (sent in a header: latin-1 on the wire) or "numeric" (digits,
    # for a JSON number instead of the string).
    kind: str = "accented"


def account_for(shape: Shape, tag: int) -> str:
    """A fresh account for a trial of `shape` (`tag` unique to the trial)."""
    return {"numeric": f"{700000 + tag}", "ascii": f"mallory-{tag}"}.get(
        shape.kind, f"josé-{tag}")


def _fold_spellings():
    """Unicode spellings of one account (NFKC + case folding)."""
    def fullwidth(s):
        return "".join(chr(ord(c) - 0x21 + 0xFF01) if "!" <= c <= "~" else c for c in s)

    def bold(s):
        return "".join(chr(ord(c) - ord("a") + 0x1D41A) if "a" <= c <= "z" else c for c in s)

    return [
        Shape("unicode: NFD of an NFC name",
              lambda a, d: plain(unicodedata.normalize("NFD", a)), 429),
        Shape("unicode: fullwidth letters", lambda a, d: plain(fullwidth(a)), 429),
        # MariaDB's default collation weighs every such letter as any emoji,
        # MySQL 8's as the letter: no key counts it right (issue 36).
        Shape("unicode: mathematical bold", lambda a, d: plain(bold(a)), 400),
        Shape("collation: a look-alike letter (MySQL 8, MariaDB sign it in)",
              lambda a, d: plain(a.replace("o", "ø").replace("s", "ś")), 429),
        Shape("unicode: upper case", lambda a, d: plain(a.upper()), 429),
    ]


# Shapes that moved an attempt off its account's counter (each admitted as
# a fresh attempt by the filter before this rule), with what it gets now.
SHAPES: list[Shape] = [
    Shape("body padded past max_body_bytes",
          lambda a, d: Req(JSON_PATH, [("content-type", JSON)],
                           _json({"username": a, "password": "x"}) + b" " * (MAX_BODY + 10)),
          413),
    Shape("JSON number instead of a string",
          lambda a, d: Req(JSON_PATH, [("content-type", JSON)],
                           b'{"username": %s, "password": "x"}' % a.encode()),
          400, kind="numeric"),
    Shape("UTF-8 byte-order mark",
          lambda a, d: Req(JSON_PATH, [("content-type", JSON)],
                           b"\xef\xbb\xbf" + _json({"username": a, "password": "x"})),
          400),
    Shape("UTF-16 JSON",
          lambda a, d: Req(JSON_PATH, [("content-type", "application/json; charset=utf-16")],
                           json.dumps({"username": a, "password": "x"}).encode("utf-16")),
          415),
    Shape("UTF-16 JSON, no charset",
          lambda a, d: Req(JSON_PATH, [("content-type", JSON)],
                           json.dumps({"username": a, "password": "x"}).encode("utf-16-le")),
          400),
    Shape("form body on the JSON route",
          lambda a, d: Req(JSON_PATH, [("content-type", FORM)],
                           f"username={a}&password=x".encode()),
          415),
    Shape("JSON on the form route",
          lambda a, d: Req(FORM_PATH, [("content-type", JSON)],
                           _json({"username": a, "password": "x"})),
          415),
    Shape("multipart on the form route",
          lambda a, d: Req(FORM_PATH, [("content-type", "multipart/form-data; boundary=b")],
                           (f'--b\r\nContent-Disposition: form-data; name="username"\r\n\r\n'
                            f'{a}\r\n--b--\r\n').encode()),
          415),
    Shape("gzip-encoded body",
          lambda a, d: Req(JSON_PATH, [("content-type", JSON), ("content-encoding", "gzip")],
                           __import__("gzip").compress(_json({"username": a}))),
          415),
    Shape("the account only in the query string",
          lambda a, d: Req(f"{JSON_PATH}?username={_q(a)}", [("content-type", JSON)],
                           _json({"password": "x"})),
          429),
    Shape("decoy: query string names the account, form body a decoy",
          lambda a, d: Req(f"{FORM_PATH}?username={_q(a)}", [("content-type", FORM)],
                           f"username={d}&password=x".encode()),
          400),
    Shape("decoy: a second JSON member in upper case",
          lambda a, d: Req(JSON_PATH, [("content-type", JSON)],
                           b'{"username":"%s","USERNAME":"%s"}' % (d.encode(), a.encode())),
          400),
    Shape("decoy: the header twice",
          lambda a, d: Req(HEADER_PATH, [("x-login", d), ("x-login", a)]),
          400, kind="ascii"),
    # Issue 36, found by the account oracle (tests/oracle): each a fresh
    # counter per spelling before, each read as the account by a framework.
    Shape("control: U+0001 after the account (form; Spring, Django read it)",
          lambda a, d: Req(FORM_PATH, [("content-type", FORM)],
                           f"username={_q(a)}%01&password=x".encode()),
          400),
    Shape("control: U+001F after the account (JSON; DRF strips it)",
          lambda a, d: Req(JSON_PATH, [("content-type", JSON)],
                           _json({"username": a + "\x1f", "password": "x"})),
          400),
    Shape("control: NUL after the account (form; Java's trim drops it)",
          lambda a, d: Req(FORM_PATH, [("content-type", FORM)],
                           f"username={_q(a)}%00&password=x".encode()),
          400),
    Shape("query: ';' separates the account from another field (Rack 2)",
          lambda a, d: Req(f"{JSON_PATH}?x=1;username={_q(a)}", [("content-type", JSON)],
                           _json({"password": "x"})),
          429),
    Shape("header: the same account twice (Django, Express join the copies)",
          lambda a, d: Req(HEADER_PATH, [("x-login", a), ("x-login", a)]),
          400, kind="ascii"),
] + _fold_spellings()


def _q(s: str) -> str:
    import urllib.parse
    return urllib.parse.quote(s, safe="")
