"""Sign-in requests that try to move an attempt off its account's counter:
a corpus of shapes plus a seeded generator over encodings, content types,
repeated fields and names, the query string, Unicode and control
characters, and lengths.

A case is one request to one of the three sign-in routes of
examples/account_oracle.rs (the JSON body's `username`, the form field
`username`, the header `x-login`), built exactly as sent: its path (query
string included), its headers in order (values are bytes, given as latin-1
strings), its body. The same bytes go to the filter's reader and to every
framework's."""
from __future__ import annotations

import base64
import json
import random
import unicodedata
import urllib.parse
from dataclasses import dataclass, field

JSON_PATH, FORM_PATH, HEADER_PATH = "/up/login", "/up/form-login", "/up/hdr-login"
JSON_T = "application/json"
FORM_T = "application/x-www-form-urlencoded"
MAX_BODY = 16384


@dataclass
class Case:
    name: str
    place: str  # json | form | header
    path: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def tool_line(self) -> str:
        """The request as examples/account_oracle reads it."""
        return json.dumps({"place": self.place, "path": self.path,
                           "headers": [list(h) for h in self.headers],
                           "body_b64": base64.b64encode(self.body).decode()})

    def raw(self) -> bytes:
        """The request on the wire (HTTP/1.1, a fresh connection)."""
        head = [f"POST {self.path} HTTP/1.1", "Host: 127.0.0.1"]
        head += [f"{k}: {v}" for k, v in self.headers]
        head += [f"Content-Length: {len(self.body)}", "Connection: close"]
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + self.body


# --- names --------------------------------------------------------------

VICTIMS = ["victim", "josé", "straße", "Ünïcødé-user@example.com"]

CONTROLS = [chr(c) for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]]
SPACES = ["\u0020", "\u00a0", "\u1680", *[chr(c) for c in range(0x2000, 0x200B)],
          "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u180e"]
IGNORABLES = ["\u200b", "\u200c", "\u200d", "\u00ad", "\ufeff", "\u2060", "\u034f",
              "\ufe0f", "\u061c", "\u200e", "\u202e"]
# Letters a database's default collation weighs as another (MySQL 8's
# utf8mb4_0900_ai_ci, MariaDB's utf8mb4_general_ci).
LOOKALIKES = {"i": ["ı", "í", "ì", "î", "ï", "ī", "į"], "o": ["ø", "ó", "ö", "ō", "ő"],
              "c": ["ç", "ć", "č"], "t": ["ţ", "ť", "ŧ"], "m": ["ṁ"], "v": ["ṽ"],
              "e": ["é", "è", "ê", "ë", "ė", "ę", "ě"], "s": ["ś", "š", "ş", "ſ"]}


def fullwidth(s: str) -> str:
    return "".join(chr(ord(c) - 0x21 + 0xFF01) if "!" <= c <= "~" else c for c in s)


def spellings(name: str, rng: random.Random) -> list[tuple[str, str]]:
    """(label, spelling) of `name` that some reader may take for it."""
    out = [("plain", name), ("upper", name.upper()), ("title", name.title()),
           ("nfd", unicodedata.normalize("NFD", name)), ("fullwidth", fullwidth(name)),
           ("padded", f"  {name} ")]
    for c in CONTROLS:
        where = rng.choice(["end", "start", "middle", "both"])
        mid = len(name) // 2
        s = {"end": name + c, "start": c + name, "middle": name[:mid] + c + name[mid:],
             "both": c + name + c}[where]
        out.append((f"control U+{ord(c):04X} at {where}", s))
    out.append(("controls doubled", name + "\x01\x01"))
    for c in SPACES:
        out.append((f"space U+{ord(c):04X}", rng.choice([name + c, c + name])))
    for c in IGNORABLES:
        mid = len(name) // 2
        out.append((f"ignorable U+{ord(c):04X}", name[:mid] + c + name[mid:]))
    for plain, looks in LOOKALIKES.items():
        if plain in name:
            for look in looks:
                out.append((f"look-alike {look} for {plain}", name.replace(plain, look, 1)))
    return out


# --- carriers -----------------------------------------------------------

def _q(s: str, safe: str = "") -> str:
    return urllib.parse.quote(s, safe=safe)


def json_body(obj, *, ascii_only: bool = False) -> bytes:
    return json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


def as_json(label: str, account: str, *, escape: bool = False, ctype: str = JSON_T,
            path: str = JSON_PATH) -> Case:
    return Case(f"json {label}", "json", path, [("Content-Type", ctype)],
                json_body({"username": account, "password": "x"}, ascii_only=escape))


def as_form(label: str, account: str, *, plus: bool = False, ctype: str = FORM_T,
            path: str = FORM_PATH) -> Case:
    v = urllib.parse.quote_plus(account) if plus else _q(account)
    return Case(f"form {label}", "form", path, [("Content-Type", ctype)],
                f"username={v}&password=x".encode())


def as_header(label: str, account: str) -> Case | None:
    try:
        account.encode("latin-1")
    except UnicodeEncodeError:
        return None
    # Envoy refuses header values with most controls (a codec error):
    # those never reach the filter or a server behind it.
    if any(c in account for c in "\r\n\x00"):
        return None
    return Case(f"header {label}", "header", HEADER_PATH, [("x-login", account)])


def shaped(victim: str, decoy: str) -> list[Case]:
    """The shapes a server reads otherwise than a first reading would."""
    v, d = victim, decoy
    cases = [
        # Repeated fields and names.
        Case("json duplicate key, decoy first", "json", JSON_PATH, [("Content-Type", JSON_T)],
             f'{{"username":"{d}","username":"{v}"}}'.encode()),
        Case("json same key twice", "json", JSON_PATH, [("Content-Type", JSON_T)],
             f'{{"username":"{v}","username":"{v}"}}'.encode()),
        Case("json upper-case key decoy", "json", JSON_PATH, [("Content-Type", JSON_T)],
             f'{{"username":"{d}","USERNAME":"{v}"}}'.encode()),
        Case("json escaped key", "json", JSON_PATH, [("Content-Type", JSON_T)],
             f'{{"user\\u006eame":"{v}"}}'.encode()),
        Case("json nested object", "json", JSON_PATH, [("Content-Type", JSON_T)],
             json_body({"user": {"username": v}})),
        Case("json array value", "json", JSON_PATH, [("Content-Type", JSON_T)],
             json_body({"username": [v]})),
        Case("json number value", "json", JSON_PATH, [("Content-Type", JSON_T)],
             b'{"username": 123456, "password": "x"}'),
        Case("json null, account in the query", "json", f"{JSON_PATH}?username={_q(v)}",
             [("Content-Type", JSON_T)], b'{"username": null, "password": "x"}'),
        Case("json empty, account in the query", "json", f"{JSON_PATH}?username={_q(v)}",
             [("Content-Type", JSON_T)], b'{"username": "", "password": "x"}'),
        Case("json lone surrogate", "json", JSON_PATH, [("Content-Type", JSON_T)],
             f'{{"username":"{v}\\ud800"}}'.encode()),
        Case("json NUL escape", "json", JSON_PATH, [("Content-Type", JSON_T)],
             f'{{"username":"{v}\\u0000"}}'.encode()),
        Case("json trailing data", "json", JSON_PATH, [("Content-Type", JSON_T)],
             json_body({"username": d}) + json_body({"username": v})),
        Case("json BOM", "json", JSON_PATH, [("Content-Type", JSON_T)],
             b"\xef\xbb\xbf" + json_body({"username": v})),
        Case("json utf-16", "json", JSON_PATH, [("Content-Type", JSON_T)],
             json.dumps({"username": v}).encode("utf-16-le")),
        Case("json padded past the cap", "json", JSON_PATH, [("Content-Type", JSON_T)],
             json_body({"username": v, "password": "x"}) + b" " * (MAX_BODY + 1)),
        Case("json no content type", "json", JSON_PATH, [], json_body({"username": v})),
        Case("json as text/plain", "json", JSON_PATH, [("Content-Type", "text/plain")],
             json_body({"username": v})),
        Case("json as */*", "json", JSON_PATH, [("Content-Type", "*/*")],
             json_body({"username": v})),
        Case("json gzip", "json", JSON_PATH,
             [("Content-Type", JSON_T), ("Content-Encoding", "gzip")],
             __import__("gzip").compress(json_body({"username": v}))),
        Case("json two content types", "json", JSON_PATH,
             [("Content-Type", JSON_T), ("Content-Type", JSON_T)], json_body({"username": v})),
        Case("json form body on the json route", "json", JSON_PATH,
             [("Content-Type", FORM_T)], f"username={_q(v)}".encode()),
        Case("json only in the query", "json", f"{JSON_PATH}?username={_q(v)}",
             [("Content-Type", JSON_T)], json_body({"password": "x"})),
        Case("json decoy, account in the query", "json", f"{JSON_PATH}?username={_q(v)}",
             [("Content-Type", JSON_T)], json_body({"username": d})),
        Case("json query with ';'", "json", f"{JSON_PATH}?x=1;username={_q(v)}",
             [("Content-Type", JSON_T)], json_body({"password": "x"})),
        Case("json query value with ';'", "json", f"{JSON_PATH}?username={_q(v)};x=1",
             [("Content-Type", JSON_T)], json_body({"password": "x"})),
        Case("json query bracketed", "json", f"{JSON_PATH}?username[]={_q(v)}",
             [("Content-Type", JSON_T)], json_body({"password": "x"})),
        Case("json long account", "json", JSON_PATH, [("Content-Type", JSON_T)],
             json_body({"username": v + "x" * 200})),
        # Forms.
        Case("form repeated, decoy first", "form", FORM_PATH, [("Content-Type", FORM_T)],
             f"username={_q(d)}&username={_q(v)}".encode()),
        Case("form repeated, same", "form", FORM_PATH, [("Content-Type", FORM_T)],
             f"username={_q(v)}&username={_q(v)}".encode()),
        Case("form repeated, query fallback", "form", f"{FORM_PATH}?username={_q(v)}",
             [("Content-Type", FORM_T)], f"username={_q(d)}&username={_q(d)}".encode()),
        Case("form bracketed name", "form", FORM_PATH, [("Content-Type", FORM_T)],
             f"username[]={_q(v)}".encode()),
        Case("form bracketed name and plain decoy", "form", FORM_PATH,
             [("Content-Type", FORM_T)], f"username[]={_q(v)}&username={_q(d)}".encode()),
        Case("form encoded name", "form", FORM_PATH, [("Content-Type", FORM_T)],
             f"user%6Eame={_q(v)}".encode()),
        Case("form upper-case name decoy", "form", FORM_PATH, [("Content-Type", FORM_T)],
             f"username={_q(d)}&USERNAME={_q(v)}".encode()),
        Case("form query first", "form", f"{FORM_PATH}?username={_q(v)}",
             [("Content-Type", FORM_T)], f"username={_q(d)}".encode()),
        Case("form ';' in the body", "form", FORM_PATH, [("Content-Type", FORM_T)],
             f"x=1;username={_q(v)}".encode()),
        Case("form ';' in the value", "form", FORM_PATH, [("Content-Type", FORM_T)],
             f"username={_q(v)};x=1".encode()),
        Case("form raw latin-1 byte", "form", FORM_PATH, [("Content-Type", FORM_T)],
             b"username=" + v.encode("latin-1", "replace")),
        Case("form %E9 under latin-1", "form", FORM_PATH,
             [("Content-Type", FORM_T + "; charset=latin-1")], f"username={_q(v)}%E9".encode()),
        Case("form %E9 under utf-8", "form", FORM_PATH, [("Content-Type", FORM_T)],
             f"username={_q(v)}%E9".encode()),
        Case("form BOM", "form", FORM_PATH, [("Content-Type", FORM_T)],
             b"\xef\xbb\xbfusername=" + _q(v).encode()),
        Case("form multipart", "form", FORM_PATH,
             [("Content-Type", "multipart/form-data; boundary=b")],
             (f'--b\r\nContent-Disposition: form-data; name="username"\r\n\r\n{v}\r\n--b--\r\n'
              ).encode()),
        Case("form no content type", "form", f"{FORM_PATH}?username={_q(v)}", [],
             f"username={_q(v)}".encode()),
        Case("form json on the form route", "form", FORM_PATH, [("Content-Type", JSON_T)],
             json_body({"username": v})),
        Case("form empty value, query fallback", "form", f"{FORM_PATH}?username={_q(v)}",
             [("Content-Type", FORM_T)], b"username=&password=x"),
        Case("form bad escape", "form", FORM_PATH, [("Content-Type", FORM_T)],
             f"username={_q(v)}%zz".encode()),
    ]
    if v.isascii() and d.isascii():
        cases += [
            Case("header twice, decoy first", "header", HEADER_PATH,
                 [("x-login", d), ("x-login", v)]),
            Case("header twice, same", "header", HEADER_PATH, [("x-login", v), ("x-login", v)]),
            Case("header comma list", "header", HEADER_PATH, [("x-login", f"{d}, {v}")]),
        ]
    # Rack (Puma, WEBrick) reads `x_login` as `x-login`: both become HTTP_X_LOGIN.
    cases.append(Case("header underscore spelling", "header", HEADER_PATH,
                      [("x_login", "victim")]))
    cases.append(Case("header underscore spelling beside a decoy", "header", HEADER_PATH,
                      [("x-login", d), ("x_login", "victim")]))
    cases.append(Case("header underscore spelling first, decoy after", "header", HEADER_PATH,
                      [("X_LOGIN", "victim"), ("x-login", d)]))
    # Non-ASCII header bytes: UTF-8 on the wire, which servers read as latin-1.
    utf8 = v.encode("utf-8").decode("latin-1")
    cases.append(Case("header UTF-8 bytes", "header", HEADER_PATH, [("x-login", utf8)]))
    cases.append(Case("header UTF-8 bytes + NBSP byte", "header", HEADER_PATH,
                      [("x-login", utf8 + "\xa0")]))
    # Aimed at the sign-in's account phase (src/pipeline/phase/account.rs),
    # which decides between the head and the body: the cap to the byte, the
    # content type and encoding as spelled, an empty carrier beside a full one.
    exact = json_body({"username": v, "password": "x"})
    cases += [
        Case("json padded to exactly the cap", "json", JSON_PATH, [("Content-Type", JSON_T)],
             exact + b" " * (MAX_BODY - len(exact))),
        Case("json content type in capitals with a charset", "json", JSON_PATH,
             [("Content-Type", "APPLICATION/JSON; Charset=UTF-8")], json_body({"username": v})),
        Case("json content-encoding identity", "json", JSON_PATH,
             [("Content-Type", JSON_T), ("Content-Encoding", "identity")],
             json_body({"username": v})),
        Case("json 'identity, gzip' on a plain body", "json", JSON_PATH,
             [("Content-Type", JSON_T), ("Content-Encoding", "identity, gzip")],
             json_body({"username": v})),
        Case("header empty beside the account", "header", HEADER_PATH,
             [("x-login", ""), ("x-login", utf8)]),
        Case("header mixed-case x_Login after a decoy", "header", HEADER_PATH,
             [("x-login", d), ("x_Login", "victim")]),
    ]
    return cases


def ascii_sweep(name: str = "Victim") -> list[tuple[str, str]]:
    """Every ASCII character at the end and in the middle of an ASCII name:
    the names the filter folds and collates on its ASCII path (issue 41: no
    Unicode normalizer for an ASCII name), each read by the frameworks."""
    mid = len(name) // 2
    return [(f"ascii U+{c:04X} at {where}", s) for c in range(0x80)
            for where, s in (("end", name + chr(c)), ("middle", name[:mid] + chr(c) + name[mid:]))]


def corpus(seed: int = 36, generated: int = 600) -> list[Case]:
    """The fixed shapes, every spelling in every carrier, and `generated`
    random combinations."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for victim in VICTIMS:
        cases += shaped(victim, "decoy")
        for label, s in spellings(victim, rng):
            cases.append(as_json(label, s))
            cases.append(as_json(label + " (escaped)", s, escape=True))
            cases.append(as_form(label, s))
            cases.append(as_form(label + " (+)", s, plus=True))
            h = as_header(label, s)
            if h:
                cases.append(h)
    for label, s in ascii_sweep():
        cases.append(as_json(label + " (escaped)", s, escape=True))
        h = as_header(label, s)
        if h:
            cases.append(h)
    pool = [s for v in VICTIMS for _, s in spellings(v, rng)]
    ctypes_json = [JSON_T, "application/json; charset=utf-8", "application/json;charset=UTF-8",
                   "Application/JSON", "application/json; charset=latin-1", "text/json"]
    ctypes_form = [FORM_T, FORM_T + "; charset=utf-8", FORM_T + "; charset=iso-8859-1",
                   FORM_T.upper()]
    for i in range(generated):
        s = rng.choice(pool)
        other = rng.choice(pool + ["decoy"])
        kind = rng.choice(["json", "form", "query"])
        if kind == "json":
            members = [("username", s)]
            if rng.random() < 0.3:
                members.append((rng.choice(["username", "USERNAME", "Username", "user"]), other))
            rng.shuffle(members)
            body = "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v, ensure_ascii=rng.random() < 0.5)}"
                                  for k, v in members) + "}"
            q = f"?username={_q(other)}" if rng.random() < 0.2 else ""
            cases.append(Case(f"gen {i} json", "json", JSON_PATH + q,
                              [("Content-Type", rng.choice(ctypes_json))],
                              body.encode("utf-8", "surrogatepass")))
        elif kind == "form":
            pairs = [("username", s)]
            if rng.random() < 0.3:
                pairs.append((rng.choice(["username", "USERNAME", "username[]", "user"]), other))
            rng.shuffle(pairs)
            sep = rng.choice(["&", "&", ";"])
            body = sep.join(f"{k}={urllib.parse.quote_plus(v) if rng.random() < .5 else _q(v)}"
                            for k, v in pairs)
            cases.append(Case(f"gen {i} form", "form", FORM_PATH,
                              [("Content-Type", rng.choice(ctypes_form))], body.encode()))
        else:
            sep = rng.choice(["&", ";"])
            q = f"x=1{sep}username={_q(s)}"
            if rng.random() < 0.3:
                q += f"{rng.choice(['&', ';'])}username={_q(other)}"
            place, path, ctype = rng.choice([("json", JSON_PATH, JSON_T),
                                             ("form", FORM_PATH, FORM_T)])
            body = json_body({"password": "x"}) if place == "json" else b"password=x"
            cases.append(Case(f"gen {i} query", place, f"{path}?{q}",
                              [("Content-Type", ctype)], body))
    return cases
