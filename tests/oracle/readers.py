"""The real readers of a sign-in: each framework's server
(tests/oracle/readers/<name>/serve PORT) started on loopback, sent the raw
bytes of a request, answering with the account its own code passed on to
authentication; and the filter's reader (examples/account_oracle)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent

# tests/e2e/processes.py: every process started here is stopped with the run.
sys.path.append(str(HERE.parent / "e2e"))
import processes  # noqa: E402

ROOT = HERE.parents[1]
READERS = HERE / "readers"
TOOL = Path(os.environ.get("RATEBOUND_ACCOUNT_ORACLE",
                           ROOT / "target" / "debug" / "examples" / "account_oracle"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Readers that run one folder's server another way: (folder, environment,
# paths rewritten). Rails' own params read a form with the query string
# winning (Devise in a Rails app); WEBrick keeps what Puma refuses.
VARIANTS = {
    "rack-webrick": ("rack", {"RACK_READER_SERVER": "webrick"}, {}),
    "rails-form": ("rack", {}, {"/up/form-login": "/up/rails-form-login"}),
}


class Reader:
    """One framework's server, started by its `serve` and stopped by PID."""

    def __init__(self, name: str):
        self.name = name
        folder, env, self.paths = VARIANTS.get(name, (name, {}, {}))
        self.port = free_port()
        self.proc = processes.popen([str(READERS / folder / "serve"), str(self.port)],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True, env={**os.environ, **env})
        deadline = time.monotonic() + 120
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready" or time.monotonic() > deadline:
            self.stop()
            raise RuntimeError(f"reader {name} did not start: {line!r}")

    def read(self, raw: bytes, timeout: float = 10.0):
        """What the framework read from the request `raw`: the account
        string (or a list of them), or None (an empty name is none: no
        server signs an empty name in)."""
        for path, to in self.paths.items():
            prefix = f"POST {path}".encode()
            if raw.startswith(prefix):
                raw = f"POST {to}".encode() + raw[len(prefix):]
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
                # No half-close: Puma takes it for a client gone and answers nothing.
                s.sendall(raw)
                chunks = []
                while True:
                    c = s.recv(65536)
                    if not c:
                        break
                    chunks.append(c)
        except OSError:
            return None
        answer = b"".join(chunks)
        _, _, body = answer.partition(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in answer.partition(b"\r\n\r\n")[0].lower():
            body = _unchunk(body)
        try:
            account = json.loads(body).get("account")
        except (ValueError, AttributeError):
            return None
        if isinstance(account, list) and all(isinstance(a, str) for a in account):
            return [a for a in account if a] or None
        return account if isinstance(account, str) and account else None

    def read_all(self, raws: list[bytes]) -> list:
        with ThreadPoolExecutor(4) as pool:
            return list(pool.map(self.read, raws))

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _unchunk(body: bytes) -> bytes:
    out = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        n = int(size.split(b";")[0] or b"0", 16)
        if n == 0:
            break
        out += rest[:n]
        body = rest[n + 2:]
    return out


class Filter:
    """The filter's reader: examples/account_oracle, one line in, one out."""

    def __init__(self):
        self.proc = processes.popen([str(TOOL)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)

    def ask(self, lines: list[str]) -> list[dict]:
        assert self.proc.stdin and self.proc.stdout
        out = []
        # Batches: the tool answers a line for each line, in order.
        for i in range(0, len(lines), 500):
            batch = lines[i:i + 500]
            self.proc.stdin.write("".join(line + "\n" for line in batch))
            self.proc.stdin.flush()
            out += [json.loads(self.proc.stdout.readline()) for _ in batch]
        return out

    def key(self, names: list[str]) -> list[dict]:
        """The key each name is counted under ({"key"} or {"refused"}); a
        name no UTF-8 text can hold (a lone surrogate) has none."""
        def utf8(n: str) -> bool:
            try:
                n.encode("utf-8")
                return True
            except UnicodeEncodeError:
                return False
        ok = [n for n in names if utf8(n)]
        keys = iter(self.ask([json.dumps({"fold": n}) for n in ok]))
        return [next(keys) if utf8(n) else {"refused": "unrepresentable"} for n in names]

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(10)


def available() -> list[str]:
    """The readers in tests/oracle/readers (RATEBOUND_READERS=a,b: those)."""
    only = [n for n in os.environ.get("RATEBOUND_READERS", "").split(",") if n]
    folders = sorted(p.name for p in READERS.iterdir() if (p / "install.sh").exists())
    return only or folders + sorted(VARIANTS)


def folder_of(name: str) -> str:
    return VARIANTS.get(name, (name, {}, {}))[0]
