"""A private MariaDB server for the collation oracle.

`private_mariadb()` starts a mariadbd of its own: a fresh data directory in
a temporary folder (`mariadb-install-db --no-defaults`), 127.0.0.1 on a free
port, its own socket; it waits until the server answers and yields a
`MariaDB` whose `query()` runs SQL through the `mariadb` client (`--batch
--raw`) in an empty database `oracle`. On the way out it stops the server it started, by its PID (SIGTERM,
then a wait; SIGKILL only if it has not stopped after 60 s), and removes the
folder. It works as root (`--user=root`). The server is Debian's
(scripts/install-mariadb.sh); nothing else is needed (no Python driver).

    with private_mariadb() as db:
        db.query("SELECT VERSION()")  # [['10.11.…']]
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

# tests/e2e/processes.py: the server is stopped with the run, too.
sys.path.append(str(Path(__file__).resolve().parents[1] / "e2e"))
import processes  # noqa: E402

# Debian puts the server and its installer in /usr/sbin and /usr/bin.
_SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin"])


def _tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name, path=_SEARCH)
        if found:
            return found
    raise FileNotFoundError(
        f"none of {', '.join(names)} found: run scripts/install-mariadb.sh"
    )


def available() -> bool:
    """Whether a MariaDB server and its client are installed."""
    try:
        _tool("mariadbd", "mysqld")
        _tool("mariadb-install-db", "mysql_install_db")
        _tool("mariadb", "mysql")
    except FileNotFoundError:
        return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MariaDB:
    """A connection helper: each `query` is one `mariadb` client run."""

    def __init__(self, sock: Path, port: int, client: str) -> None:
        self.socket = sock
        self.port = port
        self._client = client
        self.database: str | None = None

    def query(self, sql: str, timeout: float = 300) -> list[list[str]]:
        """Runs SQL (statements separated by `;`, sent on stdin); returns
        the rows of the last result set, tab-split, without column names.
        NULL comes back as the string 'NULL'; ask for HEX() of anything
        that is not plain ASCII."""
        out = subprocess.run(
            [
                self._client,
                "--no-defaults",
                "--batch",
                "--raw",
                "--skip-column-names",
                "--default-character-set=utf8mb4",
                "--protocol=socket",
                f"--socket={self.socket}",
                "--user=root",
                *([f"--database={self.database}"] if self.database else []),
            ],
            input=sql.encode(),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"mariadb: {out.stderr.decode(errors='replace').strip()}")
        text = out.stdout.decode()
        return [line.split("\t") for line in text.splitlines()]

    def scalar(self, sql: str) -> str:
        rows = self.query(sql)
        return rows[-1][0] if rows else ""


@contextlib.contextmanager
def private_mariadb(ready_timeout: float = 60) -> Iterator[MariaDB]:
    server = _tool("mariadbd", "mysqld")
    install = _tool("mariadb-install-db", "mysql_install_db")
    client = _tool("mariadb", "mysql")
    root = Path(tempfile.mkdtemp(prefix="ratebound-mariadb-"))
    datadir, sock, pidfile, log = root / "data", root / "s.sock", root / "d.pid", root / "err.log"
    user = ["--user=root"] if os.geteuid() == 0 else []
    proc: subprocess.Popen[bytes] | None = None
    try:
        done = subprocess.run(
            [
                install,
                "--no-defaults",
                "--auth-root-authentication-method=normal",
                f"--datadir={datadir}",
                "--skip-test-db",
                *user,
            ],
            capture_output=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"mariadb-install-db: {done.stderr.decode(errors='replace')[-2000:]}")
        port = _free_port()
        proc = processes.popen(
            [
                server,
                "--no-defaults",
                f"--datadir={datadir}",
                f"--socket={sock}",
                f"--pid-file={pidfile}",
                f"--log-error={log}",
                "--bind-address=127.0.0.1",
                f"--port={port}",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=32M",
                "--character-set-server=utf8mb4",
                *user,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        db = MariaDB(sock, port, client)
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited ({proc.returncode}): {_tail(log)}")
            if sock.exists():
                try:
                    db.query("SELECT 1", timeout=10)
                    break
                except (RuntimeError, subprocess.TimeoutExpired):
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mariadbd not ready after {ready_timeout}s: {_tail(log)}")
            time.sleep(0.1)
        db.query("CREATE DATABASE oracle CHARACTER SET utf8mb4")
        db.database = "oracle"
        yield db
    finally:
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(root, ignore_errors=True)


def _tail(log: Path) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").splitlines()[-5:])
    except OSError:
        return "(no log)"
