"""Redis with replicas, for failover trials (tests/e2e/test_failover.py,
bench/failover.py): a Sentinel set (a primary, its replicas, three
sentinels) and a Redis Cluster (three primaries, a replica each), all as
processes of Debian's redis-server on 127.0.0.1, on free ports, in folders
under the caller's temporary path.

Each topology gives `service_env()`, the settings envoyproxy/ratelimit
needs to use it (engines.RateLimitService takes them from any of
engines.Redis, SentinelSet, RedisCluster), and `kill9_primary_of(key)`: a
SIGKILL to the process of the primary that holds `key`, by the PID this
module started. Every wait is bounded; `stop()` stops only the PIDs started
here. No persistence (no RDB, no append-only file): what survives a
primary's death is what reached a replica, which is the point.
"""
from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import processes
from engines import EngineError, _stop, _tail, _wait_port
from harness import free_port

READY_TIMEOUT = 30.0  # s: a set or cluster formed (sentinels find each other in ~2 s hellos)
FAILOVER_TIMEOUT = 30.0  # s: a new primary elected and serving


def _exe(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise EngineError(f"{name} not found: run scripts/install-ratelimit.sh")
    return path


def cli(port: int, *args: str, timeout: float = 5.0, check: bool = True) -> str:
    """redis-cli against 127.0.0.1:port (raw output, stripped)."""
    out = subprocess.run([_exe("redis-cli"), "-h", "127.0.0.1", "-p", str(port), *args],
                         capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise EngineError(f"redis-cli -p {port} {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout.strip()


def resp(port: int, *args: str, timeout: float = 1.0):
    """One command over a socket, its reply parsed (str, int, list, None;
    an error reply raises EngineError). No redis-cli process: well under a
    millisecond, for reads that must land between two requests."""
    return resp_pipeline(port, [args], timeout=timeout)[0]


def resp_pipeline(port: int, commands, timeout: float = 1.0, errors: bool = False) -> list:
    """Several commands on one connection; the replies in order (with
    errors=True an error reply is returned as an EngineError, not raised)."""
    import socket

    out = b""
    for args in commands:
        out += b"*%d\r\n" % len(args)
        for a in args:
            b = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(b), b)
    replies = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(out)
        f = s.makefile("rb")
        for _ in commands:
            try:
                replies.append(_read_reply(f))
            except EngineError as e:
                if not errors:
                    raise
                replies.append(e)
    return replies


def _read_reply(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise EngineError("connection closed mid-reply")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body.decode()
    if kind == b"-":
        raise EngineError(body.decode())
    if kind == b":":
        return int(body)
    if kind == b"$":
        n = int(body)
        return None if n < 0 else f.read(n + 2)[:-2].decode(errors="replace")
    if kind == b"*":
        n = int(body)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise EngineError(f"unexpected reply {line!r}")


def get_now(port: int, key: str) -> int | None:
    """GET as an integer, also on a cluster replica (READONLY first); None
    when absent or the node does not answer."""
    try:
        _, v = resp_pipeline(port, [("READONLY",), ("GET", key)], errors=True)
    except (OSError, EngineError):
        return None
    return int(v) if isinstance(v, str) else None


def scan_now(port: int, pattern: str, limit: int = 100) -> list[str]:
    """Every key matching `pattern` (SCAN, at most `limit` rounds)."""
    keys: list[str] = []
    cursor = "0"
    for _ in range(limit):
        cursor, batch = resp(port, "SCAN", cursor, "MATCH", pattern, "COUNT", "1000")
        keys.extend(batch)
        if cursor == "0":
            break
    return keys


def _info(port: int, section: str) -> dict[str, str]:
    fields = {}
    try:
        text = resp(port, "INFO", section)
    except OSError as e:
        raise EngineError(f"INFO on {port}: {e}") from e
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


class _Node:
    """One redis-server process (data node or sentinel) on 127.0.0.1:port."""

    def __init__(self, folder: Path, port: int, args: list[str], name: str) -> None:
        self.dir = folder
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.name = name
        self.args = args
        self.log_path = self.dir / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self._log = None

    def start(self) -> "_Node":
        self._log = open(self.log_path, "ab")
        self.proc = processes.popen(
            [_exe("redis-server"), *self.args], stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=self.dir)
        _wait_port(self.port, self.proc, self.name, self.log_path, READY_TIMEOUT)
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL to this PID: no goodbye, no last replication."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=5)
        self._close_log()

    def stop(self) -> None:
        _stop(self.proc)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log(self, lines: int = 200) -> str:
        return _tail(self.log_path, lines)

    def cli(self, *args: str, **kw) -> str:
        return cli(self.port, *args, **kw)


def _data_args(port: int, folder: Path, extra: list[str]) -> list[str]:
    return ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(folder), "--daemonize", "no",
            # A replica's first sync goes over the socket at once, not a
            # file written after a 5 s wait.
            "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0", *extra]


def _wait(what: str, check, timeout: float, logs=()) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (EngineError, OSError, subprocess.TimeoutExpired) as e:
            last = e
        time.sleep(0.1)
    raise EngineError(f"{what}: not after {timeout}s ({last})\n" + "\n".join(
        f"--- {n.name} ---\n{n.log(40)}" for n in logs))


class SentinelSet:
    """A primary, `replicas` replicas of it, and `sentinels` sentinels
    (quorum 2) watching it as `master_name`. A primary unreachable for
    `down_after_ms` is failed over to a replica."""

    def __init__(self, tmpdir: Path | str, *, replicas: int = 2, sentinels: int = 3,
                 master_name: str = "ratebound", down_after_ms: int = 1000,
                 failover_timeout_ms: int = 5000) -> None:
        self.dir = Path(tmpdir) / "sentinel-set"
        self.master_name = master_name
        self.nodes: list[_Node] = []
        self.sentinels: list[_Node] = []
        try:
            primary = free_port()
            for i in range(replicas + 1):
                port = primary if i == 0 else free_port()
                folder = self.dir / f"redis-{port}"
                extra = [] if i == 0 else ["--replicaof", "127.0.0.1", str(primary)]
                self.nodes.append(_Node(folder, port, _data_args(port, folder, extra),
                                        f"redis-{port}").start())
            _wait("replicas in sync", lambda: self._replicas_online(primary) == replicas,
                  READY_TIMEOUT, self.nodes)
            for _ in range(sentinels):
                port = free_port()
                folder = self.dir / f"sentinel-{port}"
                folder.mkdir(parents=True, exist_ok=True)
                conf = folder / "sentinel.conf"  # sentinels rewrite their file
                conf.write_text(
                    f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
                    f"sentinel monitor {master_name} 127.0.0.1 {primary} 2\n"
                    f"sentinel down-after-milliseconds {master_name} {down_after_ms}\n"
                    f"sentinel failover-timeout {master_name} {failover_timeout_ms}\n"
                    f"sentinel parallel-syncs {master_name} {replicas}\n")
                # `redis-server FILE --sentinel` is what redis-sentinel runs.
                self.sentinels.append(_Node(folder, port, [str(conf), "--sentinel"],
                                            f"sentinel-{port}").start())
            # A failover needs the sentinels to know each other (their hello
            # messages, every 2 s) and the replicas.
            _wait("sentinels know each other and the replicas", lambda: all(
                self._sentinel_sees(s, sentinels - 1, replicas) for s in self.sentinels),
                READY_TIMEOUT, self.sentinels)
        except BaseException:
            self.stop()
            raise

    def _replicas_online(self, primary: int) -> int:
        info = _info(primary, "replication")
        return sum(1 for k, v in info.items() if k.startswith("slave") and "state=online" in v)

    def _sentinel_sees(self, s: _Node, others: int, replicas: int) -> bool:
        fields = s.cli("SENTINEL", "MASTER", self.master_name).splitlines()
        state = dict(zip(fields[0::2], fields[1::2]))
        return (int(state.get("num-other-sentinels", -1)) >= others
                and int(state.get("num-slaves", -1)) >= replicas
                and state.get("flags") == "master")

    # ---- what the service is told ---------------------------------------
    def service_env(self) -> dict[str, str]:
        """REDIS_TYPE=SENTINEL; REDIS_URL is the master set's name, then
        every sentinel, comma-separated."""
        return {"REDIS_TYPE": "SENTINEL",
                "REDIS_URL": ",".join([self.master_name]
                                      + [f"127.0.0.1:{s.port}" for s in self.sentinels])}

    # ---- state -----------------------------------------------------------
    def primary_port(self) -> int:
        """The primary as a majority of live sentinels name it."""
        votes: dict[int, int] = {}
        for s in self.sentinels:
            if s.alive():
                out = resp(s.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name)
                if out and len(out) == 2:
                    votes[int(out[1])] = votes.get(int(out[1]), 0) + 1
        port, n = max(votes.items(), key=lambda kv: kv[1])
        return port

    def node(self, port: int) -> _Node:
        return next(n for n in self.nodes if n.port == port)

    def primaries_for(self, key: str) -> list[_Node]:
        """Where the key is written: the one primary."""
        return [self.node(self.primary_port())]

    def find_keys(self, pattern: str) -> list[str]:
        return sorted(set(scan_now(self.primary_port(), pattern)))

    def get(self, key: str, port: int | None = None) -> int | None:
        out = cli(port or self.primary_port(), "GET", key)
        return int(out) if out else None

    def kill9_primary_of(self, key: str) -> _Node:
        victim = self.node(self.primary_port())
        victim.kill9()
        return victim

    def wait_failover(self, old_port: int, timeout: float = FAILOVER_TIMEOUT) -> int:
        """Until every live sentinel names a live primary other than
        `old_port`, and that node says it is a primary. Returns its port."""
        found: list[int] = []

        def done() -> bool:
            names = set()
            for s in self.sentinels:
                out = s.cli("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name).split()
                names.add(int(out[1]) if len(out) == 2 else -1)
            if len(names) != 1 or old_port in names or -1 in names:
                return False
            port = names.pop()
            if not self.node(port).alive() or _info(port, "replication").get("role") != "master":
                return False
            found[:] = [port]
            return True

        _wait("sentinel failover", done, timeout, self.sentinels)
        return found[0]

    def logs(self) -> str:
        return "\n".join(f"===== {n.name} ({n.log_path}) =====\n{n.log(80)}"
                         for n in self.nodes + self.sentinels)

    def stop(self) -> None:
        for n in self.sentinels + self.nodes:
            n.stop()


class RedisCluster:
    """A Redis Cluster of `primaries` primaries with `replicas` replicas
    each (`redis-cli --cluster create … --cluster-replicas`). A primary
    unreachable for `node_timeout_ms` is failed over to its replica; until
    then the whole cluster answers CLUSTERDOWN once the primary is marked
    failed (full coverage is required, Redis's default)."""

    def __init__(self, tmpdir: Path | str, *, primaries: int = 3, replicas: int = 1,
                 node_timeout_ms: int = 1000) -> None:
        self.dir = Path(tmpdir) / "redis-cluster"
        self.nodes: list[_Node] = []
        try:
            for _ in range(primaries * (1 + replicas)):
                port = free_port()
                folder = self.dir / f"redis-{port}"
                self.nodes.append(_Node(folder, port, _data_args(port, folder, [
                    "--cluster-enabled", "yes",
                    # The bus would be port + 10000 by default, which can
                    # fall among the kernel's ephemeral ports: a free one.
                    "--cluster-port", str(free_port()),
                    "--cluster-config-file", str(folder / "nodes.conf"),
                    "--cluster-node-timeout", str(node_timeout_ms),
                    # A replica may take over however long its link was down.
                    "--cluster-replica-validity-factor", "0",
                ]), f"redis-{port}").start())
            out = subprocess.run(
                [_exe("redis-cli"), "--cluster", "create",
                 *[f"127.0.0.1:{n.port}" for n in self.nodes],
                 "--cluster-replicas", str(replicas), "--cluster-yes"],
                capture_output=True, text=True, timeout=60)
            if out.returncode != 0:
                raise EngineError(f"redis-cli --cluster create: {out.stdout}\n{out.stderr}")
            _wait("cluster formed", lambda: self._formed(primaries, replicas),
                  READY_TIMEOUT, self.nodes)
        except BaseException:
            self.stop()
            raise

    def _formed(self, primaries: int, replicas: int) -> bool:
        for n in self.nodes:
            if _info(n.port, "cluster").get("cluster_enabled") != "1":
                return False
            state = dict(line.split(":", 1) for line in n.cli("CLUSTER", "INFO").splitlines()
                         if ":" in line)
            if state.get("cluster_state") != "ok":
                return False
        masters = [m for m in self.topology() if m["role"] == "master"]
        if len(masters) != primaries:
            return False
        for n in self.nodes:
            info = _info(n.port, "replication")
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
        return sum(1 for m in self.topology() if m["role"] == "slave") == primaries * replicas

    # ---- what the service is told ---------------------------------------
    def service_env(self) -> dict[str, str]:
        """REDIS_TYPE=CLUSTER; REDIS_URL lists nodes to learn the cluster
        from (all six here), comma-separated. The service's own note asks
        for a pipeline window in cluster mode (REDIS_PIPELINE_WINDOW)."""
        return {"REDIS_TYPE": "CLUSTER",
                "REDIS_URL": ",".join(f"127.0.0.1:{n.port}" for n in self.nodes),
                "REDIS_PIPELINE_WINDOW": "150us"}

    # ---- state -----------------------------------------------------------
    def _live(self) -> _Node:
        return next(n for n in self.nodes if n.alive())

    def topology(self, via: _Node | None = None) -> list[dict]:
        """CLUSTER NODES as seen by a live node: port, role, flags, slots."""
        out = []
        for line in resp((via or self._live()).port, "CLUSTER", "NODES").splitlines():
            parts = line.split()
            if len(parts) < 8:
                continue
            addr = parts[1].split("@")[0]
            flags = parts[2].split(",")
            slots = []
            for s in parts[8:]:
                if s.startswith("["):
                    continue  # a slot migrating
                lo, _, hi = s.partition("-")
                slots.append((int(lo), int(hi or lo)))
            out.append({"id": parts[0], "port": int(addr.rsplit(":", 1)[1]),
                        "role": "master" if "master" in flags else "slave",
                        "failed": "fail" in flags or "fail?" in flags,
                        "master_id": parts[3], "slots": slots})
        return out

    def node(self, port: int) -> _Node:
        return next(n for n in self.nodes if n.port == port)

    def slot_of(self, key: str) -> int:
        return int(resp(self._live().port, "CLUSTER", "KEYSLOT", key))

    def primary_port_of(self, key: str, via: _Node | None = None) -> int:
        slot = self.slot_of(key)
        for m in self.topology(via):
            if m["role"] == "master" and not m["failed"] and any(
                    lo <= slot <= hi for lo, hi in m["slots"]):
                return m["port"]
        raise EngineError(f"no live primary holds slot {slot}")

    def primaries_for(self, key: str) -> list[_Node]:
        return [self.node(self.primary_port_of(key))]

    def find_keys(self, pattern: str) -> list[str]:
        """SCAN on every live primary (each holds its own slots)."""
        keys: set[str] = set()
        for m in self.topology():
            if m["role"] == "master" and not m["failed"] and self.node(m["port"]).alive():
                keys.update(scan_now(m["port"], pattern))
        return sorted(keys)

    def get(self, key: str, port: int | None = None) -> int | None:
        out = cli(port or self.primary_port_of(key), "GET", key)
        return int(out) if out else None

    def kill9_primary_of(self, key: str) -> _Node:
        victim = self.node(self.primary_port_of(key))
        victim.kill9()
        return victim

    def wait_failover(self, old_port: int, timeout: float = FAILOVER_TIMEOUT,
                      key: str | None = None) -> int:
        """Until every live node says the cluster is ok and a live primary
        other than `old_port` holds the slots it held (`key`'s, if given).
        Returns the new primary's port."""
        found: list[int] = []

        def done() -> bool:
            live = [n for n in self.nodes if n.alive()]
            for n in live:
                state = dict(line.split(":", 1) for line in n.cli("CLUSTER", "INFO").splitlines()
                             if ":" in line)
                if state.get("cluster_state") != "ok":
                    return False
            if key is not None:
                port = self.primary_port_of(key, live[0])
                if port == old_port or not self.node(port).alive():
                    return False
                found[:] = [port]
            return True

        _wait("cluster failover", done, timeout, self.nodes)
        return found[0] if found else -1

    def logs(self) -> str:
        return "\n".join(f"===== {n.name} ({n.log_path}) =====\n{n.log(80)}" for n in self.nodes)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
