"""A Redis failover under attack, end to end (issue 38), shared by
tests/e2e/test_failover.py and bench/failover.py.

The installation: a Redis topology (redis_topologies.SentinelSet or
RedisCluster), two envoyproxy/ratelimit replicas over it, three Envoys with
the module, each Envoy's cluster `rls` holding **both** replicas as
endpoints (round robin), one real upstream. The filter's configuration
(`config()`): a sign-in route with an installation bound per account
(5 a minute, `on_error: deny`), and an API route with a fleet bound per
address (100 a minute, synced every 200 ms).

The trial (`run_trial`): one attacker tries one account every 100 ms,
round-robin over the Envoys, each attempt from its own 127.x.y.z address;
another sends requests from one address to the fleet route at the same
pace. `kill_after` seconds after the account's count starts (its first
attempt, or the clock minute a longer attack runs into), the primary that
holds the account's counter gets SIGKILL. Every answer is recorded
(when sent, when answered, which Envoy, status, RateLimit-Remaining).
`analyse` turns the record into the figures docs/rate-limit-service.md
("Failover") states. Every loop is bounded in count and time; every
process is stopped by the PID it was started with.
"""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engines import RateLimitService, rls_yaml
from harness import addr, request
from launcher import static_cluster
from redis_topologies import get_now

INSTANCE = "failover"
DOMAIN = "failover"
ACCOUNT_LIMIT = 5
FLEET_LIMIT = 100
SYNC_MS = 200
NODES = 3
INTERVAL_S = 0.1  # each attacker's pace: one request every 100 ms
LOGIN = "/up/login"
API = "/up/api"
# What the service logs when Redis fails it, by kind (counted in its log).
SERVICE_ERRORS = {
    "READONLY": re.compile(r"READONLY"),
    "CLUSTERDOWN": re.compile(r"CLUSTERDOWN"),
    "EOF": re.compile(r"\bEOF\b"),
    "connection refused": re.compile(r"connection refused"),
}


def config(*, on_error: str = "deny", timeout_ms: int = 200) -> dict:
    """The filter's configuration every Envoy of the trial runs."""
    return {
        "instance": INSTANCE,
        "rate_limit_service": {"cluster": "rls", "domain": DOMAIN, "timeout_ms": timeout_ms,
                               "on_error": on_error, "sync_ms": SYNC_MS,
                               "fleet_nodes": NODES},
        "routes": [
            {"name": "login", "match": {"path_prefix": LOGIN, "methods": ["POST"]},
             "account": {"json": "username"},
             "bounds": [{"name": "attempts", "per": "account", "scope": "installation",
                         "limit": ACCOUNT_LIMIT, "window": "PT1M"}]},
            {"name": "api", "match": {"path_prefix": API},
             "bounds": [{"name": "per_address", "per": "address", "limit": FLEET_LIMIT,
                         "window": "PT1M", "scope": "fleet"}]},
        ],
    }


def rls_cluster(ports: list[int]) -> dict:
    """Cluster `rls`: every service replica an endpoint (round robin), HTTP/2."""
    cluster = static_cluster("rls", ports[0], http2=True)
    cluster["load_assignment"]["endpoints"][0]["lb_endpoints"] = [
        {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": p}}}}
        for p in ports]
    return cluster


def stated_fleet_excess(rate_per_node: float, nodes: int = NODES) -> float:
    """docs/fleet.md, "What the number means": over the limit by up to about
    2 x (nodes - 1) x each node's admissions a second x sync_ms under steady
    load, plus about 1 a node and a join share (a tenth of limit / nodes,
    at least 1) for each node new to the key under its attack shapes (an
    outage among them). A fresh key inside one clock minute has no
    previous window, so the sliding estimate adds nothing here."""
    join = max(1, -(-FLEET_LIMIT // nodes // 10))
    return 2 * (nodes - 1) * rate_per_node * SYNC_MS / 1000 + nodes + nodes * join


# --------------------------------------------------------------------------
# The installation
# --------------------------------------------------------------------------
class Installation:
    """Two service replicas over `topology` and three Envoys (made by
    `envoy_factory(cfg, **kw)`, the conftest fixture or bench's own)."""

    def __init__(self, topology, envoy_factory, upstream_port: int, tmp: Path, *,
                 cfg: dict | None = None, service_env: dict | None = None,
                 services: int = 2, envoys: int = NODES) -> None:
        self.topology = topology
        self.cfg = cfg or config()
        yaml = rls_yaml(self.cfg, tmp)
        self.services: list[RateLimitService] = []
        for i in range(services):
            self.services.append(RateLimitService(topology, yaml, tmp / f"rls{i}",
                                                  extra_env=service_env))
        self.service_pids = [s.proc.pid for s in self.services]
        cluster = rls_cluster([s.grpc_port for s in self.services])
        self.envoys = [envoy_factory(self.cfg, clusters=[cluster], upstream_port=upstream_port)
                       for _ in range(envoys)]
        for e in self.envoys:
            warmed(e)

    def stop_services(self) -> None:
        # SIGKILL: the service keeps nothing (the counts are in Redis), and
        # its SIGTERM takes seconds.
        for s in self.services:
            s.kill9()

    def services_unchanged(self) -> bool:
        """Both replicas still run, as the same processes."""
        return [s.proc.pid if s.proc is not None and s.proc.poll() is None else None
                for s in self.services] == self.service_pids

    def service_errors(self) -> dict[str, int]:
        """Lines of the replicas' logs naming each kind of Redis error."""
        counts = {k: 0 for k in SERVICE_ERRORS}
        for s in self.services:
            for line in s.log_path.read_text(errors="replace").splitlines():
                for kind, pattern in SERVICE_ERRORS.items():
                    if pattern.search(line):
                        counts[kind] += 1
        return counts

    def stats(self) -> dict[str, int]:
        """The filter's stats, summed over the Envoys."""
        names = {
            "login_allowed": ("login", "attempts", "allowed"),
            "login_refused": ("login", "attempts", "refused"),
            "login_rls_calls": ("login", "attempts", "rls_calls"),
            "login_rls_errors": ("login", "attempts", "rls_errors"),
            "api_allowed": ("api", "per_address", "allowed"),
            "api_refused": ("api", "per_address", "refused"),
            "fleet_sync_calls": (None, None, "fleet_sync_calls"),
            "fleet_sync_errors": (None, None, "fleet_sync_errors"),
            "fleet_alone": (None, None, "fleet_alone"),
        }
        return {k: sum(e.rb(INSTANCE, r, b, w) for e in self.envoys)
                for k, (r, b, w) in names.items()}


def warmed(e, timeout: float = 15.0) -> None:
    """Every ticking root context of `e` has had its warm-up call answered
    (as test_installation.warmed)."""
    contexts = e.concurrency + 1
    got = e.wait_value(lambda: e.stat("cluster.rls.upstream_rq_200"),
                       lambda v: v >= contexts, timeout=timeout)
    assert got >= contexts, f"warm-up calls answered: {got} of {contexts}"


# --------------------------------------------------------------------------
# The trial
# --------------------------------------------------------------------------
@dataclass
class Attempt:
    what: str  # "login" or "api"
    i: int
    envoy: int
    sent: float  # wall clock
    done: float = 0.0
    status: int = -1
    remaining: int | None = None  # RateLimit-Remaining of an admitted answer


@dataclass
class Trial:
    topology: str
    account: str
    t0: float = 0.0  # the first attempt
    window_start: float = 0.0  # the clock minute the kill falls in
    kill_at: float = 0.0
    key: str = ""  # the account's counter, the window of the kill
    victim_port: int = 0
    victim_pid: int = 0
    count_at_kill: int | None = None  # the key on the dying primary, just before the kill
    replica_counts_at_kill: list[int | None] = field(default_factory=list)
    failover_done_at: float | None = None  # the topology says a new primary serves
    new_primary_port: int | None = None
    count_after: int | None = None  # the key on the new primary, after the trial
    attempts: list[Attempt] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    services_unchanged: bool = False
    service_errors: dict = field(default_factory=dict)
    probe: list[int] = field(default_factory=list)  # a fresh account after the trial


def _attempt(inst: Installation, a: Attempt, account: str) -> Attempt:
    port = inst.envoys[a.envoy].port
    try:
        if a.what == "login":
            body = json.dumps({"username": account, "password": "x"}).encode()
            status, h, _ = request(port, LOGIN, src=addr(a.i, base=40), method="POST", body=body,
                                   headers={"content-type": "application/json"}, timeout=5.0)
        else:
            status, h, _ = request(port, API, src="127.0.39.1", timeout=5.0)
        a.status = status
        if status == 200 and isinstance(h.get("ratelimit-remaining"), str):
            a.remaining = int(h["ratelimit-remaining"])
    except OSError:
        a.status = -1
    a.done = time.time()
    return a


def _account_key(inst: Installation, window_start: float) -> str | None:
    """The account bound's counter for the window starting at
    `window_start`, found with SCAN. A sliding bound (the default) counts
    each window under its own descriptor, `…_window_<index>_<start of a
    longer unit>`, beside the previous window's and both windows' refunds
    (read with every attempt, so they exist too): this window's, as it is.
    A fixed bound's key ends in the window's start: the last part replaced."""
    keys = [k for k in inst.topology.find_keys(f"{DOMAIN}_*") if "login.attempts" in k]
    index = int(window_start // 60)
    # This window's; else the last one's, which every call of this window
    # reads (an account locked by the attack before the minute makes no
    # call until its estimate admits again: no key for this window yet).
    for i in (index, index - 1):
        for key in keys:
            if f"_window_{i}_" in key:
                return key
    for key in keys:
        if "_window_" not in key and "_refunded_" not in key:
            head, _, _ = key.rpartition("_")
            return f"{head}_{int(window_start)}"
    return None


def run_trial(inst: Installation, topology_name: str, *, lead_s: float = 0.0,
              kill_after: float = 0.25, after_s: float = 15.0, kill: bool = True) -> Trial:
    """The attack and the kill. With lead_s = 0 the account is fresh at a
    moment with room left in the clock minute; with lead_s > 0 the attack
    starts lead_s before a clock minute begins (so it spans two windows:
    the fixed and sliding checks can differ). Either way the kill comes
    `kill_after` seconds into the window the attack then counts in, while
    the account's count is below its limit, and the attack goes on
    `after_s` seconds past the window's start."""
    topo = inst.topology
    trial = Trial(topology=topology_name, account=f"victim-{uuid.uuid4().hex[:10]}")
    now = time.time()
    if lead_s > 0:
        window = float(int(now - now % 60)) + 60
        if window - now < lead_s + 1:
            window += 60
        time.sleep(max(0.0, window - lead_s - time.time()))
    else:
        # Room for the whole trial (and its probe) in this minute.
        left = 60 - now % 60
        if left < after_s + 8:
            time.sleep(left + 0.3)
        now = time.time()
        window = float(int(now - now % 60))
    trial.window_start = window
    t0 = time.time() if lead_s == 0 else window - lead_s
    trial.t0 = t0
    # The moment the account's count starts from 0 in the window of the kill.
    base = window if lead_s > 0 else t0
    n = int((base + after_s - t0) / INTERVAL_S)
    kill_at = base + kill_after

    def do_kill() -> None:
        deadline = kill_at + 2.0
        key = None
        while key is None and time.time() < deadline:
            key = _account_key(inst, window)
            if key is None:
                time.sleep(0.02)
        if key is None:
            raise AssertionError("no counter for the account in Redis before the kill")
        # Resolved ahead: at the kill only two socket reads and a signal.
        victim = topo.primaries_for(key)[0]
        replicas = [n for n in topo.nodes if n is not victim and _is_replica_of(n, victim)]
        trial.key, trial.victim_port, trial.victim_pid = key, victim.port, victim.pid
        # Between two attempts (they go every INTERVAL_S from t0).
        at = kill_at
        if (at - t0) % INTERVAL_S < 0.03:
            at += 0.03
        time.sleep(max(0.0, at - time.time()))
        # The counter on the primary and on every replica, just before the kill.
        trial.count_at_kill = get_now(victim.port, key)
        trial.replica_counts_at_kill = [get_now(n.port, key) for n in replicas]
        if kill:
            victim.kill9()
            trial.kill_at = time.time()  # the process is gone (reaped)
            kw = {"key": key} if hasattr(topo, "slot_of") else {}
            trial.new_primary_port = topo.wait_failover(victim.port, **kw)
            trial.failover_done_at = time.time()

    killer = threading.Thread(target=lambda: _guard(do_kill, trial), daemon=True)
    fleet_start = base  # a fresh fleet key inside one clock minute
    with ThreadPoolExecutor(max_workers=48) as pool:
        futures = []
        killer_started = False
        for i in range(n):
            at = t0 + i * INTERVAL_S
            if not killer_started and at >= kill_at - 0.6:
                killer.start()
                killer_started = True
            time.sleep(max(0.0, at - time.time()))
            a = Attempt("login", i, i % len(inst.envoys), time.time())
            futures.append(pool.submit(_attempt, inst, a, trial.account))
            if at >= fleet_start:
                b = Attempt("api", i, (i + 1) % len(inst.envoys), time.time())
                futures.append(pool.submit(_attempt, inst, b, trial.account))
        trial.attempts = [f.result(timeout=30) for f in futures]
    if not killer_started:
        killer.start()
    killer.join(timeout=60)
    if getattr(trial, "_error", None):
        raise trial._error  # type: ignore[attr-defined]
    if trial.key:
        trial.count_after = get_now(trial.new_primary_port or trial.victim_port, trial.key) \
            if trial.new_primary_port else topo.get(trial.key)
    trial.stats = inst.stats()
    # The installation answers exactly again, nothing restarted: a fresh
    # account through every Envoy in turn.
    fresh = f"probe-{uuid.uuid4().hex[:10]}"
    for i in range(ACCOUNT_LIMIT + 2):
        a = _attempt(inst, Attempt("login", 10_000 + i, i % len(inst.envoys), time.time()), fresh)
        trial.probe.append(a.status)
    trial.services_unchanged = inst.services_unchanged()
    trial.service_errors = inst.service_errors()
    return trial


def _guard(fn, trial: Trial) -> None:
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 - re-raised by run_trial
        trial._error = e  # type: ignore[attr-defined]


def _is_replica_of(node, primary) -> bool:
    from redis_topologies import _info

    try:
        info = _info(node.port, "replication")
    except Exception:  # noqa: BLE001
        return False
    return info.get("role") == "slave" and info.get("master_port") == str(primary.port)


# --------------------------------------------------------------------------
# What the record says
# --------------------------------------------------------------------------
def max_in_sliding(times: list[float], span: float = 60.0) -> int:
    """The most admissions in any `span` seconds (an exact sliding log)."""
    times = sorted(times)
    best = lo = 0
    for hi, t in enumerate(times):
        while t - times[lo] >= span:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def max_in_fixed(times: list[float], span: float = 60.0) -> int:
    """The most admissions in one clock window (aligned to the epoch)."""
    per: dict[int, int] = {}
    for t in times:
        per[int(t // span)] = per.get(int(t // span), 0) + 1
    return max(per.values(), default=0)


def analyse(t: Trial) -> dict:
    """The figures of one trial (times in seconds from the kill)."""
    login = sorted((a for a in t.attempts if a.what == "login"), key=lambda a: a.sent)
    api = [a for a in t.attempts if a.what == "api"]
    k = t.kill_at or t.window_start
    after = [a for a in login if a.sent >= k]
    refused_503 = [a for a in after if a.status == 503]
    answered = [a for a in after if a.status in (200, 429)]
    admitted = [a for a in login if a.status == 200]
    # The count the service reported (limit - remaining) at each admission
    # in the kill's window, against the admissions counted there so far.
    in_window = [a for a in admitted if t.window_start <= a.sent < t.window_start + 60]
    offsets = []
    for n, a in enumerate(in_window, start=1):
        if a.remaining is not None:
            offsets.append((a.sent - k, ACCOUNT_LIMIT - a.remaining - n))
    after_offsets = [o for s, o in offsets if s >= 0]
    exact_at = None
    for s, o in offsets:
        if s >= 0 and o == 0:
            exact_at = s
            break
    before_kill = sum(1 for a in in_window if a.sent < k)
    api_admitted = [a.sent for a in api if a.status == 200]
    api_in_window = [x for x in api_admitted if t.window_start <= x < t.window_start + 60]
    fleet_rate_per_node = 1 / INTERVAL_S / NODES
    return {
        "topology": t.topology,
        "attempts": len(login),
        "attempts_after_kill": len(after),
        "statuses": _counts(a.status for a in login),
        "refused_503": len(refused_503),
        "refused_503_span_s": round(refused_503[-1].sent - k, 2) if refused_503 else 0.0,
        # the first attempt answered (200 or 429) after the last 503
        "answered_again_s": round(min((a.sent for a in answered if a.sent > refused_503[-1].sent),
                                      default=float("nan")) - k, 2) if refused_503 else 0.0,
        "failover_done_s": round(t.failover_done_at - k, 2) if t.failover_done_at else None,
        "admitted": len(admitted),
        "admitted_before_kill_in_window": before_kill,
        "wrongly_admitted_sliding": max(0, max_in_sliding([a.sent for a in admitted])
                                        - ACCOUNT_LIMIT),
        "wrongly_admitted_fixed": max(0, max_in_fixed([a.sent for a in admitted])
                                      - ACCOUNT_LIMIT),
        # first admission after the kill whose reported count was exactly
        # the admissions so far (None: no admission after the kill)
        "exact_again_s": round(exact_at, 2) if exact_at is not None else None,
        "count_offsets_after_kill": after_offsets,
        "count_at_kill": t.count_at_kill,
        "replica_counts_at_kill": t.replica_counts_at_kill,
        "count_after": t.count_after,
        # what the dying primary had and its replicas did not
        "counts_lost": (t.count_at_kill - max((c or 0) for c in t.replica_counts_at_kill))
        if t.count_at_kill is not None and t.replica_counts_at_kill else None,
        "service_calls_answered": t.stats.get("login_rls_calls", 0)
        - t.stats.get("login_rls_errors", 0),
        "stats": t.stats,
        "services_unchanged": t.services_unchanged,
        "restarts_needed": 0 if t.services_unchanged and t.probe[:ACCOUNT_LIMIT]
        == [200] * ACCOUNT_LIMIT else None,
        "service_errors": t.service_errors,
        "probe": t.probe,
        "fleet_admitted_in_window": len(api_in_window),
        "fleet_admitted_sliding_max": max_in_sliding(api_admitted),
        "fleet_statuses": _counts(a.status for a in api),
        "fleet_limit": FLEET_LIMIT,
        "fleet_stated_excess": round(stated_fleet_excess(fleet_rate_per_node), 1),
        "victim": {"port": t.victim_port, "pid": t.victim_pid, "key": t.key,
                   "new_primary_port": t.new_primary_port},
    }


def _counts(statuses) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in statuses:
        out[str(s)] = out.get(str(s), 0) + 1
    return dict(sorted(out.items()))


def timeline(t: Trial) -> list[dict]:
    """Every attempt, seconds from the kill."""
    k = t.kill_at or t.window_start
    return [{**asdict(a), "sent": round(a.sent - k, 3), "done": round(a.done - k, 3)}
            for a in sorted(t.attempts, key=lambda a: a.sent)]
